"""Fuzz input bytes <-> shape tree, in the manner of Hypothesis and Zest.

Byte ``k`` answers the decision in slot ``k`` of :mod:`harness.core.choices`'
layout, mapped through that decision's byte table (each alternative owns a
run of byte values in proportion to its probability).  Missing bytes answer
0, the first alternative; bytes past the layout are ignored.  So the decoder
is total (every byte string, the empty one included, is a valid program of
the profile), and a flipped byte is one changed decision.
"""

from __future__ import annotations

from harness.core.choices import SLOT_COUNT, build, choices_of
from harness.core.grammar import DECISIONS, Decision
from harness.core.render import render as render_program
from harness.core.tree import Program

_TABLES = {id(d): d.byte_table for d in DECISIONS.values()}
_CANONICAL = {id(d): d.canonical_bytes for d in DECISIONS.values()}


def decode(data: bytes) -> Program:
    """The program that ``data`` stands for; never raises for bytes."""
    padded = bytes(data[:SLOT_COUNT]).ljust(SLOT_COUNT, b"\0")
    tables = _TABLES

    def draw(decision: Decision, slot: int) -> int:
        return tables[id(decision)][padded[slot]]

    return build(draw)


def encode(program: Program) -> bytes:
    """The shortest bytes that decode to ``program``."""
    slots = bytearray(SLOT_COUNT)
    for decision, slot, choice in choices_of(program):
        slots[slot] = _CANONICAL[id(decision)][choice]
    return bytes(slots).rstrip(b"\0")


def program_text(data: bytes, render: str = "canonical") -> str:
    """The program text a fuzz input stands for."""
    return render_program(decode(data), render)
