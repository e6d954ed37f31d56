"""Program text -> derivation tree, for programs that come back as text.

Triage inputs, seeds and hand-edited reproducers arrive as text.
:func:`parse` finds the tree whose rendering *is* the text, in one of the
grammar's styles: a backtracking recursive descent over the grammar that
renders as it goes (:class:`harness.core.render.Renderer`, so counters and
indentation are matched exactly as they are printed) and prunes at the first
character that differs.  The answer is exact: the result is
rendered again and compared, so there is no lenient parse the renderer would
not give back.

Comparison is modulo this normalisation, applied to both sides:

* ``\\r\\n`` and ``\\r`` line ends read as ``\\n``;
* trailing whitespace on each line is ignored;
* whole-line ``//`` comments are ignored (headers such as the ``// NAME:``
  line ``loomfuzz decode`` prints, or a lit test's ``// RUN:`` and
  ``// CHECK:`` lines);
* blank lines at the start and at the end are ignored.

A text holding several programs separated by ``// -----`` lines is not one
program: split it first with :func:`split_programs`.
"""

from __future__ import annotations

import re
from typing import Iterator, NamedTuple

from harness.core.compiled import CompiledGrammar, CounterRef, Node
from harness.core.render import SPLIT_MARKER, Renderer, _State, renderer
from harness.core.scope import NameRef, UseRef
from harness.core.tree import intern

__all__ = ["Parsed", "normalise", "parse", "split_programs"]

_SPLIT_LINE = SPLIT_MARKER.rstrip("\n")
_NEWLINES = re.compile(r"\r\n?")


class Parsed(NamedTuple):
    """What :func:`parse` found: the tree and the rendering it matched, or
    ``tree=None`` and why."""

    tree: Node | None
    style: str | None
    reason: str

    @property
    def ok(self) -> bool:
        return self.tree is not None


def _lines_with_numbers(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line) after the normalisation of the module docstring."""
    out = []
    for number, line in enumerate(_NEWLINES.sub("\n", text).split("\n"), 1):
        line = line.rstrip()
        if line.lstrip().startswith("//"):
            continue
        out.append((number, line))
    while out and not out[0][1]:
        out.pop(0)
    while out and not out[-1][1]:
        out.pop()
    return out


def normalise(text: str) -> str:
    """The text as :func:`parse` compares it (see the module docstring)."""
    return "\n".join(line for _, line in _lines_with_numbers(text)) + "\n"


def split_programs(text: str) -> list[str]:
    """The programs of a ``// -----``-separated stream (one element when there is no marker)."""
    chunks: list[list[str]] = [[]]
    for line in _NEWLINES.sub("\n", text).split("\n"):
        if line.rstrip() == _SPLIT_LINE:
            chunks.append([])
        else:
            chunks[-1].append(line)
    return ["\n".join(chunk) for chunk in chunks]


def _copy(state: _State) -> _State:
    new = _State.__new__(_State)
    new.next = list(state.next)
    new.tops = list(state.tops)
    new.scopes = [list(s) for s in state.scopes]
    new.line_start = state.line_start
    new.values = state.values.copy()
    return new


def _fingerprint(state: _State) -> tuple:
    """Everything of a render state the rest of a parse depends on."""
    values = state.values
    return (state.line_start, tuple(state.next), tuple(state.tops), tuple(map(tuple, state.scopes)),
            tuple(values.visible), tuple(values.numbers.items()))


class _Matcher:
    def __init__(self, grammar: CompiledGrammar, r: Renderer, text: str) -> None:
        self.g = grammar
        self.r = r
        self.text = text
        self.furthest = 0
        self.active: set[tuple[int, int]] = set()
        self.cuts = 0  # how often the left-recursion guard cut a search short
        self.memo: dict[tuple, list[tuple[Node, int, _State]]] = {}
        self.heads = grammar.derived(_heads, r.style)

    def _advance(self, piece: str, pos: int) -> int | None:
        if self.text.startswith(piece, pos):
            end = pos + len(piece)
            if end > self.furthest:
                self.furthest = end
            return end
        if pos + len(piece) <= self.furthest:
            return None
        # how far did it agree? (for the error message)
        k = 0
        while k < len(piece) and pos + k < len(self.text) and self.text[pos + k] == piece[k]:
            k += 1
        self.furthest = max(self.furthest, pos + k)
        return None

    def match(self, n: int, pos: int, indent: int, state: _State) -> Iterator[tuple[Node, int, _State]]:
        """Every (tree, end, state after) of ``n`` matching the text at ``pos``.

        Packrat memo: once the parses of ``n`` at one place and state are all known they
        are replayed, so a repetition alternative (``<site><site><site>``) does not parse
        its first items again after a shorter alternative fell short."""
        key = (n, pos)
        if key in self.active:  # left recursion at the same place: no progress possible
            self.cuts += 1
            return
        memo_key = (n, pos, indent, _fingerprint(state))
        known = self.memo.get(memo_key)
        if known is not None:
            for tree, end, st in known:
                yield tree, end, _copy(st)
            return
        self.active.add(key)
        cuts, found = self.cuts, []
        try:
            for tree, end, st in self._alternatives(n, pos, indent, state):
                found.append((tree, end, _copy(st)))
                yield tree, end, st
        finally:
            self.active.discard(key)
        if cuts == self.cuts:  # complete (no left-recursion cut inside): worth keeping
            self.memo[memo_key] = found

    def _alternatives(self, n: int, pos: int, indent: int,
                      state: _State) -> Iterator[tuple[Node, int, _State]]:
        unique = self.g.unique[n]
        if unique is not None:  # one possible text: compare it whole
            st = _copy(state)
            out: list[str] = []
            self.r._node(unique, indent, out, st)
            end = self._advance("".join(out), pos)
            if end is not None:
                yield unique, end, st
            return
        printed: set[str] = set()
        heads = self.heads[n]
        text = self.text
        for a, alt in enumerate(self.g.alts[n]):
            head = heads[a]
            if head is not None and head.match(text, pos) is None:
                continue  # its first terminals cannot be here (an exact check follows)
            parts, i, shift, binding, bind_at, _ = self.r.steps[n][a]
            if binding is not None and binding.uses:
                # ranks count modulo the values in scope, so several print the same name
                # and leave the same state: only the smallest is a parse (else every use
                # would multiply the ways to backtrack)
                name = state.values.pick(binding.uses, _rank(parts))
                if name in printed:
                    continue
                printed.add(name)
            st = _copy(state)
            if i >= 0:
                st.scopes[i].append(st.tops[i])
                st.tops[i] = st.next[i]
                st.next[i] += 1
            bound = None
            if binding is not None:
                names, mark = st.values.open(binding)
                bound = (binding, names, bind_at)
            for kids, end, st2 in self._parts(parts, alt.kids, 0, (), pos, indent, indent + shift,
                                              st, bound):
                if bound is not None:
                    st2.values.close(binding, names, mark)
                if i >= 0:
                    st2.tops[i] = st2.scopes[i].pop()
                yield intern(self.g, (n, a, kids)), end, st2

    def _parts(self, parts: tuple, symbols: tuple[int, ...], k: int, kids: tuple, pos: int,
               indent: int, inner: int, state: _State,
               bound: tuple | None) -> Iterator[tuple[tuple, int, _State]]:
        while k < len(parts):
            part = parts[k]
            if type(part) is int:
                break
            out: list[str] = []
            if type(part) is CounterRef:
                value = state.tops[self.r.counter_index[part]]
                state.emit(str(value) if value >= 0 else "", indent, out)
            elif type(part) is NameRef:
                state.emit(bound[1][int(part)], indent, out)
            elif type(part) is UseRef:
                # the smallest rank that prints this name is found first (ranks are tried in order)
                state.emit(state.values.pick(bound[0].uses, int(part)), indent, out)
            else:
                state.emit(part, indent, out)
            end = self._advance("".join(out), pos)
            if end is None:
                return
            pos = end
            k += 1
        if k == len(parts):
            yield kids, pos, state
            return
        if bound is not None and parts[k] == bound[2]:
            state = _copy(state)
            state.values.bind(bound[0], bound[1])
        for kid, end, st in self.match(symbols[parts[k]], pos, inner, state):
            yield from self._parts(parts, symbols, k + 1, kids + (kid,), end, indent, inner, _copy(st),
                                   bound)


_REF = r"\S*?"  # a counter value or a value's name: some non-blank text (maybe none)


def _heads(grammar: CompiledGrammar, style: str) -> list[list[re.Pattern[str] | None]]:
    """Per (nonterminal, alternative): a regex the text must match where the alternative
    starts, built from its terminals before the first nonterminal (references and
    indentation as wildcards), or None.  A cheap necessary condition: it spares the
    exact match its state copies on alternatives that plainly do not fit."""
    out = []
    for per_alt in renderer(grammar, style).steps:
        row = []
        for parts, *_ in per_alt:
            pattern = ""
            for part in parts:
                if type(part) is int:
                    break
                if type(part) is str:
                    # a line may start with any indentation; blank lines stay empty
                    pattern += "\n *".join(re.escape(line) for line in part.split("\n"))
                else:
                    pattern += _REF
            row.append(re.compile(" *" + pattern) if pattern.strip(" *") else None)
        out.append(row)
    return out


def _rank(parts: tuple) -> int:
    """The rank ``K`` of a use alternative's ``$^K``."""
    return next(int(part) for part in parts if type(part) is UseRef)


def parse(text: str, grammar: CompiledGrammar) -> Parsed:
    """The tree ``text`` is the exact rendering of (in any of the grammar's styles),
    or None and the reason."""
    if len(split_programs(text)) > 1:
        return Parsed(None, None, "several programs separated by '// -----': split them first")
    lines = _lines_with_numbers(text)
    if not lines:
        return Parsed(None, None, "empty text")
    wanted = "\n".join(line for _, line in lines) + "\n"
    best: tuple[int, str] = (-1, "")
    for style in grammar.renderings:
        r = renderer(grammar, style)
        matcher = _Matcher(grammar, r, wanted)
        for tree, end, _ in matcher.match(grammar.start, 0, 0, r.new_state()):
            if end == len(wanted) and normalise(r.render(tree)) == wanted:
                return Parsed(tree, style, "")
        if matcher.furthest > best[0]:
            best = (matcher.furthest, style)
    where, style = best
    line_index = wanted.count("\n", 0, max(where, 0))
    number, line = lines[min(line_index, len(lines) - 1)]
    return Parsed(None, None, f"line {number}: not a program of {grammar_name(grammar)} "
                              f"(closest: the {style} rendering, which differs here: {line.strip()!r})")


def grammar_name(grammar: CompiledGrammar) -> str:
    return grammar.source.rsplit("/", 1)[-1]
