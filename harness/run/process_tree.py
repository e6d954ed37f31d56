"""A whole process tree, found through ``/proc``: its live descendants, and the last
resort that freezes (``SIGSTOP``) and then kills all of it.

This module imports only the standard library (fuzz targets import it at
start-up).
"""

from __future__ import annotations

import os
import signal

__all__ = ["descendants", "kill_tree"]


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
