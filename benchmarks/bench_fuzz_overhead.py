#!/usr/bin/env python3
"""Harness overhead: `loomfuzz fuzz --target mlir-opt` against bare mlir-opt-22 runs.

Usage: python benchmarks/bench_fuzz_overhead.py [--quick] [--runs N]

In one run:

1. bare: the programs of a seeded corpus, rendered for the oracle, each given
   to ``mlir-opt-22`` (same arguments and pipeline as the fuzz target's
   Target) on stdin by ``subprocess.run``, one after another; half of the runs
   before the campaign and half after, so that a change in machine load
   during the benchmark hits both sides;
2. harness: ``loomfuzz fuzz --target mlir-opt --runs N`` on a copy of the same
   corpus; its rate is the fuzz target's own count of executions over the
   time between its first and last execution (libFuzzer, the mutator,
   decoding, rendering, the runner's limits and classification, judging,
   the grammar features; not the interpreter's start-up);
3. prints both rates and harness/bare (goal: >= 0.90, harness within 10%).
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

# this checkout\'s code, even where another checkout is the one installed (comparisons)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.codec import decode  # noqa: E402
from harness.core.grammar import default_grammar  # noqa: E402
from harness.core.render import render  # noqa: E402
from harness.fuzzing.corpus import seed_corpus  # noqa: E402
from harness.targets.target import resolve_target, TargetNotFound

GOAL = 0.90


def bare_rate(argv: list[str], texts: list[bytes], runs: int, env: dict) -> tuple[float, int]:
    start = time.perf_counter()
    for index in range(runs):
        subprocess.run(argv, input=texts[index % len(texts)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, check=False)
    return runs / (time.perf_counter() - start), runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="200 runs per side (default 1000)")
    parser.add_argument("--runs", type=int, help="runs per side")
    args = parser.parse_args()
    runs = args.runs or (200 if args.quick else 1000)

    try:
        target = resolve_target("mlir-opt")
    except TargetNotFound as error:
        print(f"bench_fuzz_overhead: error: {error}", file=sys.stderr)
        return 2
    argv = list(target.argv)
    env = {**os.environ, **target.env}

    with tempfile.TemporaryDirectory(prefix="loomfuzz-bench-") as tmp:
        work = Path(tmp)
        seeds = work / "seeds"
        grammar = default_grammar()
        seed_corpus(seeds, grammar)
        texts = [render(decode(p.read_bytes(), grammar), grammar, "oracle").encode()
                 for p in sorted(seeds.iterdir())]
        corpus = work / "corpus"
        shutil.copytree(seeds, corpus)

        subprocess.run(argv, input=texts[0], capture_output=True, env=env)  # warm the page cache
        first, n1 = bare_rate(argv, texts, runs // 2, env)

        command = [sys.executable, "-m", "harness.cli", "fuzz", "--target", "mlir-opt",
                   "--runs", str(runs), "--seed", "1", "--corpus", str(corpus),
                   "--artifacts", str(work / "artifacts")]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, cwd=work,
                                env={**os.environ, "MLIR_OPT": argv[0]})
        wall = time.perf_counter() - started
        second, n2 = bare_rate(argv, texts, runs - runs // 2, env)

    match = re.search(r"executions:\s+(\d+) \(([\d.]+)/s over ([\d.]+) s\)", result.stdout)
    if result.returncode != 0 or not match:
        print("bench_fuzz_overhead: error: the campaign failed:\n" + result.stdout + result.stderr[-2000:],
              file=sys.stderr)
        return 2
    executions, harness_rate = int(match.group(1)), float(match.group(2))
    bare = (n1 + n2) / (n1 / first + n2 / second)
    ratio = harness_rate / bare
    print(f"mlir-opt: {' '.join(argv)}")
    print(f"  bare mlir-opt-22 (subprocess.run): {bare:8.2f} runs/s   "
          f"({n1} before: {first:.2f}/s, {n2} after: {second:.2f}/s)")
    print(f"  loomfuzz fuzz --target mlir-opt:   {harness_rate:8.2f} exec/s   "
          f"({executions} executions; {executions / wall:.2f}/s with start-up, {wall:.1f} s wall)")
    print(f"  harness / bare: {ratio:.3f} (goal >= {GOAL:.2f}: {'met' if ratio >= GOAL else 'NOT met'})")
    return 0 if ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
