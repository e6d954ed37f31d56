"""The one place the core changes the interpreter's recursion limit.

Every pass over a derivation tree (the walk, the render pass, the encoder, the
node lister, the ranking) recurses once per tree level, and so does Python's own
comparison of two trees (tuples compare element by element, counted against
the same limit).  A grammar whose depth budget nears the interpreter's limit
(1000 by default) needs a higher one wherever its trees go.

**Raised once, only upward, never restored** (:func:`allow_trees_of_depth`):
when a grammar whose trees can be that deep is compiled
(:func:`harness.core.grammar.compile_grammar`) or ranked to a deeper bound
(:class:`harness.core.rank.Ranking`).  Restoring it after each pass would be
wrong: the trees outlive the pass (a caller compares, hashes, renders, pickles
them later, in any thread), and the limit is process-wide, so lowering it when
one thread finishes would cut off another still deep in a walk.  Raising only,
under a lock, is safe for every thread; a grammar of the usual depth never
changes it.

:func:`deep_recursion` is for a computation whose results carry no depth (the
compiler's own walk over the grammar's nonterminals): it raises the limit for a
``with`` block and restores it when the last open block, in any thread, closes.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_open: Counter[int] = Counter()  # the limits the open deep_recursion blocks asked for
_outside: list[int] = []  # the limit before the first open block (empty: none open)


def frames_for(depth: int) -> int:
    """The recursion limit trees ``depth`` levels deep ask for (two frames a level: a
    cached subtree's text is one call deeper; room for the caller's own stack)."""
    return depth * 2 + 200


def allow_trees_of_depth(depth: int) -> None:
    """Raise the recursion limit, for good, so that trees ``depth`` levels deep can be
    walked, rendered, encoded and compared (never lowered: see the module's text)."""
    limit = frames_for(depth)
    with _lock:
        if _outside:  # a block is open: raise what it restores to as well
            _outside[0] = max(_outside[0], limit)
        if limit > sys.getrecursionlimit():
            sys.setrecursionlimit(limit)


@contextmanager
def deep_recursion(limit: int) -> Iterator[None]:
    """Within the block, the recursion limit is at least ``limit``; after the last open
    block closes, it is what it was before the first opened (or what
    :func:`allow_trees_of_depth` raised it to meanwhile)."""
    with _lock:
        if not _open:
            _outside[:] = [sys.getrecursionlimit()]
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
            wanted = max(max(_open), _outside[0]) if _open else _outside.pop()
            if wanted != sys.getrecursionlimit():
                sys.setrecursionlimit(wanted)
