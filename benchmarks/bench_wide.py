#!/usr/bin/env python3
"""The wide profile (grammars/wide.py, the binder on the hot path): generation and mutation rates.

    python benchmarks/bench_wide.py [--quick]

* (a) ``loomfuzz generate --profile wide -n 60000 -o -`` as a whole process
  (start-up included), its output read and dropped, best of N;
* (b) the walk plus the render pass in memory (the same seed's trees);
* (c) ``Mutator.mutate`` (decode, operate, encode) on corpus inputs (canonical
  encodings of 300 PCFG programs, reused with fresh seeds, as libFuzzer does)
  and on cold random bytes (a new input every call, so no cache helps),
  ``max_size`` = ``max_input_length(grammar, 4096)``; and chained as libFuzzer
  runs a custom mutator (``-mutate_depth=5``: a corpus input mutated, then the
  output mutated again, five times), the case between the two.

The programs' mean size (derivation-tree nodes, encoded bytes, characters) is printed with
the rates: a grammar change that slows them usually makes programs bigger.

Goals: whole-process generation >= 10,000 programs/s; mutation >= 20,000/s on
corpus inputs.  The cold and chained rates are shown next to the same goal.  Wall-clock
rates on a shared machine vary with its load; CPU time is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# this checkout\'s code, even where another checkout is the one installed (comparisons)
sys.path.insert(0, str(ROOT))

from harness.core.codec import encode, max_input_length, nonempty  # noqa: E402
from harness.core.grammar import load_profile  # noqa: E402
from harness.core.mutate import Mutator  # noqa: E402
from harness.core.render import renderer  # noqa: E402
from harness.core.tree import size  # noqa: E402
from harness.core.walk import random_trees  # noqa: E402

GENERATE_GOAL = 10_000
MUTATE_GOAL = 20_000


def process_rate(count: int) -> tuple[float, float]:
    """(programs per wall second, per CPU second of the child) of a whole ``loomfuzz generate``."""
    command = [sys.executable, "-m", "harness.cli", "generate", "--profile", "wide", "-n", str(count),
               "-o", "-", "--no-progress"]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, cwd=ROOT, env=env) as process:
        while process.stdout.read(1 << 20):
            pass
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode:
        sys.exit(f"loomfuzz generate failed with status {process.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return count / elapsed, count / cpu


def timed(function, calls) -> tuple[float, float]:
    """(calls per wall second, per CPU second)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for args in calls:
        function(*args)
    return len(calls) / (time.perf_counter() - wall), len(calls) / (time.process_time() - cpu)


CHAIN = 5  # libFuzzer's default -mutate_depth


def chained(mutator: Mutator, rng: random.Random, max_size: int):
    """One corpus input mutated CHAIN times in a row, each output the next input."""
    def run(data: bytes) -> None:
        for _ in range(CHAIN):
            data = mutator.mutate(data, max_size, rng.getrandbits(32))
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="fewer programs and mutations, best of 2")
    args = parser.parse_args()
    process_n = 60_000
    memory_n, mutate_n, repeats = (5_000, 10_000, 2) if args.quick else (20_000, 50_000, 3)
    g = load_profile("wide")

    whole = max(process_rate(process_n) for _ in range(repeats))

    render = renderer(g).render
    trees = list(random_trees(g, 1, 500))
    for tree in trees:  # compile and warm the passes, as a long run would
        render(tree)
    wall, cpu = time.perf_counter(), time.process_time()
    for tree in random_trees(g, 2, memory_n):  # the walk and the render pass, both timed
        render(tree)
    memory = memory_n / (time.perf_counter() - wall), memory_n / (time.process_time() - cpu)

    rng = random.Random(1)
    max_size = max_input_length(g, 4096)
    corpus = [nonempty(encode(t, g), t, g) for t in trees[:300]]
    longest = max(len(c) for c in corpus)
    corpus_calls = [(corpus[rng.randrange(len(corpus))], max_size, rng.getrandbits(32)) for _ in range(mutate_n)]
    cold_calls = [(rng.randbytes(rng.randrange(0, longest + 8)), max_size, rng.getrandbits(32))
                  for _ in range(mutate_n // 2)]
    mutator = Mutator(g)
    mutator.mutate(corpus[0], max_size, 0)
    corpus_rate = timed(mutator.mutate, corpus_calls)
    cold_rate = timed(Mutator(g).mutate, cold_calls)
    chained_rate = timed(chained(mutator, rng, max_size), [(corpus[rng.randrange(len(corpus))],)
                                                           for _ in range(mutate_n // 10)])
    chained_rate = (chained_rate[0] * CHAIN, chained_rate[1] * CHAIN)

    rows = [
        (f"(a) loomfuzz generate --profile wide -n {process_n} -o - (whole process, best of {repeats})",
         whole, GENERATE_GOAL),
        (f"(b) walk + render in memory ({memory_n:,} programs)", memory, GENERATE_GOAL),
        (f"(c) Mutator.mutate, corpus inputs ({mutate_n:,} calls)", corpus_rate, MUTATE_GOAL),
        (f"    Mutator.mutate, cold random bytes ({mutate_n // 2:,} calls)", cold_rate, MUTATE_GOAL),
        (f"    Mutator.mutate, chained {CHAIN} deep from corpus inputs ({mutate_n // 10 * CHAIN:,} calls)",
         chained_rate, MUTATE_GOAL),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"wide profile (Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}); programs "
          f"of {sum(map(size, trees)) / len(trees):.0f} nodes, {sum(map(len, corpus)) / len(corpus):.0f} "
          f"bytes, {sum(len(render(t)) for t in trees) / len(trees):,.0f} characters on average")
    print(f"{'measure':<{width}} {'/s wall':>10} {'/s CPU':>10} {'goal':>9}  verdict")
    met = True
    for label, (wall, cpu), goal in rows:
        verdict = "PASS" if wall >= goal else "FAIL"
        if goal == GENERATE_GOAL and label.startswith("(a)") or label.startswith("(c)"):
            met &= wall >= goal
        print(f"{label:<{width}} {wall:>10,.0f} {cpu:>10,.0f} {'>= ' + format(goal, ','):>9}  {verdict}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
