"""Two builds of one tool (``--reference-loom-opt`` / ``--reference-mlir-opt``): the normal form
of printed MLIR on real mlir-opt-16 and mlir-opt-22 output, two builds that differ in one
behaviour (a divergence found and triaged to one bucket of the triage database: list, show,
mark, each build's output, the reproduction command run; a second triage judges nothing; 1 and
2 jobs, the reference named or read from the sidecars, give one database; a recorded reference
build that is gone), two identical builds (none),
MLIR 16 against 22 under ``--oracle differential``, and bad reference builds (exit 2)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import load_grammar
from harness.execute.interpret import interpret_program
from harness.execute.releases import for_release
from harness.execute.exec_rendering import exec_module
from harness.fuzzing.sources import from_generator
from harness.run.normalize import first_difference, normalize
from harness.triage.crashdb import TriageDB

ROOT = Path(__file__).resolve().parents[1]
CHANGED = ROOT / "tests" / "fixtures" / "changed_build.py"
ZERO_TRIP_WIDE = ROOT / "tests" / "programs" / "upstream_mlir16_sccp_zero_trip_wide.mlir"
PIPELINE = "builtin.module(canonicalize,cse,sccp,symbol-dce)"


def loomfuzz(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:  # .ci/setup installs mlir-22-tools and mlir-16-tools: missing is a failure
        pytest.fail(f"{binary} is not on PATH (bash .ci/setup installs it)")
    return path


def _opt(binary: str, text: str, pipeline: str = PIPELINE, split: bool = False) -> str:
    argv = [binary, "--allow-unregistered-dialect", f"--pass-pipeline={pipeline}"]
    done = subprocess.run(argv + (["--split-input-file"] if split else []) + ["-"], input=text,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1000:]
    return done.stdout


# ------------------------------------------------------------------ the normal form


def test_the_normal_form_renames_values_blocks_and_inlines_constants():
    printed = """\
#loc = loc("x.mlir":1:1)
module {
  func.func @f(%arg0: i32, %arg1: i1) -> i32 {
    %c3_i32 = arith.constant 3 : i32 loc(#loc)
    %c5_i32 = arith.constant 5 : i32
    %0 = llvm.mul %arg0, %c3_i32  : i32
    cf.cond_br %arg1, ^bb1(%0 : i32), ^bb2
  ^bb1(%1: i32):  // pred: ^bb0
    %2:2 = "test.pair"(%1, %c5_i32) : (i32, i32) -> (i32, i32)
    return %2#1 : i32
  ^bb2:
    return %c5_i32 : i32
  }
  func.func @g(%x: i32) -> i32 {
    return %x : i32
  }
}
"""
    assert normalize(printed) == """\
module {
func.func @f(%0: i32, %1: i1) -> i32 {
%2 = llvm.mul %0, <arith.constant 3 : i32> : i32
cf.cond_br %1, ^bb0(%2 : i32), ^bb1
^bb0(%3: i32):
%4:2 = "test.pair"(%3, <arith.constant 5 : i32>) : (i32, i32) -> (i32, i32)
return %4#1 : i32
^bb1:
return <arith.constant 5 : i32> : i32
}
func.func @g(%0: i32) -> i32 {
return %0 : i32
}
}
"""


def test_the_normal_form_keeps_behaviour():
    base = "func.func @f(%a: i32, %b: i32) -> i32 {\n  %c1 = arith.constant 1 : i32\n  %d = arith.subi %a, %b : i32\n  return %d : i32\n}\n"
    renamed = "func.func @f(%x: i32, %y: i32) -> i32 {\n  %0 = arith.subi %x, %y : i32\n  %one = arith.constant 1 : i32\n  return %0 : i32\n}\n"
    assert normalize(base) == normalize(renamed)
    for changed, line in ((base.replace("%a, %b : i32\n  return", "%b, %a : i32\n  return"), 2),  # operands
                          (base.replace("arith.subi", "arith.addi"), 2),  # another operation
                          (base.replace("return %d", "return %a"), 3),  # another value
                          (base.replace("@f(", "@g("), 1),  # another symbol
                          (base.replace("constant 1 ", "constant 2 "), None)):  # an unused constant
        difference = first_difference(normalize(changed), normalize(base))
        assert (difference and difference.line) == line, (changed, difference)


def test_mlir_16_and_22_print_the_same_optimized_modules_alike_in_the_normal_form():
    """Real printer output of two releases: the text differs (constant order, MLIR 16's
    two blanks before ':'), the normal form does not, on every program of the sample."""
    mlir16, mlir22 = _require("mlir-opt-16"), _require("mlir-opt-22")
    source = from_generator(load_grammar(None, None), "fast", 1, 20, "canonical")
    texts = [for_release(exec_module(source.program_at(k)), 16) for k in range(20)]
    old = _opt(mlir16, "// -----\n".join(texts), split=True).split("// -----\n")
    new = _opt(mlir22, "// -----\n".join(texts), split=True).split("// -----\n")
    assert len(old) == len(new) == 20
    assert sum(a != b for a, b in zip(old, new)) >= 10  # the spelling differs ...
    for a, b in zip(old, new):
        assert first_difference(normalize(a), normalize(b)) is None  # ... and only the spelling


# ---------------------------------------------------------------- two fake builds


def _findings(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("crash-*.json"))]


def test_two_identical_builds_give_no_divergence(tmp_path):
    mlir22 = _require("mlir-opt-22")
    copy = tmp_path / "mlir-opt-copy"
    copy.symlink_to(mlir22)
    done = loomfuzz("run", "-n", "300", "--seed", "4", "--target", "mlir-opt", "--reference-mlir-opt",
                    str(copy), "--artifacts", str(tmp_path / "a"), "--no-progress",
                    env={"MLIR_OPT": mlir22})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "programs:   300" in done.stdout and "runner divergence" in done.stdout
    assert not _findings(tmp_path / "a")


COUNT, SEED = 53, 4  # six programs of the 53 call @extern_scale in a region


@pytest.fixture(scope="module")
def changed(tmp_path_factory) -> Path:
    """The findings of 53 programs through the changed build, mlir-opt-22 the reference."""
    mlir22 = _require("mlir-opt-22")
    folder = tmp_path_factory.mktemp("changed") / "a"
    done = loomfuzz("run", "-n", str(COUNT), "--seed", str(SEED), "--target", "mlir-opt",
                    "--reference-mlir-opt", mlir22, "--artifacts", str(folder), "--no-progress",
                    env={"MLIR_OPT": str(CHANGED)})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    return folder


def test_a_build_changed_in_one_behaviour_is_found(changed):
    mlir22 = _require("mlir-opt-22")
    # which programs should diverge, from mlir-opt-22 alone: those whose output calls @extern_scale
    source = from_generator(load_grammar(None, None), "fast", SEED, COUNT, "oracle")
    programs = [source.program_at(k) for k in range(COUNT)]
    outputs = _opt(mlir22, "// -----\n".join(programs), split=True).split("// -----\n")
    expected = {"crash-" + hashlib.sha1(p.encode()).hexdigest()
                for p, out in zip(programs, outputs) if "llvm.call @extern_scale(" in out}
    findings = _findings(changed)
    assert {f["name"] for f in findings} == expected and len(expected) >= 5
    for record in findings:
        divergence = record["divergence"]
        assert record["finding_kind"] == "divergence" and divergence["aspect"] == "output"
        assert "@helper_double" in divergence["first_difference"]["primary"]
        assert "@extern_scale" in divergence["first_difference"]["reference"]
        assert record["reference_target"]["argv"][0] == mlir22


def _triage(findings: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return loomfuzz("triage", str(findings), "--target", "mlir-opt", "--out", str(out), *extra,
                    env={"MLIR_OPT": str(CHANGED)})


@pytest.fixture(scope="module")
def triaged(changed, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The changed build's findings triaged with the reference named, in 2 jobs: (out, the run)."""
    out = tmp_path_factory.mktemp("triaged") / "t"
    done = _triage(changed, out, "--reference-mlir-opt", _require("mlir-opt-22"), "--jobs", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    return out, done


def test_the_divergence_is_one_bucket_of_the_triage_database(changed, triaged):
    out, done = triaged
    mlir22 = _require("mlir-opt-22")
    findings = sorted(changed.glob("crash-*.mlir"))
    with TriageDB(out / "triage.db", create=False) as db:
        (bucket,) = db.buckets()
        assert bucket["oracle"] == bucket["kind"] == "divergence" and bucket["count"] == len(findings)
        assert bucket["signature"] == "divergence | output: llvm.call vs llvm.call"
        assert db.oracle_bucket("divergence", "output: llvm.call vs llvm.call")["id"] == bucket["id"]
        program = bucket["minimized_text"]
    smallest = min(len(path.read_text()) for path in findings)
    assert len(program) <= smallest  # one region whose body is the call
    assert program.count("loom.spatial_region") == 1 and program.count("llvm.call @extern_scale(") == 1
    assert (out / "bucket-1" / "minimized.mlir").read_text() == program
    assert f"bucket 1: divergence, {out}/bucket-1/reproduce.sh, {len(findings)} finding(s)" in done.stdout
    # list, show, mark
    listed = loomfuzz("triage", "list", "--out", str(out))
    assert listed.returncode == 0
    assert re.search(r"^1\s+new\s+divergence\s+-\s+" + str(len(findings)) + r"\s+always\s", listed.stdout, re.M)
    shown = loomfuzz("triage", "show", "1", "--out", str(out))
    assert shown.returncode == 0, shown.stderr
    assert f"this build:   {CHANGED} " in shown.stdout and f"reference:    {mlir22} " in shown.stdout
    mine = shown.stdout.split("--- this build's output (normalised):\n")[1].split("--- ")[0]
    theirs = shown.stdout.split("--- the reference build's output (normalised):\n")[1].split("---\n")[0]
    assert "llvm.call @helper_double(%" in mine and "llvm.call @extern_scale(%" in theirs
    assert mine.replace("llvm.call @helper_double(", "llvm.call @extern_scale(") == theirs  # the one change
    assert "%arg" not in mine and "<arith.constant 0 : index>" in mine  # the normal form
    assert (out / "bucket-1" / "observed.txt").read_text() == mine
    assert (out / "bucket-1" / "reference.txt").read_text() == theirs
    command = re.search(r"^reproduce:    (.*)$", shown.stdout, re.M).group(1)
    for reproduce in (command, str(out / "bucket-1" / "reproduce.sh")):  # run: still the divergence
        ran = subprocess.run(["bash", "-c", reproduce], capture_output=True, text=True, timeout=60)
        assert ran.returncode == 1, ran.stderr  # diff: the outputs differ ...
        assert re.search(r"^< .*llvm\.call @helper_double\(", ran.stdout, re.M), ran.stdout
        assert re.search(r"^> .*llvm\.call @extern_scale\(", ran.stdout, re.M), ran.stdout
        assert len([line for line in ran.stdout.splitlines() if line[:2] in ("< ", "> ")]) == 2  # ... there only
    assert _opt(str(CHANGED), program) != _opt(mlir22, program)  # independently, on the minimized program
    report = (out / "report.md").read_text()
    assert "- reproduce (" in report and "diff <(" in report and "this build's output" in report
    assert "reproduce.sh" in (out / "report.html").read_text()
    marked = loomfuzz("triage", "mark", "1", "fixed", "--out", str(out))
    assert marked.returncode == 0 and "bucket 1: fixed" in marked.stdout
    assert re.search(r"^1\s+fixed\s+divergence", loomfuzz("triage", "list", "--out", str(out)).stdout, re.M)
    assert loomfuzz("triage", "mark", "1", "new", "--out", str(out)).returncode == 0


def _snapshot(db_path: Path) -> dict:
    """The database's buckets, members and files, without the status a later run changes
    (a bucket seen again is ``known``) or `triage mark` sets."""
    with TriageDB(db_path, create=False) as db:
        snapshot = db.snapshot()
    for bucket in snapshot["buckets"].values():
        del bucket["status"]
    return snapshot


def test_triage_again_judges_nothing_and_the_sidecars_name_the_reference(changed, triaged, tmp_path):
    out, _ = triaged
    count = len(list(changed.glob("crash-*.mlir")))
    before = _snapshot(out / "triage.db")
    # no reference option: the build the findings' sidecars record; the same database
    again = _triage(changed, out, "--jobs", "2", "--no-progress")
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"the reference build {_require('mlir-opt-22')} (compare output), as " in again.stderr
    assert f"0 judged now (0 not reproduced), {count} already in" in again.stderr
    assert "0 group(s) minimized" in again.stderr
    assert _snapshot(out / "triage.db") == before
    # a fresh database, 1 job, from the sidecars: the same database as 2 jobs with the option
    one = _triage(changed, tmp_path / "one", "--jobs", "1", "--no-progress")
    assert one.returncode == 0, one.stderr[-2000:]
    assert _snapshot(tmp_path / "one" / "triage.db") == before


def test_a_recorded_reference_build_that_is_gone(changed, triaged, tmp_path):
    out, _ = triaged
    gone = tmp_path / "yesterday" / "mlir-opt"
    folder = tmp_path / "a"
    shutil.copytree(changed, folder)
    for sidecar in folder.glob("crash-*.json"):
        record = json.loads(sidecar.read_text())
        record["reference_target"]["argv"][0] = str(gone)
        sidecar.write_text(json.dumps(record))
    db = out / "triage.db"
    before = db.read_bytes()
    done = _triage(folder, out, "--no-progress")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert str(gone) in line and "does not exist" in line and ".json" in line, line
    assert db.read_bytes() == before  # untouched
    done = _triage(folder, tmp_path / "fresh", "--no-progress")
    assert done.returncode == 2 and not (tmp_path / "fresh" / "triage.db").exists()


def _build(tmp_path: Path, name: str, fake: str, plants: str) -> Path:
    wrapper = tmp_path / name
    wrapper.write_text(f'#!/bin/sh\nexec {fake} --plant={plants} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_two_loom_builds_one_crashing_where_the_other_does_not(tmp_path, fake_loom_opt):
    yesterday = _build(tmp_path, "yesterday", fake_loom_opt, "none")
    today = _build(tmp_path, "today", fake_loom_opt, "segv")
    same = _build(tmp_path, "yesterday-again", fake_loom_opt, "none")
    done = loomfuzz("run", "-n", "300", "--target", "loom-opt", "--loom-opt", str(yesterday),
                    "--reference-loom-opt", str(same), "--artifacts", str(tmp_path / "same"), "--no-progress")
    assert done.returncode == 0 and not _findings(tmp_path / "same"), done.stdout[-2000:]

    done = loomfuzz("run", "-n", "200", "--target", "loom-opt", "--loom-opt", str(today),
                    "--reference-loom-opt", str(yesterday), "--artifacts", str(tmp_path / "a"), "--no-progress")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    findings = _findings(tmp_path / "a")
    assert findings and all(f["divergence"]["aspect"] == "outcome" for f in findings)
    assert {f["divergence"]["kinds"] for f in findings} <= {"crash/accepted", "crash/rejected"}

    out = tmp_path / "t"
    done = loomfuzz("triage", str(tmp_path / "a"), "--target", "loom-opt", "--loom-opt", str(today),
                    "--reference-loom-opt", str(yesterday), "--out", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr[-2000:]
    with TriageDB(out / "triage.db", create=False) as db:
        (bucket,) = db.buckets()
        assert bucket["kind"] == "divergence" and bucket["count"] == len(findings)
        assert bucket["signature"].startswith("divergence | outcome: this build crash:SIGSEGV | "
                                              "loom::MemoryLowering")
        assert json.loads(bucket["details"])["kinds"] in ("crash/accepted", "crash/rejected")
    program = (out / "bucket-1" / "minimized.mlir").read_text()
    assert program.count("loom.spatial_region") == 1  # one site: memory in scf.if (the planted crash)
    alone = [subprocess.run([str(build), "--loom-lower-for-to-graph"], input=program, capture_output=True,
                            text=True, timeout=30) for build in (today, yesterday)]
    assert alone[0].returncode == -11 and alone[1].returncode == 0


# ------------------------------------------------------------ MLIR 16 against 22


def test_mlir_16_against_22_executed_finds_the_zero_trip_fold(tmp_path):
    """The known MLIR 16 wrong-code bug (tests/test_upstream_mlir.py) as a divergence: both
    outputs executed, mlir-opt-22's values are the interpreter's, mlir-opt-16's are not."""
    _require("mlir-opt-16")
    done = loomfuzz("run", str(ZERO_TRIP_WIDE), "--profile", "wide", "--oracle", "differential",
                    "--mlir-opt", "mlir-opt-22", "--reference-mlir-opt", "mlir-opt-16", "--pipeline",
                    "builtin.module(canonicalize,cse,sccp)", "--compare", "values",
                    "--artifacts", str(tmp_path / "a"), "--no-progress")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (record,) = _findings(tmp_path / "a")
    divergence = record["divergence"]
    assert divergence["aspect"] == "values" and divergence["kinds"] == "accepted/accepted"
    reference_values = interpret_program(ZERO_TRIP_WIDE.read_text())
    assert divergence["primary"]["values"] == reference_values
    assert divergence["reference"]["values"] != reference_values
    build_input = (tmp_path / "a" / record["build_input"]).read_text()  # what both builds read
    assert "func.func @main" in build_input and " overflow<" not in build_input  # MLIR 16 parses it


# ------------------------------------------------------------------- bad input


@pytest.mark.parametrize("problem", ["missing", "garbage", "crashes", "wrong-target"])
def test_a_reference_build_that_is_missing_or_does_not_run(tmp_path, problem):
    mlir22 = _require("mlir-opt-22")
    artifacts = tmp_path / "a"
    artifacts.mkdir()
    kept = artifacts / "crash-0000.mlir"
    kept.write_text("module {\n}\n")
    flag = "--reference-mlir-opt"
    if problem == "missing":
        reference = str(tmp_path / "no-such-opt")
    elif problem == "garbage":  # executable, but not a program the system can start
        reference = str(tmp_path / "garbage-opt")
        Path(reference).write_bytes(b"\x7fELF not really\n")
        Path(reference).chmod(0o755)
    elif problem == "crashes":
        reference = str(tmp_path / "crashing-opt")
        Path(reference).write_text("#!/bin/sh\nkill -SEGV $$\n")
        Path(reference).chmod(0o755)
    else:
        reference, flag = mlir22, "--reference-loom-opt"
    done = loomfuzz("run", "-n", "5", "--target", "mlir-opt", flag, reference, "--artifacts",
                    str(artifacts), "--no-progress", env={"MLIR_OPT": mlir22})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], done.stderr
    if problem != "wrong-target":
        assert reference.rsplit("/", 1)[-1] in lines[0]
    assert sorted(p.name for p in artifacts.iterdir()) == ["crash-0000.mlir"]  # nothing written, nothing lost
    done = loomfuzz("triage", str(artifacts), "--target", "mlir-opt", flag, reference, "--out",
                    str(tmp_path / "t"), "--no-progress", env={"MLIR_OPT": mlir22})
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
