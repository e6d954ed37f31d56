#!/usr/bin/env python3
"""Persistent driver against a process per input: the same `loomfuzz fuzz --target mlir-opt` campaign.

Usage: python benchmarks/bench_persistent.py [--quick] [--time S] [--seed N]

In one run, on copies of one seeded corpus, with the same libFuzzer seed:

1. process: ``loomfuzz fuzz --target mlir-opt --time S`` (one ``mlir-opt-22``
   per program);
2. persistent: the same with ``--runner persistent`` (one ``loomfuzz-mlir-driver``,
   native/, for all of them; findings confirmed in a fresh ``mlir-opt-22``);
3. prints a table: executions, executions/s (the fuzz target's own count over
   the time between its first and last execution), seconds inside the target
   and outside it, driver restarts, corpus growth; then persistent/process
   (goal: >= 20x).

The driver is the one .ci/setup builds (native/build/loomfuzz-mlir-driver) or
$LOOMFUZZ_MLIR_DRIVER.  Default 60 s per side; --quick: 15 s.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# this checkout\'s code, even where another checkout is the one installed (comparisons)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.grammar import default_grammar  # noqa: E402
from harness.fuzzing.corpus import seed_corpus  # noqa: E402
from harness.run.driver_protocol import DriverError  # noqa: E402
from harness.run.persistent_target import persistent_target  # noqa: E402
from harness.targets.target import resolve_target, TargetNotFound

GOAL = 20.0
ROOT = Path(__file__).resolve().parent.parent

_EXECUTIONS = re.compile(r"executions:\s+(\d+) \(([\d.]+)/s over ([\d.]+) s\)")
_TIME = re.compile(r"time:\s+([\d.]+) s in the target, ([\d.]+) s outside")
_RESTARTS = re.compile(r"persistent:\s+(\d+) driver restarts")
_CORPUS = re.compile(r"corpus:\s+(\d+) -> (\d+) files")


def campaign(work: Path, seeds: Path, seconds: int, seed: int, persistent: bool) -> dict:
    name = "persistent" if persistent else "process"
    corpus = work / f"corpus-{name}"
    shutil.copytree(seeds, corpus)
    command = [sys.executable, "-m", "harness.cli", "fuzz", "--target", "mlir-opt",
               "--time", str(seconds), "--seed", str(seed), "--corpus", str(corpus),
               "--artifacts", str(work / f"artifacts-{name}")]
    command.extend(["--runner", "persistent" if persistent else "process"])
    print(f"bench_persistent: {name}: {seconds} s campaign ...", file=sys.stderr, flush=True)
    proc = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = proc.stdout + proc.stderr
    executions = _EXECUTIONS.search(out)
    if proc.returncode not in (0, 1) or not executions:
        raise SystemExit(f"bench_persistent: the {name} campaign failed (status {proc.returncode}):\n"
                         + out[-3000:])
    time_split = _TIME.search(out)
    restarts = _RESTARTS.search(out)
    grown = _CORPUS.search(out)
    return {
        "name": name,
        "executions": int(executions.group(1)),
        "rate": float(executions.group(2)),
        "seconds": float(executions.group(3)),
        "in_target": float(time_split.group(1)) if time_split else float("nan"),
        "outside": float(time_split.group(2)) if time_split else float("nan"),
        "restarts": int(restarts.group(1)) if restarts else 0,
        "corpus": f"{grown.group(1)} -> {grown.group(2)}" if grown else "?",
        "findings": proc.returncode == 1,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="15 s per side (default 60)")
    parser.add_argument("--time", type=int, help="seconds per side")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's seed (default 1)")
    args = parser.parse_args()
    seconds = args.time or (15 if args.quick else 60)
    try:
        persistent_target(resolve_target("mlir-opt"))
    except (TargetNotFound, DriverError) as error:
        print(f"bench_persistent: error: {error}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="loomfuzz-bench-persistent-") as tmp:
        work = Path(tmp)
        seeds = work / "seeds"
        seed_corpus(seeds, default_grammar())
        rows = [campaign(work, seeds, seconds, args.seed, persistent) for persistent in (False, True)]

    header = f"{'mode':<11} {'executions':>10} {'exec/s':>8} {'in target':>10} {'outside':>8} " \
             f"{'restarts':>8}  corpus"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['name']:<11} {row['executions']:>10} {row['rate']:>8.1f} "
              f"{row['in_target']:>9.1f}s {row['outside']:>7.1f}s {row['restarts']:>8}  {row['corpus']}"
              + ("  (findings)" if row["findings"] else ""))
    ratio = rows[1]["rate"] / rows[0]["rate"] if rows[0]["rate"] else float("inf")
    verdict = "meets" if ratio >= GOAL else "misses"
    print(f"\npersistent/process: {ratio:.1f}x ({verdict} the goal of {GOAL:g}x), "
          f"{seconds} s per side, seed {args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
