"""Stop requests: a stop of this process's work kills its registered target runs
at once (a hanging target must not delay a stop by its time limit), and every
later or cut-short run raises :class:`Stopped`: its outcome is never judged, so
a killed run is never mistaken for an OOM or a crash.

Everything a campaign starts ends when the campaign ends.  A campaign is a
tree of processes: ``loomfuzz`` (the owner), the fuzz target script, in fork
mode libFuzzer's parent, a ``sh -c`` per job (libFuzzer runs jobs through
``system()``), the workers, and the targets the runner starts in their own
sessions.  Whatever ends the owner (a signal, ``SIGKILL``, the OOM killer),
none of them may keep running.  Three mechanisms, each covering what the
others cannot: the lifeline (:mod:`harness.run.lifeline`), the run registry
and the reaper (:mod:`harness.run.run_registry`: the runner registers every
target it starts through :func:`run_started` and :func:`run_ended`), and
critical sections (:mod:`harness.run.critical_sections`).

Stop requests come from signals or the lifeline; :func:`request_stop` counts
them: the first one stops gracefully, a second one stops at once.  What
"stopping" means for a process is its owner's business: a fuzz target exits
at its next input (:mod:`harness.fuzzing.stopping`), ``loomfuzz fuzz`` closes
the lifeline and waits for the tree (:mod:`harness.fuzzing.supervisor`), the
other commands raise :class:`Interrupted` in the main thread
(:func:`interrupt_handlers`).  :func:`harness.run.process_tree.kill_tree`
freezes (``SIGSTOP``) and then kills a whole process tree, found through
``/proc``, for the last resort.  No pid file is written anywhere.

This module imports only the standard library and :mod:`harness.run.run_registry`
(fuzz targets import it at start-up).
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

from harness.run import run_registry

__all__ = [
    "INTERRUPTED_EXIT",
    "STOP_SIGNALS",
    "Interrupted",
    "Stopped",
    "child_ended",
    "child_started",
    "interrupt_handlers",
    "request_stop",
    "run_ended",
    "run_started",
    "signal_name",
    "stop_reason",
    "stopping",
]

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
    run_registry.kill_runs()
    return count


# ---------------------------------------------------------------- target runs


def child_started(pid: int) -> None:
    """A child that leads its own process group ``pid`` (a target run, or a
    long-lived one such as a persistent driver) was just started: a stop
    request kills it, and so does the reaper if this process dies first."""
    run_registry.register(pid)
    if _stop.is_set():  # a stop came while it was being started
        run_registry.kill_group(pid)


def child_ended(pid: int) -> None:
    """The child group ``pid`` is over (its leader reaped)."""
    run_registry.unregister(pid)


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
        run_registry.kill_runs()
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
