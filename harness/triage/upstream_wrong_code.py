"""The upstream report of a wrong-code bucket (``triage report-upstream``).

From a wrong-code bucket of ``triage --oracle differential`` (oracle
``differential``, kind ``wrong-code``):

1. the bucket's program is judged again by the oracle's own judge
   (:func:`harness.oracles.differential_runner.judge_alone`, the interpreter's
   values as the reference, with the bucket's constant twins) under the culprit
   pass alone, else under the shortest pipeline triage's bisection found
   (``details["pipeline"]``); the first differing call (a region's where one
   differs) is the bug: its function, its input row, the values expected and
   computed;
2. loom's shell is reduced away (:mod:`harness.triage.plain_module`): that
   function of the exec rendering (a region as a ``func.func``), the functions
   it calls, and a ``main`` that calls it once with that row's inputs as
   constants and prints what ``main`` of the exec rendering prints for it.  The
   plain program must verify with the reference toolchain's ``mlir-opt``, print
   the expected values when lowered and run as written, and the computed ones
   after the pass; else the report keeps the whole exec rendering (still no
   loom operation: its ``main`` reads the inputs from a table) and compares the
   call's line;
3. the releases: the bucket's ``details["releases"]`` (``triage --releases``),
   or, where it has none, the releases ``--releases auto`` finds judged now
   (:func:`harness.triage.releases.judge_on_releases`, under the pipeline the
   findings were found with).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace

from harness.execute import inputs
from harness.execute.differential import ExecutorsDisagree, Optimizer, WrongCode
from harness.execute.interpret import interpret_program
from harness.execute.exec_layout import layout_of
from harness.execute.toolchain import LOWERING, ReferenceFailure, Toolchain
from harness.execute.twins import TwinPlan, expected_output
from harness.oracles.differential_runner import judge_alone, oracle_settings
from harness.triage.wrong_code import DISAGREEMENT, disagreement_of
from harness.triage.plain_module import Item, call_once, module_items, module_text, references
from harness.targets.identity import identify_named
from harness.triage.releases import judge_on_releases, releases_from_option
from harness.triage.upstream_report import PROGRAM, ReportError, Step, UpstreamReport, command_name, \
    pass_arguments

__all__ = ["wrong_code_report"]


def _values(output: str, line: int) -> str:
    """The values of main's output ``line`` (1-based), without its function number and row."""
    fields = output.splitlines()[line - 1].split(",")
    return ", ".join(f.strip() for f in fields[2:])


def _without_cells(values: str) -> str:
    """A printed line's values without the memory cells at its end."""
    return ", ".join(values.split(", ")[:-inputs.MEMORY_CELLS])


def _closure(items: list[Item], root: str) -> list[Item]:
    """``root``'s item and every item it refers to, transitively, in module order."""
    by_symbol = {i.symbol: i for i in items if i.symbol}
    wanted, todo = set(), [root]
    while todo:
        symbol = todo.pop()
        if symbol in wanted or symbol not in by_symbol:
            continue
        wanted.add(symbol)
        todo.extend(references(by_symbol[symbol]))
    return [i for i in items if i.symbol in wanted]


def _function(text: str, symbol: str) -> str:
    match = re.search(rf"^\s*func\.func @{re.escape(symbol)}\(.*?^\s*\}}\n", text, re.M | re.S)
    return match.group(0) if match else ""


def _judged(bucket, settings, pipelines: list[str]):
    """(verdict, pipeline, the call that shows the bug, its expected line, its computed line):
    the first pipeline of ``pipelines`` under which the bucket's program gives its kind again."""
    canonical, poison = bucket["minimized_text"], bucket["kind"] == DISAGREEMENT
    for pipeline in dict.fromkeys(p for p in pipelines if p):
        verdict = judge_alone(canonical, settings, pipeline)
        if isinstance(verdict, WrongCode) and verdict.first is not None and not poison:
            difference = next((d for d in verdict.differences if d.function.kind == "region"), verdict.first)
            return (verdict, pipeline, difference, _values(verdict.reference_output, difference.line),
                    _values(verdict.target_output, difference.line))
        if isinstance(verdict, ExecutorsDisagree) and poison:
            found = disagreement_of(settings.exec_text(canonical), verdict)
            if found.side == "optimized" and found.how == "poison" and found.first is not None:
                difference = found.first
                return (verdict, pipeline, difference, _values(verdict.reference_output, difference.line),
                        _values(found.ir_output, difference.line))
    what = "poison" if poison else "wrong code"
    raise ReportError(f"bucket {bucket['id']}'s program no longer gives {what} under "
                      f"{' or '.join(p for p in pipelines if p)} with {settings.optimizer.binary}")


def wrong_code_report(bucket, toolchain: Toolchain | None = None) -> UpstreamReport:
    """The report of a wrong-code bucket, or of an executor-disagreement bucket where the
    optimized module computes poison (see the module docstring).  Raises
    :class:`ReportError` (one line)."""
    toolchain = toolchain or Toolchain()
    details = json.loads(bucket["details"] or "{}")
    argv = json.loads(bucket["target"] or "{}").get("argv") or []
    canonical = bucket["minimized_text"]
    if not argv or canonical is None:
        raise ReportError(f"bucket {bucket['id']} has no optimizer or no minimized program")
    poison = bucket["kind"] == DISAGREEMENT
    if poison and details.get("how") != "poison":
        raise ReportError(f"bucket {bucket['id']} is an executor disagreement without poison "
                          f"({details.get('how')}): a bug of an executor, not of the optimizer, maybe")
    binary = argv[0]
    if identify_named(binary) is None:
        raise ReportError(f"{binary} (the build bucket {bucket['id']} was found with) is not an executable file "
                          "or on PATH")
    twins = details.get("twins")
    # poison shows only in the IR executor, in process (harness.triage.wrong_code_triage does the same)
    settings = oracle_settings(Optimizer(binary=binary), toolchain, runner="persistent" if poison else "process")
    settings = replace(settings, twins=0.0, twin_plan=TwinPlan.parse(twins) if twins else None)
    culprit = bucket["culprit"]
    verdict, pipeline, difference, expected, actual = _judged(
        bucket, settings, ([f"builtin.module({culprit})"] if culprit else []) + [details.get("pipeline") or ""])
    exec_text = settings.exec_text(canonical)
    whole_actual = verdict.target_output if not poison else disagreement_of(exec_text, verdict).ir_output
    interpreted = interpret_program(canonical)
    layout = layout_of(exec_text)
    if any(f.twin_of for f in layout.functions):
        interpreted = expected_output(layout, interpreted)
    interpreter = _values(interpreted, difference.line)
    optimizer = replace(settings.optimizer, pipeline=" ".join(pass_arguments(pipeline)))
    items = module_items(exec_text)

    def prints(program: str, optimize: bool, how: Optimizer | None = None) -> str | None:
        try:
            if optimize:
                done = (how or optimizer).optimize(program)
                if done.returncode != 0:
                    return None
                program = done.stdout
            return toolchain.execute(program)
        except ReferenceFailure:
            return None

    program, no_buffer = call_once(_closure(items, difference.function.symbol), difference.function,
                                   difference.row)
    if no_buffer:  # the call prints no memory cells: the lines without them
        expected, actual, interpreter = (_without_cells(v) for v in (expected, actual, interpreter))
    bare = replace(optimizer, extra_args=())  # no dense table in the plain call: no printing option needed
    symbol = difference.function.symbol
    jit_after = _values(verdict.target_output, difference.line)  # what the JIT prints after the pass
    jit_after = _without_cells(jit_after) if no_buffer else jit_after
    if poison:  # the plain call must get the same optimized function (its poison is the IR executor's word)
        whole = optimizer.optimize(exec_text)
        same = _function(whole.stdout, symbol) if whole.returncode == 0 else None
        done = bare.optimize(program)
        plain_call = (toolchain.verify(program) is None and (prints(program, False) or "").strip() == expected
                      and done.returncode == 0 and bool(same)
                      and _function(done.stdout, symbol).splitlines()[1:] == same.splitlines()[1:]  # its body
                      and (prints(program, True, bare) or "").strip() == jit_after)
    else:
        plain_call = (toolchain.verify(program) is None and (prints(program, False) or "").strip() == expected
                      and (prints(program, True, bare) or "").strip() == actual)
    line = None
    if plain_call:
        optimizer = bare
    else:
        program, line = module_text(items), difference.line
        expected, actual, interpreter = (_values(o, line) for o in (verdict.reference_output, whole_actual,
                                                                    interpreted))
        jit_after = _values(verdict.target_output, line)
    mlir_opt, runner = command_name(toolchain.mlir_opt), command_name(toolchain.runner)
    lower = " ".join([mlir_opt, *LOWERING])
    run = f"{runner} -e main -entry-point-result=void -O0 -shared-libs={toolchain.runtime_library}"
    opt = shlex.join([command_name(binary), *optimizer.extra_args, *pass_arguments(pipeline)])
    pick = "" if line is None else f" | sed -n {line}p | cut -d, -f3-"
    done = optimizer.optimize(program)
    optimized = _function(done.stdout, symbol) if done.returncode == 0 else ""
    steps = [Step(f"{lower} {PROGRAM} | {run}{pick}", "Lowered and run as written", "prints", expected)]
    if poison:
        steps += [Step(f"{opt} {PROGRAM}", "The pass alone", "contains", optimized.rstrip()),
                  Step(f"{opt} {PROGRAM} | {lower} | {run}{pick}", "After the pass, lowered and run the same "
                       "way (the JIT happens not to show the poison)", "prints", jit_after)]
    else:
        steps.append(Step(f"{opt} {PROGRAM} | {lower} | {run}{pick}",
                          f"After `{opt}`, lowered and run the same way", "prints", actual))
    releases = details.get("releases")
    if not releases:
        found = releases_from_option("auto").releases
        releases = [r.to_json() for r in judge_on_releases(canonical, settings, details.get("found_pipeline")
                                                            or pipeline, bucket["kind"], verdict, found)]
    args = ", ".join(f"{kind} {value}" for kind, value in difference.inputs)
    what = f"`@{symbol}({args})`"
    if difference.function.twin_of:
        what += f" (arguments {', '.join(map(str, difference.function.constant_args))} are constants in its body)"
    pass_name = pipeline[len("builtin.module("):-1] if pipeline.startswith("builtin.module(") else pipeline
    how = ("Triage minimized the fuzzer's program and bisected the pipeline to the pass; "
           + (f"loom's shell (unregistered `dataflow.thread` and `loom.spatial_region` operations) was rendered "
              f"away: the region is the function `@{symbol}`, and `main` calls it once with the input that "
              f"shows the bug." if plain_call else
              "the program is loom-fuzz's execution rendering (no loom operation; `main` reads the inputs from a "
              f"table); line {line} of its output is the call that shows the bug."))
    identity = identify_named(binary)
    build = f"{command_name(binary)} (LLVM {identity.version if identity else settings.release or '?'})"
    title = (f"[mlir] {pass_name} introduces poison: {difference.reference} becomes poison" if poison else
             f"[mlir] {pass_name} miscompiles: {difference.reference} becomes {difference.target}")
    return UpstreamReport(
        bucket=bucket["id"], kind="poison" if poison else "wrong-code", title=title,
        program=program, plain=True, build=build, pass_name=pass_name,
        found_with=shlex.join([command_name(binary), *argv[1:]]),
        steps=steps, how_reduced=how, optimized=optimized, expected=expected, actual=actual,
        interpreter=interpreter, inputs=what, releases=releases)
