"""Executor disagreements through ``loomfuzz triage --oracle differential`` (issue 34).

Real findings: two wide programs of the hunt (``run --profile wide --seed 3``, programs 171
and 191; tests/programs/upstream_mlir22_narrowing_poison_wide_*.mlir) on which MLIR 22's
``arith-int-range-narrowing`` narrows an ``i32`` operation of masked values to ``i16`` and
keeps its overflow flags (docs/reference/upstream-bugs.md): the IR executor sees poison
reach a print, the JIT's code prints the original's values.  ``loomfuzz run`` writes them
as ``executor-disagreement`` findings; triage reproduces them (judged again, in process,
whatever ``--runner`` says, and said), bisects the pipeline, groups them, minimizes one with
the grammar's reducer under "the executors still disagree", and keeps a bucket of kind
``executor-disagreement`` in the database and the reports.  Nothing is stubbed: real
mlir-opt-22, the real driver, the real reducer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.execute.differential import ExecutorsDisagree, Optimizer, Same
from harness.execute.inprocess import InProcessExecutor
from harness.execute.interpret import interpret_program
from harness.execute.process_executor import ProcessExecutor
from harness.execute.exec_rendering import exec_module
from harness.execute.toolchain import Toolchain
from harness.execute.twins import TwinPlan, with_twins
from harness.run.driver_binary import find_driver
from harness.triage.crashdb import TriageDB
from harness.triage.wrong_code import signature_of

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted((ROOT / "tests" / "programs").glob("upstream_mlir22_narrowing_poison_wide_*.mlir"))
NARROW = "arith-int-range-narrowing{int-bitwidths-supported=8,16,32}"
PIPELINE = f"builtin.module({NARROW},canonicalize)"


def loomfuzz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())


@pytest.fixture(scope="module")
def triaged(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    if find_driver("mlir-opt") is None:
        pytest.fail("no persistent MLIR driver: run `bash .ci/setup`")
    work = tmp_path_factory.mktemp("disagreement")
    common = ("--profile", "wide", "--oracle", "differential", "--pipeline", PIPELINE, "--no-progress")
    found = loomfuzz("run", *map(str, PROGRAMS), *common, "--runner", "persistent", "--artifacts", str(work / "a"))
    assert found.returncode == 1, found.stdout[-2000:] + found.stderr[-2000:]
    kinds = [json.loads(p.read_text())["finding_kind"] for p in sorted((work / "a").glob("crash-*.json"))]
    assert kinds == ["executor-disagreement"] * 2, kinds
    done = loomfuzz("triage", str(work / "a"), *common, "--runner", "process", "--max-candidates", "60",
                    "--out", str(work / "t"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return work, done


def test_executor_disagreements_are_a_bucket_of_their_own(triaged):
    work, done = triaged
    notes = [line for line in done.stderr.splitlines() if "note:" in line]
    assert len(notes) == 1 and "2 executor-disagreement finding(s) judged in process" in notes[0], done.stderr
    assert "--runner process" in notes[0]
    with TriageDB(str(work / "t" / "triage.db")) as db:
        (bucket,) = db.buckets("differential")
        members = db.members(bucket["id"])
    assert bucket["kind"] == "executor-disagreement" and bucket["culprit"] == NARROW
    assert len(members) == 2 and all(m["reproduction"] == "always" for m in members)
    assert all(json.loads(m["details"])["kind"] == "executor-disagreement" for m in members)
    assert bucket["signature"].startswith(f"executor-disagreement | {NARROW} | optimized poison: ")
    assert "arith.trunci" in bucket["signature"]  # the narrowed function's operations
    details = json.loads(bucket["details"])
    assert (details["module"], details["how"]) == ("optimized", "poison") and details["observed_value"] == "poison"
    assert bucket["lit_test"] is None  # the JIT's values pass a runner-based lit test
    # the buckets' outputs: the JIT's (the original's values, the interpreter's) and the IR executor's
    minimized = bucket["minimized_text"]
    assert len(minimized) < min(len(p.read_text()) for p in PROGRAMS)
    # (after the program's own lines, its constant twins' where it was found with twins)
    assert bucket["reference_output"].startswith(interpret_program(minimized))
    assert "poison" in bucket["observed_output"] and "poison" not in bucket["reference_output"]
    report = json.loads((work / "t" / "report.json").read_text())
    (entry,) = [b for b in report["buckets"] if b["id"] == bucket["id"]]
    assert entry["kind"] == "executor-disagreement"
    assert "poison" in (work / "t" / f"bucket-{bucket['id']}" / "observed.txt").read_text()
    assert "executor-disagreement" in (work / "t" / "report.md").read_text()


def test_the_minimized_program_still_makes_the_executors_disagree(triaged):
    """Judged again outside triage: in process, an executor disagreement (the narrowed i16
    operation keeps a flag its values break); by the process path (a JIT alone), the same
    values: it is no wrong code the JIT can see."""
    work, _ = triaged
    with TriageDB(str(work / "t" / "triage.db")) as db:
        (bucket,) = db.buckets("differential")
    twins = json.loads(bucket["details"])["twins"]  # the twins it was found and minimized with
    text = exec_module(bucket["minimized_text"])
    text = with_twins(text, TwinPlan.parse(twins)) if twins else text
    optimizer = Optimizer(pipeline=f"builtin.module({NARROW})")
    executor = InProcessExecutor(Toolchain(), cross_check=0.0)
    try:
        verdict = executor.judge(text, optimizer)
    finally:
        executor.close()
    assert isinstance(verdict, ExecutorsDisagree) and verdict.poison, verdict
    assert re.search(r"overflow<nsw[^>]*> : i16", verdict.optimized_text), verdict.optimized_text
    assert isinstance(ProcessExecutor(Toolchain()).judge(text, optimizer), Same)
    assert signature_of(text, verdict).startswith("optimized poison: ")


def test_crash_triage_leaves_them_to_the_differential_oracle(triaged, tmp_path):
    """Without --oracle differential they are no crash findings to run: skipped, as every
    differential finding and its sidecars are (harness.triage.wrong_code.left_to_the_oracle)."""
    from harness.triage.wrong_code import left_to_the_oracle

    work, _ = triaged
    done = loomfuzz("triage", str(work / "a"), "--target", "mlir-opt", "--out", str(tmp_path / "t"), "--no-progress")
    assert done.returncode == 0 and "0 input(s), 0 distinct program(s)" in done.stderr, done.stderr[-2000:]
    names = {p.name for p in (work / "a").iterdir()}
    findings = [p for p in sorted((work / "a").glob("crash-*.mlir")) if p.name.count(".") == 1]
    assert len(findings) == 2
    for finding in findings:
        assert left_to_the_oracle(finding, names) == ("a executor-disagreement finding: triage it with "
                                                      "--oracle differential")
