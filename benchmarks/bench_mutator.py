#!/usr/bin/env python3
"""Mutations and crossovers per second of harness.core.mutate (decode, operate, encode).

Usage: python benchmarks/bench_mutator.py [--quick] [--count N]

Two input sets, the way the hooks are called:

* ``corpus``: canonical encodings of a few hundred PCFG programs, reused with
  fresh seeds (what libFuzzer does: it mutates the entries of its corpus);
* ``cold``: a different random byte string (0..24 bytes) for every call, so
  the decode memo never helps.

Goal: >= 50,000 mutations/s.  Also prints how often each operator applied.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

try:
    import harness  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.choices import SLOT_COUNT, random_programs  # noqa: E402
from harness.core.codec import encode  # noqa: E402
from harness.core.mutate import CROSSOVER_OPERATORS, MUTATION_OPERATORS, Mutator  # noqa: E402

GOAL = 50_000


def _rate(function, pairs) -> float:
    start = time.perf_counter()
    for args in pairs:
        function(*args)
    return len(pairs) / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 calls per measurement")
    parser.add_argument("--count", type=int, help="calls per measurement (default 200,000)")
    args = parser.parse_args()
    count = args.count or (20_000 if args.quick else 200_000)

    rng = random.Random(1)
    corpus = [encode(p) or b"\0" for p in random_programs(1, 300)]
    corpus_calls = [(corpus[rng.randrange(len(corpus))], SLOT_COUNT, rng.getrandbits(32)) for _ in range(count)]
    cold_calls = [(rng.randbytes(rng.randrange(0, 25)), SLOT_COUNT, rng.getrandbits(32)) for _ in range(count)]
    cross_calls = [(corpus[rng.randrange(len(corpus))], corpus[rng.randrange(len(corpus))], SLOT_COUNT,
                    rng.getrandbits(32)) for _ in range(count)]

    counts: Counter = Counter()
    mutator = Mutator(counts=counts)
    mutator.mutate(b"", SLOT_COUNT, 0)  # warm-up
    results = {
        "mutate (corpus inputs)": _rate(mutator.mutate, corpus_calls),
        "mutate (cold inputs)": _rate(mutator.mutate, cold_calls),
        "crossover (corpus inputs)": _rate(mutator.crossover, cross_calls),
    }
    print(f"harness.core.mutate, {count:,} calls each (Python {sys.version.split()[0]})")
    for name, rate in results.items():
        print(f"  {name:<28} {rate:>10,.0f} /s")
    worst = min(results["mutate (corpus inputs)"], results["mutate (cold inputs)"])
    print(f"  goal: >= {GOAL:,} mutations/s: {'met' if worst >= GOAL else 'NOT met'} (worst {worst:,.0f}/s)")

    total = sum(counts[op] for op in MUTATION_OPERATORS)
    print("operator frequencies (mutations):")
    for op in sorted(MUTATION_OPERATORS, key=lambda o: -counts[o]):
        print(f"  {op:<20} {counts[op] / total:6.1%}")
    if counts["unchanged"]:
        print(f"  unchanged            {counts['unchanged'] / total:6.2%}")
    total = sum(counts[op] for op in CROSSOVER_OPERATORS)
    print("operator frequencies (crossovers):")
    for op in sorted(CROSSOVER_OPERATORS, key=lambda o: -counts[o]):
        print(f"  {op:<20} {counts[op] / total:6.1%}")
    return 0 if worst >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
