"""The pieces of wrong-code triage (``triage --oracle differential``).

The findings of the differential oracle (kinds ``wrong-code``,
``reference-failure``, ``target-failure``, ``executor-disagreement``: :data:`KINDS`)
are triaged by :mod:`harness.triage.wrong_code_triage` with these:

* :func:`left_to_the_oracle`: what crash triage leaves to this triage (the
  findings, found with :func:`harness.triage.oracle_runs.findings_in`, whose
  ``.json`` sidecar says one of :data:`KINDS`, and their sidecars);
* :func:`verdict_of`: a program judged under a pipeline by the oracle's own
  :func:`harness.oracles.differential_runner.judge_alone` (the reference values
  from the interpreter; a program off P1-P24 or with undefined behaviour has
  no verdict: it is never wrong code); a stop request raises
  :class:`harness.run.stop_requests.Stopped`;
* :func:`culprit_pass`: **pipeline bisection**, the shortest prefix of the
  textual pipeline (its top-level passes; a nested ``func.func(...)`` kept
  whole, then bisected inside) whose result already gives the finding names
  the culprit pass;
* :func:`signature_of`: the documented signature of a minimized program: for
  ``wrong-code``, the operations of the first differing function's body (the
  first differing region's, else the thread's), sorted and joined by commas;
  for ``executor-disagreement``, which module the executors read differently,
  how (``poison``: the IR executor printed poison; ``undefined``: it found
  undefined behaviour; ``values``: other values) and the operations of the first
  function whose lines differ between the two executors, in that module
  (``optimized poison: arith.extui,arith.muli,arith.trunci``: :func:`disagreement_of`);
  for a failure kind, its stage and the first line of its detail with numbers
  replaced by ``N``;
* :func:`lit_test`: a lit test (RUN: optimizer | lowering | runner |
  FileCheck; CHECK lines with the reference values) that fails on the buggy
  optimizer and passes on a good one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from harness.brackets import split_top_level
from harness.execute.differential import ExecutorsDisagree, Verdict, WrongCode, differences, printed_poison
from harness.oracles.differential_runner import OracleSettings, judge_alone
from harness.execute.exec_layout import layout_of
from harness.execute.toolchain import LOWERING
from harness.triage.oracle_runs import sidecar_kind, stop_point

__all__ = ["DISAGREEMENT", "KINDS", "Disagreement", "culprit_pass", "disagreement_of", "left_to_the_oracle", "lit_test",
           "pipeline_passes", "signature_of", "verdict_of"]

#: The finding kinds of the differential oracle that its triage takes.
KINDS = ("wrong-code", "reference-failure", "target-failure", "executor-disagreement")
#: The kind of two executors that give other outputs (judged by the in-process executor only).
DISAGREEMENT = "executor-disagreement"


def left_to_the_oracle(path: Path, names: set[str]) -> str | None:
    """Why the crash triage skips ``path`` (in a folder of ``names``): a wrong-code finding,
    or its exec / optimized sidecar; None for any other file."""
    name = path.name
    for suffix in (".exec.mlir", ".optimized.mlir"):
        if name.endswith(suffix) and name[:-len(suffix)] + ".json" in names:
            return f"sidecar of the finding {name[:-len(suffix)]}"
    if name.endswith(".mlir") and name[:-5] + ".json" in names:
        kind = sidecar_kind(path.with_suffix(".json"))
        if kind in KINDS:
            return f"a {kind} finding: triage it with --oracle differential"
    return None


def pipeline_passes(pipeline: str) -> tuple[str, list[str]]:
    """(anchor, top-level passes) of a textual pipeline ``anchor(p1,p2,...)``; flags
    (``-a -b``) give the anchor ``""`` and one pass per flag."""
    if pipeline.startswith("-"):
        return "", shlex.split(pipeline)
    match = re.fullmatch(r"\s*([\w.]+)\((.*)\)\s*", pipeline, re.S)
    if match is None:
        return "", [pipeline]
    return match.group(1), split_top_level(match.group(2))


def _joined(anchor: str, passes: list[str]) -> str:
    return " ".join(passes) if not anchor else f"{anchor}({','.join(passes)})"


def culprit_pass(differs: Callable[[str], bool], pipeline: str) -> tuple[str, str]:
    """(culprit pass, the shortest differing prefix pipeline); a nested ``op(...)`` pass is
    bisected inside.  ``("", pipeline)`` when no prefix differs (the whole pipeline does)."""
    anchor, passes = pipeline_passes(pipeline)
    for k in range(1, len(passes) + 1):
        prefix = _joined(anchor, passes[:k])
        if not differs(prefix):
            continue
        nested = re.fullmatch(r"([\w.]+)\((.*)\)", passes[k - 1], re.S)
        if nested:
            inner = split_top_level(nested.group(2))
            for j in range(1, len(inner) + 1):
                inside = f"{nested.group(1)}({','.join(inner[:j])})"
                candidate = _joined(anchor, passes[:k - 1] + [inside])
                if differs(candidate):
                    return f"{nested.group(1)}({inner[j - 1]})", candidate
        return passes[k - 1], prefix
    return "", pipeline


_OP = re.compile(r"=\s*([a-z_]+\.[\w.]+)|^\s*([a-z_]+\.[\w.]+)", re.M)


def _operations(text: str, symbol: str) -> str | None:
    """The operations of function ``@symbol``'s body in ``text``, sorted (None: no such function)."""
    match = re.search(rf"^([ \t]*)func\.func @{re.escape(symbol)}\(.*?^\1\}}", text, re.M | re.S)
    if match is None:
        return None
    ops = {a or b for a, b in _OP.findall(match.group(0))} - {"func.func", "func.return"}
    return ",".join(sorted(ops)) or "empty"


def _first_region(found) -> object | None:
    return next((d for d in found if d.function.kind == "region"), found[0] if found else None)


@dataclass(frozen=True)
class Disagreement:
    """Where two executors read a module differently (:func:`disagreement_of`)."""

    side: str  # original | optimized: the module they execute differently
    how: str  # poison | undefined | values
    jit_output: str  # what the JIT prints of that module
    ir_output: str  # what the IR executor prints of it
    first: object | None  # the first Difference (JIT as the reference, the IR executor's value)
    operations: str  # of the first differing function (a region's if one differs), in that module

    def describe(self) -> str:
        where = self.first.describe().replace("after optimization", "by the IR executor").replace(
            "before", "by the JIT") if self.first is not None else "the outputs differ"
        return f"{self.side} module, {self.how}: {where}"


def disagreement_of(exec_text: str, verdict: ExecutorsDisagree) -> Disagreement:
    """The module of ``verdict`` the executors disagree on (the original first), how, and the
    first function whose lines differ between them."""
    side, jit, ir = "optimized", verdict.target_output, verdict.ir_target_output
    if verdict.ir_reference_output != verdict.reference_output:
        side, jit, ir = "original", verdict.reference_output, verdict.ir_reference_output
    how = "poison" if printed_poison(ir) else "undefined" if "undefined behaviour" in verdict.note else "values"
    layout = layout_of(exec_text)
    try:
        first = _first_region(differences(layout, jit, ir))
    except (ValueError, IndexError):  # an output cut short where the IR executor stopped
        first = None
    module = verdict.optimized_text if side == "optimized" else exec_text
    operations = "output"
    if first is not None:
        operations = _operations(module, first.function.symbol) or _operations(exec_text, first.function.symbol) \
            or "empty"
    return Disagreement(side, how, jit, ir, first, operations)


def signature_of(exec_text: str, verdict: Verdict) -> str:
    """The signature of a minimized program's verdict (see the module docstring)."""
    if isinstance(verdict, ExecutorsDisagree):
        found = disagreement_of(exec_text, verdict)
        return f"{found.side} {found.how}: {found.operations}"
    if not isinstance(verdict, WrongCode):
        detail = (getattr(verdict, "detail", "") or "").strip().splitlines()
        return f"{getattr(verdict, 'stage', '?')}: " + re.sub(r"\d+", "N", detail[0] if detail else "")[:160]
    first = _first_region(verdict.differences)
    if first is None:
        return "output"
    return _operations(exec_text, first.function.symbol) or "empty"


def verdict_of(text: str, settings: OracleSettings, pipeline: str, *, confirm: bool = False) -> Verdict | None:
    """The oracle's judgement of ``text`` alone under ``pipeline``
    (:func:`harness.oracles.differential_runner.judge_alone`), unless the triage is stopping."""
    stop_point()  # the triage is stopping: no new judgement
    return judge_alone(text, settings, pipeline, confirm=confirm)


def lit_test(program: str, settings: OracleSettings, pipeline: str, reference: str) -> str:
    """A lit test: fails while the optimizer changes the values, passes once it keeps them."""
    binary = settings.optimizer.binary
    binary = str(Path(binary).resolve()) if "/" in binary else binary  # runs from lit's folder
    optimizer = shlex.join(replace(settings.optimizer, binary=binary, pipeline=pipeline).argv())
    lowering = shlex.join([settings.toolchain.mlir_opt, *LOWERING])
    runner = shlex.join([settings.toolchain.runner, "-e", "main", "-entry-point-result=void", "-O0",
                         f"-shared-libs={settings.toolchain.runtime_library}"])
    lines = [f"// RUN: {optimizer} < %s | {lowering} | {runner} | FileCheck-22 %s"]
    for k, line in enumerate(reference.splitlines()):
        lines.append(f"// {'CHECK' if k == 0 else 'CHECK-NEXT'}: {{{{^}}}}{line}{{{{$}}}}")
    return "\n".join(lines) + "\n" + settings.exec_text(program)
