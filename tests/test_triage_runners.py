"""Triage through the runner interface (issue 24 item 2, issue 27 item 4):
reproduction, minimization's candidates and repeats run through the
persistent driver where the target has one, with the buckets, signatures and
minimized programs of one process per run, and far fewer process starts.

Real processes: the C double tests/fixtures/persistent_fake.c as the target
(a one-shot tool whose stack dump goes through MlirOptMain, as mlir-opt's,
and a fork-server driver whose stack goes straight to main, as the real
driver's), behind shell wrappers that log every exec; mlir-opt-22 with the
driver .ci/setup builds for the default rule.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from harness.core.engine import generate
from harness.core.grammar import default_grammar
from harness.core.render import render
from harness.targets.expectations import parse_expectations
from harness.run.driver_binary import LOOM_DRIVER_ENV
from harness.targets.target import resolve_target, Target
from harness.run.runners import default_runner_kind
from harness.triage.crashdb import TriageDB
from harness.triage.pipeline import TriageConfig, run_triage
from harness.triage.runs import TriageRunner

ANY = parse_expectations({"rules": [{"name": "any", "expect": "either"}]}, "test:any")


@pytest.fixture(scope="module")
def fake(persistent_fake) -> str:
    return persistent_fake


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Path:
    """Generated programs as .mlir files, the largest of a sample (so that
    minimization has work): five that the double aborts on (llvm.freeze),
    three it segfaults on (llvm.call), two it accepts."""
    grammar = default_grammar()
    folder = tmp_path_factory.mktemp("findings")
    texts = sorted((render(t, grammar) for t in generate(grammar, "fast", 7, 300)), key=len, reverse=True)
    aborts = [t for t in texts if "llvm.freeze" in t][:8]
    segvs = [t for t in texts if "llvm.call" in t and "llvm.freeze" not in t][:4]
    clean = [t for t in texts if "llvm.call" not in t and "llvm.freeze" not in t][:2]
    assert (len(aborts), len(segvs), len(clean)) == (8, 4, 2)
    for k, text in enumerate(aborts + segvs + clean):
        (folder / f"p{k}.mlir").write_text(text)
    return folder


def _wrappers(folder: Path, execs: Path, tool: str, driver: str) -> tuple[Path, Path]:
    """Scripts ``tool`` and ``driver`` in ``folder`` that log their execs to ``execs``
    (a line ``tool`` or ``driver`` each), then exec the real command."""
    paths = []
    for name, command in (("tool", f'"{tool}"'), ("driver", driver)):
        path = folder / name
        path.write_text(f'#!/bin/sh\necho {name} >> "{execs}"\nexec {command} "$@"\n')
        path.chmod(0o755)
        paths.append(path)
    return paths[0], paths[1]


def _target(fake: str, folder: Path, monkeypatch) -> tuple[Target, Path]:
    """The double as loom-opt and its driver, each behind a wrapper that logs its execs."""
    execs = folder / "execs.log"
    tool, driver = _wrappers(folder, execs, fake, f'"{fake}" --persistent')
    monkeypatch.setenv(LOOM_DRIVER_ENV, str(driver))
    argv = (str(tool), "--abort-on=llvm.freeze", "--segv-on=llvm.call",
            f"--crash-log={folder / 'crashes.log'}")
    return Target(name="loom-opt", argv=argv, expectations=ANY, timeout=10.0), execs


def _triage(fake, findings, tmp_path, monkeypatch, runner: str | None):
    folder = tmp_path / (runner or "default")
    folder.mkdir()
    target, execs = _target(fake, folder, monkeypatch)
    summary = run_triage(TriageConfig(
        inputs=[str(findings)], target=target, db_path=str(folder / "triage.db"),
        out_dir=str(folder / "out"), jobs=2, repeat=3, progress=False,
        max_minimize_evaluations=120, runner=runner))
    with TriageDB(str(folder / "triage.db")) as db:
        buckets = sorted((b["signature"], b["reproduction"], b["minimized_text"], b["minimized_hits"],
                          b["minimized_attempts"], b["min_runs"], b["min_evaluations"]) for b in db.buckets())
        members = sorted((m["first_path"], m["reproduction"], m["hits"], m["attempts"], m["bucket_id"] is None)
                         for m in db.members(None) + [r for b in db.buckets() for r in db.members(b["id"])])
    return summary, buckets, members, Counter(execs.read_text().split())


def test_process_and_persistent_triage_agree_with_far_fewer_process_starts(fake, findings, tmp_path,
                                                                           monkeypatch):
    process, buckets_p, members_p, execs_p = _triage(fake, findings, tmp_path, monkeypatch, "process")
    persistent, buckets_d, members_d, execs_d = _triage(fake, findings, tmp_path, monkeypatch, "persistent")
    # the same buckets: signatures (the driver's stack has no MlirOptMain frames), minimized programs
    assert [b[0] for b in buckets_p] == [
        "crash:SIGSEGV | plantedNullDereference",
        "crash:assert | !isa<scf::ForOp>(parent) | lowerFreeze",
    ]
    assert buckets_d == buckets_p
    assert members_d == members_p
    assert all(b[1] == "always" for b in buckets_p)
    assert all(b[5] >= 5 for b in buckets_p)  # minimization's candidates ran on the target
    for signature, _, minimized, *_ in buckets_p:  # minimization did reduce, to a program with the fault
        fault = "llvm.freeze" if "lowerFreeze" in signature else "llvm.call"
        assert fault in minimized
        assert len(minimized) <= min(len(t) for p in findings.glob("*.mlir") if fault in (t := p.read_text()))
    # process: every run an exec; persistent: one driver per triage job, crashes cost forks, but
    # for a finding's symptom profile and the evidence runs of a minimized program (a process
    # each: a fork server's workers share its address layout)
    assert execs_p == Counter(tool=process.target_runs) and process.target_runs >= 40
    fresh = sum(m[3] - 1 for m in members_d if not m[4]) + sum(b[4] for b in buckets_d)
    assert execs_d["tool"] == fresh and 1 <= execs_d["driver"] <= 2, execs_d
    # as many runs or more (a crash in a used worker runs again in a fresh one), one exec per job
    assert persistent.target_runs >= process.target_runs
    assert execs_p["tool"] >= 20 * execs_d["driver"]


def test_a_state_dependent_crash_is_not_a_bucket_through_the_persistent_runner(fake, tmp_path, monkeypatch):
    """A program that crashes only as the 4th program of a worker: the runner
    confirms it as a fresh worker's first program, which does not crash, so
    triage records no finding, as a process of its own would."""
    folder = tmp_path / "state"
    folder.mkdir()
    target, _ = _target(fake, folder, monkeypatch)
    target = Target(name=target.name, argv=(*target.argv, "--state-bug=4"), expectations=ANY)
    inputs = folder / "in"
    inputs.mkdir()
    (inputs / "a.mlir").write_text("// a\nnot a program of the grammar\n")
    records = {}
    for kind in ("persistent", "process"):
        db_path = str(folder / f"{kind}.db")
        summary = run_triage(TriageConfig(inputs=[str(inputs)], target=target, db_path=db_path,
                                          out_dir=None, repeat=5, progress=False, runner=kind))
        assert (summary.buckets, summary.not_reproducing) == (0, 1)
        with TriageDB(db_path) as db:
            (member,) = db.members(None)
            records[kind] = (member["reproduction"], member["hits"], member["attempts"], member["outcome"],
                             member["reason"])
        if kind == "persistent":  # the 4th run crashed in the driver, and was not believed
            assert (folder / "crashes.log").read_text().split().count("state") == 1
    assert records["persistent"] == records["process"] == ("never", 0, 5, "accepted", "exit status 0")


def test_triage_s_default_runner_is_run_s(fake, tmp_path, monkeypatch):
    """persistent where the target's driver is built (mlir-opt: native/build), else batch."""
    mlir_opt = resolve_target("mlir-opt")
    assert TriageRunner(mlir_opt).kind == default_runner_kind(mlir_opt) == "persistent"
    target, _ = _target(fake, tmp_path, monkeypatch)
    assert TriageRunner(target).kind == "persistent"
    monkeypatch.delenv(LOOM_DRIVER_ENV)
    assert TriageRunner(target).kind == "batch"


def test_mlir_opt_22_triage_through_its_driver_records_what_processes_do(mlir_opt, tmp_path, monkeypatch):
    """Real mlir-opt-22 and the driver .ci/setup builds: programs it accepts
    (no finding: each runs --repeat times) get the same records through both
    runners, and the persistent one starts one driver instead of a process per run."""
    from harness.run.driver_binary import DRIVER_ENV, default_driver_path
    from harness.core.grammar import load_profile

    driver_binary = os.environ.get(DRIVER_ENV) or str(default_driver_path())
    if not os.access(driver_binary, os.X_OK):
        pytest.fail(f"no persistent MLIR driver at {driver_binary}: run `bash .ci/setup`")
    wide = load_profile("wide")
    inputs = tmp_path / "in"
    inputs.mkdir()
    for k, tree in enumerate(generate(wide, "fast", 5, 4)):
        (inputs / f"f{k}.mlir").write_text(render(tree, wide, "oracle"))
    execs = tmp_path / "execs.log"
    tool, driver = _wrappers(tmp_path, execs, mlir_opt, f'"{driver_binary}"')
    monkeypatch.setenv(DRIVER_ENV, str(driver))
    base = resolve_target("mlir-opt", pipeline="builtin.module(canonicalize,cse)")
    target = Target(base.name, (str(tool), *base.argv[1:]), base.render, expectations=base.expectations)
    records, counts = {}, {}
    for kind in ("process", "persistent"):
        execs.unlink(missing_ok=True)
        db_path = str(tmp_path / f"{kind}.db")
        summary = run_triage(TriageConfig(inputs=[str(inputs)], target=target, db_path=db_path, out_dir=None,
                                          grammar=wide, jobs=2, repeat=3, progress=False, runner=kind))
        with TriageDB(db_path) as db:
            records[kind] = sorted((m["first_path"], m["reproduction"], m["hits"], m["attempts"], m["outcome"])
                                   for m in db.members(None))
        counts[kind] = (summary.target_runs, Counter(execs.read_text().split()))
    assert records["persistent"] == records["process"]
    assert [r[1:] for r in records["process"]] == [("never", 0, 3, "accepted")] * 4
    assert counts["process"] == (12, Counter(tool=12))
    assert counts["persistent"][0] == 12 and counts["persistent"][1] == Counter(driver=counts["persistent"][1]["driver"])
    assert 1 <= counts["persistent"][1]["driver"] <= 2


# ------------------------------------------- divergence triage under --oracle differential

ZERO_TRIP_WIDE = Path(__file__).parent / "programs" / "upstream_mlir16_sccp_zero_trip_wide.mlir"
SCCP = "builtin.module(canonicalize,cse,sccp)"


def _loomfuzz(*args: str, env: dict) -> "subprocess.CompletedProcess":
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **env})


def test_divergence_triage_judges_values_with_the_runner_it_is_given(tmp_path):
    """MLIR 16's zero-trip sccp fold against mlir-opt-22 (tests/test_divergence.py), a values
    divergence, triaged through --runner process and --runner persistent: the same bucket
    and minimized program, and the persistent one starts no lowering or runner process and
    runs mlir-opt-22 only for what the driver is not (its --version), with the reference build
    mlir-opt-16 the one process per judgement.  Every start is counted by shims on PATH."""
    import shutil

    from harness.run.driver_binary import DRIVER_ENV, default_driver_path

    driver_binary = os.environ.get(DRIVER_ENV) or str(default_driver_path())
    if not os.access(driver_binary, os.X_OK):
        pytest.fail(f"no persistent MLIR driver at {driver_binary}: run `bash .ci/setup`")
    shims, execs = tmp_path / "bin", tmp_path / "execs.log"
    shims.mkdir()
    for name in ("mlir-opt-22", "mlir-opt-16", "mlir-runner-22"):
        real = shutil.which(name) or pytest.fail(f"{name} is not on PATH (bash .ci/setup installs it)")
        (shims / name).write_text(f'#!/bin/sh\necho {name} >> "{execs}"\nexec "{real}" "$@"\n')
        (shims / name).chmod(0o755)
    _, driver = _wrappers(tmp_path, execs, "true", f'"{driver_binary}"')
    env = {"PATH": f"{shims}:{os.environ['PATH']}", DRIVER_ENV: str(driver)}
    common = ("--profile", "wide", "--oracle", "differential", "--mlir-opt", "mlir-opt-22", "--pipeline", SCCP,
              "--reference-mlir-opt", "mlir-opt-16", "--compare", "values", "--no-progress")
    found = _loomfuzz("run", str(ZERO_TRIP_WIDE), *common, "--artifacts", str(tmp_path / "a"), env=env)
    assert found.returncode == 1, found.stderr[-2000:]
    records, counts = {}, {}
    for kind in ("process", "persistent"):
        execs.unlink(missing_ok=True)
        out = tmp_path / kind
        done = _loomfuzz("triage", str(tmp_path / "a"), *common, "--runner", kind, "--max-candidates", "12",
                         "--out", str(out), env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "note:" not in done.stderr, done.stderr  # nothing fell back
        with TriageDB(str(out / "triage.db")) as db:
            (bucket,) = db.buckets("divergence")
            details = json.loads(bucket["details"])
            records[kind] = (bucket["kind"], bucket["signature"], bucket["minimized_text"], bucket["count"],
                             bucket["min_evaluations"], details["aspect"], details["kinds"],
                             details["first_difference"], bucket["observed_output"], bucket["reference_output"])
        counts[kind] = Counter(execs.read_text().split())
    process, persistent = counts["process"], counts["persistent"]
    assert records["persistent"] == records["process"]
    assert records["process"][5:7] == ("values", "accepted/accepted") and records["process"][4] >= 5
    # the reference build is a process per judgement either way: the same judgements
    assert persistent["mlir-opt-16"] == process["mlir-opt-16"] >= 6
    assert persistent["mlir-runner-22"] == 0 and process["mlir-runner-22"] >= 10, (process, persistent)
    assert 1 <= persistent["driver"] <= 2, persistent
    # beside the reference build's: mlir-opt-22's --version and pre-flight probes, the drivers
    mine = {kind: sum(n for name, n in c.items() if name != "mlir-opt-16") for kind, c in counts.items()}
    assert mine["process"] >= 5 * mine["persistent"], (process, persistent)
    print(f"process starts: --runner process {dict(process)}, --runner persistent {dict(persistent)}")


def test_divergence_values_say_in_one_line_where_they_fall_back():
    """The persistent runner with a primary build that is not the driver's libMLIR: that build
    runs as a process (said), the values still in process; another reference runner: all by
    processes (said); --runner process: processes, nothing to say."""
    from dataclasses import replace

    from harness.execute.differential import Optimizer
    from harness.oracles.differential_runner import oracle_settings
    from harness.oracles.divergence_execution import exec_divergence_settings

    persistent = oracle_settings(Optimizer("mlir-opt-19", SCCP), runner="persistent")
    settings = exec_divergence_settings("mlir-opt-16", persistent, "values")
    assert settings.run_primary is None and settings.execute_all is not None
    assert "mlir-opt-19" in settings.note and "runs as a process" in settings.note and "\n" not in settings.note
    other = oracle_settings(Optimizer("mlir-opt-22", SCCP), replace(persistent.toolchain, runner="mlir-runner-19"),
                            runner="persistent")
    settings = exec_divergence_settings("mlir-opt-16", other, "values")
    assert settings.run_primary is None and settings.execute_all is None
    assert "executed by processes" in settings.note and "mlir-runner-19" in settings.note
    process = oracle_settings(Optimizer("mlir-opt-22", SCCP), runner="process")
    settings = exec_divergence_settings("mlir-opt-16", process, "values")
    assert (settings.run_primary, settings.execute_all, settings.note) == (None, None, None)
