"""Two builds of one tool (``--reference-loom-opt`` / ``--reference-mlir-opt``): the normal form
of printed MLIR on real mlir-opt-16 and mlir-opt-22 output, two builds that differ in one
behaviour (a divergence found and triaged to one bucket), two identical builds (none),
MLIR 16 against 22 under ``--oracle differential``, and bad reference builds (exit 2)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import load_grammar
from harness.execute.interpret import interpret_program
from harness.execute.releases import for_release
from harness.execute.render_exec import exec_module
from harness.fuzzing.sources import from_generator
from harness.run.normalize import first_difference, normalize

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


def test_a_build_changed_in_one_behaviour_is_found_and_triaged_to_one_bucket(tmp_path):
    mlir22 = _require("mlir-opt-22")
    count, seed = 100, 4
    done = loomfuzz("run", "-n", str(count), "--seed", str(seed), "--target", "mlir-opt",
                    "--reference-mlir-opt", mlir22, "--artifacts", str(tmp_path / "a"), "--no-progress",
                    env={"MLIR_OPT": str(CHANGED)})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    # which programs should diverge, from mlir-opt-22 alone: those whose output calls @extern_scale
    source = from_generator(load_grammar(None, None), "fast", seed, count, "oracle")
    programs = [source.program_at(k) for k in range(count)]
    outputs = _opt(mlir22, "// -----\n".join(programs), split=True).split("// -----\n")
    expected = {"crash-" + hashlib.sha1(p.encode()).hexdigest()
                for p, out in zip(programs, outputs) if "llvm.call @extern_scale(" in out}
    findings = _findings(tmp_path / "a")
    assert {f["name"] for f in findings} == expected and len(expected) >= 5
    for record in findings:
        divergence = record["divergence"]
        assert record["finding_kind"] == "divergence" and divergence["aspect"] == "output"
        assert "@helper_double" in divergence["first_difference"]["primary"]
        assert "@extern_scale" in divergence["first_difference"]["reference"]
        assert record["reference_target"]["argv"][0] == mlir22

    out = tmp_path / "t"
    done = loomfuzz("triage", str(tmp_path / "a"), "--target", "mlir-opt", "--reference-mlir-opt", mlir22,
                    "--out", str(out), "--no-progress", env={"MLIR_OPT": str(CHANGED)})
    assert done.returncode == 0, done.stderr[-2000:]
    buckets = json.loads((out / "divergence" / "buckets.json").read_text())
    assert len(buckets) == 1 and len(buckets[0]["findings"]) == len(expected)
    assert buckets[0]["signature"] == "output: llvm.call vs llvm.call"
    program = (out / "divergence" / "1" / "program.mlir").read_text()
    smallest = min(len((tmp_path / "a" / f"{name}.mlir").read_text()) for name in expected)
    assert len(program) <= smallest  # one region whose body is the call
    assert program.count("loom.spatial_region") == 1 and program.count("llvm.call @extern_scale(") == 1
    # the reproduction, independently: the two builds print different modules for input.mlir
    text = (out / "divergence" / "1" / "input.mlir").read_text()
    assert _opt(str(CHANGED), text) != _opt(mlir22, text)
    assert "diff <(" in (out / "divergence" / "report.md").read_text()


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
    buckets = json.loads((out / "divergence" / "buckets.json").read_text())
    assert len(buckets) == 1 and len(buckets[0]["findings"]) == len(findings)
    assert buckets[0]["signature"].startswith("outcome: this build crash:SIGSEGV | loom::MemoryLowering")
    program = (out / "divergence" / "1" / "program.mlir").read_text()
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
