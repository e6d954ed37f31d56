#!/usr/bin/env python3
"""The exhaustive sweep's speed: `loomfuzz enumerate --run --target mlir-opt` on a prefix.

Usage: python benchmarks/bench_enumerate.py [--quick] [--count N] [--jobs J]

In one run:

1. ranking alone: unrank every index of the default profile (854,700) and
   render the oracle text of the first 100,000 (what the sweep's program
   source costs per program);
2. the sweep: the first N indices (default 50,000; --quick 5,000) through
   `loomfuzz enumerate --run --target mlir-opt` (upstream mlir-opt-22, oracle
   rendering, automatic batch size), a real subprocess into a fresh artifacts
   folder, timed from outside;
3. prints programs/s and the projected wall time of the whole profile at that
   rate.  The whole profile itself: run the command without --count (about
   45 minutes on 2 shared cores; see the README).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's harness, whatever the virtualenv has installed

from harness.core.grammar import default_grammar  # noqa: E402
from harness.core.rank import Ranking  # noqa: E402
from harness.core.render import renderer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="a 5,000-program prefix")
    parser.add_argument("--count", type=int, help="programs swept (default 50,000)")
    parser.add_argument("--jobs", type=int, default=2, help="batches at once (default 2)")
    args = parser.parse_args()
    count = args.count or (5_000 if args.quick else 50_000)
    if shutil.which("mlir-opt-22") is None:
        print("bench_enumerate: mlir-opt-22 is not on PATH (apt-get install mlir-22-tools)", file=sys.stderr)
        return 1

    g = default_grammar()
    began = time.perf_counter()
    space = Ranking(g)
    for index in range(space.count):
        space.unrank(index)
    unrank_s = time.perf_counter() - began
    render = renderer(g, "oracle").render
    began = time.perf_counter()
    for index in range(100_000):
        render(space.unrank(index))
    render_s = time.perf_counter() - began
    print(f"ranking: unrank all {space.count:,} trees in {unrank_s:.2f} s "
          f"({space.count / unrank_s:,.0f}/s); unrank + oracle text: {100_000 / render_s:,.0f}/s")

    with tempfile.TemporaryDirectory(prefix="bench-enumerate-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "harness.cli", "enumerate", "--run", "--target", "mlir-opt",
                   "--count", str(count), "--jobs", str(args.jobs), "--artifacts", tmp, "--no-progress"]
        began = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - began
    if proc.returncode not in (0, 1):
        print(proc.stdout + proc.stderr, file=sys.stderr)
        return 1
    print(proc.stdout, end="")
    batch = re.search(r"batch size (\d+)", proc.stdout)
    rate = count / wall
    print(f"sweep: {count:,} programs in {wall:.1f} s wall = {rate:,.1f} programs/s "
          f"(--jobs {args.jobs}, batch size {batch.group(1) if batch else '?'}, "
          f"load average {os.getloadavg()[0]:.1f})")
    print(f"projection for the whole default profile ({space.count:,}): "
          f"{space.count / rate / 60:.0f} min at this rate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
