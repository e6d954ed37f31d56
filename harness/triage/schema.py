"""The triage database's schema, its migrations and its connection.

SQLite, one file (``triage.db`` by default).  :class:`Database` opens it
(creating it, or migrating an older one in place) and gives short
transactions; :mod:`harness.triage.buckets` adds the bucket queries and
:mod:`harness.triage.crashdb` the runs and members on top
(:class:`harness.triage.crashdb.TriageDB` is the one class callers use).

Schema (version 5; an older database is migrated in place, in one transaction
when it is opened: a database of version 1 or 2 gains the newer columns, NULL,
and its minimized buckets are verified again by the next triage run to get
their evidence; one of version 3 gains the columns of the oracle buckets, its
rows all ``oracle = 'crash'``; one of version 4 gains the symptom profiles:
each crash bucket's ``symptoms`` are computed from its members' runs, and
its runs' ``symptom_runs`` stay NULL, read as the ``repeat`` they ran with)::

    meta(key TEXT PRIMARY KEY, value TEXT)
        application = "loom-fuzz-triage", schema_version = "1", created,
        target = {"name", "args", "render"} of the first crash triage run: a
        database holds the triage of one target and its pass arguments (the
        binary may change, e.g. a rebuilt loom-opt); another target needs
        another database.  ``target:ORACLE`` is the same for the triage of
        another oracle (``target:differential``: the optimizer's arguments and
        pipeline), so one database holds the crash and the wrong-code buckets
        of one campaign.

    runs(id INTEGER PRIMARY KEY, started, finished, status, pid, host,
         target TEXT (JSON), repeat, resumed, inputs, new_members, new_buckets,
         oracle, symptom_runs)
        status: running | complete | interrupted.  A run left ``running`` by a
        killed process is resumed (same id) by the next triage of the same
        oracle on the database.  oracle: crash (``loomfuzz triage``) |
        differential (``--oracle differential``) | another oracle's name.
        inputs = distinct programs the run saw; new_members / new_buckets =
        those it recorded first.  repeat / symptom_runs: the runs an input
        gets to tell always from flaky, and at most to learn its symptoms
        (``--repeat``, ``--symptom-runs``); a resumed run keeps its own.

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
            duplicate_reason, duplicate_by, oracle, culprit,
            reference_output, observed_output, lit_test, details TEXT (JSON),
            symptoms TEXT (JSON))
        status: new (made by triage, not marked yet) | known (marked by
        hand) | fixed (marked by hand) | regressed (a new input reached a
        bucket marked fixed); triage sets only new and regressed, and
        leaves every status a user set (docs/how-to/triage.md, "Statuses").
        count = number of members.
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
        oracle: which triage made the bucket: crash, or an oracle whose
        buckets go through :class:`harness.triage.buckets.OracleBucket`
        (differential: kinds wrong-code, reference-failure, target-failure;
        divergence: kind divergence, two builds of one tool, whose
        reference_output / observed_output are the reference build's and this
        build's output, normalised, and whose details hold both command lines,
        the comparison, the first difference and the reproduction command; any
        later oracle the same way, no schema change).  For those:
        signature = ``KIND | SIGNATURE`` (the oracle's documented signature,
        e.g. ``wrong-code | cse | arith.subi,...``); culprit = the pass the
        pipeline bisection blames; reference_output / observed_output = what
        the program prints before / after optimization (the reference's and
        the target's values); lit_test = the text of a lit test that fails on
        the buggy target (written as ``bucket-N/regression.mlir``); details =
        the oracle's own facts (JSON: e.g. the shortest differing pipeline, the
        first difference).  NULL for crash buckets.
        symptoms: the bucket's symptom set, {run key: {"runs": n, "inputs":
        m}} over its members' runs (n runs of m members gave that signature;
        "" = no finding), kept up to date as members are recorded: the links
        of "one program, several symptoms" (harness.triage.dedup) and the
        symptoms a report shows for a bug.  NULL for the other oracles.

    members(id INTEGER PRIMARY KEY, sha256 TEXT UNIQUE, bucket_id
            REFERENCES buckets (NULL: did not reproduce), form, tree, data BLOB,
            text, lines, sites, not_in_shape, reproduction, hits, attempts,
            outcome, reason, stderr, first_path, run_id, recorded, profile,
            contract, signatures TEXT (JSON), oracle, details TEXT (JSON))
        sha256 identifies the program: of its canonical rendering when it is
        in the shape (so a fuzz input's bytes and its .mlir sidecar are one
        member), of the text as given otherwise.  form: tree | text.
        reproduction: always | sometimes | never; hits of attempts runs gave
        the bucket's signature; signatures: {run key: runs, "": runs without
        a finding} over its attempts.  oracle: as for buckets; details: the
        oracle's facts of the member (differential: the verdict kind, the
        culprit pass and the shortest differing pipeline; divergence: the
        divergence's signature, aspect and kinds).  A member of an
        oracle other than crash may reproduce and have no bucket yet (its
        bucket is made after minimization): the next triage completes it.

    files(path TEXT, sha256 TEXT (of the file's bytes), member_id, run_id,
          PRIMARY KEY (path, sha256))
        every input file (or ``file.mlir#k`` chunk) and the member it holds.

    sightings(run_id, member_id, PRIMARY KEY (run_id, member_id))
        which runs saw which members.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness.triage.symptoms import add_symptoms, member_symptoms

__all__ = ["APPLICATION", "Database", "DatabaseBusy", "DatabaseError", "SCHEMA_VERSION", "STATUSES", "now"]

APPLICATION = "loom-fuzz-triage"
SCHEMA_VERSION = 5
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
    new_buckets INTEGER NOT NULL DEFAULT 0,
    oracle TEXT NOT NULL DEFAULT 'crash',
    symptom_runs INTEGER
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
    duplicate_by TEXT CHECK (duplicate_by IN ('auto', 'user')),
    oracle TEXT NOT NULL DEFAULT 'crash',
    culprit TEXT,
    reference_output TEXT,
    observed_output TEXT,
    lit_test TEXT,
    details TEXT,
    symptoms TEXT
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
    signatures TEXT,
    oracle TEXT NOT NULL DEFAULT 'crash',
    details TEXT
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


#: Columns schema version 4 added (a version-3 database gains them; its rows are crash triage's):
#: buckets and members of the oracles beside crash triage (wrong code: harness.triage.buckets).
_ADDED_IN_4 = (("runs", "oracle", "TEXT NOT NULL DEFAULT 'crash'"),
               ("members", "oracle", "TEXT NOT NULL DEFAULT 'crash'"), ("members", "details", "TEXT"),
               ("buckets", "oracle", "TEXT NOT NULL DEFAULT 'crash'"), ("buckets", "culprit", "TEXT"),
               ("buckets", "reference_output", "TEXT"), ("buckets", "observed_output", "TEXT"),
               ("buckets", "lit_test", "TEXT"), ("buckets", "details", "TEXT"))
#: Columns schema version 5 added (issue 49): the bound of a run's symptom profiles, and each
#: bucket's symptom set (computed from its members' runs when a version-4 database is opened).
_ADDED_IN_5 = (("runs", "symptom_runs", "INTEGER"), ("buckets", "symptoms", "TEXT"))
#: The migration to each version from the one before: (table, column, declaration) added.
_MIGRATIONS = {2: tuple((table, column, "TEXT") for table, column in _ADDED_IN_2), 3: _ADDED_IN_3, 4: _ADDED_IN_4,
               5: _ADDED_IN_5}


def _backfill_symptoms(c: sqlite3.Connection) -> None:
    """Each crash bucket's symptom set from its members (the migration to version 5)."""
    symptoms: dict[int, dict] = {}
    for row in c.execute("SELECT m.bucket_id, m.signatures, m.hits, m.attempts, b.signature AS bucket_signature "
                         "FROM members m JOIN buckets b ON b.id = m.bucket_id "
                         "WHERE b.oracle = 'crash' ORDER BY m.id"):
        add_symptoms(symptoms.setdefault(row["bucket_id"], {}), member_symptoms(row))
    c.executemany("UPDATE buckets SET symptoms = ? WHERE id = ?",
                  [(json.dumps(s, sort_keys=True), bucket) for bucket, s in symptoms.items()])


class DatabaseError(Exception):
    """The database cannot be used; the message is one line naming the file."""


class DatabaseBusy(DatabaseError):
    """Another live triage process is using the database."""


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Database:
    """One open triage database: the connection and its transactions.  Use from one thread."""

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

    def _close_quietly(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
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
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    for table, column, declaration in _MIGRATIONS[step]:
                        c.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                    if step == 5:
                        _backfill_symptoms(c)
                c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        c.execute("PRAGMA foreign_keys = ON")
        c.execute("PRAGMA synchronous = NORMAL")
