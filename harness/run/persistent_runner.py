"""Many programs -> Outcomes through one long-lived driver (native/), restarted when
it crashes, hangs, runs out of memory or has answered ``restart_every`` programs,
and every finding confirmed in a fresh process.

The process-per-input runner (:mod:`harness.run.process`) pays the target's
start-up for every program (about 35 ms of ``mlir-opt-22``'s 40 ms).  A
*driver* speaking the protocol of :mod:`harness.run.driver_protocol` pays it
once: the harness starts it (:mod:`harness.run.driver_process`), sends it
programs one after another, and restarts it.

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
Its sidecar (:mod:`harness.run.persistent_evidence`) names the driver, the
position of the program since the driver started, and ``NAME.history.txt``:
the programs the driver ran before it.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import replace
from typing import Callable, Mapping, Optional

from harness.run.driver_process import DriverProcess
from harness.run.driver_protocol import ENDED, RESULT, RESULT_REST, U32, DriverError
from harness.run.judge import judge
from harness.run.outcome import classify, Outcome, OutcomeKind, Verdict
from harness.run.persistent_evidence import PersistentEvidence
from harness.run.persistent_target import PersistentTarget
from harness.run.process import _kill_group, run_program
from harness.targets.target import Target

__all__ = ["PersistentRunner"]

_READ_SYSCALL = {"aarch64": b"63", "arm64": b"63"}.get(os.uname().machine, b"0")  # x86_64: 0


class PersistentRunner(DriverProcess):
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
        super().__init__(target, env)
        # With a coverage map: return from run() only once the driver waits in
        # read() for the next program, so that the tail of this iteration
        # (after its answer) lands in this program's map, not racing the reader.
        self.settle = settle
        self.judge = judge
        self.last_output = b""  # the last answer's output, as the driver sent it
        self.last_position = 0  # of the last program, since its driver started
        self.last_history: list[str] = []  # the programs before it
        #: the fresh run's verdict when the last program judged was persistent-only
        self.last_fresh: Optional[Verdict] = None

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
            self.proc.stdin.write(U32.pack(len(data)) + data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died between programs; the read below sees EOF and its stderr
        if greet:
            self._await_worker()
        deadline = start + process.timeout
        try:
            magic = self._read(4, deadline)
            if magic == ENDED and self.target.fork_server:
                (status,) = U32.unpack(self._read(4, deadline))
                return self._worker_ended(status, start, offset)
            sequence, status, diag_len = RESULT_REST.unpack(self._read(RESULT_REST.size, deadline))
            if magic != RESULT or sequence != self.answered + 1 or status > 1:
                raise DriverError(
                    f"driver {self.target.driver[0]} broke the protocol: answer {magic!r} "
                    f"#{sequence} status {status} to program #{self.answered + 1}"
                )
            diagnostics = self._read(diag_len, deadline)
            (out_len,) = U32.unpack(self._read(4, deadline))
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
                return self._worker_ended(U32.unpack(head[4:])[0], start, offset, timed_out=True)
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

    def evidence(self) -> PersistentEvidence:
        """What a persistent-only finding's sidecar says of the last program judged:
        taken now, before the driver runs anything else."""
        return PersistentEvidence(self.target, self.last_position, tuple(self.last_history))

    def write_finding(self, directory, name: str, text: str, verdict: Verdict,
                      extra: dict | None = None, *, suffix: str) -> None:
        """:meth:`PersistentEvidence.write_finding` for the last program judged."""
        self.evidence().write_finding(directory, name, text, verdict, extra, suffix=suffix)
