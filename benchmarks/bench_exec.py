#!/usr/bin/env python3
"""Wrong code: the exec rendering, the interpreter and the differential judge at scale.

    python benchmarks/bench_exec.py [-n N] [--seed S] [--batch B] [--pipeline P ...]
                                    [--runner both|persistent|process] [--agreement-only | --judge-only]
                                    [--quick]

On N programs of a P1-P24 profile (``--profile``, default wide; seed S), in batches of B programs:

* (a) the unoptimized run (mlir-opt-22 lowering + mlir-runner-22, one process
  per side and batch) against the reference interpreter: every value and the
  memory must agree (disagreements are counted and the first is printed);
* (b) for each pipeline, each executor's ``judge_many`` on the same batches,
  as the oracle calls it (no reference given: both sides executed):
  ``process`` (one optimizer process per batch, one lowering and one run per
  side) and ``persistent`` (the driver's ``--exec`` mode, everything in
  process), interleaved batch by batch so that both see the same load; their
  programs per second by the wall clock and per CPU second (the harness and
  every process it waited for: on a loaded machine the CPU figure is the one
  that says what an idle machine would do), the ratio, their verdicts, and
  how many programs got different verdicts (must be 0).  Every ``wrong-code``
  on the real mlir-opt-22 is a false alarm until proven otherwise (it must be
  0) and is written to ``--artifacts``.

``--agreement-only`` runs (a) alone, ``--judge-only`` (b) alone.  The issue's sizes are 10,000
programs for (a) and 20,000 per pipeline for (b);
default N is 2,000; ``--quick`` is 96 programs, one pipeline, batches of 24.
"""

from __future__ import annotations

import argparse
import re
import resource
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.contract import load_grammar  # noqa: E402
from harness.core.engine import generate  # noqa: E402
from harness.core.render import renderer  # noqa: E402
from harness.execute.differential import Optimizer, WrongCode, reference_outputs  # noqa: E402
from harness.execute.executors import make_executor  # noqa: E402
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
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--agreement-only", action="store_true",
                      help="only (a): the interpreter against the unoptimized run, no optimizer")
    only.add_argument("--judge-only", action="store_true",
                      help="only (b): no interpreter and no separate unoptimized run (the judges "
                           "still execute both sides); for false-alarm counts at scale")
    parser.add_argument("--artifacts", type=Path, default=Path("bench-exec-findings"))
    parser.add_argument("--runner", choices=("both", "persistent", "process"), default="both",
                        help="(b)'s executors: both side by side (default), or one")
    parser.add_argument("--quick", action="store_true", help="96 programs, one pipeline, batches of 24")
    args = parser.parse_args()
    if args.quick:
        args.count, args.batch, args.pipeline = 96, 24, args.pipeline or [PIPELINES[0]]
    pipelines = [] if args.agreement_only else args.pipeline or list(PIPELINES)
    kinds = ["process", "persistent"] if args.runner == "both" else [args.runner]
    grammar = load_grammar(None, args.profile)
    render = renderer(grammar, "canonical").render
    toolchain = Toolchain()
    toolchain.check()
    for pipeline in pipelines:
        Optimizer(pipeline=pipeline).check()

    disagreements = undefined = 0
    first_disagreement = None
    seconds = {"render": 0.0, "interpret": 0.0, "reference": 0.0}
    runs = [(p, kind) for p in pipelines for kind in kinds]
    wall = {run: 0.0 for run in runs}
    cpu = {run: 0.0 for run in runs}
    executors = {run: make_executor(run[1], toolchain) for run in runs}
    verdicts = {run: Counter() for run in runs}
    mismatches = {p: 0 for p in pipelines}  # programs whose verdicts differ between the executors
    failures = {run: Counter() for run in runs}  # target/reference failures by their message
    trees = generate(grammar, "fast", args.seed, args.count)
    done = 0
    started = time.time()
    while done < args.count:
        programs = [render(next(trees)) for _ in range(min(args.batch, args.count - done))]
        t = time.perf_counter()
        texts = [exec_module(p) for p in programs]
        seconds["render"] += time.perf_counter() - t
        if not args.judge_only:
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
            judged = {}
            for kind in kinds:
                run = (pipeline, kind)
                t, c = time.perf_counter(), _cpu()
                judged[kind] = executors[run].judge_many(texts, Optimizer(pipeline=pipeline))
                wall[run] += time.perf_counter() - t
                cpu[run] += _cpu() - c  # the drivers' share is added when they are closed
                for k, verdict in enumerate(judged[kind]):
                    verdicts[run][verdict.kind] += 1
                    if verdict.kind in ("target-failure", "reference-failure"):
                        detail = re.sub(r"<stdin>:\d+:\d+: ", "", verdict.detail)[:120]  # one bucket per message
                        failures[run][f"{verdict.kind}: {verdict.stage}: {detail}"] += 1
                    if isinstance(verdict, WrongCode):
                        _keep(args, f"{pipeline.replace('/', '_')}-{kind}-{args.seed}-{done + k}", programs[k],
                              texts[k], verdict)
                        print(f"wrong-code {pipeline} ({kind}) program {done + k}: {verdict.describe()}",
                              file=sys.stderr)
            if len(kinds) == 2:
                mismatches[pipeline] += sum(a != b for a, b in zip(judged[kinds[0]], judged[kinds[1]]))
        done += len(programs)
        print(f"  {done}/{args.count} programs, {time.time() - started:.0f} s", file=sys.stderr)

    n = args.count
    print(f"bench_exec: {n} {args.profile} programs, seed {args.seed}, batches of {args.batch}")
    if args.judge_only:
        print(f"(a) exec rendering {n / seconds['render']:.0f} programs/s; no interpreter or separate "
              "unoptimized run (--judge-only)")
    else:
        print(f"(a) exec rendering {n / seconds['render']:.0f} programs/s; interpreter "
              f"{n / seconds['interpret']:.0f} programs/s; unoptimized run (lower + run, batched) "
              f"{n / seconds['reference']:.1f} programs/s")
        print(f"    interpreter vs unoptimized execution: {n - disagreements - undefined} agree, "
              f"{disagreements} disagree, {undefined} undefined")
    if first_disagreement:
        print(f"    first disagreement: program {first_disagreement[0]}")
    for run, executor in executors.items():  # the drivers exit: their CPU time is ours now
        c = _cpu()
        executor.close()
        cpu[run] += _cpu() - c
    for pipeline in pipelines:
        for kind in kinds:
            run = (pipeline, kind)
            counts = verdicts[run]
            print(f"(b) {pipeline} {kind:>10}: {n / wall[run]:6.1f} programs/s, {n / cpu[run]:6.1f} per CPU "
                  f"second; verdicts {dict(counts)}; false alarms (wrong-code) {counts['wrong-code']}")
            for message, times in failures[run].most_common(3):
                print(f"    {times} x {message}")
        if len(kinds) == 2:
            slow, fast = (pipeline, "process"), (pipeline, "persistent")
            print(f"    in process / by process: {wall[slow] / wall[fast]:.1f}x by the wall clock, "
                  f"{cpu[slow] / cpu[fast]:.1f}x by CPU time; programs with different verdicts: "
                  f"{mismatches[pipeline]}")
    wrong = sum(v["wrong-code"] for v in verdicts.values())
    return 1 if disagreements or undefined or wrong or any(mismatches.values()) else 0


def _cpu() -> float:
    """CPU seconds of this process and of every child it waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _keep(args, name: str, program: str, text: str, verdict: WrongCode) -> None:
    """A wrong-code verdict's program, exec text, optimized text and both outputs."""
    folder = args.artifacts / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "program.mlir").write_text(program)
    (folder / "exec.mlir").write_text(text)
    (folder / "optimized.mlir").write_text(verdict.optimized_text)
    (folder / "reference.txt").write_text(verdict.reference_output)
    (folder / "target.txt").write_text(verdict.target_output)


if __name__ == "__main__":
    sys.exit(main())
