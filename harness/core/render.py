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
from harness.core.scope import NameRef, Scope, UseRef

#: Separates programs in one stream, as ``mlir-opt --split-input-file`` expects.
SPLIT_MARKER = "// -----\n"
_CACHE_LIMIT = 200_000


class Renderer:
    """Renders trees of one grammar in one style."""

    def __init__(self, grammar: CompiledGrammar, style: str = "canonical") -> None:
        if style not in grammar.renderings:
            raise ValueError(f"unknown rendering {style!r}: choose one of {', '.join(grammar.renderings)}")
        self.grammar = grammar
        self.style = style
        self.parts = grammar.renderings[style]
        self.cache: dict[tuple, tuple[str, tuple[int, ...], bool]] = {}
        self.counter_index = {name: i for i, name in enumerate(grammar.counters)}
        self.tables = grammar.tables
        # per (nonterminal, alternative): (parts, counter index or -1, indent, binding,
        # the kid before which bound values appear or -1, whether it opens a scope entry:
        # a use only reads)
        self.steps = [
            [(self.parts[n][a], self.counter_index[alt.counter] if alt.counter else -1, alt.indent,
              alt.binding, len(alt.kids) - 1 if alt.binding and alt.binding.binds else -1,
              bool(alt.binding and (alt.binding.defines or alt.binding.binds or alt.binding.scope)))
             for a, alt in enumerate(alt_list)]
            for n, alt_list in enumerate(grammar.alts)
        ]
        # a nonterminal that only passes its one child through renders as that child
        self.forward = [len(alt_list) == 1 and self.parts[n][0] == (0,) and not alt_list[0].counter
                        and not alt_list[0].indent and not alt_list[0].binding
                        for n, alt_list in enumerate(grammar.alts)]
        # a subtree that reads or changes the values in scope is not a cacheable text
        self.cacheable = [table is not None and not scoped for table, scoped
                          in zip(grammar.tables, _touches_scope(grammar))]
        # the type sets uses ask for (each gets its own list in the Scope)
        self.use_groups = sorted({alt.binding.uses for alt_list in grammar.alts for alt in alt_list
                                  if alt.binding and alt.binding.uses})
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
        from harness.core.render_code import compile_pass
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
                        padded = self.padded[(part, indent)] = _pad(part, indent)
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


def _touches_scope(grammar: CompiledGrammar) -> list[bool]:
    """Per nonterminal: can its subtree define, bind or use a value in scope?"""
    touches = [any(alt.binding for alt in alt_list) for alt_list in grammar.alts]
    changed = any(touches)
    while changed:
        changed = False
        for n, alt_list in enumerate(grammar.alts):
            if not touches[n] and any(touches[k] for alt in alt_list for k in alt.kids):
                touches[n] = changed = True
    return touches


def _pad(text: str, indent: int) -> tuple[str, str, bool]:
    """``text`` indented by ``indent`` columns: (mid-line, at a line start, ends a line)."""
    pad = " " * indent
    lines = text.split("\n")
    middle = "\n".join([lines[0], *(pad + line if line else "" for line in lines[1:])])
    start = pad + middle if lines[0] else middle
    return middle, start, text[-1] == "\n"


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

