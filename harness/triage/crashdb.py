"""The triage database: SQLite, one file (``triage.db`` by default).

It remembers every input triage has seen (by content), what each did on
reproduction, and one bucket per distinct signature, across any number of
triage runs.  Writes happen in short transactions from one thread, so a run
killed at any moment (SIGKILL included) loses nothing already committed, and
the next run on the same database skips what is recorded and completes it.

Schema (version 3; a database of version 1 or 2 gains the newer columns, NULL,
in one transaction when it is opened, and its minimized buckets are verified
again by the next triage run to get their evidence)::

    meta(key TEXT PRIMARY KEY, value TEXT)
        application = "loom-fuzz-triage", schema_version = "1", created,
        target = {"name", "args", "render"} of the first run: a database holds
        the triage of one target and its pass arguments (the binary may change,
        e.g. a rebuilt loom-opt); another target needs another database.

    runs(id INTEGER PRIMARY KEY, started, finished, status, pid, host,
         target TEXT (JSON), repeat, resumed, inputs, new_members, new_buckets)
        status: running | complete | interrupted.  A run left ``running`` by a
        killed process is resumed (same id) by the next triage on the database.
        inputs = distinct programs the run saw; new_members / new_buckets =
        those it recorded first.

    buckets(id INTEGER PRIMARY KEY, signature TEXT UNIQUE, kind, type,
            message, frames TEXT (JSON list), status, first_seen, last_seen,
            first_run, last_run, count, reproduction, target TEXT (JSON),
            representative (member id), minimized_text, minimized_tree,
            minimized_data BLOB, minimized_in_shape, minimized_lines,
            minimized_sites, minimized_stderr, minimized_signal,
            minimized_returncode, minimized_hits, minimized_attempts,
            min_runs, min_evaluations,
            min_seconds, min_steps TEXT (JSON), text_reduced,
            text_reduced_lines, text_runs, note, profile, minimized_contract,
            verify_counts TEXT (JSON), duplicate_of (bucket id),
            duplicate_reason, duplicate_by)
        status: new (first seen in its first_run) | known (seen again in a
        later run) | fixed (marked by hand) | regressed (a new input reached
        a bucket marked fixed).  count = number of members.
        reproduction: always | sometimes: until the bucket is minimized,
        sometimes when any member reproduced only sometimes; then, whether
        every verification run of the minimized program (minimized_hits of
        minimized_attempts) gave the signature.
        minimized_* is NULL until the bucket has been minimized.
        verify_counts: {signature run key: runs, "": runs without a finding}
        over the verification runs of the minimized program (the evidence of
        harness.triage.dedup).  duplicate_of: the bucket of the same bug this
        one is folded under (NULL: a bug of its own); duplicate_by: auto
        (recomputed by every triage run) | user (`triage mark`: kept).

    members(id INTEGER PRIMARY KEY, sha256 TEXT UNIQUE, bucket_id
            REFERENCES buckets (NULL: did not reproduce), form, tree, data BLOB,
            text, lines, sites, not_in_shape, reproduction, hits, attempts,
            outcome, reason, stderr, first_path, run_id, recorded, profile,
            contract, signatures TEXT (JSON))
        sha256 identifies the program: of its canonical rendering when it is
        in the shape (so a fuzz input's bytes and its .mlir sidecar are one
        member), of the text as given otherwise.  form: tree | text.
        reproduction: always | sometimes | never; hits of attempts runs gave
        the bucket's signature; signatures: {run key: runs, "": runs without
        a finding} over its attempts.

    files(path TEXT, sha256 TEXT (of the file's bytes), member_id, run_id,
          PRIMARY KEY (path, sha256))
        every input file (or ``file.mlir#k`` chunk) and the member it holds.

    sightings(run_id, member_id, PRIMARY KEY (run_id, member_id))
        which runs saw which members.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

__all__ = [
    "APPLICATION",
    "DatabaseError",
    "DatabaseBusy",
    "MemberRecord",
    "SCHEMA_VERSION",
    "STATUSES",
    "TriageDB",
    "now",
]

APPLICATION = "loom-fuzz-triage"
SCHEMA_VERSION = 3
STATUSES = ("new", "known", "fixed", "regressed")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    started TEXT NOT NULL,
    finished TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted')),
    pid INTEGER,
    host TEXT,
    target TEXT,
    repeat INTEGER,
    resumed INTEGER NOT NULL DEFAULT 0,
    inputs INTEGER NOT NULL DEFAULT 0,
    new_members INTEGER NOT NULL DEFAULT 0,
    new_buckets INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE buckets (
    id INTEGER PRIMARY KEY,
    signature TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    type TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    frames TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL DEFAULT 'new' CHECK (status IN ('new', 'known', 'fixed', 'regressed')),
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    first_run INTEGER REFERENCES runs(id),
    last_run INTEGER REFERENCES runs(id),
    count INTEGER NOT NULL DEFAULT 0,
    reproduction TEXT NOT NULL DEFAULT 'sometimes',
    target TEXT,
    representative INTEGER,
    minimized_text TEXT,
    minimized_tree TEXT,
    minimized_data BLOB,
    minimized_in_shape INTEGER,
    minimized_lines INTEGER,
    minimized_sites INTEGER,
    minimized_stderr TEXT,
    minimized_signal INTEGER,
    minimized_returncode INTEGER,
    minimized_hits INTEGER,
    minimized_attempts INTEGER,
    min_runs INTEGER,
    min_evaluations INTEGER,
    min_seconds REAL,
    min_steps TEXT,
    text_reduced TEXT,
    text_reduced_lines INTEGER,
    text_runs INTEGER,
    note TEXT,
    profile TEXT,
    minimized_contract TEXT,
    verify_counts TEXT,
    duplicate_of INTEGER REFERENCES buckets(id),
    duplicate_reason TEXT,
    duplicate_by TEXT CHECK (duplicate_by IN ('auto', 'user'))
);
CREATE TABLE members (
    id INTEGER PRIMARY KEY,
    sha256 TEXT NOT NULL UNIQUE,
    bucket_id INTEGER REFERENCES buckets(id),
    form TEXT NOT NULL CHECK (form IN ('tree', 'text')),
    tree TEXT,
    data BLOB,
    text TEXT NOT NULL,
    lines INTEGER NOT NULL,
    sites INTEGER,
    not_in_shape TEXT,
    reproduction TEXT NOT NULL CHECK (reproduction IN ('always', 'sometimes', 'never')),
    hits INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    stderr TEXT,
    first_path TEXT NOT NULL,
    run_id INTEGER REFERENCES runs(id),
    recorded TEXT NOT NULL,
    profile TEXT,
    contract TEXT,
    signatures TEXT
);
CREATE INDEX members_bucket ON members(bucket_id);
CREATE TABLE files (
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    member_id INTEGER NOT NULL REFERENCES members(id),
    run_id INTEGER REFERENCES runs(id),
    PRIMARY KEY (path, sha256)
);
CREATE INDEX files_member ON files(member_id);
CREATE TABLE sightings (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    member_id INTEGER NOT NULL REFERENCES members(id),
    PRIMARY KEY (run_id, member_id)
);
"""


#: Columns schema version 2 added (a version-1 database gains them, NULL, when opened):
#: the profile of the grammar an input came from, the contract it breaks (harness.contract:
#: none, edge: ..., P<n>), and the same for a bucket and its minimized program.
_ADDED_IN_2 = (("members", "profile"), ("members", "contract"),
               ("buckets", "profile"), ("buckets", "minimized_contract"))


#: Columns schema version 3 added (NULL in an older database): how often each signature came
#: over a member's runs, the same over the runs of a bucket's minimized program (the evidence of
#: deduplication; NULL: not verified yet, done by the next triage), and whether the bucket is a
#: duplicate of another (found by triage, or set by the user with `triage mark`).
_ADDED_IN_3 = (("members", "signatures", "TEXT"), ("buckets", "verify_counts", "TEXT"),
               ("buckets", "duplicate_of", "INTEGER REFERENCES buckets(id)"),
               ("buckets", "duplicate_reason", "TEXT"),
               ("buckets", "duplicate_by", "TEXT CHECK (duplicate_by IN ('auto', 'user'))"))


class DatabaseError(Exception):
    """The database cannot be used; the message is one line naming the file."""


class DatabaseBusy(DatabaseError):
    """Another live triage process is using the database."""


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


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

    @property
    def lines(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1)


class TriageDB:
    """One open triage database.  Use from one thread."""

    def __init__(self, path: str | os.PathLike, *, create: bool = True) -> None:
        self.path = str(path)
        p = Path(self.path)
        if not p.exists():
            if not create:
                raise DatabaseError(
                    f"{self.path}: no triage database here (run `loomfuzz triage INPUT...` first)"
                )
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise DatabaseError(f"{self.path}: cannot create its folder: {e.strerror}") from None
        elif p.is_dir():
            raise DatabaseError(f"{self.path}: is a directory, not a triage database")
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
            self.conn.row_factory = sqlite3.Row
            self._initialise(create)
        except sqlite3.DatabaseError as e:
            self._close_quietly()
            raise DatabaseError(f"{self.path}: not a loom-fuzz triage database ({e})") from None

    # ------------------------------------------------------------ plumbing

    def _close_quietly(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "TriageDB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _initialise(self, create: bool) -> None:
        c = self.conn
        c.execute("PRAGMA busy_timeout = 10000")
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            if not create:
                raise DatabaseError(f"{self.path}: empty database (run `loomfuzz triage INPUT...` first)")
            c.execute("PRAGMA journal_mode = WAL")
            with self.transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        c.execute(statement)
                c.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("application", APPLICATION),
                        ("schema_version", str(SCHEMA_VERSION)),
                        ("created", now()),
                    ],
                )
        elif "meta" not in tables:
            raise DatabaseError(f"{self.path}: not a loom-fuzz triage database (no meta table)")
        meta = dict(c.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("application") != APPLICATION:
            raise DatabaseError(f"{self.path}: not a loom-fuzz triage database")
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise DatabaseError(
                f"{self.path}: schema version {version} is newer than this loom-fuzz's ({SCHEMA_VERSION})"
            )
        if version < 1:
            raise DatabaseError(f"{self.path}: schema version {version} is too old")
        if version < SCHEMA_VERSION:  # one transaction: a killed upgrade leaves the old database
            with self.transaction():
                if version == 1:  # version 2 added the grammar profile and the contract broken
                    for table, column in _ADDED_IN_2:
                        c.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
                for table, column, declaration in _ADDED_IN_3:  # deduplication
                    c.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        c.execute("PRAGMA foreign_keys = ON")
        c.execute("PRAGMA synchronous = NORMAL")

    # ---------------------------------------------------------------- runs

    def begin_run(self, target: dict, repeat: int) -> tuple[int, bool]:
        """(run id, resumed): continue the run a killed process left ``running``, or start one."""
        host = socket.gethostname()
        argv = list(target.get("argv") or [])
        key = json.dumps(
            {"name": target.get("name"), "args": argv[1:], "render": target.get("render")}, sort_keys=True
        )
        with self.transaction() as c:
            row = c.execute("SELECT value FROM meta WHERE key = 'target'").fetchone()
            if row is None:
                c.execute("INSERT INTO meta (key, value) VALUES ('target', ?)", (key,))
            elif row[0] != key:
                old = json.loads(row[0])
                raise DatabaseError(
                    f"{self.path}: holds the triage of {old['name']} {' '.join(old['args'])}, not of "
                    f"{target.get('name')} {' '.join(argv[1:])}: use another --db"
                )
            running = c.execute(
                "SELECT id, pid, host FROM runs WHERE status = 'running' ORDER BY id DESC"
            ).fetchall()
            for row in running:
                if row["host"] == host and row["pid"] != os.getpid() and _pid_alive(row["pid"]):
                    raise DatabaseBusy(
                        f"{self.path}: in use by triage run {row['id']} (pid {row['pid']}); "
                        "wait for it or kill it"
                    )
            if running:
                run_id = running[0]["id"]
                c.execute(
                    "UPDATE runs SET pid = ?, host = ?, resumed = resumed + 1 WHERE id = ?",
                    (os.getpid(), host, run_id),
                )
                c.execute(
                    "UPDATE runs SET status = 'interrupted' WHERE status = 'running' AND id != ?",
                    (run_id,),
                )
                return run_id, True
            cur = c.execute(
                "INSERT INTO runs (started, status, pid, host, target, repeat) "
                "VALUES (?, 'running', ?, ?, ?, ?)",
                (now(), os.getpid(), host, json.dumps(target, sort_keys=True), repeat),
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
        c.execute(
            "UPDATE buckets SET last_seen = ?, last_run = ?, "
            "status = CASE WHEN status = 'new' AND first_run != ? THEN 'known' ELSE status END "
            "WHERE id = ?",
            (now(), run_id, run_id, row[0]),
        )

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
                    "SELECT id, status, first_run FROM buckets WHERE signature = ?", (signature.key,)
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
                    status = row["status"]
                    if status == "fixed":
                        status = "regressed"
                    elif status == "new" and row["first_run"] != run_id:
                        status = "known"
                    c.execute("UPDATE buckets SET status = ? WHERE id = ?", (status, bucket_id))
                c.execute(
                    "UPDATE buckets SET count = count + 1, last_seen = ?, last_run = ?, "
                    "reproduction = CASE WHEN ? = 'sometimes' AND minimized_text IS NULL THEN 'sometimes' "
                    "ELSE reproduction END "
                    "WHERE id = ?",
                    (stamp, run_id, record.reproduction, bucket_id),
                )
            member_id = int(
                c.execute(
                    "INSERT INTO members (sha256, bucket_id, form, tree, data, text, lines, sites, "
                    "not_in_shape, reproduction, hits, attempts, outcome, reason, stderr, first_path, "
                    "run_id, recorded, profile, contract, signatures) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    ),
                ).lastrowid
            )
            self._see(c, run_id, member_id, files)
            return member_id, bucket_id, new_bucket

    def members(self, bucket_id: int | None) -> list[sqlite3.Row]:
        """Members of a bucket (``None``: the inputs that did not reproduce), oldest first."""
        if bucket_id is None:
            q = "SELECT * FROM members WHERE bucket_id IS NULL ORDER BY id"
            return self.conn.execute(q).fetchall()
        return self.conn.execute(
            "SELECT * FROM members WHERE bucket_id = ? ORDER BY id", (bucket_id,)
        ).fetchall()

    def files_of(self, member_id: int) -> list[str]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT path FROM files WHERE member_id = ? ORDER BY path", (member_id,)
            )
        ]

    # ------------------------------------------------------------- buckets

    def buckets(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM buckets ORDER BY id").fetchall()

    def bucket(self, bucket_id: int) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM buckets WHERE id = ?", (bucket_id,)).fetchone()

    def bucket_by_signature(self, key: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM buckets WHERE signature = ?", (key,)).fetchone()

    def unverified(self) -> list[sqlite3.Row]:
        """Minimized buckets without evidence (minimized by an older loom-fuzz)."""
        return self.conn.execute(
            "SELECT * FROM buckets WHERE minimized_text IS NOT NULL AND verify_counts IS NULL ORDER BY id"
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
        return self.conn.execute(
            "SELECT * FROM buckets WHERE minimized_text IS NULL ORDER BY id"
        ).fetchall()

    def without_text_reduction(self) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT * FROM buckets WHERE minimized_text IS NOT NULL AND text_reduced IS NULL ORDER BY id"
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
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
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

    def mark(self, bucket_id: int, status: str) -> None:
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}")
        with self.transaction() as c:
            if c.execute("UPDATE buckets SET status = ? WHERE id = ?", (status, bucket_id)).rowcount != 1:
                raise KeyError(bucket_id)

    # ------------------------------------------------------------- summary

    def counts(self) -> dict[str, int]:
        q = self.conn.execute
        return {
            "buckets": q("SELECT COUNT(*) FROM buckets").fetchone()[0],
            "bugs": q("SELECT COUNT(*) FROM buckets WHERE duplicate_of IS NULL").fetchone()[0],
            "members": q("SELECT COUNT(*) FROM members").fetchone()[0],
            "reproducing": q("SELECT COUNT(*) FROM members WHERE bucket_id IS NOT NULL").fetchone()[0],
            "flaky": q("SELECT COUNT(*) FROM members WHERE reproduction = 'sometimes'").fetchone()[0],
            "not_reproducing": q("SELECT COUNT(*) FROM members WHERE bucket_id IS NULL").fetchone()[0],
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
