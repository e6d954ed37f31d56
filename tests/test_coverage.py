"""The AFL++ coverage bridge (harness/run/coverage.py; its map: harness/run/afl_map.py),
its clean-up, and the ClusterFuzzLite / PyInstaller bundling (issue 5).

Real processes throughout: tests/fixtures/deep_bug.c built with
``afl-clang-fast`` (CI installs Debian's afl++ and afl++-clang), real System V
shared memory, real atheris runs of fuzz_targets/loom_opt_fuzzer.py, and a
real PyInstaller build through .clusterfuzzlite/build.sh.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness.run.afl_map as afl_map
import harness.run.coverage as coverage
from harness.fuzzing.options import CoverageKind, FuzzOptions, write_options
from harness.fuzzing.worker_summary import WorkerSummary, read_summaries
from harness.run.outcome import OutcomeKind
from harness.run.process import run_program
from harness.targets.target import Target
from shapes import Body, Nesting, Program, Thread, decode_program, encode_program, from_shape, make_site
from shapes import render_program as render

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
DEEP_BUG = FIXTURES / "deep_bug.c"
FAKE_SOURCE = FIXTURES / "fake_loom_opt.c"
FUZZ_TARGET = ROOT / "fuzz_targets" / "loom_opt_fuzzer.py"
BUILD_SH = ROOT / ".clusterfuzzlite" / "build.sh"
PYTHON = sys.executable

#: t0[icall; for:loop, if:freeze] t1[call/llvm]: the deep bug (see deep_bug.c)
DEEP_BUG_INPUT = encode_program(from_shape("t0[icall; for:loop, if:freeze] t1[call/llvm]"))


def program_text(data: bytes) -> str:
    return render(decode_program(data))

# The deep-bug hunt: a fixed libFuzzer seed (runs are deterministic for a
# seed) and the budget both runs get.  Measured here with the current mutator
# (benchmarks/bench_coverage.py --seeds 1,2,3,4,5 --cap 40000): with the bridge
# 3,150 / 2,343 / 15,649 / 7,065 / 19,783 runs; without it >40,000 but for
# seed 3 (18,592).  Seed 2: 2,343 vs >40,000, so the budget leaves a wide margin
# on both sides.  A change to the mutator's draws deals every seed anew (seed 3
# took 3,594 with the previous one): measure again and pick from the table.
HUNT_SEEDS = (2,)
HUNT_RUNS = 12000


# ----------------------------------------------------------------- helpers


def _quiet_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["AFL_QUIET"] = "1"
    env.update(extra)
    return env


def _compile(tmp_path_factory, compiler: str, source: Path, name: str) -> str:
    path = shutil.which(compiler)
    if not path:
        pytest.fail(f"{compiler} not found: apt-get install -y afl++ afl++-clang (CI installs them)")
    out = tmp_path_factory.mktemp("bin") / name
    proc = subprocess.run(
        [path, "-O1", "-o", str(out), str(source)],
        capture_output=True,
        text=True,
        env=_quiet_env(),
    )
    if proc.returncode != 0:
        pytest.fail(f"{compiler} failed on {source}:\n{proc.stderr}")
    return str(out)


def segments() -> dict[int, dict[str, int]]:
    """shm id -> row of /proc/sysvipc/shm."""
    rows = {}
    with open("/proc/sysvipc/shm", encoding="ascii") as f:
        header = f.readline().split()
        for line in f:
            row = dict(zip(header, (int(v) for v in line.split())))
            rows[row["shmid"]] = row
    return rows


def wait_gone(shm_ids, timeout: float = 15.0) -> set[int]:
    """The ids among ``shm_ids`` still present after waiting up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        left = set(shm_ids) & set(segments())
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def read_log(path: Path) -> list[dict[str, int]]:
    """The LOOMFUZZ_COVERAGE_LOG lines: one per bridge opened."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        out.append({k: int(v) for k, v in (kv.split("=") for kv in line.split())})
    return out


def wait_for(predicate, timeout: float, what: str, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    out = ""
    if proc is not None and hasattr(proc, "output_path"):
        out = output_of(proc)[-3000:]
    pytest.fail(f"timed out waiting for {what}\n{out}")


def kill_group(proc: subprocess.Popen) -> None:
    """Stop a process this test started (its own session) and its group."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def options_file(path: Path, **fields) -> str:
    """``--options=PATH``, PATH holding ``FuzzOptions(**fields)`` (a hand-run target);
    the target's summary record goes to ``summary_of(artifacts)``."""
    if fields.get("artifacts") is not None:
        fields.setdefault("summary", summary_of(fields["artifacts"]))
    write_options(FuzzOptions(**fields), path)
    return f"--options={path}"


def summary_of(artifacts: Path) -> Path:
    return artifacts.parent / f"{artifacts.name}-summary.jsonl"


def fuzz_command(binary: str, artifacts: Path, *flags: str, coverage_kind: str = "afl") -> list[str]:
    artifacts.parent.mkdir(parents=True, exist_ok=True)
    option = options_file(artifacts.parent / f"{artifacts.name}-options.json", target="loom-opt",
                          binary=binary, coverage=CoverageKind(coverage_kind), artifacts=artifacts)
    return [PYTHON, str(FUZZ_TARGET), option, *flags]


def fuzz_env(log: Path) -> dict[str, str]:
    """The environment of a fuzz run: bridges log to ``log``; this Python first
    on PATH (libFuzzer's fork mode re-executes the script via its shebang)."""
    env = _quiet_env(**{coverage.LOG_ENV: str(log)})
    for name in list(env):
        if name.startswith("LOOMFUZZ_") and name != coverage.LOG_ENV:
            del env[name]  # options exported by another fuzz run of this session
    env["PATH"] = os.pathsep.join([str(Path(PYTHON).parent), env.get("PATH", "")])
    return env


def start_fuzz(cmd: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    """Start a fuzz run in its own session; its output goes to LOG.out."""
    env = fuzz_env(log)
    with open(f"{log}.out", "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    proc.output_path = Path(f"{log}.out")
    return proc


def output_of(proc: subprocess.Popen) -> str:
    return proc.output_path.read_text(errors="replace")


def ctrl_c(proc: subprocess.Popen) -> None:
    """What Ctrl-C in a terminal does: SIGINT to the whole foreground group."""
    os.killpg(proc.pid, signal.SIGINT)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def deep_bug_afl(tmp_path_factory) -> str:
    return _compile(tmp_path_factory, "afl-clang-fast", DEEP_BUG, "deep-bug-afl")


@pytest.fixture(scope="module")
def deep_bug_cc(tmp_path_factory) -> str:
    return _compile(tmp_path_factory, os.environ.get("CC") or "cc", DEEP_BUG, "deep-bug-cc")


@pytest.fixture(scope="module")
def fake_afl(tmp_path_factory) -> str:
    """fake_loom_opt.c with AFL++ instrumentation (planted bugs: --plant=...)."""
    return _compile(tmp_path_factory, "afl-clang-fast", FAKE_SOURCE, "fake-loom-opt-afl")


@pytest.fixture()
def bridge(deep_bug_afl):
    b = coverage.open_bridge("afl", deep_bug_afl)
    yield b
    b.close()


def program(*threads) -> str:
    return render(Program(tuple(Thread(icall, tuple(make_site(*s) for s in sites))
                                for icall, sites in threads)))


PROGRAM_A = program((False, [(Nesting.NONE, Body.ARITH)]))
PROGRAM_B = program((True, [(Nesting.FOR, Body.LOOP), (Nesting.IF, Body.FREEZE)]),
                    (False, [(Nesting.NONE, Body.MEMORY)]))


def run_with(bridge: coverage.CoverageBridge, binary: str, text: str):
    target = Target(name="loom-opt", argv=(binary,), env={**bridge.env})
    bridge.start_run()
    outcome = run_program(target, text)
    features = bridge.finish_run()
    return outcome, features, bridge.last_hits()


# ------------------------------------------------------------- the bridge


def test_bucket_classes_are_afl_s():
    expected = {1: 0, 2: 1, 3: 2, 4: 3, 7: 3, 8: 4, 15: 4, 16: 5, 31: 5, 32: 6, 127: 6,
                128: 7, 255: 7}
    assert {h: coverage.bucket_of(h) for h in expected} == expected


def test_map_size_follows_the_binary(deep_bug_afl, deep_bug_cc):
    edges = afl_map.probe_map_size(deep_bug_afl)
    assert edges is not None and 40 <= edges <= 4096
    assert afl_map.probe_map_size(deep_bug_cc) is None
    with coverage.open_bridge("afl", deep_bug_afl) as b:
        assert b.map_size % 64 == 0 and edges <= b.map_size < edges + 64
        assert b.env == {"__AFL_SHM_ID": str(b.shm_id), "AFL_MAP_SIZE": str(b.map_size)}
        assert b.direct and b.counters >= 8 * b.map_size
        assert segments()[b.shm_id]["size"] == b.map_size
    with coverage.open_bridge("afl", deep_bug_afl, map_size=5000) as b:
        assert b.map_size == 5056  # enlarged, never shrunk; multiple of 64


def test_unavailable_is_one_clear_line(deep_bug_cc, deep_bug_afl, monkeypatch, tmp_path):
    with pytest.raises(afl_map.CoverageUnavailable, match="no AFL.. coverage map.*afl-clang-fast"):
        coverage.open_bridge("afl", deep_bug_cc)
    with pytest.raises(afl_map.CoverageUnavailable, match="does not exist"):
        coverage.open_bridge("afl", str(tmp_path / "missing"))
    with pytest.raises(afl_map.CoverageUnavailable, match="unknown coverage kind 'llvm'"):
        coverage.open_bridge("llvm", deep_bug_afl)
    import atheris

    monkeypatch.delattr(atheris, "_reserve_counter")
    with pytest.raises(afl_map.CoverageUnavailable, match="_reserve_counter.*atheris 3.0.0") as info:
        coverage.open_bridge("afl", deep_bug_afl)
    assert "\n" not in str(info.value)


def test_atheris_pin_has_the_counter_api():
    import atheris

    assert callable(atheris._reserve_counter) and callable(atheris._trace_branch)
    first = atheris._reserve_counter()
    assert atheris._reserve_counter() == first + 1


def test_distinct_edges_for_different_programs_same_for_same(bridge, deep_bug_afl):
    out_a, n_a, hits_a = run_with(bridge, deep_bug_afl, PROGRAM_A)
    seen_after_a = bridge.edges_seen
    out_b, n_b, hits_b = run_with(bridge, deep_bug_afl, PROGRAM_B)
    seen_after_b = bridge.edges_seen
    out_a2, n_a2, hits_a2 = run_with(bridge, deep_bug_afl, PROGRAM_A)
    assert out_a.kind == out_b.kind == OutcomeKind.ACCEPTED, (out_a.reason, out_b.reason)
    assert n_a == len(hits_a) > 10 and n_b == len(hits_b)
    # the same program lights exactly the same edges with the same counts
    assert hits_a2 == hits_a and n_a2 == n_a
    # a different shape lights different edges
    assert set(hits_b) - set(hits_a) and hits_b != hits_a
    assert seen_after_a == len(hits_a)
    assert seen_after_b == len(set(hits_a) | set(hits_b)) > seen_after_a
    assert bridge.edges_seen == seen_after_b  # nothing new the second time


def test_deeper_partial_matches_light_more_edges(bridge, deep_bug_afl):
    """Each level of the deep bug's ladder is a new edge (the fixture's point)."""
    seen = []
    for k in range(1, len(DEEP_BUG_INPUT)):
        _, _, hits = run_with(bridge, deep_bug_afl, program_text(DEEP_BUG_INPUT[:k]))
        seen.append(frozenset(hits))
    outcome, _, hits = run_with(bridge, deep_bug_afl, program_text(DEEP_BUG_INPUT))
    assert outcome.kind == OutcomeKind.CRASH and "Assertion" in outcome.reason
    assert hits  # an abort still leaves the map written
    growing = [s for s in seen if not s <= frozenset().union(*seen[: seen.index(s)])]
    assert len(growing) >= 6


def test_map_is_zeroed_between_runs(bridge, deep_bug_afl):
    _, _, hits_b = run_with(bridge, deep_bug_afl, PROGRAM_B)
    assert ctypes.string_at(bridge.segment.addr, bridge.map_size) == bytes(bridge.map_size)
    _, _, hits_a = run_with(bridge, deep_bug_afl, PROGRAM_A)
    with coverage.open_bridge("afl", deep_bug_afl) as fresh:
        _, _, fresh_a = run_with(fresh, deep_bug_afl, PROGRAM_A)
    assert hits_a == fresh_a
    # a run that was never finished (an exception in between) is wiped whole
    bridge.start_run()
    ctypes.memset(bridge.segment.addr, 7, bridge.map_size)  # the target wrote, nobody read
    bridge.start_run()
    assert ctypes.string_at(bridge.segment.addr, bridge.map_size) == bytes(bridge.map_size)
    bridge.finish_run()


@pytest.mark.parametrize("max_counters", [coverage.DEFAULT_MAX_COUNTERS, 64])
def test_features_go_to_atheris_counters(deep_bug_afl, monkeypatch, max_counters):
    import atheris

    traced: list[int] = []
    with coverage.open_bridge("afl", deep_bug_afl, max_counters=max_counters) as b:
        monkeypatch.setattr(atheris, "_trace_branch", traced.append)  # looked up per run
        _, n, hits = run_with(b, deep_bug_afl, PROGRAM_B)
        assert len(traced) == n == len(hits)
        assert traced == b.feature_indices(hits)  # the vectorised path == the reference
        assert all(b.counter_base <= i < b.counter_base + b.counters for i in traced)
        if max_counters == 64:
            assert not b.direct and b.counters == 64 and len(set(traced)) <= 64
        else:
            assert b.direct and len(set(traced)) == len(traced)


def _time_finish_run(b: coverage.CoverageBridge, hits: int, rounds: int) -> float:
    import random

    rng = random.Random(hits)
    image = bytearray(b.map_size)
    for i in rng.sample(range(b.map_size), hits):
        image[i] = rng.randrange(1, 256)
    image = bytes(image)
    best = float("inf")
    for _ in range(rounds):
        b.start_run()
        ctypes.memmove(b.segment.addr, image, b.map_size)
        start = time.perf_counter()
        assert b.finish_run() == hits
        best = min(best, time.perf_counter() - start)
    return best


def test_finish_run_is_cheap_next_to_a_target_run(deep_bug_afl):
    """Reading a 64 KiB map costs a fraction of one (tiny) target run."""
    target = Target(name="loom-opt", argv=(deep_bug_afl,))
    spawn = min(run_program(target, PROGRAM_A).duration for _ in range(20))
    with coverage.open_bridge("afl", deep_bug_afl, map_size=65536) as b:
        assert b.map_size == 65536 and b.direct and b.counters == 1 << 19
        sparse = _time_finish_run(b, 300, 50)  # a small program's share of a 64K map
        dense = _time_finish_run(b, 3000, 20)
    assert sparse < spawn / 2, f"finish_run {sparse * 1e6:.0f} us vs a run {spawn * 1e6:.0f} us"
    assert dense < 20e-3, f"finish_run with 3000 hits: {dense * 1e6:.0f} us"


# --------------------------------------------------------------- clean-up


def _bridge_script(binary: str, *, early: bool = True, then: str = "sleep") -> list[str]:
    code = (
        "import sys, time, harness.run.coverage as c\n"
        f"b = c.open_bridge('afl', {binary!r}, early_removal={early})\n"
        "print(b.shm_id, flush=True)\n"
        + ("time.sleep(60)\n" if then == "sleep" else "")
    )
    return [PYTHON, "-c", code]


def test_no_segment_left_after_normal_exit(deep_bug_afl):
    with coverage.open_bridge("afl", deep_bug_afl) as b:
        assert b.shm_id in segments() and b.removed  # marked for removal at once
        shm_id = b.shm_id
    assert shm_id not in segments()
    proc = subprocess.run(_bridge_script(deep_bug_afl, then="exit"), capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert not wait_gone({int(proc.stdout)}, timeout=5)
    # fallback (late removal): the atexit handler removes it
    proc = subprocess.run(_bridge_script(deep_bug_afl, early=False, then="exit"),
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert not wait_gone({int(proc.stdout)}, timeout=5)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_segment_left_after_a_signal(deep_bug_afl, sig):
    proc = subprocess.Popen(_bridge_script(deep_bug_afl), stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, start_new_session=True)
    try:
        shm_id = int(proc.stdout.readline())
        assert shm_id in segments()
        proc.send_signal(sig)
        proc.wait(timeout=20)
    finally:
        kill_group(proc)
    assert not wait_gone({shm_id}, timeout=5)


def test_stale_segments_of_the_fallback_are_reaped(deep_bug_afl):
    """Without early removal a SIGKILL leaves the map behind (what early
    removal prevents); the next bridge removes it."""
    proc = subprocess.Popen(_bridge_script(deep_bug_afl, early=False), stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, start_new_session=True)
    try:
        shm_id = int(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)
    finally:
        kill_group(proc)
    row = segments().get(shm_id)
    assert row is not None and row["nattch"] == 0
    assert row["key"] & afl_map.KEY_MASK == afl_map.KEY_BASE
    assert shm_id in afl_map.reap_stale_segments()
    assert shm_id not in segments()


def _fuzz_and_stop(binary: str, tmp_path: Path, sig: int, *flags: str, workers: int = 1):
    """Start a fuzz run with the bridge, wait until its bridges have run the
    target, send ``sig`` to the main process, and return the bridges' log."""
    log = tmp_path / "coverage.log"
    artifacts = tmp_path / "artifacts"
    proc = start_fuzz(fuzz_command(binary, artifacts, "-seed=3", *flags), log, tmp_path)
    try:
        entries = wait_for(lambda: len(read_log(log)) >= workers and read_log(log), 60,
                           f"{workers} coverage bridge(s)", proc)
        ids = {e["shm_id"] for e in entries}
        # alive, used by the targets (lpid: the last process that attached)
        wait_for(lambda: all(segments().get(i, {}).get("lpid", 0) not in (0, e["pid"])
                             for e in entries for i in [e["shm_id"]]), 60,
                 "targets attaching the maps", proc)
        if sig == signal.SIGINT:
            ctrl_c(proc)
        else:
            proc.send_signal(sig)  # the harness only (its running target finishes alone)
        proc.wait(timeout=30)
    finally:
        kill_group(proc)
    return ids, read_log(log)


def test_no_segment_left_after_ctrl_c_of_a_fuzz_run(deep_bug_afl, tmp_path):
    ids, _ = _fuzz_and_stop(deep_bug_afl, tmp_path, signal.SIGINT, "-atheris_runs=1000000")
    assert ids and not wait_gone(ids)


def test_no_segment_left_after_the_harness_is_killed(deep_bug_afl, tmp_path):
    ids, _ = _fuzz_and_stop(deep_bug_afl, tmp_path, signal.SIGKILL, "-atheris_runs=1000000")
    assert ids and not wait_gone(ids)


def test_no_segment_left_after_a_killed_worker(deep_bug_afl, tmp_path):
    """Fork mode: every worker has its own map; SIGKILL a worker while it
    runs, then stop the parent with Ctrl-C: no map survives."""
    log = tmp_path / "coverage.log"
    proc = start_fuzz(fuzz_command(deep_bug_afl, tmp_path / "artifacts", "-seed=5", "-fork=2",
                                   "-ignore_crashes=1", "-runs=1000000"), log, tmp_path)
    try:
        # the fork-mode parent runs nothing and opens no bridge: workers only
        entries = wait_for(lambda: len(read_log(log)) >= 2 and read_log(log), 90,
                           "two workers' bridges", proc)
        assert proc.pid not in {e["pid"] for e in entries}
        assert len({e["pid"] for e in entries}) == len(entries)
        assert len({e["shm_id"] for e in entries}) == len(entries)  # one map each

        def kill_a_running_worker():
            for entry in reversed(read_log(log)):
                if entry["shm_id"] in segments():  # attached: its worker is alive
                    try:
                        os.kill(entry["pid"], signal.SIGKILL)
                        return entry
                    except ProcessLookupError:  # it just finished its job
                        continue
            return None

        victim = wait_for(kill_a_running_worker, 60, "a running worker to kill", proc)
        assert victim["pid"] != proc.pid
        # the parent goes on with new workers, each with a new map
        count = len(read_log(log))
        wait_for(lambda: len(read_log(log)) > count, 90, "a new worker", proc)
        ctrl_c(proc)
        proc.wait(timeout=30)
    finally:
        kill_group(proc)
    ids = {e["shm_id"] for e in read_log(log)}
    assert not wait_gone(ids)


# ------------------------------------------------------------ the deep bug


def _hunt(binary: str, tmp_path: Path, seed: int, runs: int, with_bridge: bool):
    artifacts = tmp_path / ("afl" if with_bridge else "none") / f"seed{seed}"
    cmd = fuzz_command(binary, artifacts, f"-seed={seed}", f"-atheris_runs={runs}",
                       coverage_kind="afl" if with_bridge else "none")
    return start_fuzz(cmd, tmp_path / f"log-{with_bridge}-{seed}", tmp_path), artifacts


def _record(artifacts: Path, output: str) -> WorkerSummary:
    """The summary record of the one fuzz target process that wrote into ``artifacts``."""
    records = read_summaries(summary_of(artifacts))
    assert len(records) == 1, output[-3000:]
    return records[0]


@pytest.mark.slow
@pytest.mark.parametrize("seed", HUNT_SEEDS)
def test_bridge_finds_the_deep_bug_and_blind_fuzzing_does_not(deep_bug_afl, tmp_path, seed):
    """Same instrumented binary, same seed, same budget: with --coverage afl
    the deep bug (P ~ 5.9e-6 per generated program) is found; without, not."""
    runs = {}
    procs = {flag: _hunt(deep_bug_afl, tmp_path, seed, HUNT_RUNS, flag) for flag in (True, False)}
    try:
        for flag, (proc, artifacts) in procs.items():
            proc.wait(timeout=600)
            out = output_of(proc)
            crashes = sorted(artifacts.glob("crash-*.json")) if artifacts.exists() else []
            found = [c for c in crashes
                     if "freeze of a carried value" in json.loads(c.read_text())["reason"]]
            runs[flag] = (_record(artifacts, out).executions, bool(found), proc.returncode)
    finally:
        for proc, _ in procs.values():
            kill_group(proc)
    with_bridge, without = runs[True], runs[False]
    assert with_bridge[1], f"bridge: not found in {with_bridge[0]} runs"
    assert with_bridge[0] < HUNT_RUNS
    assert not without[1], f"found without the bridge after {without[0]} runs"
    assert without[0] == HUNT_RUNS and without[2] == 0


# -------------------------------------------------------------- --jobs 2


def test_loomfuzz_fuzz_reports_the_edges_it_saw(deep_bug_afl, deep_bug_cc, tmp_path):
    # The README's check that the bridge sees coverage.
    command = [sys.executable, "-m", "harness.cli", "fuzz", "--loom-opt", deep_bug_afl, "--coverage", "afl",
               "--runs", "50", "--seed", "4"]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env=_quiet_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    edges = int(re.search(r"^  coverage:    (\d+) distinct AFL\+\+ edges seen$", proc.stdout, re.M).group(1))
    assert edges >= 30
    proc = subprocess.run([*command[:5], deep_bug_cc, *command[6:]], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env=_quiet_env())
    assert proc.returncode == 1 and "has no AFL++ coverage map" in proc.stderr


def test_jobs_2_collects_a_planted_crash_from_either_worker(fake_afl, tmp_path):
    log = tmp_path / "coverage.log"
    artifacts, corpus = tmp_path / "artifacts", tmp_path / "corpus"
    env = fuzz_env(log)
    proc = subprocess.run(
        [PYTHON, "-m", "harness.cli", "fuzz", "--loom-opt", fake_afl,
         "--pass-args=--plant=assert", "--coverage", "afl", "--jobs", "2", "--runs", "400", "--seed", "7",
         "--artifacts", str(artifacts), "--corpus", str(corpus)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]  # 1: findings
    entries = read_log(log)
    workers = {e["pid"]: e["shm_id"] for e in entries}
    assert len(workers) >= 2, entries  # at least two workers (the parent opens none)
    assert len(set(workers.values())) == len(workers)  # each its own map
    sidecars = [json.loads(p.read_text()) for p in artifacts.glob("crash-*.json")]
    assert sidecars, output[-3000:]
    assert all(s["outcome"] == "crash" and "Assertion" in s["reason"] for s in sidecars)
    assert re.search(r"\bfindings?\b.*\b[1-9]", output), output[-3000:]
    assert not wait_gone(set(workers.values()))


# ------------------------------------------------- ClusterFuzzLite / PyInstaller

SHIM = r"""#!/bin/bash -eu
# compile_python_fuzzer as OSS-Fuzz's base-builder-python runs it
# (infra/base-images/base-builder/compile_python_fuzzer), minus the coverage
# and introspector modes.  RECORD_ONLY=FILE: only note the arguments.
fuzzer_path=$1
shift 1
if [ -n "${RECORD_ONLY:-}" ]; then
  echo "$fuzzer_path $*" >> "$RECORD_ONLY"
  exit 0
fi
if [ -n "${ONLY_FUZZER:-}" ] && [ "$(basename -s .py $fuzzer_path)" != "$ONLY_FUZZER" ]; then
  exit 0
fi
fuzzer_basename=$(basename -s .py $fuzzer_path)
fuzzer_package=${fuzzer_basename}.pkg
PYFUZZ_WORKPATH=$SRC/pyfuzzworkdir/
FUZZ_WORKPATH=$PYFUZZ_WORKPATH/$fuzzer_basename
rm -rf $PYFUZZ_WORKPATH
mkdir $PYFUZZ_WORKPATH $FUZZ_WORKPATH
pyinstaller --distpath $OUT --workpath=$FUZZ_WORKPATH --specpath=$FUZZ_WORKPATH --onefile --name $fuzzer_package "$@" $fuzzer_path
chmod -x $OUT/$fuzzer_package
echo "#!/bin/sh
this_dir=\$(dirname \"\$0\")
chmod +x \$this_dir/$fuzzer_package
\$this_dir/$fuzzer_package \$@" > $OUT/$fuzzer_basename
chmod +x $OUT/$fuzzer_basename
"""


def _cfl_tree(tmp_path: Path, extra_target: str | None = None) -> tuple[Path, Path, dict]:
    """$SRC with the project at $SRC/loom-fuzz, $OUT, and PATH with the shim."""
    src, out, bin_dir = tmp_path / "src", tmp_path / "out", tmp_path / "shim"
    src.mkdir()
    out.mkdir()
    bin_dir.mkdir()
    if extra_target:
        project = src / "loom-fuzz"
        shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", "corpus", "artifacts"))
        (project / "fuzz_targets" / extra_target).write_text("print('new')\n")
    else:
        (src / "loom-fuzz").symlink_to(ROOT)
    shim = bin_dir / "compile_python_fuzzer"
    shim.write_text(SHIM)
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ)
    env.update(SRC=str(src), OUT=str(out),
               PATH=os.pathsep.join([str(bin_dir), str(Path(PYTHON).parent), env.get("PATH", "")]))
    return src, out, env


def test_clusterfuzzlite_files():
    cfl = ROOT / ".clusterfuzzlite"
    assert re.search(r"^language:\s*python\s*$", (cfl / "project.yaml").read_text(), re.M)
    docker = (cfl / "Dockerfile").read_text()
    assert re.search(r"^FROM gcr\.io/oss-fuzz-base/base-builder-python\b", docker, re.M)
    assert re.search(r"^COPY \. \$SRC/loom-fuzz", docker, re.M)
    assert re.search(r"^RUN .*pip3? install .*\.\s*$", docker, re.M)
    assert os.access(BUILD_SH, os.X_OK)


def test_build_sh_builds_every_fuzz_target(tmp_path):
    src, out, env = _cfl_tree(tmp_path, extra_target="brand_new_fuzzer.py")
    record = tmp_path / "calls"
    env["RECORD_ONLY"] = str(record)
    proc = subprocess.run(["bash", str(BUILD_SH)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    built = {Path(line.split()[0]).name for line in record.read_text().splitlines()}
    expected = {p.name for p in (ROOT / "fuzz_targets").glob("*_fuzzer.py")} | {"brand_new_fuzzer.py"}
    # program_fuzzer.py would fuzz the default grammar a second time in a bundle
    assert built == expected - {"program_fuzzer.py"} and "loom_opt_fuzzer.py" in built
    assert all("--exclude-module fuzzingbook" in line for line in record.read_text().splitlines())


def test_fuzz_target_start_up_never_imports_fuzzingbook(tmp_path, deep_bug_cc):
    """Import the fuzz target and run its main() up to its --help answer: the
    start-up imports (module level and option handling) stay light."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = [{str(FUZZ_TARGET)!r}, '--help']\n"
        "try:\n"
        "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fuzzingbook', 'IPython', 'isla', 'pandas', 'scipy', 'numpy') or m == 'harness.core.engine')\n"
        "print('LOADED', 'harness.core.codec' in sys.modules, 'HEAVY', heavy)\n"
    )
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED True HEAVY []" in proc.stdout, proc.stdout[-2000:]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """fuzz_targets/loom_opt_fuzzer.py bundled by build.sh + compile_python_fuzzer."""
    tmp = tmp_path_factory.mktemp("cfl")
    if shutil.which("pyinstaller", path=str(Path(PYTHON).parent)) is None:
        pytest.fail("pyinstaller not installed in this Python's environment (pip install -e .[test])")
    src, out, env = _cfl_tree(tmp)
    env["ONLY_FUZZER"] = "loom_opt_fuzzer"
    proc = subprocess.run(["bash", str(BUILD_SH)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    wrapper = out / "loom_opt_fuzzer"
    assert wrapper.exists() and (out / "loom_opt_fuzzer.pkg").exists()
    return wrapper


@pytest.mark.slow
def test_bundle_never_contains_fuzzingbook(bundle):
    listing = subprocess.run(
        [str(Path(PYTHON).parent / "pyi-archive_viewer"), "-r", "-b", str(bundle) + ".pkg"],
        capture_output=True, text=True,
    )
    assert listing.returncode == 0, listing.stderr
    modules = set(listing.stdout.split())
    assert {"harness.run.process", "harness.core.codec", "harness.run.coverage", "atheris"} <= modules
    assert "harness/targets/expectations_data/loom-opt.json" in modules
    assert not [m for m in modules if m.split(".")[0] in ("fuzzingbook", "IPython", "isla")]


@pytest.mark.slow
def test_bundle_runs_300_inputs_standalone(bundle, fake_loom_opt, mlir_opt, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LOOMFUZZ_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = "/usr/bin:/bin"  # no venv: the bundle brings its own Python
    started = time.monotonic()
    option = options_file(tmp_path / "a.json", binary=fake_loom_opt, pass_args=("--plant=none",),
                          artifacts=tmp_path / "a")
    proc = subprocess.run(
        [str(bundle), option, "-atheris_runs=300", "-seed=11"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = _record(tmp_path / "a", proc.stderr)
    assert record.executions == 300 and record.findings == {}
    assert "findings: 0" in proc.stderr
    assert time.monotonic() - started < 120
    # the oracle rendering through upstream mlir-opt-22, a few runs
    env["MLIR_OPT"] = mlir_opt
    option = options_file(tmp_path / "b.json", target="mlir-opt", artifacts=tmp_path / "b")
    proc = subprocess.run(
        [str(bundle), option, "-atheris_runs=20", "-seed=12"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _record(tmp_path / "b", proc.stderr).executions == 20 and "findings: 0" in proc.stderr


@pytest.mark.slow
def test_bundle_runs_with_the_coverage_bridge(bundle, deep_bug_afl, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LOOMFUZZ_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = "/usr/bin:/bin"
    env[coverage.LOG_ENV] = str(tmp_path / "coverage.log")
    option = options_file(tmp_path / "a.json", binary=deep_bug_afl, coverage=CoverageKind.AFL,
                          artifacts=tmp_path / "a")
    proc = subprocess.run(
        [str(bundle), option, "-atheris_runs=200", "-seed=13"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = _record(tmp_path / "a", proc.stderr)
    assert record.executions == 200 and record.edges >= 30
    assert f"coverage: {record.edges} edges seen" in proc.stderr
    ids = {e["shm_id"] for e in read_log(tmp_path / "coverage.log")}
    assert len(ids) == 1 and not wait_gone(ids, timeout=5)
