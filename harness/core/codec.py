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
from bisect import bisect_right

from harness.core.codegen import Module
from harness.core.compiled import CompiledGrammar, Node
from harness.core.tree import decisions, kid_calls
from harness.core.walk import walker


class BytesModel:
    """Choices read from ``data`` following the fixed-width layout.

    A tabulated nonterminal's subtree depends only on its own bytes (its
    width, fewer where the input ends), so it is remembered by them
    (``memo``, shared between inputs of one grammar)."""

    tables = False
    #: The walk may run its compiled bytes walk reading ``data`` from ``position``
    #: for this class's draws (:func:`harness.core.walk.compiled_walk`).
    compiled_walk: str | None = "bytes"

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


class _Decoders(threading.local):
    """A grammar's decoder for each thread that decodes: a model and the walk bound to
    it (the model holds the input being read, so a thread cannot share it; it goes
    with its thread)."""

    def __init__(self, grammar: CompiledGrammar) -> None:
        self.model = BytesModel(grammar, b"", {})
        self.expand = walker(grammar, self.model)


def decode(data: bytes, grammar: CompiledGrammar) -> Node:
    """The tree ``data`` stands for; never raises for bytes."""
    decoder = grammar.derived(_Decoders)
    model, expand = decoder.model, decoder.expand
    if len(model.memo) > _MEMO_LIMIT:
        model.memo.clear()
    model.reset(data)
    return expand(grammar.start, 0)


def encode(tree: Node, grammar: CompiledGrammar) -> bytes:
    """The shortest bytes that decode to ``tree``."""
    return grammar.derived(_encoder)[0](tree)


def encode_full(node: Node, grammar: CompiledGrammar) -> tuple[bytes, int]:
    """A subtree's encoding before trailing bytes are dropped, and where its meaningful
    bytes end (0: none).  It does not depend on where the subtree sits, so an edited
    tree's encoding is its original's with one span replaced (:class:`Layout`)."""
    return grammar.derived(_encoder)[1](node)


class Layout:
    """Where each node of a tree sits in its encoding, to encode edits of it cheaply.

    ``full`` is the encoding before trailing bytes are dropped; ``spans[path]`` the
    ``(start, end)`` in ``full`` of every node that has a choice below it,
    ``placed[id(node)]`` too (the layout keeps the tree alive, so the ids stay its
    nodes'; a subtree that occurs twice encodes the same both times, so either span
    serves to copy it); ``marks`` the ascending ends of the bytes that differ from what
    a missing byte means (the last one is where :func:`encode` cuts)."""

    __slots__ = ("full", "spans", "placed", "marks", "grammar")

    def __init__(self, tree: Node, grammar: CompiledGrammar) -> None:
        build = grammar.derived(_layout_builder)
        self.full, self.spans, self.placed, self.marks = build(tree)
        self.grammar = grammar

    @property
    def encoding(self) -> bytes:
        """The tree's :func:`encode`."""
        return self.full[:self.marks[-1]] if self.marks else b""

    def replaced(self, path: tuple, new: Node, grammar: CompiledGrammar) -> bytes | None:
        """:func:`encode` of the tree with the node at ``path`` replaced by ``new``
        (``None``: no node there has a span), without encoding the rest again."""
        span = self.spans.get(path)
        if span is None:
            return None
        start, end = span
        data, last = self._piece(new)
        marks = self.marks
        cut = bisect_right(marks, start)
        cut = marks[cut - 1] if cut else 0  # the last meaningful byte before the span
        if last:
            cut = start + last
        if marks and marks[-1] > end:  # one after it: it moves with the span's new length
            cut = marks[-1] + len(data) - (end - start)
        full = self.full
        return (full[:start] + data + full[end:])[:cut]

    def _piece(self, node: Node) -> tuple[bytes, int]:
        """:func:`encode_full` of ``node``, copying what this tree already holds: the node
        itself, or its children (an edit that keeps them: switching an alternative,
        changing a repetition)."""
        span = self.placed.get(id(node))
        if span is not None:
            return self._span(*span)
        g = self.grammar
        n, a, kids = node
        if not any(id(kid) in self.placed for kid in kids):
            return encode_full(node, g)
        parts: list[bytes] = []
        last = 0
        if len(g.alts[n]) > 1:
            parts.append(bytes((g.smallest_byte[n][a],)))
            last = 1 if a != g.cheapest[n] else 0
        position = len(parts)
        for kid in kids:
            if g.unique[kid[0]] is not None:
                continue
            span = self.placed.get(id(kid))
            data, end = self._span(*span) if span is not None else encode_full(kid, g)
            if end:
                last = position + end
            parts.append(data)
            position += len(data)
        w = g.width[n]
        if w is not None and position < w:
            parts.append(bytes(w - position))
        return b"".join(parts), last

    def _span(self, start: int, end: int) -> tuple[bytes, int]:
        """The bytes of ``full[start:end]`` and where their meaningful bytes end."""
        marks = self.marks
        i = bisect_right(marks, end)
        last = marks[i - 1] - start if i and marks[i - 1] > start else 0
        return self.full[start:end], last


def _encoder(grammar: CompiledGrammar):
    """``(encode_tree, encode_node)``: :func:`encoder_module`, run."""
    ns = encoder_module(grammar).load()
    lock = threading.Lock()  # the module's buffers are one per grammar

    def encode_tree(tree: Node) -> bytes:
        with lock:
            return ns["encode_tree"](tree)

    def encode_node(node: Node) -> tuple[bytes, int]:
        with lock:
            return ns["encode_node"](node)

    return encode_tree, encode_node


def encoder_module(grammar: CompiledGrammar) -> Module:
    """``encode_tree(tree)`` and ``encode_node(node)`` as Python source for the grammar (as the
    random walk is, :mod:`harness.core.walk`): one function per nonterminal appending
    its choice byte, its children (unique ones are nothing: skipped at compile time)
    and its padding to ``out``, and the end of every meaningful byte (a choice other
    than what a missing byte means) to ``marks``.  A tabulated subtree always encodes
    the same: it is encoded once per table entry and copied."""
    g = grammar
    alts, width, smallest, cheapest, unique, tables = (
        g.alts, g.width, g.smallest_byte, g.cheapest, g.unique, g.tables)
    module = Module(f"<encoder of {g.source}>",
                    constants={"out": bytearray(), "marks": [], "entries": {}, "TABLES": tables})
    ns, lines = module.constants, module.lines
    # A choice with nothing encoded below it is one byte, written in its parent's code.
    one_byte = [len(alts[n]) > 1 and width[n] == 1 and unique[n] is None
                and all(unique[k] is not None for alt in alts[n] for k in alt.kids)
                for n in range(len(g.names))]

    def leaf(k: int, i: int) -> str:
        ns[f"B{k}"] = smallest[k]
        return f"out.append(B{k}[kids[{i}][1]]); kids[{i}][1] != {cheapest[k]} and marks.append(len(out))"

    for n in range(len(g.names)):
        if unique[n] is not None:
            continue
        lines.append(f"def e{n}(node):")
        if tables[n] is not None:
            lines += [
                f"    table = TABLES[{n}]",
                "    entry = table.by_id.get(id(node))",
                "    if entry is None: entry = table.index[node]",
                f"    hit = entries.get(({n}, entry))",
                "    if hit is None:",  # encode it alone, then keep it
                "        start, mark = len(out), len(marks)",
                f"        x{n}(node)",
                "        hit = entries[(" + str(n) + ", entry)] = (bytes(out[start:]), "
                "marks[-1] - start if len(marks) > mark else 0)",
                "        del out[start:]",
                "        del marks[mark:]",
                "    if hit[1]: marks.append(len(out) + hit[1])",
                "    out.extend(hit[0])",
                f"def x{n}(node):",
            ]
        body = []
        if len(alts[n]) > 1:
            ns[f"B{n}"] = smallest[n]
            body.append(f"    a = node[1]")
            body.append(f"    out.append(B{n}[a])")
            body.append(f"    if a != {cheapest[n]}: marks.append(len(out))")
        if width[n] is not None:
            body.insert(0, "    start = len(out)")
        calls = []
        for a, alt in enumerate(alts[n]):
            calls.append([leaf(k, i) if one_byte[k] else f"e{k}(kids[{i}])"
                          for i, k in enumerate(alt.kids) if unique[k] is None])
        if any(calls):  # a is bound above whenever the alternatives' calls differ
            body += ["    kids = node[2]", *kid_calls(calls)]
        if width[n] is not None:  # padding: any value decodes the same
            body.append(f"    if len(out) < start + {width[n]}: out.extend(bytes(start + {width[n]} - len(out)))")
        lines += body or ["    pass"]
    lines += [
        "def encode_tree(tree):",
        "    out.clear(); marks.clear()",
        "    if U[tree[0]] is None: E[tree[0]](tree)",
        "    data = bytes(out[:marks[-1]]) if marks else b''",
        "    out.clear(); marks.clear()",
        "    return data",
        "def encode_node(node):",
        "    out.clear(); marks.clear()",
        "    if U[node[0]] is None: E[node[0]](node)",
        "    data, last = bytes(out), marks[-1] if marks else 0",
        "    out.clear(); marks.clear()",
        "    return data, last",
        "E = [" + ", ".join("None" if unique[n] is not None else f"e{n}" for n in range(len(g.names))) + "]",
    ]
    ns["U"] = unique
    return module


def _layout_builder(grammar: CompiledGrammar):
    """``build(tree) -> (full, spans, placed, marks)`` for :class:`Layout`:
    :func:`layout_module`, run."""
    ns = layout_module(grammar).load()
    lock = threading.Lock()  # the module globals hold the layout being built

    def build(tree: Node) -> tuple[bytes, dict, dict, list[int]]:
        with lock:
            return ns["build"](tree)

    return build


def layout_module(grammar: CompiledGrammar) -> Module:
    """``build(tree)`` for :class:`Layout` as Python source for the grammar, compiled as the
    encoder is: the encoder's functions, each also taking the node's path and recording
    its span (no table shortcut: edits reach inside tabulated subtrees too)."""
    g = grammar
    alts, width, smallest, cheapest, unique = g.alts, g.width, g.smallest_byte, g.cheapest, g.unique
    module = Module(f"<layout builder of {g.source}>", constants={"U": unique})
    ns, lines = module.constants, module.lines
    for n in range(len(g.names)):
        if unique[n] is not None:
            continue
        lines += [f"def l{n}(node, path):", "    start = len(out)"]
        if len(alts[n]) > 1:
            ns[f"B{n}"] = smallest[n]
            lines += ["    a = node[1]", f"    out.append(B{n}[a])",
                      f"    if a != {cheapest[n]}: marks.append(len(out))"]
        calls = [[f"l{k}(kids[{i}], path + ({i},))" for i, k in enumerate(alt.kids) if unique[k] is None]
                 for alt in alts[n]]
        if any(calls):
            lines += ["    kids = node[2]", *kid_calls(calls)]
        if width[n] is not None:
            lines.append(f"    if len(out) < start + {width[n]}: out.extend(bytes(start + {width[n]} - len(out)))")
        lines.append("    spans[path] = placed[id(node)] = (start, len(out))")
    lines += [
        "L = [" + ", ".join("None" if unique[n] is not None else f"l{n}" for n in range(len(g.names))) + "]",
        "def build(tree):",
        "    global out, marks, spans, placed",
        "    out, marks, spans, placed = bytearray(), [], {}, {}",
        "    if U[tree[0]] is None: L[tree[0]](tree, ())",
        "    return bytes(out), spans, placed, marks",
    ]
    return module


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
