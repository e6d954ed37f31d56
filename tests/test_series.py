"""``stats.csv``: the time series of real ``loomfuzz fuzz`` campaigns (issue 12).

Real campaigns of the planted-bug fake loom-opt under atheris/libFuzzer; the
series is read back with the same reader ``loomfuzz plot`` uses.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from harness.fuzzing.campaign_series import CampaignSeries
from harness.fuzzing.series import (
    COLUMNS,
    STATS_FILE,
    WORKER_COLUMNS,
    WORKERS_FILE,
    SeriesError,
    parse_rows,
    read_series,
    rotate_previous,
)
from harness.fuzzing.worker_series import WorkerSeries
from harness.run.outcome import FINDING_KINDS

from tests.test_fuzz import clean_env, corpus_sizes, executions, loomfuzz


def summary_findings(stdout: str) -> dict[str, int]:
    match = re.search(r"findings:\s+(\d+) \(([^)]*)\)", stdout)
    if not match:
        assert "findings:    none" in stdout, stdout
        return {}
    return {kind: int(n) for kind, n in re.findall(r"([\w-]+): (\d+)", match.group(2))}


def assert_monotone(rows: list[dict]) -> None:
    elapsed = [r["elapsed_s"] for r in rows]
    done = [r["executions"] for r in rows]
    assert all(a < b for a, b in zip(elapsed, elapsed[1:])), elapsed
    assert all(a <= b for a, b in zip(done, done[1:])), done
    findings = [r["findings"] for r in rows]
    assert all(a <= b for a, b in zip(findings, findings[1:])), findings


def assert_last_row_is_the_summary(rows: list[dict], stdout: str) -> None:
    last = rows[-1]
    assert last["final"] == 1 and all(r["final"] == 0 for r in rows[:-1])
    assert last["executions"] == executions(stdout)
    assert last["corpus"] == corpus_sizes(stdout)[1]
    kinds = summary_findings(stdout)
    assert last["findings"] == sum(kinds.values())
    for kind in FINDING_KINDS:
        assert last[f"findings_{kind}"] == kinds.get(kind, 0), kind


def test_stats_csv_of_a_short_campaign(fake_loom_opt, tmp_path):
    artifacts = tmp_path / "artifacts"
    result = loomfuzz("fuzz", "--loom-opt", fake_loom_opt, "--pass-args=--plant=none", "--time", 3,
                      "--seed", 1, "--stats-interval", 0.4, "--corpus", tmp_path / "corpus",
                      "--artifacts", artifacts, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    rows = read_series(artifacts / STATS_FILE)
    assert len(rows) >= 5, rows  # a row every 0.4 s of a 3 s campaign, and the last one
    assert set(rows[0]) == set(COLUMNS)
    assert_monotone(rows)
    assert_last_row_is_the_summary(rows, result.stdout)
    assert rows[-1]["executions"] > rows[len(rows) // 2]["executions"] > 0
    assert all(r["edges"] is None for r in rows)  # no bridge
    # the fuzz target's grammar_coverage: the share of k-path features its inputs have had
    coverage = [r["grammar_coverage"] for r in rows if r["grammar_coverage"] is not None]
    assert coverage and all(0 < c <= 1 for c in coverage) and coverage == sorted(coverage)
    running = [r["exec_per_s"] for r in rows[len(rows) // 2:]]
    assert sum(rate > 0 for rate in running) >= len(running) - 1, running  # past start-up, it runs
    # the one worker's own rows: same totals, its last row is its exit
    workers = read_series(artifacts / WORKERS_FILE)
    assert set(workers[0]) == set(WORKER_COLUMNS)
    assert {w["worker"] for w in workers} == {workers[0]["worker"]} and workers[0]["worker"].startswith("pid-")
    assert workers[-1]["final"] == 1 and workers[-1]["executions"] == rows[-1]["executions"]
    # piped: libFuzzer's lines go to the log, the status comes as plain lines (a few: not one a row)
    status = [line for line in result.stderr.splitlines() if line.startswith("loomfuzz fuzz: status: ")]
    assert 1 <= len(status) < len(rows) and "\r" not in result.stderr and "\x1b[" not in result.stderr
    assert re.search(r"#\d+\s+NEW\s+cov:", (artifacts / "fuzz.log").read_text())
    assert not re.search(r"#\d+\s+NEW\s+cov:", result.stderr)
    assert "findings 0  left 0s" in status[-1] and f"{rows[-1]['executions']:,} exec" in status[-1]


def test_stats_csv_counts_findings_by_kind(fake_loom_opt, tmp_path):
    """The seeded corpus reaches the planted assertion at once: the run stops at its first finding."""
    artifacts = tmp_path / "artifacts"
    result = loomfuzz("fuzz", "--loom-opt", fake_loom_opt, "--pass-args=--plant=assert", "--runs", 5000,
                      "--seed", 1, "--stats-interval", 0.3, "--corpus", tmp_path / "corpus",
                      "--artifacts", artifacts, cwd=tmp_path, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    rows = read_series(artifacts / STATS_FILE)
    assert_monotone(rows)
    assert_last_row_is_the_summary(rows, result.stdout)
    assert rows[-1]["findings_crash"] == 1
    workers = read_series(artifacts / WORKERS_FILE)
    assert workers[-1]["final"] == 1 and workers[-1]["findings_crash"] == 1


def test_fork_mode_keeps_each_workers_rows_and_merges_them(fake_loom_opt, tmp_path):
    artifacts = tmp_path / "artifacts"
    result = loomfuzz("fuzz", "--loom-opt", fake_loom_opt, "--pass-args=--plant=none", "--jobs", 2,
                      "--time", 4, "--seed", 2, "--stats-interval", 0.5, "--corpus", tmp_path / "corpus",
                      "--artifacts", artifacts, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    rows = read_series(artifacts / STATS_FILE)
    assert_monotone(rows)
    assert_last_row_is_the_summary(rows, result.stdout)
    workers = read_series(artifacts / WORKERS_FILE)
    jobs = {w["worker"] for w in workers if w["worker"].startswith("job-")}
    assert len(jobs) >= 2, {w["worker"] for w in workers}
    latest = {}
    for w in workers:  # each process counts its own executions, rising
        assert w["executions"] >= latest.get(w["worker"], 0)
        latest[w["worker"]] = w["executions"]
    # the merged total is the workers' sum (libFuzzer's own count misses the jobs it stops)
    assert rows[-1]["executions"] == sum(latest.values())
    assert max(r["workers"] for r in rows) >= 2


def test_a_killed_campaign_keeps_its_rows(fake_loom_opt, tmp_path):
    artifacts = tmp_path / "artifacts"
    command = [sys.executable, "-m", "harness.cli", "fuzz", "--loom-opt", fake_loom_opt,
               "--pass-args=--plant=none", "--time", "120", "--stats-interval", "0.3",
               "--corpus", str(tmp_path / "corpus"), "--artifacts", str(artifacts)]
    proc = subprocess.Popen(command, cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    stats = artifacts / STATS_FILE
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if stats.exists() and stats.read_text().count("\n") >= 5:  # header + 4 rows
                break
            time.sleep(0.2)
        else:
            pytest.fail("no stats rows within 90 s")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the campaign and its fuzz target, at once
        proc.wait()
    rows = read_series(stats)
    assert len(rows) >= 4
    assert_monotone(rows)
    assert all(r["final"] == 0 for r in rows)  # killed: no last row, every row before it kept
    # a row torn by the kill is dropped by the reader, the rows before it kept
    with open(stats, "a") as handle:
        handle.write("12.5,4711,300")
    assert read_series(stats) == rows


def test_reader_names_the_bad_line_and_tolerates_only_a_torn_last_line(tmp_path):
    header = ",".join(COLUMNS)
    good = ",".join("1" if c != "edges" else "" for c in COLUMNS)
    rows = parse_rows(f"{header}\n{good}\n{good}\n{good[:7]}", "s.csv")
    assert len(rows) == 2 and rows[0]["edges"] is None and rows[0]["executions"] == 1
    with pytest.raises(SeriesError, match=r"^s\.csv:3: 3 fields, the header has"):
        parse_rows(f"{header}\n{good}\n1,2,3\n{good}\n", "s.csv")
    with pytest.raises(SeriesError, match=r"^s\.csv:2: column executions: not a number: 'many'"):
        parse_rows(f"{header}\n{good.replace('1,1', '1,many', 1)}\n", "s.csv")
    with pytest.raises(SeriesError, match=r"^s\.csv:1: not a loom-fuzz stats series"):
        parse_rows("a,b\n1,2\n", "s.csv")
    missing = tmp_path / "nope.csv"
    with pytest.raises(SeriesError, match=r"nope\.csv: cannot read: No such file"):
        read_series(missing)


def test_worker_series_hook_and_rotation(tmp_path):
    path = tmp_path / WORKERS_FILE
    series = WorkerSeries(path, "pid-1", interval=0.01)
    series.set("grammar_coverage", 0.25)
    with pytest.raises(KeyError):
        series.set("grammar_coverag", 1)
    series.record(10, 3)
    series.finding("wrong-output")
    series.close(20, 5)
    series.close(99, 9)  # every exit path calls it: written once
    rows = read_series(path)
    assert [(r["executions"], r["edges"], r["grammar_coverage"], r["final"]) for r in rows] == [
        (10, 3, 0.25, 0), (20, 5, 0.25, 1)]
    assert rows[-1]["findings_wrong-output"] == 1 and rows[-1]["findings"] == 1
    # a new campaign in the same folder moves the old series aside, nothing lost
    (tmp_path / STATS_FILE).write_text(",".join(COLUMNS) + "\n")
    moved = rotate_previous(tmp_path)
    assert sorted(p.name.split("-")[0] for p in moved) == ["stats", "stats"]
    assert not path.exists() and any(read_series(p) == rows for p in moved)


def test_campaign_series_merges_the_workers_rows(tmp_path):
    corpus_size = iter(range(10, 100))
    series = CampaignSeries(tmp_path, corpus_size=lambda: next(corpus_size), findings=lambda: {"crash": 1},
                            libfuzzer_executions=lambda: 7, interval=3600)
    first = series.sample()
    assert first.executions == 7 and first.workers == 0  # no worker row yet: libFuzzer's count
    a = WorkerSeries(series.workers_path, "job-1", 3600)
    b = WorkerSeries(series.workers_path, "job-2", 3600)
    a.set("grammar_coverage", 0.5)
    a.record(100, 40)
    b.record(30, 55)
    merged = series.sample()
    assert (merged.executions, merged.edges, merged.grammar_coverage, merged.workers) == (130, 55, 0.5, 2)
    a.close(150, 41)  # a job ends: its last figure stays in the total
    b.record(60, 56)
    merged = series.sample()
    assert (merged.executions, merged.edges, merged.workers) == (210, 56, 1)
    last = series.finish(executions=215, corpus=99, edges=56, findings={"crash": 2}, elapsed=12.0)
    assert last.final and last.executions == 215
    rows = read_series(tmp_path / STATS_FILE)
    assert [r["executions"] for r in rows] == [7, 130, 210, 215]
    assert [r["corpus"] for r in rows] == [10, 11, 12, 99] and rows[-1]["elapsed_s"] == 12
    assert [r["findings_crash"] for r in rows] == [1, 1, 1, 2] and [r["final"] for r in rows] == [0, 0, 0, 1]
