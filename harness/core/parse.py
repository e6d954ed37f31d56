"""Program text -> shape tree, for programs that come back as text.

Triage inputs, seeds and hand-edited reproducers arrive as ``.mlir`` text.
:func:`parse` recognises the shape line by line (threads, the optional
top-level ``%icall``, ``scf.if``/``scf.for`` wrappers, the region body
forms), builds the :class:`~harness.core.tree.Program`, and then renders it again
with :func:`harness.core.render.render`: the text is *in the shape* only when the
rendering equals it, in the ``canonical`` or the ``oracle`` style.  So the
answer is exact (no lenient parse that the renderer would not give back), and
the parser needs no grammar of its own beyond the markers that tell the
forms apart.

Comparison is modulo this normalisation, applied to both sides:

* ``\\r\\n`` and ``\\r`` line ends read as ``\\n``;
* trailing whitespace on each line is ignored;
* whole-line ``//`` comments are ignored (headers such as the ``// NAME:
  t0[...]`` line ``loomfuzz decode`` prints, or a lit test's ``// RUN:`` and
  ``// CHECK:`` lines);
* blank lines at the start and at the end are ignored.

Everything else (indentation, blank lines between threads, names and
counters) must match.  A text holding several programs separated by
``// -----`` lines is not one program: split it first with
:func:`split_programs`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from harness.core.render import SPLIT_MARKER, STYLES, render
from harness.core.tree import (
    MAX_SITES,
    MAX_THREADS,
    Body,
    Callee,
    Nesting,
    Program,
    Thread,
    make_site,
)

__all__ = ["Parsed", "normalise", "parse", "split_programs"]


class Parsed(NamedTuple):
    """What :func:`parse` found: the program and the rendering it matched
    (``canonical`` or ``oracle``), or ``program=None`` and why."""

    program: Program | None
    style: str | None
    reason: str

    @property
    def ok(self) -> bool:
        return self.program is not None


# Body markers, checked in this order on every line of a region body; the
# first form found wins (the call markers first: a call line is unambiguous).
_FORM_MARKERS: tuple[tuple[str, Body, Callee], ...] = (
    ("%called = func.call @helper_double", Body.CALL, Callee.FUNC),
    ("%called = llvm.call @extern_scale", Body.CALL, Callee.LLVM),
    ("memref.store %payload", Body.MEMORY, Callee.FUNC),
    ("%sel = scf.if", Body.BRANCH, Callee.FUNC),
    ("llvm.freeze", Body.FREEZE, Callee.FUNC),
    ("iter_args", Body.LOOP, Callee.FUNC),
    ("arith.muli %s", Body.ARITH, Callee.FUNC),
)

_THREAD_CANONICAL = "dataflow.thread "
_THREAD_ORACLE = '"dataflow.thread"('
_REGION = '"loom.spatial_region"'
_SPLIT_LINE = SPLIT_MARKER.rstrip("\n")
_NEWLINES = re.compile(r"\r\n?")


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


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _recognise(lines: list[tuple[int, str]]) -> tuple[Program | None, str]:
    """The tree the lines describe, before any comparison; or None and why."""
    threads: list[Thread] = []
    icall = False
    sites: list = []
    in_thread = False
    wrapper = Nesting.NONE
    i = 0

    def close_thread() -> None:
        threads.append(Thread(icall, tuple(sites)))

    while i < len(lines):
        number, line = lines[i]
        ind = _indent(line)
        body = line[ind:]
        if ind == 0 and (body.startswith(_THREAD_CANONICAL) or body.startswith(_THREAD_ORACLE)):
            if in_thread:
                close_thread()
            in_thread, icall, sites, wrapper = True, False, [], Nesting.NONE
            i += 1
            continue
        if not in_thread:
            if _REGION in body:
                return None, f"line {number}: a loom.spatial_region outside any dataflow.thread"
            i += 1
            continue
        if ind == 2:
            if body.startswith("%icall = func.call"):
                if icall or sites:
                    return None, f"line {number}: %icall must come once, before the first region"
                icall = True
            elif body.startswith("scf.if "):
                wrapper = Nesting.IF
            elif body.startswith("scf.for "):
                wrapper = Nesting.FOR
            elif body.startswith("}"):
                wrapper = Nesting.NONE
        if _REGION not in body:
            i += 1
            continue
        nesting = Nesting.NONE if ind <= 2 else wrapper
        if ind > 4:
            return None, f"line {number}: region nested deeper than one wrapper"
        form: tuple[Body, Callee] | None = None
        j = i + 1
        while j < len(lines):
            inner_number, inner = lines[j]
            inner_ind = _indent(inner)
            if inner_ind <= ind and inner[inner_ind:].startswith("}"):
                break
            if _REGION in inner:
                return None, f"line {inner_number}: region nested in the region of line {number}"
            if form is None:
                for marker, b, c in _FORM_MARKERS:
                    if marker in inner:
                        form = (b, c)
                        break
            j += 1
        else:
            return None, f"line {number}: region is never closed"
        if form is None:
            return None, f"line {number}: region body is none of the six forms"
        sites.append(make_site(nesting, form[0], form[1]))
        # an oracle region closes with `}, {` then `})`: skip both
        i = j + 1
        if i < len(lines) and lines[j][1].rstrip().endswith("}, {"):
            i += 1
    if in_thread:
        close_thread()
    if not threads:
        return None, "no dataflow.thread"
    if len(threads) > MAX_THREADS:
        return None, f"{len(threads)} threads: the shape has at most {MAX_THREADS}"
    for t, thread in enumerate(threads):
        if not thread.sites:
            return None, f"thread {t} holds no loom.spatial_region"
        if len(thread.sites) > MAX_SITES:
            return None, f"thread {t} holds {len(thread.sites)} regions: the shape has at most {MAX_SITES}"
    return Program(tuple(threads)), ""


def _first_difference(got: list[tuple[int, str]], want: list[str], style: str) -> str:
    for k, want_line in enumerate(want):
        if k >= len(got):
            return f"ends early: the {style} rendering goes on with {want_line.strip()!r}"
        number, line = got[k]
        if line != want_line:
            return (
                f"line {number} differs from the {style} rendering: "
                f"expected {want_line.strip()!r}, got {line.strip()!r}"
            )
    if len(got) > len(want):
        number, line = got[len(want)]
        return f"line {number}: unexpected text after the program: {line.strip()!r}"
    return f"differs from the {style} rendering"


def parse(text: str) -> Parsed:
    """The shape tree ``text`` is the exact rendering of, or None and the reason."""
    if len(split_programs(text)) > 1:
        return Parsed(None, None, "several programs separated by '// -----': split them first")
    lines = _lines_with_numbers(text)
    if not lines:
        return Parsed(None, None, "empty text")
    program, reason = _recognise(lines)
    if program is None:
        return Parsed(None, None, reason)
    got = [line for _, line in lines]
    renderings = {
        style: [line for _, line in _lines_with_numbers(render(program, style))]
        for style in STYLES
    }
    for style in STYLES:
        if got == renderings[style]:
            return Parsed(program, style, "")
    looks_oracle = any(line.startswith(_THREAD_ORACLE) for line in got)
    style = "oracle" if looks_oracle else "canonical"
    return Parsed(None, None, _first_difference(lines, renderings[style], style))
