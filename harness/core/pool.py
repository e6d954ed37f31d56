"""Subtrees seen in earlier inputs, per nonterminal: what ``replace_from_pool`` draws from."""

from __future__ import annotations

from harness.core.compiled import Node
from harness.core.tree import Path

POOL_PER_SYMBOL = 32
POOL_PER_INPUT = 16  # subtrees an input adds, spread over its pre-order


class SubtreePool:
    """Per nonterminal, the newest :data:`POOL_PER_SYMBOL` subtrees added, each with a
    slot for its depth (measured when it is first placed: what the depth budget of a
    recursive grammar asks of it there)."""

    def __init__(self) -> None:
        # nonterminal -> {subtree: [its depth, once measured]}, oldest first.  Plain
        # dicts: an OrderedDict hashes each key again when its items are read, and a
        # subtree's hash costs its size.
        self.buckets: dict[int, dict[Node, list]] = {}
        #: nonterminals with two or more pooled subtrees (only grows)
        self.pooled: set[int] = set()

    def add(self, nodes: list[tuple[Path, Node]], salt: int = 0) -> None:
        """Add some of a tree's nodes (:data:`POOL_PER_INPUT`, evenly spread from an
        offset given by ``salt``).  Not all of them: keying the pool hashes each subtree
        whole."""
        stride = max(1, len(nodes) // POOL_PER_INPUT)
        for _, node in nodes[salt % stride::stride]:
            bucket = self.buckets.setdefault(node[0], {})
            if node in bucket:
                continue
            bucket[node] = [None]
            if len(bucket) > POOL_PER_SYMBOL:
                del bucket[next(iter(bucket))]
            elif len(bucket) == 2:
                self.pooled.add(node[0])

    def candidates(self, n: int) -> tuple[tuple[Node, list], ...]:
        """(subtree, [its depth or None]) pairs of ``n``, distinct subtrees, oldest first."""
        return tuple(self.buckets[n].items())
