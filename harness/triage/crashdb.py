"""The triage database: runs and members (with the buckets of harness.triage.buckets).

It remembers every input triage has seen (by content), what each did on
reproduction, and one bucket per distinct signature, across any number of
triage runs.  Writes happen in short transactions from one thread, so a run
killed at any moment (SIGKILL included) loses nothing already committed, and
the next run on the same database skips what is recorded and completes it.

The schema and its migrations: :mod:`harness.triage.schema`; the bucket
queries and the kind-generic bucket record of the oracles beside crash
triage: :mod:`harness.triage.buckets`.  :class:`TriageDB` is all three.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from dataclasses import dataclass
from typing import Sequence

from harness.triage.buckets import BucketTable, OracleBucket, seen_again, text_lines
from harness.triage.schema import (APPLICATION, SCHEMA_VERSION, STATUSES, DatabaseBusy, DatabaseError,
                                   now)
from harness.triage.symptoms import add_symptoms

__all__ = [
    "APPLICATION",
    "DatabaseError",
    "DatabaseBusy",
    "MemberRecord",
    "OracleBucket",
    "SCHEMA_VERSION",
    "STATUSES",
    "TriageDB",
    "now",
]


def _pid_alive(pid: int | None) -> bool:
    """Whether a triage process with this pid still runs (a reused pid is not one)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return True  # no /proc: assume it is the triage process
    return b"triage" in cmdline or b"python" in cmdline


@dataclass(frozen=True)
class MemberRecord:
    """One reproduced input, as :meth:`TriageDB.record_member` stores it."""

    sha256: str
    form: str  # "tree" | "text"
    tree: str | None  # harness.core.tree.describe(program)
    data: bytes | None  # harness.core.codec.encode(program)
    text: str  # the program text (canonical rendering for trees)
    sites: int | None
    not_in_shape: str | None  # why the text is not in the shape (form == "text")
    reproduction: str  # always | sometimes | never
    hits: int
    attempts: int
    outcome: str  # the finding kind, or the outcome kind when it did not reproduce
    reason: str
    stderr: str | None
    first_path: str
    profile: str | None = None  # the grammar's profile (break:P<n> for --break)
    contract: str | None = None  # harness.contract.contract_of: none | edge: ... | P<n>
    signatures: str | None = None  # JSON {signature key: runs that gave it, "": runs with no finding}
    oracle: str = "crash"  # which triage recorded it (harness.triage.schema)
    details: dict | None = None  # the oracle's own facts of the member (JSON)

    @property
    def lines(self) -> int:
        return text_lines(self.text)


class TriageDB(BucketTable):
    """One open triage database (runs, members and buckets).  Use from one thread."""

    # ---------------------------------------------------------------- runs

    def begin_run(self, target: dict, repeat: int, oracle: str = "crash",
                  symptom_runs: int | None = None) -> tuple[int, bool]:
        """(run id, resumed): continue the run of ``oracle``'s triage a killed process left
        ``running`` (its ``repeat`` and ``symptom_runs`` stay its own: :meth:`run`), or start one."""
        host = socket.gethostname()
        target_key = "target" if oracle == "crash" else f"target:{oracle}"
        argv = list(target.get("argv") or [])
        key = json.dumps(
            {"name": target.get("name"), "args": argv[1:], "render": target.get("render")}, sort_keys=True
        )
        with self.transaction() as c:
            row = c.execute("SELECT value FROM meta WHERE key = ?", (target_key,)).fetchone()
            if row is None:
                c.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (target_key, key))
            elif row[0] != key:
                old = json.loads(row[0])
                raise DatabaseError(
                    f"{self.path}: holds the triage of {old['name']} {' '.join(old['args'])}, not of "
                    f"{target.get('name')} {' '.join(argv[1:])}: use another --db"
                )
            running = c.execute(
                "SELECT id, pid, host, oracle FROM runs WHERE status = 'running' ORDER BY id DESC"
            ).fetchall()
            for row in running:
                if row["host"] == host and row["pid"] != os.getpid() and _pid_alive(row["pid"]):
                    raise DatabaseBusy(
                        f"{self.path}: in use by triage run {row['id']} (pid {row['pid']}); "
                        "wait for it or kill it"
                    )
            running = [row for row in running if row["oracle"] == oracle]
            if running:
                run_id = running[0]["id"]
                c.execute(
                    "UPDATE runs SET pid = ?, host = ?, resumed = resumed + 1 WHERE id = ?",
                    (os.getpid(), host, run_id),
                )
                c.execute(
                    "UPDATE runs SET status = 'interrupted' WHERE status = 'running' AND id != ? "
                    "AND oracle = ?",
                    (run_id, oracle),
                )
                return run_id, True
            cur = c.execute(
                "INSERT INTO runs (started, status, pid, host, target, repeat, oracle, symptom_runs) "
                "VALUES (?, 'running', ?, ?, ?, ?, ?, ?)",
                (now(), os.getpid(), host, json.dumps(target, sort_keys=True), repeat, oracle, symptom_runs),
            )
            return int(cur.lastrowid), False

    def finish_run(self, run_id: int) -> None:
        with self.transaction() as c:
            inputs = c.execute("SELECT COUNT(*) FROM sightings WHERE run_id = ?", (run_id,)).fetchone()[0]
            new_members = c.execute("SELECT COUNT(*) FROM members WHERE run_id = ?", (run_id,)).fetchone()[0]
            new_buckets = c.execute(
                "SELECT COUNT(*) FROM buckets WHERE first_run = ?", (run_id,)
            ).fetchone()[0]
            c.execute(
                "UPDATE runs SET status = 'complete', finished = ?, inputs = ?, new_members = ?, "
                "new_buckets = ? WHERE id = ?",
                (now(), inputs, new_members, new_buckets, run_id),
            )

    def run(self, run_id: int) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()

    def last_run(self) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()

    # ------------------------------------------------------------- members

    def member_id(self, sha256: str) -> int | None:
        row = self.conn.execute("SELECT id FROM members WHERE sha256 = ?", (sha256,)).fetchone()
        return None if row is None else int(row[0])

    def member(self, member_id: int) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM members WHERE id = ?", (member_id,)).fetchone()

    def _see(self, c: sqlite3.Connection, run_id: int, member_id: int, files: Sequence[tuple[str, str]]) -> None:
        c.executemany(
            "INSERT OR IGNORE INTO files (path, sha256, member_id, run_id) VALUES (?, ?, ?, ?)",
            [(path, sha, member_id, run_id) for path, sha in files],
        )
        fresh = c.execute(
            "INSERT OR IGNORE INTO sightings (run_id, member_id) VALUES (?, ?)", (run_id, member_id)
        ).rowcount
        if not fresh:
            return
        row = c.execute("SELECT bucket_id FROM members WHERE id = ?", (member_id,)).fetchone()
        if row is None or row[0] is None:
            return
        # an input seen before is not run again, so it says nothing of a fixed bug: the
        # status stays as it is (harness.triage.buckets.seen_again: only a new input regresses)
        c.execute("UPDATE buckets SET last_seen = ?, last_run = ? WHERE id = ?", (now(), run_id, row[0]))

    def record_sighting(self, run_id: int, member_id: int, files: Sequence[tuple[str, str]]) -> None:
        """An already recorded member seen again (in ``files``) by run ``run_id``."""
        with self.transaction() as c:
            self._see(c, run_id, member_id, files)

    def record_member(
        self,
        run_id: int,
        record: MemberRecord,
        files: Sequence[tuple[str, str]],
        signature=None,
        target: dict | None = None,
    ) -> tuple[int, int | None, bool]:
        """Store a reproduced input: (member id, bucket id or None, whether the bucket is new).

        Idempotent: a member already recorded (same sha256) is only seen again.
        ``signature`` is a :class:`harness.triage.signature.Signature` (None when it
        did not reproduce).
        """
        with self.transaction() as c:
            existing = c.execute(
                "SELECT id, bucket_id FROM members WHERE sha256 = ?", (record.sha256,)
            ).fetchone()
            if existing is not None:
                self._see(c, run_id, existing["id"], files)
                return int(existing["id"]), existing["bucket_id"], False
            bucket_id = None
            new_bucket = False
            stamp = now()
            if signature is not None and record.reproduction != "never":
                row = c.execute(
                    "SELECT id, status FROM buckets WHERE signature = ?", (signature.key,)
                ).fetchone()
                if row is None:
                    bucket_id = int(
                        c.execute(
                            "INSERT INTO buckets (signature, kind, type, message, frames, status, "
                            "first_seen, last_seen, first_run, last_run, count, reproduction, target, "
                            "profile) VALUES (?, ?, ?, ?, ?, 'new', ?, ?, ?, ?, 0, ?, ?, ?)",
                            (
                                signature.key,
                                signature.kind,
                                signature.type,
                                signature.message,
                                json.dumps(list(signature.frames)),
                                stamp,
                                stamp,
                                run_id,
                                run_id,
                                record.reproduction,
                                json.dumps(target, sort_keys=True) if target else None,
                                record.profile,
                            ),
                        ).lastrowid
                    )
                    new_bucket = True
                else:
                    bucket_id = int(row["id"])
                    seen_again(c, bucket_id, row["status"])
                symptoms = c.execute("SELECT symptoms FROM buckets WHERE id = ?", (bucket_id,)).fetchone()[0]
                runs = json.loads(record.signatures) if record.signatures else {signature.run_key: record.hits}
                symptoms = add_symptoms(json.loads(symptoms) if symptoms else {}, runs)
                c.execute(
                    "UPDATE buckets SET count = count + 1, last_seen = ?, last_run = ?, "
                    "reproduction = CASE WHEN ? = 'sometimes' AND minimized_text IS NULL THEN 'sometimes' "
                    "ELSE reproduction END, symptoms = ? "
                    "WHERE id = ?",
                    (stamp, run_id, record.reproduction, json.dumps(symptoms, sort_keys=True), bucket_id),
                )
            member_id = int(
                c.execute(
                    "INSERT INTO members (sha256, bucket_id, form, tree, data, text, lines, sites, "
                    "not_in_shape, reproduction, hits, attempts, outcome, reason, stderr, first_path, "
                    "run_id, recorded, profile, contract, signatures, oracle, details) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.sha256,
                        bucket_id,
                        record.form,
                        record.tree,
                        record.data,
                        record.text,
                        record.lines,
                        record.sites,
                        record.not_in_shape,
                        record.reproduction,
                        record.hits,
                        record.attempts,
                        record.outcome,
                        record.reason,
                        record.stderr,
                        record.first_path,
                        run_id,
                        stamp,
                        record.profile,
                        record.contract,
                        record.signatures,
                        record.oracle,
                        json.dumps(record.details, sort_keys=True) if record.details is not None else None,
                    ),
                ).lastrowid
            )
            self._see(c, run_id, member_id, files)
            return member_id, bucket_id, new_bucket

    def members(self, bucket_id: int | None) -> list[sqlite3.Row]:
        """Members of a bucket (``None``: the inputs that did not reproduce), oldest first."""
        if bucket_id is None:
            q = "SELECT * FROM members WHERE reproduction = 'never' ORDER BY id"
            return self.conn.execute(q).fetchall()
        return self.conn.execute(
            "SELECT * FROM members WHERE bucket_id = ? ORDER BY id", (bucket_id,)
        ).fetchall()

    def unbucketed(self, oracle: str) -> list[sqlite3.Row]:
        """``oracle``'s members that reproduced and wait for their bucket (made after
        minimization: a run stopped between the two left them so), oldest first."""
        return self.conn.execute(
            "SELECT * FROM members WHERE oracle = ? AND bucket_id IS NULL AND reproduction != 'never' "
            "ORDER BY id", (oracle,)).fetchall()

    def files_of(self, member_id: int) -> list[str]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT path FROM files WHERE member_id = ? ORDER BY path", (member_id,)
            )
        ]

    # ------------------------------------------------------------- summary

    def counts(self) -> dict[str, int]:
        q = self.conn.execute
        return {
            "buckets": q("SELECT COUNT(*) FROM buckets").fetchone()[0],
            "bugs": q("SELECT COUNT(*) FROM buckets WHERE duplicate_of IS NULL").fetchone()[0],
            "members": q("SELECT COUNT(*) FROM members").fetchone()[0],
            "reproducing": q("SELECT COUNT(*) FROM members WHERE reproduction != 'never'").fetchone()[0],
            "flaky": q("SELECT COUNT(*) FROM members WHERE reproduction = 'sometimes'").fetchone()[0],
            "not_reproducing": q("SELECT COUNT(*) FROM members WHERE reproduction = 'never'").fetchone()[0],
            "files": q("SELECT COUNT(*) FROM files").fetchone()[0],
            "runs": q("SELECT COUNT(*) FROM runs").fetchone()[0],
        }

    def snapshot(self) -> dict:
        """The database's content without ids, timestamps and process details:
        two databases that triaged the same inputs the same way have equal snapshots."""
        q = self.conn.execute
        sig_of = {r["id"]: r["signature"] for r in q("SELECT id, signature FROM buckets")}
        sha_of = {r["id"]: r["sha256"] for r in q("SELECT id, sha256 FROM members")}
        buckets = {}
        for r in q("SELECT * FROM buckets"):
            buckets[r["signature"]] = {
                k: r[k]
                for k in r.keys()
                if k
                not in ("id", "first_seen", "last_seen", "first_run", "last_run", "representative",
                        "min_seconds", "minimized_stderr", "duplicate_of")
            }
            buckets[r["signature"]]["representative"] = sha_of.get(r["representative"])
            buckets[r["signature"]]["duplicate_of"] = sig_of.get(r["duplicate_of"])
        members = {}
        for r in q("SELECT * FROM members"):
            d = {k: r[k] for k in r.keys() if k not in ("id", "bucket_id", "run_id", "recorded", "stderr")}
            d["bucket"] = sig_of.get(r["bucket_id"])
            members[r["sha256"]] = d
        files = sorted(
            (r["path"], r["sha256"], sha_of[r["member_id"]]) for r in q("SELECT * FROM files")
        )
        return {"buckets": buckets, "members": members, "files": files}
