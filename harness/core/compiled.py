"""A compiled grammar: the data every part of the core reads.

:func:`harness.core.grammar.compile_grammar` makes a :class:`CompiledGrammar`
(validating the grammar, :mod:`harness.core.grammar_analysis` computing what
it knows about it); everything after it (the walk, codec, renderer, parser,
mutator) reads these types and nothing of how they were made.

* :data:`Node`: a derivation tree, ``(nonterminal id, alternative, children)``
  (:mod:`harness.core.tree`);
* :class:`Alternative`: one expansion, its parts and options;
* :class:`Table`: a tabulated finite language (picked whole by the walk);
* :class:`CounterRef` (with :mod:`harness.core.scope`'s ``NameRef`` and
  ``UseRef``, :data:`PLACEHOLDERS`): what the render pass fills in;
* :class:`GrammarError`: a grammar that cannot be compiled (one line).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

from harness.core.scope import Binding, NameRef, UseRef

Node = tuple  # (nonterminal id, alternative index, children tuple)


@dataclass
class Table:
    """A finite language: every tree, with its probability, and a cumulative for bisect."""

    trees: tuple[Node, ...]
    cumulative: tuple[float, ...]
    index: dict  # tree -> entry
    by_id: dict  # id(tree) -> entry (the table's own objects)
    depth: int  # the deepest tree's depth

    def pick(self, u: float) -> Node:
        return self.trees[bisect_right(self.cumulative, u)]


class GrammarError(ValueError):
    """A grammar that cannot be compiled; the message is one line."""


class CounterRef(str):
    """A ``$NAME`` placeholder inside a terminal: its value comes from the render pass."""

    @property
    def written(self) -> str:
        return "$" + self


#: Placeholders in terminals, filled by the render pass (each knows how it is written).
PLACEHOLDERS = (CounterRef, NameRef, UseRef)


@dataclass(frozen=True)
class Alternative:
    text: str  # the expansion as written (fuzzingbook's string)
    kids: tuple[int, ...]  # nonterminal ids, in order
    parts: tuple  # str terminal | int (index into kids) | CounterRef | NameRef | UseRef
    prob: float
    counter: str | None
    indent: int
    label: str
    binding: Binding | None = None  # values it defines, binds or uses (harness.core.scope)

_T = TypeVar("_T")


@dataclass
class CompiledGrammar:
    source: str
    start: int
    names: list[str]
    ids: dict[str, int]
    alts: list[tuple[Alternative, ...]]
    max_depth: int
    renderings: dict[str, list[list[tuple]]] = field(default_factory=dict)  # style -> n -> alt -> parts
    #: What the grammar file says of itself for the tools around the core (``CONTRACT``:
    #: the preconditions its programs satisfy, e.g. "P1-P24"; ``PROFILE``: its name;
    #: ``SUFFIX``: its program files' suffix, e.g. ".calc").
    meta: dict[str, Any] = field(default_factory=dict)
    # computed
    cumulative: list[tuple[float, ...]] = field(default_factory=list)
    byte_table: list[bytes] = field(default_factory=list)
    smallest_byte: list[bytes] = field(default_factory=list)
    min_size: list[int] = field(default_factory=list)
    alt_min_size: list[tuple[int, ...]] = field(default_factory=list)
    cheapest: list[int] = field(default_factory=list)
    min_depth: list[int] = field(default_factory=list)
    alt_min_depth: list[tuple[int, ...]] = field(default_factory=list)
    shallowest: list[int] = field(default_factory=list)
    count: list[int | None] = field(default_factory=list)
    width: list[int | None] = field(default_factory=list)
    deepest: list[int | None] = field(default_factory=list)  # deepest tree's depth; None: recursive
    tables: list[Table | None] = field(default_factory=list)
    unique: list[Node | None] = field(default_factory=list)
    counters: tuple[str, ...] = ()
    alt_kids: list[tuple[tuple[int, ...], ...]] = field(default_factory=list)

    def derived(self, make: Callable[..., _T], *args: Hashable) -> _T:
        """``make(self, *args)``, computed once and kept with the grammar (compiled passes,
        renderers, rankings: they live as long as it does).

        Keyed on everything it depends on: the function that computes it, its
        arguments, and this grammar, which nothing changes once :func:`compile_grammar`
        has returned it (a grammar file edited on disk is a new grammar object,
        :func:`load_file`).  So a value is never served for another question, and
        there are no names to keep apart."""
        cache = self.__dict__.setdefault("_derived", {})
        key = (make, args)
        value = cache.get(key)
        if value is None:
            value = cache[key] = make(self, *args)
        return value

    @property
    def styles(self) -> tuple[str, ...]:
        return tuple(self.renderings)

    @property
    def start_name(self) -> str:
        return self.names[self.start]

    def decisions(self) -> list[int]:
        """Nonterminals with more than one alternative (the weighted choices)."""
        return [n for n, alts in enumerate(self.alts) if len(alts) > 1]

    def probabilities(self, n: int) -> tuple[float, ...]:
        return tuple(a.prob for a in self.alts[n])

    def label(self, n: int, a: int) -> str:
        return self.alts[n][a].label

    @property
    def finite(self) -> bool:
        return self.count[self.start] is not None

    @property
    def max_bytes(self) -> int | None:
        """The longest choice sequence (``None`` for a recursive grammar)."""
        return self.width[self.start]
