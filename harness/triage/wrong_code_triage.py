"""Wrong-code triage: differential findings in, one database bucket per bug out.

``loomfuzz triage --oracle differential INPUT...`` takes the findings of the
differential oracle (kinds ``wrong-code``, ``reference-failure``,
``target-failure``: :data:`harness.triage.wrong_code.KINDS`) and keeps its
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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from harness.core.compiled import CompiledGrammar
from harness.core.parse import parse
from harness.core.reduce import minimize
from harness.core.render import render
from harness.execute.differential import TargetFailed, WrongCode
from harness.execute.oracle import OracleSettings
from harness.execute.render_exec import ExecRenderError
from harness.execute.twins import TwinPlan, plan_of
from harness.triage.buckets import OracleBucket
from harness.triage.oracle_runs import (Group, Judged, OracleRunConfig, OracleSummary, minimized_fields,
                                        run_oracle_triage)
from harness.triage.wrong_code import KINDS, culprit_pass, lit_test, signature_of, verdict_of

__all__ = ["ORACLE", "WrongCodeTriage", "run_wrong_code_triage", "twin_plans"]

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

    def settings_for(self, twins: str | None) -> OracleSettings:
        """The settings with exactly the twins ``twins`` (a plan's text; None: none)."""
        return replace(self.settings, twins=0.0, twin_plan=TwinPlan.parse(twins) if twins else None)

    def target_json(self) -> dict:
        return {"name": ORACLE, "argv": self.settings.optimizer.argv(), "render": "exec",
                "reference": [self.settings.toolchain.mlir_opt, self.settings.toolchain.runner]}

    def judge(self, text: str) -> Judged:
        """Stage 1: reproduce under the whole pipeline, then bisect it."""
        plan = self.plans.get(text)
        twins = plan.text() if plan else None
        settings = self.settings_for(twins)
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
        settings = self.settings_for(twins)
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
        if wrong:
            details["first_difference"] = verdict.describe()
            if first is not None:
                details["reference_value"], details["observed_value"] = first.reference, first.target
        else:
            details["stage"], details["detail"] = verdict.stage, verdict.detail
        return OracleBucket(
            oracle=ORACLE, kind=kind, signature=signature, minimized_text=text, culprit=culprit or None,
            message=(verdict.describe() if wrong else f"{verdict.stage}: {verdict.detail}")[:300],
            reference_output=verdict.reference_output if wrong else None,
            observed_output=verdict.target_output if wrong else None,
            lit_test=lit_test(text, settings, pipeline, verdict.reference_output) if wrong else None,
            details=details, **minimized_fields(grammar, program, text),
            evaluations=evaluations, target_runs=evaluations + 1, seconds=time.monotonic() - started, steps=steps,
        )


def run_wrong_code_triage(config: OracleRunConfig, settings: OracleSettings, *,
                          log: Callable[[str], None] | None = None) -> OracleSummary:
    """Both stages over the differential findings ``config.findings`` (see the module docstring)."""
    return run_oracle_triage(config, WrongCodeTriage(settings, config.grammar, plans=twin_plans(config.findings)),
                             log=log)


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
