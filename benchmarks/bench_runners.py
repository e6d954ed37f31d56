#!/usr/bin/env python3
"""Runners side by side (issue 24): programs/s of process, batch and persistent.

Usage: python benchmarks/bench_runners.py [--quick] [--slice N] [--full] [--crash-programs N]

1. Crash-heavy: ``--crash-programs`` programs (default 2,000; --quick 400),
   45% of which abort, through the C double tests/fixtures/persistent_fake.c
   started up like an LLVM tool (``--startup-ms=35``: mlir-opt-22 spends
   about 35 ms of its 40 ms per run starting up).  No upstream pipeline that
   aborts on about half of the programs was found in mlir-opt-22 (16 tried
   on the wide profile, none crashed), hence the double.  Runners, one
   after the other on the same programs: persistent (a fork-server driver),
   batch with the driver as fallback (what ``--runner batch`` does where the
   driver is built), batch with bisection only (the driver missing), and a
   process per program.  Every runner must give the same outcome kinds.
2. The default space: ``loomfuzz enumerate --run --target mlir-opt --jobs 2``
   on the same slice (``--slice``, default 20,000 indices) with
   ``--runner persistent`` and ``--runner batch`` (today's batches), and the
   extrapolation of each to the whole space (854,700 programs).  ``--full``
   then runs the whole space with the persistent runner (about 10 minutes
   on 2 cores).

Every figure is a ratio of runs made in this one invocation; the load
average is printed with them (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.run.persistent_target import PersistentTarget  # noqa: E402
from harness.targets.target import Target
from harness.run.runners import BatchRunner, PersistentPool, ProcessRunner, Program  # noqa: E402

SPACE = 854_700
_RATE = re.compile(r"([\d,.]+) programs/s over ([\d.]+) s")
_ACCEPTED = re.compile(r"^\s*accepted\s+([\d,]+)", re.M)


def _build_double(folder: Path) -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    out = folder / "persistent-fake"
    subprocess.run([cc, "-O1", "-o", str(out), str(ROOT / "tests" / "fixtures" / "persistent_fake.c")],
                   check=True)
    return str(out)


def crash_heavy(n: int, folder: Path) -> None:
    fake = _build_double(folder)
    options = ("--emit-output", "--startup-ms=35")
    process = Target("persistent-fake", (fake, *options), timeout=10.0)
    driver = PersistentTarget(process, (fake, "--persistent", "--fork-server", *options),
                              fork_server=True)
    rng = random.Random(24)
    programs = [Program(i, f"// id {i}\nprogram {'PLANT_ABORT' if rng.random() < 0.45 else ''}\n")
                for i in range(n)]
    runners = {
        "persistent": lambda: PersistentPool(process, driver),
        "batch (driver fallback)": lambda: BatchRunner(process, fallback=driver),
        "batch (bisection)": lambda: BatchRunner(process),
        "process": lambda: ProcessRunner(process),
    }
    rates, kinds = {}, {}
    print(f"crash-heavy: {n} programs, {sum('ABORT' in p.text for p in programs)} abort; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for name, make in runners.items():
        started = time.monotonic()
        with make() as runner:
            results = runner.run_all(programs)
            stats = runner.stats
        seconds = time.monotonic() - started
        rates[name] = n / seconds
        kinds[name] = [r.outcome.kind.value for r in results]
        print(f"  {name:<24} {rates[name]:8.1f} programs/s  ({seconds:.1f} s; {stats.executions} "
              f"executions, {stats.processes} processes, {stats.restart_count} restarts)", flush=True)
    same = all(k == kinds["process"] for k in kinds.values())
    print(f"  outcome kinds identical across runners: {same}")
    for name in ("persistent", "batch (driver fallback)", "batch (bisection)"):
        print(f"  {name} / process: {rates[name] / rates['process']:.1f}x")


def _enumerate(runner: str, count: int, folder: Path) -> tuple[float, int, str]:
    artifacts = folder / f"enumerate-{runner}-{count}"
    command = [sys.executable, "-m", "harness.cli", "enumerate", "--run", "--target", "mlir-opt",
               "--jobs", "2", "--runner", runner, "--artifacts", str(artifacts), "--no-progress"]
    if count < SPACE:
        command += ["--count", str(count)]
    proc = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=folder)
    rate = _RATE.search(proc.stdout)
    accepted = _ACCEPTED.search(proc.stdout)
    if not rate or not accepted:
        raise SystemExit(f"bench_runners: enumerate --runner {runner} failed:\n{proc.stdout}{proc.stderr}")
    return (float(rate.group(1).replace(",", "")), int(accepted.group(1).replace(",", "")),
            proc.stdout)


def default_space(count: int, full: bool, folder: Path) -> None:
    print(f"default space: enumerate --run --target mlir-opt --jobs 2, indices 0-{count - 1}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    rates = {}
    for runner in ("persistent", "batch"):
        rate, accepted, _ = _enumerate(runner, count, folder)
        rates[runner] = rate
        print(f"  {runner:<11} {rate:8.1f} programs/s, {accepted:,} of {count:,} accepted; "
              f"the whole space ({SPACE:,}) at this rate: {SPACE / rate / 60:.1f} min", flush=True)
    print(f"  persistent / batch: {rates['persistent'] / rates['batch']:.1f}x")
    if full:
        started = time.monotonic()
        rate, accepted, summary = _enumerate("persistent", SPACE, folder)
        print(f"  full sweep, persistent: {(time.monotonic() - started) / 60:.1f} min, {rate:.1f} "
              f"programs/s, {accepted:,} of {SPACE:,} accepted", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="400 crash-heavy programs")
    parser.add_argument("--crash-programs", type=int, help="crash-heavy programs (default 2000)")
    parser.add_argument("--slice", type=int, default=20_000, help="enumerate indices (default 20000)")
    parser.add_argument("--full", action="store_true", help="then the whole default space, persistent")
    args = parser.parse_args()
    n = args.crash_programs or (400 if args.quick else 2000)
    with tempfile.TemporaryDirectory(prefix="bench-runners-") as tmp:
        folder = Path(tmp)
        crash_heavy(n, folder)
        default_space(args.slice, args.full, folder)


if __name__ == "__main__":
    main()
