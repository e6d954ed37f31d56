"""Triage of wrong-code findings (``triage --oracle differential``).

For each finding whose sidecar says ``wrong-code``:

1. **reproduce**: the canonical program is judged again (it must still differ);
2. **bisect the pipeline**: the shortest prefix of the textual pipeline (its
   top-level passes; a nested ``func.func(...)`` kept whole, then bisected
   inside) whose result already differs names the **culprit pass**;
3. **bucket** by culprit pass first, then **minimize** one program per
   culprit with the grammar's reducer (:func:`harness.core.reduce.minimize`)
   on the derivation tree parsed back from the canonical program, keeping
   candidates that are in P1-P24 (:func:`harness.checker.check_text`), defined
   for the interpreter (an :class:`UndefinedBehaviour` candidate is rejected)
   and still differ under the culprit's prefix;
4. the **signature** of the minimized program: the operations of the first
   differing function's body (the region's, else the thread's), sorted; the
   final bucket is ``culprit | signature``;
5. per bucket, ``wrong-code/<n>/``: ``program.mlir`` (minimized, canonical),
   ``test.mlir`` (a lit test: RUN optimizer | lowering | runner | FileCheck;
   CHECK lines with the reference values) and a ``report.md`` line.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from harness.checker import check_text
from harness.core.grammar import CompiledGrammar
from harness.core.parse import parse
from harness.core.reduce import minimize
from harness.core.render import render
from harness.execute.differential import WrongCode, judge
from harness.execute.interpret import InterpretError, interpret_program
from harness.execute.oracle import OracleSettings
from harness.execute.render_exec import ExecRenderError, _split_list, exec_module
from harness.execute.toolchain import LOWERING

__all__ = ["Bucket", "WrongCodeReport", "culprit_pass", "is_wrong_code", "left_to_the_oracle", "pipeline_passes",
           "signature_of", "triage_wrong_code", "wrong_code_findings"]


def is_wrong_code(sidecar: Path) -> bool:
    try:
        return json.loads(sidecar.read_text()).get("finding_kind") == "wrong-code"
    except (OSError, ValueError):
        return False


def left_to_the_oracle(path: Path, names: set[str]) -> str | None:
    """Why the crash triage skips ``path`` (in a folder of ``names``): a wrong-code finding,
    or its exec / optimized sidecar; None for any other file."""
    name = path.name
    for suffix in (".exec.mlir", ".optimized.mlir"):
        if name.endswith(suffix) and name[:-len(suffix)] + ".json" in names:
            return f"sidecar of the finding {name[:-len(suffix)]}"
    if name.endswith(".mlir") and name[:-5] + ".json" in names and is_wrong_code(path.with_suffix(".json")):
        return "a wrong-code finding: triage it with --oracle differential"
    return None


def wrong_code_findings(paths: list[str]) -> list[Path]:
    """The canonical programs of the wrong-code findings named or found in folders."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            out += sorted(p.with_suffix(".mlir") for p in path.rglob("crash-*.json")
                          if is_wrong_code(p) and p.with_suffix(".mlir").exists())
        elif path.suffix == ".mlir":
            out.append(path)
    return out


def pipeline_passes(pipeline: str) -> tuple[str, list[str]]:
    """(anchor, top-level passes) of a textual pipeline ``anchor(p1,p2,...)``; flags
    (``-a -b``) give the anchor ``""`` and one pass per flag."""
    if pipeline.startswith("-"):
        return "", shlex.split(pipeline)
    match = re.fullmatch(r"\s*([\w.]+)\((.*)\)\s*", pipeline, re.S)
    if match is None:
        return "", [pipeline]
    return match.group(1), _split_list(match.group(2))


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
            inner = _split_list(nested.group(2))
            for j in range(1, len(inner) + 1):
                inside = f"{nested.group(1)}({','.join(inner[:j])})"
                candidate = _joined(anchor, passes[:k - 1] + [inside])
                if differs(candidate):
                    return f"{nested.group(1)}({inner[j - 1]})", candidate
        return passes[k - 1], prefix
    return "", pipeline


_OP = re.compile(r"=\s*([a-z_]+\.[\w.]+)|^\s*([a-z_]+\.[\w.]+)", re.M)


def signature_of(exec_text: str, verdict: WrongCode) -> str:
    """The sorted operations of the first differing function's body (region first)."""
    first = next((d for d in verdict.differences if d.function.kind == "region"), verdict.first)
    if first is None:
        return "output"
    match = re.search(rf"^func\.func @{re.escape(first.function.symbol)}\(.*?^\}}", exec_text, re.M | re.S)
    body = match.group(0) if match else ""
    ops = {a or b for a, b in _OP.findall(body)} - {"func.func", "func.return"}
    return ",".join(sorted(ops)) or "empty"


@dataclass
class Bucket:
    culprit: str
    prefix: str  # the shortest differing pipeline
    signature: str = ""
    program: str = ""  # minimized canonical program
    verdict: WrongCode | None = None
    findings: list[str] = field(default_factory=list)
    evaluations: int = 0


@dataclass
class WrongCodeReport:
    buckets: list[Bucket]
    not_reproduced: list[str]
    out_dir: Path


def _judge(text: str, settings: OracleSettings, pipeline: str) -> WrongCode | None:
    """The verdict under ``pipeline``, the reference values from the interpreter
    (a program with undefined behaviour or off P1-P24 is never wrong code)."""
    if check_text(text):
        return None
    try:
        reference = interpret_program(text)
        exec_text = settings.exec_text(text)
    except (InterpretError, ExecRenderError):
        return None
    optimizer = replace(settings.optimizer, pipeline=pipeline)
    verdict = judge(exec_text, optimizer, settings.toolchain, reference_output=reference)
    return verdict if isinstance(verdict, WrongCode) else None


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


def triage_wrong_code(findings: list[Path], settings: OracleSettings, grammar: CompiledGrammar,
                      out_dir: Path, *, max_evaluations: int = 150,
                      log: Callable[[str], None] = lambda line: None) -> WrongCodeReport:
    """Reproduce, bisect, minimize and bucket the wrong-code findings (their ``.mlir``)."""
    pipeline = settings.optimizer.pipeline or ""
    by_culprit: dict[str, Bucket] = {}
    not_reproduced: list[str] = []
    for path in findings:
        text = path.read_text()
        if _judge(text, settings, pipeline) is None:
            not_reproduced.append(path.name)
            log(f"{path.name}: does not reproduce")
            continue
        culprit, prefix = culprit_pass(lambda p: _judge(text, settings, p) is not None, pipeline)
        log(f"{path.name}: culprit {culprit or '(the whole pipeline)'}")
        bucket = by_culprit.setdefault(culprit, Bucket(culprit, prefix, program=text))
        bucket.findings.append(path.name)
        if len(text) < len(bucket.program):
            bucket.program = text
    buckets: dict[tuple[str, str], Bucket] = {}
    for bucket in by_culprit.values():
        parsed = parse(bucket.program, grammar)
        if parsed.tree is not None:
            result = minimize(parsed.tree, grammar, lambda tree: _judge(
                render(tree, grammar), settings, bucket.prefix) is not None,
                max_evaluations=max_evaluations)
            bucket.program = render(result.tree, grammar)
            bucket.evaluations = result.evaluations
        else:
            log(f"bucket {bucket.culprit}: the grammar does not parse its program ({parsed.reason}); "
                "not minimized (--profile/--grammar names the grammar it came from)")
        verdict = _judge(bucket.program, settings, bucket.prefix)
        full = judge(settings.exec_text(bucket.program), replace(settings.optimizer, pipeline=bucket.prefix),
                     settings.toolchain)  # confirmed with the reference toolchain's values
        bucket.verdict = full if isinstance(full, WrongCode) else verdict
        bucket.signature = signature_of(settings.exec_text(bucket.program), bucket.verdict)
        log(f"bucket {bucket.culprit} | {bucket.signature}: {len(bucket.findings)} finding(s), "
            f"minimized in {bucket.evaluations} evaluations")
        key = (bucket.culprit, bucket.signature)
        if key in buckets:
            buckets[key].findings += bucket.findings
        else:
            buckets[key] = bucket
    report = WrongCodeReport(list(buckets.values()), not_reproduced, out_dir)
    _write(report, settings)
    return report


def _write(report: WrongCodeReport, settings: OracleSettings) -> None:
    root = report.out_dir / "wrong-code"
    root.mkdir(parents=True, exist_ok=True)
    lines = ["# Wrong code", ""]
    for n, bucket in enumerate(report.buckets, 1):
        folder = root / str(n)
        folder.mkdir(exist_ok=True)
        (folder / "program.mlir").write_text(bucket.program)
        verdict = bucket.verdict
        (folder / "test.mlir").write_text(lit_test(bucket.program, settings, bucket.prefix,
                                                   verdict.reference_output))
        first = verdict.first
        lines += [f"## {n}. culprit `{bucket.culprit}`, signature `{bucket.signature}`", "",
                  f"* findings: {len(bucket.findings)} ({', '.join(bucket.findings[:5])}"
                  f"{', ...' if len(bucket.findings) > 5 else ''})",
                  f"* shortest differing pipeline: `{bucket.prefix}`",
                  f"* first difference: {verdict.describe()}",
                  f"* reference value {first.reference if first else '?'}, observed "
                  f"{first.target if first else '?'}",
                  f"* lit test: `wrong-code/{n}/test.mlir`; minimized program: `wrong-code/{n}/program.mlir`",
                  "", "```mlir", bucket.program.rstrip(), "```", ""]
    if report.not_reproduced:
        lines += ["## Not reproduced", ""] + [f"* {name}" for name in report.not_reproduced] + [""]
    (root / "report.md").write_text("\n".join(lines))
    (root / "buckets.json").write_text(json.dumps([
        {"culprit": b.culprit, "signature": b.signature, "pipeline": b.prefix, "findings": b.findings,
         "evaluations": b.evaluations} for b in report.buckets], indent=2) + "\n")
