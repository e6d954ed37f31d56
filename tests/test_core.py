"""The generic core on every grammar: the profiles in grammars/ and small test grammars
(recursive, repetitions, counters with indentation).

Outputs are judged by the test-side recognizer (tests/recognizer.py), which reads
the grammar as written and shares no code with the engine's walk.
"""

from __future__ import annotations

import math
import importlib.util
import os
import random
from pathlib import Path

import pytest

from harness.core.codec import decode, encode, max_input_length
from harness.core.engine import generate
from harness.core.features import KPathFeatures
from grammars import PROFILES
from harness.core.grammar import load_file
from harness.core.mutate import Mutator
from harness.core.parse import parse
from harness.core.reduce import minimize, sort_key
from harness.core.render import render
from harness.core.stats import ChoiceCounts
from harness.core.tree import decisions, from_fuzzingbook, to_fuzzingbook
from recognizer import recognizes

ROOT = Path(__file__).resolve().parent.parent
TEST_GRAMMARS = sorted((Path(__file__).parent / "grammars").glob("*.py"))
PROFILE_FILES = sorted({ROOT / "grammars" / (module.rsplit(".", 1)[1] + ".py") for module in PROFILES.values()})
ALL = [*PROFILE_FILES, *TEST_GRAMMARS]
ALPHA = 0.001


def raw(path: Path):
    spec = importlib.util.spec_from_file_location(f"raw_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GRAMMAR, getattr(module, "START", "<start>")


@pytest.fixture(scope="module", params=ALL, ids=lambda p: p.stem)
def grammar_case(request):
    return load_file(str(request.param)), raw(request.param)


def in_language(case, tree) -> bool:
    g, (grammar, start) = case
    return recognizes(grammar, start, to_fuzzingbook(g, tree))


def test_decoder_is_total_and_round_trips(grammar_case):
    g, _ = grammar_case
    rng = random.Random(7)
    width = max_input_length(g, 64)
    for i in range(100_000):
        data = rng.randbytes(rng.randrange(0, width + 4))
        tree = decode(data, g)
        if i % 100 == 0:
            assert in_language(grammar_case, tree), data.hex()
            canonical = encode(tree, g)
            assert decode(canonical, g) == tree
            assert encode(decode(canonical, g), g) == canonical
            assert len(canonical) <= len(data) or len(canonical) <= width


def test_generated_trees_are_in_the_language_and_parse_back(grammar_case):
    g, _ = grammar_case
    for tree in generate(g, "fast", 3, 1500):
        assert in_language(grammar_case, tree)
        assert decode(encode(tree, g), g) == tree
        assert from_fuzzingbook(g, to_fuzzingbook(g, tree)) == tree
    # a use's rank counts modulo the values in scope, so two ranks may print the same name:
    # the parser takes the smallest, and the text is what decides
    uses = any(alt.binding and alt.binding.uses for alt_list in g.alts for alt in alt_list)
    for tree in generate(g, "fast", 4, 60):
        for style in g.renderings:
            text = render(tree, g, style)
            parsed = parse(text, g)
            assert parsed.ok and parsed.style == style, parsed.reason
            assert render(parsed.tree, g, style) == text
            assert parsed.tree == tree or uses


def test_mutation_and_crossover_stay_in_the_language(grammar_case):
    g, _ = grammar_case
    mutator = Mutator(g)
    width = max_input_length(g, 256)
    inputs = [encode(t, g) or b"\0" for t in generate(g, "fast", 11, 200)]
    for i in range(3000):
        data = inputs[i % len(inputs)]
        max_size = width if i % 3 else max(1, width // 2)
        out = mutator.mutate(data, max_size, i)
        assert 0 < len(out) <= max_size
        assert out == mutator.mutate(data, max_size, i)  # deterministic
        assert in_language(grammar_case, decode(out, g))
    # chained as libFuzzer does (-mutate_depth): each output mutated again, its tree and
    # node index taken from the mutation that made it, not from decoding it
    for i in range(200):
        data = inputs[i]
        for step in range(5):
            data = mutator.mutate(data, width, i * 5 + step)
            assert 0 < len(data) <= width
            assert mutator.decode(data) == decode(data, g)
            assert in_language(grammar_case, decode(data, g))
    for i in range(1000):
        out = mutator.crossover(inputs[i % 200], inputs[(i * 7 + 3) % 200], width, i)
        assert 0 < len(out) <= width
        assert in_language(grammar_case, decode(out, g))
    # every operator is counted; the repetition operators wherever the grammar repeats
    for name in ("regenerate_node", "switch_alternative", "bytes", "splice"):
        assert mutator.counts[name] > 0, mutator.counts
    if mutator.repetitions.lists or mutator.repetitions.chains:
        for name in ("delete_repeated", "replicate_repeated"):
            assert mutator.counts[name] > 0, mutator.counts


def test_minimized_trees_stay_in_the_language(grammar_case):
    g, _ = grammar_case
    rng = random.Random(5)
    trees = [t for t in generate(g, "fast", 21, 400) if sum(1 for _ in decisions(g, t)) >= 3][:25]
    assert trees
    for tree in trees:
        made = list(decisions(g, tree))
        wanted = made[rng.randrange(len(made))]
        result = minimize(tree, g, lambda t: wanted in set(decisions(g, t)))
        assert in_language(grammar_case, result.tree)
        assert wanted in set(decisions(g, result.tree))
        assert sort_key(g, result.tree) <= sort_key(g, tree)


def _chi_square_ok(counts: ChoiceCounts, g) -> list[str]:
    from scipy.stats import chisquare

    bad = []
    for n in counts.decisions:
        observed = counts.counts[n]
        total = sum(observed)
        expected = [total * p for p in g.probabilities(n)]
        if total < 100 or min(expected) < 5:
            continue  # too few observations for the test to mean anything
        p_value = chisquare(observed, expected).pvalue
        if p_value <= ALPHA:
            bad.append(f"{g.names[n]}: observed {observed}, expected {expected} (p={p_value:.2g})")
    return bad


def test_fast_engine_follows_every_weight(grammar_case):
    _assert_follows_weights(grammar_case[0], "fast", 20_000)


# The default grammar's fuzzingbook sample is tests/test_engine.py's (3,000 programs).
@pytest.mark.parametrize("path", [p for p in ALL if p.stem != "program_shape"], ids=lambda p: p.stem)
def test_fuzzingbook_engine_follows_every_weight(path):
    # fuzzingbook expands about 20 wide programs a second here (widths: fewer): fewer of them
    # (the frequent choices still get the 100 observations the chi-square test needs)
    _assert_follows_weights(load_file(str(path)), "fuzzingbook", 100 if path.stem in ("wide", "widths") else 1_500)


def _assert_follows_weights(g, engine: str, count: int) -> None:
    counts = ChoiceCounts(g).update(generate(g, engine, 2024, count))
    tested = [n for n in counts.decisions if sum(counts.counts[n]) >= 100]
    assert tested, "no weighted choice was observed often enough"
    assert not _chi_square_ok(counts, g)


def test_chi_square_catches_a_skewed_sample():
    g = load_file(str(ROOT / "grammars" / "program_shape.py"))  # the default profile
    counts = ChoiceCounts(g)
    n = g.ids["<site>"]
    counts.counts[n] = [400, 350, 250]
    assert counts.chi_square(n)[1] < ALPHA
    assert _chi_square_ok(counts, g)


def test_random_bytes_follow_the_byte_tables():
    # In a finite grammar every byte is one decision: uniform bytes choose each
    # alternative with its share of the byte table (the PCFG, rounded to 1/256).
    g = load_file(str(ROOT / "grammars" / "program_shape.py"))
    rng = random.Random(3)
    counts = ChoiceCounts(g)
    for _ in range(20_000):
        counts.add(decode(rng.randbytes(g.max_bytes), g))
    from scipy.stats import chisquare

    for n in counts.decisions:
        observed = counts.counts[n]
        shares = [g.byte_table[n].count(a) / 256 for a in range(len(observed))]
        assert chisquare(observed, [sum(observed) * s for s in shares]).pvalue > ALPHA
        assert all(abs(s - p) <= 1 / 256 for s, p in zip(shares, g.probabilities(n)))


def test_a_changed_byte_changes_one_decision_in_a_finite_grammar():
    g = load_file(str(ROOT / "grammars" / "program_shape.py"))
    rng = random.Random(9)
    for _ in range(3000):
        data = bytearray(rng.randbytes(g.max_bytes))
        before = list(decisions(g, decode(bytes(data), g)))
        k = rng.randrange(len(data))
        data[k] = rng.randrange(256)
        after = list(decisions(g, decode(bytes(data), g)))
        # the decisions are the same except one value, or the changed choice
        # changed which decisions exist (then the bytes after it kept their meaning)
        changed = [i for i, (x, y) in enumerate(zip(before, after)) if x != y]
        if len(before) == len(after):
            assert len(changed) <= 1


def test_kpath_features_are_numbered_and_reached():
    for path in ALL:
        g = load_file(str(path))
        features = KPathFeatures(g)
        trees = list(generate(g, "fast", 1, 3000))
        covered = features.union(trees)
        assert covered <= set(range(len(features)))
        report = features.report(covered)
        assert report.k2_covered > 0
        # every alternative the sample should have drawn 5 times or more was reached (the
        # wide profile has alternatives too rare for 3,000 programs: calls at depth 3, ...)
        # A miss is a failure where the sample should have drawn it often enough that missing it by
        # chance is unlikely for the grammar as a whole: expected at least 5 times, and at least
        # ln(100 n) for n alternatives (Poisson: n * exp(-expected) <= 1%; the widths profile has
        # ~1,000 alternatives, where one expected 6 times is missed by chance in one seed of a few)
        counts = ChoiceCounts(g).update(trees).counts
        k1 = sum(1 for f in features.features if f.k == 1)
        enough = max(5.0, math.log(100 * k1))
        missed = [(g.names[f.choice[0]], g.label(*f.choice)) for i, f in enumerate(features.features)
                  if f.k == 1 and i not in covered
                  and sum(counts[f.choice[0]]) * g.alts[f.choice[0]][f.choice[1]].prob >= enough]
        assert not missed, (path.stem, missed)
        assert report.k1_covered >= 0.95 * report.k1_total, (path.stem, report.uncovered_k1)


def test_counters_and_indentation_are_generic():
    g = load_file(str(Path(__file__).parent / "grammars" / "counters_indent.py"))
    texts = [render(t, g) for t in generate(g, "fast", 5, 300)]
    nested = [t for t in texts if t.count("block") >= 3]
    assert nested
    for text in texts:
        numbers = [int(line.split("block b")[1].split(" ")[0]) for line in text.splitlines() if "block b" in line]
        assert numbers == list(range(len(numbers)))  # emission order, from 0
        depth = 0
        for line in text.splitlines():
            if line.strip() == "}":
                depth -= 1
            assert line.startswith("  " * depth) and not line.startswith("  " * depth + " "), text
            if line.endswith("{"):
                depth += 1


def test_same_seed_same_bytes():
    g = load_file(str(TEST_GRAMMARS[0]))
    first = [render(t, g) for t in generate(g, "fast", 8, 200)]
    assert first == [render(t, g) for t in generate(g, "fast", 8, 200)]
    assert first != [render(t, g) for t in generate(g, "fast", 9, 200)]


def test_grammar_core_never_imports_fuzzingbook():
    import subprocess
    import sys

    code = ("import sys, harness.core.codec, harness.core.render, harness.core.mutate, "
            "harness.core.reduce, harness.core.features, harness.core.parse; "
            "from harness.core.grammar import default_grammar; default_grammar(); "
            "print('fuzzingbook' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.stdout.strip() == "False"
