#!/usr/bin/env python3
"""Mutations and crossovers per second of harness.core.mutate (decode, operate, encode).

Usage: python benchmarks/bench_mutator.py [--quick] [--count N]

For the default grammar and the recursive one (tests/grammars/recursive_shape.py),
two input sets, the way the hooks are called:

* ``corpus``: canonical encodings of a few hundred PCFG programs, reused with
  fresh seeds (what libFuzzer does: it mutates the entries of its corpus);
* ``cold``: a different random byte string for every call, so the decode
  memo never helps.

Goals (issue 8): >= 50,000 mutations/s on the default grammar, >= 20,000/s on
the recursive one.  Also prints how often each operator applied.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

# this checkout\'s code, even where another checkout is the one installed (comparisons)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.codec import encode, max_input_length, nonempty  # noqa: E402
from harness.core.grammar import default_grammar, load_file  # noqa: E402
from harness.core.mutate import CROSSOVER_OPERATORS, MUTATION_OPERATORS, Mutator  # noqa: E402
from harness.core.walk import random_trees  # noqa: E402

RECURSIVE = Path(__file__).resolve().parent.parent / "tests" / "grammars" / "recursive_shape.py"
GOALS = {"default": 50_000, "recursive": 20_000}


def _rate(function, calls) -> float:
    start = time.perf_counter()
    for args in calls:
        function(*args)
    return len(calls) / (time.perf_counter() - start)


def measure(name: str, grammar, count: int) -> tuple[float, Mutator]:
    rng = random.Random(1)
    max_size = max_input_length(grammar, 256)
    corpus = [nonempty(encode(t, grammar), t, grammar) for t in random_trees(grammar, 1, 300)]
    longest = max(len(c) for c in corpus)
    corpus_calls = [(corpus[rng.randrange(len(corpus))], max_size, rng.getrandbits(32)) for _ in range(count)]
    cold_calls = [(rng.randbytes(rng.randrange(0, longest + 8)), max_size, rng.getrandbits(32))
                  for _ in range(count)]
    cross_calls = [(corpus[rng.randrange(len(corpus))], corpus[rng.randrange(len(corpus))], max_size,
                    rng.getrandbits(32)) for _ in range(count)]
    mutator = Mutator(grammar)
    mutator.mutate(b"", max_size, 0)  # warm-up
    results = {
        "mutate (corpus inputs)": _rate(mutator.mutate, corpus_calls),
        "mutate (cold inputs)": _rate(mutator.mutate, cold_calls),
        "crossover (corpus inputs)": _rate(mutator.crossover, cross_calls),
    }
    print(f"{name} grammar, {count:,} calls each, max_size {max_size}")
    for label, value in results.items():
        print(f"  {label:<28} {value:>10,.0f} /s")
    worst = min(results["mutate (corpus inputs)"], results["mutate (cold inputs)"])
    goal = GOALS[name]
    print(f"  goal: >= {goal:,} mutations/s: {'met' if worst >= goal else 'NOT met'} (worst {worst:,.0f}/s)")
    counts = mutator.counts
    total = sum(counts[op] for op in MUTATION_OPERATORS) or 1
    print("  operators (mutations): " + ", ".join(
        f"{op} {counts[op] / total:.1%}" for op in sorted(MUTATION_OPERATORS, key=lambda o: -counts[o])))
    extra = {k: counts[k] for k in ("fallback_switch", "unchanged") if counts[k]}
    if extra:
        print(f"  also: {extra}")
    total = sum(counts[op] for op in CROSSOVER_OPERATORS) or 1
    print("  operators (crossovers): " + ", ".join(
        f"{op} {counts[op] / total:.1%}" for op in CROSSOVER_OPERATORS))
    return worst, mutator


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="20,000 calls per measurement")
    parser.add_argument("--count", type=int, help="calls per measurement (default 200,000)")
    args = parser.parse_args()
    count = args.count or (20_000 if args.quick else 200_000)
    print(f"harness.core.mutate (Python {sys.version.split()[0]})")
    met = True
    for name, grammar in (("default", default_grammar()), ("recursive", load_file(str(RECURSIVE)))):
        worst, _ = measure(name, grammar, count if name == "default" else count // 2)
        met &= worst >= GOALS[name]
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
