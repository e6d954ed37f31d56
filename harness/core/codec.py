"""Fuzz input bytes <-> derivation tree, for any grammar (as in Hypothesis and Zest).

Decoding is the walk (:mod:`harness.core.walk`) with a model that reads one
byte per choice, mapped through that nonterminal's byte table (each
alternative owns a run of byte values in proportion to its probability, at
least one).  Random bytes therefore follow the PCFG (up to the 1/256
rounding of the tables).

**Layout and locality.**  A nonterminal whose language is finite has a fixed
*width*: the most bytes any of its derivations reads (its own choice, if it
has one, plus the widest alternative's children).  Its derivation always
occupies exactly that many bytes, whatever was chosen inside, unused bytes
being padding.  So within finite parts of a grammar a changed byte changes
exactly one decision and never the meaning of the bytes after it, and bytes
under an alternative not taken are kept, ready if a later mutation takes it.
For the default grammar this is the whole program: 17 bytes, byte ``k`` one
decision.  A recursive nonterminal has no width: its choices are read in
sequence, so a changed choice inside one may shift the bytes after it (the
finite pieces inside it keep their fixed widths).

**Totality.**  Every byte string decodes: a missing byte (input exhausted)
takes the cheapest alternative, bytes past the end of the walk are ignored,
and the walk's depth budget bounds recursion.  The empty input is the
smallest program.

**Canonical encoding.**  :func:`encode` writes each choice as the smallest
byte that decodes to it, padding as zeros, and drops trailing bytes that mean
the same as a missing byte, so ``encode(decode(b))`` is the shortest input
for that tree and ``decode(encode(t)) == t``.
"""

from __future__ import annotations

import threading

from harness.core.grammar import CompiledGrammar, Node
from harness.core.tree import decisions
from harness.core.walk import walker


class BytesModel:
    """Choices read from ``data`` following the fixed-width layout.

    A tabulated nonterminal's subtree depends only on its own bytes (its
    width, fewer where the input ends), so it is remembered by them
    (``memo``, shared between inputs of one grammar)."""

    tables = False

    def __init__(self, grammar: CompiledGrammar, data: bytes = b"", memo: dict | None = None) -> None:
        self.data = data
        self.position = 0
        self.byte_table = grammar.byte_table
        self.width = grammar.width
        self.memo = memo

    def reset(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def recall(self, n: int) -> Node | None:
        if self.memo is None:
            return None
        width = self.width[n]
        key = (n, self.data[self.position:self.position + width])
        node = self.memo.get(key)
        if node is not None:
            self.position += width
        return node

    def learn(self, n: int, start: int, node: Node) -> None:
        if self.memo is not None:
            self.memo[(n, self.data[start:start + self.width[n]])] = node

    def enter(self, n: int) -> int:
        return self.position

    def choose(self, n: int, depth: int) -> int | None:
        position = self.position
        self.position = position + 1
        if position >= len(self.data):
            return None
        return self.byte_table[n][self.data[position]]

    def leave(self, n: int, start: int) -> None:
        width = self.width[n]
        if width is not None:
            self.position = start + width


_MEMO_LIMIT = 100_000


def _decoder(grammar: CompiledGrammar) -> tuple[BytesModel, object]:
    model = BytesModel(grammar, b"", {})
    return model, walker(grammar, model)


def decode(data: bytes, grammar: CompiledGrammar) -> Node:
    """The tree ``data`` stands for; never raises for bytes."""
    # one bound walk per thread (the model holds the input being read)
    model, expand = grammar.derived(("decoder", threading.get_ident()), lambda: _decoder(grammar))
    if len(model.memo) > _MEMO_LIMIT:
        model.memo.clear()
    model.reset(data)
    return expand(grammar.start, 0)


def encode(tree: Node, grammar: CompiledGrammar) -> bytes:
    """The shortest bytes that decode to ``tree``."""
    return grammar.derived("encoder", lambda: _encoder(grammar))(tree)


def _encoder(grammar: CompiledGrammar):
    alts, width, smallest, cheapest, unique, tables = (
        grammar.alts, grammar.width, grammar.smallest_byte, grammar.cheapest, grammar.unique,
        grammar.tables)
    # A tabulated subtree always encodes the same: (bytes, end of its meaningful bytes).
    entries: dict[tuple[int, int], tuple[bytes, int]] = {}

    def visit(node: Node, out: bytearray, last: list[int]) -> None:
        n = node[0]
        if unique[n] is not None:
            return
        table = tables[n]
        if table is None:
            expand(node, out, last)
            return
        entry = table.by_id.get(id(node))
        if entry is None:
            entry = table.index[node]
        hit = entries.get((n, entry))
        if hit is None:
            sub, sub_last = bytearray(), [0]
            expand(node, sub, sub_last)
            hit = entries[(n, entry)] = (bytes(sub), sub_last[0])
        if hit[1]:
            last[0] = len(out) + hit[1]
        out += hit[0]

    def expand(node: Node, out: bytearray, last: list[int]) -> None:
        n, a, kids = node
        start = len(out)
        if len(alts[n]) > 1:
            out.append(smallest[n][a])
            if a != cheapest[n]:  # differs from what a missing byte means
                last[0] = len(out)
        for kid in kids:
            visit(kid, out, last)
        w = width[n]
        if w is not None and len(out) < start + w:
            out += bytes(start + w - len(out))  # padding: any value decodes the same

    def encode_tree(tree: Node) -> bytes:
        out, last = bytearray(), [0]
        visit(tree, out, last)
        return bytes(out[:last[0]])

    return encode_tree


def nonempty(encoding: bytes, tree: Node, grammar: CompiledGrammar) -> bytes:
    """``encoding`` spelt with at least one byte (libFuzzer skips empty inputs and
    reads an empty mutation as a failure): the empty one becomes the byte that
    means what a missing byte means for the first choice."""
    if encoding:
        return encoding
    for n, _ in decisions(grammar, tree):
        return bytes([grammar.smallest_byte[n][grammar.cheapest[n]]])
    return b"\0"


def max_input_length(grammar: CompiledGrammar, budget: int = 4096) -> int:
    """The longest input worth giving the fuzzer: the whole layout of a finite grammar,
    ``budget`` bytes for a recursive one."""
    return grammar.max_bytes if grammar.max_bytes is not None else budget
