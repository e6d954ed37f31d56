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

``--baseline-driver PATH`` adds a third executor to (b): in process through another driver
binary (a build from before a change), interleaved with the others, so that before and after
are measured in one run; its verdicts must be the same too.

``--ir`` runs (c) instead: the in-process judge's executors side by side, on the issue's
four pipelines (:data:`IR_PIPELINES`), interleaved batch by batch in one run: the IR executor
(``InProcessExecutor(executor="ir")``, no cross-check), the JIT
(``executor="jit"``), and crash-only optimization of the same exec programs through
the same driver (``loomfuzz-mlir-driver --fork-server`` with the pipeline, no ``--exec``:
parse, optimize, nothing else); programs per second of each, the ratios, and agreement:
every program must get the same verdict from both executors (``Same`` carries the output: the
same values) and the IR executor's values must be the Python interpreter's.

``--triage`` runs (d) instead: wrong-code triage's judgements
(:func:`harness.triage.wrong_code.verdict_of`, one program a request with the
interpreter's values as the reference) with the IR executor and with the JIT
alone, interleaved by batches of B: milliseconds per judgement, same verdicts.

``--triage-findings`` runs (e) instead: wrong-code triage per finding, before and after.
``loomfuzz run --oracle differential --twins 1`` (in process) on N programs of seed S through
``--pipeline`` (default :data:`FINDINGS_PIPELINE`, where MLIR 22 has real wrong code) gives
the findings; each of the first ``--findings`` wrong-code ones is triaged alone (reproduce,
bisect, minimize with ``--max-candidates``; harness.triage.wrong_code_triage) with
``--runner process`` and with ``--runner persistent``, one after the other, each into a
database of its own: seconds per finding of each, the ratio, and whether both gave the same
bucket (kind, signature) and the same minimized program.  (A minimization may part ways
where a candidate's optimized module prints poison: the IR executor says poison, the
driver's JIT and ``mlir-runner-22`` each print what their code leaves there, so one judge
may see wrong code where the other sees an executor disagreement.)

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
from harness.execute.exec_rendering import exec_module  # noqa: E402
from harness.execute.toolchain import Toolchain  # noqa: E402

PIPELINES = (
    "builtin.module(canonicalize,cse,sccp)",
    "builtin.module(int-range-optimizations)",
    "builtin.module(remove-dead-values)",
    "builtin.module(arith-expand,canonicalize)",
)


FINDINGS_PIPELINE = "builtin.module(arith-int-range-narrowing{int-bitwidths-supported=8,16,32},canonicalize)"


IR_PIPELINES = (
    "builtin.module(canonicalize,cse)",
    "builtin.module(sccp)",
    "builtin.module(int-range-optimizations)",
    "builtin.module(canonicalize,cse,sccp,symbol-dce)",
)


def bench_ir(args) -> int:
    """(c): the IR executor against the JIT and against crash-only optimization."""
    from harness.execute.inprocess import InProcessExecutor
    from harness.run.driver_binary import find_driver
    from harness.run.persistent_runner import PersistentRunner
    from harness.run.persistent_target import PersistentTarget
    from harness.run.outcome import OutcomeKind
    from harness.targets.target import Target

    grammar = load_grammar(None, args.profile)
    render = renderer(grammar, "canonical").render
    toolchain = Toolchain()
    pipelines = args.pipeline or list(IR_PIPELINES)
    binary = find_driver("mlir-opt")
    ir = InProcessExecutor(toolchain, executor="ir", cross_check=0.0)
    jit = InProcessExecutor(toolchain, executor="jit")
    crash = {}
    for pipeline in pipelines:
        process = Target(name="mlir-opt", argv=("mlir-opt-22", f"--pass-pipeline={pipeline}"), timeout=60.0,
                         memory_mb=None)
        crash[pipeline] = PersistentRunner(PersistentTarget(
            process, (binary, f"--pass-pipeline={pipeline}", "--fork-server"), 5000, fork_server=True))
    wall = Counter()
    differ = Counter()  # pipeline -> programs whose verdicts differ between the executors
    not_interpreter = Counter()  # pipeline -> IR values that are not the interpreter's
    kinds = Counter()
    trees = generate(grammar, "fast", args.seed, args.count)
    done = 0
    started = time.time()
    while done < args.count:
        programs = [render(next(trees)) for _ in range(min(args.batch, args.count - done))]
        texts = [exec_module(p) for p in programs]
        expected = []
        for program in programs:
            try:
                expected.append(interpret_program(program))
            except InterpretError:
                expected.append(None)  # undefined: the oracle does not judge it
        for pipeline in pipelines:
            optimizer = Optimizer(pipeline=pipeline)
            t = time.perf_counter()
            for text in texts:
                outcome = crash[pipeline].run(text)
                if outcome.kind is not OutcomeKind.ACCEPTED:
                    kinds[f"crash-only {outcome.kind.value}"] += 1
            wall[(pipeline, "crash-only")] += time.perf_counter() - t
            t = time.perf_counter()
            by_ir = ir.judge_many(texts, optimizer)
            wall[(pipeline, "ir")] += time.perf_counter() - t
            t = time.perf_counter()
            by_jit = jit.judge_many(texts, optimizer)
            wall[(pipeline, "jit")] += time.perf_counter() - t
            for k, (a, b) in enumerate(zip(by_ir, by_jit)):
                kinds[a.kind] += 1
                if a != b:
                    differ[pipeline] += 1
                    print(f"differ: {pipeline} program {done + k}: ir {a.kind}, jit {b.kind}", file=sys.stderr)
                if expected[k] is not None and getattr(a, "output", None) != expected[k]:
                    not_interpreter[pipeline] += 1
                    print(f"not the interpreter's: {pipeline} program {done + k}: {a.kind}", file=sys.stderr)
        done += len(programs)
        print(f"  {done}/{args.count} programs, {time.time() - started:.0f} s", file=sys.stderr)
    for runner in crash.values():
        runner.close()
    n = args.count
    print(f"bench_exec --ir: {n} {args.profile} programs, seed {args.seed}, batches of {args.batch}, "
          f"{len(pipelines)} pipelines ({n * len(pipelines)} judgements per executor)")
    for pipeline in pipelines:
        rate = {how: n / wall[(pipeline, how)] for how in ("crash-only", "ir", "jit")}
        print(f"(c) {pipeline}: crash-only {rate['crash-only']:.0f}, IR executor {rate['ir']:.0f}, "
              f"JIT {rate['jit']:.0f} programs/s; judge (IR) / crash-only "
              f"{rate['crash-only'] / rate['ir']:.2f}x the cost, JIT / IR {rate['ir'] / rate['jit']:.1f}x; "
              f"verdicts that differ {differ[pipeline]}, IR values not the interpreter's "
              f"{not_interpreter[pipeline]}")
    total = {how: sum(wall[(p, how)] for p in pipelines) for how in ("crash-only", "ir", "jit")}
    print(f"    all: judge (IR) {total['ir'] / total['crash-only']:.2f}x crash-only, JIT "
          f"{total['jit'] / total['crash-only']:.2f}x crash-only, IR {total['jit'] / total['ir']:.1f}x "
          f"faster than the JIT; verdicts {dict(kinds)}")
    print(f"    IR executor: {ir.counts.summary()}")
    ir.close()
    jit.close()
    return 1 if sum(differ.values()) or sum(not_interpreter.values()) else 0


def bench_triage(args) -> int:
    """(d): wrong-code triage's judgements (verdict_of: one program a request, the
    interpreter's reference) with the IR executor and with the JIT alone, interleaved."""
    from dataclasses import replace

    from harness.oracles.differential_runner import close_executors, oracle_settings
    from harness.triage.wrong_code import verdict_of

    grammar = load_grammar(None, args.profile)
    render = renderer(grammar, "canonical").render
    programs = [render(tree) for tree in generate(grammar, "fast", args.seed, args.count)]
    pipeline = (args.pipeline or [PIPELINES[0]])[0]
    base = oracle_settings(Optimizer(pipeline=pipeline), runner="persistent")
    wall, kinds = Counter(), {"ir": [], "jit": []}
    for at in range(0, len(programs), args.batch):
        for how in ("ir", "jit"):
            settings = replace(base, in_process=how, cross_check=0.0)
            t = time.perf_counter()
            for program in programs[at:at + args.batch]:
                kinds[how].append(getattr(verdict_of(program, settings, pipeline), "kind", None))
            wall[how] += time.perf_counter() - t
    close_executors()
    n = len(programs)
    same = kinds["ir"] == kinds["jit"]
    print(f"(d) triage judgements one at a time, {n} {args.profile} programs, {pipeline}: IR executor "
          f"{1000 * wall['ir'] / n:.1f} ms, JIT {1000 * wall['jit'] / n:.1f} ms a judgement "
          f"({wall['jit'] / wall['ir']:.1f}x); the same verdicts: {same}")
    return 0 if same else 1


def bench_triage_findings(args) -> int:
    """(e): wrong-code triage per finding, through processes and in process, side by side."""
    import json
    import subprocess
    import tempfile

    from harness.oracles.differential_runner import close_executors, oracle_settings
    from harness.triage.crashdb import TriageDB
    from harness.triage.oracle_runs import OracleRunConfig
    from harness.triage.wrong_code_triage import run_wrong_code_triage

    pipeline = (args.pipeline or [FINDINGS_PIPELINE])[0]
    grammar = load_grammar(None, args.profile)
    work = Path(tempfile.mkdtemp(prefix="bench-exec-triage-"))
    started = time.perf_counter()
    found = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--profile", args.profile, "--oracle",
                            "differential", "--pipeline", pipeline, "-n", str(args.count), "--seed", str(args.seed),
                            "--twins", "1", "--runner", "persistent", "--artifacts", str(work / "found"),
                            "--no-progress"], cwd=ROOT, capture_output=True, text=True)
    hunt = time.perf_counter() - started
    findings = [p.with_suffix(".mlir") for p in sorted((work / "found").glob("crash-*.json"))
                if json.loads(p.read_text()).get("finding_kind") == "wrong-code"][:args.findings]
    print(f"(e) {args.count} {args.profile} programs, seed {args.seed}, {pipeline}, --twins 1: "
          f"{len(findings)} wrong-code finding(s) triaged (run in process: {hunt:.1f} s, exit {found.returncode})")
    if not findings:
        print(found.stderr[-2000:], file=sys.stderr)
        return 1
    wall, buckets = Counter(), {"process": [], "persistent": []}
    for k, finding in enumerate(findings):
        for runner in ("process", "persistent"):
            settings = oracle_settings(Optimizer(pipeline=pipeline), runner=runner)
            db = work / f"{runner}-{k}.db"
            config = OracleRunConfig([finding], grammar, db_path=str(db), out_dir=None, jobs=1,
                                     max_evaluations=args.max_candidates, progress=False)
            t = time.perf_counter()
            run_wrong_code_triage(config, settings, log=lambda message: None)
            wall[runner] += time.perf_counter() - t
            with TriageDB(str(db)) as opened:
                buckets[runner] += [(b["kind"], b["signature"], b["minimized_text"], b["min_evaluations"])
                                    for b in opened.buckets("differential")]
        print(f"  finding {k + 1}/{len(findings)}: process {wall['process']:.1f} s, in process "
              f"{wall['persistent']:.1f} s so far", file=sys.stderr)
    close_executors()
    n = len(findings)
    pairs = list(zip(buckets["process"], buckets["persistent"]))
    signatures = sum(a[:2] == b[:2] for a, b in pairs)
    programs = sum(a[2] == b[2] for a, b in pairs)
    candidates = sum(b[3] or 0 for b in buckets["process"])
    print(f"(e) wrong-code triage per finding (reproduce, bisect, minimize; up to {args.max_candidates} "
          f"candidates, {candidates / n:.0f} on average): process path {wall['process'] / n:.2f} s, in process "
          f"{wall['persistent'] / n:.2f} s ({wall['process'] / wall['persistent']:.1f}x); the same bucket "
          f"(kind, signature) {signatures} of {n}, the same minimized program {programs} of {n}")
    for a, b in pairs:
        same = "same program" if a[2] == b[2] else f"minimized to {len(a[2])} / {len(b[2])} characters"
        print(f"    {b[0]}: {b[1]} ({same})")
    return 0 if signatures == n == len(pairs) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
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
    parser.add_argument("--baseline-driver", metavar="PATH",
                        help="(b): a third executor, in process through this driver binary (the build "
                             "before a change), interleaved with the others: before and after in one run")
    parser.add_argument("--quick", action="store_true", help="96 programs, one pipeline, batches of 24")
    parser.add_argument("--ir", action="store_true",
                        help="(c) alone: the IR executor against the JIT and crash-only optimization")
    parser.add_argument("--triage", action="store_true",
                        help="(d) alone: wrong-code triage's judgements, IR executor against the JIT")
    parser.add_argument("--triage-findings", action="store_true",
                        help="(e) alone: wrong-code triage per finding, process path against in process")
    parser.add_argument("--findings", type=int, default=4, help="(e): wrong-code findings triaged (default 4)")
    parser.add_argument("--max-candidates", type=int, default=150,
                        help="(e): minimization candidates per finding (default 150, as triage's default)")
    args = parser.parse_args()
    if args.triage_findings:
        if args.quick:
            args.count, args.findings, args.max_candidates = 400, 2, 40
        return bench_triage_findings(args)
    if args.triage:
        if args.quick:
            args.count, args.batch = 40, 20
        return bench_triage(args)
    if args.ir:
        if args.quick:
            args.count, args.batch = 96, 24
        return bench_ir(args)
    if args.quick:
        args.count, args.batch, args.pipeline = 96, 24, args.pipeline or [PIPELINES[0]]
    pipelines = [] if args.agreement_only else args.pipeline or list(PIPELINES)
    kinds = ["process", "persistent"] if args.runner == "both" else [args.runner]
    if args.baseline_driver:
        kinds.insert(-1, "baseline")
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
    executors = {run: make_executor("persistent", toolchain, driver=args.baseline_driver)
                 if run[1] == "baseline" else make_executor(run[1], toolchain) for run in runs}
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
            if len(kinds) >= 2:  # each program's verdict from every executor
                mismatches[pipeline] += sum(len(set(map(repr, v))) > 1 for v in zip(*judged.values()))
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
        slow = (pipeline, "process")
        for fast in [(pipeline, kind) for kind in ("baseline", "persistent") if kind in kinds]:
            if slow[1] in kinds:
                print(f"    {fast[1]} / by process: {wall[slow] / wall[fast]:.1f}x by the wall clock, "
                      f"{cpu[slow] / cpu[fast]:.1f}x by CPU time")
        if "baseline" in kinds:
            before, after = (pipeline, "baseline"), (pipeline, "persistent")
            print(f"    in process, this build / the baseline driver: {wall[before] / wall[after]:.2f}x by the "
                  f"wall clock, {cpu[before] / cpu[after]:.2f}x by CPU time")
        if len(kinds) >= 2:
            print(f"    programs with different verdicts: {mismatches[pipeline]}")
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
