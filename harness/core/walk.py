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

from bisect import bisect_right
from random import Random
from typing import Callable, Iterator, Protocol

from harness.core.codegen import Module
from harness.core.compiled import CompiledGrammar, Node


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
    kind = compiled_walk(model)
    if kind == "random":  # the generation hot path: specialised code (below)
        return grammar.derived(_compile_random_walk)(model.random)  # type: ignore[attr-defined]
    if kind == "bytes":  # the decoding hot path: specialised code (below)
        return grammar.derived(_compile_bytes_walk)(model)
    return _general_walk(grammar, model)


#: The methods whose effect the compiled walk of each kind reproduces (see :func:`compiled_walk`).
_DRAWS = {"random": ("choose", "pick", "enter", "leave"),
          "bytes": ("choose", "enter", "leave", "recall", "learn", "reset")}


def compiled_walk(model: Model) -> str | None:
    """The compiled walk that may stand for ``model`` (None: the general walk calls its
    methods).  A model class says its draws are what a compiled walk does with the class
    attribute ``compiled_walk`` (``"random"``: :class:`RandomModel`'s draws over its
    ``random``; ``"bytes"``: :class:`harness.core.codec.BytesModel`'s reading of its
    ``data``).  A subclass that overrides one of those methods is walked by the general
    walk, so its override is honoured; a subclass may set ``compiled_walk = None`` to
    ask for the general walk outright."""
    cls = type(model)
    kind = getattr(cls, "compiled_walk", None)
    if kind is None:
        return None
    owner = next(c for c in cls.__mro__ if "compiled_walk" in c.__dict__)
    if any(getattr(cls, name, None) is not getattr(owner, name, None) for name in _DRAWS[kind]):
        return None
    return kind


def _general_walk(grammar: CompiledGrammar, model: Model) -> Callable[[int, int], Node]:
    """The walk calling the model's methods: the reference the compiled walks reproduce."""
    g = grammar
    alts, unique, tables = g.alts, g.unique, g.tables
    kids_of = g.alt_kids
    max_depth = g.max_depth
    recursive = g.max_bytes is None  # only a recursive grammar can reach the depth budget
    alt_min_depth, shallowest, cheapest = g.alt_min_depth, g.shallowest, g.cheapest
    choose = model.choose
    use_tables = model.tables
    pick = getattr(model, "pick", None)
    layout = not use_tables  # enter/leave matter to models that read a layout
    enter, leave = model.enter, model.leave
    recall = getattr(model, "recall", None)  # a model may remember tabulated subtrees

    def expand(n: int, d: int) -> Node:
        node = unique[n]
        if node is not None:
            return node
        table = tables[n]
        if table is not None:
            if use_tables:
                return pick(table)
            if recall is not None and (not recursive or d + table.depth <= max_depth):
                node = recall(n)
                if node is not None:
                    return node
        if layout:
            token = enter(n)
        if len(alts[n]) > 1:
            a = choose(n, d)
            if a is None or not 0 <= a < len(alts[n]):
                a = cheapest[n]
            if recursive and d + alt_min_depth[n][a] > max_depth:
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
    #: The walk may run its compiled random walk over ``random`` for this class's draws.
    compiled_walk: str | None = "random"

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


def _compile_random_walk(grammar: CompiledGrammar) -> Callable[[Callable[[], float]], Callable]:
    """:func:`random_walk_module`, run: ``make(random) -> expand(symbol, depth)``."""
    return random_walk_module(grammar).load()["make"]  # type: ignore[return-value]


def random_walk_module(grammar: CompiledGrammar) -> Module:
    """The walk with :class:`RandomModel`'s choices, as Python source specialised to the
    grammar: one function per nonterminal, the draw a binary search over constant
    thresholds, tabulated and unique kids inlined.  Same draws in the same order, and
    so the same trees, as the general walk with the model (which is the reference);
    about three times faster, because nothing is looked up or dispatched per node.

    Returns ``make(random) -> expand(symbol, depth)``: compiled once per grammar,
    bound to a source of uniform floats per model."""
    g = grammar
    recursive = g.max_bytes is None
    module = Module(f"<random walk of {g.source}>", ["def make(random):"], {"bisect_right": bisect_right})
    consts, lines = module.constants, module.lines

    def kid(k: int, level: int, inlined: tuple[int, ...]) -> str:
        if g.unique[k] is not None:
            consts[f"U{k}"] = g.unique[k]
            return f"U{k}"
        if g.tables[k] is not None:  # one draw picks the whole subtree (RandomModel.pick)
            consts[f"T{k}"], consts[f"C{k}"] = g.tables[k].trees, g.tables[k].cumulative
            return f"T{k}[bisect_right(C{k}, random())]"
        if len(g.alts[k]) == 1 and len(inlined) < 4 and k not in inlined:
            return node(k, 0, level + 1, inlined + (k,))  # no choice: built in place
        return f"w{k}(d + {level})"

    def node(n: int, a: int, level: int = 1, inlined: tuple[int, ...] = ()) -> str:
        """The expression building alternative ``a`` of ``n``, its children at depth
        ``d + level``."""
        kids = [kid(k, level, inlined) for k in g.alt_kids[n][a]]
        if not kids:  # a leaf: one shared tuple
            consts[f"L{n}_{a}"] = (n, a, ())
            return f"L{n}_{a}"
        return f"({n}, {a}, ({', '.join(kids)}{',' if len(kids) == 1 else ''}))"

    def branch(n: int, a: int, pad: str) -> list[str]:
        out = []
        if recursive:  # the depth budget: past it, the shallowest alternative
            out.append(f"{pad}if d > {g.max_depth - g.alt_min_depth[n][a]}: "
                       f"return {node(n, g.shallowest[n])}")
        out.append(f"{pad}return {node(n, a)}")
        return out

    def search(n: int, lo: int, hi: int, pad: str) -> list[str]:
        # the first alternative whose cumulative bound exceeds u: bisect_right, unrolled
        if lo == hi:
            return branch(n, lo, pad)
        mid = (lo + hi + 1) // 2
        return ([f"{pad}if u < {g.cumulative[n][mid - 1]!r}:"] + search(n, lo, mid - 1, pad + "    ")
                + search(n, mid, hi, pad))

    for n in range(len(g.names)):
        if g.unique[n] is not None or g.tables[n] is not None:
            continue
        lines.append(f"    def w{n}(d):")
        if len(g.alts[n]) == 1:
            lines.append(f"        return {node(n, 0)}")
        else:
            lines.append("        u = random()")
            lines.extend(search(n, 0, len(g.alts[n]) - 1, "        "))
    lines.append("    W = [" + ", ".join("None" if g.unique[n] is not None or g.tables[n] is not None
                                      else f"w{n}" for n in range(len(g.names))) + "]")
    lines.append("    def expand(n, d):")
    lines.append("        w = W[n]")
    lines.append("        if w is not None: return w(d)")
    lines.append("        if U[n] is not None: return U[n]")
    lines.append("        return T[n].trees[bisect_right(T[n].cumulative, random())]")
    lines.append("    return expand")
    consts["U"], consts["T"] = g.unique, g.tables
    return module


def _compile_bytes_walk(grammar: CompiledGrammar) -> Callable[[Model], Callable]:
    """:func:`bytes_walk_module`, run: ``make(model) -> expand(symbol, depth)``."""
    return bytes_walk_module(grammar).load()["make"]  # type: ignore[return-value]


def bytes_walk_module(grammar: CompiledGrammar) -> Module:
    """The walk with a byte-reading model (:class:`harness.core.codec.BytesModel`: its
    ``data``, ``position``, ``memo``; one byte per choice through ``byte_table``, a
    finite nonterminal's bytes ending at its width, tabulated subtrees remembered by
    their bytes), as Python source specialised to the grammar: what the general walk
    does with that model's ``choose``/``enter``/``leave``/``recall``/``learn``, with
    the same results, without a method call per node.  ``make(model) -> expand``."""
    g = grammar
    recursive = g.max_bytes is None
    module = Module(f"<bytes walk of {g.source}>", ["def make(model):", "    data, pos, memo = b'', 0, model.memo"])
    consts, lines = module.constants, module.lines

    def node(n: int, a: int) -> str:
        kids = []
        for k in g.alt_kids[n][a]:
            if g.unique[k] is not None:
                consts[f"U{k}"] = g.unique[k]
                kids.append(f"U{k}")
            else:
                kids.append(f"b{k}(d)")
        return f"({n}, {a}, ({', '.join(kids)}{',' if len(kids) == 1 else ''}))"

    for n in range(len(g.names)):
        if g.unique[n] is not None:
            continue
        w, table = g.width[n], g.tables[n]
        body = ["        nonlocal pos"]
        if table is not None:
            consts[f"T{n}"] = table
            check = f"d <= {g.max_depth - table.depth} and " if recursive else ""
            body += [f"        if {check}memo is not None:",
                     f"            hit = memo.get(({n}, data[pos:pos + {w}]))",
                     f"            if hit is not None:",
                     f"                pos += {w}",
                     f"                return hit"]
        if w is not None:
            body.append("        start = pos")
        if len(g.alts[n]) > 1:
            consts[f"BT{n}"] = g.byte_table[n]
            body += ["        p = pos", "        pos = p + 1",
                     f"        a = BT{n}[data[p]] if p < len(data) else {g.cheapest[n]}"]
            if recursive:
                consts[f"AMD{n}"] = g.alt_min_depth[n]
                body.append(f"        if d + AMD{n}[a] > {g.max_depth}: a = {g.shallowest[n]}")
            body.append("        d += 1")
            for a in range(len(g.alts[n])):
                body.append(f"        {'if' if a == 0 else 'elif'} a == {a}: node = {node(n, a)}")
        else:
            body += ["        d += 1", f"        node = {node(n, 0)}"]
        if w is not None:
            body.append(f"        pos = start + {w}")
        if table is not None:  # share the table's object: it renders from the cache
            body += [f"        node = T{n}.trees[T{n}.index[node]]",
                     f"        if memo is not None: memo[({n}, data[start:start + {w}])] = node"]
        body.append("        return node")
        lines += [f"    def b{n}(d):", *body]
    lines += [
        "    B = [" + ", ".join("None" if g.unique[n] is not None else f"b{n}"
                              for n in range(len(g.names))) + "]",
        "    def expand(n, d):",
        "        nonlocal data, pos",
        "        if U[n] is not None: return U[n]",
        "        data, pos = model.data, model.position",
        "        node = B[n](d)",
        "        model.position = pos",
        "        return node",
        "    return expand",
    ]
    consts["U"] = g.unique
    return module


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
