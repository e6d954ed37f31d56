#!/usr/bin/env python3
"""Programs per second per release and per runner, crash oracle and differential, in one run.

Each cell is one ``loomfuzz run`` over the same wide programs (seed 1), its summary's
programs/s; the cells are measured one after another in one run, in rounds that
alternate their order, on the same machine load.  A release whose persistent driver is
not built says so (the runner falls back, and the cell is marked); a persistent cell names
its driver (``loomfuzz-mlir-driver-19`` for 19, ``loomfuzz-head-driver`` for iree-opt's head,
``loomfuzz-mlir-opt-head-driver`` for the head with every pass: its persistent driver against a
process per program through the same bindings).  MLIR 15/16 cannot read the oracle
rendering: their crash cells are left out (the probe refuses them).

    python benchmarks/bench_targets.py [-n 300] [--rounds 2] [--releases mlir-opt-head] [--oracles crash]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RATE = re.compile(r"([\d,.]+) programs/s")
DRIVER = re.compile(r"runner persistent, driver ([\w.-]+)")
RELEASES = ("mlir-opt-16", "mlir-opt-19", "mlir-opt-22", "iree-opt", "mlir-opt-head")
CRASH_PIPELINE = "builtin.module(canonicalize,cse)"


def cell(binary: str, oracle: str, runner: str, count: int) -> tuple[float | None, str]:
    """(programs/s, note) of one loomfuzz run."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, "-m", "harness.cli", "run", "--target", binary, "--oracle", oracle,
             "--runner", runner, "--pipeline", CRASH_PIPELINE, "--profile", "wide", "-n", str(count),
             "--seed", "1", "--artifacts", folder, "--no-progress"],
            capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if done.returncode == 2:
        return None, done.stderr.strip().splitlines()[-1][:90]
    match = RATE.search(done.stdout)
    note = "fell back" if "--runner persistent:" in done.stderr else ""
    driver = DRIVER.search(done.stdout)
    if driver:
        note = (note + " " if note else "") + driver.group(1)
    return (float(match.group(1).replace(",", "")) if match else None), note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("-n", type=int, default=300, help="programs per cell (default 300)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, order alternating (default 2)")
    parser.add_argument("--releases", default=",".join(RELEASES),
                        help=f"the builds, comma-separated (default {','.join(RELEASES)})")
    parser.add_argument("--oracles", default="crash,differential", help="crash, differential or both (default)")
    args = parser.parse_args()
    releases = [r for r in args.releases.split(",")
                if shutil.which(r) or shutil.which(r, path=str(Path(sys.executable).parent))]
    oracles = args.oracles.split(",")
    cells = [(r, "crash", k) for r in releases for k in ("process", "batch", "persistent") if "crash" in oracles]
    cells += [(r, "differential", k) for r in releases for k in ("process", "persistent")
              if "differential" in oracles]
    rates: dict[tuple, list[float]] = {c: [] for c in cells}
    notes: dict[tuple, str] = {}
    for round_ in range(args.rounds):
        for c in (cells if round_ % 2 == 0 else list(reversed(cells))):
            rate, note = cell(c[0], c[1], c[2], args.n)
            if rate is not None:
                rates[c].append(rate)
            notes[c] = note
            print(f"  round {round_ + 1}: {c[0]:<12} {c[1]:<12} {c[2]:<10} "
                  f"{rate if rate is not None else '-':>8} {note}", file=sys.stderr, flush=True)
    print(f"{'release':<12} {'oracle':<12} {'runner':<10} {'programs/s':>10}  vs process  note")
    for c in cells:
        values = rates[c]
        mean = sum(values) / len(values) if values else None
        base = rates.get((c[0], c[1], "process")) or []
        ratio = (mean / (sum(base) / len(base))) if mean and base else None
        print(f"{c[0]:<12} {c[1]:<12} {c[2]:<10} {mean if mean is None else round(mean, 1)!s:>10}  "
              f"{'' if ratio is None else f'{ratio:.1f}x':>10}  {notes.get(c, '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
