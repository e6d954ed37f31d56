"""The run registry and the reaper: the process groups of this process's target
runs in progress, killed at once by a stop, and by a small reaper process when
this process dies without running a line.

A target is its own session leader, so a group kill of its parent does not
reach it; if the parent itself dies without running a line (``SIGKILL``, OOM),
the reaper notices: the parent tells it each run's process group over a pipe
(the reaper notes the leader's start time), and at end of file (the parent is
gone) it kills the groups still registered whose leader is the same process
(start time checked: no stray kill after pid reuse).  The reaper lives in its
own session so that a kill of the campaign's group does not take it along,
reads in batches (a few wake-ups a second), and is started once per process,
at its first target run.  ``PR_SET_PDEATHSIG`` through ``preexec_fn`` would
cost a real ``fork`` of a large process per run instead of ``vfork``
(measured here: 1.6 ms more a run in a bare interpreter, several ms more in
one the size of a fuzz target), ``setpriv --pdeathsig`` an extra ``exec``
(1.4 ms); the reaper costs two short pipe writes a run.

This module imports only the standard library (fuzz targets import it at
start-up).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Optional

__all__ = ["kill_group", "kill_runs", "register", "unregister"]

#: Process groups (= leader pids) of the target runs in progress.  Plain dict
#: operations are atomic under the GIL, so a signal handler or the watcher
#: thread can read it while a runner thread changes it; no lock to deadlock on.
_runs: dict[int, None] = {}


def kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid`` (gone or not ours: nothing)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_runs() -> None:
    """SIGKILL the process group of every target run in progress."""
    for pgid in list(_runs):
        kill_group(pgid)


def register(pid: int) -> None:
    """The child group ``pid`` was just started: in the registry, and the reaper's."""
    _runs[pid] = None
    _reaper.started(pid)


def unregister(pid: int) -> None:
    """The child group ``pid`` is over (its leader reaped)."""
    _runs.pop(pid, None)
    _reaper.ended(pid)


# The reaper: reads "+ PGID" / "- PGID" lines in batches (a few wake-ups a
# second, not two a run) and notes each new run's start time; at end of file
# (its owner is gone) it kills the groups still registered whose leader is the
# same process as when it was noted.
_REAPER_CODE = r"""
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            line = f.read()
    except OSError:
        return None
    fields = line[line.rfind(b")") + 2:].split()
    return fields[19] if len(fields) > 19 else None
runs, pending = {}, b""
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    *lines, pending = (pending + chunk).split(b"\n")
    for line in lines:
        op, _, pid = line.partition(b" ")
        if op == b"+":
            runs[int(pid)] = None
        elif op == b"-":
            runs.pop(int(pid), None)
    for pid, started in list(runs.items()):
        if started is None:
            runs[pid] = start_time(pid) or b"gone"
    time.sleep(0.2)
for pid, started in runs.items():
    if start_time(pid) == started:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
"""


class _Reaper:
    """The per-process reaper of target runs (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: Optional[int] = None
        self._pid: Optional[int] = None  # the process the reaper belongs to (fork check)
        self._proc: Optional[subprocess.Popen] = None  # kept: Python warns about dropped children
        self._broken = False

    def _ensure(self) -> Optional[int]:
        if self._fd is not None and self._pid == os.getpid():
            return self._fd
        if self._broken or getattr(sys, "frozen", False):
            return None  # a PyInstaller build's executable is the fuzzer, not a Python
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                return self._fd
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _REAPER_CODE],
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True,  # out of reach of a kill of our process group
                )
            except OSError:
                self._broken = True  # runs still work; only the SIGKILL safety net is missing
                return None
            assert proc.stdin is not None
            # The pipe's write end stays ours alone: Popen made it close-on-exec.
            self._fd = os.dup(proc.stdin.fileno())
            os.set_inheritable(self._fd, False)
            proc.stdin.close()
            self._proc = proc
            self._pid = os.getpid()
            return self._fd

    def _send(self, line: str) -> None:
        fd = self._ensure()
        if fd is None:
            return
        try:
            os.write(fd, line.encode())  # < PIPE_BUF: atomic, no lock needed between threads
        except OSError:
            self._broken = True
            self._fd = None

    def started(self, pid: int) -> None:
        self._send(f"+ {pid}\n")

    def ended(self, pid: int) -> None:
        if self._fd is not None:
            self._send(f"- {pid}\n")


_reaper = _Reaper()
