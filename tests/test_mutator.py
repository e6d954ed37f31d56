"""The structure-aware mutator and crossover (harness.core.mutate) on the default grammar.

Large samples: 50,000 mutations (each made twice, by two mutators with the
same history) and 10,000 crossovers of random byte strings
and corpus-like encodings; every distinct program is rendered and given to
the independent checker once (two worker processes).  (Every grammar, judged
by the test-side recognizer: tests/test_core.py.)
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import pytest

from harness.checker import check_text
from harness.core.codec import decode, encode
from harness.core.grammar import default_grammar
from harness.core.mutate import CROSSOVER_OPERATORS, MUTATION_OPERATORS, FastRandom, Mutator, python_byte_mutate
from harness.core.render import render
from harness.core.tree_ops import delete_repeated, swap_repeated
from harness.core.walk import random_trees
from shapes import ALL_SITES, Program, Thread, from_shape, from_tree, shape, to_tree

G = default_grammar()
WIDTH = G.max_bytes
MAX_SIZES = (1, 2, 3, 4, 5, 8, 12, 16, 17, 18, 64, 4096)


def _violations(texts: list[str]) -> list[str]:
    return [v[0].format("<program>") for v in map(check_text, texts) if v]


class Accepted:
    """Trees already accepted by the checker (so each is checked once)."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.trees: set = set()
        self.pool = pool

    def check(self, trees) -> None:
        new = [t for t in set(trees) if t not in self.trees]
        texts = [render(t, G) for t in new]
        chunks = [texts[i:i + 500] for i in range(0, len(texts), 500)]
        bad = [b for result in self.pool.map(_violations, chunks) for b in result]
        assert not bad, f"{len(bad)} programs rejected by the checker, e.g. {bad[:3]}"
        self.trees.update(new)


@pytest.fixture(scope="module")
def accepted():
    with ProcessPoolExecutor(max_workers=2) as pool:
        yield Accepted(pool)


def random_inputs(count: int, seed: int) -> list[bytes]:
    """Random byte strings (0..40 bytes, the empty one included) and, one in
    three, canonical encodings of PCFG programs (what a corpus holds)."""
    rng = random.Random(seed)
    trees = random_trees(G, seed)
    return [encode(next(trees), G) if rng.random() < 1 / 3 else rng.randbytes(rng.randrange(0, 41))
            for _ in range(count)]


@pytest.mark.slow
def test_mutations_are_valid_bounded_and_reproducible(accepted, samples):
    mutator, twin = Mutator(G), Mutator(G)
    rng = random.Random(21)
    outputs = []
    changed = same = 0
    for index, data in enumerate(random_inputs(samples(20_000, 50_000), 21)):
        max_size = MAX_SIZES[rng.randrange(len(MAX_SIZES))]
        seed = rng.getrandbits(32)
        out = mutator.mutate(data, max_size, seed)
        # same (data, max_size, seed) and the same inputs seen before (the pool): same bytes
        assert twin.mutate(data, max_size, seed) == out
        assert type(out) is bytes and 0 < len(out) <= min(max_size, WIDTH), (data, max_size, seed, out)
        outputs.append(out)
        if max_size >= WIDTH:
            if decode(out, G) != decode(data, G):
                changed += 1
            else:
                same += 1
    accepted.check(decode(o, G) for o in outputs)
    assert changed / (changed + same) > 0.999, (changed, same)
    missing = [op for op in MUTATION_OPERATORS if mutator.counts[op] == 0]
    assert not missing, f"operators never applied: {missing}; counts {mutator.counts}"


def test_crossovers_are_valid_bounded_and_reproducible(accepted):
    mutator = Mutator(G)
    rng = random.Random(31)
    datas = random_inputs(20_000, 31)
    outputs = []
    for index in range(10_000):
        a, b = datas[2 * index], datas[2 * index + 1]
        max_size = MAX_SIZES[rng.randrange(len(MAX_SIZES))]
        seed = rng.getrandbits(32)
        out = mutator.crossover(a, b, max_size, seed)
        assert type(out) is bytes and 0 < len(out) <= min(max_size, WIDTH), (a, b, max_size, seed)
        outputs.append(out)
        if index % 20 == 0:  # without the pool, no history matters
            assert Mutator(G).crossover(a, b, max_size, seed) == Mutator(G).crossover(a, b, max_size, seed)
    accepted.check(decode(o, G) for o in outputs)
    missing = [op for op in CROSSOVER_OPERATORS if mutator.counts[op] == 0]
    assert not missing, f"crossover operators never applied: {missing}; counts {mutator.counts}"


def test_crossover_children_take_from_both_parents():
    mutator = Mutator(G)
    a = Program((Thread(False, (ALL_SITES[0],)),))  # unwrapped arith only
    b = Program((Thread(True, (ALL_SITES[-1], ALL_SITES[-2])), Thread(True, (ALL_SITES[-3],))))
    da, db = encode(to_tree(a), G), encode(to_tree(b), G)
    from_b = 0
    for seed in range(500):
        child = from_tree(decode(mutator.crossover(da, db, WIDTH, seed), G))
        assert child != a
        if {site for thread in child.threads for site in thread.sites} & set(ALL_SITES[-3:]):
            from_b += 1
    assert from_b > 300, from_b


def test_identical_parents_fall_back_to_mutation():
    mutator = Mutator(G)
    data = encode(next(random_trees(G, 3)), G)
    out = mutator.crossover(data, data, WIDTH, 7)
    assert decode(out, G) != decode(data, G)
    assert sum(mutator.counts[op] for op in CROSSOVER_OPERATORS) == 0
    assert sum(mutator.counts[op] for op in (*MUTATION_OPERATORS, "fallback_switch")) == 1


def test_tiny_max_sizes():
    mutator = Mutator(G)
    assert mutator.mutate(b"\x80\x80", 0, 1) == b""
    assert mutator.crossover(b"\x80", b"\x00", 0, 1) == b""
    # one byte: only the thread count can change; the output is never empty
    assert {mutator.mutate(b"\x00", 1, seed) for seed in range(200)} == {b"\x80"}
    assert {mutator.mutate(b"\x80", 1, seed) for seed in range(200)} == {b"\x00"}


def test_the_program_with_the_empty_encoding_is_spelt_with_one_byte():
    mutator = Mutator(G, weights={"delete_repeated": 1})
    two = encode(to_tree(from_shape("t0[memory] t1[memory]")), G)
    outs = {mutator.mutate(two, WIDTH, seed) for seed in range(20)}
    assert outs == {b"\x00"} and encode(decode(b"\x00", G), G) == b""


def test_unapplicable_operators_fall_back_to_a_switch():
    # the minimal program has no repetition to swap: the fallback still changes it
    mutator = Mutator(G, weights={"swap_repeated": 1})
    for seed in range(50):
        assert decode(mutator.mutate(b"", WIDTH, seed), G) != decode(b"", G)
    assert mutator.counts == Counter({"fallback_switch": 50})


def test_byte_fallback_outside_fuzz_is_pure_python_and_deterministic():
    mutator = Mutator(G, weights={"bytes": 1})
    assert mutator.byte_mutate is None
    rng = random.Random(4)
    for _ in range(2000):
        data = rng.randbytes(rng.randrange(0, 20))
        max_size = MAX_SIZES[rng.randrange(len(MAX_SIZES))]
        seed = rng.getrandbits(32)
        out = mutator.mutate(data, max_size, seed)
        assert 0 < len(out) <= max_size
        assert out == Mutator(G, weights={"bytes": 1}).mutate(data, max_size, seed)  # no history
    fast = FastRandom(9)
    for _ in range(2000):
        data = bytes(fast.below(256) for _ in range(fast.below(20)))
        assert len(python_byte_mutate(data, 5, fast)) <= 5


def test_libfuzzer_byte_mutation_is_used_when_installed():
    calls = []

    def fake_mutate(data: bytes, max_size: int) -> bytes:
        calls.append((data, max_size))
        return b"\xff" * max_size  # far too long for the layout: still fine

    mutator = Mutator(G, weights={"bytes": 1}, byte_mutate=fake_mutate)
    out = mutator.mutate(b"", 12, 1)
    assert calls == [(b"", 12)]
    assert len(out) <= 12 and decode(out, G) == decode(b"\xff" * 12, G)


def test_regenerated_subtrees_follow_the_pcfg_weights():
    mutator = Mutator(G)
    region = G.ids["<region>"]
    counts = Counter(mutator.context.regenerate(region, 5)[1] for _ in range(60_000))
    for a, p in enumerate(G.probabilities(region)):
        assert abs(counts[a] / 60_000 - p) < 0.01, (a, counts[a] / 60_000, p)


def test_same_output_in_another_process():
    """No hash randomisation or global state: another interpreter agrees."""
    cases = [(bytes([i, 255 - i, i * 7 % 256]), 3 + i % 15, i * 2654435761 % 2**32) for i in range(50)]
    here_mutator = Mutator(G)
    here = [here_mutator.mutate(d, m, s).hex() for d, m, s in cases]
    code = (
        "import sys, ast\n"
        "from harness.core.grammar import default_grammar\n"
        "from harness.core.mutate import Mutator\n"
        "cases = ast.literal_eval(sys.stdin.read())\n"
        "m = Mutator(default_grammar())\n"
        "print(' '.join(m.mutate(d, m_, s).hex() for d, m_, s in cases))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], input=repr(cases), capture_output=True,
                            text=True, timeout=60, env={"PYTHONHASHSEED": "12345", "PATH": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == here


def test_operators_make_the_changes_they_name():
    program = from_shape("t0[icall; for:freeze, arith] t1[if:call/llvm]")
    tree = to_tree(program)
    mutator = Mutator(G)
    seen = Counter()
    for seed in range(300):
        mutator.rng.seed(seed)
        smaller = from_tree(delete_repeated(mutator.context, tree).result)
        seen[shape(smaller)] += 1
    # a thread, a site or the optional %icall went, and nothing else
    assert set(seen) == {"t0[icall; for:freeze, arith]", "t0[if:call/llvm]", "t0[icall; arith] t1[if:call/llvm]",
            "t0[icall; for:freeze] t1[if:call/llvm]", "t0[for:freeze, arith] t1[if:call/llvm]"}
    mutator.rng.seed(1)
    swapped = {shape(from_tree(swap_repeated(mutator.context, tree).result)) for _ in range(50)}
    assert "t0[if:call/llvm] t1[icall; for:freeze, arith]" in swapped
    assert "t0[icall; arith, for:freeze] t1[if:call/llvm]" in swapped
