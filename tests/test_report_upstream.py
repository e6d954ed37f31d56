"""``loomfuzz triage report-upstream BUCKET``: a triaged bug as a report for MLIR (issue 50 item 3).

Real ``loomfuzz`` subprocesses and the real releases (mlir-opt-15/16/19/22 from .ci/setup,
mlir-runner-22).  Two pinned upstream bugs (docs/reference/upstream-bugs.md) are triaged
into buckets as a user would, then reported:

* a crash: remove-dead-values' segfault in ``mlir::constantTripCount`` on MLIR 22
  (tests/programs/upstream_rdv_trip_count_crash_wide.mlir);
* wrong code: MLIR 16's sccp folding a loop that may run zero times to its yield
  (tests/programs/upstream_mlir16_sccp_zero_trip_wide.mlir), triaged with
  ``--releases none`` so that the report judges the releases itself;
* a hang: canonicalize spinning after convert-scf-to-cf on 19, 22 and the head
  (tests/programs/upstream_cf_canonicalize_hang_wide.mlir);
* poison (an executor disagreement): MLIR 22's arith-int-range-narrowing narrowing
  ``addi (x & 32767), (x & 32767) overflow<nsw>`` to ``i16`` with the flag kept
  (tests/programs/upstream_narrowing_keeps_nsw_wide.mlir, the hunt's bucket of
  2026-12-07, seed 41, minimized by triage).

The test runs the report's commands itself, as written, in a clean folder holding only
the program (not through the command's own check), and checks what they show against
facts known by hand.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.targets.identity import which

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"
RDV_TRIP_COUNT = PROGRAMS / "upstream_rdv_trip_count_crash_wide.mlir"
ZERO_TRIP = PROGRAMS / "upstream_mlir16_sccp_zero_trip_wide.mlir"
CF_HANG = PROGRAMS / "upstream_cf_canonicalize_hang_wide.mlir"
KEEPS_NSW = PROGRAMS / "upstream_narrowing_keeps_nsw_wide.mlir"
NARROWING = "builtin.module(arith-int-range-narrowing{int-bitwidths-supported=8,16,32})"


def loomfuzz(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def installed(*names: str) -> None:
    missing = [name for name in names if which(name) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed (bash .ci/setup installs them)")


@pytest.fixture(scope="module")
def crash_bucket(tmp_path_factory) -> Path:
    """The triage folder of the remove-dead-values crash (bucket 1), as crash triage makes it."""
    installed("mlir-opt-22", "mlir-opt-19")
    out = tmp_path_factory.mktemp("rdv") / "t"
    done = loomfuzz("triage", RDV_TRIP_COUNT, "--target", "mlir-opt-22", "--pipeline",
                    "builtin.module(remove-dead-values,canonicalize)", "--profile", "wide", "--out", out,
                    "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def wrong_code_bucket(tmp_path_factory) -> Path:
    """The triage folder of MLIR 16's sccp zero-trip fold (bucket 1), found under
    canonicalize,cse,sccp, triaged without release verdicts."""
    installed("mlir-opt-15", "mlir-opt-16", "mlir-opt-19", "mlir-opt-22", "mlir-runner-22")
    work = tmp_path_factory.mktemp("sccp")
    (work / "a").mkdir()
    (work / "a" / "crash-zero-trip.mlir").write_text(ZERO_TRIP.read_text())
    (work / "a" / "crash-zero-trip.json").write_text(json.dumps({"finding_kind": "wrong-code"}))
    done = loomfuzz("triage", work / "a", "--profile", "wide", "--oracle", "differential", "--target", "mlir-opt-16",
                    "--pipeline", "builtin.module(canonicalize,cse,sccp)", "--out", work / "t",
                    "--max-candidates", 60, "--no-progress", "--releases", "none")
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "t"


@pytest.fixture(scope="module")
def poison_bucket(tmp_path_factory) -> Path:
    """The triage folder of the kept-nsw narrowing (bucket 1, executor-disagreement)."""
    installed("mlir-opt-22", "mlir-runner-22")
    work = tmp_path_factory.mktemp("nsw")
    (work / "a").mkdir()
    (work / "a" / "crash-nsw.mlir").write_text(KEEPS_NSW.read_text())
    (work / "a" / "crash-nsw.json").write_text(json.dumps({"finding_kind": "executor-disagreement"}))
    done = loomfuzz("triage", work / "a", "--profile", "wide", "--oracle", "differential", "--target", "mlir-opt-22",
                    "--pipeline", NARROWING, "--out", work / "t", "--max-candidates", 20, "--no-progress",
                    "--releases", "mlir-opt-19")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "executor-disagreement" in done.stdout, done.stdout
    return work / "t"


def report_of(folder: Path, tmp_path: Path) -> str:
    path = tmp_path / "report.md"
    done = loomfuzz("triage", "report-upstream", 1, "--out", folder, "-o", path)  # the bucket's profile: wide
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checked in a clean folder: they reproduce it" in done.stderr
    return path.read_text()


def program_and_commands(report: str) -> tuple[str, list[str]]:
    """The report's program (the mlir block after "`bug.mlir`:") and its sh commands."""
    program = re.search(r"`bug\.mlir`:\n\n```mlir\n(.*?)```", report, re.S).group(1)
    commands = re.findall(r"```sh\n(.*?)\n```", report, re.S)
    return program, commands


def run_as_written(program: str, command: str, folder: Path) -> subprocess.CompletedProcess:
    folder.mkdir()
    (folder / "bug.mlir").write_text(program)
    assert sorted(p.name for p in folder.iterdir()) == ["bug.mlir"]  # a clean folder
    return subprocess.run(["bash", "-c", command], cwd=folder, capture_output=True, text=True, timeout=120)


def verifies_without_loom(program: str) -> None:
    """No loom or dataflow operation, and MLIR 22's verifier (no unregistered dialect allowed) takes it."""
    assert "loom." not in program and "dataflow." not in program, program
    done = subprocess.run(["mlir-opt-22", "-o", "/dev/null", "-"], input=program, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_crash_report_reproduces_as_written(crash_bucket, tmp_path):
    report = report_of(crash_bucket, tmp_path)
    program, commands = program_and_commands(report)
    verifies_without_loom(program)
    assert commands == ["mlir-opt-22 --remove-dead-values bug.mlir"]  # the one pass, bisected from two
    done = run_as_written(program, commands[0], tmp_path / "clean")
    assert done.returncode in (-11, 139), (done.returncode, done.stderr[-2000:])  # SIGSEGV
    assert "mlir::constantTripCount" in done.stderr
    assert report.startswith("# [mlir] --remove-dead-values crashes (SIGSEGV in mlir::constantTripCount)")
    trace = re.search(r"Stack trace \(trimmed\):\n\n```text\n(.*?)```", report, re.S).group(1)
    assert "#0 mlir::constantTripCount" in trace and "PrintStackTrace" not in trace  # the useful part
    assert "| MLIR 22 (the build it was found with) | 22.1.8 | reproduces |" in report
    assert "| MLIR 19 | 19." in report and "| MLIR 16 | 16.0.6 | rejects | it has no pass remove-dead-values |" in report
    assert "generated" in report.lower() and "loom-fuzz" in report


def test_the_wrong_code_report_reproduces_as_written(wrong_code_bucket, tmp_path):
    report = report_of(wrong_code_bucket, tmp_path)
    program, commands = program_and_commands(report)
    verifies_without_loom(program)
    before, after = commands
    assert "mlir-opt-16 --sccp bug.mlir |" in after and "mlir-runner-22 -e main -entry-point-result=void" in before
    # by hand: main calls the region with a0 = 0, so its loop from 0 to (a0 & 7) = 0 runs zero
    # times and the region returns its initial value, a0 & 7 = 0; MLIR 16 folds it to the yield, 7
    call = re.search(r"func\.call @(\w+)\((%a0[^)]*)\)", program)
    assert call and re.search(r"%a0 = arith\.constant 0 : i32", program), program
    assert re.search(r"scf\.for %\w+ = %\w+ to %\w+ step", program)
    first = run_as_written(program, before, tmp_path / "before")
    second = run_as_written(program, after, tmp_path / "after")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.split(",")[0].strip() == "0"
    assert second.stdout.split(",")[0].strip() == "7"
    assert report.startswith("# [mlir] sccp miscompiles: 0 becomes 7")
    # no release verdicts in the bucket: the report judged them
    for line in ("| MLIR 16 (the build it was found with) | 16.0.6 | reproduces |", "| MLIR 19 | 19.1.7 | correct |",
                 "| MLIR 22 | 22.1.8 | correct |"):
        assert line in report, report
    assert "reference interpreter" in report


def test_a_report_whose_commands_do_not_reproduce_is_refused(crash_bucket):
    """The check: the same report with a program the pass does not crash on names the command."""
    from harness.contract import load_grammar
    from harness.triage.report_upstream import check_report, upstream_report

    report = upstream_report(str(crash_bucket / "triage.db"), 1, load_grammar(None, "wide"))
    assert check_report(report) == []
    harmless = replace(report, program="func.func @f() {\n  return\n}\n")
    (problem,) = check_report(harmless)
    assert problem.startswith("`mlir-opt-22 --remove-dead-values bug.mlir` gave 'no failure'"), problem


@pytest.mark.parametrize("words, message", [
    (["7"], "{db}: no bucket 7"),
    (["x"], "BUCKET must be a bucket id (a number), not 'x'"),
    ([], "report-upstream needs a BUCKET id (see `loomfuzz triage list`)"),
])
def test_bad_input_is_one_line_exit_2(crash_bucket, words, message):
    done = loomfuzz("triage", "report-upstream", *words, "--out", crash_bucket)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "loomfuzz triage: error: " + message.format(db=crash_bucket / "triage.db")], done.stderr
    assert done.stdout == ""


def test_no_database_is_one_line_exit_2(tmp_path):
    done = loomfuzz("triage", "report-upstream", "1", "--out", tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and "no triage database" in done.stderr, done.stderr


def test_the_poison_report_reproduces_as_written(poison_bucket, tmp_path):
    report = report_of(poison_bucket, tmp_path)
    program, commands = program_and_commands(report)
    verifies_without_loom(program)
    before, alone, after = commands
    assert alone == f"mlir-opt-22 '--pass-pipeline={NARROWING}' bug.mlir"
    first = run_as_written(program, before, tmp_path / "before")
    narrowed = run_as_written(program, alone, tmp_path / "alone")
    assert first.returncode == 0 and narrowed.returncode == 0, first.stderr + narrowed.stderr
    # by hand: main passes x = -1, so both operands are 32767 and the i32 sum 65534 (nsw holds in
    # i32); narrowed to i16 the pass keeps nsw, and 32767 + 32767 > 32767 wraps i16: poison
    assert re.search(r"%a0 = arith\.constant -1 : i32", program), program
    assert first.stdout.split(",")[0].strip() == str(32767 + 32767)
    assert re.search(r"arith\.addi %\S+, %\S+ overflow<nsw> : i16", narrowed.stdout), narrowed.stdout
    assert 32767 + 32767 > 2 ** 15 - 1
    assert report.startswith("# [mlir] arith-int-range-narrowing{int-bitwidths-supported=8,16,32} introduces poison")
    assert "evaluates the call to `poison, poison`" in report
    assert "| MLIR 19 | 19.1.7 | rejects | it has no pass arith-int-range-narrowing |" in report


def test_the_hang_report_reproduces_as_written(tmp_path):
    installed("mlir-opt-22")
    out = tmp_path / "t"
    done = loomfuzz("triage", CF_HANG, "--target", "mlir-opt-22", "--pipeline",
                    "builtin.module(convert-scf-to-cf,canonicalize)", "--timeout", 3, "--profile", "wide", "--out", out,
                    "--no-progress", "--max-candidates", 15, "--repeat", 1)
    assert done.returncode == 0, done.stderr[-3000:]
    report = report_of(out, tmp_path)
    program, (command,) = program_and_commands(report)
    verifies_without_loom(program)
    assert command == "mlir-opt-22 --convert-scf-to-cf --canonicalize bug.mlir"  # canonicalize alone does not spin
    assert re.search(r"scf\.for %\w+ = (%\w+) to \1 step", program), program  # the loop from 1 to 1
    folder = tmp_path / "clean"
    folder.mkdir()
    (folder / "bug.mlir").write_text(program)
    lowered = subprocess.run(["bash", "-c", "mlir-opt-22 --convert-scf-to-cf bug.mlir"], cwd=folder,
                             capture_output=True, text=True, timeout=60)
    assert lowered.returncode == 0, lowered.stderr  # the lowering alone ends
    hang = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            hang.wait(timeout=10)
    finally:
        hang.kill()
        hang.wait()
    assert report.startswith("# [mlir] --convert-scf-to-cf --canonicalize hangs")
    assert "| MLIR 22 (the build it was found with) | 22.1.8 | reproduces | the same hang |" in report
