"""Sweeps (harness/fuzzing/sweep.py, journal.py) and `loomfuzz run`: shards cover
every index once, a sweep killed with SIGKILL resumes to the result of an
uninterrupted one, findings land where `loomfuzz triage` reads them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.fuzzing.journal import JournalError, SweepJournal
from harness.fuzzing.sweep import Shard, ShardError, parse_shard, run_sweep
from harness.run.runners import BatchRunner
from harness.targets.target import Target

ROOT = Path(__file__).resolve().parent.parent
PLANTS = "--pass-args=--loom-lower-for-to-graph --plant=assert,segv,fatal,wrong-output"


def _journal_lines(folder: Path) -> list[dict]:
    (journal,) = folder.glob("sweep-*.jsonl")
    return [json.loads(line) for line in journal.read_text().splitlines()]


def _ranges(folder: Path) -> list[tuple[int, int]]:
    return [tuple(rec["done"]) for rec in _journal_lines(folder)[1:]]


def _findings(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.glob("crash-*.mlir")}


def _loomfuzz(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, **kwargs)


# ------------------------------------------------------------------ shards


@pytest.mark.parametrize("n", [1, 3, 7])
def test_shards_cover_every_index_once(n):
    for start, count in ((0, 100), (5, 20), (3, 5), (0, 854_700)):
        seen = [i for k in range(n) for i in Shard(k, n).part(start, count)]
        assert sorted(seen) == list(range(start, start + count))
        assert len(seen) == len(set(seen))


@pytest.mark.parametrize("n", [1, 3, 7])
def test_sharded_sweeps_run_every_index_once(fake_loom_opt, tmp_path, n):
    """Real sweeps, one per shard into one shared folder: their journals together
    hold every index of the range exactly once."""
    texts = [f"// program {i}\n" for i in range(23)]  # no site: the fake accepts each
    target = Target("loom-opt", (fake_loom_opt,))
    for k in range(n):
        with BatchRunner(target) as runner:
            result = run_sweep(len(texts) - 2, texts.__getitem__, runner, tmp_path, source="t", suffix=".mlir",
                               start=2, shard=Shard(k, n), progress=False)
        assert result.complete
    done = []
    for journal in tmp_path.glob("sweep-*.jsonl"):
        for line in journal.read_text().splitlines()[1:]:
            lo, hi = json.loads(line)["done"]
            done.extend(range(lo, hi))
    assert sorted(done) == list(range(2, 23))
    assert len(list(tmp_path.glob("sweep-*.jsonl"))) == n


def test_shard_from_the_environment():
    assert parse_shard("2/7", {}) == Shard(2, 7)
    assert parse_shard("auto/8", {"JOB_COMPLETION_INDEX": "5"}) == Shard(5, 8)
    assert parse_shard("auto/8", {"SLURM_ARRAY_TASK_ID": "7"}) == Shard(7, 8)
    assert parse_shard("auto/8", {"JOB_COMPLETION_INDEX": "1", "SLURM_ARRAY_TASK_ID": "3"}) == Shard(1, 8)
    for bad, env, says in (("auto/4", {}, "JOB_COMPLETION_INDEX"), ("4/4", {}, "from 0 to 3"),
                           ("auto/4", {"SLURM_ARRAY_TASK_ID": "4"}, "from SLURM_ARRAY_TASK_ID"),
                           ("1", {}, "K/N"), ("x/3", {}, "whole number"), ("0/0", {}, "1 or more")):
        with pytest.raises(ShardError, match=says):
            parse_shard(bad, env)


# ----------------------------------------------------------------- journal


def test_journal_drops_a_torn_last_line_and_refuses_overlaps(tmp_path):
    identity = {"source": "t", "range": [0, 10]}
    j = SweepJournal.open(tmp_path, identity)
    j.record(0, 4, {"accepted": 4}, [], 1, 0.1)
    with open(j.path, "ab") as f:
        f.write(b'{"done": [4, 8], "outc')  # killed in the middle of a write
    again = SweepJournal.open(tmp_path, identity)
    assert again.done == [(0, 4)] and again.remaining(0, 10) == [(4, 10)]
    assert j.path.read_bytes().endswith(b"}\n")
    again.record(6, 8, {"accepted": 2}, [], 1, 0.1)
    assert SweepJournal.open(tmp_path, identity).remaining(0, 10) == [(4, 6), (8, 10)]
    with open(j.path, "a") as f:
        f.write(json.dumps({"done": [3, 5]}) + "\n")
    with pytest.raises(JournalError, match=r"sweep-\w+\.jsonl:4: \[3, 5\) overlaps \[0, 4\)"):
        SweepJournal.open(tmp_path, identity)


# ------------------------------------------------------------------ resume


def _wait_for_batches(folder: Path, proc: subprocess.Popen, batches: int, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        journals = list(folder.glob("sweep-*.jsonl"))
        if journals and journals[0].read_text().count("\n") > batches:
            return
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended before it was killed:\n{proc.stderr.read()}")
        time.sleep(0.01)
    pytest.fail("the sweep journaled nothing in time")


def test_a_stop_right_after_a_batch_is_journaled_journals_it_once(fake_loom_opt, tmp_path, monkeypatch):
    """A stop signal raises Interrupted between any two statements; one raised just after a
    batch's journal line is written (found under Slurm: scancel, then the task submitted again
    refused its journal, "[24, 28) overlaps [24, 28) done before") must not make the
    interrupted sweep journal that batch a second time.  The resumed sweep then runs the
    rest, and the journal holds every index exactly once."""
    texts = [f"// program {i}\n" for i in range(12)]
    target = Target("loom-opt", (fake_loom_opt,))
    real_record, calls = SweepJournal.record, []

    def record_then_stop(self, *args, **kwargs):
        real_record(self, *args, **kwargs)
        calls.append(args[:2])
        if len(calls) == 2:
            raise KeyboardInterrupt  # what the stop handler raises, at the worst moment

    monkeypatch.setattr(SweepJournal, "record", record_then_stop)
    with BatchRunner(target, batch_size=3) as runner:
        stopped = run_sweep(len(texts), texts.__getitem__, runner, tmp_path, source="t", suffix=".mlir",
                            progress=False)
    assert stopped.interrupted and not stopped.complete
    assert _ranges(tmp_path) == [(0, 3), (3, 6)]
    monkeypatch.setattr(SweepJournal, "record", real_record)
    with BatchRunner(target, batch_size=3) as runner:
        resumed = run_sweep(len(texts), texts.__getitem__, runner, tmp_path, source="t", suffix=".mlir",
                            progress=False)
    assert resumed.complete and resumed.resumed == 6
    done = [i for lo, hi in _ranges(tmp_path) for i in range(lo, hi)]
    assert sorted(done) == list(range(12)) and len(done) == len(set(done))


def test_a_sweep_killed_with_sigkill_resumes_to_the_uninterrupted_result(fake_loom_opt, tmp_path):
    args = ["run", "-n", "400", "--seed", "3", "--loom-opt", fake_loom_opt, PLANTS,
            "--batch-size", "8", "--no-progress"]
    whole = _loomfuzz(*args, "--artifacts", str(tmp_path / "whole"))
    assert whole.returncode == 1, whole.stderr  # the planted bugs are found
    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args, "--artifacts", str(killed)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        _wait_for_batches(killed, proc, 6)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the harness and the target under way
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    before = _ranges(killed)
    assert 6 <= len(before) < 50, "killed mid-sweep"
    resumed = _loomfuzz(*args, "--artifacts", str(killed))
    assert resumed.returncode == 1, resumed.stderr
    done_before = sum(hi - lo for lo, hi in before)
    assert f"{400 - done_before} run now, {done_before} done before" in resumed.stdout

    # every index exactly once in the journal, the same outcomes and findings as uninterrupted
    ranges = sorted(_ranges(killed))
    covered = [i for lo, hi in ranges for i in range(lo, hi)]
    assert covered == list(range(400))
    lines_whole, lines_killed = _journal_lines(tmp_path / "whole"), _journal_lines(killed)
    outcomes = lambda lines: {k: sum(r["outcomes"].get(k, 0) for r in lines[1:])  # noqa: E731
                              for k in ("accepted", "rejected", "crash")}
    assert outcomes(lines_killed) == outcomes(lines_whole)
    assert sum(outcomes(lines_whole).values()) == 400
    by_index = lambda lines: sorted((f["index"], f["name"], f["kind"])  # noqa: E731
                                    for r in lines[1:] for f in r["findings"])
    assert by_index(lines_killed) == by_index(lines_whole) and by_index(lines_whole)
    assert _findings(killed) == _findings(tmp_path / "whole")
    # one file per distinct program (the generator repeats some programs at other indices)
    assert set(_findings(killed)) == {f"{name}.mlir" for _, name, _ in by_index(lines_whole)}


def test_the_same_command_again_runs_nothing(fake_loom_opt, tmp_path):
    args = ["run", "-n", "30", "--loom-opt", fake_loom_opt, "--no-progress", "--artifacts", str(tmp_path)]
    first = _loomfuzz(*args)
    second = _loomfuzz(*args)
    assert "30 run now, 0 done before" in first.stdout
    assert "0 run now, 30 done before" in second.stdout
    assert first.returncode == second.returncode
    other = _loomfuzz(*args[:2], "31", *args[3:])  # another sweep: its own journal, same folder
    assert "31 run now" in other.stdout and len(list(tmp_path.glob("sweep-*.jsonl"))) == 2


# -------------------------------------------------------------- loomfuzz run


def test_run_reads_files_streams_and_stdin_and_triage_reads_its_findings(fake_loom_opt, tmp_path):
    from harness.triage.inputs import collect_inputs

    stream = _loomfuzz("generate", "-n", "40", "--seed", "9").stdout
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "stream.mlir").write_text(stream)
    single = stream.split("// -----\n")[0]
    (tmp_path / "one.mlir").write_text(single)
    art = tmp_path / "art"
    files = _loomfuzz("run", str(tmp_path / "in"), str(tmp_path / "one.mlir"), "--loom-opt", fake_loom_opt,
                      PLANTS, "--no-progress", "--artifacts", str(art))
    assert "41 (indices 0-40)" in files.stdout, files.stderr
    from_stdin = _loomfuzz("run", "-", "--loom-opt", fake_loom_opt, PLANTS, "--no-progress",
                           "--artifacts", str(tmp_path / "art2"), input=stream)
    assert "40 (indices 0-39)" in from_stdin.stdout
    assert files.returncode == from_stdin.returncode == 1
    assert _findings(tmp_path / "art2") and set(_findings(tmp_path / "art2")) <= set(_findings(art))

    records = [f for rec in _journal_lines(art)[1:] for f in rec["findings"]]
    assert {f["origin"] for f in records} <= {f"{tmp_path / 'in' / 'stream.mlir'}#{k}" for k in range(1, 41)} | {
        str(tmp_path / "one.mlir")}
    for f in records:
        sidecar = json.loads((art / f"{f['name']}.json").read_text())
        assert sidecar["finding"] is True and sidecar["finding_kind"] == f["kind"]
    collected = collect_inputs([str(art)])
    assert sorted(Path(i.path).name for i in collected.inputs) == sorted(_findings(art))


def test_run_rejects_bad_input_with_one_line(fake_loom_opt, tmp_path):
    empty = tmp_path / "empty.mlir"
    empty.write_text("\n")
    for args, says in (([str(tmp_path / "nope.mlir")], "nope.mlir: no such file or folder"),
                       ([str(empty)], "empty.mlir: no program in it"),
                       ([str(empty), "-n", "3"], "not both"),
                       (["--shard", "auto/3"], "JOB_COMPLETION_INDEX")):
        proc = _loomfuzz("run", *args, "--loom-opt", fake_loom_opt, "--artifacts", str(tmp_path / "a"))
        assert proc.returncode == 1
        assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr


def test_generator_source_gives_generates_programs_at_any_index():
    """Random access (forwards, skipping, backwards) gives `loomfuzz generate`'s programs."""
    from harness.core.grammar import default_grammar
    from harness.fuzzing.sources import from_generator, split_stream

    stream = _loomfuzz("generate", "-n", "50", "--seed", "4", "--render", "oracle").stdout
    expected = split_stream(stream)
    source = from_generator(default_grammar(), "fast", 4, 50, "oracle")
    assert source.count == 50
    for index in (0, 1, 7, 8, 30, 3, 49, 0):
        assert source.program_at(index) == expected[index], index
