"""How a fuzz target process stops: at a safe point, whole, and with its children.

The fuzz target scripts call :func:`guard` before ``atheris.Setup``.  A stop
request is a SIGINT, SIGTERM or SIGHUP, or the end of a lifeline inherited
from ``loomfuzz fuzz`` or from libFuzzer's fork-mode parent (the owner
closed it, or died: see :mod:`harness.run.lifeline`).

A process that runs inputs (single mode, a fork-mode worker, a merge's inner
process).  Python runs signal handlers only in the main thread between
bytecodes, so the handlers do nothing but wake, through
``signal.set_wakeup_fd``, a watcher thread that also reads the lifelines.

* First request: the target run in progress is killed at once (the runner
  drops its outcome); the process exits at its next input
  (:func:`exit_if_stopping`) or when the killed run returns
  (:func:`exit_stopped`), after its summary line, with libFuzzer's interrupt
  status 72.  A finding already being written (a critical section,
  ``harness.run.critical_sections.enter_critical``) is finished: libFuzzer then writes
  ``crash-<sha1>`` and ends the process itself.
* A second signal, or :data:`GRACE` seconds after the first request: the
  watcher ends the process itself, still never in the middle of a finding.

libFuzzer's fork-mode parent runs no input, and its main thread stays in
C++ holding the GIL: no Python handler or thread would ever run there.  So it
needs none: its workers inherit the campaign's lifeline (and stop with 72 when
it ends: libFuzzer's parent then stops its other jobs, removes its temporary
folder and exits 72 by itself), plus one of the parent's own, which ends
when the parent dies however it dies.  The kernel raises SIGUSR1 (libFuzzer's
graceful-exit request, ``O_ASYNC``/``F_SETSIG`` on the lifeline) in the parent
at the campaign's end, which ends a corpus merge between its attempts.  A
SIGINT or SIGTERM sent to the parent directly goes to libFuzzer's own handler
(temporary folder removed, ``_Exit(72)``; its workers see its lifeline end).

The handlers of a process that runs inputs are Python's, so libFuzzer
installs none of its own for those signals (it only replaces default
dispositions): its immediate ``_Exit`` on SIGTERM would cut a finding in half
and orphan the running target.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from typing import Callable, NoReturn, Optional, Sequence

from harness.fuzzing.libfuzzer import flag_value
from harness.run import critical_sections
from harness.run import lifeline
from harness.run import run_registry
from harness.run import stop_requests

__all__ = ["GRACE", "exit_if_stopping", "exit_stopped", "guard", "is_fork_parent"]

#: Seconds a stopping process that runs inputs has to reach a safe point.
GRACE = 3.0

_summary: Callable[[], None] = lambda: None
_children: Optional[lifeline.Lifeline] = None


def is_fork_parent(flags: Sequence[str]) -> bool:
    """Whether these libFuzzer flags make a fork-mode parent (-fork=N / -jobs=N)."""
    return any(flag_value(flags, name) not in (None, "", "0") for name in ("fork", "jobs"))


def _ignore(signum: int, frame) -> None:
    """The Python-level handler: the watcher thread does the work."""


def guard(flags: Sequence[str], summary: Callable[[], None]) -> None:
    """Make this fuzz target process obey stop requests (see the module docstring).

    ``flags`` are libFuzzer's; ``summary`` prints the summary line (once)."""
    global _summary, _children
    _summary = summary
    lifelines = lifeline.inherited_lifelines()
    if any(lifeline.lifeline_ended(fd) for fd in lifelines):
        # The campaign ended while this process was starting: leave before fuzzing.
        stop_requests.request_stop("the campaign ended")
        exit_stopped()
    if is_fork_parent(flags):
        _guard_fork_parent(flags, lifelines)
        return
    for fd in lifelines:
        os.set_inheritable(fd, False)  # the targets have no use for them
    os.environ.pop(lifeline.LIFELINE_ENV, None)

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    # A signal this process was started with ignored (nohup, a background job)
    # stays ignored; it still gets our handler, or libFuzzer would install its own.
    obeyed = {s for s in stop_requests.STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    for signum in stop_requests.STOP_SIGNALS:
        signal.signal(signum, _ignore)
    threading.Thread(target=_watch, args=(lifelines, wake_read, obeyed),
                     name="loomfuzz-stop-watcher", daemon=True).start()


def _guard_fork_parent(flags: Sequence[str], lifelines: Sequence[int]) -> None:
    """libFuzzer's fork-mode parent: its main thread stays in C and holds the
    GIL, so neither a Python handler nor a Python thread would ever run."""
    global _children
    # The workers watch the campaign's lifelines themselves (they stay
    # inheritable) and one of ours: if this process dies, they stop too.
    _children = lifeline.Lifeline()
    os.environ.update(_children.environment())
    if flag_value(flags, "handle_usr1") != "0":
        # At the campaign's end the kernel raises SIGUSR1, libFuzzer's
        # graceful-exit request: it ends a corpus merge between attempts (the
        # jobs end by themselves: their workers see the same end of file).
        for fd in lifelines:
            lifeline.signal_at_end(fd, signal.SIGUSR1)
    # SIGINT and SIGTERM: libFuzzer's own handler (it removes its temporary
    # folder and exits; the workers see our lifeline end).  It installs one
    # only where the disposition is the default, and Python set SIGINT's.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _watch(lifelines: Sequence[int], wake: int, obeyed: set) -> None:
    fds = [wake, *lifelines]
    deadline: Optional[float] = None
    while True:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select(fds, [], [], timeout)
        if not readable:
            _force_exit()  # the grace period is over
            deadline = time.monotonic() + 0.1  # a finding being written: look again soon
            continue
        requests: list[tuple[str, bool]] = []
        for fd in readable:
            if fd == wake:
                for signum in os.read(wake, 256):
                    if signum in obeyed:
                        requests.append((stop_requests.signal_name(signum), True))
                continue
            try:
                data = os.read(fd, 1)
            except OSError:
                data = b""
            if not data:
                fds.remove(fd)
                requests.append(("the campaign ended", False))
        for reason, escalates in requests:
            already = stop_requests.stopping()
            count = stop_requests.request_stop(reason, escalates=escalates)
            if not already:
                deadline = time.monotonic() + GRACE
            elif count > 1 and escalates:
                _force_exit()
                deadline = time.monotonic() + 0.1


def exit_if_stopping() -> None:
    """Call where the process is at a safe point (the start of an input)."""
    if stop_requests.stopping():
        exit_stopped()


_leaving = threading.Lock()  # the main thread and the watcher may both get here


def exit_stopped() -> NoReturn:
    """End this process now: runs killed, summary line printed, status 72."""
    run_registry.kill_runs()
    if not _leaving.acquire(blocking=False):
        while True:  # the other thread is printing the summary and ends the process
            time.sleep(1)
    try:
        _summary()
    except Exception:  # noqa: BLE001 - leaving anyway
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(stop_requests.INTERRUPTED_EXIT)


def _force_exit() -> None:
    if critical_sections.begin_forced_exit():
        exit_stopped()
    # else: a finding is being written; libFuzzer ends the process right after
