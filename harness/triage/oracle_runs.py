"""The triage of an oracle's findings into the triage database, in two stages.

Shared by the triage of every oracle whose buckets are recorded whole
(:class:`harness.triage.buckets.OracleBucket`): wrong code
(:mod:`harness.triage.wrong_code_triage`, oracle ``differential``) and two
builds of one tool (:mod:`harness.triage.divergence_triage`, oracle ``divergence``).
An oracle is an :class:`OracleTriage`: its name, the target it records, a
judgement of one finding and the minimization of one group; this module
does the rest, the same way for both:

1. **Reproduce** every finding the database does not hold yet, in ``jobs``
   threads (:meth:`OracleTriage.judge`: each runs the target as processes).
   Each finding is committed as a member (identity ``ORACLE:SHA256`` of its
   file's bytes; what the judgement found in ``details``), in input order,
   one transaction each.  A finding that does not reproduce is kept without
   a bucket.  A finding already in the database is only recorded as seen.
2. **Minimize and bucket**: the reproduced members without a bucket (this
   run's, or those a stopped run left) are grouped by
   :meth:`OracleTriage.group_of` their details; each group's smallest
   program (fewest characters, then its identity) is minimized
   (:meth:`OracleTriage.minimize`) in ``jobs`` threads, and each group's
   bucket is recorded with its members in one transaction, in group order
   (:meth:`harness.triage.buckets.BucketTable.record_oracle_bucket`: a group
   whose signature is an existing bucket's joins it).

Every choice depends only on the findings and the database, never on which
thread finished first: ``--jobs 1`` and ``--jobs 2`` give the same database.
A stop (a signal: :class:`harness.run.stop_requests.Stopped` raised by the next
judgement in the threads, :func:`stop_point`) keeps what was committed; the
next run on the database resumes the unfinished run (same run id) and redoes
nothing that was recorded.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Protocol, Sequence

from harness.contract import program_suffix
from harness.core.compiled import CompiledGrammar
from harness.core.parse import parse
from harness.run import stop_requests
from harness.triage.buckets import OracleBucket
from harness.triage.crashdb import MemberRecord, TriageDB
from harness.triage.progress import Progress
from harness.triage.records import contract_fields, tree_fields

__all__ = ["Group", "Judged", "OracleRunConfig", "OracleSummary", "OracleTriage", "findings_in",
           "minimized_fields", "run_oracle_triage", "sidecar_kind", "stop_point"]


@dataclass
class OracleRunConfig:
    """What every oracle's triage takes besides the oracle itself."""

    findings: Sequence[Path]  # the findings' programs (their .mlir)
    grammar: CompiledGrammar
    db_path: str = "triage/triage.db"
    out_dir: str | None = "triage"
    jobs: int = 1
    max_evaluations: int = 150  # minimization budget: candidates per group
    progress: bool = True


@dataclass
class OracleSummary:
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
class Judged:
    """Stage 1's result for one finding."""

    kind: str | None  # the finding kind it reproduced with (None: it did not)
    reason: str
    details: dict = field(default_factory=dict)  # the member's facts (JSON); group_of reads them


@dataclass(frozen=True)
class Group:
    """Stage 2's work: members of one group, and the program to minimize with its details."""

    key: tuple
    members: tuple[int, ...]
    text: str
    details: dict


class OracleTriage(Protocol):
    """One oracle's part of its triage (see the module docstring)."""

    name: str  # the database's name of the oracle (harness.triage.schema)

    def target_json(self) -> dict: ...

    def judge(self, text: str) -> Judged: ...

    def group_of(self, details: dict) -> tuple: ...

    def minimize(self, group: Group, max_evaluations: int) -> OracleBucket: ...

    # optional: ``minimize_status() -> str``, the rest of the minimize stage's progress line


def stop_point() -> None:
    """Raise :class:`harness.run.stop_requests.Stopped` when this process is stopping: called
    before every judgement, so a stopped triage starts no new target run."""
    if stop_requests.stopping():
        raise stop_requests.Stopped("stopping")


def sidecar_kind(sidecar: Path) -> str | None:
    """The finding kind a finding's ``.json`` sidecar says (None: unreadable, or none)."""
    try:
        return json.loads(sidecar.read_text()).get("finding_kind")
    except (OSError, ValueError, AttributeError):
        return None


def findings_in(paths: Sequence[str], kinds: Sequence[str], *, unrecorded: bool = False) -> list[Path]:
    """The programs (``.mlir``) of the findings named or found in folders whose ``.json``
    sidecar says one of ``kinds`` (sorted per folder); with ``unrecorded``, also every
    ``.mlir`` named whose sidecar says no kind (a program of the user's own)."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            out += sorted(p.with_suffix(".mlir") for p in path.rglob("crash-*.json")
                          if sidecar_kind(p) in kinds and p.with_suffix(".mlir").exists())
        elif path.suffix == ".mlir" and not path.name.endswith((".exec.mlir", ".optimized.mlir")):
            kind = sidecar_kind(path.with_suffix(".json"))
            if kind in kinds or (unrecorded and kind is None):
                out.append(path)
    return out


def minimized_fields(grammar: CompiledGrammar, program, text: str) -> dict:
    """An :class:`OracleBucket`'s fields of its minimized program (``program`` its tree, None
    for a text outside the grammar): tree, encoding, sites, contract and profile."""
    fields, contract = tree_fields(grammar, program), contract_fields(grammar, program, text)
    return {"minimized_tree": fields["tree"], "minimized_data": fields["data"], "minimized_sites": fields["sites"],
            "minimized_contract": contract["contract"], "profile": contract["profile"]}


def _groups(db: TriageDB, oracle: OracleTriage) -> list[Group]:
    """The reproduced members without a bucket, by group, in group order."""
    found: dict[tuple, list] = {}
    for row in db.unbucketed(oracle.name):
        found.setdefault(oracle.group_of(json.loads(row["details"] or "{}")), []).append(row)
    groups = []
    for key, rows in sorted(found.items()):
        smallest = min(rows, key=lambda r: (len(r["text"]), r["sha256"]))
        groups.append(Group(key, tuple(r["id"] for r in rows), smallest["text"],
                            json.loads(smallest["details"] or "{}")))
    return groups


def _in_order(pool: ThreadPoolExecutor, work: Callable, items: list) -> Iterator:
    """``work(item)`` for every item in the pool's threads; the results in item order.  A
    thread that saw the stop first (:class:`Stopped`) gives the main thread the stop itself,
    as its signal handler raises it: the command then exits 128 + the signal."""
    for future in [pool.submit(work, item) for item in items]:
        try:
            yield future.result()
        except stop_requests.Stopped:
            reason = stop_requests.stop_reason()
            if reason in signal.Signals.__members__:
                raise stop_requests.Interrupted(signal.Signals[reason]) from None
            raise


def _by_program(oracle: str, findings: Sequence[Path]) -> dict[str, tuple[Path, str, list]]:
    """One entry per distinct program: identity -> (its first path, its text, its files)."""
    by_sha: dict[str, tuple[Path, str, list]] = {}
    for path in findings:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        first = by_sha.setdefault(f"{oracle}:{digest}", (path, data.decode("utf-8", errors="replace"), []))
        first[2].append((str(path), digest))
    return by_sha


def _member(oracle: str, grammar: CompiledGrammar, sha: str, path: Path, text: str, judged: Judged) -> MemberRecord:
    tree = parse(text, grammar).tree
    return MemberRecord(
        sha256=sha, form="tree" if tree is not None else "text", **tree_fields(grammar, tree),
        text=text, not_in_shape=None if tree is not None else "not a program of the grammar",
        reproduction="always" if judged.kind else "never", hits=int(bool(judged.kind)), attempts=1,
        outcome=judged.kind or "same", reason=judged.reason, stderr=None, first_path=str(path),
        **contract_fields(grammar, tree, text), oracle=oracle,
        details=judged.details if judged.kind else None,
    )


def run_oracle_triage(config: OracleRunConfig, oracle: OracleTriage, *,
                      log: Callable[[str], None] | None = None) -> OracleSummary:
    """Both stages (see the module docstring), then the reports.  Raises
    harness.triage.schema.DatabaseError with a one-line message."""
    from harness.triage.report import write_reports

    log = log or (lambda message: print(message, file=sys.stderr))
    started = time.monotonic()
    db = TriageDB(config.db_path)
    pool = ThreadPoolExecutor(max_workers=max(1, config.jobs), thread_name_prefix="triage")
    try:
        target = oracle.target_json()
        run_id, resumed = db.begin_run(target, 1, oracle=oracle.name)
        if resumed:
            log(f"triage: resuming unfinished run {run_id} on {config.db_path}")
        todo: list[tuple[Path, str, str, list]] = []
        known = 0
        for sha, (path, text, files) in _by_program(oracle.name, config.findings).items():
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
            judged = _in_order(pool, lambda item: oracle.judge(item[2]), todo)
            for (path, sha, text, files), result in zip(todo, judged):
                db.record_member(run_id, _member(oracle.name, config.grammar, sha, path, text, result), files)
                not_reproduced += result.kind is None
                progress.update()

        groups = _groups(db, oracle)
        status = getattr(oracle, "minimize_status", lambda: "")  # e.g. wrong code's release judgements
        progress = Progress("minimize", len(groups), "buckets", status, enabled=config.progress)
        with progress:
            buckets = _in_order(pool, lambda group: oracle.minimize(group, config.max_evaluations), groups)
            for group, bucket in zip(groups, buckets):
                db.record_oracle_bucket(run_id, bucket, group.members, target)
                progress.update()
        db.finish_run(run_id)
        report_dir = None
        if config.out_dir:
            write_reports(db, config.out_dir, suffix=program_suffix(config.grammar), run_id=run_id)
            report_dir = config.out_dir
        return OracleSummary(
            run_id=run_id, resumed=resumed, findings=len(config.findings), already_known=known,
            judged=len(todo), not_reproduced=not_reproduced, minimized=len(groups),
            new_buckets=db.run(run_id)["new_buckets"], buckets=db.buckets(oracle.name), report_dir=report_dir,
            seconds=time.monotonic() - started,
        )
    finally:  # queued work cancelled; running work ends at its next judgement when stopping
        pool.shutdown(wait=True, cancel_futures=True)
        db.close()

