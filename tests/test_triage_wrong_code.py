"""Wrong-code findings as buckets of the triage database (issue 22 item 5).

Real ``loomfuzz`` subprocesses, real mlir-opt-22 / mlir-runner-22 and the
test double tests/fixtures/wrong_rewrite_opt.py (mlir-opt-22 with planted
wrong rewrites under cse and canonicalize).  The findings come from a real
``run --oracle differential`` over 30 wide programs (five findings: four
under canonicalize, one under cse).
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.triage.crashdb import SCHEMA_VERSION, OracleBucket, TriageDB
from twin_values import interpreted

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "fixtures" / "wrong_rewrite_opt.py"
PIPELINE = "builtin.module(canonicalize,cse,sccp)"
PLANTED = {"cse": "arith.subi", "canonicalize": "arith.maxsi", "sccp": "arith.xori"}


def loomfuzz(*args, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    """(folder of wrong-code findings, the buggy optimizer): 30 wide programs through the double."""
    tmp_path = tmp_path_factory.mktemp("wrong")
    optimizer = tmp_path / "buggy-opt"
    optimizer.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} "$@"\n')
    optimizer.chmod(0o755)
    done = loomfuzz("run", "--profile", "wide", "-n", 30, "--seed", 3, "--oracle", "differential",
                    "--pipeline", PIPELINE, "--mlir-opt", optimizer, "--artifacts", tmp_path / "a",
                    "--no-progress", "--jobs", 2)
    assert done.returncode == 1, done.stderr
    return tmp_path / "a", optimizer


def triage(findings, out: Path, *extra) -> subprocess.CompletedProcess:
    folder, optimizer = findings
    return loomfuzz("triage", folder, "--profile", "wide", "--oracle", "differential", "--mlir-opt", optimizer,
                    "--pipeline", PIPELINE, "--out", out, "--max-candidates", 6, *extra)


def canonical_findings(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("crash-*.mlir") if not p.name.endswith((".exec.mlir", ".optimized.mlir")))


def differential_part(db: TriageDB) -> dict:
    """The snapshot of the wrong-code triage's buckets and members (not crash triage's)."""
    snapshot = db.snapshot()
    user = ("status", "duplicate_of", "duplicate_by", "duplicate_reason")  # what `triage mark` sets
    return {"buckets": {k: {f: x for f, x in v.items() if f not in user}
                        for k, v in snapshot["buckets"].items() if v["oracle"] == "differential"},
            "members": {k: v for k, v in snapshot["members"].items() if k.startswith("differential:")},
            "files": [f for f in snapshot["files"] if f[2].startswith("differential:")]}


@pytest.fixture(scope="module")
def triaged(findings, tmp_path_factory):
    """A database of schema 3 made by loom-fuzz before schema 4 (two crash buckets), then the
    findings triaged into it with --jobs 2 (with progress lines): (database, report folder,
    the crash buckets' rows before, the triage's stderr)."""
    tmp_path = tmp_path_factory.mktemp("triaged")
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript((ROOT / "tests" / "fixtures" / "triage-schema3.sql").read_text())
    before = conn.execute("SELECT signature, minimized_text, verify_counts FROM buckets ORDER BY id").fetchall()
    conn.close()
    out = tmp_path / "out"
    done = triage(findings, out, "--db", db, "--jobs", 2)
    assert done.returncode == 0, done.stderr
    return db, out, before, done.stderr


def test_jobs_1_and_2_give_the_same_buckets_and_nothing_is_judged_twice(findings, triaged, tmp_path):
    db, _, _, stderr = triaged
    assert re.search(r"triage: reproduce \d+/\d+ findings", stderr)  # progress lines (no terminal)
    assert re.search(r"triage: minimize \d+/\d+ buckets", stderr)
    one = triage(findings, tmp_path / "one", "--jobs", 1, "--no-progress")
    assert one.returncode == 0, one.stderr
    originals = canonical_findings(findings[0])
    with TriageDB(tmp_path / "one" / "triage.db", create=False) as a, TriageDB(db, create=False) as b:
        assert differential_part(a) == differential_part(b)  # same buckets, members, minimized programs
        rows = a.buckets()
        assert {r["oracle"] for r in rows} == {"differential"} and len(rows) >= 2
        assert sum(r["count"] for r in rows) == a.counts()["members"] == len(originals)
        for row in rows:
            assert row["signature"].startswith(f"wrong-code | {row['culprit']} | ")
            assert PLANTED[row["culprit"]] in row["minimized_text"]
            twins = json.loads(row["details"] or "{}").get("twins")
            assert row["reference_output"] == interpreted(row["minimized_text"], twins)
            assert row["observed_output"] != row["reference_output"]
            assert row["lit_test"].startswith("// RUN: ") and "CHECK" in row["lit_test"]
            assert a.oracle_bucket("wrong-code", row["signature"].split(" | ", 1)[1])["id"] == row["id"]
    # again on the same database: every finding is known, nothing is judged or minimized again
    again = triage(findings, tmp_path / "one", "--jobs", 2, "--no-progress")
    assert again.returncode == 0, again.stderr
    assert f"0 judged now (0 not reproduced), {len(originals)} already in" in again.stderr
    assert "0 group(s) minimized" in again.stderr


def listing(db) -> dict[str, list[str]]:
    """``triage list``'s rows by bucket id (a folded duplicate's id after its └)."""
    listed = loomfuzz("triage", "list", "--db", db)
    assert listed.returncode == 0, listed.stderr
    rows = {}
    for line in listed.stdout.splitlines()[1:]:
        words = line.removeprefix("└ ").split()
        if len(words) > 4 and words[0].isdigit() and words[1] in ("new", "known", "fixed", "regressed"):
            rows[words[0]] = words
    return rows


def test_a_schema_3_database_is_migrated_and_lists_crash_and_wrong_code_buckets(triaged):
    db, out, before, _ = triaged
    with TriageDB(db, create=False) as handle:
        version = handle.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        assert int(version) == SCHEMA_VERSION == 5
        crash = handle.buckets("crash")
        assert [(r["signature"], r["minimized_text"], r["verify_counts"]) for r in crash] == before  # kept
        wrong = handle.buckets("differential")
        assert len(wrong) >= 2 and all(r["id"] > 2 for r in wrong)
        assert handle.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = listing(db)
    assert rows["1"][2:4] == ["crash", "-"] and rows["2"][2:4] == ["crash", "-"]
    for row in wrong:
        assert rows[str(row["id"])][2:4] == ["wrong-code", row["culprit"]]
    # mark works on a wrong-code bucket: a status, then a duplicate of another bucket, then undone
    first, second = wrong[0]["id"], wrong[1]["id"]
    assert loomfuzz("triage", "mark", first, "fixed", "--db", db).returncode == 0
    marked = loomfuzz("triage", "mark", second, "duplicate-of", first, "--db", db)
    assert marked.returncode == 0 and f"a duplicate of bucket {first}" in marked.stdout
    listed = loomfuzz("triage", "list", "--db", db).stdout
    assert re.search(rf"^{first}\s+fixed\s+wrong-code", listed, re.M)
    assert re.search(rf"^└ {second}\s+new\s+wrong-code", listed, re.M)
    shown = loomfuzz("triage", "show", second, "--db", db, "--out", out).stdout
    assert f"culprit:      {wrong[1]['culprit']}" in shown and "values:       reference " in shown
    assert loomfuzz("triage", "mark", second, "distinct", "--db", db).returncode == 0
    # the HTML report shows the minimized program, both values, the culprit and the lit test
    assert loomfuzz("triage", "report", "--db", db, "--out", out).returncode == 0
    page = (out / "report.html").read_text()
    report = json.loads((out / "report.json").read_text())
    for bucket in report["buckets"]:
        section = page[page.index(f'id="bucket-{bucket["id"]}"'):]
        section = section[:section.index("</section>")]
        if bucket["oracle"] == "crash":
            assert "culprit pass" not in section
            continue
        details = bucket["details"]
        assert f"<code>{bucket['culprit']}</code>" in section
        assert f'<code class="reference">{details["reference_value"]}</code>' in section
        assert f'<code class="observed">{details["observed_value"]}</code>' in section
        assert 'class="code lit"' in section and 'class="code program"' in section
        assert "RUN:" in section and "CHECK" in section
    assert 'id="row-1"' in page and f'id="row-{second}"' in page  # the crash and wrong-code rows


def test_the_bucket_record_is_kind_generic(tmp_path):
    """Another oracle (a two-build divergence, say) stores its buckets with no schema change."""
    with TriageDB(tmp_path / "t.db") as db:
        run_id, _ = db.begin_run({"name": "divergence", "argv": ["a", "b"], "render": "canonical"}, 1,
                                 oracle="divergence")
        bucket = OracleBucket(oracle="divergence", kind="divergence", signature="outcome: accepted/rejected",
                              minimized_text="x\n", reference_output="module {}\n", observed_output="error\n",
                              details={"builds": ["old", "new"]})
        bucket_id, new = db.record_oracle_bucket(run_id, bucket, [])
        assert new and db.record_oracle_bucket(run_id, bucket, []) == (bucket_id, False)
        row = db.oracle_bucket("divergence", "outcome: accepted/rejected")
        assert row["id"] == bucket_id and row["oracle"] == "divergence"
        assert json.loads(row["details"]) == {"builds": ["old", "new"]}
        assert db.oracle_bucket("wrong-code", "outcome: accepted/rejected") is None
        assert db.unminimized() == [] and db.unverified() == []  # crash triage leaves it alone


def test_a_stopped_wrong_code_triage_keeps_its_database_and_resumes(findings, triaged, tmp_path):
    """SIGTERM and SIGKILL while findings are judged, SIGINT while buckets are minimized (real
    signals to a real loomfuzz, as tests/test_stop.py sends them): each run leaves a whole
    database with what it committed, and the next run ends with the database an uninterrupted
    run made."""
    from test_stop import GONE_WITHIN, Run

    folder, optimizer = findings
    db = tmp_path / "t" / "triage.db"
    total = len(canonical_findings(folder))

    def count(query: str) -> int:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                return conn.execute(query).fetchone()[0]
        except sqlite3.Error:  # not created yet
            return 0

    def members() -> int:
        return count("SELECT COUNT(*) FROM members")

    def buckets() -> int:
        return count("SELECT COUNT(*) FROM buckets")

    def run(name: str) -> Run:
        return Run(tmp_path, name, ["triage", folder, "--profile", "wide", "--oracle", "differential",
                                    "--mlir-opt", optimizer, "--pipeline", PIPELINE, "--out", tmp_path / "t",
                                    "--max-candidates", 6, "--jobs", 2, "--no-progress"])

    stages = {"SIGTERM": lambda procs: 1 <= members() < total,  # while judging
              "SIGKILL": lambda procs: len(procs) > 1,  # while judging the rest: no word, no cleanup
              "SIGINT": lambda procs: members() == total and buckets() == 0 and len(procs) > 1}  # minimizing
    runs = []
    try:
        for name, when in stages.items():
            runs.append(run(name))
            runs[-1].wait_for(when, f"the moment to send {name}")
            held = members()
            signum = getattr(signal, name)
            status, elapsed, left = runs[-1].stop(signum)
            assert left == [] and elapsed < GONE_WITHIN, (name, left)
            if signum == signal.SIGKILL:
                assert status == -signal.SIGKILL
            else:
                assert status == 128 + signum, runs[-1].stderr[-2000:]
                assert "loomfuzz triage: interrupted" in runs[-1].stderr
                assert re.search(rf"triage: stopped \({name}\): .* holds \d+ input program", runs[-1].stderr)
            with sqlite3.connect(db) as conn:  # whole: every committed finding kept, nothing half-written
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                assert conn.execute("SELECT COUNT(*) FROM members").fetchone()[0] >= held
                assert conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone()[0] == 1
        assert "resuming unfinished run 1" in runs[-1].stderr
        final = run("final")
        runs.append(final)
        assert final.proc.wait(timeout=300) == 0, final.stderr[-3000:]
        assert "(resumed)" in final.stderr and "0 judged now" in final.stderr
    finally:
        for started in runs:
            started.kill_all()
    with TriageDB(db, create=False) as resumed, TriageDB(triaged[0], create=False) as whole:
        assert differential_part(resumed) == differential_part(whole)
        assert resumed.last_run()["status"] == "complete" and resumed.counts()["runs"] == 1
