"""Triage of divergence findings (two builds of one tool) into the triage database.

``loomfuzz triage INPUT...`` with a reference build (``--reference-loom-opt`` /
``--reference-mlir-opt``, or, without either, the one the findings' sidecars
record: :func:`recorded_reference`) takes the findings whose sidecar says
``divergence`` and keeps its results in the triage database as buckets of
oracle ``divergence``, kind ``divergence``
(:class:`harness.triage.buckets.OracleBucket`), in the two stages of
:mod:`harness.triage.oracle_runs` (threads, resume and stop as for wrong code);
this module is the divergence's part:

1. **reproduce**: both builds run the program again, each alone
   (:func:`harness.oracles.divergence_runner.judge_alone`: a fresh process, or the driver as
   below); it must still diverge.
   The member's ``details`` hold the divergence's signature, aspect and kinds;
2. **group** by the divergence's **signature** (:func:`signature_of`):

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
3. **minimize** once per group, from its smallest program, with the grammar's
   reducer (:func:`harness.core.reduce.minimize`) on the derivation tree parsed
   back from the program, keeping candidates that keep the grammar's contract
   (its checker, :func:`harness.contract.contract_checker`) and still diverge
   the same way: an outcome divergence with the same signature; an output or
   values divergence with the same aspect and outcome kinds, its bucket then
   named by the minimized program's signature (where one bug first shows
   depends on the program around it; in the minimized program it is the
   bug's own).  Groups whose minimized programs have one signature are one
   bucket (the database's bucket of that kind and signature).

Under ``--oracle differential`` both builds read the exec rendering, with the constant
twins each finding was found with (its ``NAME.exec.mlir`` records them:
:func:`harness.triage.wrong_code_triage.twin_plans`): a finding is reproduced and
minimized with exactly those twins (none for one found without), never the share
drawn again from a smaller candidate, whose own plan would be other twins.  The
member's and the bucket's ``details`` say which (``twins``).  Both builds' outputs are executed by the judge the
settings name (:mod:`harness.oracles.divergence_execution`: with the persistent runner, in
the driver, the primary build ``mlir-opt-22`` optimized there too; the reference
build is always a process of its own); a part that cannot run so is said in one
line at the start, and the outputs the driver died on (executed by the toolchain's
processes instead) in one line at the end.

A bucket keeps both builds' command lines, the comparison, the first
difference and a ready reproduction command in ``details``, and each build's
output (normalised, :func:`side_text`) as ``observed_output`` (this build)
and ``reference_output`` (the reference build); the reports write them as
``bucket-N/observed.txt`` and ``reference.txt``, with ``input.mlir`` (what
both builds read) and ``reproduce.sh`` (:mod:`harness.triage.report`).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from harness.contract import contract_checker
from harness.core.compiled import CompiledGrammar
from harness.core.parse import parse
from harness.core.reduce import minimize
from harness.core.render import render
from harness.execute.twins import TwinPlan
from harness.oracles.divergence_execution import ExecPreparation
from harness.oracles.divergence_runner import (Divergence, DivergenceSettings, ReferenceBuildError, judge_alone,
                                    reproduction_command)
from harness.run.normalize import normalize, operation_of
from harness.run.outcome import FAILURE_KINDS, Outcome, OutcomeKind
from harness.targets.target import Target
from harness.triage.buckets import OracleBucket
from harness.triage.oracle_runs import (Group, Judged, OracleRunConfig, OracleSummary, findings_in,
                                        minimized_fields, run_oracle_triage, stop_point)
from harness.triage.signature import crash_signature, normalise_message
from harness.triage.wrong_code_triage import twin_plans

__all__ = ["BUILD_INPUT", "KIND", "ORACLE", "DivergenceTriage", "RecordedReference", "divergence_findings",
           "recorded_reference", "run_divergence_triage", "side_text", "signature_of"]

#: The database's name of this triage (harness.triage.schema) and its finding kind.
ORACLE = KIND = "divergence"
#: The file both builds read in a bucket's report folder (its reproduction command reads it).
BUILD_INPUT = "input.mlir"


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


def divergence_findings(paths: Sequence[str], *, unrecorded: bool = False) -> list[Path]:
    """The programs of the divergence findings named (``.mlir``) or found in folders (with
    ``unrecorded``, also the ``.mlir`` named without a finding's sidecar)."""
    return findings_in(paths, (KIND,), unrecorded=unrecorded)


# ------------------------------------------------------------- the recorded reference


@dataclass(frozen=True)
class RecordedReference:
    """The reference build the findings' sidecars record (``reference_target``)."""

    binary: str
    compare: str
    sidecar: Path  # the first sidecar that records it


def recorded_reference(findings: Sequence[Path]) -> RecordedReference:
    """The one reference build the findings' ``.json`` sidecars record.  Raises
    :class:`ReferenceBuildError` (one line naming the sidecar and the binary; exit 2) when
    none records one, two record different builds, or the recorded binary is gone."""
    found: dict[str, RecordedReference] = {}
    for program in findings:
        sidecar = program.with_suffix(".json")
        try:
            record = json.loads(sidecar.read_text())
            binary = record["reference_target"]["argv"][0]
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
        found.setdefault(binary, RecordedReference(binary, record.get("compare") or "output", sidecar))
    if not found:
        raise ReferenceBuildError("no finding's .json records its reference build (reference_target): "
                                  "give --reference-loom-opt or --reference-mlir-opt")
    if len(found) > 1:
        first, second = list(found.values())[:2]
        raise ReferenceBuildError(f"the findings record more than one reference build ({first.binary} in "
                                  f"{first.sidecar}, {second.binary} in {second.sidecar}): triage them "
                                  "apart, or name one with --reference-loom-opt / --reference-mlir-opt")
    (recorded,) = found.values()
    if "/" in recorded.binary and not (os.path.isfile(recorded.binary) and os.access(recorded.binary, os.X_OK)):
        raise ReferenceBuildError(f"{recorded.sidecar}: the reference build it records, {recorded.binary}, does "
                                  "not exist or is not executable: name another with --reference-loom-opt / "
                                  "--reference-mlir-opt")
    return recorded


# ------------------------------------------------------------------------ triage


def side_text(outcome: Outcome, values: str) -> str:
    """One build's side of a divergence as a bucket keeps it: its outcome, its output in the
    normal form (harness.run.normalize), its diagnostics and, where executed, its values."""
    printed = normalize(outcome.stdout) if outcome.kind is OutcomeKind.ACCEPTED else outcome.stdout
    parts = [f"// outcome: {outcome.kind} ({outcome.reason})", printed.rstrip()]
    if outcome.stderr.strip():
        parts += ["// stderr:", outcome.stderr.rstrip()[-8000:]]
    if values:
        parts += ["// printed values (trusted toolchain):", values.rstrip()]
    return "\n".join(p for p in parts if p) + "\n"


@dataclass
class DivergenceTriage:
    """The divergence's part of the two stages (harness.triage.oracle_runs.OracleTriage)."""

    target: Target  # this build, as the findings ran it
    settings: DivergenceSettings
    grammar: CompiledGrammar
    name: str = ORACLE
    #: each finding's constant twins (program text -> plan, from its NAME.exec.mlir); a
    #: program without one is judged without twins
    plans: dict[str, TwinPlan] = field(default_factory=dict)
    checker: Callable | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.checker = contract_checker(self.grammar)

    @property
    def _exec(self) -> bool:
        """Whether both builds read the exec rendering (and so may have twins)."""
        return isinstance(self.settings.prepare, ExecPreparation)

    def settings_for(self, twins: str | None) -> DivergenceSettings:
        """The settings that prepare every program with exactly the twins ``twins`` (a plan's
        text; None: none); the settings as they are where the builds read the program itself."""
        if not self._exec:
            return self.settings
        plan = TwinPlan.parse(twins) if twins else None
        return replace(self.settings, prepare=self.settings.prepare.with_plan(plan), twins=0.0)

    def _twins(self, text: str) -> str | None:
        plan = self.plans.get(text)
        return plan.text() if plan is not None else None

    def target_json(self) -> dict:
        return {"name": self.target.name, "argv": list(self.target.argv), "render": self.target.render,
                "reference": list(self.settings.reference_target(self.target).argv),
                "compare": self.settings.compare}

    def divergence(self, text: str, settings: DivergenceSettings | None = None) -> Divergence | None:
        """Both builds on ``text`` (in the target's rendering), each alone, prepared by
        ``settings`` (None: this triage's); None: they agree, or the preparation refuses the
        program (it cannot diverge)."""
        stop_point()
        settings = settings or self.settings
        try:
            prepared = settings.prepared(text)
        except Exception:  # noqa: BLE001 - a program the preparation refuses cannot diverge
            return None
        return judge_alone(self.target, settings, prepared)

    def judge(self, text: str) -> Judged:
        twins = self._twins(text)
        found = self.divergence(text, self.settings_for(twins))
        if found is None:
            return Judged(None, "does not reproduce: the two builds agree")
        details = {"signature": signature_of(found), "aspect": found.aspect, "kinds": found.kinds}
        if self._exec:
            details["twins"] = twins
        return Judged(KIND, f"divergence ({found.aspect}): {found.describe()}"[:300], details)

    def group_of(self, details: dict) -> tuple:
        return (details["signature"],)

    def _same_way(self, details: dict, settings: DivergenceSettings) -> Callable[[object], bool]:
        """The minimization predicate: in the contract, and still diverging the same way (an
        outcome divergence: the same signature, the failing build's crash signature being
        stable; an output or values divergence: the same aspect and kinds)."""
        def keeps(tree) -> bool:
            if self.checker is not None and self.checker(render(tree, self.grammar)):
                return False  # off the contract: a pass owes such a program nothing
            found = self.divergence(render(tree, self.grammar, self.target.render), settings)
            if found is None:
                return False
            if details["aspect"] == "outcome":
                return signature_of(found) == details["signature"]
            return (found.aspect, found.kinds) == (details["aspect"], details["kinds"])

        return keeps

    def minimize(self, group: Group, max_evaluations: int) -> OracleBucket:
        started = time.monotonic()
        twins = group.details.get("twins")  # the smallest member's: it is the one minimized
        settings = self.settings_for(twins)
        parsed = parse(group.text, self.grammar)
        program, text, evaluations, steps = None, group.text, 0, ()
        if parsed.tree is not None:
            result = minimize(parsed.tree, self.grammar, self._same_way(group.details, settings),
                              max_evaluations=max_evaluations)
            program, text = result.tree, render(result.tree, self.grammar, self.target.render)
            evaluations, steps = result.evaluations, tuple(result.steps)
        found = self.divergence(text, settings)
        if found is None:  # a flaky build: keep the original program
            program, text = parsed.tree, group.text
            found = self.divergence(text, settings)
        if found is None:  # not even that: a bucket of its own, said so
            signature, message, mine, theirs, first = "unconfirmed", "the builds agreed when judged again", "", "", None
        else:
            signature, message = signature_of(found), found.describe()[:300]
            mine, theirs = side_text(found.primary, found.primary_values), side_text(found.reference,
                                                                                      found.reference_values)
            first = found.difference.describe() if found.difference is not None else None
        reference = self.settings.reference_target(self.target)
        details = {"this_build": shlex.join(self.target.argv), "reference_build": shlex.join(reference.argv),
                   "compare": self.settings.compare, "aspect": found.aspect if found else None,
                   "kinds": found.kinds if found else None, "first_difference": first,
                   "reproduce": reproduction_command(self.target, self.settings, BUILD_INPUT)}
        if self._exec:
            details["twins"] = twins
        prepared = settings.prepared(text)
        if prepared != text:
            details["input"] = prepared  # what both builds read: the exec rendering, its twins too
        return OracleBucket(
            oracle=ORACLE, kind=KIND, signature=signature, minimized_text=text, message=message,
            reference_output=theirs or None, observed_output=mine or None, details=details,
            **minimized_fields(self.grammar, program, text), evaluations=evaluations,
            target_runs=2 * (evaluations + 1), seconds=time.monotonic() - started, steps=steps,
        )


def run_divergence_triage(config: OracleRunConfig, target: Target, settings: DivergenceSettings, *,
                          log: Callable[[str], None] | None = None) -> OracleSummary:
    """Both stages over the divergence findings ``config.findings`` (see the module docstring);
    where the judge the settings name cannot run a part in process, one line says so first."""
    log = log or (lambda message: print(message, file=sys.stderr))
    if settings.note:
        log(f"triage: note: {settings.note}")
    plans = twin_plans(config.findings) if isinstance(settings.prepare, ExecPreparation) else {}
    summary = run_oracle_triage(config, DivergenceTriage(target, settings, config.grammar, plans=plans), log=log)
    deaths = settings.execution_summary() if settings.execution_summary is not None else None
    if deaths:  # the in-process judge's driver died on outputs (none: nothing to say)
        log(f"triage: {deaths}")
    return summary
