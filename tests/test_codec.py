"""Bytes <-> tree on the default grammar: total decoding, exact round trips, the
17-byte layout.  (Every grammar: tests/test_core.py.)"""

from __future__ import annotations

import random

from harness.core.codec import decode, encode
from harness.core.engine import generate
from harness.core.grammar import default_grammar
from harness.core.tree import decisions, walk_nodes
from shapes import from_shape, from_tree, shape, to_tree

G = default_grammar()
WIDTH = G.max_bytes  # 17: the whole choice sequence


def test_empty_and_zero_inputs_decode_to_small_programs():
    # a missing byte takes the cheapest alternative; byte 0 the first one
    assert shape(from_tree(decode(b"", G))) == "t0[memory]"
    assert shape(from_tree(decode(b"\0" * 40, G))) == "t0[arith]"
    assert encode(decode(b"", G), G) == b""


def test_round_trip_on_generated_trees():
    for tree in generate(G, "fast", 3, 20_000):
        data = encode(tree, G)
        assert len(data) <= WIDTH
        assert decode(data, G) == tree


def test_random_bytes_decode_within_the_profile():
    rng = random.Random(4)
    for _ in range(20_000):
        program = from_tree(decode(rng.randbytes(rng.randrange(0, 40)), G))
        assert 1 <= len(program.threads) <= 2 and all(1 <= len(t.sites) <= 2 for t in program.threads)


def test_extra_bytes_are_ignored():
    rng = random.Random(5)
    for _ in range(1000):
        data = rng.randbytes(WIDTH)
        assert decode(data, G) == decode(data + rng.randbytes(10), G)


def _slots(tree) -> dict[int, int]:
    """byte position -> alternative, read off the layout (widths of the grammar)."""
    out: dict[int, int] = {}

    def visit(node, position: int) -> None:
        n, a, kids = node
        if len(G.alts[n]) > 1:
            out[position] = a
            position += 1
        for kid in kids:
            visit(kid, position)
            position += G.width[kid[0]]

    visit(tree, 0)
    return out


def test_byte_k_is_one_decision_whatever_came_before():
    rng = random.Random(6)
    for _ in range(5000):
        data = bytearray(rng.randbytes(WIDTH))
        before = _slots(decode(bytes(data), G))
        data[rng.randrange(WIDTH)] = rng.randrange(256)
        after = _slots(decode(bytes(data), G))
        common = before.keys() & after.keys()
        assert sum(before[k] != after[k] for k in common) <= 1


def test_the_layout_is_the_spec_order():
    # byte 0: threads; per thread (8 bytes): top-call, sites, 2 x (nesting, body, callee)
    program = from_shape("t0[icall; for:freeze, arith] t1[if:call/llvm]")
    slots = _slots(to_tree(program))
    assert slots == {0: 1, 1: 1, 2: 1, 3: 2, 4: 3, 6: 0, 7: 0, 9: 0, 10: 0, 11: 1, 12: 5, 13: 1}
    names = [G.names[n] for n, _ in decisions(G, to_tree(program))]
    assert names[:5] == ["<threads>", "<top-call>", "<sites>", "<site>", "<region>"]
    assert sum(1 for _ in walk_nodes(to_tree(program))) > 20
