"""Wrong-code triage: differential findings in, one database bucket per bug out.

``loomfuzz triage --oracle differential INPUT...`` takes the findings of the
differential oracle (kinds ``wrong-code``, ``reference-failure``,
``target-failure``: :data:`harness.triage.wrong_code.KINDS`) and keeps its
results in the same triage database as crash triage (oracle
``differential``: :mod:`harness.triage.schema`), in two stages:

1. **Reproduce and bisect** every finding the database does not hold yet, in
   ``jobs`` threads (each judgement runs the optimizer, the lowering and the
   runner as processes): judged again under the whole pipeline
   (:func:`harness.triage.wrong_code.verdict_of`), it must give its kind again;
   then the pipeline bisection (:func:`~harness.triage.wrong_code.culprit_pass`)
   names its culprit pass and the shortest pipeline that gives the finding.
   Each finding is committed as a member (identity ``differential:SHA256`` of
   its text; its kind, culprit and pipeline in ``details``), in input order, one
   transaction each.  A finding that does not reproduce is kept without a bucket.
2. **Minimize and bucket**: the reproduced members without a bucket (this
   run's, or those a stopped run left) are grouped by kind and culprit; each
   group's smallest program (fewest characters, then its identity) is minimized
   with the grammar's reducer under "still gives the kind under the shortest
   pipeline (and is in P1-P24, defined)", in ``jobs`` threads; the bucket is
   the kind and :func:`~harness.triage.wrong_code.signature_of` the minimized
   program, prefixed with the culprit (``cse | arith.subi,...``).  Each group's
   bucket is recorded with its members in one transaction
   (:meth:`harness.triage.buckets.BucketTable.record_oracle_bucket`), in group
   order: a group whose signature is an existing bucket's joins it.

Every choice depends only on the findings and the database, never on which
thread finished first: ``--jobs 1`` and ``--jobs 2`` give the same buckets and
minimized programs.  A stop (a signal: :class:`harness.run.lifetime.Stopped`
in the threads) keeps what was committed; the next run on the database
resumes the unfinished run and redoes nothing that was recorded.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from harness.contract import describe_grammar
from harness.core.grammar import CompiledGrammar
from harness.core.parse import parse
from harness.core.reduce import minimize
from harness.core.render import render
from harness.execute.differential import TargetFailed, WrongCode
from harness.execute.oracle import OracleSettings
from harness.triage.buckets import OracleBucket
from harness.triage.crashdb import MemberRecord, TriageDB
from harness.triage.progress import Progress
from harness.triage.records import contract_fields, tree_fields
from harness.triage.wrong_code import KINDS, culprit_pass, lit_test, signature_of, verdict_of

__all__ = ["ORACLE", "WrongCodeConfig", "WrongCodeSummary", "run_wrong_code_triage"]

#: The database's name for this triage (harness.triage.schema).
ORACLE = "differential"
#: What a bucket's signature says when no prefix of the pipeline gives the finding.
WHOLE_PIPELINE = "(whole pipeline)"


@dataclass
class WrongCodeConfig:
    findings: Sequence[Path]  # canonical programs (harness.triage.wrong_code.differential_findings)
    settings: OracleSettings
    grammar: CompiledGrammar
    db_path: str = "triage/triage.db"
    out_dir: str | None = "triage"
    jobs: int = 1
    max_evaluations: int = 150  # minimization budget: candidates per bucket
    progress: bool = True


@dataclass
class WrongCodeSummary:
    run_id: int
    resumed: bool
    findings: int  # findings named or found
    already_known: int  # of them, in the database before
    judged: int  # judged now
    not_reproduced: int  # of those judged now
    minimized: int  # groups minimized now
    new_buckets: int
    buckets: list  # the oracle's bucket rows, oldest first
    report_dir: str | None
    seconds: float = 0.0


@dataclass(frozen=True)
class _Judged:
    """Stage 1's result for one finding."""

    kind: str | None  # the finding kind it reproduced with (None: it did not)
    reason: str
    culprit: str = ""
    pipeline: str = ""


def _target_json(settings: OracleSettings) -> dict:
    return {"name": ORACLE, "argv": settings.optimizer.argv(), "render": "exec",
            "reference": [settings.toolchain.mlir_opt, settings.toolchain.runner]}


def _kind_of(verdict) -> str | None:
    return verdict.kind if verdict is not None and verdict.kind in KINDS else None


def _judge_finding(text: str, settings: OracleSettings) -> _Judged:
    """Stage 1: reproduce under the whole pipeline, then bisect it."""
    pipeline = settings.optimizer.pipeline or ""
    verdict = verdict_of(text, settings, pipeline)
    kind = _kind_of(verdict)
    if kind is None:
        why = "off P1-P24 or undefined behaviour" if verdict is None else f"{verdict.kind} today"
        return _Judged(None, f"does not reproduce: {why}")
    culprit, prefix = culprit_pass(lambda p: _kind_of(verdict_of(text, settings, p)) == kind, pipeline)
    reason = verdict.describe() if isinstance(verdict, WrongCode) else f"{verdict.stage}: {verdict.detail}"
    return _Judged(kind, reason[:300], culprit, prefix)


@dataclass(frozen=True)
class _Group:
    """Stage 2's work: the members of one kind and culprit, and the program to minimize."""

    kind: str
    culprit: str
    pipeline: str
    members: tuple[int, ...]
    text: str


def _minimize_group(group: _Group, settings: OracleSettings, grammar: CompiledGrammar,
                    max_evaluations: int, profile: str | None) -> OracleBucket:
    """Stage 2: the group's program minimized, judged (confirmed) and described as a bucket."""
    def gives_kind(text: str) -> bool:
        return _kind_of(verdict_of(text, settings, group.pipeline)) == group.kind

    started = time.monotonic()
    parsed = parse(group.text, grammar)
    program, text, evaluations, steps = None, group.text, 0, ()
    if parsed.tree is not None:
        result = minimize(parsed.tree, grammar, lambda tree: gives_kind(render(tree, grammar)),
                          max_evaluations=max_evaluations)
        program, text = result.tree, render(result.tree, grammar)
        evaluations, steps = result.evaluations, tuple(result.steps)
    verdict = verdict_of(text, settings, group.pipeline, confirm=True)
    if _kind_of(verdict) != group.kind:  # a flaky target: keep the original program
        program, text = parsed.tree, group.text
        verdict = verdict_of(text, settings, group.pipeline, confirm=True)
    exec_text = settings.exec_text(text)
    if _kind_of(verdict) != group.kind:  # not even that: a bucket of its own, said so
        verdict = TargetFailed("unconfirmed", f"gave {getattr(verdict, 'kind', 'no verdict')} when judged again")
    wrong = isinstance(verdict, WrongCode)
    signature = f"{group.culprit or WHOLE_PIPELINE} | {signature_of(exec_text, verdict)}"
    first = verdict.first if wrong else None
    details = {"pipeline": group.pipeline}
    if wrong:
        details["first_difference"] = verdict.describe()
        if first is not None:
            details["reference_value"], details["observed_value"] = first.reference, first.target
    else:
        details["stage"], details["detail"] = verdict.stage, verdict.detail
    return OracleBucket(
        oracle=ORACLE, kind=group.kind, signature=signature, minimized_text=text, culprit=group.culprit or None,
        message=(verdict.describe() if wrong else f"{verdict.stage}: {verdict.detail}")[:300],
        reference_output=verdict.reference_output if wrong else None,
        observed_output=verdict.target_output if wrong else None,
        lit_test=lit_test(text, settings, group.pipeline, verdict.reference_output) if wrong else None,
        details=details, **_minimized_tree(grammar, program),
        minimized_contract=contract_fields(grammar, program, text)["contract"], profile=profile,
        evaluations=evaluations, target_runs=evaluations + 1, seconds=time.monotonic() - started, steps=steps,
    )


def _minimized_tree(grammar: CompiledGrammar, program) -> dict:
    fields = tree_fields(grammar, program)
    return {"minimized_tree": fields["tree"], "minimized_data": fields["data"], "minimized_sites": fields["sites"]}


def _groups(db: TriageDB) -> list[_Group]:
    """The reproduced members without a bucket, by (kind, culprit), in that order."""
    found: dict[tuple[str, str], list] = {}
    for row in db.unbucketed(ORACLE):
        details = json.loads(row["details"] or "{}")
        found.setdefault((details["kind"], details["culprit"]), []).append(row)
    groups = []
    for (kind, culprit), rows in sorted(found.items()):
        smallest = min(rows, key=lambda r: (len(r["text"]), r["sha256"]))
        groups.append(_Group(kind, culprit, json.loads(smallest["details"])["pipeline"],
                             tuple(r["id"] for r in rows), smallest["text"]))
    return groups


def _in_order(pool: ThreadPoolExecutor, work: Callable, items: list) -> Iterator:
    """``work(item)`` for every item in the pool's threads; the results in item order."""
    for future in [pool.submit(work, item) for item in items]:
        yield future.result()


def run_wrong_code_triage(config: WrongCodeConfig, *,
                          log: Callable[[str], None] | None = None) -> WrongCodeSummary:
    """Both stages (see the module docstring), then the reports.  Raises
    harness.triage.schema.DatabaseError with a one-line message."""
    from harness.triage.report import write_reports

    log = log or (lambda message: print(message, file=sys.stderr))
    settings, grammar = config.settings, config.grammar
    profile = describe_grammar(grammar)["profile"]
    started = time.monotonic()
    db = TriageDB(config.db_path)
    pool = ThreadPoolExecutor(max_workers=max(1, config.jobs), thread_name_prefix="triage")
    try:
        target = _target_json(settings)
        run_id, resumed = db.begin_run(target, 1, oracle=ORACLE)
        if resumed:
            log(f"triage: resuming unfinished run {run_id} on {config.db_path}")
        by_sha: dict[str, tuple[Path, str, list]] = {}  # one program: its first path, text, files
        for path in config.findings:
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            first = by_sha.setdefault(f"{ORACLE}:{digest}", (path, data.decode("utf-8", errors="replace"), []))
            first[2].append((str(path), digest))
        todo: list[tuple[Path, str, str, list]] = []
        known = 0
        for sha, (path, text, files) in by_sha.items():
            member_id = db.member_id(sha)
            if member_id is None:
                todo.append((path, sha, text, files))
            else:
                known += 1
                db.record_sighting(run_id, member_id, files)
        not_reproduced = 0

        progress = Progress("reproduce", len(todo), "findings",
                            lambda: f"{not_reproduced} not reproduced", enabled=config.progress)
        with progress:
            judged = _in_order(pool, lambda item: _judge_finding(item[2], settings), todo)
            for (path, sha, text, files), result in zip(todo, judged):
                tree = parse(text, grammar).tree
                record = MemberRecord(
                    sha256=sha, form="tree" if tree is not None else "text", **tree_fields(grammar, tree),
                    text=text, not_in_shape=None if tree is not None else "not a program of the grammar",
                    reproduction="always" if result.kind else "never", hits=int(bool(result.kind)), attempts=1,
                    outcome=result.kind or "same", reason=result.reason, stderr=None, first_path=str(path),
                    **contract_fields(grammar, tree, text), oracle=ORACLE,
                    details={"kind": result.kind, "culprit": result.culprit, "pipeline": result.pipeline}
                    if result.kind else None,
                )
                db.record_member(run_id, record, files)
                not_reproduced += result.kind is None
                progress.update()

        groups = _groups(db)
        progress = Progress("minimize", len(groups), "buckets", lambda: "", enabled=config.progress)
        with progress:
            buckets = _in_order(pool, lambda group: _minimize_group(
                group, settings, grammar, config.max_evaluations, profile), groups)
            for group, bucket in zip(groups, buckets):
                db.record_oracle_bucket(run_id, bucket, group.members, target)
                progress.update()
        db.finish_run(run_id)
        report_dir = None
        if config.out_dir:
            write_reports(db, config.out_dir, run_id=run_id)
            report_dir = config.out_dir
        return WrongCodeSummary(
            run_id=run_id, resumed=resumed, findings=len(config.findings), already_known=known,
            judged=len(todo), not_reproduced=not_reproduced, minimized=len(groups),
            new_buckets=db.run(run_id)["new_buckets"], buckets=db.buckets(ORACLE), report_dir=report_dir,
            seconds=time.monotonic() - started,
        )
    finally:  # queued work cancelled; running work ends at its next judgement when stopping
        pool.shutdown(wait=True, cancel_futures=True)
        db.close()
