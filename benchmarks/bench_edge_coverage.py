#!/usr/bin/env python3
"""Edge-value operand coverage before and after constant twins.

    python benchmarks/bench_edge_coverage.py [-n N] [--seed S] [--per-op]

On N wide programs (default 3,000, seed 5), the (operation, operand position,
edge value) triples their exec modules reach (harness/execute/edge_coverage.py)
as a compile-time constant, inside a narrow known range, at compile time
(either) and at run time, with the share of programs given constant twins 0
(before), 0.25 (the differential oracle's default) and 1.0, side by side, and
the time each measurement took (exec rendering, twins and the measurement).
The sample's sets saturate (a triple counts once any program reaches it), so
the mean number of triples one program reaches is printed too.
``--per-op``: the constants per operation and operand too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.contract import load_grammar  # noqa: E402
from harness.core.engine import generate  # noqa: E402
from harness.core.render import renderer  # noqa: E402
from harness.execute.edge_coverage import EdgeCoverage, module_coverage  # noqa: E402
from harness.execute.exec_rendering import exec_module  # noqa: E402
from harness.execute.twins import plan_for, sampled, with_twins  # noqa: E402

SHARES = (0.0, 0.25, 1.0)


def programs(count: int, seed: int) -> list[str]:
    grammar = load_grammar(None, "wide")
    render = renderer(grammar, "canonical").render
    return [render(tree) for tree in generate(grammar, "fast", seed, count)]


def measure(texts: list[str], share: float) -> tuple[EdgeCoverage, int, float, list[float]]:
    """(coverage, programs with twins, seconds, mean triples per program: constant, narrow, run time)."""
    started = time.perf_counter()
    coverage, twinned, sums = EdgeCoverage(), 0, [0, 0, 0]
    for program in texts:
        text = exec_module(program)
        if sampled(program, share):
            text = with_twins(text, plan_for(program))
            twinned += 1
        one = module_coverage(text)
        for k, part in enumerate((one.constant, one.narrow, one.run_time)):
            sums[k] += len(part)
        coverage.merge(one)
    return coverage, twinned, time.perf_counter() - started, [s / max(len(texts), 1) for s in sums]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("-n", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--per-op", action="store_true", help="constants per operation and operand too")
    args = parser.parse_args()
    texts = programs(args.n, args.seed)
    results = {share: measure(texts, share) for share in SHARES}

    first = results[SHARES[0]][0]
    print(f"edge-value operand coverage, {args.n} wide programs (seed {args.seed}): "
          f"{len({t[:2] for t in first.possible})} operand positions, {len(first.possible)} "
          f"(op, operand, edge value) triples")
    print(f"  {'reached as':<24}" + "".join(f"{f'twins {s:g}':>18}" for s in SHARES))
    rows = [("constant", lambda c: c.constant), ("narrow range", lambda c: c.narrow),
            ("compile time (either)", lambda c: c.constant | c.narrow), ("run time", lambda c: c.run_time)]
    for label, part in rows:
        cells = []
        for share in SHARES:
            coverage = results[share][0]
            reached, total = len(part(coverage)), len(coverage.possible)
            cells.append(f"{reached}/{total} ({100 * reached / total:4.1f}%)")
        print(f"  {label:<24}" + "".join(f"{c:>18}" for c in cells))
    for k, label in enumerate(("constant", "narrow range", "run time")):
        print(f"  {f'per program: {label}':<24}" + "".join(f"{results[s][3][k]:>18.1f}" for s in SHARES))
    print(f"  {'programs with twins':<24}" + "".join(f"{results[s][1]:>18}" for s in SHARES))
    print(f"  {'operations measured':<24}" + "".join(f"{results[s][0].operations:>18}" for s in SHARES))
    print(f"  {'rows stopped (UB)':<24}" + "".join(f"{results[s][0].stopped_rows:>18}" for s in SHARES))
    print(f"  {'time':<24}" + "".join(f"{f'{results[s][2]:.1f} s':>18}" for s in SHARES))
    print(f"  {'programs/s':<24}" + "".join(f"{args.n / results[s][2]:>18.0f}" for s in SHARES))
    if args.per_op:
        print("\n  constants per operand (of its edge values)")
        tables = {share: {(r.op, r.position): r for r in results[share][0].table()} for share in SHARES}
        for key, row in tables[SHARES[0]].items():
            print(f"  {row.op:<20} {row.position:>2}" + "".join(f"{tables[s][key].constant:>6}" for s in SHARES)
                  + f"  of {row.total}   run time {row.run_time}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
