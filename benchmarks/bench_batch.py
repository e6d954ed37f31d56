#!/usr/bin/env python3
"""Batched runs vs one process per program, on mlir-opt-22 (oracle rendering).

Usage: python benchmarks/bench_batch.py [--quick] [-n N] [--alone M]

In one run, on the first programs of `loomfuzz generate --seed 0` rendered
for the oracle and the `--target mlir-opt` Target (its pipeline, limits and
expectations):

1. one process per program: the first M programs through the sweep engine
   with --batch-size 1 (`run_program` + `judge` each, as `fuzz` does), half
   before and half after the batched runs, so that a change in machine load
   hits both sides;
2. batched: all N programs through the same sweep engine with the automatic
   batch size (`loomfuzz run`'s path: journal, findings, bisection), and
   again with a fixed --batch-size 100;
3. checks that the M programs get the same outcomes and findings both ways, and
   prints programs/s, processes and the ratio batched / one-by-one
   (goal: >= 10x).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# this checkout\'s code, even where another checkout is the one installed (comparisons)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.grammar import default_grammar  # noqa: E402
from harness.fuzzing.sources import from_generator  # noqa: E402
from harness.fuzzing.sweep import run_sweep  # noqa: E402
from harness.targets.target import resolve_target, TargetNotFound
from harness.run.runners import BatchRunner, ProcessRunner  # noqa: E402

GOAL = 10.0


def sweep(texts, target, folder: Path, batch_size, start=0, count=None):
    count = len(texts) - start if count is None else count
    began = time.perf_counter()
    # one process per program, or batches (None: the automatic size)
    runner = ProcessRunner(target) if batch_size == 1 else BatchRunner(target, batch_size=batch_size)
    with runner:
        result = run_sweep(count, texts.__getitem__, runner, folder, source=f"bench {batch_size}",
                           suffix=".mlir", start=start, progress=False)
    seconds = time.perf_counter() - began
    return result, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="1,000 batched and 60 one-by-one programs")
    parser.add_argument("-n", type=int, help="programs run batched (default 5,000)")
    parser.add_argument("--alone", type=int, help="programs run one process each (default 200)")
    args = parser.parse_args()
    n = args.n or (1000 if args.quick else 5000)
    m = min(n, args.alone or (60 if args.quick else 200))
    try:
        target = resolve_target("mlir-opt")
    except TargetNotFound as error:
        print(f"bench_batch: error: {error}", file=sys.stderr)
        return 2
    source = from_generator(default_grammar(), "fast", 0, n, "oracle")
    texts = [source.program_at(i) for i in range(n)]

    with tempfile.TemporaryDirectory(prefix="loomfuzz-bench-batch-") as tmp:
        work = Path(tmp)
        alone1, s1 = sweep(texts, target, work / "alone", 1, 0, m // 2)
        auto, s_auto = sweep(texts, target, work / "auto", None)
        fixed, s_fixed = sweep(texts, target, work / "fixed", 100)
        alone2, s2 = sweep(texts, target, work / "alone", 1, m // 2, m - m // 2)
        alone_rate = m / (s1 + s2)

        # the same programs both ways: the same outcome counts and the same findings
        check, _ = sweep(texts, target, work / "check", None, 0, m)
        found = lambda r: sorted((f["index"], f["kind"]) for f in r.findings)  # noqa: E731
        same = (check.outcomes == alone1.outcomes + alone2.outcomes
                and found(check) == sorted(found(alone1) + found(alone2)))
        rows = [
            ("one process per program", m, alone1.processes + alone2.processes, s1 + s2, alone_rate, None),
            (f"batched, automatic (ended at {auto.batch_size})", n, auto.processes, s_auto, n / s_auto,
             auto.batch_size),
            ("batched, --batch-size 100", n, fixed.processes, s_fixed, n / s_fixed, 100),
        ]
    print(f"bench_batch: {target.command} (oracle rendering), programs of generate --seed 0")
    print(f"{'mode':<38} {'programs':>9} {'processes':>10} {'seconds':>8} {'programs/s':>11} {'ratio':>7}")
    for name, count, procs, secs, rate, _ in rows:
        print(f"{name:<38} {count:>9,} {procs:>10,} {secs:>8.2f} {rate:>11.1f} {rate / alone_rate:>6.1f}x")
    ratio = rows[1][4] / alone_rate
    print(f"same outcomes on the {m} programs run both ways: {'yes' if same else 'NO'}")
    print(f"goal >= {GOAL:g}x (automatic batch size): {'met' if ratio >= GOAL else 'NOT met'} ({ratio:.1f}x)")
    return 0 if same and ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
