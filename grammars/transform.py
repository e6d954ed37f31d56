"""Small edits on grammar dicts (fuzzingbook's format) shared by the derived profiles."""

from __future__ import annotations

import re

_NONTERMINAL = re.compile(r"<[^<> ]*>")


def text_of(expansion) -> str:
    return expansion if isinstance(expansion, str) else expansion[0]


def options_of(expansion) -> dict:
    return {} if isinstance(expansion, str) else dict(expansion[1])


def distinct_children(grammar: dict[str, list]) -> dict[str, list]:
    """Give alternatives that use the same nonterminals a nonterminal of their own.

    fuzzingbook's derivation trees name an alternative by its children; alternatives
    with the same nonterminal children are told apart by terminal text only, which
    the guillemet escaping of MLIR's angle brackets makes unreliable.  Each such
    alternative becomes ``<S-N>`` (its text, with its ``indent``), keeping its
    probability, label and counter in the parent.
    """
    out: dict[str, list] = {}
    for symbol, expansions in grammar.items():
        kids = [tuple(_NONTERMINAL.findall(text_of(e))) for e in expansions]
        if len(set(kids)) == len(kids):
            out[symbol] = expansions
            continue
        new = []
        for number, expansion in enumerate(expansions):
            options = options_of(expansion)
            inner = f"{symbol[:-1]}-{number}>"
            indent = options.pop("indent", None)
            out[inner] = [(text_of(expansion), {"indent": indent})] if indent else [text_of(expansion)]
            new.append((inner, options) if options else inner)
        out[symbol] = new
    return out


def prune(grammar: dict[str, list], start: str = "<start>") -> dict[str, list]:
    """Drop what ``start`` no longer reaches (the core refuses unreachable rules)."""
    seen, stack = {start}, [start]
    while stack:
        for expansion in grammar[stack.pop()]:
            for symbol in _NONTERMINAL.findall(text_of(expansion)):
                if symbol in grammar and symbol not in seen:
                    seen.add(symbol)
                    stack.append(symbol)
    return {k: v for k, v in grammar.items() if k in seen}
