"""The walk: the one place that knows how a grammar becomes a derivation tree.

As in Hypothesis and Zest, every way of making a program is this walk with a
different source of choices, a *model*:

* :class:`RandomModel` draws each choice from the PCFG (generation, and the
  regeneration of subtrees by the mutator);
* :class:`BytesModel` reads choices from fuzz bytes (:mod:`harness.core.codec`);
* :class:`ReplayModel` replays the choices of an edited tree, falling back to
  the cheapest alternative where a recorded choice no longer fits.

The walk asks the model for the alternative of every nonterminal that has
more than one, in pre-order.  Two budgets keep it finite on any grammar: the
model may answer ``None`` (input exhausted) and the walk takes the cheapest
expansion, and a choice whose shallowest derivation would pass the depth
budget is replaced by the shallowest alternative (Grammarinator's masking of
alternatives that cannot fit).

A model that can draw whole subtrees (``tables = True``) is handed the
grammar's tabulated finite languages: one draw picks a whole subtree with
exactly the probability the step-by-step walk would give it.  That is what
keeps generation fast on grammars made of finite pieces.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from random import Random
from typing import Callable, Iterator, Protocol

from harness.core.grammar import CompiledGrammar, Node


class Model(Protocol):
    """A source of choices.  Optionally also ``pick(table) -> tree`` (with
    ``tables = True``: a whole tabulated subtree in one draw) and
    ``recall(n) -> tree | None`` (a tabulated subtree it already knows the
    answer for; ``leave`` is then not called)."""

    #: True when the model may pick whole subtrees of tabulated languages.
    tables: bool

    def choose(self, n: int, depth: int) -> int | None:
        """The alternative for nonterminal ``n`` (``None``: take the cheapest)."""

    def enter(self, n: int) -> object:
        """Called before ``n`` is expanded; what it returns is given back to ``leave``."""

    def leave(self, n: int, token: object) -> None:
        """Called after ``n`` is expanded."""


def walk(grammar: CompiledGrammar, model: Model, symbol: int | None = None,
         depth: int = 0) -> Node:
    """The derivation tree ``model``'s choices make from ``symbol`` (default: start)."""
    return walker(grammar, model)(grammar.start if symbol is None else symbol, depth)


def walker(grammar: CompiledGrammar, model: Model) -> Callable[[int, int], Node]:
    """The walk bound to one grammar and model: ``expand(symbol, depth) -> tree``
    (bound once, called per tree, on the generation hot path)."""
    g = grammar
    alts, unique, tables = g.alts, g.unique, g.tables
    kids_of = g.alt_kids
    max_depth = g.max_depth
    bounded = g.max_bytes is None  # only a recursive grammar can reach the depth budget
    alt_min_depth, shallowest, cheapest = g.alt_min_depth, g.shallowest, g.cheapest
    choose = model.choose
    use_tables = model.tables
    pick = getattr(model, "pick", None)
    layout = not use_tables  # enter/leave matter to models that read a layout
    enter, leave = model.enter, model.leave
    recall = getattr(model, "recall", None)  # a model may remember tabulated subtrees
    if bounded and max_depth + 50 > sys.getrecursionlimit():
        sys.setrecursionlimit(max_depth * 2 + 200)

    def expand(n: int, d: int) -> Node:
        node = unique[n]
        if node is not None:
            return node
        table = tables[n]
        if table is not None:
            if use_tables:
                return pick(table)
            if recall is not None and (not bounded or d + table.depth <= max_depth):
                node = recall(n)
                if node is not None:
                    return node
        if layout:
            token = enter(n)
        if len(alts[n]) > 1:
            a = choose(n, d)
            if a is None or not 0 <= a < len(alts[n]):
                a = cheapest[n]
            if bounded and d + alt_min_depth[n][a] > max_depth:
                a = shallowest[n]
        else:
            a = 0
        d += 1
        ks = kids_of[n][a]
        if len(ks) == 1:
            kids: tuple = (expand(ks[0], d),)
        elif len(ks) == 2:
            kids = (expand(ks[0], d), expand(ks[1], d))
        else:
            kids = tuple([expand(k, d) for k in ks])
        node = (n, a, kids)
        if layout:
            leave(n, token)
        if table is not None:  # share the table's object: it renders from the cache
            node = table.trees[table.index[node]]
            if recall is not None:
                model.learn(n, token, node)  # type: ignore[attr-defined]
        return node

    return expand


class RandomModel:
    """Choices drawn from the PCFG with ``rng.random()``."""

    tables = True

    def __init__(self, grammar: CompiledGrammar, rng: Random | None = None) -> None:
        self.cumulative = grammar.cumulative
        self.random = (rng or Random()).random

    def choose(self, n: int, depth: int) -> int:
        return bisect_right(self.cumulative[n], self.random())

    def pick(self, table) -> Node:
        return table.trees[bisect_right(table.cumulative, self.random())]

    def enter(self, n: int) -> None:
        return None

    def leave(self, n: int, token: object) -> None:
        return None


class ReplayModel:
    """Replays recorded alternatives in pre-order; past the record, the cheapest."""

    tables = False

    def __init__(self, choices: list[int]) -> None:
        self.choices = choices
        self.position = 0

    def choose(self, n: int, depth: int) -> int | None:
        if self.position >= len(self.choices):
            return None
        self.position += 1
        return self.choices[self.position - 1]

    def enter(self, n: int) -> None:
        return None

    def leave(self, n: int, token: object) -> None:
        return None


def random_trees(grammar: CompiledGrammar, seed: int, count: int | None = None) -> Iterator[Node]:
    """``count`` trees (endless when None) drawn from the PCFG with ``seed``."""
    expand = walker(grammar, RandomModel(grammar, Random(seed)))
    start = grammar.start
    produced = 0
    while count is None or produced < count:
        yield expand(start, 0)
        produced += 1


def regenerate(grammar: CompiledGrammar, symbol: int, rng: Random, depth: int = 0) -> Node:
    """A fresh subtree for ``symbol`` from the PCFG (at ``depth`` in the budget)."""
    return walk(grammar, RandomModel(grammar, rng), symbol, depth)
