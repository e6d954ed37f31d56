"""The PCFG: fuzzingbook accepts it, and it binds to the shape tree."""

from __future__ import annotations

import re

import pytest

from grammars import GRAMMAR, START
from harness.core.grammar import DECISIONS, GrammarError, compile_decisions, expand


def test_fuzzingbook_accepts_the_grammar():
    from fuzzingbook.Grammars import is_valid_grammar
    from fuzzingbook.ProbabilisticGrammarFuzzer import is_valid_probabilistic_grammar

    assert is_valid_grammar(GRAMMAR, START, supported_opts={"prob"})
    assert is_valid_probabilistic_grammar(GRAMMAR, START)


def test_no_mlir_angle_bracket_reads_as_a_nonterminal():
    # Every <...> fuzzingbook would see must be one of the grammar's own symbols.
    for expansions in GRAMMAR.values():
        for expansion in expansions:
            text = expansion[0] if isinstance(expansion, tuple) else expansion
            for symbol in re.findall(r"<[^<> ]*>", text):
                assert symbol in GRAMMAR, symbol


def test_weights_are_the_conventions():
    probabilities = {symbol: decision.probabilities for symbol, decision in DECISIONS.items()}
    assert probabilities["<threads>"] == (0.5, 0.5)
    assert probabilities["<top-call>"] == (0.5, 0.5)
    assert probabilities["<sites>"] == (0.5, 0.5)
    assert probabilities["<site>"] == (0.5, 0.25, 0.25)
    assert probabilities["<region>"] == pytest.approx((2 / 11,) * 5 + (1 / 11,))
    assert probabilities["<call-region>"] == (0.5, 0.5)


def test_byte_tables_follow_the_weights():
    for decision in DECISIONS.values():
        table = decision.byte_table
        assert len(table) == 256
        for index, probability in enumerate(decision.probabilities):
            assert abs(table.count(index) - 256 * probability) <= 1
        assert table[decision.canonical_bytes[0]] == 0 and decision.canonical_bytes[0] == 0


def test_expand_restores_mlir_text():
    text = expand("<host-container>")
    assert "memref<4xi32>" in text and "\u2039" not in text


def test_a_grammar_that_does_not_fit_the_tree_is_refused():
    broken = dict(GRAMMAR)
    broken["<region>"] = GRAMMAR["<region>"][:-1]  # drop the call form
    with pytest.raises(GrammarError, match="<region>"):
        compile_decisions(broken)
    unbalanced = dict(GRAMMAR)
    unbalanced["<threads>"] = [("<thread>", {"prob": 0.7}), ("<thread><thread>", {"prob": 0.7})]
    with pytest.raises(GrammarError, match="sum to 1"):
        compile_decisions(unbalanced)
    undefined = dict(GRAMMAR)
    undefined["<icall>"] = ["<nowhere>"]
    with pytest.raises(GrammarError, match="undefined <nowhere>"):
        compile_decisions(undefined)


def test_grammar_module_does_not_import_fuzzingbook():
    import subprocess
    import sys

    code = "import sys, grammars, harness.core.choices, harness.core.codec, harness.core.render; print('fuzzingbook' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
