#!/usr/bin/env python3
"""Two builds of one tool: the cost of the reference build, and MLIR 16 against MLIR 22.

Usage: python benchmarks/bench_divergence.py [--quick] [-n N] [-m M]

In one run:

1. the same N default programs (`--target mlir-opt`, oracle rendering) through
   `loomfuzz run --runner batch` alone, and through `--reference-mlir-opt` with
   mlir-opt-22 under a second path (two identical builds): programs/s of each and
   the ratio (two builds run every program twice: about 0.5 is the goal), and
   the divergences found between identical builds (must be 0);
2. M wide programs through `--oracle differential --mlir-opt mlir-opt-22
   --reference-mlir-opt mlir-opt-16` (canonicalize,cse,sccp): the divergences by
   aspect (outcome, output, values), and for every values divergence which build
   prints the reference interpreter's values (harness.execute.interpret, which
   shares no code with either build).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's code

from harness.execute.interpret import interpret_program  # noqa: E402

PIPELINE = "builtin.module(canonicalize,cse,sccp)"


def loomfuzz(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return done, time.perf_counter() - began


def findings(folder: Path) -> list[tuple[Path, dict]]:
    return [(p, json.loads(p.read_text())) for p in sorted(folder.glob("crash-*.json"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="N=200, M=100")
    parser.add_argument("-n", type=int, default=2000, help="default programs, identical builds (2000)")
    parser.add_argument("-m", type=int, default=1000, help="wide programs, MLIR 16 vs 22 (1000)")
    args = parser.parse_args()
    n, m = (200, 100) if args.quick else (args.n, args.m)
    mlir22 = shutil.which("mlir-opt-22")
    if not mlir22 or not shutil.which("mlir-opt-16"):
        print("needs mlir-opt-22 and mlir-opt-16 (bash .ci/setup)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        copy = tmp / "mlir-opt-copy"
        copy.symlink_to(mlir22)
        common = ("run", "-n", str(n), "--seed", "0", "--target", "mlir-opt", "--runner", "batch", "--no-progress")
        one, one_s = loomfuzz(*common, "--artifacts", str(tmp / "one"))
        two, two_s = loomfuzz(*common, "--reference-mlir-opt", str(copy), "--artifacts", str(tmp / "two"))
        for done in (one, two):
            if done.returncode not in (0, 1):
                print(done.stderr, file=sys.stderr)
                return 1
        same = [r for _, r in findings(tmp / "two") if r.get("finding_kind") == "divergence"]
        print(f"identical builds, {n} default programs (mlir-opt-22, batch; load {os.getloadavg()[0]:.1f}):")
        print(f"  one build:  {n / one_s:7.1f} programs/s ({one_s:.1f} s)")
        print(f"  two builds: {n / two_s:7.1f} programs/s ({two_s:.1f} s); ratio {one_s / two_s:.2f}")
        print(f"  divergences between identical builds: {len(same)} (must be 0)")

        done, seconds = loomfuzz("run", "--profile", "wide", "-n", str(m), "--seed", "11", "--oracle",
                                 "differential", "--mlir-opt", "mlir-opt-22", "--reference-mlir-opt",
                                 "mlir-opt-16", "--pipeline", PIPELINE, "--artifacts", str(tmp / "r"),
                                 "--no-progress")
        if done.returncode not in (0, 1):
            print(done.stderr, file=sys.stderr)
            return 1
        aspects: collections.Counter = collections.Counter()
        right = collections.Counter()
        for path, record in findings(tmp / "r"):
            divergence = record.get("divergence")
            if divergence is None:
                continue
            aspects[divergence["aspect"]] += 1
            if divergence["aspect"] == "values":
                reference = interpret_program(path.with_suffix(".mlir").read_text())
                right["mlir-opt-22"] += divergence["primary"]["values"] == reference
                right["mlir-opt-16"] += divergence["reference"]["values"] == reference
        print(f"\nmlir-opt-22 vs mlir-opt-16, {m} wide programs, {PIPELINE}, exec rendering "
              f"({m / seconds:.1f} programs/s, {seconds:.0f} s):")
        print(f"  divergences: {sum(aspects.values())} ({', '.join(f'{k} {v}' for k, v in aspects.most_common())})")
        print(f"  values divergences where the build prints the interpreter's values: "
              f"mlir-opt-22 {right['mlir-opt-22']}, mlir-opt-16 {right['mlir-opt-16']}")
    return 0 if not same else 1


if __name__ == "__main__":
    sys.exit(main())
