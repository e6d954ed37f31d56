"""Grammars: fuzzingbook accepts the profiles, malformed grammars get one clear line,
and the default grammar can be edited without touching code."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import grammars.program_shape as shape
from harness.core.compiled import GrammarError
from harness.core.engine import fuzzingbook_grammar
from harness.core.grammar import compile_grammar, default_grammar, load_file

ROOT = Path(__file__).resolve().parent.parent
LOOMFUZZ = [sys.executable, "-m", "harness.cli"]


def test_fuzzingbook_accepts_the_grammar():
    from fuzzingbook.Grammars import is_valid_grammar
    from fuzzingbook.ProbabilisticGrammarFuzzer import is_valid_probabilistic_grammar

    plain = fuzzingbook_grammar(default_grammar())
    assert is_valid_grammar(plain, shape.START, supported_opts={"prob"})
    assert is_valid_probabilistic_grammar(plain, shape.START)
    # our own options are plain dict entries: fuzzingbook accepts them when told so
    assert is_valid_grammar(shape.GRAMMAR, shape.START,
                            supported_opts={"prob", "counter", "indent", "label"})


def test_no_mlir_angle_bracket_reads_as_a_nonterminal():
    for expansions in shape.GRAMMAR.values():
        for expansion in expansions:
            text = expansion[0] if isinstance(expansion, tuple) else expansion
            for symbol in re.findall(r"<[^<> ]*>", text):
                assert symbol in shape.GRAMMAR, symbol


def test_weights_are_the_conventions():
    g = default_grammar()
    probabilities = {g.names[n]: g.probabilities(n) for n in g.decisions()}
    assert probabilities["<threads>"] == (0.5, 0.5)
    assert probabilities["<top-call>"] == (0.5, 0.5)
    assert probabilities["<sites>"] == (0.5, 0.5)
    assert probabilities["<site>"] == (0.5, 0.25, 0.25)
    assert probabilities["<region>"] == pytest.approx((2 / 11,) * 5 + (1 / 11,))
    assert probabilities["<call-region>"] == (0.5, 0.5)
    assert g.count[g.start] == 854_700 and g.max_bytes == 17


def test_byte_tables_follow_the_weights():
    g = default_grammar()
    for n in g.decisions():
        table = g.byte_table[n]
        assert len(table) == 256
        for a, probability in enumerate(g.probabilities(n)):
            assert abs(table.count(a) - 256 * probability) <= 1
            assert table[g.smallest_byte[n][a]] == a


def test_terminals_restore_mlir_text():
    from harness.core.render import render
    from harness.core.walk import ReplayModel, walk

    text = render(walk(default_grammar(), ReplayModel([])), default_grammar())
    assert "memref<4xi32>" in text and "\u2039" not in text


MALFORMED = {
    "undefined": ({"<start>": ["<a>"], "<a>": ["x<nowhere>"]}, "<a>", "undefined nonterminal <nowhere>"),
    "no-finite": ({"<start>": ["<a>"], "<a>": ["(<a>)", "[<a>]"]}, "<a>", "no finite expansion"),
    "sum-0.9": ({"<start>": ["<a>"], "<a>": [["x", {"prob": 0.5}], ["y", {"prob": 0.4}]]}, "<a>",
                "probabilities sum to 0.9, not 1"),
    "unreachable": ({"<start>": ["x"], "<lost>": ["y"]}, "<lost>", "unreachable"),
    "bad-option": ({"<start>": ["<a>"], "<a>": [["x", {"weight": 2}], "y"]}, "<a>", "bad option 'weight'"),
    "bad-counter": ({"<start>": ["n$N"]}, "<start>", "$N names a counter that no expansion declares"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_grammar_gets_one_line_and_status_2(case, tmp_path):
    grammar, symbol, what = MALFORMED[case]
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(grammar, indent=1))
    with pytest.raises(GrammarError) as caught:
        load_file(str(path))
    assert symbol in str(caught.value) and what in str(caught.value)
    for command in (["generate", "-n", "1"], ["decode", str(path)]):
        result = subprocess.run([*LOOMFUZZ, *command, "--grammar", str(path)],
                                capture_output=True, text=True, cwd=ROOT)
        assert result.returncode == 2, result
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert str(path) in lines[0] and symbol in lines[0] and what in lines[0]
        # the line where the nonterminal is defined
        defined = next(i for i, line in enumerate(path.read_text().splitlines(), 1)
                       if f'"{symbol}":' in line)
        assert f"{path}:{defined}:" in lines[0]


def test_python_grammar_file_errors_name_the_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text('START = "<start>"\nGRAMMAR = {\n    "<start>": ["<a>"],\n    "<a>": [("x", {"prob": 2})],\n}\n')
    result = subprocess.run([*LOOMFUZZ, "generate", "-n", "1", "--grammar", str(path)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert f"{path}:4: <a>: bad option 'prob'" in result.stderr.strip()
    assert "Traceback" not in result.stderr


def test_compile_rejects_renderings_that_change_the_tree():
    with pytest.raises(GrammarError, match="must keep the nonterminals"):
        compile_grammar({"<start>": ["<a>"], "<a>": ["x"]}, renderings={"other": {"<start>": ["y"]}})


EDITED = '''
"""The default grammar, edited: a third thread and a seventh region body."""
import copy
import grammars.program_shape as base
from grammars.program_shape import RENDERINGS, START, mlir, opts, _value_region

CONTRACT = "P1-P24"
GRAMMAR = copy.deepcopy(base.GRAMMAR)
GRAMMAR["<threads>"] = [
    ("<thread>", opts(prob=0.4, label="1")),
    ("<thread><thread>", opts(prob=0.4, label="2")),
    ("<thread><thread><thread>", opts(prob=0.2, label="3")),
]
GRAMMAR["<region>"] = [(text, opts(prob=o["prob"] * 11 / 13, label=o["label"]))
                       for text, o in base.GRAMMAR["<region>"]] + [
    ("<xor-region>", opts(prob=2 / 13, label="xor"))]
GRAMMAR["<xor-region>"] = [_value_region("      %x = arith.xori %a, %a : i32\\n", "%x")]
'''


def test_editing_story_third_thread_and_seventh_body(tmp_path, fake_loom_opt):
    """A copy of the default grammar with a third thread and a seventh body
    generates, decodes, mutates and minimizes without any code change."""
    from harness.checker import check_text
    from harness.core.codec import decode, encode
    from harness.core.mutate import Mutator
    from harness.core.reduce import minimize
    from harness.core.render import render
    from harness.core.tree import decisions
    from harness.core.walk import random_trees
    from harness.core.tree import to_fuzzingbook
    from recognizer import recognizes

    path = tmp_path / "edited.py"
    path.write_text(EDITED)
    g = load_file(str(path))
    spec = importlib.util.spec_from_file_location("edited_raw", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    trees = list(random_trees(g, 1, 3000))
    threads = g.ids["<threads>"]
    xor = (g.ids["<region>"], 6)
    three = [t for t in trees if (threads, 2) in set(decisions(g, t))]
    with_xor = [t for t in trees if xor in set(decisions(g, t))]
    assert three and with_xor
    for tree in three[:50] + with_xor[:50]:
        text = render(tree, g)
        assert check_text(text) == [], text
        assert recognizes(module.GRAMMAR, "<start>", to_fuzzingbook(g, tree))
        assert decode(encode(tree, g), g) == tree
    assert any("arith.xori" in render(t, g) for t in with_xor)
    assert any("@thread_2" in render(t, g) for t in three)
    mutator = Mutator(g)
    for i, tree in enumerate(trees[:500]):
        out = mutator.mutate(encode(tree, g) or b"\0", g.max_bytes, i)
        assert recognizes(module.GRAMMAR, "<start>", to_fuzzingbook(g, decode(out, g)))
    big = next(t for t in three if xor in set(decisions(g, t)))
    small = minimize(big, g, lambda t: xor in set(decisions(g, t))).tree
    assert sum(1 for n, a in decisions(g, small) if n == threads) == 1
    assert (threads, 0) in set(decisions(g, small)) and xor in set(decisions(g, small))

    # the CLI: --stats shows the new choices; decode reads inputs of the edited grammar
    result = subprocess.run([*LOOMFUZZ, "generate", "-n", "2000", "-o", str(tmp_path / "out"),
                             "--stats", "--grammar", str(path), "--no-progress"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert re.search(r"<threads>\s+1\s+0\.4000", result.stdout)
    assert re.search(r"^\s+3\s+0\.2000\s+0\.\d+\s+\d+", result.stdout, re.M)
    assert re.search(r"^\s+xor\s+0\.1538", result.stdout, re.M)
    data = tmp_path / "input"
    data.write_bytes(encode(big, g))
    decoded = subprocess.run([*LOOMFUZZ, "decode", str(data), "--grammar", str(path)],
                             capture_output=True, text=True, cwd=ROOT)
    assert decoded.returncode == 0 and "arith.xori" in decoded.stdout and "@thread_2" in decoded.stdout

    # triage with the edited grammar: a crash (freeze in scf.for) in the third
    # thread is bucketed and minimized to one thread
    freeze = (g.ids["<region>"], 3)
    for_site = (g.ids["<site>"], 2)
    crashing = next(t for t in three if freeze in set(decisions(g, t)) and for_site in set(decisions(g, t))
                    and "llvm.freeze" in render(t, g).split("@thread_2")[1]
                    and "scf.for %iv" in render(t, g).split("@thread_2")[1])
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "crash-edited").write_bytes(encode(crashing, g))
    out = tmp_path / "triage"
    triaged = subprocess.run([*LOOMFUZZ, "triage", str(artifacts), "--loom-opt", fake_loom_opt,
                              "--pass-args=--plant=assert",
                              "--grammar", str(path), "--out", str(out), "--no-progress"],
                             capture_output=True, text=True, cwd=ROOT)
    assert triaged.returncode == 0, triaged.stderr
    report = json.loads((out / "report.json").read_text())
    assert len(report["buckets"]) == 1
    minimized = report["buckets"][0]["minimized"]["tree"]
    assert minimized.startswith("threads=1[") and "region=freeze" in minimized and "site=for" in minimized
