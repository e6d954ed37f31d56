"""The buckets of the triage database: one per distinct bug signature.

Crash triage (:mod:`harness.triage.pipeline`) makes its buckets while it
records members (:meth:`harness.triage.crashdb.TriageDB.record_member`) and
minimizes them afterwards (:meth:`BucketTable.save_minimization`).  The
triage of another oracle (wrong code: :mod:`harness.triage.wrong_code_triage`;
two builds of one tool: :mod:`harness.triage.divergence_triage`; both through
:mod:`harness.triage.oracle_runs`) records a bucket whole, once its program is
minimized, through one kind-generic API:

* :class:`OracleBucket`: what such a bucket holds (oracle, kind, signature,
  culprit, minimized program, reference and observed output, lit test, and a
  JSON object of the oracle's own facts);
* :meth:`BucketTable.record_oracle_bucket`: store it (or find the bucket of
  the same kind and signature) and put members into it, in one transaction;
* :meth:`BucketTable.oracle_bucket`: look a bucket up by kind and signature.

A new oracle needs no schema change: its kind names and signature are its
own; ``details`` takes whatever else it must keep.  ``triage list``,
``show``, ``mark`` and the reports show every bucket whatever its oracle.
The columns are documented in :mod:`harness.triage.schema`.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Sequence

from harness.triage.schema import STATUSES, Database, now

__all__ = ["BucketTable", "OracleBucket", "text_lines"]


def text_lines(text: str) -> int:
    """Lines of a program text (a last line without a newline counts)."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


@dataclass(frozen=True)
class OracleBucket:
    """A bucket of an oracle other than crash triage, recorded whole (see the module docstring)."""

    oracle: str  # which triage: differential, divergence, ...
    kind: str  # the finding kind: wrong-code, reference-failure, target-failure, divergence, ...
    signature: str  # the oracle's documented signature of the minimized program
    minimized_text: str
    culprit: str | None = None  # the pass blamed (pipeline bisection)
    message: str = ""  # one line: e.g. the first difference
    reference_output: str | None = None  # what the program prints before optimization / on the reference
    observed_output: str | None = None  # what it prints after optimization / on the target
    lit_test: str | None = None  # a lit test that fails while the bug is there
    details: dict = field(default_factory=dict)  # the oracle's own facts (JSON)
    minimized_tree: str | None = None  # harness.core.tree.describe of the minimized program
    minimized_data: bytes | None = None  # its encoding (None: kept as text)
    minimized_sites: int | None = None
    minimized_contract: str | None = None
    profile: str | None = None
    evaluations: int = 0  # candidates the minimization tested
    target_runs: int = 0  # target runs it made
    seconds: float = 0.0
    steps: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The bucket's identity in the database (column ``signature``)."""
        return f"{self.kind} | {self.signature}"


def seen_again(c: sqlite3.Connection, bucket_id: int, status: str) -> None:
    """A bucket reached by a new input: a bug marked fixed has regressed.
    Every other status is the user's (``triage mark``) and stays as set: triage never marks a
    bucket ``known`` (docs/how-to/triage.md, "Statuses")."""
    if status == "fixed":
        c.execute("UPDATE buckets SET status = 'regressed' WHERE id = ?", (bucket_id,))


class BucketTable(Database):
    """The bucket queries of a triage database."""

    # ------------------------------------------------------------- buckets

    def buckets(self, oracle: str | None = None) -> list[sqlite3.Row]:
        """Every bucket (``oracle``: only that oracle's, e.g. ``crash``), oldest first."""
        if oracle is None:
            return self.conn.execute("SELECT * FROM buckets ORDER BY id").fetchall()
        return self.conn.execute("SELECT * FROM buckets WHERE oracle = ? ORDER BY id", (oracle,)).fetchall()

    def bucket(self, bucket_id: int) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM buckets WHERE id = ?", (bucket_id,)).fetchone()

    def bucket_by_signature(self, key: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM buckets WHERE signature = ?", (key,)).fetchone()

    def unverified(self) -> list[sqlite3.Row]:
        """Minimized crash buckets without evidence (minimized by an older loom-fuzz)."""
        return self.conn.execute(
            "SELECT * FROM buckets WHERE oracle = 'crash' AND minimized_text IS NOT NULL "
            "AND verify_counts IS NULL ORDER BY id"
        ).fetchall()

    def save_evidence(self, bucket_id: int, counts: dict[str, int]) -> None:
        with self.transaction() as c:
            c.execute("UPDATE buckets SET verify_counts = ? WHERE id = ?",
                      (json.dumps(counts, sort_keys=True), bucket_id))

    def save_duplicates(self, duplicates: dict[int, tuple[int, str]]) -> None:
        """Set the found duplicates (bucket -> (primary, reason)); every other bucket not set
        by the user is no duplicate."""
        with self.transaction() as c:
            c.execute("UPDATE buckets SET duplicate_of = NULL, duplicate_reason = NULL, duplicate_by = NULL "
                      "WHERE duplicate_by IS NULL OR duplicate_by = 'auto'")
            c.executemany(
                "UPDATE buckets SET duplicate_of = ?, duplicate_reason = ?, duplicate_by = 'auto' WHERE id = ?",
                [(primary, reason, bucket) for bucket, (primary, reason) in sorted(duplicates.items())],
            )

    @staticmethod
    def _root(c: sqlite3.Connection, bucket_id: int) -> int:
        """The bucket a chain of duplicates ends at."""
        seen = {bucket_id}
        while True:
            row = c.execute("SELECT duplicate_of FROM buckets WHERE id = ?", (bucket_id,)).fetchone()
            if row is None or row[0] is None or row[0] in seen:
                return bucket_id
            bucket_id = row[0]
            seen.add(bucket_id)

    def primary_of(self, bucket_id: int) -> int:
        """The bucket ``bucket_id``'s bug is folded under (itself when it is no duplicate)."""
        return self._root(self.conn, bucket_id)

    def set_duplicate(self, bucket_id: int, primary: int | None) -> None:
        """The user's word: ``bucket_id`` is a duplicate of ``primary`` (None: of no bucket).
        Raises KeyError for a missing bucket, ValueError for a bucket made its own duplicate."""
        with self.transaction() as c:
            for b in (bucket_id, primary):
                if b is not None and c.execute("SELECT 1 FROM buckets WHERE id = ?", (b,)).fetchone() is None:
                    raise KeyError(b)
            if primary == bucket_id:
                raise ValueError(f"bucket {bucket_id} cannot be a duplicate of itself")
            if primary is not None:
                primary = self._root(c, primary)
                if primary == bucket_id:
                    raise ValueError(f"bucket {bucket_id} is the bucket its duplicates are folded under")
                # the buckets folded under this one follow it
                c.execute("UPDATE buckets SET duplicate_of = ? WHERE duplicate_of = ?", (primary, bucket_id))
            c.execute(
                "UPDATE buckets SET duplicate_of = ?, duplicate_reason = ?, duplicate_by = 'user' WHERE id = ?",
                (primary, "marked by hand" if primary is not None else None, bucket_id),
            )

    def unminimized(self) -> list[sqlite3.Row]:
        """Crash buckets without a minimized program (an oracle bucket has one from its start)."""
        return self.conn.execute(
            "SELECT * FROM buckets WHERE oracle = 'crash' AND minimized_text IS NULL ORDER BY id"
        ).fetchall()

    def without_text_reduction(self) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT * FROM buckets WHERE oracle = 'crash' AND minimized_text IS NOT NULL "
            "AND text_reduced IS NULL ORDER BY id"
        ).fetchall()

    def save_minimization(
        self,
        bucket_id: int,
        *,
        representative: int,
        text: str,
        tree: str | None,
        data: bytes | None,
        in_shape: bool,
        sites: int | None,
        stderr: str | None,
        signal: int | None,
        returncode: int | None,
        hits: int,
        attempts: int,
        runs: int,
        evaluations: int,
        seconds: float,
        steps: Sequence[str],
        note: str | None = None,
        contract: str | None = None,
        verify_counts: dict[str, int] | None = None,
    ) -> None:
        lines = text_lines(text)
        with self.transaction() as c:
            c.execute(
                "UPDATE buckets SET representative = ?, minimized_text = ?, minimized_tree = ?, "
                "minimized_data = ?, minimized_in_shape = ?, minimized_lines = ?, minimized_sites = ?, "
                "minimized_stderr = ?, minimized_signal = ?, minimized_returncode = ?, "
                "minimized_hits = ?, minimized_attempts = ?, reproduction = ?, "
                "min_runs = ?, min_evaluations = ?, min_seconds = ?, min_steps = ?, "
                "note = ?, minimized_contract = ?, verify_counts = ? WHERE id = ?",
                (
                    representative,
                    text,
                    tree,
                    data,
                    int(in_shape),
                    lines,
                    sites,
                    stderr,
                    signal,
                    returncode,
                    hits,
                    attempts,
                    "always" if hits == attempts else "sometimes",
                    runs,
                    evaluations,
                    round(seconds, 6),
                    json.dumps(list(steps)),
                    note,
                    contract,
                    json.dumps(verify_counts, sort_keys=True) if verify_counts is not None else None,
                    bucket_id,
                ),
            )

    def save_text_reduction(self, bucket_id: int, text: str, lines: int, runs: int) -> None:
        with self.transaction() as c:
            c.execute(
                "UPDATE buckets SET text_reduced = ?, text_reduced_lines = ?, text_runs = ? WHERE id = ?",
                (text, lines, runs, bucket_id),
            )

    def oracle_bucket(self, kind: str, signature: str) -> sqlite3.Row | None:
        """The bucket of an oracle's finding ``kind`` with this ``signature`` (None: none yet)."""
        return self.bucket_by_signature(f"{kind} | {signature}")

    def record_oracle_bucket(self, run_id: int, bucket: OracleBucket, members: Sequence[int],
                             target: dict | None = None) -> tuple[int, bool]:
        """Store ``bucket`` (an existing bucket of the same kind and signature keeps its program
        and values) and put ``members`` (member ids without a bucket) into it, in one
        transaction: (bucket id, whether it is new)."""
        stamp = now()
        with self.transaction() as c:
            row = c.execute("SELECT id, status FROM buckets WHERE signature = ?",
                            (bucket.key,)).fetchone()
            if row is None:
                representative = min(members) if members else None
                bucket_id = int(c.execute(
                    "INSERT INTO buckets (signature, kind, type, message, status, first_seen, last_seen, "
                    "first_run, last_run, count, reproduction, target, representative, minimized_text, "
                    "minimized_tree, minimized_data, minimized_in_shape, minimized_lines, minimized_sites, "
                    "minimized_hits, minimized_attempts, min_runs, min_evaluations, min_seconds, min_steps, "
                    "profile, minimized_contract, oracle, culprit, reference_output, observed_output, "
                    "lit_test, details) VALUES (?, ?, ?, ?, 'new', ?, ?, ?, ?, 0, 'always', ?, ?, ?, ?, ?, "
                    "?, ?, ?, 1, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (bucket.key, bucket.kind, bucket.culprit or "", bucket.message, stamp, stamp, run_id,
                     run_id, json.dumps(target, sort_keys=True) if target else None, representative,
                     bucket.minimized_text, bucket.minimized_tree, bucket.minimized_data,
                     int(bucket.minimized_data is not None), text_lines(bucket.minimized_text),
                     bucket.minimized_sites, bucket.target_runs, bucket.evaluations,
                     round(bucket.seconds, 6), json.dumps(list(bucket.steps)), bucket.profile,
                     bucket.minimized_contract, bucket.oracle, bucket.culprit, bucket.reference_output,
                     bucket.observed_output, bucket.lit_test, json.dumps(bucket.details, sort_keys=True)),
                ).lastrowid)
                new = True
            else:
                bucket_id, new = int(row["id"]), False
                seen_again(c, bucket_id, row["status"])
            attached = 0
            for member in members:
                attached += c.execute("UPDATE members SET bucket_id = ? WHERE id = ? AND bucket_id IS NULL",
                                      (bucket_id, member)).rowcount
            c.execute("UPDATE buckets SET count = count + ?, last_seen = ?, last_run = ? WHERE id = ?",
                      (attached, stamp, run_id, bucket_id))
            return bucket_id, new

    def mark(self, bucket_id: int, status: str) -> None:
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}")
        with self.transaction() as c:
            if c.execute("UPDATE buckets SET status = ? WHERE id = ?", (status, bucket_id)).rowcount != 1:
                raise KeyError(bucket_id)

