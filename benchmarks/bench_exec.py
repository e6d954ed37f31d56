#!/usr/bin/env python3
"""Wrong code: the exec rendering, the interpreter and the differential judge at scale.

    python benchmarks/bench_exec.py [-n N] [--seed S] [--batch B] [--pipeline P ...] [--agreement-only]

On N programs of a P1-P24 profile (``--profile``, default wide; seed S), in batches of B programs:

* (a) the unoptimized run (mlir-opt-22 lowering + mlir-runner-22, one process
  per side and batch) against the reference interpreter: every value and the
  memory must agree (disagreements are counted and the first is printed);
* (b) for each pipeline, ``judge_many`` (the process path: one optimizer
  process per batch, one lowering and one run of the optimized batch), its
  programs per second, and its verdicts: every ``wrong-code`` on the real
  mlir-opt-22 is a false alarm until proven otherwise (it must be 0) and is
  written to ``--artifacts`` (program, exec text, optimized text, both outputs).

The issue's sizes are 10,000 programs for (a) and 20,000 per pipeline for (b);
default N is 2,000.  Wall-clock rates on a shared machine vary with its load.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.contract import load_grammar  # noqa: E402
from harness.core.engine import generate  # noqa: E402
from harness.core.render import renderer  # noqa: E402
from harness.execute.differential import Optimizer, WrongCode, judge_many, reference_outputs  # noqa: E402
from harness.execute.interpret import InterpretError, interpret_program  # noqa: E402
from harness.execute.render_exec import exec_module  # noqa: E402
from harness.execute.toolchain import Toolchain  # noqa: E402

PIPELINES = (
    "builtin.module(canonicalize,cse,sccp)",
    "builtin.module(int-range-optimizations)",
    "builtin.module(remove-dead-values)",
    "builtin.module(arith-expand,canonicalize)",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--count", type=int, default=2000, help="programs (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", default="wide", help="a P1-P24 profile: wide (default) or conventions")
    parser.add_argument("--batch", type=int, default=100, help="programs per process (default 100)")
    parser.add_argument("--pipeline", action="append", help=f"pipelines (default: the four of {PIPELINES})")
    parser.add_argument("--agreement-only", action="store_true",
                        help="only (a): the interpreter against the unoptimized run, no optimizer")
    parser.add_argument("--artifacts", type=Path, default=Path("bench-exec-findings"))
    args = parser.parse_args()
    pipelines = [] if args.agreement_only else args.pipeline or list(PIPELINES)
    grammar = load_grammar(None, args.profile)
    render = renderer(grammar, "canonical").render
    toolchain = Toolchain()
    toolchain.check()
    for pipeline in pipelines:
        Optimizer(pipeline=pipeline).check()

    disagreements = undefined = 0
    first_disagreement = None
    seconds = {"render": 0.0, "interpret": 0.0, "reference": 0.0, **{p: 0.0 for p in pipelines}}
    verdicts = {p: Counter() for p in pipelines}
    failures = {p: Counter() for p in pipelines}  # target/reference failures by their message
    trees = generate(grammar, "fast", args.seed, args.count)
    done = 0
    started = time.time()
    while done < args.count:
        programs = [render(next(trees)) for _ in range(min(args.batch, args.count - done))]
        t = time.perf_counter()
        texts = [exec_module(p) for p in programs]
        seconds["render"] += time.perf_counter() - t
        t = time.perf_counter()
        expected = []
        for program in programs:
            try:
                expected.append(interpret_program(program))
            except InterpretError as error:  # undefined behaviour would be a generator bug
                expected.append(None)
                undefined += 1
                print(f"interpreter: {error}", file=sys.stderr)
        seconds["interpret"] += time.perf_counter() - t
        t = time.perf_counter()
        references = reference_outputs(texts, toolchain)
        seconds["reference"] += time.perf_counter() - t
        for k, (mine, real) in enumerate(zip(expected, references)):
            if mine != real:
                disagreements += 1
                first_disagreement = first_disagreement or (done + k, programs[k])
        for pipeline in pipelines:
            t = time.perf_counter()
            results = judge_many(texts, Optimizer(pipeline=pipeline), toolchain, references)
            seconds[pipeline] += time.perf_counter() - t
            for k, verdict in enumerate(results):
                verdicts[pipeline][verdict.kind] += 1
                if verdict.kind in ("target-failure", "reference-failure"):
                    detail = re.sub(r"<stdin>:\d+:\d+: ", "", verdict.detail)[:120]  # one bucket per message
                    failures[pipeline][f"{verdict.kind}: {verdict.stage}: {detail}"] += 1
                if isinstance(verdict, WrongCode):
                    folder = args.artifacts / f"{pipeline.replace('/', '_')}-{args.seed}-{done + k}"
                    folder.mkdir(parents=True, exist_ok=True)
                    (folder / "program.mlir").write_text(programs[k])
                    (folder / "exec.mlir").write_text(texts[k])
                    (folder / "optimized.mlir").write_text(verdict.optimized_text)
                    (folder / "reference.txt").write_text(verdict.reference_output)
                    (folder / "target.txt").write_text(verdict.target_output)
                    print(f"wrong-code {pipeline} program {done + k}: {verdict.describe()}", file=sys.stderr)
        done += len(programs)
        print(f"  {done}/{args.count} programs, {time.time() - started:.0f} s", file=sys.stderr)

    n = args.count
    print(f"bench_exec: {n} {args.profile} programs, seed {args.seed}, batches of {args.batch}")
    print(f"(a) exec rendering {n / seconds['render']:.0f} programs/s; interpreter "
          f"{n / seconds['interpret']:.0f} programs/s; unoptimized run (lower + run, batched) "
          f"{n / seconds['reference']:.1f} programs/s")
    print(f"    interpreter vs unoptimized execution: {n - disagreements - undefined} agree, "
          f"{disagreements} disagree, {undefined} undefined")
    if first_disagreement:
        print(f"    first disagreement: program {first_disagreement[0]}")
    for pipeline in pipelines:
        counts = verdicts[pipeline]
        print(f"(b) {pipeline}: {n / seconds[pipeline]:.1f} programs/s (judge_many, reference outputs "
              f"given); verdicts {dict(counts)}; false alarms (wrong-code) {counts['wrong-code']}")
        for message, times in failures[pipeline].most_common(3):
            print(f"    {times} x {message}")
    return 1 if disagreements or undefined or any(v["wrong-code"] for v in verdicts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
