"""``loomfuzz triage report-upstream BUCKET``: make a bucket's upstream report, then check it.

:func:`upstream_report` makes the report of one bucket of the triage database
(a crash, hang or error bucket: :mod:`harness.triage.upstream_crash`; a
wrong-code bucket, or an executor disagreement where the optimized module computes
poison: :mod:`harness.triage.upstream_wrong_code`).
:func:`check_report` then runs every command of the report as written, with
``bash``, in a fresh temporary folder holding only the program
(:data:`~harness.triage.upstream_report.PROGRAM`), and says which did not show
what the report says: a failure with another signature key, a hang that ended,
other printed values, an optimized function that is not printed.  A report whose commands do not reproduce the bug is
not written.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.core.compiled import CompiledGrammar
from harness.triage.crashdb import TriageDB
from harness.triage.upstream_crash import KINDS, crash_report, failure_key, run_tool
from harness.triage.upstream_report import PROGRAM, ReportError, UpstreamReport
from harness.triage.upstream_wrong_code import wrong_code_report
from harness.triage.wrong_code import DISAGREEMENT

__all__ = ["check_report", "upstream_report"]

#: How long a command may run when the report says it prints (a lowering and a run).
_RUN_SECONDS = 120.0


def upstream_report(db_path: str, bucket_id: int, grammar: CompiledGrammar | None = None) -> UpstreamReport:
    """The report of bucket ``bucket_id`` of the database ``db_path``; ``grammar``: the one
    its programs are of (None: the profile the bucket records, :func:`harness.contract.load_grammar`).
    Raises :class:`ReportError` (one line) for a bucket it cannot report, and the database's own
    ``DatabaseError`` for a missing or foreign database."""
    with TriageDB(db_path, create=False) as db:
        bucket = db.bucket(bucket_id)
    if bucket is None:
        raise ReportError(f"{db_path}: no bucket {bucket_id}")
    if grammar is None:
        from harness.contract import load_grammar

        grammar = load_grammar(None, bucket["profile"] or None)
    if bucket["oracle"] == "differential" and bucket["kind"] in ("wrong-code", DISAGREEMENT):
        return wrong_code_report(bucket)
    if bucket["oracle"] == "crash" and bucket["kind"] in KINDS:
        return crash_report(bucket, grammar)
    raise ReportError(f"bucket {bucket_id} is a {bucket['oracle']} bucket of kind {bucket['kind']}: "
                      f"report-upstream takes wrong-code and executor-disagreement (poison) buckets and crash, "
                      f"timeout and unexpected-rejection buckets")


def check_report(report: UpstreamReport) -> list[str]:
    """The commands of ``report`` that, run as written in a clean folder, do not show what
    it says (one line each); [] when all do."""
    problems = []
    for step in report.steps:
        with tempfile.TemporaryDirectory(prefix="loomfuzz-check-") as folder:
            Path(folder, PROGRAM).write_text(report.program)
            seconds = report.timeout if step.check == "fails" else _RUN_SECONDS
            run = run_tool([step.command], None, seconds, cwd=folder, shell=True)
        if step.check == "prints":
            got = run.stdout.strip()
            if run.returncode != 0 or got != step.expect:
                problems.append(f"`{step.command}` printed {got!r} (exit {run.returncode}), not {step.expect!r}")
        elif step.check == "contains":
            if run.returncode != 0 or step.expect not in run.stdout:
                problems.append(f"`{step.command}` (exit {run.returncode}) did not print {step.expect[:80]!r}...")
        else:
            got = failure_key(run)
            if got != step.expect:
                problems.append(f"`{step.command}` gave {got or 'no failure'!r}, not {step.expect!r}")
    return problems
