"""deploy/slurm on a real Slurm cluster: one node, started by deploy/slurm/local-cluster.sh.

The sweep array, a cancelled and resubmitted task, a campaign array and the
triage job after each run through real slurmctld/slurmd/munged (Debian's
packages, .ci/setup) and the real loomfuzz CLI; the stand-in target is
tests/fixtures/fake_loom_opt.c.  What the array found is checked against one
`loomfuzz enumerate --run` over the same slice, read from that run's own
files.  The cluster is stopped at the end of the session whatever happened,
and nothing of it may be left running.  About 2 minutes (the campaign's 60 s
is the issue's figure).
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SLURM = ROOT / "deploy" / "slurm"
LOCAL_CLUSTER = SLURM / "local-cluster.sh"

SLICE = ["--start", "0", "--count", "4000"]  # about 320 crashes of the segv plant
TARGET = ["--pass-args=--plant=segv"]  # deterministic (no flaky plant): two runs agree
CAMPAIGN_SECONDS = 30  # enough for both workers to find the segv plant (so at load 5 too)


# ------------------------------------------------------------------ helpers


def _processes_with(marker: str) -> list[str]:
    """``pid cmdline`` of every process whose command line or environment holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name} {command[:120]}")
    return found


def _wait_until_gone(marker: str, seconds: float = 10.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := _processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        bin_dir = str(Path(sys.executable).parent)  # loomfuzz and this Python, for the jobs
        self.env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf"),
                    "PATH": f"{bin_dir}:{os.environ['PATH']}:/usr/sbin",
                    "PYTHONPATH": str(ROOT)}

    def run(self, argv: list, cwd: Path, check: bool = True, **env: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(a) for a in argv], cwd=cwd, env={**self.env, **env}, capture_output=True,
                              text=True, timeout=60)
        if check:
            assert proc.returncode == 0, f"{argv}: {proc.stdout}{proc.stderr}"
        return proc

    def jobs(self, job: str) -> list[dict]:
        """Every task of ``job`` (an array or one job), as scontrol shows it."""
        proc = self.run(["scontrol", "show", "job", "-o", job], Path("/"), check=False)
        rows = []
        for line in proc.stdout.splitlines():
            rows.append(dict(w.split("=", 1) for w in line.split() if "=" in w))
        return rows

    def wait(self, *jobs: str, seconds: float = 120.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            states = [t["JobState"] for j in jobs for t in self.jobs(j)]
            if states and all(s in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") for s in states):
                return
            time.sleep(0.3)
        pytest.fail(f"jobs {jobs} not done after {seconds} s: "
                    f"{[(t['JobId'], t['JobState']) for j in jobs for t in self.jobs(j)]}")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A real single-node cluster for the session; stopped in the end, whatever happens."""
    folder = tmp_path_factory.mktemp("slurm-cluster")
    started = subprocess.run([str(LOCAL_CLUSTER), "start", str(folder)], capture_output=True, text=True,
                             timeout=60)
    try:
        assert started.returncode == 0, started.stderr
        yield Cluster(folder)
    finally:
        subprocess.run([str(LOCAL_CLUSTER), "stop", str(folder)], capture_output=True, timeout=60)
        # the daemons name the folder in their command line, every job in its environment
        assert _wait_until_gone(str(folder)) == [], "the cluster left processes running"


@pytest.fixture(scope="module")
def reference(fake_loom_opt, tmp_path_factory) -> dict:
    """One `loomfuzz enumerate --run` over the slice, in one process: its finding files and
    outcomes, read from its folder and journal."""
    folder = tmp_path_factory.mktemp("reference") / "findings"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "enumerate", "--run", *SLICE, "--loom-opt", fake_loom_opt,
         *TARGET, "--artifacts", str(folder), "--no-progress"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 1, proc.stderr  # 1: findings
    return _read_shards([folder])


def _read_shards(folders: list[Path]) -> dict:
    """Finding names and outcome counts of sweep folders, from the files themselves."""
    names: set[str] = set()
    outcomes: Counter = Counter()
    for folder in folders:
        names |= {p.stem for p in folder.glob("crash-*.mlir")}
        for journal in folder.glob("sweep-*.jsonl"):
            for line in journal.read_text().splitlines()[1:]:
                outcomes.update(json.loads(line)["outcomes"])
    return {"names": names, "outcomes": outcomes}


def _sweep_args(fake: str) -> list[str]:
    return ["--cpus-per-task=1", "--mem=1G", str(SLURM / "sweep.sbatch"), "--loom-opt", fake, *TARGET, *SLICE]


# -------------------------------------------------------------------- tests


def test_sweep_array_and_its_triage_find_what_one_process_finds(cluster, reference, fake_loom_opt, tmp_path):
    out = cluster.run([SLURM / "submit.sh", "sweep", "--array=0-3", "--cpus-per-task=1", "--mem=1G", "--",
                       "--loom-opt", fake_loom_opt, *TARGET, "--", *SLICE], tmp_path).stdout
    ids = dict(w.split("=") for w in out.split())
    cluster.wait(ids["array"], ids["triage"])
    tasks = cluster.jobs(ids["array"])
    assert sorted(int(t["ArrayTaskId"]) for t in tasks) == [0, 1, 2, 3]
    shards = [tmp_path / "sweep" / f"shard-{k}" for k in range(4)]
    got = _read_shards(shards)
    assert reference["names"] and got["names"] == reference["names"]
    assert got["outcomes"] == reference["outcomes"]
    assert sum(got["outcomes"].values()) == 4000

    (triage,) = cluster.jobs(ids["triage"])
    assert triage["JobState"] == "COMPLETED", (tmp_path / f"triage-{ids['triage']}.log").read_text()
    summary = json.loads((tmp_path / "sweep" / "merged" / "summary.json").read_text())
    assert summary["findings"] == len(reference["names"])
    assert Counter(summary["outcomes"]) == reference["outcomes"]
    assert [s["missing"] for s in summary["sweeps"].values()] == [0]
    report = json.loads((tmp_path / "sweep" / "merged" / "triage" / "report.json").read_text())
    assert report["totals"]["members"] == len(reference["names"])
    assert len(report["buckets"]) == 1 and "SIGSEGV" in report["buckets"][0]["signature"]
    assert (tmp_path / "sweep" / "merged" / "triage" / "report.md").exists()


def _journal_lines(folder: Path) -> int:
    journals = list(folder.glob("sweep-*.jsonl"))
    return len(journals[0].read_text().splitlines()) if journals else 0


def _resumed(log: str) -> int:
    """How many programs the summary at the end of a task's log says were done before."""
    return int(log.split(" run now, ")[1].split(" done before")[0].replace(",", ""))


def test_cancelled_and_requeued_tasks_resume_and_leave_nothing_behind(cluster, reference, fake_loom_opt,
                                                                      tmp_path):
    # small batches: the tasks are stopped between journal lines, many times a second; each
    # target process starts 30 ms later (same outcomes), so that on an idle machine a task is
    # still running when it is cancelled (without it a 1,000-program shard can end first)
    slow = tmp_path / "slow-fake-loom-opt"
    slow.write_text(f'#!/bin/sh\nsleep 0.03\nexec "{fake_loom_opt}" "$@"\n')
    slow.chmod(0o755)
    submit = ["sbatch", "--parsable", "--array=0-3", "--export=ALL,SHARDS=4", *_sweep_args(str(slow)),
              "--batch-size", "4"]
    array = cluster.run(submit, tmp_path).stdout.strip()
    shards = [tmp_path / "sweep" / f"shard-{k}" for k in range(4)]
    deadline = time.monotonic() + 60
    # tasks 0 and 1 run first (one CPU each on a 2-CPU node)
    while min(_journal_lines(shards[0]), _journal_lines(shards[1])) < 6:
        if time.monotonic() > deadline:
            pytest.fail("tasks 0 and 1 journaled no batch within 60 s")
        time.sleep(0.05)
    (cancelled,) = cluster.jobs(f"{array}_0")
    (requeued,) = cluster.jobs(f"{array}_1")
    assert cancelled["JobState"] == requeued["JobState"] == "RUNNING"
    cluster.run(["scancel", f"{array}_0"], tmp_path)
    cluster.run(["scontrol", "requeue", f"{array}_1"], tmp_path)
    # Slurm holds a requeued job back for about 2 minutes once it is pending again: start it now
    while cluster.jobs(f"{array}_1")[0]["JobState"] != "PENDING":
        if time.monotonic() > deadline:
            pytest.fail("the requeued task is not pending again")
        time.sleep(0.1)
    cluster.run(["scontrol", "update", f"JobId={array}_1", "StartTime=now"], tmp_path)
    cluster.wait(f"{array}_0", seconds=30)
    assert cluster.jobs(f"{array}_0")[0]["JobState"] == "CANCELLED"
    # every process of the task (loomfuzz, its reaper, the targets) has the task's job id
    assert _wait_until_gone(f"SLURM_JOB_ID={cancelled['JobId']}\0") == []
    assert 1 < _journal_lines(shards[0]) < 1000 // 4

    again = cluster.run(["sbatch", "--parsable", "--array=0", "--export=ALL,SHARDS=4",
                         *_sweep_args(str(slow))], tmp_path).stdout.strip()
    cluster.wait(array, again)
    assert cluster.jobs(f"{array}_1")[0]["Restarts"] == "1"
    for log in (tmp_path / f"sweep-{again}_0.log", tmp_path / f"sweep-{array}_1.log"):
        assert 0 < _resumed(log.read_text()) < 1000, log.read_text()
    got = _read_shards(shards)
    assert got["names"] == reference["names"]
    assert got["outcomes"] == reference["outcomes"]  # each index journaled exactly once

    merged = cluster.run([sys.executable, "-m", "harness.cli", "merge", *(f"sweep/shard-{k}" for k in range(4)),
                          "--out", "merged"], tmp_path)
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["findings"] == len(reference["names"]), merged.stdout


def test_campaign_array_shares_its_corpus_and_triages_once(cluster, fake_loom_opt, tmp_path):
    # The corpus starts from one input (a zero byte: a small program without the crash), so
    # the crash (a memory region under scf.if) is found by fuzzing, not by the seeds.
    corpus = tmp_path / "campaign" / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "start").write_bytes(b"\0")
    out = cluster.run([SLURM / "submit.sh", "campaign", "--array=0-1", "--cpus-per-task=1", "--mem=2G", "--",
                       "--loom-opt", fake_loom_opt, *TARGET, "--", "--stats-interval", "1"], tmp_path,
                      CAMPAIGN_SECONDS=str(CAMPAIGN_SECONDS)).stdout
    ids = dict(w.split("=") for w in out.split())
    cluster.wait(ids["array"], ids["triage"], seconds=CAMPAIGN_SECONDS + 60)

    logs = {k: (tmp_path / f"campaign-{ids['array']}_{k}.log").read_text() for k in (0, 1)}
    for k in (0, 1):
        assert "loomfuzz fuzz: summary" in logs[k], logs[k][-2000:]
        # libFuzzer's lines are in the campaign's own log (ARTIFACTS/fuzz.log), not the job's
        fuzz_log = "".join(p.read_text(errors="replace")
                           for p in (tmp_path / "campaign" / f"shard-{k}").rglob("fuzz.log"))
        assert re.search(r"\sNEW\s", fuzz_log), f"worker {k} added nothing to the corpus:\n{logs[k][-2000:]}"
    assert len(list(corpus.iterdir())) > 1

    summary = json.loads((tmp_path / "campaign" / "merged" / "summary.json").read_text())
    workers = {Path(s["folder"]).name: s for s in summary["shards"]}
    assert sorted(workers) == ["shard-0", "shard-1"]
    for shard in workers.values():  # each worker's stats.csv files: it ran, and found the crash
        assert shard["kind"] == "campaign" and shard["runs"] >= 1 and shard["executions"] > 0
        assert shard["findings"] >= 1
    assert summary["findings_by_kind"] == {"crash": summary["findings"]}

    report = json.loads((tmp_path / "campaign" / "merged" / "triage" / "report.json").read_text())
    assert len(report["buckets"]) == 1, [b["signature"] for b in report["buckets"]]
    assert "SIGSEGV" in report["buckets"][0]["signature"]
    # one member per distinct program, however many workers found it
    assert report["totals"]["members"] == summary["findings"]


def test_start_twice_is_refused_and_the_running_cluster_kept(cluster, tmp_path):
    daemons = _processes_with(str(cluster.folder))
    proc = subprocess.run([str(LOCAL_CLUSTER), "start", str(cluster.folder)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "already running" in line and str(cluster.folder) in line
    assert _processes_with(str(cluster.folder)) == daemons
    status = subprocess.run([str(LOCAL_CLUSTER), "status", str(cluster.folder)], capture_output=True, text=True)
    assert status.returncode == 0, status.stdout
    # the node answers (idle, or still finishing the jobs of an earlier test)
    assert re.search(r"^node \S+: \w+", status.stdout, re.M), status.stdout


def test_start_without_the_packages_is_one_line_and_starts_nothing(tmp_path):
    folder = tmp_path / "cluster"
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    proc = subprocess.run(["/bin/bash", str(LOCAL_CLUSTER), "start", str(folder)], capture_output=True,
                          text=True, env={"PATH": str(empty)}, timeout=60)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "slurmctld" in line and "munged" in line and "install" in line
    assert not folder.exists()
    assert _processes_with(str(folder)) == []
