"""``loomfuzz fuzz``'s hold on its campaign: one process tree, stopped whole.

:class:`Supervisor` starts the fuzz target script

* in a process group of its own (``process_group=0``), so that a terminal's
  Ctrl-C reaches ``loomfuzz`` alone and the stop goes through one path, and
  the group can be swept at the end;
* with a lifeline (:class:`harness.run.lifeline.Lifeline`): closing it, or
  ``loomfuzz`` dying however it dies, tells every process of the campaign to
  stop (:mod:`harness.fuzzing.stopping`);
* with stdin from ``/dev/null`` (a background group must not read the terminal).

While the campaign runs, SIGINT, SIGTERM and SIGHUP to ``loomfuzz`` close the
lifeline: the campaign winds down within moments (runs killed, findings
being written finished, summary lines printed) and ``loomfuzz`` prints its
summary and exits with 128 + the signal.  A second signal, or
:data:`ESCALATE` seconds without an end, freezes and kills the whole tree
(:func:`harness.run.process_tree.kill_tree`; the targets are in it, their
sessions notwithstanding).  When the fuzz target has exited, whatever is left
in its process group is killed (while the exited leader, not yet reaped,
keeps the group id from being reused) and libFuzzer's fork-mode temporary
folder, if its parent could not remove it, is removed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from typing import Mapping, Optional, Sequence

from harness.run import lifeline
from harness.run import process_tree
from harness.run import stop_requests

__all__ = ["ESCALATE", "Supervisor"]

#: Seconds after the first stop signal before the campaign's tree is killed.
ESCALATE = 7.0


class Supervisor:
    """Use as a context manager around :meth:`start` and the reading of the output."""

    def __init__(self, escalate: float = ESCALATE) -> None:
        self.escalate = escalate
        self.proc: Optional[subprocess.Popen] = None
        self.signum: Optional[int] = None  # the first stop signal received
        self.killed = False  # the tree had to be killed
        self._lifeline: Optional[lifeline.Lifeline] = None
        self._timer: Optional[threading.Timer] = None
        self._previous: dict[int, object] = {}

    # ------------------------------------------------------------ context

    def __enter__(self) -> "Supervisor":
        if threading.current_thread() is threading.main_thread():
            for signum in stop_requests.STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:  # nohup: SIGHUP stays ignored
                    self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None and self.proc is not None and self.proc.poll() is None:
            self.kill()  # loomfuzz itself failed: take the campaign down with it
        self.finish()  # (a stop's escalation timer still runs meanwhile)
        if self._timer is not None:
            self._timer.cancel()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if self._lifeline is not None:
            self._lifeline.close()

    # -------------------------------------------------------------- start

    def start(self, command: Sequence[str], env: Mapping[str, str], **popen) -> subprocess.Popen:
        self._lifeline = lifeline.Lifeline()
        self.proc = subprocess.Popen(
            list(command),
            env={**env, **self._lifeline.environment(env)},
            pass_fds=self._lifeline.pass_fds,
            process_group=0,
            stdin=subprocess.DEVNULL,
            **popen,
        )
        self._lifeline.children_started()
        return self.proc

    # ------------------------------------------------------------- stopping

    def _on_signal(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum = signum
            self.stop()
        else:
            self.kill()

    def stop(self) -> None:
        """Ask the campaign to stop (idempotent); kill it if it has not ended in time."""
        if self._lifeline is not None:
            self._lifeline.close()
        if self._timer is None:
            self._timer = threading.Timer(self.escalate, self.kill)
            self._timer.daemon = True
            self._timer.start()

    def kill(self) -> None:
        """Freeze and kill the campaign's whole process tree now."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        self.killed = True
        if self._lifeline is not None:
            self._lifeline.close()
        process_tree.kill_tree(proc.pid, include_root=True)

    def finish(self) -> None:
        """After the fuzz target ended: sweep its group, its temporary folder."""
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:
            try:
                # Exited but not reaped: its group id cannot be reused meanwhile.
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        fork_dir = os.path.join(os.environ.get("TMPDIR") or "/tmp",
                                f"libFuzzerTemp.FuzzWithFork{proc.pid}.dir")
        shutil.rmtree(fork_dir, ignore_errors=True)
