"""The differential oracle in process (harness/execute/inprocess.py, native/loomfuzz-exec.cpp):
the persistent driver's --exec mode gives the process path's verdicts, finds a planted wrong
rewrite, survives a crash mid-batch, and is what ``--runner persistent`` picks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import load_grammar
from harness.core.engine import generate
from harness.core.render import renderer
from harness.execute.differential import Optimizer, ReferenceFailed, Same, WrongCode
from harness.execute.executors import make_executor
from harness.execute.inprocess import InProcessExecutor, in_process_optimizer
from harness.execute.interpret import interpret_program
from harness.execute.process_executor import ProcessExecutor
from harness.execute.exec_rendering import exec_module
from harness.execute.toolchain import Toolchain
from harness.run.driver_binary import default_driver_path

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "fixtures" / "wrong_rewrite_opt.py"
PIPELINE = "builtin.module(canonicalize,cse,sccp)"
#: In process against the interpreter (which agrees with the process path's execution on
#: every value, tests/test_exec.py); against the process path itself on a smaller part: at
#: load 5 the process path judges about 3 programs a second.
WIDE, DEFAULT, SIDE_BY_SIDE = 240, 96, 48


def _programs(profile: str, count: int, seed: int) -> list[str]:
    grammar = load_grammar(None, profile)
    render = renderer(grammar, "canonical").render
    return [render(tree) for tree in generate(grammar, "fast", seed, count)]


@pytest.fixture(scope="module")
def executor():
    if not default_driver_path().is_file():  # .ci/setup builds it: missing is a failure
        pytest.fail(f"no driver at {default_driver_path()}: run `bash .ci/setup`")
    chain = InProcessExecutor(Toolchain(timeout=30.0))
    yield chain
    chain.close()


def _judge(executor, texts: list[str], optimizer: Optimizer, batch: int = 24) -> list:
    verdicts = []
    for at in range(0, len(texts), batch):
        verdicts += executor.judge_many(texts[at:at + batch], optimizer)
    return verdicts


@pytest.mark.parametrize("profile,count,seed", [("wide", WIDE, 22), ("conventions", DEFAULT, 7)])
def test_in_process_values_are_the_interpreters(executor, profile, count, seed):
    programs = _programs(profile, count, seed)
    optimizer = Optimizer(pipeline=PIPELINE)
    assert in_process_optimizer(optimizer)  # mlir-opt-22 itself: the pipeline runs in the driver
    verdicts = _judge(executor, [exec_module(p) for p in programs], optimizer)
    for program, verdict in zip(programs, verdicts):
        assert isinstance(verdict, Same), verdict
        assert verdict.output == interpret_program(program)
    assert executor.fallbacks == 0


def test_same_verdicts_in_process_and_by_process(executor):
    programs = _programs("wide", SIDE_BY_SIDE // 2, 5) + _programs("conventions", SIDE_BY_SIDE // 2, 5)
    texts = [exec_module(p) for p in programs]
    optimizer = Optimizer(pipeline=PIPELINE)
    verdicts = _judge(executor, texts, optimizer)
    assert verdicts == _judge(ProcessExecutor(Toolchain()), texts, optimizer)
    # a known reference (triage passes the interpreter's) is not executed again: same verdicts
    known = [interpret_program(p) for p in programs]
    assert executor.judge_many(texts, optimizer, known) == verdicts
    wrong = known[:1] + [known[1].replace("\n", "\n", 1) + "1, 0\n"]
    shifted = executor.judge_many(texts[:2], optimizer, wrong)
    assert isinstance(shifted[0], Same) and isinstance(shifted[1], WrongCode)  # it compares with it


def test_planted_wrong_rewrite_found_with_the_reference_in_process(executor, tmp_path):
    """Another optimizer binary runs as a process; its output is executed in the driver."""
    subtraction = re.compile(r"= arith\.subi (%[\w$.#-]+), (?!\1 )(%[\w$.#-]+) : i32\n")
    programs = [p for p in _programs("wide", 480, 22) if subtraction.search(p)][:48]
    texts = [exec_module(p) for p in programs]
    log = tmp_path / "planted.log"
    double = Optimizer(str(DOUBLE), "builtin.module(cse)", (f"--plant-log={log}",))
    assert not in_process_optimizer(double)
    verdicts = _judge(executor, texts, double)
    assert verdicts == _judge(ProcessExecutor(Toolchain()), texts, double)
    wrong = [v for v in verdicts if isinstance(v, WrongCode)]
    assert wrong, "the double planted nothing that changes a value"
    assert all(w.optimized_text and w.differences for w in wrong)
    assert log.read_text().strip()  # it planted, and only what it planted differs (the process path)


def test_an_optimized_module_without_main_is_found_before_anything_runs(executor, tmp_path):
    """A target whose output has no ``main`` (renamed here, by a wrapper around mlir-opt-22):
    the driver looks for every ``main`` before it calls one, and the verdict is the process
    path's (mlir-runner-22 refuses the module): wrong code, nothing printed after
    optimization, the reference values intact."""
    wrapper = tmp_path / "renames-main.sh"
    wrapper.write_text('#!/bin/sh\nmlir-opt-22 "$@" | sed "s/@main()/@main_gone()/"\n')
    wrapper.chmod(0o755)
    programs = _programs("wide", 4, 41)
    texts = [exec_module(p) for p in programs]
    optimizer = Optimizer(str(wrapper), PIPELINE)
    mine = _judge(executor, texts, optimizer)
    theirs = _judge(ProcessExecutor(Toolchain()), texts, optimizer)
    for verdicts in (mine, theirs):
        assert all(isinstance(v, WrongCode) and v.target_output == "" for v in verdicts), verdicts
        assert [v.reference_output for v in verdicts] == [interpret_program(p) for p in programs]
        assert all("@main_gone()" in v.optimized_text for v in verdicts)
    assert all("no function main" in v.note for v in mine), [v.note for v in mine]


def test_a_crash_mid_batch_loses_nothing(executor, capsys):
    """A program that crashes the driver (the parser's recursion overflows the stack) is judged
    by the process path; the others of its batch are asked again."""
    programs = _programs("wide", 6, 31)
    texts = [exec_module(p) for p in programs]
    depth = 100_000
    deep = ('// loomfuzz-exec 0 @deep thread "deep" "deep" args= results=\n'
            "module {\nfunc.func @main() {\n%c = arith.constant true\n" + "scf.if %c {\n" * depth
            + "}\n" * depth + "return\n}\n}\n")
    batch = texts[:3] + [deep] + texts[3:]
    before = executor.fallbacks
    verdicts = executor.judge_many(batch, Optimizer(pipeline=PIPELINE))
    assert executor.fallbacks == before + 1
    assert isinstance(verdicts[3], ReferenceFailed) and "signal" in verdicts[3].detail, verdicts[3]
    others = verdicts[:3] + verdicts[4:]
    assert [v.output for v in others] == [interpret_program(p) for p in programs]
    with capsys.disabled():
        print(f"\ncrash mid-batch: {verdicts[3]}")


def test_make_executor_kinds():
    assert make_executor("process", Toolchain()).kind == "process"
    assert make_executor("batch", Toolchain()).kind == "process"
    persistent = make_executor("persistent", Toolchain())
    assert persistent.kind == "persistent"
    persistent.close()


def _loomfuzz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_a_pipeline_that_does_not_parse_is_one_line(tmp_path):
    done = _loomfuzz("run", "-n", "2", "--oracle", "differential", "--runner", "persistent",
                     "--pipeline", "builtin.module(canonicalize", "--artifacts", str(tmp_path),
                     "--no-progress")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0], done.stderr


def test_run_finds_the_same_with_either_runner(tmp_path):
    """``loomfuzz run --oracle differential`` through the double: the same findings, the
    same values, with --runner persistent and --runner process."""
    optimizer = tmp_path / "buggy-opt"
    optimizer.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} "$@"\n')
    optimizer.chmod(0o755)
    found = {}
    for runner in ("persistent", "process"):
        folder = tmp_path / runner
        done = _loomfuzz("run", "--profile", "wide", "-n", "40", "--seed", "3", "--oracle", "differential",
                         "--pipeline", PIPELINE, "--mlir-opt", str(optimizer), "--runner", runner,
                         "--artifacts", str(folder), "--no-progress")
        assert done.returncode == 1, done.stderr  # findings
        found[runner] = {path.name: json.loads(path.read_text())["oracle"]["target_output"]
                         for path in folder.glob("crash-*.json")}
    assert found["persistent"] and found["persistent"] == found["process"]
