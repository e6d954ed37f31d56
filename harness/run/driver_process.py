"""The life of one persistent driver process: started with the target's limits in
a session of its own, greeted, its fork-server workers awaited and retired, read
from with deadlines, its stderr kept in a file, stopped with its process group.

The driver dies with the harness: it gets ``LOOMFUZZ_PARENT_PID`` (the
harness' pid) and sets ``PR_SET_PDEATHSIG`` (SIGKILL), and EOF on its stdin
ends it too.  Note that Linux sends the parent-death signal when the *thread*
that started the driver exits: start it from a thread that lives as long as
the runner (the fuzz targets run everything on the main thread).
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
import time
from typing import Mapping, Optional, Self

from harness.run.driver_protocol import ENDED, HELLO, RETIRE, U32, WORKER, ZYGOTE, DriverError
from harness.run.persistent_stats import PersistentStats
from harness.run.persistent_target import PersistentTarget
from harness.run.process import _kill_group, _set_limits

__all__ = ["PARENT_ENV", "DriverProcess"]

PARENT_ENV = "LOOMFUZZ_PARENT_PID"


class DriverProcess:
    """One driver at a time for ``target``: :meth:`_start` it, :meth:`restart` it
    (a fork server: retire its worker), :meth:`close` it.

    ``env`` is added to the driver's environment on top of the target's
    (e.g. the AFL++ map of :mod:`harness.run.coverage`).  With a fork-server
    driver (``target.fork_server``) the driver process is a zygote and
    programs go to its current worker (:attr:`pid`).  Use as a context
    manager, or call :meth:`close`.
    """

    def __init__(self, target: PersistentTarget, env: Optional[Mapping[str, str]] = None) -> None:
        self.target = target
        self.extra_env = dict(env or {})
        self.stats = PersistentStats()
        self.proc: Optional[subprocess.Popen] = None
        self.worker: Optional[int] = None  # the fork server's current worker (pid)
        self.history: list[str] = []  # programs sent to the current driver or worker, in order
        self.answered = 0  # programs the current driver or worker answered
        self._stderr = None  # the driver's stderr: a temporary file
        self._buffer = b""

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
        magic, pid = head[:4], U32.unpack(head[4:])[0]
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
                self.proc.stdin.write(U32.pack(RETIRE))
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

    def __enter__(self) -> Self:
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
