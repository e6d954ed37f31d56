"""Two builds under ``--runner persistent``: each build through the persistent driver of its own
build, never through another build's.

* MLIR 22 against MLIR 19 on remove-dead-values (MLIR 19 aborts, "SmallVector unable to grow",
  on programs MLIR 22 takes: docs/reference/upstream-bugs.md): the same divergences as the
  same run in batches and one process per program, both drivers named in the summary, each
  crash of the reference a restart of MLIR 19's driver, far fewer process starts;
* a reference build without a driver (mlir-opt-16): that side in batches, said in one line, and
  MLIR 16's own sccp bug still found (so it was MLIR 16 that ran);
* the driver's deaths: a build that miscompiles ``@helper_double`` into a call of itself
  (tests/fixtures/recursing_build.py); executing its output overflows the JIT's stack and kills
  the persistent driver (a real SIGSEGV; mlir-runner-22 dies the same way), counted in one
  line of the run's summary and of triage's; a run where the driver dies on nothing says
  nothing.  The reference there is a wrapper that says LLVM 22 too: no driver stands for it,
  so it runs in batches (said in one line) while mlir-opt-22 runs through its own driver.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.execute.interpret import interpret_program
from twin_values import interpreted

ROOT = Path(__file__).resolve().parents[1]
RECURSING = ROOT / "tests" / "fixtures" / "recursing_build.py"
ZERO_TRIP_WIDE = ROOT / "tests" / "programs" / "upstream_mlir16_sccp_zero_trip_wide.mlir"
RDV = "builtin.module(remove-dead-values)"
COUNT, SEED = 40, 19  # 23 of the 40 wide programs abort MLIR 19's remove-dead-values


def loomfuzz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=os.environ.copy())


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:  # .ci/setup installs mlir-{16,19,22}-tools and builds both drivers
        pytest.fail(f"{binary} is not on PATH (bash .ci/setup installs it)")
    return path


def _findings(folder: Path) -> dict[str, tuple[str, str]]:
    """finding name -> (aspect, kinds)."""
    out = {}
    for sidecar in sorted(folder.glob("crash-*.json")):
        record = json.loads(sidecar.read_text())
        out[record["name"]] = (record["divergence"]["aspect"], record["divergence"]["kinds"])
    return out


def _processes(summary: str) -> int:
    return int(re.search(r"^  runs: +[\d,]+ executions in ([\d,]+) processes", summary, re.M).group(1).replace(",", ""))


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "note: --runner persistent" in line]


@pytest.fixture(scope="module")
def nineteen_against_22(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """The same 40 wide programs through mlir-opt-22 (this build) and mlir-opt-19 (the reference),
    per runner: runner -> (the run, its artifacts)."""
    mlir22, mlir19 = _require("mlir-opt-22"), _require("mlir-opt-19")
    runs = {}
    for runner in ("persistent", "batch", "process"):
        folder = tmp_path_factory.mktemp(runner) / "a"
        done = loomfuzz("run", "-n", str(COUNT), "--seed", str(SEED), "--profile", "wide", "--target", "mlir-opt",
                        "--mlir-opt", mlir22, "--pipeline", RDV, "--reference-mlir-opt", mlir19, "--runner", runner,
                        "--artifacts", str(folder), "--no-progress")
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        runs[runner] = done, folder
    return runs


def test_each_build_runs_through_its_own_driver_and_finds_what_batches_find(nineteen_against_22):
    done, folder = nineteen_against_22["persistent"]
    found = _findings(folder)
    for runner in ("batch", "process"):
        assert _findings(nineteen_against_22[runner][1]) == found, runner  # the same programs, the same kinds
    kinds = Counter(found.values())
    crashes = kinds[("outcome", "accepted/crash")]
    assert crashes >= 10 and set(kinds) <= {("outcome", "accepted/crash"), ("output", "accepted/accepted")}, kinds
    for sidecar in folder.glob("crash-*.json"):  # MLIR 19's own crash, confirmed by mlir-opt-19 alone
        record = json.loads(sidecar.read_text())
        if record["divergence"]["kinds"] == "accepted/crash":
            assert "/usr/bin/mlir-opt-19" in record["divergence"]["reference"]["stderr"]  # its stack dump
            assert record["reference_target"]["build"]["version"].startswith("19.")
    assert ("runner divergence (this build: persistent, driver loomfuzz-mlir-driver; the reference: persistent, "
            "driver loomfuzz-mlir-driver-19), 1 job)") in done.stdout
    assert not _notes(done.stderr), done.stderr  # nothing fell back
    # every crash of the reference was MLIR 19's driver's (a fresh fork after each), none MLIR 22's
    restarts = re.search(r"^  restarts: +(.*)$", done.stdout, re.M).group(1)
    assert f"the reference worker-0: {crashes}" in restarts and "this build worker-0: 0" in restarts, restarts
    # process starts: each divergence is confirmed by both builds alone (two processes) whatever
    # the runner; beside those, the drivers and their forks against batches and processes
    confirmations = 2 * len(found)
    persistent = _processes(done.stdout)
    batch, process = (_processes(nineteen_against_22[r][0].stdout) for r in ("batch", "process"))
    assert persistent < batch and persistent < process, (persistent, batch, process)
    assert 2 * (persistent - confirmations) <= min(batch, process) - confirmations, (persistent, batch, process)
    assert process - confirmations == 2 * COUNT  # one process per program and build


def test_a_reference_build_without_a_driver_runs_in_batches_and_says_so(tmp_path):
    """mlir-opt-16 has no persistent driver: the reference side runs in batches (one line on
    stderr), this build through MLIR 22's driver, and MLIR 16's own wrong sccp fold is found."""
    _require("mlir-opt-16")
    done = loomfuzz("run", str(ZERO_TRIP_WIDE), "--profile", "wide", "--oracle", "differential", "--mlir-opt",
                    "mlir-opt-22", "--reference-mlir-opt", "mlir-opt-16", "--pipeline",
                    "builtin.module(canonicalize,cse,sccp)", "--compare", "values", "--runner", "persistent",
                    "--artifacts", str(tmp_path / "a"), "--no-progress")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (note,) = _notes(done.stderr)
    assert re.search(r"the reference build \S*mlir-opt-16 runs in batches, never through another build's "
                     r"driver: .* is LLVM 22\.[\d.]+, .* is LLVM 16\.", note), note
    assert ("runner divergence (this build: persistent, driver loomfuzz-mlir-driver; the reference: batch), "
            "1 job)") in done.stdout
    (sidecar,) = (tmp_path / "a").glob("crash-*.json")
    divergence = json.loads(sidecar.read_text())["divergence"]
    assert divergence["aspect"] == "values"
    assert divergence["primary"]["values"] == interpret_program(ZERO_TRIP_WIDE.read_text())
    assert divergence["reference"]["values"] != divergence["primary"]["values"]
    assert "exec driver" not in done.stdout  # it died on nothing: nothing to say


def test_the_drivers_deaths_are_counted_in_the_run_and_in_triage(tmp_path):
    _require("mlir-opt-22")
    common = ("--oracle", "differential", "--mlir-opt", "mlir-opt-22", "--pipeline",
              "builtin.module(canonicalize,cse)", "--runner", "persistent", "--no-progress")
    artifacts = tmp_path / "a"
    done = loomfuzz("run", "-n", "12", "--seed", "1", *common, "--reference-mlir-opt", str(RECURSING),
                    "--artifacts", str(artifacts))
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (note,) = _notes(done.stderr)  # 22's driver stands for mlir-opt-22, not a wrapper saying 22 too
    assert re.search(rf"the reference build \S*{RECURSING.name} runs in batches, never through another "
                     r"build's driver: .* stands for \S*llvm-22\S*mlir-opt, not the target", note), note
    assert ("(this build: persistent, driver loomfuzz-mlir-driver; the reference: batch)") in done.stdout
    values = []
    for sidecar in artifacts.glob("crash-*.json"):
        record = json.loads(sidecar.read_text())
        divergence = record["divergence"]
        if divergence["aspect"] == "values":
            values.append(record)
            program = (artifacts / f"{record['name']}.mlir").read_text()
            # mlir-opt-22's values are right (with the twins the program was read with, if any)
            assert divergence["primary"]["values"] == interpreted(program, record["twins"])
            # the reference's output, executed: the stack overflows (mlir-runner-22 dies as the driver did)
            assert divergence["reference"]["values"].startswith("(execution failed: run: signal 11")
    assert len(values) >= 3, done.stdout
    # each such output killed the driver once when found and once when confirmed (the JIT round
    # does not send it again: its values are the toolchain's already)
    (line,) = [line for line in done.stdout.splitlines() if "exec driver:" in line]
    assert line.startswith(f"  executors:  exec driver: {2 * len(values)} deaths, those outputs executed by the "
                           "toolchain; constant twins in "), line  # the default share of twins, counted too

    triaged = loomfuzz("triage", str(artifacts), *common, "--max-candidates", "10", "--out", str(tmp_path / "t"))
    assert triaged.returncode == 0, triaged.stderr[-2000:]
    (line,) = [line for line in triaged.stderr.splitlines() if "exec driver:" in line]
    deaths = int(re.fullmatch(r"triage: exec driver: (\d+) deaths, those outputs executed by the toolchain",
                              line).group(1))
    assert deaths >= len(values)  # each values finding reproduced: its reference output kills the driver
