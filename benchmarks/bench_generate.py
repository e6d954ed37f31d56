#!/usr/bin/env python3
"""Programs per second: the fast engine next to fuzzingbook's, in one run.

    python benchmarks/bench_generate.py [--quick]

Both engines expand the same grammar and feed the same renderer; each program
is rendered to an in-memory string.  Then ``loomfuzz generate -n 60000 -o -``
is timed as a whole process (start-up included), its output read and dropped.
Goals: fast >= 100x fuzzingbook; the whole process >= 60,000 programs/s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from harness.core.engine import generate
from harness.core.render import render


def rate(engine: str, count: int, seed: int = 1) -> float:
    started = time.perf_counter()
    for program in generate(engine, seed, count):
        render(program)
    return count / (time.perf_counter() - started)


def process_rate(count: int) -> float:
    command = [sys.executable, "-m", "harness.cli", "generate", "-n", str(count), "-o", "-"]
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE) as process:
        while process.stdout.read(1 << 20):
            pass
    elapsed = time.perf_counter() - started
    if process.returncode:
        sys.exit(f"loomfuzz generate failed with status {process.returncode}")
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer programs")
    args = parser.parse_args()
    fast_n, fb_n, process_n = (50_000, 1_000, 60_000) if args.quick else (300_000, 3_000, 60_000)

    rate("fast", 2_000)  # warm the fragment caches, as a long run would
    fuzzingbook = rate("fuzzingbook", fb_n)
    fast = rate("fast", fast_n)
    whole = max(process_rate(process_n) for _ in range(3))
    rows = [
        ("fast engine (in memory)", f"{fast:,.0f}", f"{fast_n:,}"),
        ("fuzzingbook engine (in memory)", f"{fuzzingbook:,.0f}", f"{fb_n:,}"),
        ("loomfuzz generate -o - (whole process, best of 3)", f"{whole:,.0f}", f"{process_n:,}"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  {'programs/s':>12}  {'programs':>9}")
    for name, value, count in rows:
        print(f"{name.ljust(width)}  {value:>12}  {count:>9}")
    print(f"ratio fast / fuzzingbook: {fast / fuzzingbook:,.0f}x (goal >= 100x)")
    print(f"whole process: {whole:,.0f} programs/s (goal >= 60,000)")


if __name__ == "__main__":
    main()
