"""The lifeline: a pipe whose end of file tells every process below its owner to
stop, even when the owner died by ``SIGKILL``.

An owner makes a pipe, keeps the write end to itself (close-on-exec, so no
child can hold it) and lets its children inherit the read end (its number and
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

This module imports only the standard library (fuzz targets import it at
start-up).
"""

from __future__ import annotations

import fcntl
import os
import select
import stat
from typing import Mapping, Optional

__all__ = ["LIFELINE_ENV", "Lifeline", "inherited_lifelines", "lifeline_ended", "signal_at_end"]

LIFELINE_ENV = "LOOMFUZZ_LIFELINE"


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
