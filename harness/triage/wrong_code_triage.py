"""Wrong-code triage: differential findings in, one database bucket per bug out.

``loomfuzz triage --oracle differential INPUT...`` takes the findings of the
differential oracle (kinds ``wrong-code``, ``reference-failure``,
``target-failure``, ``executor-disagreement``: :data:`harness.triage.wrong_code.KINDS`) and keeps its
results in the same triage database as crash triage (oracle
``differential``: :mod:`harness.triage.schema`), in the two stages of
:mod:`harness.triage.oracle_runs` (which runs them in threads, resumes and
stops the same way for every oracle); this module is wrong code's part:

1. **Reproduce and bisect** every finding the database does not hold yet, in
   ``jobs`` threads (each judgement runs the optimizer, the lowering and the
   runner as processes): judged again under the whole pipeline
   (:func:`harness.triage.wrong_code.verdict_of`), it must give its kind again;
   then the pipeline bisection (:func:`~harness.triage.wrong_code.culprit_pass`)
   names its culprit pass and the shortest pipeline that gives the finding.
   The member's ``details`` hold its kind, culprit and pipeline.
2. **Minimize and bucket**: the reproduced members without a bucket (this
   run's, or those a stopped run left) are grouped by kind and culprit; each
   group's smallest program (fewest characters, then its identity) is minimized
   with the grammar's reducer under "still gives the kind under the shortest
   pipeline (and is in P1-P24, defined)", in ``jobs`` threads; the bucket is
   the kind and :func:`~harness.triage.wrong_code.signature_of` the minimized
   program, prefixed with the culprit (``cse | arith.subi,...``).

Every judgement goes through the executor the settings name (``--runner``:
the in-process judge, or the processes).  An ``executor-disagreement`` (the IR
executor and the JIT give other outputs: :class:`~harness.execute.differential.ExecutorsDisagree`)
exists only where both executors run, in the driver: a finding recorded as one is
judged (reproduced, bisected, minimized) in process whatever ``--runner`` says,
said in one line; it must still disagree, its group is the culprit pass and its
bucket, of kind ``executor-disagreement``, is named by the module they read
differently, how, and the operations of the first function whose lines differ
(``arith-int-range-narrowing | optimized poison: arith.andi,...``).  The bucket
keeps the JIT's output of that module as ``reference_output`` and the IR
executor's as ``observed_output`` (``bucket-N/reference.txt``, ``observed.txt``),
and no lit test: the reference runner is a JIT, and the JIT's values pass.

After minimization a wrong-code or executor-disagreement bucket's program is
judged again under the whole pipeline (``details``: ``found_pipeline``) with the
optimizer under test and every release ``--releases`` names as the optimizer
(:mod:`harness.triage.releases`): ``details["releases"]`` says which it
reproduces on, one record per build.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from harness.core.compiled import CompiledGrammar
from harness.core.parse import parse
from harness.core.reduce import minimize
from harness.core.render import render
from harness.execute.differential import ExecutorsDisagree, TargetFailed, WrongCode
from harness.oracles.differential_runner import OracleSettings, in_process_unavailable
from harness.execute.canonical_program import ExecRenderError
from harness.execute.twins import TwinPlan, plan_of
from harness.triage.buckets import OracleBucket
from harness.triage.oracle_runs import (Group, Judged, OracleRunConfig, OracleSummary, minimized_fields,
                                        run_oracle_triage, sidecar_kind)
from harness.triage.releases import CHECKED_KINDS, ReleaseSelection, judge_on_releases
from harness.triage.wrong_code import (DISAGREEMENT, KINDS, culprit_pass, disagreement_of, lit_test, signature_of,
                                       verdict_of)

__all__ = ["ORACLE", "WrongCodeTriage", "recorded_kinds", "run_wrong_code_triage", "twin_plans"]

#: The database's name for this triage (harness.triage.schema).
ORACLE = "differential"
#: What a bucket's signature says when no prefix of the pipeline gives the finding.
WHOLE_PIPELINE = "(whole pipeline)"


def _kind_of(verdict) -> str | None:
    return verdict.kind if verdict is not None and verdict.kind in KINDS else None


@dataclass(frozen=True)
class WrongCodeTriage:
    """Wrong code's part of the two stages (harness.triage.oracle_runs.OracleTriage)."""

    settings: OracleSettings
    grammar: CompiledGrammar
    name: str = ORACLE
    #: each finding's constant twins (program text -> plan, from its NAME.exec.mlir): a
    #: finding is reproduced, bisected and minimized with the twins it was found with, and
    #: a program without is judged without (never the share drawn again from a changed text)
    plans: dict[str, TwinPlan] = field(default_factory=dict)
    #: each finding's kind as its sidecar records it (program text -> kind)
    kinds: dict[str, str] = field(default_factory=dict)
    #: whether the in-process judge can run (the driver is built): executor disagreements need it
    in_process: bool = True
    #: the releases each bucket's minimized program is judged on (None: none; --releases)
    releases: ReleaseSelection | None = None
    #: release judgements made so far (the minimize stage's progress line)
    release_runs: "_Count" = field(default_factory=lambda: _Count())

    def minimize_status(self) -> str:
        """The minimize stage's progress: the release judgements made so far."""
        return f"{self.release_runs.value} release judgement(s)" if self.releases and self.releases.releases else ""

    def settings_for(self, twins: str | None, kind: str | None = None) -> OracleSettings:
        """The settings with exactly the twins ``twins`` (a plan's text; None: none); for an
        executor disagreement, the in-process judge (the only one with two executors)."""
        settings = replace(self.settings, twins=0.0, twin_plan=TwinPlan.parse(twins) if twins else None)
        if kind == DISAGREEMENT and self.in_process and settings.runner != "persistent":
            settings = replace(settings, runner="persistent")
        return settings

    def target_json(self) -> dict:
        return {"name": ORACLE, "argv": self.settings.optimizer.argv(), "render": "exec",
                "reference": [self.settings.toolchain.mlir_opt, self.settings.toolchain.runner]}

    def judge(self, text: str) -> Judged:
        """Stage 1: reproduce under the whole pipeline, then bisect it."""
        plan = self.plans.get(text)
        twins = plan.text() if plan else None
        settings = self.settings_for(twins, self.kinds.get(text))
        pipeline = settings.optimizer.pipeline or ""
        verdict = verdict_of(text, settings, pipeline)
        kind = _kind_of(verdict)
        if kind is None:
            why = "off P1-P24 or undefined behaviour" if verdict is None else f"{verdict.kind} today"
            return Judged(None, f"does not reproduce: {why}")
        culprit, prefix = culprit_pass(lambda p: _kind_of(verdict_of(text, settings, p)) == kind, pipeline)
        reason = verdict.describe() if isinstance(verdict, WrongCode) else f"{verdict.stage}: {verdict.detail}"
        return Judged(kind, reason[:300], {"kind": kind, "culprit": culprit, "pipeline": prefix, "twins": twins})

    def group_of(self, details: dict) -> tuple:
        return details["kind"], details["culprit"]  # a bug, whatever twins showed it

    def minimize(self, group: Group, max_evaluations: int) -> OracleBucket:
        """Stage 2: the group's program minimized, judged (confirmed) and described as a bucket."""
        grammar = self.grammar
        kind, culprit = group.key
        twins = group.details.get("twins")  # the smallest member's: it is the one minimized
        settings = self.settings_for(twins, kind)
        pipeline = group.details["pipeline"]

        def gives_kind(text: str) -> bool:
            return _kind_of(verdict_of(text, settings, pipeline)) == kind

        started = time.monotonic()
        parsed = parse(group.text, grammar)
        program, text, evaluations, steps = None, group.text, 0, ()
        if parsed.tree is not None:
            result = minimize(parsed.tree, grammar, lambda tree: gives_kind(render(tree, grammar)),
                              max_evaluations=max_evaluations)
            program, text = result.tree, render(result.tree, grammar)
            evaluations, steps = result.evaluations, tuple(result.steps)
        verdict = verdict_of(text, settings, pipeline, confirm=True)
        if _kind_of(verdict) != kind:  # a flaky target: keep the original program
            program, text = parsed.tree, group.text
            verdict = verdict_of(text, settings, pipeline, confirm=True)
        exec_text = settings.exec_text(text)
        if _kind_of(verdict) != kind:  # not even that: a bucket of its own, said so
            verdict = TargetFailed("unconfirmed", f"gave {getattr(verdict, 'kind', 'no verdict')} when judged again")
        wrong = isinstance(verdict, WrongCode)
        signature = f"{culprit or WHOLE_PIPELINE} | {signature_of(exec_text, verdict)}"
        first = verdict.first if wrong else None
        details = {"pipeline": pipeline, "twins": twins or None}
        if self.releases is not None and self.releases.spec != "none" and kind in CHECKED_KINDS \
                and _kind_of(verdict) == kind:
            found_pipeline = self.settings.optimizer.pipeline or ""
            details["found_pipeline"] = found_pipeline
            details["releases"] = [r.to_json() for r in judge_on_releases(
                text, settings, found_pipeline, kind, verdict, self.releases.releases,
                judged=self.release_runs.add)]
        reference_output = observed_output = None
        if wrong:
            details["first_difference"] = verdict.describe()
            if first is not None:
                details["reference_value"], details["observed_value"] = first.reference, first.target
            message, reference_output, observed_output = verdict.describe(), verdict.reference_output, \
                verdict.target_output
        elif isinstance(verdict, ExecutorsDisagree):
            found = disagreement_of(exec_text, verdict)
            details.update({"module": found.side, "how": found.how, "first_difference": found.describe(),
                            "note": verdict.note, "reference_output": "the JIT's output of that module",
                            "observed_output": "the IR executor's output of that module"})
            if found.first is not None:
                details["reference_value"], details["observed_value"] = found.first.reference, found.first.target
            message, reference_output, observed_output = verdict.describe(), found.jit_output, found.ir_output
        else:
            details["stage"], details["detail"] = verdict.stage, verdict.detail
            message = f"{verdict.stage}: {verdict.detail}"
        return OracleBucket(
            oracle=ORACLE, kind=kind, signature=signature, minimized_text=text, culprit=culprit or None,
            message=message[:300], reference_output=reference_output, observed_output=observed_output,
            lit_test=lit_test(text, settings, pipeline, verdict.reference_output) if wrong else None,
            details=details, **minimized_fields(grammar, program, text),
            evaluations=evaluations, target_runs=evaluations + 1, seconds=time.monotonic() - started, steps=steps,
        )


class _Count:
    """A counter the judging threads add to and the progress line reads."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.value += 1


def run_wrong_code_triage(config: OracleRunConfig, settings: OracleSettings, *,
                          releases: ReleaseSelection | None = None,
                          log: Callable[[str], None] | None = None) -> OracleSummary:
    """Both stages over the differential findings ``config.findings`` (see the module docstring);
    executor disagreements judged in process where ``--runner`` names processes, said in one line;
    each bucket's program judged on ``releases`` too (None: on none), which are named in one line."""
    log = log or (lambda message: print(message, file=sys.stderr))
    if releases is not None and releases.spec != "none":
        log(f"triage: {releases.describe()}; each bucket's program is judged on them and on the optimizer "
            f"under test ({settings.optimizer.binary})")
    kinds = recorded_kinds(config.findings)
    disagreements = sum(kind == DISAGREEMENT for kind in kinds.values())
    why_not = None
    if disagreements and settings.runner != "persistent":
        why_not = in_process_unavailable(settings)
        if why_not is None:
            log(f"triage: note: {disagreements} executor-disagreement finding(s) judged in process (the IR "
                f"executor and the JIT, both in the driver), not by --runner {settings.runner}")
        else:
            log(f"triage: note: {disagreements} executor-disagreement finding(s) cannot be judged by two "
                f"executors ({why_not}): they will not reproduce")
    return run_oracle_triage(config, WrongCodeTriage(settings, config.grammar, plans=twin_plans(config.findings),
                                                     kinds=kinds, in_process=why_not is None, releases=releases),
                             log=log)


def recorded_kinds(findings: Sequence[Path]) -> dict[str, str]:
    """Each finding's kind as its ``NAME.json`` sidecar records it (program text -> kind)."""
    kinds = {}
    for path in findings:
        kind = sidecar_kind(Path(path).with_suffix(".json"))
        if isinstance(kind, str):
            kinds[Path(path).read_text(errors="replace")] = kind
    return kinds


def twin_plans(findings: Sequence[Path]) -> dict[str, TwinPlan]:
    """The twins each finding was judged with, read from its ``NAME.exec.mlir`` sidecar."""
    plans = {}
    for path in findings:
        try:
            plan = plan_of(Path(path).with_suffix(".exec.mlir").read_text())
        except (OSError, ValueError, ExecRenderError):
            continue  # no sidecar (a program of the user's own): judged without twins
        if plan is not None:
            plans[Path(path).read_text(errors="replace")] = plan
    return plans
