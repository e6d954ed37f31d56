"""The PCFG compiled once: its decisions (with weights) and its terminal text.

The grammar in ``grammars/`` is plain fuzzingbook data.  This module reads it
without fuzzingbook, checks it against the shape tree, and offers two things:

* :data:`DECISIONS`: one :class:`Decision` per choice nonterminal that the
  tree records (how many threads, the optional call, how many sites, nesting,
  body, callee), with the probabilities, a cumulative table for sampling and a
  256-entry byte table for the codec;
* :func:`expand`: a nonterminal's text with the choices given, the basis of
  the renderer's cached fragments.

It also says how a fuzzingbook derivation tree maps onto the shape tree
(:func:`program_from_derivation`), so both engines share one distribution.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Callable, Mapping

from grammars import GRAMMAR, START
from harness.core.tree import Body, Callee, Program, Thread, make_site

_NONTERMINAL = re.compile(r"(<[^<> ]*>)")
_UNESCAPE = str.maketrans({"\u2039": "<", "\u203a": ">"})


class GrammarError(ValueError):
    """The grammar does not fit the shape tree."""


def expansion_string(expansion: str | tuple) -> str:
    return expansion[0] if isinstance(expansion, tuple) else expansion


def expansion_probability(expansion: str | tuple) -> float | None:
    if isinstance(expansion, tuple) and len(expansion) > 1:
        return expansion[1].get("prob")
    return None


def symbols(expansion: str) -> list[str]:
    """An expansion split into terminals and nonterminals (fuzzingbook's rule)."""
    return [part for part in _NONTERMINAL.split(expansion) if part]


def is_nonterminal(symbol: str) -> bool:
    return _NONTERMINAL.fullmatch(symbol) is not None


@dataclass(frozen=True)
class Decision:
    """One choice point of the grammar, as every engine and the codec see it."""

    symbol: str
    alternatives: tuple[str, ...]
    probabilities: tuple[float, ...]

    @property
    def cumulative(self) -> tuple[float, ...]:
        """Upper bounds for ``bisect_right(cumulative, random())``; the last is inf."""
        bounds = list(accumulate(self.probabilities))[:-1]
        return tuple(bounds) + (float("inf"),)

    @property
    def byte_table(self) -> bytes:
        """byte value -> alternative; each alternative owns a run of bytes in
        proportion to its probability, so random bytes follow the PCFG."""
        edges = [round(256 * c) for c in accumulate(self.probabilities)]
        table, low = bytearray(), 0
        for index, high in enumerate(edges):
            table.extend([index] * (high - low))
            low = high
        return bytes(table[:256].ljust(256, bytes([len(edges) - 1])))

    @property
    def canonical_bytes(self) -> bytes:
        """alternative -> the smallest byte that decodes to it."""
        table = self.byte_table
        return bytes(table.index(index) for index in range(len(self.alternatives)))


def _probabilities(symbol: str, expansions: list) -> tuple[float, ...]:
    given = [expansion_probability(e) for e in expansions]
    unspecified = given.count(None)
    rest = 1.0 - sum(p for p in given if p is not None)
    if rest < -1e-9 or (unspecified == 0 and abs(rest) > 1e-5):
        raise GrammarError(f"{symbol}: probabilities must sum to 1")
    return tuple(p if p is not None else rest / unspecified for p in given)


def _check_defined(grammar: Mapping[str, list]) -> None:
    for symbol, expansions in grammar.items():
        if not expansions:
            raise GrammarError(f"{symbol}: no expansion")
        for expansion in expansions:
            for part in symbols(expansion_string(expansion)):
                if is_nonterminal(part) and part not in grammar:
                    raise GrammarError(f"{symbol}: uses undefined {part}")


# How the tree's fields bind to the grammar's choice nonterminals.  The order
# of each tuple is the order of the tree's enum (or count - 1, or bool).
THREADS = "<threads>"
TOP_CALL = "<top-call>"
SITES = "<sites>"
NESTING = "<site>"
BODY = "<region>"
CALLEE = "<call-region>"

_BINDING: dict[str, tuple[str, ...]] = {
    THREADS: ("<thread>", "<thread><thread>"),
    TOP_CALL: ("", "<icall>"),
    SITES: ("<site>", "<site><site>"),
    NESTING: ("<unwrapped>", "<if-wrapped>", "<for-wrapped>"),
    BODY: tuple(f"<{body.name.lower()}-region>" for body in Body),
    CALLEE: tuple(f"<{callee.name.lower()}-call-region>" for callee in Callee),
}


def compile_decisions(grammar: Mapping[str, list]) -> dict[str, Decision]:
    """Check ``grammar`` against the tree and return its bound decisions."""
    _check_defined(grammar)
    decisions = {}
    for symbol, expected in _BINDING.items():
        expansions = grammar.get(symbol)
        if expansions is None:
            raise GrammarError(f"{symbol}: missing; the shape tree needs it")
        found = tuple(expansion_string(e) for e in expansions)
        if found != expected:
            raise GrammarError(f"{symbol}: alternatives {found} do not match the tree's {expected}")
        decision = Decision(symbol, found, _probabilities(symbol, expansions))
        if len(set(decision.byte_table)) != len(found):
            raise GrammarError(f"{symbol}: an alternative is too rare for the byte codec (< 1/256)")
        decisions[symbol] = decision
    for symbol, expansions in grammar.items():
        if symbol not in _BINDING and len(expansions) != 1:
            raise GrammarError(f"{symbol}: a choice the shape tree does not record")
    return decisions


DECISIONS: dict[str, Decision] = compile_decisions(GRAMMAR)


def expand(
    symbol: str,
    choose: Callable[[str], int] = lambda symbol: 0,
    *,
    keep: frozenset[str] = frozenset(),
    override: Mapping[str, str] = {},
    grammar: Mapping[str, list] = GRAMMAR,
) -> str:
    """The text ``symbol`` derives, MLIR brackets restored.

    ``choose(nonterminal)`` picks the alternative of each choice; nonterminals
    in ``keep`` stay in the text as they are (the renderer splits on them) and
    those in ``override`` derive the given text instead (another rendering).
    """

    def walk(current: str) -> str:
        if current in keep:
            return current
        if current in override:
            return override[current]
        expansions = grammar[current]
        chosen = expansions[choose(current) if len(expansions) > 1 else 0]
        return "".join(
            walk(part) if is_nonterminal(part) else part.translate(_UNESCAPE)
            for part in symbols(expansion_string(chosen))
        )

    return walk(symbol)


# --- fuzzingbook derivation trees -> shape trees ---------------------------

DerivationTree = tuple[str, Any]


def _chosen(node: DerivationTree) -> int:
    """Which alternative a derivation node took."""
    symbol, children = node
    text = "".join(child[0] for child in children)
    return DECISIONS[symbol].alternatives.index(text)


def program_from_derivation(tree: DerivationTree) -> Program:
    """The shape tree a derivation tree of :data:`GRAMMAR` stands for."""
    threads: list[Thread] = []
    stack = [tree]
    current_icall, current_sites = False, []
    # Depth-first in emission order; a thread is complete when its closing
    # nonterminal is reached, which follows all its sites.
    while stack:
        symbol, children = stack.pop()
        if symbol == "<thread>":
            current_icall, current_sites = False, []
        elif symbol == "<icall>":
            current_icall = True
        elif symbol == NESTING:
            nesting = _chosen((symbol, children))
            region = _find(children, BODY)
            body = _chosen(region)
            callee = 0
            if body == Body.CALL:
                callee = _chosen(_find(region[1], CALLEE))
            current_sites.append(make_site(nesting, body, callee))
            continue
        elif symbol == "<thread-close>":
            threads.append(Thread(current_icall, tuple(current_sites)))
        stack.extend(reversed([c for c in children or () if is_nonterminal(c[0])]))
    return Program(tuple(threads))


def _find(children: list[DerivationTree], symbol: str) -> DerivationTree:
    for child in children:
        if child[0] == symbol:
            return child
        found = _find(child[1] or [], symbol) if is_nonterminal(child[0]) else None
        if found is not None:
            return found
    return None  # type: ignore[return-value]


__all__ = [
    "BODY",
    "CALLEE",
    "DECISIONS",
    "Decision",
    "GRAMMAR",
    "GrammarError",
    "NESTING",
    "SITES",
    "START",
    "THREADS",
    "TOP_CALL",
    "compile_decisions",
    "expand",
    "program_from_derivation",
]
