"""One program through one fresh target process: text in, ``Outcome`` out.

Each run starts the target in its own session (so its whole process group can
be killed on timeout), applies ``RLIMIT_AS`` (``memory_mb``) and
``RLIMIT_CORE=0`` with ``prlimit`` right after the exec and before the program
is written to stdin, and reads both pipes with ``communicate``: no shell, no
temporary files.  Every run is registered with :mod:`harness.run.stop_requests`:
a stop request kills it at once (``run_program`` then raises
``stop_requests.Stopped`` instead of judging a killed run), and if this process
dies without a word its reaper kills it.
"""

from __future__ import annotations

import os
import resource
import signal as _signal
import subprocess
import time

from harness.run import stop_requests
from harness.run.outcome import Outcome, classify
from harness.targets.target import Target, TargetNotFound

__all__ = ["run_program"]


def _set_limits(pid: int, memory_mb: int | None) -> None:
    try:
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
        if memory_mb is not None:
            n = int(memory_mb) << 20
            resource.prlimit(pid, resource.RLIMIT_AS, (n, n))
    except ProcessLookupError:
        pass  # already gone: it died before reading its input


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, _signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_program(target: Target, text: str) -> Outcome:
    """Run ``target`` on one program ``text`` (given on stdin) and classify."""
    data = text.encode("utf-8")
    env = {**os.environ, **target.env} if target.env else None
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            target.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as e:
        raise TargetNotFound(f"cannot run {target.argv[0]}: {e.strerror}") from None
    stop_requests.run_started(proc.pid)  # a stop kills it; a reaper kills it if we die
    _set_limits(proc.pid, target.memory_mb)
    timed_out = False
    try:
        out, err = proc.communicate(data, timeout=target.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        try:
            out, err = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            # something left the group and holds our pipes: stop waiting
            proc.kill()
            for pipe in (proc.stdout, proc.stderr):
                if pipe:
                    pipe.close()
            proc.wait()
            out, err = b"", b""
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        stop_requests.child_ended(proc.pid)
        raise
    duration = time.monotonic() - start
    if timed_out:
        # reap anything still alive in the group (the leader is gone already)
        _kill_group(proc.pid)
    stop_requests.run_ended(proc.pid)  # raises stop_requests.Stopped if a stop cut the run short
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    kind, status, sig, reason = classify(
        proc.returncode, stderr, timed_out=timed_out, timeout=target.timeout
    )
    return Outcome(
        kind=kind,
        returncode=status,
        signal=sig,
        stdout=stdout,
        stderr=stderr,
        duration=duration,
        reason=reason,
    )


