"""One bug, one bucket, every time (issue 49): symptom profiles, folding by the program,
and the same bugs whatever the order of the inputs, ``--jobs`` or a SIGKILL and resume.

The fake loom-opt (tests/fixtures/fake_loom_opt.c) is a real process: its
``heap-by-size`` bug dies at random (pid/time entropy) with one of three symptoms
(``LLVM ERROR: SmallVector unable to grow``, a SIGSEGV in ``mlir::detail::walk``, a bare
SIGSEGV), the same program differently from run to run, on a program of three sites or
more; a smaller program always shows one symptom (one site: the LLVM ERROR; two: the
SIGSEGV in walk), so the minimized programs of the two symptoms stay apart, as
mlir-opt-19's ``remove-dead-values`` findings do (before issue 49: two bugs).  ``segv`` is
an unrelated SIGSEGV with its own stack.  Which bug each input reaches is known from the
program's shape (tests/triage_inputs.py, where heap-by-size's site is ``heap``'s), not
from triage.  ``loomfuzz triage`` runs as a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.triage.crashdb import SCHEMA_VERSION, TriageDB
from harness.triage.dedup import BucketFacts, find_duplicates
from shapes import encode_program
from tests.triage_inputs import MINIMAL, make_corpus

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]
FIXTURES = Path(__file__).parent / "fixtures"
PLANTS = "heap-by-size,segv"
#: The heap bug's three symptoms as the fake prints them (its frame lists), by run key prefix.
HEAP_SYMPTOMS = ("crash:llvm-error | SmallVector unable to grow", "crash:SIGSEGV | mlir::detail::walk |",
                 "crash:SIGSEGV")


def triage_args(fake, db, out, *inputs, jobs=2, plants=PLANTS):
    return [*LOOMFUZZ, "triage", "--loom-opt", str(fake), f"--pass-args=--plant={plants} --loom-lower-for-to-graph",
            "--db", str(db), "--out", str(out), "--jobs", str(jobs), "--no-progress", *map(str, inputs)]


def triage(fake, db, out, *inputs, jobs=2, plants=PLANTS):
    return subprocess.run(triage_args(fake, db, out, *inputs, jobs=jobs, plants=plants),
                          capture_output=True, text=True, timeout=180)


def loomfuzz(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*LOOMFUZZ, *map(str, args)], capture_output=True, text=True, timeout=60)


def which_symptom(key: str) -> str:
    """One of HEAP_SYMPTOMS, or the key itself."""
    if key == "crash:SIGSEGV":
        return key
    return next((s for s in HEAP_SYMPTOMS[:2] if key.startswith(s)), key)


def bugs_in(db_path) -> dict[str, tuple[frozenset, frozenset]]:
    """The bugs a database holds, read from its tables: the primary bucket's signature ->
    (the SHA-256 of every member of it and of its duplicates, the run keys their runs gave)."""
    with TriageDB(db_path, create=False) as db:
        out = {}
        for b in db.buckets():
            if b["duplicate_of"] is not None:
                continue
            group = [r for r in db.buckets() if db.primary_of(r["id"]) == b["id"]]
            members = [m for r in group for m in db.members(r["id"])]
            keys = {k for m in members for k in json.loads(m["signatures"]) if k}
            out[b["signature"]] = (frozenset(m["sha256"] for m in members), frozenset(keys))
        return out


# ============================================================ folding, by the facts


def _facts(id_, signature, message, stack, symptoms, members=1):
    return BucketFacts(id_, signature, "crash", signature.split(" | ")[0].split(":")[1], message, tuple(stack), {},
                       None, members, not message and not stack, False, symptoms)


def test_one_program_with_two_symptoms_links_their_buckets_and_a_bare_symptom_links_nothing():
    walk = "crash:SIGSEGV | mlir::detail::walk | collect"
    grow = "crash:llvm-error | SmallVector unable to grow | grow_pod"
    store = "crash:SIGSEGV | rewriteStore | lowerRegion"
    both = {walk: {"runs": 3, "inputs": 1}, grow: {"runs": 2, "inputs": 1}}
    buckets = [
        _facts(1, walk, "", ["mlir::detail::walk", "collect"], both, members=9),
        _facts(2, grow, "SmallVector unable to grow", ["grow_pod"], {grow: {"runs": 4, "inputs": 2}}),
        # the same bare SIGSEGV among its symptoms as the walk bucket's members show: no link
        _facts(3, store, "", ["rewriteStore", "lowerRegion"], {store: {"runs": 3, "inputs": 1},
                                                               "crash:SIGSEGV": {"runs": 2, "inputs": 1}}),
    ]
    (dup,) = find_duplicates(buckets)
    # one bug; its primary is the bucket with a message, not the older or the bigger one
    assert (dup.bucket, dup.primary) == (1, 2) and "one program, several symptoms" in dup.reasons[0]
    # the same facts in another order give the same answer
    assert find_duplicates(list(reversed(buckets))) == [dup]


# ======================================================= the pipeline


@pytest.fixture(scope="module")
def heap_bug(tmp_path_factory, fake_loom_opt):
    """A few hundred findings of the heap-by-size bug (three symptoms at random) and of segv."""
    root = tmp_path_factory.mktemp("grouping")
    corpus = make_corpus(root / "fuzz", seed=49, crashing=240, clean=0, plants=("heap", "segv"))
    proc = triage(fake_loom_opt, root / "t.db", root / "out", root / "fuzz")
    assert proc.returncode == 0, proc.stderr
    return root, corpus, json.loads((root / "out" / "report.json").read_text())


def test_a_bug_with_three_symptoms_is_one_bug_with_its_symptoms_and_another_stays_apart(heap_bug):
    root, corpus, report = heap_bug
    assert report["totals"]["bugs"] == 2
    primaries = [b for b in report["buckets"] if b["duplicate_of"] is None]
    members = {b["id"]: b for b in report["buckets"]}
    found = {}
    for p in primaries:
        group = [p, *(members[k] for k in p["duplicates"])]
        paths = {path for b in group for m in b["inputs"] for path in m["paths"]}
        (bug,) = {corpus.expected[path] for path in paths if path in corpus.expected}
        found[bug] = (p, group, paths)
    assert set(found) == {"heap", "segv"}
    # every input is in the bug its program reaches, none lost
    assert {path: bug for bug, (_, _, paths) in found.items() for path in paths} == corpus.expected
    heap, heap_group, _ = found["heap"]
    segv, segv_group, _ = found["segv"]
    assert len(segv_group) == 1 and list(segv["bug"]["symptoms"]) == [segv["signature"]]
    # one bug, three symptoms, and how often each occurred over the runs of its inputs
    symptoms = heap["bug"]["symptoms"]
    assert {which_symptom(k) for k in symptoms} == set(HEAP_SYMPTOMS)
    runs = [m for b in heap_group for m in b["inputs"]]
    assert sum(s["runs"] for s in symptoms.values()) == sum(m["attempts"] for m in runs)
    assert all(s["inputs"] >= 3 for s in symptoms.values())
    assert heap["type"] == "llvm-error"  # the bucket with a message stands for the bug
    assert sorted(heap["bug"]["aliases"]) == sorted(b["signature"] for b in heap_group if b is not heap)
    assert {which_symptom(b["signature"].split(" | input ")[0]) for b in heap_group} <= set(HEAP_SYMPTOMS)
    # the symptom profile: runs that agree stop at --repeat, runs that do not go on to the bound
    for m in runs:
        assert m["attempts"] in (1, 3, 5), m
        if len(m["signatures"]) > 1:
            assert m["attempts"] == 5
    assert any(len(m["signatures"]) == 3 for m in runs)
    assert all(m["attempts"] <= 3 for b in segv_group for m in b["inputs"])
    md = (root / "out" / "report.md").read_text()
    assert "2 bug(s) in" in md and "symptoms of this bug" in md


def test_list_and_show_give_the_bug_its_symptoms_and_aliases(heap_bug):
    root, _, report = heap_bug
    heap = next(b for b in report["buckets"] if b["duplicate_of"] is None and len(b["bug"]["symptoms"]) == 3)
    listed = loomfuzz("triage", "list", "--db", root / "t.db")
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in listed.stdout.splitlines()[1:-1] if r.startswith(f"{heap['id']} ")]
    assert row.split()[6] == "3"  # SYMPTOMS
    shown = loomfuzz("triage", "show", heap["id"], "--db", root / "t.db")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    start = lines.index("symptoms:     (of the bug: this bucket and its duplicates)")
    assert {which_symptom(line.split("input(s): ", 1)[1].removesuffix(" (bare: neither a message nor a stack)"))
            for line in lines[start + 1:start + 4]} == set(HEAP_SYMPTOMS)
    assert any(line.startswith("aliases:") and heap["bug"]["aliases"][0] in line for line in lines)


def test_same_bugs_whatever_the_order_the_jobs_or_a_sigkill_and_resume(tmp_path, fake_loom_opt):
    corpus = make_corpus(tmp_path / "fuzz", seed=50, crashing=40, clean=0, plants=("heap", "segv"))
    a, b = tmp_path / "fuzz" / "run-a", tmp_path / "fuzz" / "run-b"
    first = triage(fake_loom_opt, tmp_path / "1.db", tmp_path / "out1", a, b, jobs=2)
    assert first.returncode == 0, first.stderr
    expected = bugs_in(tmp_path / "1.db")
    assert len(expected) == 2
    # the bugs' members are the programs that reach them (known from their shapes)
    heap_sha = {m for members, keys in expected.values() if len(keys) == 3 for m in members}
    with TriageDB(tmp_path / "1.db", create=False) as db:
        by_path = {path: db.member(m["id"])["sha256"] for bucket in db.buckets() for m in db.members(bucket["id"])
                   for path in db.files_of(m["id"])}
    assert {p for p, bug in corpus.expected.items() if bug == "heap"} == {p for p, s in by_path.items()
                                                                          if s in heap_sha}
    # another order of the inputs, another --jobs
    second = triage(fake_loom_opt, tmp_path / "2.db", tmp_path / "out2", b, a, jobs=1)
    assert second.returncode == 0, second.stderr
    assert bugs_in(tmp_path / "2.db") == expected
    # killed with SIGKILL part way (the whole process group), then resumed
    db = tmp_path / "3.db"
    proc = subprocess.Popen(triage_args(fake_loom_opt, db, tmp_path / "out3", a, b, jobs=2),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    recorded = 0
    deadline = time.monotonic() + 120
    while recorded < 12 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=1) as conn:
                    recorded = conn.execute("SELECT COUNT(*) FROM members").fetchone()[0]
            except sqlite3.OperationalError:
                pass  # not created yet
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 12 <= recorded < len(corpus.expected), "the run was not killed part way"
    resumed = triage(fake_loom_opt, db, tmp_path / "out3", a, b, jobs=2)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming unfinished run 1" in resumed.stderr
    assert bugs_in(db) == expected


def test_a_database_of_schema_4_gains_its_buckets_symptoms_and_later_findings_join_their_bug(
        tmp_path, fake_loom_opt):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript((FIXTURES / "triage-schema4.sql").read_text())  # written by loom-fuzz before issue 49
    members = conn.execute("SELECT bucket_id, signatures FROM members").fetchall()
    conn.close()
    expected: dict[int, dict] = {}
    for bucket, signatures in members:  # the symptoms, summed here from the members' runs
        for key, runs in json.loads(signatures).items():
            entry = expected.setdefault(bucket, {}).setdefault(key, {"runs": 0, "inputs": 0})
            entry["runs"] += runs
            entry["inputs"] += 1
    with TriageDB(db, create=False) as handle:
        assert handle.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] \
            == str(SCHEMA_VERSION)
        assert {r["id"]: json.loads(r["symptoms"]) for r in handle.buckets()} == expected
        assert handle.run(1)["symptom_runs"] is None
        old_bugs = handle.counts()["bugs"]
    fuzz = tmp_path / "fuzz"
    fuzz.mkdir()
    (fuzz / "crash-heap").write_bytes(encode_program(MINIMAL["heap"]))
    proc = triage(fake_loom_opt, db, tmp_path / "out", fuzz, plants="heap,assert")
    assert proc.returncode == 0, proc.stderr
    assert "1 run now, 0 already in" in proc.stderr
    with TriageDB(db, create=False) as handle:
        assert handle.counts()["bugs"] == old_bugs == 2  # the new finding joined the heap bug
        assert handle.run(2)["symptom_runs"] == 5
