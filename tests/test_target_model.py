"""The build under test is the build that runs (issue 33).

Each test here failed before the target model: a run asked for MLIR 19 was judged by
the MLIR 22 driver (300 of 300 accepted), ``--target mlir-opt-19`` sent canonical
programs without ``--allow-unregistered-dialect`` (a finding per program),
``--mlir-opt`` was ignored without ``--oracle differential``, and the development
head's printer wrote dense ``i1`` hex MLIR 22 refuses (a target-failure per program).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import _parser
from harness.commands import TargetOptionsConflict, settle_target_options
from harness.run import head_driver
from harness.targets.heads import IREE
from harness.targets.identity import identify, pipeline_passes
from harness.run.driver_binary import find_driver
from harness.run.persistent_runner import PersistentRunner
from harness.run.persistent_target import persistent_target
from harness.targets.target import resolve_target, Target
from harness.run.runners import make_runner

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "fixtures" / "wrong_rewrite_opt.py"
RDV = "builtin.module(remove-dead-values)"


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))
    if not found:
        pytest.fail(f"{name} is not installed (bash .ci/setup installs it)")
    return found


def loomfuzz(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


# ------------------------------------------------------------------ identity


def test_each_release_says_what_it_is():
    for name, version in (("mlir-opt-15", "15."), ("mlir-opt-16", "16."), ("mlir-opt-19", "19."),
                          ("mlir-opt-22", "22."), ("iree-opt", "24.")):
        build = identify(_tool(name))
        assert build.family == "mlir-opt", name
        assert build.version and build.version.startswith(version), (name, build.version)
        assert build.unregistered_dialects and build.split_input_file
        assert build.properties_syntax == (build.major not in (15, 16))
    assert "remove-dead-values" in identify(_tool("mlir-opt-19")).passes
    assert "sccp" not in identify(_tool("iree-opt")).passes  # the head's wheel registers no sccp
    assert pipeline_passes("builtin.module(canonicalize,func.func(cse{x=1}))") == ["canonicalize", "cse"]


# --------------------------------------------------- every runner runs that build


@pytest.fixture(scope="module")
def mlir19_programs(tmp_path_factory):
    """60 wide programs (seed 19, oracle rendering) and which of them mlir-opt-19 fails on
    when run once per program, by hand, outside loom-fuzz."""
    folder = tmp_path_factory.mktemp("w19")
    done = loomfuzz("generate", "--profile", "wide", "-n", "60", "--seed", "19", "--render", "oracle",
                    "-o", str(folder), cwd=folder)
    assert done.returncode == 0, done.stderr
    binary = _tool("mlir-opt-19")
    failing = set()
    for k, path in enumerate(sorted(folder.glob("*.mlir"))):
        run = subprocess.run([binary, "--allow-unregistered-dialect", f"--pass-pipeline={RDV}"],
                             stdin=path.open(), capture_output=True, timeout=60)
        assert run.returncode != 1 or "error:" not in run.stderr.decode(errors="replace"), path
        if run.returncode != 0:
            failing.add(k)
    assert len(failing) >= 10  # MLIR 19's remove-dead-values crash: about half of them
    return failing


@pytest.mark.parametrize("runner", ["process", "batch", "persistent"])
def test_mlir_19s_crash_is_found_by_every_runner(mlir19_programs, tmp_path, runner):
    artifacts = tmp_path / "a"
    done = loomfuzz("run", "--target", "mlir-opt-19", "--runner", runner, "--pipeline", RDV,
                    "--profile", "wide", "-n", "60", "--seed", "19", "--artifacts", str(artifacts),
                    "--no-progress", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    records = [json.loads(p.read_text()) for p in artifacts.glob("crash-*.json")]
    assert {r["finding_kind"] for r in records} == {"crash"}  # no rejection: it read every program
    # the same programs as mlir-opt-19 alone (a crash that comes and goes: within noise)
    assert abs(len(records) - len(mlir19_programs)) <= 2, (len(records), len(mlir19_programs))
    for record in records:
        assert record["target"]["build"]["version"].startswith("19.")
        assert os.path.realpath(record["target"]["argv"][0]) == identify(_tool("mlir-opt-19")).binary
    assert "target:     mlir-opt (LLVM 19." in done.stdout
    if runner == "persistent":  # the driver linked with MLIR 19 (.ci/setup), not 22's
        assert "runner persistent, driver loomfuzz-mlir-driver-19" in done.stdout
        assert "--runner persistent:" not in done.stderr


def test_fuzz_runs_mlir_19_through_its_own_driver(tmp_path):
    done = loomfuzz("fuzz", "--target", "mlir-opt-19", "--pipeline", RDV, "--profile", "wide",
                    "--runner", "persistent", "--runs", "200", "--seed", "3", cwd=tmp_path)
    # the default folder names the build and the command (issue 46)
    records = [json.loads(p.read_text()) for p in (tmp_path / "artifacts" / "mlir-opt-19" / "fuzz").glob("crash-*.json")]
    assert records, done.stderr[-2000:]
    for record in records:
        assert record["target"]["build"]["version"].startswith("19.")
        assert "loomfuzz-mlir-driver-19" in json.dumps(record)
    assert "--runner persistent:" not in done.stderr


@pytest.mark.parametrize("name, driver", [("mlir-opt-22", "loomfuzz-mlir-driver"),
                                          ("mlir-opt-19", "loomfuzz-mlir-driver-19"),
                                          ("iree-opt", "loomfuzz-head-driver")])
def test_the_persistent_driver_serves_its_own_release(tmp_path, name, driver):
    done = loomfuzz("run", "--target", name, "--pipeline", "builtin.module(canonicalize,cse)", "-n", "30",
                    "--profile", "wide", "--artifacts", str(tmp_path / "a"), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"runner persistent, driver {driver}, 1 job" in done.stdout
    assert "--runner persistent:" not in done.stderr
    chosen = find_driver("mlir-opt", identify(_tool(name)))
    assert identify(chosen).version == identify(_tool(name)).version


def test_a_release_without_its_driver_runs_the_target_itself_and_says_so():
    """MLIR 16 has no persistent driver here: never 22's in its place; one line, then batches
    of the target itself."""
    target = resolve_target("mlir-opt-16")
    runner = make_runner("persistent", target)
    try:
        assert runner.kind == "batch" and runner.fallback is None
        assert "is LLVM 22" in runner.note and "running --runner batch" in runner.note
        assert runner.target.build.version.startswith("16.")
    finally:
        runner.close()


def test_a_wrapper_that_says_the_release_is_run_itself_never_the_releases_driver(tmp_path):
    """A wrapper around mlir-opt-22 (a test double, a patched build) prints the same --version,
    but the driver is linked with mlir-opt-22's library: it stands for that binary alone.  The
    runs go through the wrapper (its log counts them), in batches, said in one line; the real
    mlir-opt-22 still gets its driver."""
    log = tmp_path / "calls.log"
    wrapper = tmp_path / "wrapped-mlir-opt"
    wrapper.write_text(f'#!/bin/sh\necho call >> {log}\nexec {_tool("mlir-opt-22")} "$@"\n')
    wrapper.chmod(0o755)
    target = resolve_target(str(wrapper))
    assert target.build.version == identify(_tool("mlir-opt-22")).version  # the same --version
    runner = make_runner("persistent", target)
    try:
        assert runner.kind == "batch" and runner.fallback is None
        assert f"stands for {identify(_tool('mlir-opt-22')).binary}, not the target {wrapper}" in runner.note
    finally:
        runner.close()
    done = loomfuzz("run", "--target", str(wrapper), "--pipeline", "builtin.module(canonicalize)", "-n", "20",
                    "--profile", "wide", "--artifacts", str(tmp_path / "a"), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "runner batch" in done.stdout and "runner persistent" not in done.stdout, done.stdout
    calls = log.read_text().count("call")
    assert calls >= 2, calls  # the probe and the batches: the wrapper itself ran
    real = make_runner("persistent", resolve_target("mlir-opt-22"))
    try:
        assert real.kind == "persistent" and not getattr(real, "note", None)
    finally:
        real.close()


def test_the_heads_driver_answers_as_the_heads_tool(tmp_path):
    """A program the head refuses: the driver's diagnostics are iree-opt's own (buffer <stdin>,
    line, column, message, source line and caret), and its status is iree-opt's."""
    program = "func.func @f() {\n  %0 = arith.constant 1 : i32\n  return %0 : i32\n}\n"
    alone = subprocess.run([str(IREE.native_tool_path()), "--pass-pipeline=builtin.module(cse)"],
                           input=program, capture_output=True, text=True)
    target = Target("mlir-opt", (_tool("iree-opt"), "--pass-pipeline=builtin.module(cse)"), build=identify(_tool("iree-opt")))
    head = persistent_target(target)
    assert os.path.basename(head.driver[0]) == "loomfuzz-head-driver"
    with PersistentRunner(head) as runner:
        outcome = runner.run(program)
        fine = runner.run("func.func @g() {\n  return\n}\n")
    assert alone.returncode == 1 and outcome.returncode == 1
    first = alone.stderr.splitlines()[:3]
    assert outcome.stderr.splitlines()[:3] == first, (outcome.stderr, alone.stderr)
    assert fine.returncode == 0
    assert head_driver.unsupported(["--canonicalize"]) == "--canonicalize"
    assert head_driver.unsupported(["--pass-pipeline=builtin.module(cse)", "--allow-unregistered-dialect"]) is None


# ------------------------------------------------ probes follow the target


@pytest.mark.parametrize("command", [["run", "-n", "50"], ["enumerate", "--run", "--count", "50"]])
def test_a_target_that_refuses_the_grammars_programs_is_one_line(tmp_path, command):
    artifacts = tmp_path / "a"
    done = loomfuzz(*command, "--target", "mlir-opt-22", "--pass-args=", "--artifacts", str(artifacts),
                    "--no-progress", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "refuses the grammar's programs" in line and "unregistered dialect" in line
    assert not artifacts.exists() or not any(artifacts.iterdir())


def test_fuzz_probes_a_program_of_the_grammar_too(tmp_path):
    done = loomfuzz("fuzz", "--target", "mlir-opt-22", "--pass-args=", "--runs", "10",
                    "--corpus", str(tmp_path / "c"), "--artifacts", str(tmp_path / "a"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "refuses the grammar's programs" in done.stderr.strip().splitlines()[-1]
    assert not list((tmp_path / "a").glob("crash-*")) if (tmp_path / "a").exists() else True


@pytest.mark.parametrize("args, said", [
    (["--target", "mlir-opt-16"], "cannot read the oracle rendering: MLIR 16"),
    (["--target", "mlir-opt-19", "--pipeline", "builtin.module(canonicalize,no-such-pass)"],
     "registers no pass named no-such-pass"),
    (["--target", "iree-opt", "--pipeline", "builtin.module(sccp)"], "registers no pass named sccp"),
])
def test_what_the_build_cannot_do_is_one_line_before_anything_runs(tmp_path, args, said):
    done = loomfuzz("run", *args, "-n", "20", "--artifacts", str(tmp_path / "a"), "--no-progress",
                    cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert said in line


# ------------------------------------------------ no option silently ignored


COMMANDS = {"run": [], "enumerate": ["--run"], "fuzz": [], "triage": []}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_target_option_is_silently_ignored(command):
    """Every command that names a build: --mlir-opt either is the build under test or is
    refused with one line; with --oracle differential it is the optimizer."""
    def settled(*argv: str):
        args = _parser(command).parse_args([command, *COMMANDS[command], *argv])
        settle_target_options(args)
        return args

    assert settled().target == "loom-opt"
    assert settled("--mlir-opt", "mlir-opt-19").target == "mlir-opt-19"
    assert settled("--target", "mlir-opt", "--mlir-opt", "mlir-opt-19").target == "mlir-opt-19"
    with pytest.raises(TargetOptionsConflict, match="name two builds under test"):
        settled("--target", "loom-opt", "--mlir-opt", "mlir-opt-19")
    differential = settled("--oracle", "differential", "--target", "iree-opt")
    assert differential.mlir_opt == differential.target == _tool("iree-opt")
    assert settled("--oracle", "differential", "--mlir-opt", "mlir-opt-16").target == _tool("mlir-opt-16")
    with pytest.raises(TargetOptionsConflict, match="two optimizers"):
        settled("--oracle", "differential", "--target", "iree-opt", "--mlir-opt", "mlir-opt-16")
    with pytest.raises(TargetOptionsConflict, match="names none"):
        settled("--oracle", "differential", "--target", "loom-opt")


def test_every_option_of_every_command_is_read():
    """Walks every option of every command: each one's value is read somewhere in harness/
    (an option nobody reads is silently ignored).  The lines that declare options do not
    count as reading them."""
    import argparse
    import re

    from harness.cli import COMMANDS as ALL_COMMANDS

    source = "\n".join(line for path in (ROOT / "harness").rglob("*.py")
                       for line in path.read_text().splitlines() if "add_argument(" not in line)
    unread = []
    for name in ALL_COMMANDS:
        parser = _parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for action in sub.choices[name]._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            dest = action.dest
            if not re.search(rf"\b(args|options)\.{dest}\b|getattr\(args, ['\"]{dest}['\"]|['\"]{dest}['\"]", source):
                unread.append(f"{name} {'/'.join(action.option_strings) or dest}")
    assert not unread, unread


def test_mlir_opt_is_a_spelling_of_the_target(tmp_path):
    artifacts = tmp_path / "a"
    done = loomfuzz("run", "--mlir-opt", "mlir-opt-19", "--pipeline", RDV, "--profile", "wide", "-n", "20",
                    "--seed", "19", "--runner", "batch", "--artifacts", str(artifacts), "--no-progress",
                    cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # MLIR 19's crash: it ran 19, not loom-opt
    assert "target:     mlir-opt (LLVM 19." in done.stdout
    conflict = loomfuzz("run", "--target", "loom-opt", "--mlir-opt", "mlir-opt-19", "-n", "5", cwd=tmp_path)
    assert conflict.returncode == 2 and "name two builds under test" in conflict.stderr


# ------------------------------------------------ LLVM's development head


@pytest.mark.parametrize("pipeline", ["builtin.module(canonicalize,cse)",
                                      "builtin.module(loop-invariant-code-motion)"])
def test_the_development_head_under_the_differential_oracle(tmp_path, pipeline):
    artifacts = tmp_path / "a"
    done = loomfuzz("run", "--oracle", "differential", "--target", "iree-opt", "--pipeline", pipeline,
                    "--profile", "wide", "-n", "300", "--seed", "24", "--artifacts", str(artifacts),
                    "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "findings:   none" in done.stdout  # no target-failure, no reference-failure
    assert not list(artifacts.glob("crash-*"))


def test_a_wrong_rewrite_planted_around_the_head_is_found(tmp_path):
    log = tmp_path / "planted.log"
    double = tmp_path / "buggy-head"
    double.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} --plant-log={log} '
                      f'--real={_tool("iree-opt")} "$@"\n')
    double.chmod(0o755)
    artifacts = tmp_path / "a"
    done = loomfuzz("run", "--oracle", "differential", "--target", str(double), "--pipeline",
                    "builtin.module(canonicalize,cse)", "--profile", "wide", "-n", "100", "--seed", "3",
                    "--artifacts", str(artifacts), "--no-progress", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    records = [json.loads(p.read_text()) for p in artifacts.glob("crash-*.json")]
    assert records and {r["finding_kind"] for r in records} == {"wrong-code"}
    assert log.read_text().strip()
    for record in records:  # both builds named: the head under test, MLIR 22 the reference
        assert record["optimizer_build"]["version"].startswith("24.")
        assert record["reference_build"]["version"].startswith("22.")
        assert "--mlir-print-elementsattrs-with-hex-if-larger=-1" in record["optimizer"]


# ------------------------------------------------ two releases, each its own build


def test_divergence_between_19_and_22_runs_each_side_on_its_own_build(tmp_path):
    """MLIR 19's remove-dead-values crash, MLIR 22 accepting the same programs: a program only
    one of them crashes on proves each side ran its own build."""
    artifacts = tmp_path / "a"
    done = loomfuzz("run", "--target", "mlir-opt-19", "--reference-mlir-opt", "mlir-opt-22", "--compare",
                    "outcome", "--pipeline", RDV, "--profile", "wide", "-n", "20", "--seed", "19",
                    "--artifacts", str(artifacts), "--no-progress", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    records = [json.loads(p.read_text()) for p in artifacts.glob("crash-*.json")]
    crash_here = [r for r in records if r["divergence"]["kinds"] == "crash/accepted"]
    assert crash_here, [r["divergence"]["kinds"] for r in records]
    for record in crash_here:
        assert "mlir-opt-19" in record["divergence"]["primary"]["stderr"]  # 19's own stack dump
        assert record["target"]["build"]["version"].startswith("19.")
        assert record["reference_target"]["build"]["version"].startswith("22.")
        assert record["reference_target"]["argv"][0].endswith("mlir-opt-22")
