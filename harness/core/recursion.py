"""The one place the core changes the interpreter's recursion limit.

Every pass over a derivation tree (the walk, the render pass, the encoder, the
node lister, the ranking) recurses once per tree level, so a grammar whose depth
budget nears the interpreter's limit (1000 by default) needs a higher one while
such a pass runs.  The limit is process-wide and threads share it, so it is
changed only here, through :func:`deep_recursion`:

* it is *raised* for the duration of a ``with`` block and restored when the last
  block open in any thread closes (a lock and a count of the open blocks' needs:
  it is never lowered under what an open block asked for, so one thread leaving
  cannot cut another off mid-walk);
* code that does not need more than the limit the process started with never
  enters it (:func:`guarded` returns the function itself), so the common case
  costs nothing on the hot paths.

What the limit was when no block was open (``baseline``) is what it is restored
to; a caller that sets the limit itself outside any block moves that baseline.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import Counter
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable)

_lock = threading.Lock()
_open: Counter[int] = Counter()  # the limits the open blocks asked for
_baseline: list[int] = []  # the limit before the first open block (empty: none open)


def frames_for(depth: int) -> int:
    """The recursion limit a pass over trees ``depth`` levels deep asks for (two frames
    a level: a cached subtree's text is one call deeper; room for the caller's stack)."""
    return depth * 2 + 200


@contextmanager
def deep_recursion(limit: int) -> Iterator[None]:
    """Within the block, the recursion limit is at least ``limit`` (never lowered);
    after the last open block closes, it is what it was before the first opened."""
    with _lock:
        if not _open:
            _baseline[:] = [sys.getrecursionlimit()]
        _open[limit] += 1
        if limit > sys.getrecursionlimit():
            sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        with _lock:
            _open[limit] -= 1
            if not _open[limit]:
                del _open[limit]
            wanted = max(max(_open), _baseline[0]) if _open else _baseline.pop()
            if wanted != sys.getrecursionlimit():
                sys.setrecursionlimit(wanted)


def tree_depth(grammar) -> int:
    """How deep a tree of ``grammar`` can be: its depth budget when it is recursive,
    else its deepest tree."""
    return grammar.max_depth if grammar.max_bytes is None else grammar.deepest[grammar.start]


def guarded(function: F, depth: int | None) -> F:
    """``function`` run inside :func:`deep_recursion` when trees ``depth`` levels deep
    (None: bounded by something else, never deep) need more than the limit outside
    any block; else ``function`` itself (no cost)."""
    if depth is None:
        return function
    limit = frames_for(depth)
    with _lock:
        outside = _baseline[0] if _baseline else sys.getrecursionlimit()
    if limit <= outside:
        return function

    @functools.wraps(function)
    def deep(*args, **kwargs):
        with deep_recursion(limit):
            return function(*args, **kwargs)

    return deep  # type: ignore[return-value]
