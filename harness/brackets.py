"""Comma-separated items at bracket depth 0, shared by every reader of MLIR-like text.

``a, b(c, d){x = [1, 2]}, memref<4xi32>`` -> ``["a", "b(c, d){x = [1, 2]}", "memref<4xi32>"]``:
a comma inside ``()``, ``[]``, ``{}`` or ``<>`` does not split.  Pass pipelines
(:mod:`harness.run.pass_effect`) and the canonical program's argument lists
(:mod:`harness.execute.canonical_program`) are read with it.
"""

from __future__ import annotations

__all__ = ["split_top_level"]

_OPEN, _CLOSE = "([{<", ")]}>"


def split_top_level(text: str) -> list[str]:
    """The items of ``text`` split at commas outside brackets, each stripped; empty
    items (``a,,b``, a trailing comma, blank text) are dropped."""
    items, depth, start = [], 0, 0
    for k, char in enumerate(text):
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:k].strip())
            start = k + 1
    items.append(text[start:].strip())
    return [item for item in items if item]
