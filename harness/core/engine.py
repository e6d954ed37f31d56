"""Engines: sources of shape trees drawn from the PCFG.

* ``fast`` (the default): :mod:`harness.core.choices` walks the compiled grammar
  with one ``random.Random(seed)``; the same seed gives the same trees on any
  machine.
* ``fuzzingbook``: fuzzingbook's ``ProbabilisticGrammarFuzzer`` expands the
  same grammar dict and its derivation trees are mapped onto shape trees.  It
  is imported only when chosen: it is heavy and slow to import.

Both feed the same renderer, so they differ only in speed.
"""

from __future__ import annotations

import random
from typing import Iterator

from harness.core.choices import random_programs
from harness.core.grammar import GRAMMAR, START, program_from_derivation
from harness.core.tree import Program

ENGINES = ("fast", "fuzzingbook")


class EngineUnavailable(RuntimeError):
    """The chosen engine cannot run here (fuzzingbook not installed)."""


def fuzzingbook_programs(seed: int, count: int | None = None) -> Iterator[Program]:
    """Programs expanded by fuzzingbook's ProbabilisticGrammarFuzzer."""
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
        GRAMMAR, start_symbol=START, min_nonterminals=0, max_nonterminals=10_000
    )
    state = random.getstate()
    random.seed(seed)
    try:
        produced = 0
        while count is None or produced < count:
            yield program_from_derivation(fuzzer.fuzz_tree())
            produced += 1
    finally:
        random.setstate(state)


def generate(engine: str = "fast", seed: int = 0, count: int | None = None) -> Iterator[Program]:
    """``count`` programs (endless when None) from the named engine."""
    if engine == "fast":
        return random_programs(seed, count)
    if engine == "fuzzingbook":
        return fuzzingbook_programs(seed, count)
    raise ValueError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
