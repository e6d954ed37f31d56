"""Bytes <-> tree: total decoding, exact round trips, local byte changes."""

from __future__ import annotations

import random

from harness.core.choices import SLOT_COUNT, choices_of
from harness.core.codec import decode, encode, program_text
from harness.core.engine import generate
from harness.core.render import render
from harness.core.tree import MINIMAL_PROGRAM, is_in_profile


def test_empty_and_short_inputs_decode_to_the_minimal_program():
    assert decode(b"") == MINIMAL_PROGRAM
    assert decode(b"\0" * 40) == MINIMAL_PROGRAM
    assert encode(MINIMAL_PROGRAM) == b""


def test_round_trip_on_generated_trees():
    for program in generate("fast", 3, 20_000):
        data = encode(program)
        assert len(data) <= SLOT_COUNT
        assert decode(data) == program


def test_random_bytes_decode_within_the_profile():
    rng = random.Random(4)
    for _ in range(20_000):
        data = rng.randbytes(rng.randrange(0, 40))
        assert is_in_profile(decode(data))


def test_extra_bytes_are_ignored():
    rng = random.Random(5)
    for _ in range(1000):
        data = rng.randbytes(SLOT_COUNT)
        assert decode(data) == decode(data + rng.randbytes(10))


def test_one_changed_byte_changes_at_most_one_decision():
    rng = random.Random(6)
    for _ in range(5000):
        data = bytearray(rng.randbytes(SLOT_COUNT))
        before = {slot: choice for _, slot, choice in choices_of(decode(bytes(data)))}
        data[rng.randrange(SLOT_COUNT)] = rng.randrange(256)
        after = {slot: choice for _, slot, choice in choices_of(decode(bytes(data)))}
        common = before.keys() & after.keys()
        assert sum(before[s] != after[s] for s in common) <= 1


def test_program_text_renders_the_decoded_tree():
    data = bytes([128, 128, 128, 192, 233, 128])
    assert program_text(data) == render(decode(data))
    assert program_text(data, "oracle") == render(decode(data), "oracle")
