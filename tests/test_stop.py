"""A campaign stops whole (issue 14): signals to loomfuzz, SIGKILL, second signals.

Real ``loomfuzz`` subprocesses (started without a session or group of their
own: signals go to loomfuzz's pid only), real atheris/libFuzzer, real
mlir-opt-22 and the fake loom-opt.  Every process a campaign starts inherits
a marker in its environment; "nothing left" is a scan of /proc/*/environ for
it (zombies have no environment: an exited, unreaped process does not count).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.core.grammar import default_grammar
from harness.fuzzing.corpus import seed_corpus
from harness.fuzzing.libfuzzer import child_env, fuzz_target_script
from harness.fuzzing.options import SUMMARY_FILE, FuzzOptions, write_options
from harness.fuzzing.worker_summary import read_summaries
from harness.run import lifeline
from harness.run import process_tree
from harness.run import stop_requests
from harness.run.atomic import remove_partials, write_atomically
from harness.triage.inputs import collect_inputs

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]
MARK = "LOOMFUZZ_STOP_TEST"
CRASH = re.compile(r"crash-[0-9a-f]{40}")
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP,
           "SIGKILL": signal.SIGKILL}
GONE_WITHIN = 10.0  # seconds: the bound for "nothing of the campaign left"


# ------------------------------------------------------------------ helpers


def marked(mark: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment has the marker."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append((int(name), cmdline))
    return found


def age(pid: int) -> float:
    """Seconds since ``pid`` started."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        line = f.read()
    start_ticks = int(line[line.rfind(b")") + 2:].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


_RUNS: list["Run"] = []


@pytest.fixture(autouse=True)
def _nothing_left_behind():
    """Whatever a test asserts, it leaves none of its processes (frozen ones included)."""
    yield
    while _RUNS:
        _RUNS.pop().kill_all()


class Run:
    """One ``loomfuzz`` process with its own marker and output files."""

    def __init__(self, tmp_path: Path, name: str, args, env_extra=None, preexec=None) -> None:
        _RUNS.append(self)
        self.mark = uuid.uuid4().hex
        self.out_path, self.err_path = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("LOOMFUZZ_") and k not in ("LOOM_OPT", "MLIR_OPT")}
        env.update(env_extra or {})
        env[MARK] = self.mark
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([*LOOMFUZZ, *map(str, args)], stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, env=env, cwd=tmp_path,
                                         preexec_fn=preexec)

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def processes(self) -> list[tuple[int, str]]:
        return marked(self.mark)

    def wait_for(self, condition, what: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"loomfuzz ended (status {self.proc.returncode}) before {what}:\n"
                            f"{self.stdout}\n{self.stderr[-3000:]}")
            if condition(self.processes()):
                return
            time.sleep(0.05)
        self.kill_all()
        pytest.fail(f"no {what} within {timeout:g} s:\n{self.stderr[-3000:]}")

    def stop(self, signum: int) -> tuple[int | None, float, list]:
        """Deliver ``signum`` to loomfuzz's pid; (status or None for SIGKILL,
        seconds until nothing of the run was left, what was left)."""
        started = time.monotonic()
        os.kill(self.proc.pid, signum)
        try:
            status = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill_all()
            pytest.fail(f"loomfuzz still running 60 s after {signal.Signals(signum).name}")
        left = self.processes()
        while left and time.monotonic() - started < GONE_WITHIN:
            time.sleep(0.1)
            left = self.processes()
        elapsed = time.monotonic() - started
        if left:
            self.kill_all()
        return status, elapsed, left

    def kill_all(self) -> None:
        for pid in [self.proc.pid] + [pid for pid, _ in self.processes()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()


def is_target(binary: str):
    return lambda procs: any(cmd.startswith(binary + " ") for _, cmd in procs)


def a_fuzz_target_runs(binary: str):
    """The fuzz target runs the binary (not loomfuzz's pipeline probe before it)."""
    return lambda procs: (any("loom_opt_fuzzer.py" in cmd for _, cmd in procs)
                          and is_target(binary)(procs))


def a_worker_runs(binary: str):
    """libFuzzer's fork mode: a worker (it has -features_dir) and a target run."""
    return lambda procs: (any("-features_dir=" in cmd for _, cmd in procs)
                          and is_target(binary)(procs))


def a_target_hangs(binary: str):
    def condition(procs):
        for pid, cmd in procs:
            try:
                if cmd.startswith(binary + " ") and age(pid) > 0.5:
                    return True
            except OSError:
                pass
        return False
    return condition


def check_findings(artifacts: Path) -> int:
    """Every crash-<sha1> has both sidecars (whole); nothing half-written is
    visible; triage would take only whole findings.  Returns the number of findings."""
    names = sorted(p.name for p in artifacts.iterdir()) if artifacts.is_dir() else []
    crashes = [n for n in names if CRASH.fullmatch(n)]
    for crash in crashes:
        assert f"{crash}.mlir" in names and f"{crash}.json" in names, (crash, names)
        record = json.loads((artifacts / f"{crash}.json").read_text())
        assert record["name"] == crash and record["finding"] is True
        assert (artifacts / f"{crash}.mlir").read_text().strip()
        assert (artifacts / crash).stat().st_size > 0
    visible_partials = [n for n in names if ".partial" in n and not n.startswith(".")]
    assert visible_partials == []
    collected = collect_inputs([str(artifacts)]).inputs if names else []
    assert all(".partial" not in i.path and not Path(i.path).name.startswith(".") for i in collected)
    return len(crashes)


# ------------------------------------------------------- fuzz: the matrix

CASES = {
    # target, jobs -> (loomfuzz arguments, environment, what to wait for before the signal)
    ("mlir-opt", 1): "a mlir-opt run",
    ("mlir-opt", 2): "a fork-mode worker running mlir-opt",
    ("fake", 1): "a hanging fake loom-opt run",
    ("fake", 2): "a fork-mode worker running the fake loom-opt",
}


def campaign(tmp_path: Path, target: str, jobs: int, mlir_opt: str, fake: str, name: str,
             extra=(), preexec=None) -> tuple[Run, object]:
    folder = tmp_path / name
    args = ["fuzz", "--corpus", folder / "corpus", "--artifacts", folder / "artifacts",
            "--jobs", jobs, "--seed", 1]
    env = {}
    if target == "mlir-opt":
        # a process per program: these runs are what a stop must kill (the
        # persistent driver's stop: tests/test_persistent.py)
        args += ["--target", "mlir-opt", "--runner", "process"]
        env["MLIR_OPT"] = mlir_opt
        binary = mlir_opt
        condition = a_fuzz_target_runs(binary) if jobs == 1 else a_worker_runs(binary)
    elif jobs == 1:
        # every seed with a branch in scf.for hangs until the 60 s limit: the
        # signal comes while one does, and the stop must kill it
        args += ["--loom-opt", fake, "--pass-args=--plant=hang --loom-lower-for-to-graph",
                 "--timeout", 60]
        binary, condition = fake, a_target_hangs(fake)
    else:
        args += ["--loom-opt", fake, "--pass-args=--plant=none --loom-lower-for-to-graph"]
        binary, condition = fake, a_worker_runs(fake)
    run = Run(tmp_path, name, [*args, *extra], env, preexec)
    return run, condition


@pytest.mark.parametrize("target,jobs", list(CASES), ids=[f"{t}-jobs{j}" for t, j in CASES])
def test_every_stop_signal_leaves_nothing_running(target, jobs, mlir_opt, fake_loom_opt, tmp_path):
    for name, signum in SIGNALS.items():
        run, condition = campaign(tmp_path, target, jobs, mlir_opt, fake_loom_opt, name)
        run.wait_for(condition, CASES[target, jobs])
        assert len(run.processes()) >= (4 if jobs == 2 else 2)
        status, elapsed, left = run.stop(signum)
        assert left == [], f"{name}: still running after {elapsed:.1f} s: {left}"
        if signum == signal.SIGKILL:
            assert status == -signal.SIGKILL
        else:
            assert status == 128 + signum, (name, status, run.stdout, run.stderr[-2000:])
            summary = run.stdout
            assert "loomfuzz fuzz: summary" in summary, (name, run.stderr[-2000:])
            assert re.search(r"executions:\s+(\d+|unknown)", summary)
            if jobs == 1:  # the fuzz target's own count, recorded as it stopped
                log = (tmp_path / name / "artifacts" / "fuzz.log").read_text()  # the target's output
                assert re.search(r"loom-fuzz summary: \d+ executions", log), name
                [record] = read_summaries(tmp_path / name / "artifacts" / SUMMARY_FILE)
                assert re.search(rf"executions:\s+{record.executions}\b", summary), summary
        check_findings(tmp_path / name / "artifacts")
        assert not list(Path(os.environ.get("TMPDIR") or "/tmp").glob(
            f"libFuzzerTemp.FuzzWithFork{run.proc.pid}.dir"))


def freeze_campaign(run: Run) -> list[int]:
    """SIGSTOP every process below loomfuzz: none can wind down by itself.
    (Not a reaper whose owner just ended: it is no longer below loomfuzz, and
    leaves by itself within moments unless frozen.)"""
    frozen = []
    below = set(process_tree.descendants(run.proc.pid))
    for pid, _ in run.processes():
        if pid in below:
            try:
                os.kill(pid, signal.SIGSTOP)
                frozen.append(pid)
            except ProcessLookupError:  # a run that just ended
                pass
    time.sleep(0.2)
    # a process that was already exiting (a zombie takes the signal too) is not frozen
    return [pid for pid in frozen if _state(pid) == "T"]


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def test_a_second_sigint_stops_at_once(fake_loom_opt, mlir_opt, tmp_path):
    run, condition = campaign(tmp_path, "fake", 2, mlir_opt, fake_loom_opt, "twice")
    run.wait_for(condition, "a fork-mode worker")
    frozen = freeze_campaign(run)
    os.kill(run.proc.pid, signal.SIGINT)
    time.sleep(1.0)
    assert run.proc.poll() is None  # the first SIGINT waits for the campaign to wind down
    assert {pid for pid, _ in run.processes()} >= set(frozen)
    status, elapsed, left = run.stop(signal.SIGINT)  # the second one does not
    assert left == [] and status == 130, (left, status)
    assert "loomfuzz fuzz: summary" in run.stdout
    check_findings(tmp_path / "twice" / "artifacts")


def test_a_campaign_that_does_not_wind_down_is_killed_after_a_while(fake_loom_opt, mlir_opt, tmp_path):
    run, condition = campaign(tmp_path, "fake", 1, mlir_opt, fake_loom_opt, "wedged")
    run.wait_for(condition, "a hanging fake loom-opt run")
    freeze_campaign(run)
    status, elapsed, left = run.stop(signal.SIGTERM)
    assert left == [] and status == 128 + signal.SIGTERM, (left, status)
    assert "loomfuzz fuzz: summary" in run.stdout


def test_a_campaign_stopped_mid_finding_again_and_again_stays_consistent(fake_loom_opt, tmp_path):
    """The fake's planted crashes are in the seed corpus (kept as they are:
    -keep_seed=1), so the workers write findings all the time; each round stops
    the campaign as soon as a new finding file appears, then the next round
    continues on the same folders."""
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    rounds = [signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP, signal.SIGKILL,
              signal.SIGTERM]
    for index, signum in enumerate(rounds):
        before = set(os.listdir(artifacts)) if artifacts.is_dir() else set()
        run = Run(tmp_path, f"round{index}", [
            "fuzz", "--loom-opt", fake_loom_opt, "--jobs", 2, "--seed", index,
            "--corpus", corpus, "--artifacts", artifacts, "--", "-keep_seed=1"])

        def new_finding_file(procs):
            return artifacts.is_dir() and any(n.startswith(("crash-", ".crash-"))
                                              for n in set(os.listdir(artifacts)) - before)

        run.wait_for(new_finding_file, "a new finding being written")
        status, elapsed, left = run.stop(signum)
        assert left == [], f"round {index}: still running after {elapsed:.1f} s: {left}"
        if signum != signal.SIGKILL:
            assert status == 128 + signum
            assert "loomfuzz fuzz: summary" in run.stdout
        check_findings(artifacts)
    assert check_findings(artifacts) >= 1


# ------------------------------------------------------------------ triage


def test_triage_jobs_2_stops_whole_and_resumes(fake_loom_opt, tmp_path):
    programs = tmp_path / "programs"
    generated = subprocess.run([*LOOMFUZZ, "generate", "-n", "30", "--seed", "3", "-o", str(programs)],
                               capture_output=True, text=True, timeout=120)
    assert generated.returncode == 0, generated.stderr
    db, out = tmp_path / "triage.db", tmp_path / "report"

    def triage(name, *extra):
        return Run(tmp_path, name, [
            "triage", "--loom-opt", fake_loom_opt, "--pass-args=--plant=hang --loom-lower-for-to-graph",
            "--db", db, "--out", out, "--jobs", 2, "--repeat", 1, "--max-candidates", 3,
            "--no-progress", *extra, programs])

    for name, signum in SIGNALS.items():
        run = triage(name, "--timeout", 60)
        run.wait_for(a_target_hangs(fake_loom_opt), "a hanging target run")
        status, elapsed, left = run.stop(signum)
        assert left == [], f"{name}: still running after {elapsed:.1f} s: {left}"
        if signum == signal.SIGKILL:
            assert status == -signal.SIGKILL  # its targets were killed by the reaper
        else:
            assert status == 128 + signum, (name, status, run.stderr[-2000:])
            assert "loomfuzz triage: interrupted" in run.stderr
            assert re.search(rf"triage: stopped \({name}\): .* holds \d+ input program", run.stderr), \
                run.stderr[-2000:]
    # the database is whole and the next run continues where they stopped
    listing = subprocess.run([*LOOMFUZZ, "triage", "list", "--db", db], capture_output=True,
                             text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    final = triage("final", "--timeout", 1)
    status = final.proc.wait(timeout=300)
    assert status == 0, final.stderr[-3000:]
    assert "resumed" in final.stderr
    deadline = time.monotonic() + GONE_WITHIN  # its reaper leaves within moments of it
    while final.processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert final.processes() == []


# -------------------------------------------------------------- the pieces


def test_write_atomically_and_stale_partials(tmp_path):
    target = tmp_path / "crash-x.json"
    write_atomically(target, "{}\n")
    assert target.read_text() == "{}\n" and os.listdir(tmp_path) == ["crash-x.json"]
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".crash-y.mlir.{dead.pid}.partial"
    live = tmp_path / f".crash-z.mlir.{os.getpid()}.partial"
    stale.write_text("half")
    live.write_text("being written")
    assert remove_partials(tmp_path) == 1
    assert not stale.exists() and live.exists()
    inputs = collect_inputs([str(tmp_path)]).inputs
    assert [Path(i.path).name for i in inputs] == []


def test_lifeline_ends_when_its_owner_is_killed(tmp_path):
    """A child sees the lifeline's end when the owner dies by SIGKILL, through
    an intermediate ``sh -c`` (libFuzzer's system()) that knows nothing of it."""
    code = ("import os, select, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from harness.run import lifeline\n"
            "fds = lifeline.inherited_lifelines()\n"
            "assert fds, os.environ.get('LOOMFUZZ_LIFELINE')\n"
            "print('ready', flush=True)\n"
            "select.select(fds, [], [])\n"
            "print('ended' if lifeline.lifeline_ended(fds[0]) else 'data', flush=True)\n")
    owner_code = ("import subprocess, sys, time, os\n"
                  "sys.path.insert(0, sys.argv[1])\n"
                  "from harness.run import lifeline\n"
                  "line = lifeline.Lifeline()\n"
                  "env = {**os.environ, **line.environment()}\n"
                  "child = subprocess.Popen(['sh', '-c', f'{sys.executable} -c \"$0\" \"$1\" > \"$2\"',"
                  " sys.argv[2], sys.argv[1], sys.argv[3]], env=env, pass_fds=line.pass_fds)\n"
                  "line.children_started()\n"
                  "time.sleep(600)\n")
    root = str(Path(lifeline.__file__).resolve().parents[2])
    log = tmp_path / "child.log"
    owner = subprocess.Popen([sys.executable, "-c", owner_code, root, code, str(log)])
    deadline = time.monotonic() + 30
    while "ready" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "ready" in log.read_text()
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 5
    while "ended" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.read_text().split() == ["ready", "ended"]


def test_kill_tree_reaches_processes_in_other_sessions(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, time\n"
         "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
         "subprocess.Popen(['sh', '-c', 'sleep 600 & sleep 600'])\n"
         "time.sleep(600)\n"])
    deadline = time.monotonic() + 20
    while len(process_tree.descendants(parent.pid)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    tree = process_tree.descendants(parent.pid)
    assert len(tree) >= 4
    assert process_tree.kill_tree(parent.pid, include_root=True) >= 5
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{p}/cmdline") and open(f"/proc/{p}/cmdline").read()
              for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{p}/cmdline") and open(f"/proc/{p}/cmdline").read()
                   for p in tree)


def test_the_fuzz_target_alone_stops_gracefully_on_sigterm(fake_loom_opt, tmp_path):
    """Without loomfuzz: SIGTERM reaches our handler, not libFuzzer's immediate
    _Exit: the hanging run is killed, the summary printed, status 72."""
    mark = uuid.uuid4().hex
    corpus = tmp_path / "corpus"
    seed_corpus(corpus, default_grammar())
    env = child_env(None, {**os.environ, MARK: mark})
    env.pop(lifeline.LIFELINE_ENV, None)
    err = tmp_path / "err"
    options = tmp_path / "options.json"
    write_options(FuzzOptions(binary=fake_loom_opt, timeout=60.0, artifacts=tmp_path / "a",
                              pass_args=("--plant=hang", "--loom-lower-for-to-graph"),
                              summary=tmp_path / "summary.jsonl"), options)
    with open(err, "wb") as handle:
        proc = subprocess.Popen(
            [str(fuzz_target_script("loom_opt_fuzzer.py")), f"--options={options}", str(corpus)],
            stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while not a_target_hangs(fake_loom_opt)(marked(mark)) and time.monotonic() < deadline:
            assert proc.poll() is None, err.read_text()[-2000:]
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == stop_requests.INTERRUPTED_EXIT
        deadline = time.monotonic() + GONE_WITHIN
        while marked(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked(mark) == []
    finally:
        for pid, _ in marked(mark):
            os.kill(pid, signal.SIGKILL)
    output = err.read_text()
    assert re.search(r"loom-fuzz summary: \d+ executions", output)
    assert len(read_summaries(tmp_path / "summary.jsonl")) == 1
    assert "run interrupted" not in output  # libFuzzer's own handler did not take it
    assert check_findings(tmp_path / "a") == 0


def test_self_fuzzing_stops_on_sigterm(tmp_path):
    run = Run(tmp_path, "self", ["fuzz", "--self", "--jobs", 2, "--corpus", tmp_path / "c",
                                 "--artifacts", tmp_path / "a"])
    run.wait_for(lambda procs: any("-features_dir=" in cmd for _, cmd in procs), "a worker")
    status, elapsed, left = run.stop(signal.SIGTERM)
    assert left == [] and status == 128 + signal.SIGTERM
    assert "loomfuzz fuzz: summary" in run.stdout


def test_a_signal_ignored_at_start_stays_ignored(fake_loom_opt, mlir_opt, tmp_path):
    """``nohup loomfuzz fuzz ...``: a hangup must not stop the campaign."""
    run, condition = campaign(tmp_path, "fake", 1, mlir_opt, fake_loom_opt, "nohup",
                              preexec=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    run.wait_for(condition, "a hanging fake loom-opt run")
    before = {pid for pid, _ in run.processes()}
    os.kill(run.proc.pid, signal.SIGHUP)
    time.sleep(1.5)
    assert run.proc.poll() is None
    assert before <= {pid for pid, _ in run.processes()}  # the hanging run too
    status, elapsed, left = run.stop(signal.SIGTERM)
    assert left == [] and status == 128 + signal.SIGTERM
