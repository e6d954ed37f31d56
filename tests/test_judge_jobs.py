"""The differential judge's verdicts do not depend on how it is run: ``--jobs 2`` (two drivers
at once) against ``--jobs 1`` on a fixed sample through the planted double
(tests/fixtures/wrong_rewrite_opt.py) and on two builds' divergences, and a program with
undefined behaviour stays no finding now that the reference interpreter checks only what would
be a finding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.execute.differential import Optimizer
from harness.oracles.differential_runner import DifferentialRunner, oracle_settings
from harness.run.runners import Program
from test_interpret import _program

ROOT = Path(__file__).resolve().parents[1]
DOUBLE = ROOT / "tests" / "fixtures" / "wrong_rewrite_opt.py"
PIPELINE = "builtin.module(canonicalize,cse,sccp)"


def _double(folder: Path) -> Path:
    optimizer = folder / "buggy-opt"
    optimizer.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} "$@"\n')
    optimizer.chmod(0o755)
    return optimizer


def _findings(folder: Path, *extra: str, inputs: tuple[str, ...] = ()) -> dict[str, str]:
    """``loomfuzz run --oracle differential`` into ``folder``: finding name -> kind."""
    count = () if inputs else ("-n", "48", "--seed", "3")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", *inputs, *count, "--profile", "wide",
                           "--oracle", "differential", "--pipeline", PIPELINE, "--twins", "0.5",
                           "--artifacts", str(folder), "--no-progress", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    assert ("findings:   none" in done.stdout) == (done.returncode == 0), done.stdout
    return {path.name.removesuffix(".json"): json.loads(path.read_text())["finding_kind"]
            for path in folder.glob("crash-*.json")}


def test_jobs_2_gives_the_verdicts_of_jobs_1(tmp_path):
    """(test_inprocess.py compares the process path with the persistent one the same way.)"""
    optimizer = str(_double(tmp_path))
    one = _findings(tmp_path / "one", "--mlir-opt", optimizer, "--runner", "persistent")
    two = _findings(tmp_path / "two", "--mlir-opt", optimizer, "--runner", "persistent", "--jobs", "2")
    assert len(one) >= 3 and set(one.values()) == {"wrong-code"}, one  # the planted bugs are found
    assert two == one


def test_jobs_2_runs_two_drivers_and_no_false_alarm_on_mlir_opt_22():
    settings = oracle_settings(Optimizer("mlir-opt-22", PIPELINE), runner="persistent")
    from harness.commands import grammar_from_args
    from harness.fuzzing.sources import from_generator
    import argparse

    grammar = grammar_from_args(argparse.Namespace(grammar=None, profile="wide", break_=None))
    source = from_generator(grammar, "fast", 5, 96, "canonical")
    programs = [Program(k, source.program_at(k)) for k in range(96)]
    with DifferentialRunner(settings, jobs=2) as runner:
        before = runner.executor.drivers_started
        results = list(runner.run(programs))
        started = runner.executor.drivers_started - before
    assert [r.program.key for r in results] == list(range(96))  # in input order
    assert not [r for r in results if r.verdict.finding]
    assert started == 2  # one per worker: the batches are judged side by side


def test_undefined_behaviour_stays_no_finding(tmp_path):
    """A program whose region overflows an ``overflow<nsw>`` addition (undefined: no value to
    compare) beside a region the double miscompiles: no finding, as when the interpreter ran
    first on every program; the same program without the undefined region is a finding."""
    xori = "%y = arith.xori %a, %b : i32"  # the double's sccp turns it into arith.ori
    overflow = ("%x = arith.constant 2147483647 : i32\n%one = arith.constant 1 : i32\n"
                "%y = arith.addi %x, %one overflow<nsw> : i32")
    defined, undefined = tmp_path / "defined.mlir", tmp_path / "undefined.mlir"
    defined.write_text(_program([xori]))
    undefined.write_text(_program([xori, overflow]))
    optimizer = str(_double(tmp_path))
    found = _findings(tmp_path / "defined", "--mlir-opt", optimizer, inputs=(str(defined),))
    assert list(found.values()) == ["wrong-code"]
    assert _findings(tmp_path / "undefined", "--mlir-opt", optimizer, inputs=(str(undefined),)) == {}


@pytest.fixture(autouse=True)
def _close_executors():
    yield
    from harness.oracles.differential_runner import close_executors

    close_executors()


def test_divergence_with_jobs_2_gives_the_divergences_of_jobs_1(tmp_path):
    """MLIR 22 against MLIR 19 on remove-dead-values (MLIR 19 aborts on many wide programs),
    the outputs executed in the driver (``--oracle differential``): ``--jobs 2`` (two workers
    comparing, each executing through a driver of its own) finds exactly ``--jobs 1``'s."""
    def divergences(folder: Path, jobs: str) -> dict[str, tuple[str, str]]:
        done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "-n", "16", "--seed", "19",
                               "--profile", "wide", "--oracle", "differential", "--mlir-opt", "mlir-opt-22",
                               "--reference-mlir-opt", "mlir-opt-19", "--pipeline",
                               "builtin.module(remove-dead-values)", "--runner", "persistent", "--jobs", jobs,
                               "--artifacts", str(folder), "--no-progress"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        assert f"{jobs} job" in done.stdout
        return {path.name: (record["divergence"]["aspect"], record["divergence"]["kinds"])
                for path in folder.glob("crash-*.json") for record in [json.loads(path.read_text())]}

    one = divergences(tmp_path / "one", "1")
    assert len(one) >= 4, one
    assert divergences(tmp_path / "two", "2") == one
