"""Derivation tree -> text: the concatenation of terminals plus one generic post-pass.

The pass walks the tree in emission order and applies the grammar's options
(:mod:`harness.core.grammar`): ``counter`` takes the next value of a
module-wide counter for the subtree, ``$NAME`` in a terminal prints the
innermost value, ``indent`` moves every line the expansion's nonterminals
derive N columns right (blank lines stay empty).  It knows nothing of the
language it renders.

A *style* is one of the grammar's renderings (``canonical`` always; the
default grammar adds ``oracle``): the same tree with other terminal text.

Speed: the text of a tabulated subtree (:class:`harness.core.compiled.Table`)
depends only on the subtree, the counters' state, the indentation and
whether it starts a line, so it is rendered once per such key and then
copied; for the default grammar a program is a few look-ups and one join.
"""

from __future__ import annotations

import threading
from itertools import chain, islice
from typing import Iterable, Iterator

from harness.core.compiled import CompiledGrammar, Node
from harness.core.render_code import compile_pass
from harness.core.render_steps import RenderSteps, pad
from harness.core.scope import NameRef, Scope, UseRef

#: Separates programs in one stream, as ``mlir-opt --split-input-file`` expects.
SPLIT_MARKER = "// -----\n"
_CACHE_LIMIT = 200_000


class Renderer(RenderSteps):
    """Renders trees of one grammar in one style: the interpreted pass (the reference,
    which the parser drives) and, for whole trees, the compiled one."""

    def __init__(self, grammar: CompiledGrammar, style: str = "canonical") -> None:
        super().__init__(grammar, style)
        self.cache: dict[tuple, tuple[str, tuple[int, ...], bool]] = {}
        # (terminal, indent) -> (text mid-line, text at a line start, ends with a newline)
        self.padded: dict[tuple[str, int], tuple[str, str, bool]] = {}
        # (render, render_batch, [the tree render_batch is at]) from harness.core.render_code
        self._compiled = None
        self._lock = threading.Lock()

    def render(self, tree: Node) -> str:
        if self._compiled is None:
            self._compile()
        with self._lock:  # the compiled pass keeps its state in one place
            try:
                return self._compiled[0](tree)
            except (IndexError, ZeroDivisionError):  # a use with nothing in scope
                out: list[str] = []  # the interpreter says which
                self._node(tree, 0, out, self.new_state())
                raise

    def render_batch(self, trees: Iterable[Node], separator: str = SPLIT_MARKER) -> str:
        """The trees' texts joined by ``separator`` (one join for the lot; the trees may
        come from a generator: each is dropped once rendered)."""
        if self._compiled is None:
            self._compile()
        with self._lock:
            try:
                return self._compiled[1](trees, separator)
            except (IndexError, ZeroDivisionError):  # the interpreter says which use failed
                self._node(self._compiled[2][0], 0, [], self.new_state())
                raise

    def _compile(self) -> None:
        self._compiled = compile_pass(self)

    def interpret(self, tree: Node) -> str:
        """The tree's text by the interpreted pass (the reference for the compiled one)."""
        out: list[str] = []
        self._node(tree, 0, out, self.new_state())
        return "".join(out)

    def new_state(self) -> "_State":
        """The state at the start of a program."""
        return _State(len(self.grammar.counters), self.use_groups)

    def _node(self, node: Node, indent: int, out: list[str], state: "_State") -> None:
        n = node[0]
        forward = self.forward
        while forward[n]:
            node = node[2][0]
            n = node[0]
        if self.cacheable[n]:
            table = self.tables[n]
            entry = table.by_id.get(id(node))
            if entry is None:
                entry = table.index.get(node)
            key = (n, entry, indent, state.line_start, *state.next, *state.tops)
            hit = self.cache.get(key)
            if hit is not None:
                text, advance, line_start = hit
                out.append(text)
                if text:
                    state.line_start = line_start
                if advance:
                    nxt = state.next
                    for i, step in advance:
                        nxt[i] += step
                return
            before = list(state.next)
            mark = len(out)
            self._expand(node, indent, out, state)
            text = "".join(out[mark:])
            del out[mark:]
            out.append(text)
            advance = tuple((i, after - b) for i, (after, b) in enumerate(zip(state.next, before))
                            if after != b)
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()
            self.cache[key] = (text, advance, state.line_start)
            return
        self._expand(node, indent, out, state)

    def _expand(self, node: Node, indent: int, out: list[str], state: "_State") -> None:
        n, a, kids = node
        parts, i, shift, binding, bind_at, opens = self.steps[n][a]
        if i >= 0:
            state.scopes[i].append(state.tops[i])
            state.tops[i] = state.next[i]
            state.next[i] += 1
        if opens:
            names, mark = state.values.open(binding)
        inner = indent + shift
        node_of = self._node
        for part in parts:
            kind = type(part)
            if kind is str:  # the common case, inlined
                if not indent:
                    out.append(part)
                    state.line_start = part[-1] == "\n"
                else:
                    padded = self.padded.get((part, indent))
                    if padded is None:
                        padded = self.padded[(part, indent)] = pad(part, indent)
                    out.append(padded[state.line_start])
                    state.line_start = padded[2]
            elif kind is int:
                if part == bind_at:
                    state.values.bind(binding, names)
                node_of(kids[part], inner, out, state)
            else:  # a reference: one word, no newline
                if kind is NameRef:
                    word = names[int(part)]
                elif kind is UseRef:
                    word = state.values.pick(binding.uses, int(part))
                else:
                    value = state.tops[self.counter_index[part]]
                    word = str(value) if value >= 0 else ""
                if word:
                    if indent and state.line_start:
                        out.append(" " * indent)
                    out.append(word)
                    state.line_start = False
        if opens:
            state.values.close(binding, names, mark)
        if i >= 0:
            state.tops[i] = state.scopes[i].pop()


class _State:
    __slots__ = ("next", "tops", "scopes", "line_start", "values")

    def __init__(self, counters: int, use_groups: list[tuple[str, ...]] = ()) -> None:
        self.next = [0] * counters  # each counter's next value
        self.tops = [-1] * counters  # each counter's innermost value (-1: none)
        self.scopes: list[list[int]] = [[] for _ in range(counters)]  # outer values
        self.line_start = True
        self.values = Scope(use_groups)  # the values in scope (harness.core.scope)

    def emit(self, text: str, indent: int, out: list[str]) -> None:
        if not text:
            return
        if indent:
            pad = " " * indent
            lines = text.split("\n")
            for i, line in enumerate(lines):
                if i:
                    out.append("\n")
                if line:
                    if i or self.line_start:
                        out.append(pad)
                    out.append(line)
        else:
            out.append(text)
        self.line_start = text[-1] == "\n"


def renderer(grammar: CompiledGrammar, style: str = "canonical") -> Renderer:
    """The grammar's renderer for ``style`` (one per grammar and style: it keeps the text cache)."""
    return grammar.derived(Renderer, style)


def render(tree: Node, grammar: CompiledGrammar, style: str = "canonical") -> str:
    """The tree's text in the given rendering."""
    return renderer(grammar, style).render(tree)


def render_stream(trees: Iterable[Node], grammar: CompiledGrammar,
                  style: str = "canonical", batch: int = 2000) -> Iterator[str]:
    """Texts separated by ``// -----`` lines, for ``--split-input-file``, ``batch``
    programs to a yielded string."""
    r = renderer(grammar, style)
    trees = iter(trees)
    # a batch is rendered as it is drawn: no tree outlives its text
    yield from separated(r.render_batch(chain((head,), islice(trees, batch - 1))) for head in trees)


def separated(texts: Iterable[str]) -> Iterator[str]:
    """The texts as one ``// -----``-separated stream, piece by piece."""
    previous = None
    for text in texts:
        yield text if previous is None else marker_after(previous) + text
        previous = text


def marker_after(text: str) -> str:
    """The ``// -----`` line to write after ``text``: on a line of its own, even
    when the text does not end in a newline (else it would be glued to its last line)."""
    return SPLIT_MARKER if not text or text.endswith("\n") else "\n" + SPLIT_MARKER

