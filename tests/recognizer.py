"""A test-side recognizer of derivation trees: does a tree belong to a grammar?

It reads the grammar as written (the raw fuzzingbook dict, not the compiled
grammar) and fuzzingbook-style trees (``harness.core.tree.to_fuzzingbook``),
and checks that every node's children spell one of its symbol's expansions:
the nonterminals in order, and the terminal text between them.  It shares no
code with the engine's walk, so a tree the walk, the codec, the mutator or the
minimizer built wrongly is caught here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_NONTERMINAL = re.compile(r"(<[^<> ]*>)")
_UNESCAPE = str.maketrans({"\u2039": "<", "\u203a": ">"})


def _expansion_text(expansion: Any) -> str:
    return expansion if isinstance(expansion, str) else expansion[0]


def _spelling(text: str) -> list[str]:
    """Nonterminals and the terminal text between them (adjacent terminals merged)."""
    out: list[str] = []
    for piece in _NONTERMINAL.split(text):
        if not piece:
            continue
        if _NONTERMINAL.fullmatch(piece):
            out.append(piece)
        elif out and not _NONTERMINAL.fullmatch(out[-1]):
            out[-1] += piece.translate(_UNESCAPE)
        else:
            out.append(piece.translate(_UNESCAPE))
    return out


_SPELLINGS: dict[int, tuple[Mapping, dict]] = {}  # id(grammar) -> (grammar, its spellings)


def _spellings(grammar: Mapping[str, list]) -> dict:
    """Every symbol's expansions spelled out, once per grammar object (the derived profiles
    have hundreds of nonterminals: spelling them per tree would dominate the tests)."""
    cached = _SPELLINGS.get(id(grammar))
    if cached is None or cached[0] is not grammar:
        cached = (grammar, {symbol: [_spelling(_expansion_text(e)) for e in expansions]
                            for symbol, expansions in grammar.items()})
        _SPELLINGS[id(grammar)] = cached
    return cached[1]


def recognizes(grammar: Mapping[str, list], start: str, tree: tuple) -> bool:
    """True when the fuzzingbook-style ``tree`` is a derivation of ``start`` in ``grammar``."""
    spellings = _spellings(grammar)
    stack = [(start, tree)]
    while stack:
        expected, (symbol, children) = stack.pop()
        if symbol != expected or symbol not in spellings:
            return False
        got: list[str] = []
        kids = []
        for child in children:
            child_symbol = child[0]
            if child_symbol in spellings and child[1] is not None and _NONTERMINAL.fullmatch(child_symbol):
                got.append(child_symbol)
                kids.append(child)
            elif got and not _NONTERMINAL.fullmatch(got[-1]):
                got[-1] += child_symbol
            elif child_symbol:
                got.append(child_symbol)
        if got not in spellings[symbol]:
            return False
        stack.extend((kid[0], kid) for kid in kids)
    return True
