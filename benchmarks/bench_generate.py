#!/usr/bin/env python3
"""Programs per second: the fast engine next to fuzzingbook's, in one run.

    python benchmarks/bench_generate.py [--quick]

For the default grammar and for a recursive grammar of the same size
(tests/grammars/recursive_shape.py: any number of threads and sites), both
engines expand the same grammar and feed the same renderer; each program is
rendered to an in-memory string.  Then ``loomfuzz generate -n 60000 -o -`` is
timed as a whole process (start-up included), its output read and dropped.

Goals (issue 8): default grammar in memory >= 300x fuzzingbook; the whole
process >= 250x fuzzingbook's in-memory rate; the recursive grammar >= 50x.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

# this checkout\'s code, even where another checkout is the one installed (comparisons)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.engine import generate  # noqa: E402
from harness.core.grammar import default_grammar, load_file  # noqa: E402
from harness.core.render import renderer  # noqa: E402

RECURSIVE = Path(__file__).resolve().parent.parent / "tests" / "grammars" / "recursive_shape.py"


def rate(grammar, engine: str, count: int, seed: int = 1) -> float:
    render = renderer(grammar).render
    started = time.perf_counter()
    for tree in generate(grammar, engine, seed, count):
        render(tree)
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="fewer programs")
    args = parser.parse_args()
    fast_n, fb_n, process_n = (50_000, 1_000, 60_000) if args.quick else (300_000, 3_000, 60_000)
    default, recursive = default_grammar(), load_file(str(RECURSIVE))

    rows = []
    rate(default, "fuzzingbook", 20)  # import fuzzingbook before timing it
    for name, grammar, n_fast in (("default", default, fast_n), ("recursive", recursive, fast_n // 5)):
        rate(grammar, "fast", 2_000)  # warm the render caches, as a long run would
        fb = rate(grammar, "fuzzingbook", fb_n)
        fast = rate(grammar, "fast", n_fast)
        rows.append((name, fast, fb))
    whole = max(process_rate(process_n) for _ in range(3))

    print(f"{'grammar':<10} {'fast /s':>10} {'fuzzingbook /s':>15} {'ratio':>8}")
    for name, fast, fb in rows:
        print(f"{name:<10} {fast:>10,.0f} {fb:>15,.0f} {fast / fb:>7,.0f}x")
    fb_default = rows[0][2]
    print(f"loomfuzz generate -n {process_n} -o - (whole process, best of 3): {whole:,.0f} programs/s "
          f"= {whole / fb_default:,.0f}x fuzzingbook in memory")
    print(f"goals: default >= 300x ({rows[0][1] / fb_default:,.0f}x), whole process >= 250x "
          f"({whole / fb_default:,.0f}x), recursive >= 50x ({rows[1][1] / rows[1][2]:,.0f}x)")


if __name__ == "__main__":
    main()
