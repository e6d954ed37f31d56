"""The codec's totality and the structure-aware mutator/crossover (harness.core.mutate).

Large samples: 100,000 random byte strings, 100,000 mutations, 10,000
crossovers.  Every distinct program is rendered and given to the independent
checker once (a session-wide set of accepted trees; two worker processes).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import pytest

from harness.core import mutate as mutator_module
from harness.checker import check_text
from harness.core.choices import BODY_DECISION, NESTING_DECISION, SLOT_COUNT, random_draw, random_programs
from harness.core.codec import decode, encode
from harness.core.mutate import (
    COUNTS,
    CROSSOVER_OPERATORS,
    MUTATION_OPERATORS,
    FastRandom,
    Mutator,
    custom_crossover,
    custom_mutator,
    python_byte_mutate,
    random_site,
)
from harness.core.render import render
from harness.core.tree import ALL_SITES, MINIMAL_PROGRAM, Body, Program, Thread, is_in_profile

MAX_SIZES = (1, 2, 3, 4, 5, 8, 12, 16, 17, 18, 64, 4096)


# ------------------------------------------------------------ checker helper


def _violations(trees: list[Program]) -> list[tuple[Program, str]]:
    bad = []
    for tree in trees:
        violations = check_text(render(tree))
        if violations:
            bad.append((tree, violations[0].format("<program>")))
    return bad


class Accepted:
    """Trees already accepted by the checker (so each is checked once)."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.trees: set[Program] = set()
        self.pool = pool

    def check(self, trees) -> None:
        new = [t for t in set(trees) if t not in self.trees]
        for tree in new:
            assert is_in_profile(tree), tree
        chunks = [new[i:i + 500] for i in range(0, len(new), 500)]
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
    programs = random_programs(seed)
    out = []
    for _ in range(count):
        if rng.random() < 1 / 3:
            out.append(encode(next(programs)))
        else:
            out.append(rng.randbytes(rng.randrange(0, 41)))
    return out


# ------------------------------------------------------------------- codec


@pytest.mark.slow
def test_decode_is_total_on_random_bytes(accepted):
    rng = random.Random(11)
    datas = [b""] + [rng.randbytes(rng.randrange(0, 41)) for _ in range(100_000 - 1)]
    trees = [decode(d) for d in datas]  # never raises
    assert all(type(t) is Program for t in trees)
    assert decode(b"") == MINIMAL_PROGRAM
    accepted.check(trees)
    # bytes past the slot layout are ignored
    assert all(decode(d) == decode(d[:SLOT_COUNT]) for d in datas[:5000])


def test_round_trip_on_generated_trees():
    programs = list(random_programs(5, 20_000))
    programs += [Program((Thread(False, (site,)),)) for site in ALL_SITES]
    programs += [Program((Thread(True, (a, b)), Thread(False, (b,)))) for a in ALL_SITES for b in ALL_SITES]
    for program in programs:
        data = encode(program)
        assert len(data) <= SLOT_COUNT
        assert not data.endswith(b"\0")
        assert decode(data) == program
        assert encode(decode(data)) == data


# ----------------------------------------------------------------- mutation


@pytest.mark.slow
def test_mutations_are_valid_bounded_and_reproducible(accepted):
    counts: Counter = Counter()
    mutator = Mutator(counts=counts)
    rng = random.Random(21)
    datas = random_inputs(100_000, 21)
    outputs = []
    changed = same = 0
    for index, data in enumerate(datas):
        max_size = MAX_SIZES[rng.randrange(len(MAX_SIZES))]
        seed = rng.getrandbits(32)
        out = mutator.mutate(data, max_size, seed)
        assert type(out) is bytes and 0 < len(out) <= min(max_size, SLOT_COUNT), (data, max_size, seed, out)
        outputs.append(out)
        if max_size >= SLOT_COUNT:
            if decode(out) != decode(data):
                changed += 1
            else:
                same += 1
        if index % 50 == 0:  # same data and seed -> same bytes, from any mutator
            assert Mutator(counts=Counter()).mutate(data, max_size, seed) == out
    accepted.check(decode(o) for o in outputs)
    assert changed / (changed + same) > 0.995, (changed, same)
    missing = [op for op in MUTATION_OPERATORS if counts[op] == 0]
    assert not missing, f"operators never applied: {missing}; counts {counts}"
    total = sum(counts[op] for op in MUTATION_OPERATORS)
    # the byte-level fallback applies about 1 in 10 times
    assert 0.05 < counts["bytes"] / total < 0.16, counts


def test_crossovers_are_valid_bounded_and_reproducible(accepted):
    counts: Counter = Counter()
    mutator = Mutator(counts=counts)
    rng = random.Random(31)
    datas = random_inputs(20_000, 31)
    outputs = []
    for index in range(10_000):
        a, b = datas[2 * index], datas[2 * index + 1]
        max_size = MAX_SIZES[rng.randrange(len(MAX_SIZES))]
        seed = rng.getrandbits(32)
        out = mutator.crossover(a, b, max_size, seed)
        assert type(out) is bytes and 0 < len(out) <= min(max_size, SLOT_COUNT), (a, b, max_size, seed)
        outputs.append(out)
        if index % 20 == 0:
            assert Mutator(counts=Counter()).crossover(a, b, max_size, seed) == out
    accepted.check(decode(o) for o in outputs)
    missing = [op for op in CROSSOVER_OPERATORS if counts[op] == 0]
    assert not missing, f"crossover operators never applied: {missing}; counts {counts}"


def test_crossover_children_take_from_both_parents():
    mutator = Mutator(counts=Counter())
    a = Program((Thread(False, (ALL_SITES[0],)),))  # unwrapped arith only
    b = Program((Thread(True, (ALL_SITES[-1], ALL_SITES[-2])), Thread(True, (ALL_SITES[-3],))))
    da, db = encode(a), encode(b)
    from_b = 0
    for seed in range(500):
        child = decode(mutator.crossover(da, db, SLOT_COUNT, seed))
        assert child not in (a, b)
        sites = {site for thread in child.threads for site in thread.sites}
        if sites & set(ALL_SITES[-3:]):
            from_b += 1
    assert from_b > 400


def test_identical_parents_fall_back_to_mutation():
    counts: Counter = Counter()
    data = encode(next(random_programs(3)))
    out = Mutator(counts=counts).crossover(data, data, SLOT_COUNT, 7)
    assert decode(out) != decode(data)
    assert sum(counts[op] for op in CROSSOVER_OPERATORS) == 0
    assert sum(counts[op] for op in MUTATION_OPERATORS) == 1


def test_tiny_max_sizes():
    mutator = Mutator(counts=Counter())
    assert mutator.mutate(b"\x80\x80", 0, 1) == b""
    assert mutator.crossover(b"\x80", b"\x00", 0, 1) == b""
    # one byte: only the thread count can change; the output is never empty
    outs = {mutator.mutate(b"\x00", 1, seed) for seed in range(200)}
    assert outs == {b"\x80"}
    outs = {mutator.mutate(b"\x80", 1, seed) for seed in range(200)}
    assert outs == {b"\x00"}


def test_smallest_program_is_spelt_with_one_byte():
    # libFuzzer takes an empty mutation result for a failure
    counts: Counter = Counter()
    mutator = Mutator(counts=counts, weights={"remove_thread": 1})
    two = Program((Thread(False, (ALL_SITES[0],)), Thread(False, (ALL_SITES[0],))))
    out = mutator.mutate(encode(two), SLOT_COUNT, 5)
    assert out == b"\0" and decode(out) == MINIMAL_PROGRAM


def test_unapplicable_operators_retry_then_change_one_choice():
    counts: Counter = Counter()
    # flip_callee needs a call site; the minimal program has none
    mutator = Mutator(counts=counts, weights={"flip_callee": 1})
    for seed in range(50):
        assert decode(mutator.mutate(b"", SLOT_COUNT, seed)) != MINIMAL_PROGRAM
    assert counts == Counter({"set_choice": 50})


def test_byte_fallback_outside_fuzz_is_pure_python_and_deterministic():
    mutator = Mutator(counts=Counter(), weights={"bytes": 1})
    assert mutator.byte_mutate is None
    rng = random.Random(4)
    for _ in range(2000):
        data = rng.randbytes(rng.randrange(0, 20))
        max_size = MAX_SIZES[rng.randrange(len(MAX_SIZES))]
        seed = rng.getrandbits(32)
        out = mutator.mutate(data, max_size, seed)
        assert 0 < len(out) <= max_size
        assert out == Mutator(counts=Counter(), weights={"bytes": 1}).mutate(data, max_size, seed)
    fast = FastRandom(9)
    for _ in range(2000):
        data = bytes(fast.below(256) for _ in range(fast.below(20)))
        out = python_byte_mutate(data, 5, fast)
        assert len(out) <= 5


def test_libfuzzer_byte_mutation_is_used_when_installed():
    calls = []

    def fake_mutate(data: bytes, max_size: int) -> bytes:
        calls.append((data, max_size))
        return b"\xff" * max_size  # far too long for the layout: still fine

    mutator = Mutator(byte_mutate=fake_mutate, counts=Counter(), weights={"bytes": 1})
    out = mutator.mutate(b"", 12, 1)
    assert calls == [(b"", 12)]
    assert len(out) <= 12 and decode(out) == decode(b"\xff" * 12)


def test_module_hooks_count_into_the_module_counter():
    before = sum(COUNTS.values())
    for seed in range(100):
        custom_mutator(b"\x80\x80\x80", SLOT_COUNT, seed)
        custom_crossover(b"\x80\x80\x80", b"\x00\x80\xc0\xba", SLOT_COUNT, seed)
    assert sum(COUNTS.values()) == before + 200
    assert mutator_module.DEFAULT.counts is COUNTS


def test_regenerated_sites_follow_the_pcfg_weights():
    rng = FastRandom(123)
    draw = random_draw(rng)  # type: ignore[arg-type]
    n = 60_000
    sites = [random_site(draw) for _ in range(n)]
    bodies = Counter(int(site.body) for site in sites)
    nestings = Counter(int(site.nesting) for site in sites)
    for index, p in enumerate(BODY_DECISION.probabilities):
        assert abs(bodies[index] / n - p) < 0.01, (index, bodies[index] / n, p)
    for index, p in enumerate(NESTING_DECISION.probabilities):
        assert abs(nestings[index] / n - p) < 0.01, (index, nestings[index] / n, p)
    calls = [s for s in sites if s.body == Body.CALL]
    assert abs(sum(int(s.callee) for s in calls) / len(calls) - 0.5) < 0.03


def test_same_output_in_another_process():
    """No hash randomisation or global state: another interpreter agrees."""
    cases = [(bytes([i, 255 - i, i * 7 % 256]), 3 + i % 15, i * 2654435761 % 2**32) for i in range(50)]
    here = [custom_mutator(d, m, s).hex() for d, m, s in cases]
    code = (
        "import sys, ast\n"
        "from harness.core.mutate import custom_mutator\n"
        "cases = ast.literal_eval(sys.stdin.read())\n"
        "print(' '.join(custom_mutator(d, m, s).hex() for d, m, s in cases))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], input=repr(cases), capture_output=True,
                            text=True, timeout=60, env={"PYTHONHASHSEED": "12345", "PATH": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == here


def test_mutator_is_fast_enough():
    """A loose floor (the benchmark checks the 50,000/s goal): catches a
    slowdown by an order of magnitude, even on a busy CI machine."""
    datas = random_inputs(20_000, 77)
    mutator = Mutator(counts=Counter())
    start = time.perf_counter()
    for index, data in enumerate(datas):
        mutator.mutate(data, SLOT_COUNT, index)
    rate = len(datas) / (time.perf_counter() - start)
    assert rate > 10_000, f"{rate:.0f} mutations/s"
