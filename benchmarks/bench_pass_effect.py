#!/usr/bin/env python3
"""The share of programs the optimizer changes, per pass, with constant twins off and on.

    python benchmarks/bench_pass_effect.py [-n N] [--seed S] [--jobs J] [--with-main] [--profile P]

N wide programs (or of the profile P: ``--profile widths``, issue 47) (seed S) in the exec rendering (what ``--oracle differential``
optimizes), each once as it is (twins off) and once with its constant twins
(``--twins 1``: harness/execute/twins.py, the plan the oracle draws for it), run
through mlir-opt-22 one pass at a time (harness/run/pass_effect.py, the batch
runner) for the pipelines ``canonicalize,cse,sccp``, ``int-range-optimizations`` and
``arith-int-range-narrowing{int-bitwidths-supported=8,16}`` (with no widths the
pass narrows nothing), each alone on the exec module, and the two range passes
after ``canonicalize`` (alone, they also fold what any folder folds).  Printed side by side per pass, off | on: the share
of programs whose printed module the pass changes, the share in which it rewrites
an operation other than a constant, the share in which it folds one into a
constant, and the operations it folds into constants,
replaces, removes and adds, also per 1,000 operations it reads (twins add a copy of
every function per twin, so counts grow with the module).  ``@main``, the exec
module's driver (the loads of the input table, the calls, the prints: most of
the operations), is left out unless ``--with-main``.
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
from harness.execute.exec_rendering import exec_module  # noqa: E402
from harness.execute.twins import plan_for, with_twins  # noqa: E402
from harness.run.pass_effect import PassEffectSettings, PassTally, measure  # noqa: E402
from harness.targets.target import resolve_target  # noqa: E402

PIPELINES = ("builtin.module(canonicalize,cse,sccp)", "builtin.module(int-range-optimizations)",
             "builtin.module(arith-int-range-narrowing{int-bitwidths-supported=8,16})",
             # what the range passes add once the folders have run
             "builtin.module(canonicalize,int-range-optimizations,arith-int-range-narrowing{int-bitwidths-supported=8,16})")


def modules(count: int, seed: int, profile: str = "wide") -> tuple[list[str], list[str]]:
    """(exec modules, the same with constant twins)."""
    grammar = load_grammar(None, profile)
    render = renderer(grammar, "canonical").render
    plain, twinned = [], []
    for tree in generate(grammar, "fast", seed, count):
        canonical = render(tree)
        text = exec_module(canonical)
        plain.append(text)
        twinned.append(with_twins(text, plan_for(canonical)))
    return plain, twinned


def _per_k(count: int, tally: PassTally) -> str:
    ops = sum(tally.before.values())
    return f"{1000 * count / ops:.1f}" if ops else "-"


def _row(off: PassTally, on: PassTally) -> str:
    cells = [f"{off.step[:26]:<26}", f"{100 * off.share:>5.1f}% | {100 * on.share:>5.1f}%",
             f"{100 * off.rewritten_share:>5.1f}% | {100 * on.rewritten_share:>5.1f}%",
             f"{100 * off.folding_share:>5.1f}% | {100 * on.folding_share:>5.1f}%"]
    for kind in ("folded", "replaced", "removed", "added"):
        a, b = sum(getattr(off, kind).values()), sum(getattr(on, kind).values())
        cells.append(f"{a:>6,} | {b:>6,} ({_per_k(a, off):>5} | {_per_k(b, on):>5})")
    return "  ".join(cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("-n", "--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--profile", default="wide", help="the programs' profile (wide, widths)")
    parser.add_argument("--with-main", action="store_true",
                        help="measure @main too (the driver: its prints and calls, most of the module)")
    args = parser.parse_args()
    plain, twinned = modules(args.count, args.seed, args.profile)
    settings = PassEffectSettings(runner="batch", jobs=args.jobs, skip=() if args.with_main else ("main",))
    print(f"pass effect: {args.count} {args.profile} programs (seed {args.seed}), exec rendering, mlir-opt-22, each pass "
          f"alone in order; twins off | on (--twins 1); @main {'measured' if args.with_main else 'left out'}")
    print(f"  {'pass':<26}  {'changed':^15}  {'rewritten':^15}  {'folds':^15}  {'folded (per 1,000 ops)':^30}  "
          f"{'replaced (per 1,000 ops)':^30}  {'removed (per 1,000 ops)':^30}  {'added (per 1,000 ops)':^30}")
    began = time.monotonic()
    for pipeline in PIPELINES:
        target = resolve_target("mlir-opt", pipeline=pipeline)
        off, on = measure(target, plain, settings), measure(target, twinned, settings)
        print(f"{pipeline}  (unreadable {off.unreadable} | {on.unreadable}; failed "
              f"{sum(p.failed for p in off.passes)} | {sum(p.failed for p in on.passes)})")
        for a, b in zip(off.passes, on.passes):
            print("  " + _row(a, b))
        for a, b in zip(off.passes, on.passes):
            for kind, verb in (("folded", "folds"), ("added", "adds")):
                top = getattr(b, kind).most_common(4)
                if top and (kind == "folded" or not b.folded):
                    print(f"    {b.step[:40]} {verb} most, twins on (off): "
                          + ", ".join(f"{name} {n} ({getattr(a, kind)[name]})" for name, n in top))
    print(f"({time.monotonic() - began:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
