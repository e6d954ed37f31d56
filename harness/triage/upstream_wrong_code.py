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

from harness.execute.differential import Optimizer, WrongCode
from harness.execute.exec_layout import layout_of
from harness.execute.toolchain import LOWERING, ReferenceFailure, Toolchain
from harness.execute.twins import TwinPlan
from harness.oracles.differential_runner import judge_alone, oracle_settings
from harness.triage.plain_module import Item, call_once, module_items, module_text, references
from harness.triage.releases import judge_on_releases, releases_from_option
from harness.triage.upstream_report import PROGRAM, ReportError, Step, UpstreamReport, command_name, \
    pass_arguments

__all__ = ["wrong_code_report"]


def _values(output: str, line: int) -> str:
    """The values of main's output ``line`` (1-based), without its function number and row."""
    fields = output.splitlines()[line - 1].split(",")
    return ", ".join(f.strip() for f in fields[2:])


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


def wrong_code_report(bucket, toolchain: Toolchain | None = None) -> UpstreamReport:
    """The report of a wrong-code bucket (see the module docstring).  Raises
    :class:`ReportError` (one line)."""
    toolchain = toolchain or Toolchain()
    details = json.loads(bucket["details"] or "{}")
    argv = json.loads(bucket["target"] or "{}").get("argv") or []
    canonical = bucket["minimized_text"]
    if not argv or canonical is None:
        raise ReportError(f"bucket {bucket['id']} has no optimizer or no minimized program")
    binary = argv[0]
    twins = details.get("twins")
    settings = oracle_settings(Optimizer(binary=binary), toolchain, runner="process")
    settings = replace(settings, twins=0.0, twin_plan=TwinPlan.parse(twins) if twins else None)
    culprit = bucket["culprit"]
    pipelines = ([f"builtin.module({culprit})"] if culprit else []) + [details.get("pipeline") or ""]
    verdict, pipeline = None, ""
    for pipeline in dict.fromkeys(p for p in pipelines if p):
        verdict = judge_alone(canonical, settings, pipeline)
        if isinstance(verdict, WrongCode) and verdict.first is not None:
            break
    if not isinstance(verdict, WrongCode) or verdict.first is None:
        raise ReportError(f"bucket {bucket['id']}'s program is no longer wrong code under "
                          f"{' or '.join(pipelines)} with {binary}")
    exec_text = settings.exec_text(canonical)
    difference = next((d for d in verdict.differences if d.function.kind == "region"), verdict.first)
    expected = _values(verdict.reference_output, difference.line)
    actual = _values(verdict.target_output, difference.line)
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

    program = call_once(_closure(items, difference.function.symbol), difference.function, difference.row)
    bare = replace(optimizer, extra_args=())  # no dense table in the plain call: no printing option needed
    plain_call = (toolchain.verify(program) is None and (prints(program, False) or "").strip() == expected
                  and (prints(program, True, bare) or "").strip() == actual)
    line = None
    if plain_call:
        optimizer = bare
    else:
        program, line = module_text(items), difference.line
    mlir_opt, runner = command_name(toolchain.mlir_opt), command_name(toolchain.runner)
    lower = " ".join([mlir_opt, *LOWERING])
    run = f"{runner} -e main -entry-point-result=void -O0 -shared-libs={toolchain.runtime_library}"
    opt = shlex.join([command_name(binary), *optimizer.extra_args, *pass_arguments(pipeline)])
    pick = "" if line is None else f" | sed -n {line}p | cut -d, -f3-"
    steps = [Step(f"{lower} {PROGRAM} | {run}{pick}", "Lowered and run as written", "prints", expected),
             Step(f"{opt} {PROGRAM} | {lower} | {run}{pick}", f"After `{opt}`, lowered and run the same way",
                  "prints", actual)]
    done = optimizer.optimize(program)
    optimized = _function(done.stdout, difference.function.symbol) if done.returncode == 0 else ""
    releases = details.get("releases")
    if not releases:
        found = releases_from_option("auto").releases
        releases = [r.to_json() for r in judge_on_releases(canonical, settings, details.get("found_pipeline")
                                                            or pipeline, "wrong-code", verdict, found)]
    args = ", ".join(f"{kind} {value}" for kind, value in difference.inputs)
    what = f"`@{difference.function.symbol}({args})`"
    if difference.function.twin_of:
        what += f" (arguments {', '.join(map(str, difference.function.constant_args))} are constants in its body)"
    pass_name = pipeline[len("builtin.module("):-1] if pipeline.startswith("builtin.module(") else pipeline
    how = ("Triage minimized the fuzzer's program and bisected the pipeline to the pass; "
           + (f"loom's shell (unregistered `dataflow.thread` and `loom.spatial_region` operations) was rendered "
              f"away: the region is the function `@{difference.function.symbol}`, and `main` calls it once with "
              f"the input that shows the bug." if plain_call else
              "the program is loom-fuzz's execution rendering (no loom operation; `main` reads the inputs from a "
              f"table); line {line} of its output is the call that shows the bug."))
    build = f"{command_name(binary)} (LLVM {settings.release or '?'})"
    from harness.targets.identity import identify_named

    identity = identify_named(binary)
    if identity is not None and identity.version:
        build = f"{command_name(binary)} (LLVM {identity.version})"
    return UpstreamReport(
        bucket=bucket["id"], kind="wrong-code",
        title=f"[mlir] {pass_name} miscompiles: {difference.reference} becomes {difference.target}",
        program=program, plain=True, build=build, pass_name=pass_name,
        found_with=shlex.join([command_name(binary), *argv[1:]]),
        steps=steps, how_reduced=how, optimized=optimized, expected=expected, actual=actual,
        interpreter=expected, inputs=what, releases=releases)
