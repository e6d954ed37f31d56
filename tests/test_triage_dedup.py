"""Triage on bugs whose symptom varies (issue 27): duplicates, bare crashes, similar
stacks, progress and the cost of reproduction.

The fake loom-opt (tests/fixtures/fake_loom_opt.c) is a real process: ``heap`` is one
bug that crashes at random in one of three ways (an ``LLVM ERROR`` abort, a SIGSEGV in
``mlir::detail::walk``, a bare SIGSEGV with nothing on stderr), ``similar`` a SIGSEGV
whose stack is ``segv``'s but for the crash point, ``bare-loop`` and ``bare-branch``
two bugs that die by a bare SIGSEGV.  ``loomfuzz triage`` runs as a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.core.grammar import default_grammar
from harness.core.tree import describe as describe_tree
from harness.triage.crashdb import SCHEMA_VERSION, TriageDB
from harness.triage.dedup import SIMILARITY, BucketFacts, find_duplicates, stack_similarity
from shapes import to_tree
from tests.triage_inputs import MINIMAL, make_corpus

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]
G = default_grammar()
FIXTURES = Path(__file__).parent / "fixtures"


def describe(program) -> str:
    return describe_tree(G, to_tree(program))


def triage(fake, db, out, *inputs, plants, extra=(), progress=False, timeout=240):
    args = ["triage", "--loom-opt", fake, f"--pass-args=--plant={plants} --loom-lower-for-to-graph",
            "--db", db, "--out", out, "--jobs", "2", *extra, *map(str, inputs)]
    if not progress:
        args.append("--no-progress")
    return subprocess.run([*LOOMFUZZ, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def loomfuzz(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*LOOMFUZZ, *map(str, args)], capture_output=True, text=True, timeout=60)


def bugs(report: dict) -> dict[int, list[dict]]:
    """Primary bucket id -> [primary, its duplicates...]."""
    by_id = {b["id"]: b for b in report["buckets"]}
    out: dict[int, list[dict]] = {}
    for b in report["buckets"]:
        primary = b["duplicate_of"] if b["duplicate_of"] is not None else b["id"]
        assert by_id[primary]["duplicate_of"] is None, "a duplicate of a duplicate"
        out.setdefault(primary, []).append(b)
    return out


# ============================================================ the measure


def test_stack_similarity_is_casr_measure():
    stack = ["crash", "b", "c", "d", "e"]
    assert stack_similarity(stack, stack) == pytest.approx(1.0)
    assert stack_similarity(stack, ["x", "y", "z"]) == 0.0
    # a frame matched near the top weighs more than one matched further down
    assert stack_similarity(stack, ["crash", "q", "r", "s", "t"]) > stack_similarity(stack, ["q", "r", "s", "t", "e"])
    # a frame matched at another depth weighs less than at the same depth
    assert stack_similarity(stack, ["crash", "b", "c"]) > stack_similarity(stack, ["crash", "x", "b", "c"])


def _facts(id_, stack, *, message="", type_="SIGSEGV"):
    return BucketFacts(id_, f"crash:{type_} | {' | '.join(stack[:3])}", "crash", type_, message, tuple(stack), {},
                       None, 1, False, False)


def test_stacks_that_differ_only_below_the_crash_point_are_one_bug_and_others_two():
    common = ["loom::MemoryLowering::lowerRegion", "loom::LowerForToGraphPass::runOnOperation",
              "mlir::detail::OpToOpPassAdaptor::run", "mlir::PassManager::run", "performActions",
              "mlir::MlirOptMain"]
    store = ["loom::MemoryLowering::rewriteStore", *common]
    load = ["loom::MemoryLowering::rewriteLoad", *common]
    # the same crash point, reached from another caller (frame 3): one bug
    other_caller = [store[0], store[1], "loom::LowerForToGraphPass::lowerLoopBody", *common[1:]]
    (dup,) = find_duplicates([_facts(1, store), _facts(2, other_caller)])
    assert (dup.bucket, dup.primary) == (2, 1) and "similar" in dup.reasons[0]
    # CASR's measure alone would join these two (every caller the same), but they crash
    # at different points: two bugs
    assert stack_similarity(store, load) >= SIMILARITY
    assert find_duplicates([_facts(1, store), _facts(2, load)]) == []
    # the same stack with another assertion message: two bugs
    assert find_duplicates([_facts(1, store, type_="assert", message="a"),
                            _facts(2, store, type_="assert", message="b")]) == []


# ======================================================= the pipeline


@pytest.fixture(scope="module")
def heap_triage(tmp_path_factory, fake_loom_opt):
    """A few hundred findings of two bugs: `heap` (three symptoms at random) and `assert`."""
    root = tmp_path_factory.mktemp("heap")
    corpus = make_corpus(root / "fuzz", seed=27, crashing=240, clean=0, plants=("assert", "heap"))
    proc = triage(fake_loom_opt, root / "t.db", root / "out", root / "fuzz", plants="assert,heap")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((root / "out" / "report.json").read_text())
    return {"root": root, "corpus": corpus, "proc": proc, "report": report}


def test_one_bug_with_three_symptoms_is_one_bug_with_its_variants_folded(heap_triage):
    report, corpus = heap_triage["report"], heap_triage["corpus"]
    found = bugs(report)
    assert len(found) == 2 and report["totals"]["bugs"] == 2, {k: [b["signature"] for b in v]
                                                                for k, v in found.items()}
    by_bug = {}
    for primary, group in found.items():
        trees = {b["minimized"]["tree"] for b in group}
        bug = "heap" if describe(MINIMAL["heap"]) in trees else "assert"
        by_bug[bug] = group
    assert [b["type"] for b in by_bug["assert"]] == ["assert"]
    heap = by_bug["heap"]
    # the variants were buckets of their own, folded under one bug with the evidence
    assert {"llvm-error", "SIGSEGV"} <= {b["type"] for b in heap} and len(heap) >= 2
    primary = next(b for b in heap if b["duplicate_of"] is None)
    assert primary["message"] or primary["frames"], "a bare crash chosen to stand for the bug"
    for b in heap:
        if b is not primary:
            assert b["duplicate_by"] == "auto" and b["duplicate_reason"]
            assert b["id"] in primary["duplicates"]
    # every input is in its bug, none lost
    where = {p: bug for bug, group in by_bug.items() for b in group for m in b["inputs"] for p in m["paths"]}
    assert where == {p: bug for p, bug in corpus.expected.items()}
    # flaky inputs: the majority signature (a bare crash only when nothing else came),
    # with how often each came
    heap_members = [(b, m) for b in heap for m in b["inputs"]]
    assert any(m["reproduction"] == "sometimes" and len(m["signatures"]) > 1 for _, m in heap_members)
    for b, m in heap_members:
        assert sum(m["signatures"].values()) == m["attempts"]
        informative = {key: n for key, n in m["signatures"].items() if key and key != "crash:SIGSEGV"}
        assert m["hits"] == max((informative or m["signatures"]).values())
        assert b["signature"] in informative or not informative
    md = (heap_triage["root"] / "out" / "report.md").read_text()
    assert "2 bug(s) in" in md and "↳ [" in md and "signatures seen:" in md


def test_list_folds_duplicates_and_mark_undoes_a_merge(heap_triage, fake_loom_opt, tmp_path):
    root = heap_triage["root"]
    db = tmp_path / "copy.db"
    with sqlite3.connect(root / "t.db") as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    report = heap_triage["report"]
    duplicate = next(b for b in report["buckets"] if b["duplicate_of"] is not None)
    listed = loomfuzz("triage", "list", "--db", db)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()[1:-1]
    assert len(rows) == len(report["buckets"])
    assert sum(1 for r in rows if not r.startswith("└")) == 2
    assert any(r.startswith(f"└ {duplicate['id']} ") for r in rows)
    # undo: the bucket is a bug of its own, and stays so when triage runs again
    marked = loomfuzz("triage", "mark", duplicate["id"], "distinct", "--db", db)
    assert marked.returncode == 0, marked.stderr
    again = triage(fake_loom_opt, db, tmp_path / "out", root / "fuzz", plants="assert,heap")
    assert again.returncode == 0, again.stderr
    after = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(bugs(after)) == 3
    assert next(b for b in after["buckets"] if b["id"] == duplicate["id"])["duplicate_by"] == "user"
    # and merged back by hand
    merged = loomfuzz("triage", "mark", duplicate["id"], "duplicate-of", duplicate["duplicate_of"], "--db", db)
    assert merged.returncode == 0 and f"a duplicate of bucket {duplicate['duplicate_of']}" in merged.stdout
    with TriageDB(db, create=False) as handle:
        assert handle.counts()["bugs"] == 2
    bad = loomfuzz("triage", "mark", duplicate["id"], "duplicate-of", 999, "--db", db)
    assert bad.returncode == 1 and bad.stderr.strip().endswith("no bucket 999")


def test_two_bugs_with_similar_stacks_stay_two(tmp_path, fake_loom_opt):
    corpus = make_corpus(tmp_path / "fuzz", seed=3, crashing=16, clean=0, plants=("segv", "similar"))
    assert set(corpus.expected.values()) == {"segv", "similar"}
    proc = triage(fake_loom_opt, tmp_path / "t.db", tmp_path / "out", tmp_path / "fuzz", plants="segv,similar")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    found = bugs(report)
    assert len(found) == 2 and all(len(group) == 1 for group in found.values())
    assert {b["frames"][0] for b in report["buckets"]} == {"loom::MemoryLowering::rewriteStore",
                                                           "loom::MemoryLowering::rewriteLoad"}
    assert len({tuple(b["frames"][1:]) for b in report["buckets"]}) == 1  # the same callers


def test_bare_crashes_of_two_bugs_stay_apart(tmp_path, fake_loom_opt):
    corpus = make_corpus(tmp_path / "fuzz", seed=5, crashing=6, clean=0, plants=("bare-loop", "bare-branch"))
    proc = triage(fake_loom_opt, tmp_path / "t.db", tmp_path / "out", tmp_path / "fuzz",
                  plants="bare-loop,bare-branch")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    found = bugs(report)
    # the bare buckets (one per input) of one bug, grouped by their minimized program (the
    # corpus' one input outside the grammar is kept as text: the same program, blank line aside)
    tree_of = {}
    for primary, group in found.items():
        (tree_of[primary],) = {b["minimized"]["tree"] for b in group} - {None}
    assert len(found) == 2
    assert sorted(tree_of.values()) == sorted([describe(MINIMAL["bare-loop"]), describe(MINIMAL["bare-branch"])])
    for b in report["buckets"]:
        assert b["type"] == "SIGSEGV" and not b["frames"] and not b["message"]
        (member,) = b["inputs"]
        assert member["attempts"] == 5  # re-run until a message or frames: none came
    where = {p: tree_of[primary] for primary, group in found.items() for b in group
             for m in b["inputs"] for p in m["paths"]}
    assert {p: where[p] for p in corpus.expected} == {p: describe(MINIMAL[bug]) for p, bug in corpus.expected.items()}


def test_500_findings_progress_without_a_terminal_and_fewer_than_3_runs_each(tmp_path, fake_loom_opt):
    corpus = make_corpus(tmp_path / "fuzz", seed=500, crashing=500, clean=0)
    inputs = len(corpus.expected)
    assert inputs >= 500
    # every target process counted by a wrapper, not by triage
    count = tmp_path / "processes"
    wrapper = tmp_path / "fake-loom-opt"
    wrapper.write_text(f'#!/bin/sh\necho >> "{count}"\nexec "{fake_loom_opt}" "$@"\n')
    wrapper.chmod(0o755)
    proc = subprocess.Popen(
        [*LOOMFUZZ, "triage", "--loom-opt", str(wrapper),
         "--pass-args=--plant=assert,segv,fatal --loom-lower-for-to-graph",
         "--db", str(tmp_path / "t.db"), "--out", str(tmp_path / "out"), "--jobs", "2", str(tmp_path / "fuzz")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    lines: list[tuple[float, str]] = []

    def read():
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join()
    ended = time.monotonic()
    assert proc.returncode == 0, "\n".join(line for _, line in lines)
    progress = [(t, line) for t, line in lines if line.startswith(("triage: reproduce ", "triage: minimize "))]
    assert any(" reproduce " in line for _, line in progress) and any(" minimize " in line for _, line in progress)
    assert progress[-1][1].startswith("triage: minimize 3/3 buckets")
    times = [t for t, _ in lines[lines.index(progress[0]):]] + [ended]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) <= 5.0, lines
    assert all("target runs" in line for _, line in progress)
    assert any(" inputs, " in line for _, line in progress)
    # a line printed mid-phase says the time left (whether a tick falls mid-phase depends on speed)
    for _, line in progress:
        done, total = map(int, re.search(r" (\d+)/(\d+) ", line).groups())
        assert ("s left" in line) == (0 < done < total), line
    # nothing flaky: most inputs run once
    processes = len(count.read_text().splitlines())
    assert processes < 3 * inputs, processes
    summary = lines[-1][1]
    assert f"in {processes} processes" in summary, summary
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    members = [m for b in report["buckets"] for m in b["inputs"]]
    assert len(report["buckets"]) == 3 and len(members) == inputs
    assert sum(m["attempts"] for m in members) <= inputs + 2 * len(report["buckets"]) + 2 * 3


def test_a_database_of_schema_2_is_upgraded_and_triaged(tmp_path, fake_loom_opt):
    from shapes import encode_program

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript((FIXTURES / "triage-schema2.sql").read_text())  # written by loom-fuzz before issue 27
    conn.close()
    fuzz = tmp_path / "fuzz"
    fuzz.mkdir()
    for name in ("assert", "segv", "fatal"):
        (fuzz / f"crash-{name}").write_bytes(encode_program(MINIMAL[name]))
    proc = triage(fake_loom_opt, db, tmp_path / "out", fuzz, plants="assert,segv,fatal")
    assert proc.returncode == 0, proc.stderr
    assert "1 run now, 2 already in" in proc.stderr
    with TriageDB(db, create=False) as handle:
        version = handle.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        assert int(version) == SCHEMA_VERSION
        rows = handle.buckets()
        assert len(rows) == 3 and all(row["verify_counts"] for row in rows)  # old buckets verified too
        old = [row for row in rows if row["first_run"] == 1]
        assert len(old) == 2 and all(json.loads(row["verify_counts"]) == {row["signature"]: 5} for row in old)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["totals"]["bugs"] == 3
    # a database newer than this loom-fuzz: one line, nothing changed
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    listed = loomfuzz("triage", "list", "--db", db)
    assert listed.returncode == 1 and len(listed.stderr.strip().splitlines()) == 1
    assert "schema version 99 is newer" in listed.stderr
