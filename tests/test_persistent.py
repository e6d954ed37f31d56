"""Persistent targets (harness/run/persistent_runner.py, native/loomfuzz-mlir-driver.cpp).

Real processes throughout: the driver built by .ci/setup against Debian's
libmlir-22-dev compared with mlir-opt-22; a C double of the driver
(tests/fixtures/persistent_fake.c) with planted faults; and a real
`loomfuzz fuzz --runner persistent --target mlir-opt` campaign.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.core.engine import generate as generate_trees
from harness.core.grammar import default_grammar
from harness.core.render import render as render_tree
from harness.run.driver_binary import DRIVER_ENV, default_driver_path
from harness.run.driver_protocol import DriverError
from harness.run.persistent_runner import PersistentRunner
from harness.run.persistent_target import PersistentTarget, persistent_target
from harness.run.outcome import OutcomeKind
from harness.run.process import run_program
from harness.targets.target import DEFAULT_MLIR_PIPELINE, resolve_target, Target

G = default_grammar()


def generate(engine: str, seed: int, count: int):
    return generate_trees(G, engine, seed, count)


def render(tree, style: str = "canonical") -> str:
    return render_tree(tree, G, style)


ROOT = Path(__file__).resolve().parent.parent
FAKE_SOURCE = Path(__file__).parent / "fixtures" / "persistent_fake.c"
SPLIT = "// -----"


def _build_c(source: Path, out: Path, cc: str) -> str:
    proc = subprocess.run([cc, "-O1", "-g", "-o", str(out), str(source)],
                          capture_output=True, text=True, env={**os.environ, "AFL_QUIET": "1"})
    if proc.returncode != 0:
        pytest.fail(f"{cc} failed to build {source}:\n{proc.stderr}")
    return str(out)


@pytest.fixture(scope="module")
def fake(tmp_path_factory) -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.fail("no C compiler (cc) to build tests/fixtures/persistent_fake.c")
    return _build_c(FAKE_SOURCE, tmp_path_factory.mktemp("pfake") / "persistent-fake", cc)


@pytest.fixture(scope="module")
def driver() -> str:
    """The driver .ci/setup builds; fails (not skips) when it is missing."""
    path = os.environ.get(DRIVER_ENV) or str(default_driver_path())
    if not os.access(path, os.X_OK):
        pytest.fail(f"no persistent MLIR driver at {path}: run `bash .ci/setup` (it builds "
                    "native/loomfuzz-mlir-driver.cpp against libmlir-22-dev)")
    return path


def fake_target(fake: str, *options: str, timeout: float = 5.0, memory_mb: int | None = 4096,
                restart_every: int = 10_000) -> PersistentTarget:
    process = Target(name="persistent-fake", argv=(fake, *options), timeout=timeout,
                     memory_mb=memory_mb)
    return PersistentTarget(process, (fake, "--persistent", *options), restart_every)


def log_lines(path: Path) -> list[tuple[int, str, int, int]]:
    rows = []
    for line in path.read_text().splitlines():
        pid, mode, seq, ident = line.split()
        rows.append((int(pid), mode, int(seq), int(ident)))
    return rows


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].startswith("Z")  # a zombie is gone too
    except OSError:
        return True


# ------------------------------------------------------ the fixture's faults


def test_planted_faults_are_classified_attributed_and_nothing_is_lost(fake, tmp_path):
    """200 programs with faults among them: each fault is classified and
    attributed to its program, the driver restarts after each, and every
    program runs exactly once in the persistent drivers."""
    log = tmp_path / "log"
    plants = {17: "PLANT_ABORT", 40: "PLANT_SEGV", 41: "PLANT_REJECT", 90: "PLANT_HANG",
              91: "PLANT_ABORT", 150: "PLANT_SEGV"}
    texts = [f"// id {i}\nprogram {plants.get(i, '')}\n" for i in range(200)]
    target = fake_target(fake, f"--log={log}", timeout=1.0)
    with PersistentRunner(target) as runner:
        verdicts = [runner.run_judged(text) for text in texts]
        stats = runner.stats
    expected = {17: "crash", 40: "crash", 41: "rejected", 90: "timeout", 91: "crash", 150: "crash"}
    for i, verdict in enumerate(verdicts):
        assert verdict.outcome.kind.value == expected.get(i, "accepted"), (i, verdict.why)
        assert not verdict.persistent_only, (i, verdict.why)
    assert "Assertion `op->getNumResults() == 1' failed" in verdicts[17].outcome.reason
    assert verdicts[40].outcome.signal == signal.SIGSEGV and "Stack dump:" in verdicts[40].outcome.stderr
    assert "plantedNullDereference" in verdicts[150].outcome.stderr
    assert stats.restarts == Counter({"crash": 4, "timeout": 1})
    assert stats.starts == 6 and stats.programs == 200

    rows = log_lines(log)
    persistent = [ident for _pid, mode, _seq, ident in rows if mode == "p"]
    assert sorted(persistent) == list(range(200)), "a program was lost or run twice"
    assert persistent == list(range(200)), "programs ran out of order"
    # each fault ends a driver: the next program is the first of a new one
    by_id = {ident: (pid, seq) for pid, mode, seq, ident in rows if mode == "p"}
    for i in (17, 40, 90, 91, 150):
        assert by_id[i + 1][1] == 1 and by_id[i + 1][0] != by_id[i][0]
    assert by_id[42][0] == by_id[41][0]  # a rejection does not restart it
    # the findings (not the rejection: accept-all expects acceptance, so it is one too)
    # were re-run once each in a fresh process
    fresh = sorted(ident for _pid, mode, _seq, ident in rows if mode == "o")
    assert fresh == [17, 40, 41, 90, 91, 150]


def test_state_bug_is_reported_as_persistent_only(fake, tmp_path):
    log = tmp_path / "log"
    target = fake_target(fake, "--state-bug=50", f"--log={log}")
    texts = [f"// id {i}\nprogram\n" for i in range(120)]
    with PersistentRunner(target) as runner:
        verdicts = []
        for text in texts:
            verdicts.append(runner.run_judged(text))
            if verdicts[-1].finding:
                runner.write_finding(tmp_path / "artifacts", "crash-state", text, verdicts[-1], suffix=".mlir")
    findings = [i for i, v in enumerate(verdicts) if v.finding]
    # the 50th since start, then the 50th since the restart (49 + 50 = 99)
    assert findings == [49, 99]
    v = verdicts[49]
    assert v.persistent_only and v.kind == "crash"
    assert v.why.startswith("persistent-only: crash: ") and "a fresh process: accepted" in v.why
    record = json.loads((tmp_path / "artifacts" / "crash-state.json").read_text())
    assert record["persistent_only"] is True
    assert record["persistent"]["position"] == 50 and record["persistent"]["history_programs"] == 49
    history = (tmp_path / "artifacts" / "crash-state.history.txt").read_text().split(f"\n{SPLIT}\n")
    assert [h.splitlines()[0] for h in history] == [f"// id {i}" for i in range(50, 99)]
    assert "Assertion `cache.size() < kCacheLimit' failed" in record["stderr_tail"]
    ids = [ident for _pid, mode, _seq, ident in log_lines(log) if mode == "p"]
    assert ids == list(range(120))


def test_growing_memory_ends_in_a_persistent_only_oom(fake):
    """8 MiB leaked per program under a 256 MiB RLIMIT_AS: some program runs
    out of memory, is classified oom, and a fresh process accepts it."""
    target = fake_target(fake, "--leak-kb=8192", memory_mb=256)
    with PersistentRunner(target) as runner:
        verdicts = [runner.run_judged(f"// id {i}\n") for i in range(60)]
        restarts = runner.stats.restarts
    ooms = [i for i, v in enumerate(verdicts) if v.finding]
    assert ooms, "the leak never hit the memory limit"
    first = verdicts[ooms[0]]
    assert first.outcome.kind is OutcomeKind.OOM and first.persistent_only
    assert "LLVM ERROR: out of memory" in first.outcome.reason
    assert 10 < ooms[0] < 32  # 256 MiB / 8 MiB, less what the process maps anyway
    assert restarts["oom"] == len(ooms)
    assert all(not v.finding for i, v in enumerate(verdicts) if i not in ooms)


def test_restart_every_n(fake, tmp_path):
    log = tmp_path / "log"
    with PersistentRunner(fake_target(fake, f"--log={log}", restart_every=7)) as runner:
        for i in range(30):
            assert runner.run(f"// id {i}\n").kind is OutcomeKind.ACCEPTED
        assert runner.stats.restarts == Counter({"every 7": 4})
    rows = [r for r in log_lines(log) if r[1] == "p"]
    assert [seq for _p, _m, seq, _i in rows] == [i % 7 + 1 for i in range(30)]
    assert len({pid for pid, *_ in rows}) == 5


def test_driver_dies_with_its_parent(fake, tmp_path):
    """The harness is SIGKILLed while its driver hangs in a program: the
    driver (its own session, so not in the harness' group) goes too."""
    script = (
        "import sys, time\n"
        "from harness.targets.target import Target\n"
        "from harness.run.persistent_runner import PersistentRunner\n"
        "from harness.run.persistent_target import PersistentTarget\n"
        f"t = Target(name='f', argv=({fake!r},), timeout=600)\n"
        f"r = PersistentRunner(PersistentTarget(t, ({fake!r}, '--persistent')))\n"
        "r.run('warm up')\n"
        "print(r.pid, flush=True)\n"
        "r.run('PLANT_HANG')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    driver_pid = int(proc.stdout.readline())
    time.sleep(0.3)
    assert not _gone(driver_pid)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while not _gone(driver_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(driver_pid), "the driver outlived its parent"


def test_protocol_errors_are_one_line(fake, tmp_path):
    process = Target(name="f", argv=(fake,))
    with pytest.raises(DriverError, match="does not speak the protocol|did not start"):
        PersistentRunner(PersistentTarget(process, ("/bin/echo", "hello"))).run("x")
    with pytest.raises(DriverError, match="cannot run"):
        PersistentRunner(PersistentTarget(process, (str(tmp_path / "missing"),))).run("x")
    monkey = {DRIVER_ENV: str(tmp_path / "nope")}
    env = os.environ.copy()
    try:
        os.environ.update(monkey)
        with pytest.raises(DriverError, match="LOOMFUZZ_MLIR_DRIVER=.*no such executable"):
            persistent_target(Target(name="mlir-opt", argv=("mlir-opt-22",), render="oracle"))
    finally:
        os.environ.clear()
        os.environ.update(env)


# ----------------------------------------------------------- coverage map


def test_driver_clears_the_afl_map_before_each_program(tmp_path):
    """Built with afl-clang-fast, the fixture clears AFL++'s map after reading
    each program: edges written into the map between programs (standing in for
    the previous iteration's tail) are not counted for the next one."""
    import ctypes

    from harness.run import coverage

    afl = shutil.which("afl-clang-fast")
    if not afl:
        pytest.fail("afl-clang-fast not found: apt-get install afl++ (.ci/setup)")
    binary = _build_c(FAKE_SOURCE, tmp_path / "persistent-fake-afl", afl)
    with coverage.open_bridge("afl", binary) as bridge:
        target = fake_target(binary)
        with PersistentRunner(target, env=bridge.env, settle=True) as runner:
            def hits(text: str, kind=OutcomeKind.ACCEPTED) -> dict[int, int]:
                bridge.start_run()
                assert runner.run(text).kind is kind
                bridge.finish_run()
                return bridge.last_hits()

            clean = hits("// id 1\nprogram\n")
            assert clean
            # dirty every edge the binary has (AFL_DUMP_MAP_SIZE: its __afl_final_loc)
            edges = int(subprocess.run([binary], env={**os.environ, "AFL_DUMP_MAP_SIZE": "1"},
                                       capture_output=True, text=True).stdout)
            assert 0 < edges <= bridge.map_size
            ctypes.memset(bridge.segment.addr, 0x7F, edges)
            again = hits("// id 1\nprogram\n")
            assert again == clean
            rejected = hits("// id 2\nPLANT_REJECT\n", OutcomeKind.REJECTED)
            assert set(rejected) != set(clean)


# ------------------------------------------------- the real driver vs mlir-opt


def _oracle_programs(count: int, seed: int) -> list[str]:
    texts = [render(p, "oracle") for p in generate("fast", seed, count)]
    rng = random.Random(seed)
    for i in range(0, count, 20):  # every 20th cut short: rejections to compare too
        text = texts[i]
        texts[i] = text[: rng.randrange(len(text) // 4, len(text) * 3 // 4)]
    return texts


def _split_outcomes(mlir_opt: str, texts: list[str]) -> list[str]:
    """mlir-opt-22 --split-input-file on valid programs: each chunk gets its
    own context (MlirOptMain's processBuffer), so each is one by one."""
    proc = subprocess.run(
        [mlir_opt, "--allow-unregistered-dialect", f"--pass-pipeline={DEFAULT_MLIR_PIPELINE}",
         "--split-input-file"],
        input=f"\n{SPLIT}\n".join(texts), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    chunks = proc.stdout.split(f"{SPLIT}\n")
    assert len(chunks) == len(texts)
    return chunks


def test_driver_matches_mlir_opt_on_oracle_programs(driver, mlir_opt, samples):
    count = samples(800, 2000)  # --full-samples: the 2,000
    texts = _oracle_programs(count, seed=13)
    process = resolve_target("mlir-opt")
    process = Target(name="mlir-opt", argv=(mlir_opt, *process.argv[1:]), render="oracle")
    target = persistent_target(process, driver)
    assert "--emit-output" in target.driver
    with PersistentRunner(target) as runner:
        outcomes = [runner.run(text) for text in texts]
        assert runner.stats.starts == 1
    bad = [i for i in range(0, count, 20)]
    good = [i for i in range(count) if i % 20]
    # valid programs: accepted by both, with the same printed module
    expected = []
    for start in range(0, len(good), 500):
        expected += _split_outcomes(mlir_opt, [texts[i] for i in good[start:start + 500]])
    for i, want in zip(good, expected):
        assert outcomes[i].kind is OutcomeKind.ACCEPTED, (i, outcomes[i].reason)
        assert outcomes[i].stdout.strip() == want.strip(), i
    # programs cut short: one by one, the same outcome and the same first error
    error = re.compile(r"error: .*")
    for i in bad:
        fresh = run_program(process, texts[i])
        assert outcomes[i].kind is fresh.kind, (i, outcomes[i].reason, fresh.reason)
        assert outcomes[i].returncode == fresh.returncode
        assert error.search(outcomes[i].stderr).group(0) == error.search(fresh.stderr).group(0), i
    assert sum(outcomes[i].kind is OutcomeKind.REJECTED for i in bad) > 0.8 * len(bad)


# ------------------------------------------------------- a real campaign


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(") ", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, out, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _start_campaign(tmp_path: Path, driver: str) -> tuple[subprocess.Popen, set[int]]:
    """A `loomfuzz fuzz --runner persistent --target mlir-opt` campaign, running until
    its corpus has grown; returns it and its processes (the driver among them)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "fuzz", "--target", "mlir-opt", "--runner", "persistent",
         "--time", "600", "--seed", "1", "--corpus", str(tmp_path / "corpus"),
         "--artifacts", str(tmp_path / "artifacts")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), DRIVER_ENV: driver}, cwd=tmp_path)
    # libFuzzer's lines go to the campaign's log (harness.fuzzing: ARTIFACTS/fuzz.log), not stdout
    log, news = tmp_path / "artifacts" / "fuzz.log", 0
    deadline = time.monotonic() + 300
    while news < 20 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        text = log.read_text(errors="replace") if log.exists() else ""
        news = len(re.findall(r"^#\d+\s+NEW\b", text, re.M))
    assert news >= 20, "the campaign ended before its corpus grew"
    family = _descendants(proc.pid)
    drivers = [pid for pid in family if "loomfuzz-mlir-driver" in _cmdline(pid)]
    # the fork server and its worker (for a moment after a crash, the fork server alone)
    assert 1 <= len(drivers) <= 2, [(p, _cmdline(p)) for p in family]
    return proc, family


def _wait_gone(pids: set[int], seconds: float = 15.0) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = {pid for pid in pids if not _gone(pid)}
        if not left:
            return left
        time.sleep(0.1)
    return {pid for pid in pids if not _gone(pid)}


def test_campaign_grows_a_corpus_and_leaves_nothing_after_sigint(driver, tmp_path):
    proc, family = _start_campaign(tmp_path, driver)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does to the terminal's process group
    rest = proc.stdout.read()
    assert proc.wait(timeout=60) == 130, rest[-3000:]
    assert "loomfuzz fuzz: summary" in rest, rest[-3000:]
    assert len(list((tmp_path / "corpus").iterdir())) > 48  # seeds plus what it found
    left = _wait_gone(family)
    assert not left, [(pid, _cmdline(pid)) for pid in left]


def test_campaign_leaves_nothing_after_sigkill(driver, tmp_path):
    proc, family = _start_campaign(tmp_path, driver)
    os.killpg(proc.pid, signal.SIGKILL)  # the campaign's group; the driver has its own session
    proc.wait(timeout=30)
    proc.stdout.close()
    left = _wait_gone(family)
    assert not left, [(pid, _cmdline(pid)) for pid in left]
    assert len(list((tmp_path / "corpus").iterdir())) > 48  # seeds plus what it found


def test_afl_instrumented_driver_clears_its_map(tmp_path):
    """afl-clang-fast++ (clang 14) builds the driver against LLVM 22's headers.
    Only the driver's own code is instrumented (Debian's libMLIR.so is not):
    its map still tells a rejected program from an accepted one, and edges
    written into the map between programs are cleared before the next one."""
    import ctypes

    from harness.run import coverage

    aflxx = shutil.which("afl-clang-fast++")
    if not aflxx:
        pytest.fail("afl-clang-fast++ not found: apt-get install afl++ (.ci/setup)")
    binary = tmp_path / "loomfuzz-mlir-driver-afl"
    proc = subprocess.run(
        [aflxx, "-std=c++17", "-O1", "-fno-rtti", "-I/usr/lib/llvm-22/include",
         # loomfuzz-exec-none.cpp: the map is about optimizing; instrumenting
         # the executor (loomfuzz-exec.cpp and its IR interpreter) costs minutes.
         str(ROOT / "native" / "loomfuzz-mlir-driver.cpp"), str(ROOT / "native" / "loomfuzz-exec-none.cpp"),
         "-o", str(binary),
         "-L/usr/lib/llvm-22/lib", "-Wl,-rpath,/usr/lib/llvm-22/lib", "-lMLIR", "-lLLVM"],
        capture_output=True, text=True, env={**os.environ, "AFL_QUIET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    good = render(next(iter(generate("fast", 5, 1))), "oracle")
    process = resolve_target("mlir-opt")
    with coverage.open_bridge("afl", str(binary)) as bridge:
        target = persistent_target(process, str(binary))
        with PersistentRunner(target, env=bridge.env, settle=True) as runner:
            def hits(text: str, kind) -> dict[int, int]:
                bridge.start_run()
                assert runner.run(text).kind is kind
                bridge.finish_run()
                return bridge.last_hits()

            hits(good, OutcomeKind.ACCEPTED)  # the first one also builds the pass manager
            accepted = hits(good, OutcomeKind.ACCEPTED)
            rejected = hits(good[: len(good) // 2], OutcomeKind.REJECTED)
            assert accepted and set(rejected) != set(accepted)
            edges = int(subprocess.run([str(binary)], env={**os.environ, "AFL_DUMP_MAP_SIZE": "1"},
                                       capture_output=True, text=True).stdout)
            ctypes.memset(bridge.segment.addr, 0x7F, edges)  # every edge the binary has
            assert hits(good, OutcomeKind.ACCEPTED) == accepted


def test_fuzz_cli_names_a_missing_driver_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), DRIVER_ENV: str(tmp_path / "nope")}
    common = ["--runs", "5", "--corpus", str(tmp_path / "c"), "--artifacts", str(tmp_path / "a")]
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "fuzz", "--runner",
                           "persistent", "--target", "mlir-opt", *common], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"loomfuzz fuzz: error: --runner persistent: {DRIVER_ENV}={tmp_path / 'nope'}: no such executable file"]
    env.pop(DRIVER_ENV)
    env.pop("LOOMFUZZ_LOOM_DRIVER", None)
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "fuzz", "--runner",
                           "persistent", "--loom-opt", "/bin/true", *common], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "set LOOMFUZZ_LOOM_DRIVER" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_persistent_only_finding_through_fuzz_and_triage(fake, tmp_path):
    """A real campaign on the fixture (state bug at its 30th program): the
    finding is reported persistent-only with its history, and triage, which
    reproduces in fresh processes, finds it does not reproduce."""
    wrapper = tmp_path / "driver"
    wrapper.write_text(f'#!/bin/sh\nexec {fake} --persistent "$@"\n')
    wrapper.chmod(0o755)
    expectations = tmp_path / "any.json"
    expectations.write_text('{"rules": [{"name": "any", "expect": "either"}]}')
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOOMFUZZ_LOOM_DRIVER": str(wrapper)}
    target = ["--loom-opt", fake, "--pass-args=--state-bug=30", "--expectations", str(expectations)]
    artifacts = tmp_path / "artifacts"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "fuzz", *target, "--runner", "persistent", "--runs", "300",
         "--seed", "1", "--corpus", str(tmp_path / "corpus"), "--artifacts", str(artifacts)],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "persistent:  1 driver restarts (crash: 1)" in proc.stdout
    (sidecar,) = artifacts.glob("crash-*.json")
    record = json.loads(sidecar.read_text())
    assert record["persistent_only"] is True and record["finding_kind"] == "crash"
    assert record["persistent"]["position"] == 30
    assert record["persistent"]["driver"][:2] == [str(wrapper), "--state-bug=30"]
    history = (artifacts / record["persistent"]["history"]).read_text().split(f"\n{SPLIT}\n")
    assert len(history) == 29 and all("dataflow.thread" in h for h in history)
    triage = subprocess.run(
        [sys.executable, "-m", "harness.cli", "triage", str(artifacts), *target,
         "--out", str(tmp_path / "triage")], capture_output=True, text=True, env=env, timeout=300)
    assert "0 bucket(s) (0 new), 0 flaky input(s), 1 input(s) not reproducing" in triage.stderr + triage.stdout


def test_invalid_pipeline_stops_the_driver_before_it_starts(driver):
    process = Target(name="mlir-opt", argv=("mlir-opt-22", "--pass-pipeline=builtin.module(nosuch)"),
                     render="oracle")
    with pytest.raises(DriverError, match="did not start: .*'nosuch' does not refer to a registered pass"):
        PersistentRunner(persistent_target(process, driver)).run("module {}")
