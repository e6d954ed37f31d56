"""Engines: sources of derivation trees drawn from a PCFG.

* ``fast`` (the default): the walk (:mod:`harness.core.walk`) with one
  ``random.Random(seed)``; the same seed gives the same trees on any machine.
* ``fuzzingbook``: fuzzingbook's ``ProbabilisticGrammarFuzzer`` expands the
  same grammar dict (its options other than ``prob`` removed: they are ours)
  and its derivation trees are read back as ours
  (:func:`harness.core.tree.from_fuzzingbook`).  It is imported only when
  chosen: it is heavy and slow to import.

Both feed the same renderer, so they differ only in speed.
"""

from __future__ import annotations

import random
from typing import Any, Iterator

from harness.core.compiled import CompiledGrammar, Node
from harness.core.tree import from_fuzzingbook
from harness.core.walk import random_trees

ENGINES = ("fast", "fuzzingbook")


class EngineUnavailable(RuntimeError):
    """The chosen engine cannot run here (fuzzingbook not installed)."""


def fuzzingbook_grammar(grammar: CompiledGrammar) -> dict[str, list[Any]]:
    """The grammar as fuzzingbook reads it: expansion strings with their ``prob`` only."""
    out: dict[str, list[Any]] = {}
    for n, name in enumerate(grammar.names):
        out[name] = [(alt.text, {"prob": alt.prob}) if len(grammar.alts[n]) > 1 else alt.text
                     for alt in grammar.alts[n]]
    return out


def fuzzingbook_trees(grammar: CompiledGrammar, seed: int, count: int | None = None) -> Iterator[Node]:
    """Trees expanded by fuzzingbook's ProbabilisticGrammarFuzzer."""
    try:
        from fuzzingbook.ProbabilisticGrammarFuzzer import ProbabilisticGrammarFuzzer
    except ImportError as error:
        raise EngineUnavailable(
            f"--engine fuzzingbook needs fuzzingbook ({error}); "
            "install it with: pip install 'loom-fuzz[fuzzingbook]'"
        ) from None
    # fuzzingbook draws from the global random module.  Without the nonterminal
    # bounds its cost-driven phases would override the probabilities.
    fuzzer = ProbabilisticGrammarFuzzer(
        fuzzingbook_grammar(grammar), start_symbol=grammar.start_name,
        min_nonterminals=0, max_nonterminals=10_000,
    )
    state = random.getstate()
    random.seed(seed)
    try:
        produced = 0
        while count is None or produced < count:
            yield from_fuzzingbook(grammar, fuzzer.fuzz_tree())
            produced += 1
    finally:
        random.setstate(state)


def generate(grammar: CompiledGrammar, engine: str = "fast", seed: int = 0,
             count: int | None = None) -> Iterator[Node]:
    """``count`` trees (endless when None) from the named engine."""
    if engine == "fast":
        return random_trees(grammar, seed, count)
    if engine == "fuzzingbook":
        return fuzzingbook_trees(grammar, seed, count)
    raise ValueError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
