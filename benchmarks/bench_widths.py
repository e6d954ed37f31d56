#!/usr/bin/env python3
"""The widths profile (issue 47) against wide: generation speed, edge-value coverage, and the
executors' agreement with the JIT at full size.

    python benchmarks/bench_widths.py [--speed N] [--coverage N] [--agree N] [--pipelines N]

* speed: CPU seconds (process time: on a loaded machine the wall clock says little) to expand and
  render N programs of each profile, interleaved over three rounds; the issue's bound: widths
  within 2x of wide's programs/s;
* coverage: edge-value coverage (harness.execute.edge_coverage) of N exec renderings of each,
  the triples counted per width (an edge value belongs to its width);
* agree: N widths programs, the reference interpreter against mlir-runner-22 (batches of 50);
* pipelines: N widths programs through each of the four pipelines of tests/test_widths_exec.py,
  judged by the IR executor and the JIT both (the in-process judge, cross-check 1.0).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.contract import load_grammar  # noqa: E402
from harness.core.engine import generate  # noqa: E402
from harness.core.render import renderer  # noqa: E402
from harness.execute.edge_coverage import edge_coverage  # noqa: E402
from harness.execute.exec_rendering import exec_module  # noqa: E402

PIPELINES = ("builtin.module(canonicalize,cse)", "builtin.module(sccp)",
             "builtin.module(int-range-optimizations)", "builtin.module(canonicalize,cse,sccp,symbol-dce)")


def texts(profile: str, count: int, seed: int) -> list[str]:
    grammar = load_grammar(None, profile)
    render = renderer(grammar, "canonical").render
    return [render(tree) for tree in generate(grammar, "fast", seed, count)]


def speed(count: int) -> None:
    rates: dict[str, list[float]] = {"wide": [], "widths": []}
    for round_ in range(3):
        for profile in rates:
            grammar = load_grammar(None, profile)
            render = renderer(grammar, "canonical").render
            started = time.process_time()
            size = sum(len(render(tree)) for tree in generate(grammar, "fast", 100 + round_, count))
            rates[profile].append(count / (time.process_time() - started))
            print(f"  round {round_ + 1} {profile}: {rates[profile][-1]:.0f} programs/s (CPU), "
                  f"{size / count:.0f} characters a program", flush=True)
    best = {p: max(r) for p, r in rates.items()}
    print(f"speed: wide {best['wide']:.0f}, widths {best['widths']:.0f} programs/s (best of 3, CPU): "
          f"widths at {best['widths'] / best['wide']:.2f}x of wide (bound: 0.5x)")


def coverage(count: int) -> None:
    for profile in ("wide", "widths"):
        started = time.perf_counter()
        found = edge_coverage(exec_module(text) for text in texts(profile, count, 7))
        print(f"{profile}: {found.summary()} ({time.perf_counter() - started:.0f} s)")
        per_width: Counter = Counter()
        reached: Counter = Counter()
        for op, pos, cls in found.possible:
            width = cls.split(":")[0] if ":" in cls else ("i1" if cls in ("true", "false") else "i32")
            per_width[width] += 1
            reached[width] += (op, pos, cls) in (found.constant | found.narrow)
        print("  per width (compile-time reached / triples): "
              + ", ".join(f"{w} {reached[w]}/{n}" for w, n in sorted(per_width.items())))


def agree(count: int) -> None:
    from harness.execute.exec_layout import layout_of
    from harness.execute.interpret import interpret_program
    from harness.execute.toolchain import Toolchain

    programs = texts("widths", count, 4711)
    toolchain, same, started = Toolchain(timeout=900.0), 0, time.perf_counter()
    for at in range(0, count, 50):
        part = programs[at:at + 50]
        execs = [exec_module(text) for text in part]
        for text, expected in zip(part, toolchain.execute_many(execs, [layout_of(e).lines for e in execs])):
            same += interpret_program(text) == expected
    print(f"agree: the interpreter prints what mlir-runner-22 prints for {same} of {count} widths programs "
          f"({time.perf_counter() - started:.0f} s)")


def pipelines(count: int) -> None:
    from harness.execute.differential import Optimizer, Same
    from harness.execute.inprocess import InProcessExecutor
    from harness.execute.toolchain import Toolchain

    for pipeline in PIPELINES:
        programs = texts("widths", count, 4700 + PIPELINES.index(pipeline))
        both, started = InProcessExecutor(Toolchain(timeout=120.0), cross_check=1.0), time.perf_counter()
        try:
            verdicts = []
            for at in range(0, count, 24):
                verdicts += both.judge_many([exec_module(t) for t in programs[at:at + 24]], Optimizer(pipeline=pipeline))
        finally:
            both.close()
        print(f"{pipeline}: {sum(isinstance(v, Same) for v in verdicts)}/{count} same; {both.counts.summary()} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--speed", type=int, default=1000)
    parser.add_argument("--coverage", type=int, default=0)
    parser.add_argument("--agree", type=int, default=0)
    parser.add_argument("--pipelines", type=int, default=0)
    args = parser.parse_args()
    if args.speed:
        speed(args.speed)
    if args.coverage:
        coverage(args.coverage)
    if args.agree:
        agree(args.agree)
    if args.pipelines:
        pipelines(args.pipelines)


if __name__ == "__main__":
    main()
