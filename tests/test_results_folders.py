"""Results folders keyed by the build and the command (issue 46, item 1).

A new user's first hour mixed builds: ``fuzz``, ``run`` and sweeps all wrote ``artifacts/``,
``fuzz`` read the set-up command's ``corpus/``, a stand-in triage bucketed ``mlir-opt-19``'s
findings, an ``mlir-opt`` campaign overwrote the stand-in's ``fuzz-options.json``, the ``run``
journal landed in the fuzz folder.  Here, with real ``loomfuzz`` subprocesses in a fresh
folder, the stand-in (tests/fixtures/fake_loom_opt.c) and Debian's MLIR 19 and 22: each command
writes under ``artifacts/<build>/<command>/`` by default, a folder of another build or command
is refused in one line, and triage never buckets another build's findings.  The build keys are
computed here on their own (SHA-256 of the stand-in's bytes; the MLIR release numbers).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]
RDV = "builtin.module(remove-dead-values)"  # MLIR 19 crashes on about half the programs


def loomfuzz(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*LOOMFUZZ, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600)


def stand_in_key(binary: str) -> str:
    return "loom-opt-" + hashlib.sha256(Path(binary).read_bytes()).hexdigest()[:10]


def one_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, fake_loom_opt, mlir_opt):
    """A fresh folder after a stand-in sweep and an MLIR 19 sweep, both with the defaults."""
    root = tmp_path_factory.mktemp("first-hour")
    stand_in = loomfuzz("run", "--loom-opt", fake_loom_opt, "--pass-args=--plant=assert,segv,fatal "
                        "--loom-lower-for-to-graph", "-n", "40", "--no-progress", cwd=root)
    assert stand_in.returncode == 1, stand_in.stderr  # the planted bugs
    mlir19 = loomfuzz("run", "--target", "mlir-opt-19", "--pipeline", RDV, "-n", "40", "--no-progress", cwd=root)
    assert mlir19.returncode == 1, mlir19.stderr
    return root, stand_in_key(fake_loom_opt)


def test_each_build_and_command_writes_its_own_folder(workspace):
    root, key = workspace
    for build in (key, "mlir-opt-19"):
        folder = root / "artifacts" / build / "run"
        assert list(folder.glob("crash-*.json")) and list(folder.glob("sweep-*.jsonl")), build
        stamp = json.loads((folder / ".loomfuzz-folder.json").read_text())
        assert stamp["build"] == build and stamp["command"] == "run"
        for record in folder.glob("crash-*.json"):  # every finding names its build
            assert json.loads(record.read_text())["target"]["key"] == build
    assert sorted(p.name for p in (root / "artifacts").iterdir()) == sorted([key, "mlir-opt-19"])


def test_a_folder_of_another_build_or_command_is_refused_in_one_line(workspace, fake_loom_opt, tmp_path):
    root, key = workspace
    theirs = root / "artifacts" / key / "run"
    before = sorted(p.name for p in theirs.iterdir())
    done = loomfuzz("run", "--target", "mlir-opt-19", "--pipeline", RDV, "-n", "5", "--artifacts", theirs,
                    "--no-progress", cwd=root)
    assert done.returncode == 2
    line = one_line(done)
    assert f"holds the run results of {key}, not run's of mlir-opt-19: pass another --artifacts" in line
    assert "artifacts/mlir-opt-19/run" in line
    assert sorted(p.name for p in theirs.iterdir()) == before  # nothing written, nothing lost
    enumerate_ = loomfuzz("enumerate", "--run", "--count", "5", "--loom-opt", fake_loom_opt,
                          "--artifacts", theirs, "--no-progress", cwd=root)
    assert enumerate_.returncode == 2 and f"not enumerate's of {key}" in one_line(enumerate_)
    # a folder written before the stamps: told by its state files and its findings' records
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "fuzz-options.json").write_text("{}\n")
    refused = loomfuzz("run", "--loom-opt", fake_loom_opt, "-n", "5", "--artifacts", legacy, "--no-progress",
                       cwd=root)
    assert refused.returncode == 2 and "holds a fuzz campaign's state (fuzz-options.json)" in one_line(refused)
    old = tmp_path / "old"
    old.mkdir()
    for record in (root / "artifacts" / "mlir-opt-19" / "run").glob("crash-*.json"):
        (old / record.name).write_text(record.read_text())
    mixed = loomfuzz("run", "--loom-opt", fake_loom_opt, "-n", "5", "--artifacts", old, "--no-progress", cwd=root)
    assert mixed.returncode == 2 and "holds findings of /usr/lib/llvm-19/bin/mlir-opt" in one_line(mixed)


def test_triage_never_buckets_another_builds_findings(workspace, fake_loom_opt):
    root, key = workspace
    common = ("--pass-args=--plant=assert,segv,fatal --loom-lower-for-to-graph", "--max-candidates", "10",
              "--no-progress")
    # issue 46: the stand-in's triage over artifacts/ made buckets of MLIR 19's findings
    mixed = loomfuzz("triage", "--loom-opt", fake_loom_opt, *common, "artifacts/", cwd=root)
    assert mixed.returncode == 2
    line = one_line(mixed)
    assert "finding(s) in the inputs were made by mlir-opt-19" in line and f"not by {key}" in line
    assert f"(its folder: artifacts/{key}/)" in line
    assert not (root / "artifacts" / key / "triage").exists()  # no database, no bucket
    own = loomfuzz("triage", "--loom-opt", fake_loom_opt, *common, f"artifacts/{key}/", cwd=root)
    assert own.returncode == 0, own.stderr
    assert f"report: artifacts/{key}/triage/report.md" in own.stderr
    listed = loomfuzz("triage", "list", cwd=root)  # the one triage there is, without --out
    assert listed.returncode == 0 and "crash:assert" in listed.stdout, listed.stderr
    report = json.loads((root / "artifacts" / key / "triage" / "report.json").read_text())
    for bucket in report["buckets"]:
        for member in bucket["inputs"]:
            assert all(path.startswith(f"artifacts/{key}/run/") for path in member["paths"]), member
    # a second build's triage: list asks which
    other = loomfuzz("triage", "--target", "mlir-opt-19", "--pipeline", RDV, "--max-candidates", "5",
                     "--no-progress", "artifacts/mlir-opt-19/", cwd=root)
    assert other.returncode == 0, other.stderr
    assert (root / "artifacts" / "mlir-opt-19" / "triage" / "triage.db").is_file()
    ask = loomfuzz("triage", "list", cwd=root)
    assert ask.returncode == 1 and "pass --out DIR" in one_line(ask)
    assert f"artifacts/{key}/triage" in ask.stderr and "artifacts/mlir-opt-19/triage" in ask.stderr
    chosen = loomfuzz("triage", "list", "--out", "artifacts/mlir-opt-19/triage", cwd=root)
    assert chosen.returncode == 0 and "crash" in chosen.stdout


def test_campaigns_of_two_builds_keep_their_options_and_never_take_the_setup_corpus(fake_loom_opt, mlir_opt,
                                                                                      tmp_path):
    key = stand_in_key(fake_loom_opt)
    setup = loomfuzz("generate", "-n", "20", "-o", "corpus", cwd=tmp_path)  # the README's first command
    assert setup.returncode == 0, setup.stderr
    programs = sorted(p.name for p in (tmp_path / "corpus").iterdir())
    first = loomfuzz("fuzz", "--loom-opt", fake_loom_opt, "--pass-args=--plant=none", "--runs", "20",
                     "--seed", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    options = tmp_path / "artifacts" / key / "fuzz" / "fuzz-options.json"
    written = options.read_bytes()
    assert json.loads(written)["corpus"] == str(tmp_path / "artifacts" / key / "corpus")
    second = loomfuzz("fuzz", "--target", "mlir-opt", "--runs", "20", "--seed", "1", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    assert (tmp_path / "artifacts" / "mlir-opt-22" / "fuzz" / "fuzz-options.json").is_file()
    assert options.read_bytes() == written  # issue 46: the mlir-opt campaign overwrote it
    refused = loomfuzz("fuzz", "--target", "mlir-opt", "--runs", "20", "--artifacts",
                       tmp_path / "artifacts" / key / "fuzz", cwd=tmp_path)
    assert refused.returncode == 2 and f"holds the fuzz results of {key}, not fuzz's of mlir-opt-22" \
        in refused.stderr.strip().splitlines()[-1]
    assert options.read_bytes() == written
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == programs  # the setup's corpus untouched
    # a sweep's journal never lands in the fuzz folder
    swept = loomfuzz("run", "--loom-opt", fake_loom_opt, "-n", "5", "--no-progress", cwd=tmp_path)
    assert swept.returncode in (0, 1), swept.stderr
    assert list((tmp_path / "artifacts" / key / "run").glob("sweep-*.jsonl"))
    assert not list((tmp_path / "artifacts" / key / "fuzz").glob("sweep-*.jsonl"))
