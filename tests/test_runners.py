"""The runner interface (harness/run/runners.py): process, batch and persistent
runners agree, and a crash-heavy run keeps the persistent runner's speed.

Real processes throughout: the C double tests/fixtures/persistent_fake.c (a
one-shot tool with --split-input-file, and a fork-server driver) with faults
planted in the program text, and mlir-opt-22 with the driver .ci/setup builds.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.core.engine import generate
from harness.core.grammar import default_grammar
from harness.core.render import render
from harness.run.driver_binary import DRIVER_ENV, default_driver_path
from harness.run.persistent_target import PersistentTarget
from harness.targets.target import resolve_target, Target
from harness.run.runners import (
    BatchRunner,
    PersistentPool,
    ProcessRunner,
    Program,
    default_runner_kind,
    make_runner,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fake(persistent_fake) -> str:
    return persistent_fake


def _targets(fake: str, *options: str, timeout: float = 5.0) -> tuple[Target, PersistentTarget]:
    """The double as a one-shot tool (it prints an accepted program back, as
    mlir-opt prints the module) and as a fork-server driver."""
    process = Target(name="persistent-fake", argv=(fake, "--emit-output", *options), timeout=timeout)
    return process, PersistentTarget(process, (fake, "--persistent", "--fork-server", "--emit-output",
                                               *options), fork_server=True)


def _programs(n: int, seed: int, shares: dict[str, float]) -> list[str]:
    """``n`` programs, each planting a fault with the given probabilities."""
    rng = random.Random(seed)
    texts = []
    for i in range(n):
        x, plant = rng.random(), ""
        for name, p in shares.items():
            if x < p:
                plant = name
                break
            x -= p
        texts.append(f"// id {i}\nprogram {plant}\n")
    return texts


def _key(result):
    """What must not depend on the runner: the outcome kind, the verdict, the reason."""
    return (result.outcome.kind.value, result.verdict.finding, result.verdict.kind, result.outcome.reason)


def test_the_three_runners_agree_on_crashing_hanging_and_rejected_programs(fake):
    texts = _programs(300, 1, {"PLANT_ABORT": 0.12, "PLANT_SEGV": 0.05, "PLANT_REJECT": 0.15})
    texts[77] = "// id 77\nprogram PLANT_HANG\n"
    process, persistent = _targets(fake, timeout=0.5)
    programs = [Program(i, t) for i, t in enumerate(texts)]
    runs = {}
    with ProcessRunner(process, jobs=2) as r:
        runs["process"] = r.run_all(programs)
    with BatchRunner(process, jobs=2) as r:  # bisection
        runs["batch"] = r.run_all(programs)
    with BatchRunner(process, jobs=2, fallback=persistent) as r:  # unclean batches through drivers
        runs["batch+driver"] = r.run_all(programs)
    with PersistentPool(process, persistent, jobs=2) as r:
        runs["persistent"] = r.run_all(programs)
        assert r.stats.restart_reasons()["timeout"] in (1, 2)  # 2: confirmed in a fresh worker
    kinds = Counter(res.outcome.kind.value for res in runs["process"])
    assert kinds["crash"] >= 30 and kinds["rejected"] >= 30 and kinds["timeout"] == 1, kinds
    for name, results in runs.items():
        assert [res.program.key for res in results] == list(range(300)), name
        assert [_key(res) for res in results] == [_key(res) for res in runs["process"]], name


def test_mlir_opt_runners_agree_on_generated_programs():
    """A few thousand generated programs through mlir-opt-22: persistent (the
    built driver) and batches give every program the same outcome kind."""
    path = os.environ.get(DRIVER_ENV) or str(default_driver_path())
    if not os.access(path, os.X_OK):
        pytest.fail(f"no persistent MLIR driver at {path}: run `bash .ci/setup`")
    grammar = default_grammar()
    target = resolve_target("mlir-opt")
    texts = [render(t, grammar, "oracle") for t in generate(grammar, "fast", 4, 2000)]
    # a few the parser refuses: a cut program
    texts += [t[: len(t) // 2] for t in texts[:20]]
    programs = [Program(i, t) for i, t in enumerate(texts)]
    kinds = {}
    for kind in ("persistent", "batch"):
        with make_runner(kind, target, jobs=2) as runner:
            kinds[kind] = [(r.outcome.kind.value, r.verdict.finding) for r in runner.run(programs)]
    assert kinds["persistent"] == kinds["batch"]
    assert Counter(k for k, _ in kinds["batch"])["rejected"] == 20


def test_a_crash_heavy_run_keeps_the_persistent_runner_s_speed(fake, tmp_path):
    """1,000 programs, 40% of which abort: every program judged once, the same
    findings as the process runner, and at least 5x its throughput (a ratio of
    two runs in this test, not a time).  The double starts up in 5 ms (an LLVM
    tool: mlir-opt-22 takes about 35 ms), which the fork server pays once."""
    log = tmp_path / "crashes"
    texts = _programs(1000, 2, {"PLANT_ABORT": 0.40})
    process, persistent = _targets(fake, f"--crash-log={log}", "--startup-ms=5")
    programs = [Program(i, t) for i, t in enumerate(texts)]

    # Measured in alternating slices of 100, so that a change in the machine's load
    # (it is shared) weighs on both runners alike.
    alone, results, seconds = [], [], Counter()
    with ProcessRunner(process) as by_process, PersistentPool(process, persistent) as by_driver:
        for lo in range(0, 1000, 100):
            for name, runner, out in (("process", by_process, alone), ("persistent", by_driver, results)):
                started = time.monotonic()
                out.extend(runner.run_all(programs[lo:lo + 100]))
                seconds[name] += time.monotonic() - started
        stats = by_driver.stats
    process_seconds, persistent_seconds = seconds["process"], seconds["persistent"]
    crashes = len(log.read_text().splitlines()) - sum(r.verdict.finding for r in alone)

    aborts = sum("PLANT_ABORT" in t for t in texts)
    assert 350 <= aborts <= 450
    assert [r.program.key for r in results] == list(range(1000))  # each once, in order
    assert [_key(r) for r in results] == [_key(r) for r in alone]
    assert sum(r.verdict.finding for r in results) == aborts
    # the double's own count: each abort once in its worker; a second time when the
    # confirmation had to fork a fresh worker for it (it was not a worker's first program)
    assert crashes == aborts + stats.executions - 1000 and stats.restart_reasons()["crash"] == crashes
    assert stats.processes < 1000  # forks and one driver, no process per program
    ratio = process_seconds / persistent_seconds
    print(f"crash-heavy: process {process_seconds:.2f} s, persistent {persistent_seconds:.2f} s: {ratio:.1f}x")
    assert ratio >= 5, f"persistent {persistent_seconds:.2f} s vs process {process_seconds:.2f} s: {ratio:.1f}x"


def test_default_runner_is_persistent_where_the_driver_is_built(monkeypatch, tmp_path):
    monkeypatch.delenv(DRIVER_ENV, raising=False)
    monkeypatch.delenv("LOOMFUZZ_LOOM_DRIVER", raising=False)
    mlir = resolve_target("mlir-opt")
    assert default_runner_kind(mlir) == ("persistent" if default_driver_path().is_file() else "batch")
    loom = Target("loom-opt", ("/bin/true", "--loom-lower-for-to-graph"))
    assert default_runner_kind(loom) == "batch"
    monkeypatch.setenv(DRIVER_ENV, str(tmp_path / "none"))
    assert default_runner_kind(mlir) == "batch"


def test_persistent_loom_runner_without_loom_s_driver_says_so_in_one_line(fake_loom_opt, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LOOMFUZZ_LOOM_DRIVER"}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--loom-opt", fake_loom_opt, "-n", "5",
         "--runner", "persistent", "--artifacts", str(tmp_path), "--no-progress"],
        capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert "built with loom's libraries" in line and "LOOMFUZZ_LOOM_DRIVER" in line
    assert not list(tmp_path.glob("crash-*"))


# ---------------------------------------------------------- the pipeline probe


def _counting_mlir_opt(tmp_path: Path, mlir_opt: str) -> tuple[Path, Path]:
    """mlir-opt-22 behind a script that counts its invocations: ``run`` for a program,
    ``ask --version`` / ``ask --help`` for the questions the target model asks it once."""
    log = tmp_path / "invocations"
    wrapper = tmp_path / "mlir-opt-counted"
    wrapper.write_text(f'#!/bin/sh\ncase "$1" in --version|--help) echo "ask $1" >> {log};; '
                       f'*) echo run >> {log};; esac\nexec {mlir_opt} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


@pytest.mark.parametrize("command", [["run", "-n", "200"], ["enumerate", "--run", "--count", "200"]])
def test_a_pipeline_the_target_refuses_stops_before_any_program(mlir_opt, tmp_path, command):
    wrapper, log = _counting_mlir_opt(tmp_path, mlir_opt)
    artifacts = tmp_path / "artifacts"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLIR_OPT": str(wrapper)}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *command, "--target", "mlir-opt",
         "--pipeline", "canonicalize,cse,sccp", "--runner", "process",
         "--artifacts", str(artifacts), "--no-progress"],
        capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"loomfuzz {command[0]}: error: --pipeline canonicalize,cse,sccp: ")
    assert "write --pipeline 'builtin.module(canonicalize,cse,sccp)'" in line
    invocations = log.read_text().splitlines()
    assert [line for line in invocations if line == "run"] == ["run"]  # the probe, and no program
    assert sorted(line for line in invocations if line != "run") == ["ask --help", "ask --version"]
    assert not list(artifacts.glob("crash-*")) if artifacts.exists() else True


@pytest.mark.parametrize("target, pipeline, said", [
    # changes neither the probe module nor the grammar's first program
    ("mlir-opt", "symbol-dce", "nor in the grammar's first program of seed 0: it has nothing to do on "
                               "them, or it is not running"),
    # rewrites the grammar's first program: it runs, nothing to say
    ("mlir-opt", "cse", None),
    # crashes on it (issue 46: 150 of 300 programs crash, and the note said "it is not running")
    ("mlir-opt-19", "remove-dead-values", "but the grammar's first program of seed 0 crashes in it "
                                          "(LLVM ERROR: SmallVector unable to grow."),
])
def test_a_pipeline_that_changes_nothing_in_the_probe_module_is_said_as_it_happened(mlir_opt, tmp_path, target,
                                                                                     pipeline, said):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "-n", "20", "--target", target,
         "--pipeline", f"builtin.module({pipeline})", "--artifacts", str(tmp_path), "--no-progress"],
        capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "note:" in line]
    if said is None:
        assert notes == [], notes
        return
    assert len(notes) == 1 and "changed nothing in the probe module" in notes[0] and said in notes[0], notes
    if target == "mlir-opt-19":  # and the sweep agrees with the note: crashes are findings
        assert proc.returncode == 1 and " crash " in proc.stdout
        assert "not running" not in notes[0]


# ------------------------------------------------------- files, re-rendered


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def _journal_findings(folder: Path) -> list[tuple[int, str]]:
    import json

    (journal,) = folder.glob("sweep-*.jsonl")
    return sorted((f["index"], f["kind"]) for line in journal.read_text().splitlines()[1:]
                  for f in json.loads(line)["findings"])


def test_a_corpus_runs_against_either_target(mlir_opt, fake_loom_opt, tmp_path):
    """500 generated (canonical) files through mlir-opt-22: no finding; the same
    programs written in the oracle rendering through the loom-opt stand-in: the
    findings of the canonical files, index for index."""
    assert _cli("generate", "-n", "500", "--seed", "3", "-o", "canonical", cwd=tmp_path).returncode == 0
    assert _cli("generate", "-n", "500", "--seed", "3", "--render", "oracle", "-o", "oracle",
                cwd=tmp_path).returncode == 0
    upstream = _cli("run", "--target", "mlir-opt", "canonical", "--artifacts", "a-mlir", "--no-progress",
                    cwd=tmp_path)
    assert upstream.returncode == 0, upstream.stdout + upstream.stderr
    assert "findings:   none" in upstream.stdout and "500 of 500 programs read back" in upstream.stderr
    plants = "--pass-args=--loom-lower-for-to-graph --plant=assert,segv,fatal,wrong-output"
    loom = {}
    for style in ("canonical", "oracle"):
        proc = _cli("run", "--loom-opt", fake_loom_opt, plants, style, "--artifacts", f"a-{style}",
                    "--no-progress", cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        loom[style] = _journal_findings(tmp_path / f"a-{style}")
    assert loom["oracle"] == loom["canonical"] and loom["canonical"]


def test_a_file_no_grammar_parses_runs_as_written(fake_loom_opt, tmp_path):
    (tmp_path / "odd.mlir").write_text("// not a program of any profile\nmodule {\n}\n")
    proc = _cli("run", "--loom-opt", fake_loom_opt, "odd.mlir", "--artifacts", "a", "--no-progress",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0 of 1 programs read back" in proc.stderr and "1 run as written" in proc.stderr


# ------------------------------------------------------------ counts in fuzz


def test_fuzz_jobs_report_the_workers_driver_restarts(fake, tmp_path):
    """`fuzz --runner persistent --jobs 2` against a driver that crashes at the
    20th program of every worker: the summary's and stats.csv's restart counts
    equal the double's own count of its crashes."""
    import csv

    crashes = tmp_path / "crashes"
    wrapper = tmp_path / "driver"
    wrapper.write_text(f'#!/bin/sh\nexec {fake} --persistent --crash-log={crashes} "$@"\n')
    wrapper.chmod(0o755)
    expectations = tmp_path / "any.json"
    expectations.write_text('{"rules": [{"name": "any", "expect": "either"}]}')
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "fuzz", "--loom-opt", fake, "--pass-args=--state-bug=20",
         "--expectations", str(expectations), "--runner", "persistent", "--jobs", "2", "--runs", "300",
         "--seed", "1", "--stats-interval", "0.2", "--corpus", str(tmp_path / "corpus"),
         "--artifacts", str(tmp_path / "artifacts")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LOOMFUZZ_LOOM_DRIVER": str(wrapper)})
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]  # persistent-only findings
    crashed = len(crashes.read_text().splitlines())
    assert crashed >= 2
    assert f"persistent:  {crashed} driver restarts (crash: {crashed})" in proc.stdout, proc.stdout
    with open(tmp_path / "artifacts" / "stats.csv", newline="") as f:
        last = list(csv.DictReader(f))[-1]
    assert last["final"] == "1" and int(last["restarts"]) == crashed
    assert last["restart_reasons"] == f"crash:{crashed}"


def test_a_sweep_s_persistent_only_findings_carry_their_own_history(fake, tmp_path):
    """`run --runner persistent` with a driver whose every worker fails its 25th
    program (state, not the program): each such finding is persistent-only, its
    sidecar holds its own position and the 24 programs its worker ran before it,
    although the runner ran ahead meanwhile."""
    import json

    wrapper = tmp_path / "driver"
    wrapper.write_text(f'#!/bin/sh\nexec {fake} --persistent "$@"\n')
    wrapper.chmod(0o755)
    expectations = tmp_path / "any.json"
    expectations.write_text('{"rules": [{"name": "any", "expect": "either"}]}')
    programs = tmp_path / "programs.mlir"
    programs.write_text("\n// -----\n".join(f"// id {i}\nprogram {i}\n" for i in range(100)))
    proc = _cli("run", "--loom-opt", fake, "--pass-args=--state-bug=25", "--expectations",
                str(expectations), "--runner", "persistent", str(programs), "--artifacts", "a",
                "--no-progress", cwd=tmp_path, env={"LOOMFUZZ_LOOM_DRIVER": str(wrapper)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    sidecars = [json.loads(p.read_text()) for p in (tmp_path / "a").glob("crash-*.json")]
    assert len(sidecars) == 4  # programs 24, 48, 72, 96: each worker's 25th
    for record in sidecars:
        assert record["persistent_only"] and record["persistent"]["position"] == 25
        history = (tmp_path / "a" / record["persistent"]["history"]).read_text().split("\n// -----\n")
        ids = [int(h.split("// id ")[1].split()[0]) for h in history]
        failed = int(open(tmp_path / "a" / (record["name"] + ".mlir")).read().split("// id ")[1].split()[0])
        assert ids == list(range(failed - 24, failed))
