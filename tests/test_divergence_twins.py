"""Constant twins in the divergence oracle with execution (issue 35: twins "in every command
that judges"): ``loomfuzz run --oracle differential --reference-mlir-opt PATH`` gives both
builds each program's exec rendering with the twins the differential oracle would give it.

Real binaries throughout: mlir-opt-22, mlir-opt-16, and the test double
tests/fixtures/edge_fold_opt.py (mlir-opt-22 with a wrong fold of ``x * -1`` /
``INT_MIN`` / ``INT_MAX`` that needs both operands known at compile time).  Builds are
wrapped by a shell script that keeps a copy of every input it is given (``tee``), so what
each build read is compared byte for byte.

* the double against mlir-opt-22: ``--twins 1`` finds a values divergence on a program
  where ``--twins 0`` finds none (it is a twin's line that differs); the default share
  twins exactly the programs the differential oracle's choice (``sampled``) names;
* the same ``--seed`` gives the same bytes, and both builds read the same bytes, with
  twins (mlir-opt-22 against itself: no divergence over 200 twinned programs) and with
  MLIR 16 as the reference (flagless twins, which it parses: no outcome divergence);
* a twinned finding triages into one bucket minimized with its twins.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.contract import load_grammar
from harness.execute.exec_layout import layout_of
from harness.execute.twins import plan_for, plan_of, sampled
from harness.fuzzing.sources import from_generator

ROOT = Path(__file__).resolve().parents[1]
DOUBLE = ROOT / "tests" / "fixtures" / "edge_fold_opt.py"
FOLDS = "builtin.module(canonicalize,cse)"
COUNT, SEED = 150, 5  # at this seed the double's fold shows in 1 program without twins, 3 with


def loomfuzz(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=os.environ.copy())


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:  # .ci/setup installs mlir-{16,22}-tools: missing is a failure
        pytest.fail(f"{binary} is not on PATH (bash .ci/setup installs it)")
    return path


def _logging(path: Path, real: str, log: Path) -> Path:
    """``real`` behind a script that keeps each optimizing run's input as a file in ``log``
    (runs without a pipeline, ``--version`` and the like, are not kept)."""
    log.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""#!/bin/sh
for a in "$@"; do
  case "$a" in --pass-pipeline=*) tee "$(mktemp -p {log} in.XXXXXX)" | {real} "$@"; exit $?;; esac
done
exec {real} "$@"
""")
    path.chmod(0o755)
    return path


def _inputs(log: Path) -> Counter:
    """Every module the build read (a batch is split at its separators), counted."""
    modules: Counter = Counter()
    for run in log.iterdir():
        modules.update(m for m in run.read_text().split("// -----\n") if m.strip())
    return modules


@functools.cache
def _programs() -> tuple[str, ...]:
    """The programs ``loomfuzz run --profile wide -n COUNT --seed SEED`` judges (canonical)."""
    source = from_generator(load_grammar(None, "wide"), "fast", SEED, COUNT, "canonical")
    return tuple(source.program_at(k) for k in range(COUNT))


def _records(folder: Path) -> dict[int, dict]:
    """Each finding's JSON by the index of its program."""
    index = {text: k for k, text in enumerate(_programs())}
    out = {}
    for sidecar in folder.glob("crash-*.json"):
        record = json.loads(sidecar.read_text())
        out[index[sidecar.with_suffix(".mlir").read_text()]] = record
    return out


def _twinned(stdout: str) -> int | None:
    match = re.search(r"constant twins in (\d+) of (\d+) programs", stdout)
    return int(match.group(1)) if match else None


# ------------------------------------------------ the edge fold: found with twins, not without


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    """The double against mlir-opt-22 on the same programs, with every program twinned, with
    none and with the default share: {share: (process, findings by index)}."""
    tmp = tmp_path_factory.mktemp("edge")
    double = tmp / "edge-fold-opt"
    double.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} "$@"\n')
    double.chmod(0o755)
    runs = {}
    for share in ("1", "0", "default"):
        twins = () if share == "default" else ("--twins", share)
        done = loomfuzz("run", "--oracle", "differential", "--mlir-opt", double, "--reference-mlir-opt",
                        _require("mlir-opt-22"), "--pipeline", FOLDS, "--profile", "wide", "-n", COUNT,
                        "--seed", SEED, *twins, "--artifacts", tmp / share, "--no-progress")
        assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
        runs[share] = (done, _records(tmp / share))
    return tmp, double, runs


def _twin_line(record: dict) -> int:
    """The function number of the first printed line where the two builds' values differ."""
    mine = record["divergence"]["primary"]["values"].splitlines()
    theirs = record["divergence"]["reference"]["values"].splitlines()
    line = next(a for a, b in zip(mine, theirs) if a != b)
    return int(line.split(",")[0])


def test_twins_find_a_values_divergence_that_no_twins_do_not(edge):
    tmp, _, runs = edge
    done, twinned = runs["1"]
    plain_done, plain = runs["0"]
    assert _twinned(done.stdout) == COUNT, done.stdout  # the summary's line, as the differential oracle's
    assert _twinned(plain_done.stdout) is None, plain_done.stdout  # --twins 0: none, and no line
    only_with_twins = {k: r for k, r in twinned.items()
                       if r["divergence"]["aspect"] == "values" and k not in plain}
    assert only_with_twins, (sorted(twinned), sorted(plain))
    for index, record in only_with_twins.items():
        build_input = (tmp / "1" / record["build_input"]).read_text()  # what both builds read
        plan = plan_of(build_input)
        assert plan is not None and record["twins"] == plan.text(), record.get("twins")
        assert plan == plan_for(_programs()[index])  # the program's own twins, as the differential oracle draws them
        number = _twin_line(record)
        assert layout_of(build_input).functions[number].twin_of, (index, number)  # a twin's values differ
    assert all(r["twins"] is None for r in plain.values()), plain  # recorded: read without twins


def test_the_default_share_twins_the_programs_the_differential_oracle_twins(edge):
    """No --twins: the default share, chosen per program from its text exactly as the
    differential oracle chooses (harness.execute.twins.sampled), so the count is known."""
    _, _, runs = edge
    done, findings = runs["default"]
    programs = _programs()
    assert _twinned(done.stdout) == sum(sampled(p, 0.25) for p in programs), done.stdout
    for index, record in findings.items():
        expected = plan_for(programs[index]).text() if sampled(programs[index], 0.25) else None
        assert record["twins"] == expected, (index, record["twins"])


def test_a_twinned_divergence_triages_to_one_bucket_minimized_with_its_twins(edge):
    tmp, double, runs = edge
    _, twinned = runs["1"]
    _, plain = runs["0"]
    index = min(k for k, r in twinned.items() if r["divergence"]["aspect"] == "values" and k not in plain)
    record = twinned[index]
    finding = tmp / "1" / f"{record['name']}.mlir"
    out = tmp / "triage"
    done = loomfuzz("triage", finding, "--profile", "wide", "--oracle", "differential", "--mlir-opt", double,
                    "--pipeline", FOLDS, "--out", out, "--max-candidates", 20, "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "0 not reproduced" in done.stderr, done.stderr
    (bucket,) = json.loads((out / "report.json").read_text())["buckets"]
    assert bucket["kind"] == "divergence" and bucket["signature"].startswith("divergence | values:"), bucket
    assert bucket["details"]["twins"] == record["twins"]  # minimized with the twins it was found with
    build_input = (out / bucket["build_input"]).read_text()  # what both builds read
    assert plan_of(build_input).text() == record["twins"] and "__twin" in build_input
    minimized = (out / bucket["minimized"]["path"]).read_text()
    assert len(minimized) < len(finding.read_text())
    reproduced = subprocess.run(["bash", str(out / bucket["reproduce"])], capture_output=True, text=True,
                                timeout=120)
    assert reproduced.stdout.strip(), reproduced.stderr  # the two builds still print other modules


# ------------------------------------------------ the same bytes for both builds, run after run


def test_the_same_seed_gives_both_builds_the_same_twinned_bytes(tmp_path):
    """mlir-opt-22 against itself (each behind a logging wrapper), twice with one seed: every
    program twinned, no divergence in 200 programs, and the four logs hold the same modules."""
    mlir22 = _require("mlir-opt-22")
    logs = []
    for run in ("first", "second"):
        mine = _logging(tmp_path / f"{run}-mine", mlir22, tmp_path / f"{run}-mine-log")
        theirs = _logging(tmp_path / f"{run}-theirs", mlir22, tmp_path / f"{run}-theirs-log")
        done = loomfuzz("run", "--oracle", "differential", "--mlir-opt", mine, "--reference-mlir-opt", theirs,
                        "--pipeline", "builtin.module(canonicalize,cse,sccp)", "--profile", "wide", "-n", 200,
                        "--seed", 3, "--twins", 1, "--artifacts", tmp_path / run, "--no-progress")
        assert done.returncode == 0 and "findings:   none" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
        assert _twinned(done.stdout) == 200, done.stdout
        logs += [_inputs(tmp_path / f"{run}-mine-log"), _inputs(tmp_path / f"{run}-theirs-log")]
    assert logs[0] == logs[1] == logs[2] == logs[3]
    programs = [m for m in logs[0] if "func.func @main" in m]  # not the start-up probes
    assert len(programs) >= 190 and all(plan_of(m) is not None for m in programs)


def test_mlir_16_reads_the_same_twinned_bytes_without_flags(tmp_path):
    """MLIR 16 as the reference: the twins go through the release adaptation with the rest
    (no ``overflow<...>``, which 16 does not parse), both builds read the same bytes, and 16
    accepts every one (no outcome divergence)."""
    mine = _logging(tmp_path / "mine", _require("mlir-opt-22"), tmp_path / "mine-log")
    theirs = _logging(tmp_path / "theirs", _require("mlir-opt-16"), tmp_path / "theirs-log")
    done = loomfuzz("run", "--oracle", "differential", "--mlir-opt", mine, "--reference-mlir-opt", theirs,
                    "--pipeline", "builtin.module(canonicalize,cse,sccp)", "--profile", "wide", "-n", 40,
                    "--seed", 3, "--twins", 1, "--compare", "outcome", "--artifacts", tmp_path / "a",
                    "--no-progress")
    assert done.returncode == 0 and "findings:   none" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    read, read_16 = _inputs(tmp_path / "mine-log"), _inputs(tmp_path / "theirs-log")
    assert read == read_16
    programs = [m for m in read if "func.func @main" in m]
    assert len(programs) >= 38 and all(plan_of(m) is not None and " overflow<" not in m for m in programs)
