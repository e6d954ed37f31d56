"""Triage of divergence findings (``triage --reference-loom-opt / --reference-mlir-opt``).

For each finding whose sidecar says ``divergence``:

1. **reproduce**: both builds run the program again, each alone in a fresh
   process (:func:`harness.run.divergence.judge_alone`); it must still diverge;
2. **bucket** by the divergence's **signature** (:func:`signature_of`):

   * an outcome divergence is the build that failed worse (a crash, timeout or
     oom over a rejection over an acceptance) and how it failed:
     ``outcome: this build crash:SIGSEGV | FRAME | ...`` or ``outcome: the
     reference rejected | error: MESSAGE``, with the crash signatures of
     :mod:`harness.triage.signature` (type, normalised message, top frames);
     what the other build did is left out: a regression that crashes where
     yesterday's build accepted or rejected is one bug;
   * an output or values divergence is the aspect and the operations of the
     first differing normalized lines: ``output: llvm.call vs llvm.call``
     (this build's first, then the reference's);
3. **minimize** one program per bucket with the grammar's reducer
   (:func:`harness.core.reduce.minimize`) on the derivation tree parsed back
   from the program, keeping candidates that keep the grammar's contract (its
   checker, :func:`harness.contract.contract_checker`) and still diverge: an
   outcome divergence with the same signature; an output or values divergence
   with the same aspect and outcome kinds, its bucket then named by the
   minimized program's first difference (where one bug first shows depends on
   the program around it; in the minimized program it is the bug's own);
4. buckets whose minimized programs have one signature are merged;
5. per bucket, ``divergence/<n>/``: ``program.mlir`` (minimized, in the target's
   rendering), ``input.mlir`` (what both builds read: the exec rendering under
   ``--oracle differential``, else the program), ``primary.txt`` and
   ``reference.txt`` (each build's output and diagnostics), and a section of
   ``divergence/report.md`` with a ready reproduction command.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.contract import contract_checker
from harness.core.grammar import CompiledGrammar
from harness.core.parse import parse
from harness.core.reduce import minimize
from harness.core.render import render
from harness.run.atomic import write_atomically
from harness.run.divergence import Divergence, DivergenceSettings, judge_alone
from harness.run.normalize import operation_of
from harness.run.runner import FAILURE_KINDS, Outcome, OutcomeKind, Target
from harness.triage.signature import crash_signature, normalise_message

__all__ = ["DivergenceBucket", "DivergenceReport", "divergence_findings", "is_divergence", "signature_of",
           "triage_divergences"]


def _rank(outcome: Outcome) -> int:
    return 2 if outcome.kind in FAILURE_KINDS else 1 if outcome.kind is OutcomeKind.REJECTED else 0


def _failure(outcome: Outcome) -> str:
    if outcome.kind in FAILURE_KINDS:
        return crash_signature(outcome.stderr, kind=outcome.kind.value, signal=outcome.signal,
                               returncode=outcome.returncode).key
    lines = [line for line in outcome.stderr.splitlines() if "error:" in line]
    return f"rejected | {normalise_message(lines[0] if lines else outcome.reason)}"


def signature_of(divergence: Divergence) -> str:
    """A divergence's bucket (see the module doc)."""
    if divergence.aspect == "outcome":
        if _rank(divergence.reference) > _rank(divergence.primary):
            return f"outcome: the reference {_failure(divergence.reference)}"
        return f"outcome: this build {_failure(divergence.primary)}"
    if divergence.difference is None:
        return divergence.aspect
    return (f"{divergence.aspect}: {operation_of(divergence.difference.primary)} vs "
            f"{operation_of(divergence.difference.reference)}")


def is_divergence(sidecar: Path) -> bool:
    try:
        return json.loads(sidecar.read_text()).get("finding_kind") == "divergence"
    except (OSError, ValueError):
        return False


def divergence_findings(paths: list[str]) -> list[Path]:
    """The programs of the divergence findings named (``.mlir``) or found in folders."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            out += sorted(p.with_suffix(".mlir") for p in path.rglob("crash-*.json")
                          if is_divergence(p) and p.with_suffix(".mlir").exists())
        elif path.suffix == ".mlir" and not path.name.endswith(".exec.mlir"):
            out.append(path)
    return out


@dataclass
class DivergenceBucket:
    signature: str
    program: str  # the smallest program, minimized: in the target's rendering
    divergence: Divergence
    findings: list[str] = field(default_factory=list)
    evaluations: int = 0
    minimized: bool = False


@dataclass
class DivergenceReport:
    buckets: list[DivergenceBucket]
    not_reproduced: list[str]
    out_dir: Path


class _Judge:
    """A program's divergence (None: none, or the program is off the contract / unreadable)."""

    def __init__(self, target: Target, settings: DivergenceSettings, grammar: CompiledGrammar) -> None:
        self.target, self.settings, self.grammar = target, settings, grammar
        self.checker = contract_checker(grammar)

    def __call__(self, text: str) -> Divergence | None:
        try:
            prepared = self.settings.prepared(text)
        except Exception:  # noqa: BLE001 - a program the preparation refuses cannot diverge
            return None
        return judge_alone(self.target, self.settings, prepared)

    def of_tree(self, tree) -> Divergence | None:
        if self.checker is not None and self.checker(render(tree, self.grammar)):
            return None  # off the contract: a pass owes such a program nothing
        return self(render(tree, self.grammar, self.target.render))


def _keeps(judge: _Judge, bucket: DivergenceBucket) -> Callable[[object], bool]:
    """The minimization predicate: an outcome divergence keeps its signature (the failing
    build's crash signature is stable); an output or values divergence keeps its aspect and
    kinds, and the bucket is named by the minimized program's first difference."""
    def keeps(tree) -> bool:
        found = judge.of_tree(tree)
        if found is None:
            return False
        if bucket.divergence.aspect == "outcome":
            return signature_of(found) == bucket.signature
        return (found.aspect, found.kinds) == (bucket.divergence.aspect, bucket.divergence.kinds)

    return keeps


def triage_divergences(findings: list[Path], target: Target, settings: DivergenceSettings,
                       grammar: CompiledGrammar, out_dir: Path, *, max_evaluations: int = 150,
                       log: Callable[[str], None] = lambda line: None) -> DivergenceReport:
    """Reproduce, bucket, minimize and report the divergence findings (their ``.mlir``)."""
    judge = _Judge(target, settings, grammar)
    buckets: dict[str, DivergenceBucket] = {}
    not_reproduced: list[str] = []
    for path in findings:
        text = path.read_text()
        divergence = judge(text)
        if divergence is None:
            not_reproduced.append(path.name)
            log(f"{path.name}: does not reproduce")
            continue
        signature = signature_of(divergence)
        log(f"{path.name}: {signature}")
        bucket = buckets.setdefault(signature, DivergenceBucket(signature, text, divergence))
        bucket.findings.append(path.name)
        if len(text) < len(bucket.program):
            bucket.program, bucket.divergence = text, divergence
    for bucket in buckets.values():
        parsed = parse(bucket.program, grammar)
        if parsed.tree is None:
            log(f"bucket {bucket.signature}: the grammar does not parse its program ({parsed.reason}); "
                "not minimized (--profile/--grammar names the grammar it came from)")
            continue

        result = minimize(parsed.tree, grammar, _keeps(judge, bucket), max_evaluations=max_evaluations)
        bucket.program = render(result.tree, grammar, target.render)
        bucket.evaluations, bucket.minimized = result.evaluations, True
        bucket.divergence = judge(bucket.program) or bucket.divergence
        bucket.signature = signature_of(bucket.divergence)
        log(f"bucket {bucket.signature}: {len(bucket.findings)} finding(s), minimized in "
            f"{bucket.evaluations} evaluations to {len(bucket.program.splitlines())} lines")
    report = DivergenceReport(_merged(list(buckets.values()), log), not_reproduced, out_dir)
    _write(report, target, settings)
    return report


def _merged(buckets: list[DivergenceBucket], log: Callable[[str], None]) -> list[DivergenceBucket]:
    """Buckets whose minimized programs have one signature made one (the same bug, first met
    at two different places of two programs)."""
    by_signature: dict[str, DivergenceBucket] = {}
    for bucket in buckets:
        same = by_signature.get(bucket.signature)
        if same is None:
            by_signature[bucket.signature] = bucket
        else:
            log(f"bucket {bucket.signature}: {len(bucket.findings)} more finding(s), merged")
            same.findings += bucket.findings
    return list(by_signature.values())


def _side(outcome: Outcome, values: str) -> str:
    parts = [f"// outcome: {outcome.kind} ({outcome.reason})", outcome.stdout.rstrip()]
    if outcome.stderr.strip():
        parts += ["// stderr:", outcome.stderr.rstrip()]
    if values:
        parts += ["// printed values (trusted toolchain):", values.rstrip()]
    return "\n".join(p for p in parts if p) + "\n"


def _write(report: DivergenceReport, target: Target, settings: DivergenceSettings) -> None:
    root = report.out_dir / "divergence"
    root.mkdir(parents=True, exist_ok=True)
    mine, theirs = shlex.join(target.argv), shlex.join(settings.reference_target(target).argv)
    lines = ["# Divergences", "", f"* this build: `{mine}`", f"* reference build: `{theirs}`",
             f"* compared: {settings.compare}", ""]
    for n, bucket in enumerate(report.buckets, 1):
        folder = root / str(n)
        folder.mkdir(exist_ok=True)
        write_atomically(folder / "program.mlir", bucket.program)
        write_atomically(folder / "input.mlir", settings.prepared(bucket.program))
        d = bucket.divergence
        write_atomically(folder / "primary.txt", _side(d.primary, d.primary_values))
        write_atomically(folder / "reference.txt", _side(d.reference, d.reference_values))
        first = d.difference
        lines += [f"## {n}. `{bucket.signature}`", "",
                  f"* findings: {len(bucket.findings)} ({', '.join(bucket.findings[:5])}"
                  f"{', ...' if len(bucket.findings) > 5 else ''})",
                  f"* {d.describe()}",
                  f"* program: `divergence/{n}/program.mlir` ("
                  + (f"minimized in {bucket.evaluations} evaluations" if bucket.minimized else "not minimized")
                  + f"); both builds read `divergence/{n}/input.mlir`",
                  f"* outputs: `divergence/{n}/primary.txt`, `divergence/{n}/reference.txt`",
                  "* reproduce (from `divergence/" + str(n) + "`):", "",
                  "```sh", f"diff <({mine} < input.mlir 2>&1) <({theirs} < input.mlir 2>&1)", "```", ""]
        if first is not None:
            lines += ["First differing line of the normal forms (docs/explanation/normal-form.md):", "",
                      "```", f"this build: {first.primary}", f"reference:  {first.reference}", "```", ""]
        lines += ["```mlir", bucket.program.rstrip(), "```", ""]
    if report.not_reproduced:
        lines += ["## Not reproduced", ""] + [f"* {name}" for name in report.not_reproduced] + [""]
    write_atomically(root / "report.md", "\n".join(lines))
    write_atomically(root / "buckets.json", json.dumps([
        {"signature": b.signature, "aspect": b.divergence.aspect, "kinds": b.divergence.kinds,
         "findings": b.findings, "evaluations": b.evaluations, "minimized": b.minimized,
         "lines": len(b.program.splitlines())} for b in report.buckets], indent=2) + "\n")
