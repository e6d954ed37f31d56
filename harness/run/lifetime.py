"""Process lifetime: everything a campaign starts ends when the campaign ends.

A campaign is a tree of processes: ``loomfuzz`` (the owner), the fuzz target
script, in fork mode libFuzzer's parent, a ``sh -c`` per job (libFuzzer runs
jobs through ``system()``), the workers, and the targets the runner starts in
their own sessions.  Whatever ends the owner (a signal, ``SIGKILL``, the OOM
killer), none of them may keep running.  Three mechanisms, each covering what
the others cannot:

**The lifeline** (:class:`Lifeline`, :func:`inherited_lifelines`).  An
owner makes a pipe, keeps the write end to itself (close-on-exec, so no child
can hold it) and lets its children inherit the read end (its number and
inode in ``$LOOMFUZZ_LIFELINE``).  A child's watcher thread blocks reading
it: end of file means the owner closed it on purpose (a stop) or died, even
by ``SIGKILL``, because the kernel closes a dead process's descriptors.
Unlike ``PR_SET_PDEATHSIG`` it does not depend on the thread that forked a
child (pdeathsig fires when that *thread* exits) nor on a direct parent link:
the read end passes untouched through libFuzzer's ``system()`` and ``sh -c``
to the workers.  A process with children of its own (libFuzzer's fork-mode
parent) adds a lifeline of its own to the variable: its workers watch both
the campaign's and their parent's, so the death of either stops them.  A
process whose main thread never returns to Python (that same fork-mode
parent, inside libFuzzer's C++ loop, holding the GIL) cannot run a watcher;
:func:`signal_at_end` has the kernel deliver a signal there instead
(``O_ASYNC`` with ``F_SETSIG`` on the pipe).  Each fd is checked by inode, so
a stale variable in an unrelated process's environment is ignored.

**The run registry and the reaper** (:func:`run_started`,
:func:`run_ended`).  The runner registers every target it starts.  A stop
request kills the registered process groups at once (a hanging target must
not delay a stop by its time limit), and every later or cut-short run raises
:class:`Stopped`: its outcome is never judged, so a killed run is never
mistaken for an OOM or a crash.  A target is its own session leader, so a
group kill of its parent does not reach it; if the parent itself dies without
running a line (``SIGKILL``, OOM), a small reaper process notices: the parent
tells it each run's process group over a pipe (the reaper notes the leader's
start time), and at end of file (the parent is gone) it kills the groups
still registered whose leader is the same process (start time checked: no
stray kill after pid reuse).  The reaper lives in its own session so that a
kill of the campaign's group does not take it along, reads in batches (a few
wake-ups a second), and is started once per process, at its first target run.
``PR_SET_PDEATHSIG`` through ``preexec_fn`` would cost a real ``fork`` of a
large process per run instead of ``vfork`` (measured here: 1.6 ms more a
run in a bare interpreter, several ms more in one the size of a fuzz
target), ``setpriv --pdeathsig`` an extra ``exec`` (1.4 ms); the reaper costs
two short pipe writes a run.

**Critical sections** (:func:`enter_critical`, :func:`begin_forced_exit`).  Writing a
finding must finish once started (``crash-<sha1>`` with both sidecars, or
nothing): a forced exit waits for the section to end.

Stop requests come from signals or the lifeline; :func:`request_stop` counts
them: the first one stops gracefully, a second one stops at once.  What
"stopping" means for a process is its owner's business: a fuzz target exits
at its next input (:mod:`harness.fuzzing.stopping`), ``loomfuzz fuzz`` closes
the lifeline and waits for the tree (:mod:`harness.fuzzing.supervisor`), the
other commands raise :class:`Interrupted` in the main thread
(:func:`interrupt_handlers`).  :func:`kill_tree` freezes (``SIGSTOP``)
and then kills a whole process tree, found through ``/proc``, for the last
resort.  No pid file is written anywhere.

This module imports only the standard library (fuzz targets import it at
start-up).
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import stat
import subprocess
import sys
import threading
from contextlib import contextmanager
from typing import Iterator, Mapping, Optional

__all__ = [
    "INTERRUPTED_EXIT",
    "LIFELINE_ENV",
    "STOP_SIGNALS",
    "Interrupted",
    "Lifeline",
    "Stopped",
    "begin_forced_exit",
    "child_ended",
    "child_started",
    "descendants",
    "enter_critical",
    "inherited_lifelines",
    "interrupt_handlers",
    "kill_runs",
    "kill_tree",
    "lifeline_ended",
    "request_stop",
    "run_ended",
    "run_started",
    "signal_at_end",
    "signal_name",
    "stop_reason",
    "stopping",
]

LIFELINE_ENV = "LOOMFUZZ_LIFELINE"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: libFuzzer's -interrupt_exitcode: a fork-mode parent stops all when a worker exits with it.
INTERRUPTED_EXIT = 72


class Stopped(Exception):
    """A target run was refused or cut short because this process is stopping."""


class Interrupted(KeyboardInterrupt):
    """A stop signal, raised in the main thread; exit status 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# ------------------------------------------------------------------ stop state

_stop = threading.Event()
_requests = 0
_reason = ""


def stopping() -> bool:
    """Whether a stop was requested in this process."""
    return _stop.is_set()


def stop_reason() -> str:
    """Why the first stop was requested ("" when not stopping)."""
    return _reason


def request_stop(reason: str, *, escalates: bool = True) -> int:
    """Stop this process's work: kill its target runs now, refuse new ones.  Safe from any thread and from signal handlers.
    Returns how many stop requests there were (2 or more: stop at once).
    A request that does not ``escalate`` (the lifeline's end, which follows
    any stop of the owner) only counts when it is the first."""
    global _requests, _reason
    if _requests and not escalates:
        return _requests
    _requests += 1
    count = _requests
    if count == 1:
        _reason = reason
    _stop.set()
    kill_runs()
    return count


# ---------------------------------------------------------------- target runs

#: Process groups (= leader pids) of the target runs in progress.  Plain dict
#: operations are atomic under the GIL, so a signal handler or the watcher
#: thread can read it while a runner thread changes it; no lock to deadlock on.
_runs: dict[int, None] = {}


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_runs() -> None:
    """SIGKILL the process group of every target run in progress."""
    for pgid in list(_runs):
        _kill_group(pgid)


def child_started(pid: int) -> None:
    """A child that leads its own process group ``pid`` (a target run, or a
    long-lived one such as a persistent driver) was just started: a stop
    request kills it, and so does the reaper if this process dies first."""
    _runs[pid] = None
    _reaper.started(pid)
    if _stop.is_set():  # a stop came while it was being started
        _kill_group(pid)


def child_ended(pid: int) -> None:
    """The child group ``pid`` is over (its leader reaped)."""
    _runs.pop(pid, None)
    _reaper.ended(pid)


def run_started(pid: int) -> None:
    """A target run (leader of its own process group ``pid``) was just started."""
    child_started(pid)


def run_ended(pid: int) -> None:
    """The target run ``pid`` is over (reaped).  Raises :class:`Stopped` when
    this process is stopping: the run may have been killed by the stop, its
    outcome means nothing."""
    child_ended(pid)
    if _stop.is_set():
        raise Stopped(f"stopping ({_reason})")


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


# ---------------------------------------------------------- critical sections

_critical = 0
_exiting = False
_gate = threading.Lock()  # orders critical sections against a forced exit (threads only)


def enter_critical() -> bool:
    """Enter a critical section that lasts until the process exits (a fuzz
    target writing a finding: libFuzzer writes ``crash-<sha1>`` and exits).
    False when a forced exit has begun: do not start the work."""
    global _critical
    with _gate:
        if _exiting:
            return False
        _critical += 1
        return True


def begin_forced_exit() -> bool:
    """Claim the right to end the process now; False while a critical section
    is open (the work in it ends the process or leaves it soon)."""
    global _exiting
    with _gate:
        if _critical:
            return False
        _exiting = True
        return True


# ------------------------------------------------------------------- lifeline


class Lifeline:
    """The owner's end of a lifeline for its children (see the module docstring).

    :meth:`environment` goes into the children's environment (it keeps the
    lifelines this process inherited, so a grandchild watches every link
    above it); the read end must reach them (``pass_fds=lifeline.pass_fds``
    for ``subprocess``; it is inheritable, so ``system()`` passes it too).
    :meth:`close` (or the owner's death) tells every child holding it to stop.
    """

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()  # both close-on-exec
        os.set_inheritable(read_fd, True)
        self.read_fd: Optional[int] = read_fd
        self.write_fd: Optional[int] = write_fd
        self.token = f"{read_fd}:{os.fstat(read_fd).st_ino}"

    def environment(self, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
        inherited = environ.get(LIFELINE_ENV, "").split()
        return {LIFELINE_ENV: " ".join([*inherited, self.token])}

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self.read_fd,) if self.read_fd is not None else ()

    def children_started(self) -> None:
        """Drop our copy of the read end (once the children that need it exist)."""
        if self.read_fd is not None:
            os.close(self.read_fd)
            self.read_fd = None

    def close(self) -> None:
        """Tell the children to stop (idempotent)."""
        fd, self.write_fd = self.write_fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    @property
    def closed(self) -> bool:
        return self.write_fd is None


def inherited_lifelines(environ: Mapping[str, str] = os.environ) -> list[int]:
    """The read ends of the lifelines this process inherited (each checked by
    inode: a stale variable naming some other descriptor is ignored)."""
    fds = []
    for token in environ.get(LIFELINE_ENV, "").split():
        fd_text, _, inode = token.partition(":")
        if not fd_text.isdigit() or not inode.isdigit():
            continue
        try:
            st = os.fstat(int(fd_text))
        except OSError:
            continue
        if st.st_ino == int(inode) and stat.S_ISFIFO(st.st_mode):
            fds.append(int(fd_text))
    return fds


def signal_at_end(fd: int, signum: int) -> None:
    """Have the kernel send ``signum`` to this process when the lifeline ``fd``
    reaches end of file (``O_ASYNC``, ``F_SETSIG``): for a process whose main
    thread never returns to Python and so runs neither handlers nor threads."""
    fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(fd, getattr(fcntl, "F_SETSIG", 10), signum)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)


def lifeline_ended(fd: int) -> bool:
    """Whether the lifeline ``fd`` is at end of file right now (non-blocking)."""
    readable, _, _ = select.select([fd], [], [], 0)
    if not readable:
        return False
    try:
        return os.read(fd, 1) == b""
    except OSError:
        return True


# ----------------------------------------------------------- process trees


def _parents() -> dict[int, int]:
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                line = f.read()
        except OSError:
            continue
        fields = line[line.rfind(b")") + 2:].split()
        if len(fields) > 1:
            parents[int(name)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first), from /proc."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    out, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(0), ()):
            out.append(child)
            queue.append(child)
    return out


def kill_tree(pid: int, *, include_root: bool = False) -> int:
    """SIGKILL every descendant of ``pid`` (and ``pid`` itself if asked).

    The tree is frozen first (SIGSTOP, repeated until no new process appears:
    a stopped process cannot fork), then killed; killing first would let a
    parent's death reparent its children to init, out of sight.  Returns the
    number of processes killed."""
    frozen: list[int] = []
    seen: set[int] = set()
    for _ in range(50):
        found = [p for p in descendants(pid) if p not in seen]
        if include_root and pid not in seen:
            found.insert(0, pid)
        if not found:
            break
        for p in found:
            seen.add(p)
            try:
                os.kill(p, signal.SIGSTOP)
                frozen.append(p)
            except (ProcessLookupError, PermissionError):
                pass
    for p in frozen:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(frozen)


# ------------------------------------------------ commands run in the owner


@contextmanager
def interrupt_handlers() -> Iterator[None]:
    """For commands that run targets in this process (``triage``): SIGINT,
    SIGTERM and SIGHUP kill the target runs in progress and raise
    :class:`Interrupted` in the main thread (pool threads see :class:`Stopped`);
    a second signal exits at once (status 128 + signal; the runs killed, and
    the reaper kills any that a thread started meanwhile).  A signal ignored
    at start-up (``nohup``) stays ignored.  The previous handlers are restored
    on the way out.  Outside the main thread: no-op."""

    def handler(signum: int, frame) -> None:
        if request_stop(signal_name(signum)) == 1:
            raise Interrupted(signum)
        kill_runs()
        os._exit(128 + signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS
                if signal.getsignal(signum) is not signal.SIG_IGN}  # nohup: SIGHUP stays ignored
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
