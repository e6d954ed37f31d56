"""Persistent targets: one long-lived driver answers many programs.

The process-per-input runner (:mod:`harness.run.process`) pays the target's
start-up for every program (about 35 ms of ``mlir-opt-22``'s 40 ms).  A
*driver* speaking the protocol below pays it once: the harness starts it,
sends it programs one after another, and restarts it when it crashes, hangs,
runs out of memory, or has answered ``restart_every`` programs.

Protocol (native/README.md has the full text; integers are unsigned 32-bit
little-endian):

* driver -> harness once, when it is ready: ``LFD1``;
* harness -> driver per program: length, bytes;
* driver -> harness per program: ``LFR1``, sequence number (1 for the first
  program since the driver started), status (0 or 1: the exit status
  ``mlir-opt`` would have had), diagnostics (length, bytes: what ``mlir-opt``
  prints on stderr), output module (length, bytes; empty unless the driver
  runs with ``--emit-output``);
* EOF on its stdin: the driver exits.  A crash is not answered: the driver
  dies, with LLVM's stack dump on its stderr.

Each program gets an ``Outcome`` classified by the same
:func:`harness.run.outcome.classify` as in process mode: from the status and
the diagnostics plus anything the driver wrote on stderr meanwhile, or, when
it died, from its exit status and its stderr since the previous answer
(the stack dump).  A program that gets no answer within the target's
``timeout`` is a ``timeout``: the driver's process group is killed.  The
target's ``memory_mb`` is the driver's ``RLIMIT_AS``, as in process mode;
memory that builds up over many programs hits it eventually and the program
running then is an ``oom``.

Findings are confirmed in a fresh process (:meth:`PersistentRunner.run_judged`):
the program runs once more through the process-per-input ``Target`` (e.g.
``mlir-opt-22`` itself).  When that run is a finding too, it is the one
reported, exactly as process mode would report it (stack dump, signature,
sidecars).  When it is not, the persistent outcome is reported with
``Verdict.persistent_only`` set and ``why`` starting with
``persistent-only:``: the program failed only after the ones before it
(state carried between inputs), which is a bug too, but a different one.
Its sidecar names the driver, the position of the program since the driver
started, and ``NAME.history.txt``: the programs the driver ran before it,
``// -----``-separated, in order (``.txt``: triage must not take each of
them for a finding of its own).

The driver dies with the harness: it gets ``LOOMFUZZ_PARENT_PID`` (the
harness' pid) and sets ``PR_SET_PDEATHSIG`` (SIGKILL), and EOF on its stdin
ends it too.  Note that Linux sends the parent-death signal when the *thread*
that started the driver exits: start it from a thread that lives as long as
the runner (the fuzz targets run everything on the main thread).

``restart_every`` defaults to 10,000 programs, the loop count of AFL++'s
persistent-mode example (``while (__AFL_LOOP(10000))`` in AFL++'s
instrumentation/README.persistent_mode.md), so that state cannot build up
without bound.
"""

from __future__ import annotations

import os
import select
import struct
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping, Optional

from harness.run.identity import BuildIdentity, IdentityError, identify, which
from harness.run.judge import judge, write_finding
from harness.run.outcome import classify, Outcome, OutcomeKind, Verdict
from harness.run.process import _kill_group, _set_limits, run_program
from harness.run.target import Target, TargetNotFound

__all__ = [
    "DEFAULT_RESTART_EVERY",
    "DRIVER_ENV",
    "LOOM_DRIVER_ENV",
    "PersistentEvidence",
    "PersistentRunner",
    "PersistentStats",
    "PersistentTarget",
    "DriverError",
    "default_driver_path",
    "driver_candidates",
    "find_driver",
    "release_driver_path",
    "persistent_target",
]

DEFAULT_RESTART_EVERY = 10_000
DRIVER_ENV = "LOOMFUZZ_MLIR_DRIVER"  # the upstream driver (native/build/loomfuzz-mlir-driver)
LOOM_DRIVER_ENV = "LOOMFUZZ_LOOM_DRIVER"  # the same driver built inside loom's tree
PARENT_ENV = "LOOMFUZZ_PARENT_PID"
DRIVER_NAME = "loomfuzz-mlir-driver"
HEAD_DRIVER_NAME = "loomfuzz-head-driver"  # harness/run/head_driver.py (console script)
START_TIMEOUT = 60.0  # registering every dialect and pass takes well under a second

HELLO = b"LFD1"
RESULT = b"LFR1"
ZYGOTE = b"LFZ1"  # --fork-server: the initialised process is ready to fork workers
WORKER = b"LFC1"  # + pid: a fresh worker is ready
ENDED = b"LFX1"  # + wait status: the worker ended
RETIRE = 0xFFFFFFFF  # a program length that retires the worker
_U32 = struct.Struct("<I")
_READ_SYSCALL = {"aarch64": b"63", "arm64": b"63"}.get(os.uname().machine, b"0")  # x86_64: 0
_RESULT_REST = struct.Struct("<III")  # after the magic: sequence, status, diagnostics length


class DriverError(TargetNotFound):
    """The driver cannot be started or broke the protocol; one line for the user."""


# ------------------------------------------------------------------ targets


def default_driver_path() -> Path:
    """Where ``.ci/setup`` builds the driver: ``native/build/`` in the source tree."""
    import harness

    return Path(harness.__file__).resolve().parent.parent / "native" / "build" / DRIVER_NAME


def release_driver_path(major: int) -> Path:
    """Where ``.ci/setup`` builds the driver for another MLIR release (19: against
    Debian's libmlir-19, unpacked beside it; no ``--exec``)."""
    return default_driver_path().with_name(f"{DRIVER_NAME}-{major}")


def driver_candidates() -> list[str]:
    """The upstream drivers this checkout has, the default first: the MLIR 22 driver,
    one per other release (``loomfuzz-mlir-driver-19``), and the development head's
    (``loomfuzz-head-driver``, over the head extra's bindings; found beside this Python)."""
    default = default_driver_path()
    found = [str(default)] if default.is_file() and os.access(default, os.X_OK) else []
    for path in sorted(default.parent.glob(f"{DRIVER_NAME}-*")):
        if path.is_file() and os.access(path, os.X_OK) and not path.name.endswith(".tmp"):
            found.append(str(path))
    head = which(HEAD_DRIVER_NAME)
    if head:
        found.append(head)
    return found


def find_driver(target_name: str, build: BuildIdentity | None = None) -> Optional[str]:
    """The driver binary for a target, or None.

    ``mlir-opt``: ``$LOOMFUZZ_MLIR_DRIVER``, else the driver of
    :func:`driver_candidates` built from the target's release (``build``): the one
    whose ``--version`` names the same LLVM release; without a build, or when none
    does, the default ``native/build/loomfuzz-mlir-driver`` (whose release then
    differs: :func:`harness.run.runners.driver_mismatch` says so).
    ``loom-opt``: ``$LOOMFUZZ_LOOM_DRIVER`` (the driver built in loom's tree
    with ``-DLOOMFUZZ_WITH_LOOM=ON``; README: Persistent targets).
    A variable naming a missing or non-executable file raises ``DriverError``.
    """
    env = DRIVER_ENV if target_name == "mlir-opt" else LOOM_DRIVER_ENV
    given = os.environ.get(env)
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise DriverError(f"{env}={given}: no such executable file")
        return os.path.abspath(given)
    if target_name != "mlir-opt":
        return None
    candidates = driver_candidates()
    if build is not None and build.version:
        for candidate in candidates:
            try:
                if identify(candidate).version == build.version:
                    return candidate
            except IdentityError:
                continue
    default = default_driver_path()
    return str(default) if str(default) in candidates else None


@dataclass(frozen=True)
class PersistentTarget:
    """A driver command line beside the process-per-input ``Target`` it stands for.

    ``process`` is what findings are confirmed with and what their sidecars
    name (triage reproduces with it); its limits and expectations apply to
    the driver too.
    """

    process: Target
    driver: tuple[str, ...]
    restart_every: int = DEFAULT_RESTART_EVERY
    start_timeout: float = START_TIMEOUT
    #: The driver runs with --fork-server: a crash costs a fork, and a finding
    #: is confirmed as the first program of a freshly forked worker.
    fork_server: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "driver", tuple(self.driver))
        if self.restart_every < 1:
            raise ValueError("restart_every must be at least 1")

    def to_json(self) -> dict:
        return {"driver": list(self.driver), "restart_every": self.restart_every,
                "fork_server": self.fork_server}


def _needs_output(target: Target) -> bool:
    return any(rule.checks for rule in target.expectations.rules)


def persistent_target(
    process: Target, driver: Optional[str] = None, *, restart_every: int = DEFAULT_RESTART_EVERY,
    fork_server: bool = True,
) -> PersistentTarget:
    """The persistent form of ``process``: the driver gets ``process``'s
    arguments (the same flags as ``mlir-opt``), plus ``--emit-output`` when
    the expectations check the output, and ``--fork-server`` (the default)."""
    binary = driver or find_driver(process.name, process.build)
    if not binary:
        if process.name == "mlir-opt":
            raise DriverError(
                f"no persistent MLIR driver: build it with `bash .ci/setup` (it goes to "
                f"{default_driver_path()}) or set {DRIVER_ENV}"
            )
        raise DriverError(
            f"no persistent driver for target {process.name}: set {LOOM_DRIVER_ENV} to the "
            "loomfuzz-mlir-driver built in loom's tree (README: Persistent targets)"
        )
    extra = ("--emit-output",) if _needs_output(process) else ()
    if fork_server:
        extra += ("--fork-server",)
    return PersistentTarget(process, (binary, *process.argv[1:], *extra), restart_every,
                            fork_server=fork_server)


# -------------------------------------------------------------------- stats


@dataclass
class PersistentStats:
    programs: int = 0  # answered, crashed or timed out: each counted once
    starts: int = 0  # drivers started (exec)
    workers: int = 0  # fork-server workers forked
    restarts: Counter = field(default_factory=Counter)  # reason -> count
    seconds_in_target: float = 0.0  # from sending a program to its answer (or death)
    seconds_starting: float = 0.0  # from starting a driver to its LFD1
    confirmations: int = 0  # fresh-process runs of findings
    seconds_confirming: float = 0.0
    persistent_only: int = 0

    @property
    def restart_count(self) -> int:
        return sum(self.restarts.values())

    def describe(self) -> str:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(self.restarts.items()))
        return (f"{self.restart_count} restarts ({reasons or 'none'}), "
                f"{self.seconds_starting:.2f} s starting drivers, "
                f"{self.confirmations} findings re-run in a fresh process "
                f"({self.persistent_only} persistent-only)")


# ------------------------------------------------------------------- runner


class PersistentRunner:
    """Runs programs through one driver at a time, restarting it as needed.

    ``env`` is added to the driver's environment on top of the target's
    (e.g. the AFL++ map of :mod:`harness.run.coverage`).  ``judge`` judges
    every outcome (default :func:`harness.run.judge.judge`; the wrong-code
    oracle plugs in here).  Use as a context manager, or call :meth:`close`.

    With a fork-server driver (``target.fork_server``) the driver process is
    a zygote and programs go to its current worker: a worker that crashes,
    hangs (killed with its process group) or is retired is replaced by a
    fresh fork, and the driver itself is restarted only when it dies.
    """

    def __init__(
        self, target: PersistentTarget, env: Optional[Mapping[str, str]] = None, *,
        settle: bool = False, judge: Callable[[Target, str, Outcome], Verdict] = judge,
    ) -> None:
        self.target = target
        # With a coverage map: return from run() only once the driver waits in
        # read() for the next program, so that the tail of this iteration
        # (after its answer) lands in this program's map, not racing the reader.
        self.settle = settle
        self.judge = judge
        self.extra_env = dict(env or {})
        self.stats = PersistentStats()
        self.proc: Optional[subprocess.Popen] = None
        self.worker: Optional[int] = None  # the fork server's current worker (pid)
        self.history: list[str] = []  # programs sent to the current driver or worker, in order
        self.last_output = b""  # the last answer's output, as the driver sent it
        self.answered = 0  # programs the current driver or worker answered
        self._stderr = None  # the driver's stderr: a temporary file
        self._buffer = b""
        self.last_position = 0  # of the last program, since its driver started
        self.last_history: list[str] = []  # the programs before it
        #: the fresh run's verdict when the last program judged was persistent-only
        self.last_fresh: Optional[Verdict] = None

    # -- the driver's life ----------------------------------------------------

    def _start(self) -> None:
        process = self.target.process
        env = {**os.environ, **process.env, **self.extra_env, PARENT_ENV: str(os.getpid())}
        self._stderr = tempfile.TemporaryFile(prefix="loomfuzz-driver-stderr-")
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self.target.driver,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=env,
                start_new_session=True,  # its own group: a timeout kills all of it
            )
        except OSError as e:
            raise DriverError(f"cannot run {self.target.driver[0]}: {e.strerror}") from None
        _set_limits(proc.pid, process.memory_mb)
        self.proc = proc
        self._buffer = b""
        self.history = []
        self.answered = 0
        self.worker = None
        expected = ZYGOTE if self.target.fork_server else HELLO
        try:
            hello = self._read(len(expected), time.monotonic() + self.target.start_timeout)
        except (EOFError, TimeoutError) as error:
            message = self._stderr_since(0).strip().splitlines()
            self._stop()
            errors = [line for line in message if "error: " in line]
            detail = (errors or message or [str(error) or type(error).__name__])[-1 if not errors else 0]
            raise DriverError(f"driver {self.target.driver[0]} did not start: {detail}") from None
        if hello != expected:
            self._stop()
            raise DriverError(f"driver {self.target.driver[0]} does not speak the protocol "
                              f"(it began with {hello!r}, not {expected!r})")
        self.stats.starts += 1
        self.stats.seconds_starting += time.monotonic() - started

    def _await_worker(self) -> None:
        """Read the next fork-server worker's greeting (``LFC1`` + pid)."""
        started = time.monotonic()
        try:
            head = self._read(8, started + self.target.start_timeout)
        except (EOFError, TimeoutError):
            self._stop()
            raise DriverError(f"driver {self.target.driver[0]} forked no worker") from None
        magic, pid = head[:4], _U32.unpack(head[4:])[0]
        if magic != WORKER:
            self.restart("protocol error")
            raise DriverError(f"driver {self.target.driver[0]} broke the protocol: {magic!r} "
                              f"instead of {WORKER!r}")
        self.worker = pid
        self.stats.workers += 1
        self.stats.seconds_starting += time.monotonic() - started

    def _stop(self) -> None:
        """End the driver (EOF, then SIGKILL to its group) and drop its pipes."""
        proc, self.proc = self.proc, None
        worker, self.worker = self.worker, None
        if proc is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            _kill_group(proc.pid)
            if worker is not None:
                _kill_group(worker)  # in a group of its own; it would die with the zygote anyway
            proc.wait()
            proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def restart(self, reason: str) -> None:
        """Stop the driver (fork server: retire its worker); the next program
        starts a new one."""
        if self.proc is None:
            return
        self.stats.restarts[reason] += 1
        if self.target.fork_server and self.worker is not None:
            try:
                self.proc.stdin.write(_U32.pack(RETIRE))
                self.proc.stdin.flush()
                head = self._read(8, time.monotonic() + 10.0)
                if head[:4] == ENDED:
                    self.worker = None
                    return
            except (OSError, EOFError, TimeoutError):
                pass
        self._stop()

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> "PersistentRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> Optional[int]:
        """The process that runs the programs: the worker of a fork server, else the driver."""
        if self.worker is not None:
            return self.worker
        return self.proc.pid if self.proc is not None else None

    # -- pipes ----------------------------------------------------------------

    def _read(self, n: int, deadline: float) -> bytes:
        """``n`` bytes from the driver's stdout; EOFError when it closes it,
        TimeoutError at ``deadline``."""
        fd = self.proc.stdout.fileno()
        while len(self._buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, max(65536, n - len(self._buffer)))
            if not chunk:
                raise EOFError
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def _stderr_size(self) -> int:
        return os.fstat(self._stderr.fileno()).st_size if self._stderr is not None else 0

    def _stderr_since(self, offset: int) -> str:
        if self._stderr is None:
            return ""
        size = self._stderr_size()
        data = os.pread(self._stderr.fileno(), max(0, size - offset), offset)
        return data.decode("utf-8", errors="replace")

    # -- one program ----------------------------------------------------------

    def run(self, text: str | bytes) -> Outcome:
        """One program through the driver; the same ``Outcome`` kinds as
        :func:`harness.run.process.run_program`.  ``text`` may be bytes (the
        ``--exec`` mode's requests, harness.execute.inprocess); the answer's
        output bytes, undecoded, are ``self.last_output``."""
        if self.proc is not None and self.answered >= self.target.restart_every:
            self.restart(f"every {self.target.restart_every}")
        if self.proc is None:
            self._start()
        # A fork server's next worker is greeted after the program is on its way:
        # the program waits in the pipe while the fork happens (no round trip).
        greet = self.target.fork_server and self.worker is None
        if greet:
            self.history = []
            self.answered = 0
        process = self.target.process
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        offset = self._stderr_size()
        self.history.append(text)
        start = time.monotonic()
        try:
            self.proc.stdin.write(_U32.pack(len(data)) + data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died between programs; the read below sees EOF and its stderr
        if greet:
            self._await_worker()
        deadline = start + process.timeout
        try:
            magic = self._read(4, deadline)
            if magic == ENDED and self.target.fork_server:
                (status,) = _U32.unpack(self._read(4, deadline))
                return self._worker_ended(status, start, offset)
            sequence, status, diag_len = _RESULT_REST.unpack(self._read(_RESULT_REST.size, deadline))
            if magic != RESULT or sequence != self.answered + 1 or status > 1:
                raise DriverError(
                    f"driver {self.target.driver[0]} broke the protocol: answer {magic!r} "
                    f"#{sequence} status {status} to program #{self.answered + 1}"
                )
            diagnostics = self._read(diag_len, deadline)
            (out_len,) = _U32.unpack(self._read(4, deadline))
            output = self._read(out_len, deadline)
        except EOFError:
            return self._died(start, offset)
        except TimeoutError:
            return self._timed_out(start, offset)
        except DriverError:
            self.restart("protocol error")
            raise
        duration = time.monotonic() - start
        self.last_output = output
        self.answered += 1
        self.stats.programs += 1
        self.stats.seconds_in_target += duration
        stderr = diagnostics.decode("utf-8", errors="replace") + self._stderr_since(offset)
        kind, code, sig, reason = classify(status, stderr)
        outcome = Outcome(kind, code, sig, output.decode("utf-8", errors="replace"),
                          stderr, duration, reason)
        if self.settle:
            self._wait_for_read()
        if kind is not OutcomeKind.ACCEPTED and kind is not OutcomeKind.REJECTED:
            # It answered but printed a crash or out-of-memory report (e.g. a
            # sanitizer that continues): do not trust its state any more.
            self.restart(kind.value)
        return outcome

    def _wait_for_read(self, limit: float = 1.0) -> None:
        """Until the driver blocks in read(2) again (/proc/PID/syscall), at most ``limit`` s."""
        path = f"/proc/{self.pid}/syscall"
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                with open(path, "rb") as f:
                    if f.read(16).split(b" ", 1)[0] == _READ_SYSCALL:
                        return
            except OSError:
                return  # no /proc, no permission or gone: nothing to wait for
            time.sleep(0.0002)

    def _ended(self, returncode: int, start: float, offset: int, *, timed_out: bool = False) -> Outcome:
        """The outcome of a program whose process died (``returncode`` as Popen's)."""
        duration = time.monotonic() - start
        stderr = self._stderr_since(offset)
        timeout = self.target.process.timeout
        kind, code, sig, reason = classify(returncode, stderr, timed_out=timed_out, timeout=timeout)
        if kind in (OutcomeKind.ACCEPTED, OutcomeKind.REJECTED):
            # It exited without answering: a crash of the driver whatever the status.
            kind, reason = OutcomeKind.CRASH, f"the driver exited with status {returncode} without answering"
        self.stats.programs += 1
        self.stats.seconds_in_target += duration
        return Outcome(kind, code, sig, "", stderr, duration, reason)

    def _worker_ended(self, status: int, start: float, offset: int, *, timed_out: bool = False) -> Outcome:
        """A fork-server worker ended while running a program: the zygote forks the next one."""
        self.worker = None
        returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        outcome = self._ended(returncode, start, offset, timed_out=timed_out)
        self.stats.restarts["timeout" if timed_out else outcome.kind.value] += 1
        return outcome

    def _died(self, start: float, offset: int) -> Outcome:
        proc = self.proc
        try:
            returncode = proc.wait(timeout=10.0)
        except subprocess.TimeoutExpired:  # closed stdout but lives on: make it a crash
            _kill_group(proc.pid)
            returncode = proc.wait()
        outcome = self._ended(returncode, start, offset)
        self.restart(outcome.kind.value)
        return outcome

    def _timed_out(self, start: float, offset: int) -> Outcome:
        if self.target.fork_server and self.worker is not None:
            _kill_group(self.worker)  # the worker and what it started; the zygote reports it
            try:
                head = self._read(8, time.monotonic() + 10.0)
            except (EOFError, TimeoutError):
                head = b""
            if head[:4] == ENDED:
                return self._worker_ended(_U32.unpack(head[4:])[0], start, offset, timed_out=True)
        proc = self.proc
        _kill_group(proc.pid)
        returncode = proc.wait()
        outcome = self._ended(returncode, start, offset, timed_out=True)
        self.restart("timeout")
        return outcome

    # -- judging, with confirmation -------------------------------------------

    def run_judged(self, text: str) -> Verdict:
        """Run and judge ``text``; a finding is re-run in a fresh process.

        Fresh process: with a fork server, a newly forked worker (the program
        is its first); a finding that was already the first program of its
        worker needs no second run.  Otherwise, the process-per-input target.
        Returns the fresh run's verdict when it confirms a finding (what
        process mode would report), else the persistent verdict marked
        ``persistent_only``.  ``self.last_position`` is the program's
        position since its driver (worker) started (1-based), and
        ``self.last_history`` the programs before it, for the sidecar.
        """
        process = self.target.process
        self.last_fresh = None
        outcome = self.run(text)
        verdict = self.judge(process, text, outcome)
        # history is reset only when the next driver starts: after a death it
        # still holds the programs that led to it
        position = len(self.history)
        self.last_position = position
        if not verdict.finding:
            return verdict
        self.last_history = self.history[:-1]
        if self.target.fork_server and position == 1:
            return verdict  # it ran in a process that had run nothing before: confirmed
        started = time.monotonic()
        if self.target.fork_server:
            if self.worker is not None:
                self.restart("confirmation")
            fresh = self.run(text)
        else:
            fresh = run_program(process, text)
        self.stats.confirmations += 1
        self.stats.seconds_confirming += time.monotonic() - started
        fresh_verdict = self.judge(process, text, fresh)
        if fresh_verdict.finding:
            return fresh_verdict
        self.stats.persistent_only += 1
        self.last_fresh = fresh_verdict
        return replace(
            verdict,
            persistent_only=True,
            why=f"persistent-only: {verdict.why} (a fresh process: {fresh.kind.value}, "
                f"{fresh.reason}; program {position} since the driver started)",
        )

    def evidence(self) -> "PersistentEvidence":
        """What a persistent-only finding's sidecar says of the last program judged:
        taken now, before the driver runs anything else."""
        return PersistentEvidence(self.target, self.last_position, tuple(self.last_history))

    def write_finding(self, directory, name: str, text: str, verdict: Verdict,
                      extra: dict | None = None, *, suffix: str) -> None:
        """:meth:`PersistentEvidence.write_finding` for the last program judged."""
        self.evidence().write_finding(directory, name, text, verdict, extra, suffix=suffix)


@dataclass(frozen=True)
class PersistentEvidence:
    """The driver's part of a persistent-only finding: the driver, the program's
    position since its driver (worker) started, the programs before it."""

    target: PersistentTarget
    position: int
    history: tuple[str, ...]

    def write_finding(self, directory, name: str, text: str, verdict: Verdict,
                      extra: dict | None = None, *, suffix: str) -> None:
        """:func:`harness.run.judge.write_finding` plus, for a persistent-only
        finding, ``persistent`` in ``NAME.json`` (driver command line, position,
        restart interval, history file) and ``NAME.history.txt`` (the programs
        before it since the driver started); ``extra``'s keys go into ``NAME.json`` too."""
        extra = dict(extra or {})
        if verdict.persistent_only:
            history_name = f"{name}.history.txt"
            path = Path(directory) / history_name
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{history_name}.tmp")
            tmp.write_text("\n// -----\n".join(self.history), encoding="utf-8")
            os.replace(tmp, path)
            extra["persistent"] = {
                **self.target.to_json(),
                "position": self.position,
                "history": history_name,
                "history_programs": len(self.history),
            }
        write_finding(directory, name, text, self.target.process, verdict, extra=extra or None, suffix=suffix)
