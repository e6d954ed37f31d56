"""The family of a build named by path (issue 46, item 6): recognised, or asked about.

``--target PATH`` with a loom build whose ``--help`` does not list ``--loom-lower-for-to-graph``
(the stand-in, tests/fixtures/fake_loom_opt.c, answers ``--help`` by reading a program) ran
without loom's pass and expectations, and nothing said which family was assumed.  Now such a
build is one line asking for ``--loom-opt`` or ``--family``, and every summary names the family
and why.  Real subprocesses of ``loomfuzz``; the builds are the stand-in and Debian's MLIR 19.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]


def loomfuzz(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*LOOMFUZZ, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize("command", [["run", "-n", "20"], ["fuzz", "--runs", "20"], ["triage", "found"]])
def test_a_build_whose_family_cannot_be_told_is_one_line_naming_both_ways(fake_loom_opt, tmp_path, command):
    (tmp_path / "found").mkdir()
    done = loomfuzz(*command, "--target", fake_loom_opt, "--artifacts" if command[0] != "triage" else "--out",
                    tmp_path / "out", "--no-progress" if command[0] != "fuzz" else "--seed=1", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"--target {fake_loom_opt}: cannot tell which family" in line
    assert f"pass --loom-opt {fake_loom_opt} for a loom build, or --family loom-opt|mlir-opt|other" in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("crash-*"))


def test_family_given_runs_loom_s_pass_and_expectations_and_the_summary_says_why(fake_loom_opt, tmp_path):
    done = loomfuzz("run", "--target", fake_loom_opt, "--family", "loom-opt", "-n", "60",
                    "--artifacts", tmp_path / "a", "--no-progress", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # the stand-in's planted crashes
    assert f"target:     fake-loom-opt (no LLVM version, {fake_loom_opt}) as loom-opt (--family loom-opt)" \
        in done.stdout
    records = [json.loads(p.read_text()) for p in (tmp_path / "a").glob("crash-*.json")]
    assert records
    for record in records:  # loom's pass and loom's expectations, in every finding
        assert record["target"]["argv"] == [fake_loom_opt, "--loom-lower-for-to-graph"]
        assert record["target"]["expectations"] == "builtin:loom-opt"
        assert record["outcome"] == "crash", record["why"]  # no false finding of another family's rules
    by_loom_opt = loomfuzz("run", "--loom-opt", fake_loom_opt, "-n", "1", "--artifacts", tmp_path / "b",
                           "--no-progress", cwd=tmp_path)
    assert "as loom-opt (--loom-opt)" in by_loom_opt.stdout, by_loom_opt.stdout + by_loom_opt.stderr


def test_family_other_is_a_tool_of_ones_own_and_said_so(fake_loom_opt, tmp_path):
    done = loomfuzz("run", "--target", fake_loom_opt, "--family", "other", "-n", "10",
                    "--artifacts", tmp_path / "a", "--no-progress", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert f"as {fake_loom_opt} (--family other)" in done.stdout


def test_a_build_that_says_its_family_is_recognised_and_the_summary_says_why(mlir_opt, tmp_path):
    done = loomfuzz("run", "--target", "mlir-opt-19", "-n", "5", "--artifacts", tmp_path / "a",
                    "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "(LLVM 19.1.7, /usr/lib/llvm-19/bin/mlir-opt) as mlir-opt (its --help lists --pass-pipeline)" \
        in done.stdout


def test_family_beside_a_family_target_is_refused_in_one_line(tmp_path, mlir_opt):
    done = loomfuzz("run", "--target", "mlir-opt", "--family", "loom-opt", "-n", "5", "--artifacts",
                    tmp_path / "a", "--no-progress", cwd=tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "--family loom-opt goes with --target NAME|PATH" in line


def test_fuzz_summary_names_the_family(fake_loom_opt, tmp_path):
    done = loomfuzz("fuzz", "--target", fake_loom_opt, "--family", "loom-opt", "--pass-args=--plant=none",
                    "--runs", "30", "--seed", "1", "--corpus", tmp_path / "c", "--artifacts", tmp_path / "a",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"  target:      fake-loom-opt (no LLVM version, {fake_loom_opt}) as loom-opt (--family loom-opt)" \
        in done.stdout
