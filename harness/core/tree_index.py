"""What a mutator knows about each tree it has seen: its nodes, and what it derives from them.

Every tree operator picks a node (a random one, one with a choice, a repetition,
one whose nonterminal has pooled subtrees), so it needs the tree's nodes with
their paths.  Listing them is linear in the tree; libFuzzer hands the mutator
the same corpus entries over and over, and its own outputs right back
(``-mutate_depth``), so the index keeps, per tree (by identity, LRU-bounded):

* ``nodes``: ``(path, node)`` of every node with a choice at or below it, in
  pre-order (:func:`harness.core.tree.choice_nodes`);
* ``choices``: those with more than one alternative;
* ``derived``: a dict for the mutator's own filtered lists and the tree's
  :class:`harness.core.codec.Layout` (built from the tree's second edit on: a
  tree edited once is cheaper to encode whole).

A tree made by replacing one subtree of an indexed tree (:meth:`TreeIndex.edited`)
gets its lists spliced from the parent's: pre-order is the lexicographic order of
paths, so the replaced subtree is one bisected slice, the ancestors' entries take
the new spine, and only the new subtree is listed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from operator import itemgetter
from typing import Optional

from harness.core.codec import Layout
from harness.core.compiled import CompiledGrammar, Node
from harness.core.tree import Path, choice_nodes

_PATH = itemgetter(0)


class Entry:
    """One indexed tree."""

    __slots__ = ("tree", "nodes", "_choices", "derived", "grammar")

    def __init__(self, tree: Node, nodes: list[tuple[Path, Node]], grammar: CompiledGrammar,
                 choices: Optional[list[tuple[Path, Node]]] = None) -> None:
        self.tree, self.nodes, self.grammar = tree, nodes, grammar
        self._choices = choices
        self.derived: dict = {}

    @property
    def choices(self) -> list[tuple[Path, Node]]:
        """The nodes with more than one alternative."""
        if self._choices is None:
            several = self.grammar.alts
            self._choices = [(p, node) for p, node in self.nodes if len(several[node[0]]) > 1]
        return self._choices


class TreeIndex:
    """Entries by tree identity, the newest ``limit`` kept (each keeps its tree alive,
    so an id names one tree while its entry lives).  Edited trees (the mutator's
    outputs, most of which libFuzzer drops) are kept apart, the newest ``fresh``, so
    that they do not push out the corpus's entries, and spliced only when asked for."""

    def __init__(self, grammar: CompiledGrammar, limit: int = 4096, fresh: int = 32) -> None:
        self.grammar = grammar
        self.limits = (limit, fresh)
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._fresh: OrderedDict[int, Entry] = OrderedDict()
        self._edits: OrderedDict[int, tuple[Node, Path, Node, Node]] = OrderedDict()

    def __call__(self, tree: Node) -> Entry:
        key = id(tree)
        entry = self._entries.get(key) or self._fresh.get(key)
        if entry is not None and entry.tree is tree:
            return entry
        edit = self._edits.pop(key, None)
        if edit is not None and edit[3] is tree:
            entry = self._spliced(*edit)
            if entry is not None:
                return self._add(self._fresh, entry)
        return self._add(self._entries, Entry(tree, choice_nodes(self.grammar, tree), self.grammar))

    def _add(self, entries: OrderedDict[int, Entry], entry: Entry) -> Entry:
        entries[id(entry.tree)] = entry
        if len(entries) > self.limits[entries is self._fresh]:
            entries.popitem(last=False)
        return entry

    def layout(self, tree: Node) -> Optional[Layout]:
        """The tree's layout from its second edit on (None before: encode it whole)."""
        derived = self(tree).derived
        layout = derived.get("layout")
        if layout is None:
            if not derived.get("edited"):
                derived["edited"] = True
                return None
            layout = derived["layout"] = Layout(tree, self.grammar)
        return layout

    def edited(self, tree: Node, path: Path, new: Node, result: Node) -> None:
        """Note that ``result`` is ``tree`` with ``new`` at ``path``: if it is asked for,
        its entry is spliced from ``tree``'s (kept alive until then)."""
        self._edits[id(result)] = (tree, path, new, result)
        if len(self._edits) > self.limits[1]:
            self._edits.popitem(last=False)

    def _spliced(self, tree: Node, path: Path, new: Node, result: Node) -> Optional[Entry]:
        """``result``'s entry from ``tree``'s, listing only ``new`` (None: ``tree`` is not
        indexed any more)."""
        entry = self._entries.get(id(tree)) or self._fresh.get(id(tree))
        if entry is None or entry.tree is not tree:
            return None
        nodes = entry.nodes
        i = bisect_left(nodes, path, key=_PATH)
        if i == len(nodes) or nodes[i][0] != path:
            return None  # the old node has no choice below it: nothing to splice into
        inside = choice_nodes(self.grammar, new)
        if path:
            inside = [(path + p, n) for p, n in inside]
        choices = None
        if entry._choices is not None:
            several = self.grammar.alts
            choices = _splice(entry._choices, path, result,
                              [pair for pair in inside if len(several[pair[1][0]]) > 1])
        return Entry(result, _splice(nodes, path, result, inside), self.grammar, choices)


def _splice(listed: list[tuple[Path, Node]], path: Path, result: Node,
            inside: list[tuple[Path, Node]]) -> list[tuple[Path, Node]]:
    """``listed`` (pre-order, sorted by path) with the entries at and under ``path``
    replaced by ``inside`` and the entries of the ancestors of ``path`` holding the
    nodes of ``result`` (the edited tree) instead."""
    start = bisect_left(listed, path, key=_PATH)
    end = bisect_left(listed, path[:-1] + (path[-1] + 1,), lo=start, key=_PATH) if path else len(listed)
    head = listed[:start]
    node = result
    for depth, step in enumerate(path):
        prefix = path[:depth]
        k = bisect_left(head, prefix, key=_PATH)
        if k < len(head) and head[k][0] == prefix:
            head[k] = (prefix, node)
        node = node[2][step]
    return head + inside + listed[end:]
