"""Precondition checker: the independent oracle for loom-fuzz programs.

It reads program *text* in the canonical rendering of
``shared/spec/program-shape.md`` (custom ``dataflow.thread`` syntax, generic
``"loom.spatial_region"`` ops) and reports every violated precondition
P1-P24 with its line and column.  With ``conventions=True`` it also reports
the sampling conventions of the default profile that one program can show
(C1-C8 with C9-C13's fixed bodies, C14, C19, C20, C22; C15-C18, C21 and C23
are implied by preconditions, the rest are about distributions).

Why it is built like this:

* It never imports the renderer, the engines or the grammars.  It is written
  from the spec alone, so a bug in the generator cannot hide itself here.
* It is a small line-oriented structural parser, not a comparison against the
  known texts: lines are grouped into a tree by their braces (one operation
  per line, a trailing ``{`` opens a block, a leading ``}`` closes it) and each
  precondition group is a small function over that tree.  That gives precise
  diagnostics (line, column, precondition) for programs that are almost right.
* It never raises on any text: whatever it cannot parse is reported against
  the most relevant precondition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

__all__ = ["PRECONDITION_COUNT", "Violation", "check_file", "check_text"]

PRECONDITION_COUNT = 24


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    """One broken rule: a precondition ``P1``..``P24`` or a convention ``C1``..``C23``."""

    rule: str  # "P7" or "C20"
    line: int  # 1-based
    column: int  # 1-based
    message: str  # one line

    @property
    def precondition(self) -> int | None:
        """The precondition number, or None for a sampling convention."""
        return int(self.rule[1:]) if self.rule.startswith("P") else None

    @property
    def convention(self) -> str | None:
        """The convention tag (``"C20"``), or None for a precondition."""
        return self.rule if self.rule.startswith("C") else None

    def format(self, path: str) -> str:
        """``PATH:LINE:COL: P<n>: message`` (or ``C<n>``)."""
        return f"{path}:{self.line}:{self.column}: {self.rule}: {self.message}"

    def sort_key(self) -> tuple[int, int, int, int]:
        # Preconditions before conventions at the same place.
        return (self.line, self.column, self.rule[0] != "P", int(self.rule[1:]))


def check_text(text: str, conventions: bool = False) -> list[Violation]:
    """Every violated precondition (and, if asked, convention) of one program.

    Sorted by (line, column, rule); ``[]`` when the program is in the shape.
    Never raises.
    """
    try:
        return _Checker(text, conventions).run()
    except Exception as exc:  # pragma: no cover - a checker bug, never an input's fault
        return [
            Violation("P1", 1, 1, f"internal checker error (please report): {_show(repr(exc))}")
        ]


def check_file(path: str | Path, conventions: bool = False) -> list[Violation]:
    """check_text on a file's contents (undecodable bytes read as U+FFFD)."""
    data = Path(path).read_bytes()
    return check_text(data.decode("utf-8", errors="replace"), conventions=conventions)


# --------------------------------------------------------------------------
# The spec's fixed texts (written out here, from the spec, on purpose)
# --------------------------------------------------------------------------

_HELPER = """\
func.func @helper_double(%a: i32) -> i32 {
  %doubled = arith.addi %a, %a : i32
  return %doubled : i32
}"""

_EXTERN = "llvm.func @extern_scale(i32) -> i32"

_HOST = """\
func.func @host_container(%target: memref<4xi32>, %value: i32) {
  %zero = arith.constant 0 : index
  %four = arith.constant 4 : index
  %one = arith.constant 1 : index
  scf.for %hi = %zero to %four step %one {
    memref.store %value, %target[%hi] : memref<4xi32>
  }
  return
}"""

# P5, as labelled parts so a mismatch can say which part is wrong.
_THREAD_HEADER_PARTS = (
    ("operation", "dataflow.thread"),
    ("visibility", "private"),
    ("symbol", "@SYM"),
    ("domain", "domain(#dataflow.thread_domain<dense>)"),
    ("arguments", "(%mem: memref<4xi32>, %val: i32, %flag: i1)"),
    ("control operand", "ctrl (%start: none)"),
    ("body", "{"),
)

# P5 fixes the thread arguments, so their types are known without trusting the header.
_THREAD_ARGS = {"%mem": "memref<4xi32>", "%val": "i32", "%flag": "i1", "%start": "none"}
_THREAD_CONSTANTS = (("%lo", "0"), ("%hi", "2"), ("%stp", "1"))
_REGION_OPERANDS = ("%val", "%mem", "%flag")  # P15
# P23: the only i1 values are the predicates %flag and %c (numbered %c0, %c1, ... where a
# region takes %flag more than once)
_PREDICATE = re.compile(r"%flag|%c[0-9]*")
_CALLS = {
    "func.call": ("@helper_double", "func", "func.func"),
    "llvm.call": ("@extern_scale", "llvm", "llvm.func"),
}

# The six region forms of C8 (bodies from ^bb0 through the yield) and their
# header/closing lines (C14).  RES and GRAPH are filled with the region's own
# names, so that numbering is judged by C4 alone.
_VALUE_HEADER = (
    'RES = "loom.spatial_region"(%val) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, '
    "resultSegmentSizes = array<i32: 1, 0>}> ({"
)
_VALUE_CLOSE = '}) {graph_name = "GRAPH", source_maps = []} : (i32) -> i32'
_FORMS: dict[str, tuple[str, str, str]] = {
    "arith": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %s = arith.addi %a, %a : i32
  %p = arith.muli %s, %a : i32
  "loom.spatial_yield"(%p) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
    "memory": (
        '"loom.spatial_region"(%val, %mem) <{operandSegmentSizes = array<i32: 1, 0, 1, 0>, '
        "resultSegmentSizes = array<i32: 0, 0>}> ({",
        """\
^bb0(%payload: i32, %memory: memref<4xi32>):
  %z = arith.constant 0 : index
  memref.store %payload, %memory[%z] : memref<4xi32>
  "loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()""",
        '}) {graph_name = "GRAPH", source_maps = []} : (i32, memref<4xi32>) -> ()',
    ),
    "branch": (
        'RES = "loom.spatial_region"(%val, %flag) <{operandSegmentSizes = array<i32: 2, 0, 0, 0>, '
        "resultSegmentSizes = array<i32: 1, 0>}> ({",
        """\
^bb0(%a: i32, %c: i1):
  %sel = scf.if %c -> (i32) {
    %t = arith.addi %a, %a : i32
    scf.yield %t : i32
  } else {
    %m = arith.muli %a, %a : i32
    scf.yield %m : i32
  }
  "loom.spatial_yield"(%sel) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        '}) {graph_name = "GRAPH", source_maps = []} : (i32, i1) -> i32',
    ),
    "freeze": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %stable = llvm.freeze %a : i32
  "loom.spatial_yield"(%stable) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
    "loop": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %acc = scf.for %i = %c0 to %c2 step %c1 iter_args(%carry = %a) -> (i32) {
    %next = arith.addi %carry, %a : i32
    scf.yield %next : i32
  }
  "loom.spatial_yield"(%acc) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
    "call (func.call)": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %called = func.call @helper_double(%a) : (i32) -> i32
  "loom.spatial_yield"(%called) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
    "call (llvm.call)": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %called = llvm.call @extern_scale(%a) : (i32) -> i32
  "loom.spatial_yield"(%called) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
}
_ICALL = "%icall = func.call @helper_double(%val) : (i32) -> i32"

# Region-body operations (P22 lists the control flow, P19 the memory accesses).
_BINARY_ARITH = {
    "addi", "subi", "muli", "divsi", "divui", "remsi", "remui", "andi", "ori", "xori",
    "shli", "shrsi", "shrui", "maxsi", "maxui", "minsi", "minui", "ceildivsi",
    "ceildivui", "floordivsi",
}  # fmt: skip
_CAST_ARITH = {"index_cast", "index_castui", "extsi", "extui", "trunci", "bitcast"}
_ARITH_OPS = _BINARY_ARITH | _CAST_ARITH | {"constant", "cmpi", "select"}
_UNSTRUCTURED = (
    "cf.",
    "llvm.br",
    "llvm.cond_br",
    "llvm.switch",
    "llvm.return",
    "func.return",
    "return",
)

_MAX_DEPTH = 64  # far deeper than any program in the shape; guards against junk

# --------------------------------------------------------------------------
# Lines and tokens
# --------------------------------------------------------------------------

_SSA = r"%[A-Za-z0-9_$.\-]+"
_SSA_RE = re.compile(_SSA)
_SYM_RE = re.compile(r"@[A-Za-z0-9_$.\-]+")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_KEY_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_$.]*|"(?:[^"\\]|\\.)*"')
_LABEL_RE = re.compile(r"\^[A-Za-z0-9_$.\-]+")
_TYPE_RE = re.compile(r"!?[A-Za-z_][A-Za-z0-9_.]*(?:<(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*>)?")
_OPNAME_RE = re.compile(r'"[^"]*"|[A-Za-z_][A-Za-z0-9_$.]*')
_RESULTS_RE = re.compile(rf"\s*({_SSA}(?::\d+)?(?:\s*,\s*{_SSA}(?::\d+)?)*)\s*=(?!=)")
_TOKEN_RE = re.compile(
    r'"(?:[^"\\]|\\.)*"?|->|[%@^#!][A-Za-z0-9_$.\-]*|[A-Za-z_][A-Za-z0-9_$.]*|\d+|\S'
)
_SEGMENTS_RE = re.compile(r"array\s*<\s*i32\s*(?::\s*(-?\d+(?:\s*,\s*-?\d+)*))?\s*>")
_INT_WIDTH_RE = re.compile(r"\b[su]?i(\d+)\b")
_FLOAT_RE = re.compile(r"\b(?:bf16|tf32|f\d+|f8E\w+)\b")


def _show(text: str, limit: int = 60) -> str:
    """User text inside a one-line message: escaped, shortened."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _norm(text: str) -> str:
    return " ".join(text.split())


def _same_type(a: str | None, b: str | None) -> bool:
    return a is None or b is None or re.sub(r"\s+", "", a) == re.sub(r"\s+", "", b)


class _Tok(NamedTuple):
    text: str
    col: int  # 1-based


@dataclass(eq=False)
class _Line:
    no: int  # 1-based
    raw: str
    code: str  # without a trailing // comment and trailing blanks
    bare: str  # code with string contents blanked, for brace counting

    @property
    def col(self) -> int:
        """Column of the first non-blank character."""
        return len(self.code) - len(self.code.lstrip()) + 1

    @property
    def end(self) -> int:
        """Column just past the code."""
        return len(self.code) + 1


def _split_lines(text: str) -> list[_Line]:
    lines = []
    for no, raw in enumerate(text.split("\n"), 1):
        if raw.endswith("\r"):
            raw = raw[:-1]
        code, bare = _strip_comment(raw)
        lines.append(_Line(no, raw, code.rstrip(), bare.rstrip()))
    return lines


def _strip_comment(raw: str) -> tuple[str, str]:
    """Drop a // comment outside strings; also blank the strings' insides."""
    bare: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch == '"':
            j = i + 1
            while j < n and raw[j] != '"':
                j += 2 if raw[j] == "\\" else 1
            if j < n:  # terminated
                bare.append('"' + " " * (j - i - 1) + '"')
                i = j + 1
            else:
                bare.append('"' + " " * (n - i - 1))
                i = n
            continue
        if raw.startswith("//", i):
            break
        bare.append(ch)
        i += 1
    return raw[:i], "".join(bare)


def _tokens(code: str) -> list[_Tok]:
    return [_Tok(m.group(), m.start() + 1) for m in _TOKEN_RE.finditer(code)]


def _token_diff(line: _Line, expected: str) -> tuple[int, str] | None:
    """First token where ``line`` differs from ``expected``: (column, message)."""
    got, want = _tokens(line.code), _tokens(expected)
    shown = _show(_norm(expected), 120)
    for i, w in enumerate(want):
        if i >= len(got):
            return line.end, f"line ends where `{shown}` continues with '{_show(w.text)}'"
        if got[i].text != w.text:
            return got[i].col, f"found '{_show(got[i].text)}' where `{shown}` has '{_show(w.text)}'"
    if len(got) > len(want):
        return got[len(want)].col, f"unexpected '{_show(got[len(want)].text)}' after `{shown}`"
    return None


def _op(line: _Line) -> tuple[list[_Tok], _Tok | None, int]:
    """(result names, operation name, offset after the name) of an op line."""
    code, pos, results = line.code, 0, []
    m = _RESULTS_RE.match(code)
    if m:
        results = [
            _Tok(r.group(), m.start(1) + r.start() + 1) for r in _SSA_RE.finditer(m.group(1))
        ]
        pos = m.end()
    while pos < len(code) and code[pos].isspace():
        pos += 1
    m2 = _OPNAME_RE.match(code, pos)
    if not m2:
        return results, None, pos
    return results, _Tok(m2.group(), m2.start() + 1), m2.end()


def _op_name(line: _Line) -> str:
    _, op, _ = _op(line)
    return op.text.strip('"') if op else ""


def _symbol(node: _Node) -> str | None:
    """The first @symbol of an item's header."""
    m = _SYM_RE.search(node.line.code)
    return m.group() if m else None


def _segments(value: str) -> list[int] | None:
    m = _SEGMENTS_RE.fullmatch(value.strip())
    if not m:
        return None
    return [int(x) for x in m.group(1).split(",")] if m.group(1) else []


class _Fail(Exception):
    """A parse error inside one line: where, and what was expected."""

    def __init__(self, col: int, msg: str) -> None:
        super().__init__(msg)
        self.col, self.msg = col, msg


class _Cursor:
    """A left-to-right reader over one line's code; columns are 1-based."""

    def __init__(self, line: _Line, pos: int = 0) -> None:
        self.s, self.i = line.code, pos

    def _ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def col(self) -> int:
        self._ws()
        return self.i + 1

    def peek(self) -> str:
        self._ws()
        return (
            f"'{_show(self.s[self.i:self.i + 16])}'"
            if self.i < len(self.s)
            else "the end of the line"
        )

    def lit(self, text: str) -> bool:
        self._ws()
        if self.s.startswith(text, self.i):
            self.i += len(text)
            return True
        return False

    def expect(self, text: str, what: str = "") -> None:
        if not self.lit(text):
            raise _Fail(
                self.col(), f"expected '{text}'{' ' + what if what else ''}, found {self.peek()}"
            )

    def match(self, regex: re.Pattern[str]) -> _Tok | None:
        self._ws()
        m = regex.match(self.s, self.i)
        if not m:
            return None
        self.i = m.end()
        return _Tok(m.group(), m.start() + 1)

    def need(self, regex: re.Pattern[str], what: str) -> _Tok:
        tok = self.match(regex)
        if tok is None:
            raise _Fail(self.col(), f"expected {what}, found {self.peek()}")
        return tok

    def end(self) -> None:
        self._ws()
        if self.i < len(self.s):
            raise _Fail(self.col(), f"unexpected {self.peek()}")

    def results(self) -> list[_Tok]:
        """``%a, %b =`` at the cursor (consumed), or [] (nothing consumed)."""
        m = _RESULTS_RE.match(self.s, self.i)
        if not m:
            return []
        self.i = m.end()
        return [_Tok(r.group(), m.start(1) + r.start() + 1) for r in _SSA_RE.finditer(m.group(1))]

    def values(self) -> list[_Tok]:
        """``(%a, %b)``."""
        self.expect("(")
        out: list[_Tok] = []
        if self.lit(")"):
            return out
        while True:
            out.append(self.need(_SSA_RE, "an SSA value"))
            if not self.lit(","):
                self.expect(")")
                return out

    def types(self, close: str = ")") -> list[_Tok]:
        """A type list after its opening parenthesis."""
        out: list[_Tok] = []
        if self.lit(close):
            return out
        while True:
            out.append(self.need(_TYPE_RE, "a type"))
            if not self.lit(","):
                self.expect(close)
                return out

    def fn_type(self) -> tuple[list[_Tok], list[_Tok]]:
        """``(T, ...) -> T`` or ``(T, ...) -> (T, ...)``."""
        self.expect("(", "opening a functional type")
        ins = self.types()
        self.expect("->")
        outs = self.types() if self.lit("(") else [self.need(_TYPE_RE, "a result type")]
        return ins, outs

    def value(self) -> _Tok:
        """An attribute value, up to a ',' or closing bracket at depth 0."""
        self._ws()
        start, depth = self.i, 0
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch == '"':
                j = self.i + 1
                while j < len(self.s) and self.s[j] != '"':
                    j += 2 if self.s[j] == "\\" else 1
                self.i = min(j + 1, len(self.s))
                continue
            if ch in "<[{(":
                depth += 1
            elif ch in ">]})":
                if depth == 0:
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                break
            self.i += 1
        text = self.s[start : self.i].strip()
        if not text:
            raise _Fail(start + 1, f"expected an attribute value, found {self.peek()}")
        return _Tok(text, start + 1)

    def entries(self, close: str) -> list[tuple[_Tok, _Tok | None]]:
        """Dictionary entries after the opening bracket, through ``close``."""
        out: list[tuple[_Tok, _Tok | None]] = []
        if self.lit(close):
            return out
        while True:
            key = self.need(_KEY_RE, "an attribute name")
            out.append((key, self.value() if self.lit("=") else None))
            if not self.lit(","):
                self.expect(close)
                return out


# --------------------------------------------------------------------------
# The brace tree
# --------------------------------------------------------------------------


@dataclass(eq=False)
class _Node:
    """An operation line; with blocks if it opens ``{`` (``mids`` are ``} else {`` lines)."""

    line: _Line
    blocks: list[list[_Node]] = field(default_factory=list)
    mids: list[_Line] = field(default_factory=list)
    close: _Line | None = None

    @property
    def body(self) -> list[_Node]:
        return self.blocks[0] if self.blocks else []

    def last_line(self) -> _Line:
        if self.close:
            return self.close
        for block in reversed(self.blocks):
            if block:
                return block[-1].last_line()
        return self.mids[-1] if self.mids else self.line


_Report = Callable[[int, _Line, int, str], None]


def _build_tree(lines: list[_Line], report: _Report | None = None) -> list[_Node]:
    """Group lines into operations and blocks by their braces.

    Brace structure errors break the module itself, so they are P1.
    """

    def say(line: _Line, col: int, msg: str) -> None:
        if report:
            report(1, line, col, msg)

    root = _Node(_Line(0, "", "", ""), [[]])
    stack = [root]
    for ln in lines:
        s = ln.bare.strip()
        if not s:
            continue
        net = s.count("{") - s.count("}")
        if s.startswith("}"):
            if len(stack) == 1:
                say(ln, ln.col, "unmatched '}'")
                continue
            if net >= 0:  # `} else {` or `}, {`: the next block of the open op
                stack[-1].mids.append(ln)
                stack[-1].blocks.append([])
                if net > 0:
                    say(ln, ln.col, "unbalanced braces on this line")
                continue
            if -net >= len(stack):
                say(ln, ln.col, "unmatched '}'")
            for _ in range(min(-net, len(stack) - 1)):
                stack.pop().close = ln
            continue
        node = _Node(ln)
        stack[-1].blocks[-1].append(node)
        if net > 0:
            node.blocks.append([])
            stack.append(node)
            if net > 1:
                say(ln, ln.col, "more than one '{' left open on one line")
            if len(stack) > _MAX_DEPTH:
                say(
                    ln,
                    ln.col,
                    f"blocks nested more than {_MAX_DEPTH} deep; the rest is not checked",
                )
                return root.blocks[0]
        elif net < 0:  # an operation with closing braces after it
            if -net >= len(stack):
                say(ln, ln.col, "unmatched '}'")
            for _ in range(min(-net, len(stack) - 1)):
                stack.pop().close = ln
    if len(stack) > 1:
        last = next((ln for ln in reversed(lines) if ln.code.strip()), lines[-1] if lines else None)
        if last is not None:
            say(
                last,
                last.end,
                f"unexpected end of input: the block opened at line {stack[-1].line.no} is not "
                "closed",
            )
    return root.blocks[0]


def _template(text: str) -> list[_Node]:
    return _build_tree(_split_lines(text))


def _match_list(got: list[_Node], want: list[_Node], end: _Line) -> tuple[_Line, int, str] | None:
    """First difference between two operation lists (``end``: where missing lines go)."""
    for a, e in zip(got, want):
        diff = _match_node(a, e)
        if diff:
            return diff
    if len(got) > len(want):
        extra = got[len(want)].line
        return extra, extra.col, f"unexpected line `{_show(_norm(extra.code), 120)}`"
    if len(got) < len(want):
        return end, end.col, f"missing line `{_show(_norm(want[len(got)].line.code), 120)}`"
    return None


def _match_node(a: _Node, e: _Node) -> tuple[_Line, int, str] | None:
    """First difference between an operation and a template operation."""
    diff = _token_diff(a.line, e.line.code)
    if diff:
        return a.line, diff[0], diff[1]
    if len(a.blocks) > len(e.blocks):  # an extra body, or an extra `} else {` block
        where = a.mids[len(e.blocks) - 1] if e.blocks else a.line
        return where, where.col, f"expected {len(e.blocks)} block(s) here, found {len(a.blocks)}"
    if len(a.blocks) < len(e.blocks):
        where = a.close or a.last_line()
        return where, where.col, f"expected {len(e.blocks)} block(s) here, found {len(a.blocks)}"
    for i, (ab, eb) in enumerate(zip(a.blocks, e.blocks)):
        if i > 0:
            diff = _token_diff(a.mids[i - 1], e.mids[i - 1].code)
            if diff:
                return a.mids[i - 1], diff[0], diff[1]
        end = a.mids[i] if i < len(a.mids) else (a.close or a.last_line())
        found = _match_list(ab, eb, end)
        if found:
            return found
    if a.close is not None and e.close is not None:
        diff = _token_diff(a.close, e.close.code)
        if diff:
            return a.close, diff[0], diff[1]
    return None


_HELPER_TREE = _template(_HELPER)[0]
_EXTERN_TREE = _template(_EXTERN)[0]
_HOST_TREE = _template(_HOST)[0]
_FORM_TREES = {name: _template(body) for name, (_, body, _) in _FORMS.items()}


def _has_region(node: _Node) -> bool:
    if "loom.spatial_region" in node.line.code:
        return True
    return any(_has_region(child) for block in node.blocks for child in block)


def _walk(nodes: list[_Node]):
    for node in nodes:
        yield node
        for block in node.blocks:
            yield from _walk(block)


# --------------------------------------------------------------------------
# What the precondition pass records (for uniqueness and conventions)
# --------------------------------------------------------------------------


@dataclass(eq=False)
class _Region:
    node: _Node
    result: _Tok | None = None
    graph: _Tok | None = None  # the string literal, quotes included


@dataclass(eq=False)
class _Site:
    wrapper: _Node | None
    regions: list[_Region] = field(default_factory=list)
    iv: _Tok | None = None  # scf.for induction variable


@dataclass(eq=False)
class _Thread:
    node: _Node
    sym: _Tok | None = None
    sites: list[_Site] = field(default_factory=list)
    calls: list[tuple[int, _Node]] = field(default_factory=list)  # (body index, op)


@dataclass
class _Header:
    result: _Tok | None = None
    operands: list[_Tok] | None = None
    op_segs: list[int] | None = None
    res_segs: list[int] | None = None


@dataclass
class _Tail:
    attrs: list[tuple[_Tok, _Tok | None]] | None = None
    attrs_col: int = 1
    ins: list[_Tok] | None = None
    outs: list[_Tok] | None = None


class _Call(NamedTuple):
    results: list[_Tok]
    op: _Tok
    callee: _Tok
    args: list[_Tok]
    ins: list[_Tok]
    outs: list[_Tok]


class _Scope:
    """SSA names visible inside one region body (nested blocks push frames)."""

    def __init__(self) -> None:
        self.frames: list[dict[str, str | None]] = [{}]

    def push(self) -> None:
        self.frames.append({})

    def pop(self) -> None:
        self.frames.pop()

    def lookup(self, name: str) -> tuple[bool, str | None]:
        for frame in reversed(self.frames):
            if name in frame:
                return True, frame[name]
        return False, None

    def define(self, name: str, ty: str | None) -> None:
        self.frames[-1][name] = ty


@dataclass
class _RegionCtx:
    args: dict[str, str]  # ^bb0 arguments: name -> type
    consts: dict[str, int | None] = field(default_factory=dict)  # arith.constant results


# --------------------------------------------------------------------------
# The checker
# --------------------------------------------------------------------------


class _Checker:
    def __init__(self, text: str, conventions: bool) -> None:
        self.conventions = conventions
        self.lines = _split_lines(text)
        self.found: set[Violation] = set()
        self.module: _Node | None = None
        self.symbols: dict[str, str] = {}  # module-level @name -> "func" | "llvm"
        self.threads: list[_Thread] = []
        self.regions: list[_Region] = []
        self.processed: set[int] = set()  # id() of regions checked where they stand
        self.thread_names: set[str] = set()  # every SSA name bound at thread level

    def report(self, rule: int | str, line: _Line, col: int, msg: str) -> None:
        tag = f"P{rule}" if isinstance(rule, int) else rule
        self.found.add(Violation(tag, max(line.no, 1), max(col, 1), msg))

    def run(self) -> list[Violation]:
        tops = _build_tree(self.lines, self.report)
        self.check_module_shell(tops)
        if self.module is not None:
            self.check_module_items(self.module)
        self.check_stray_regions(tops)
        self.check_unique_names()
        if self.conventions and self.module is not None:
            self.check_conventions(tops)
        return sorted(self.found, key=Violation.sort_key)

    # ---- P1: one module holding helper, extern, host, threads -------------

    def check_module_shell(self, tops: list[_Node]) -> None:
        if not tops:
            first = next((ln for ln in self.lines if ln.code.strip()), None) or self.lines[0]
            self.report(1, first, first.col, "empty program: expected a top-level `module {`")
            return
        for node in tops:
            if self.module is None and _op_name(node.line) == "module":
                self.module = node
                diff = _token_diff(node.line, "module {")
                if diff:
                    self.report(
                        1, node.line, diff[0], f"the module opens with `module {{`: {diff[1]}"
                    )
                if node.mids:
                    self.report(
                        1, node.mids[0], node.mids[0].col, "the module has exactly one body"
                    )
                if node.close and _token_diff(node.close, "}"):
                    self.report(1, node.close, node.close.col, "the module closes with a lone `}`")
            elif self.module is None:
                self.report(
                    1,
                    node.line,
                    node.line.col,
                    f"expected `module {{`, found `{_show(_norm(node.line.code))}`",
                )
            else:
                self.report(
                    1,
                    node.line,
                    node.line.col,
                    f"`{_show(_norm(node.line.code))}` stands outside the single top-level module",
                )

    @staticmethod
    def item_kind(node: _Node) -> str | None:
        return {"func.func": "func", "llvm.func": "llvm", "dataflow.thread": "thread"}.get(
            _op_name(node.line)
        )

    def check_module_items(self, module: _Node) -> None:
        describe = {
            "func": "a func.func",
            "llvm": "the llvm.func declaration",
            "thread": "a dataflow.thread",
        }
        order = ["func", "llvm", "func"]
        known: list[tuple[str, _Node]] = []
        for item in module.body:
            kind = self.item_kind(item)
            if kind is None:
                name = _op_name(item.line) or item.line.code.strip()
                self.report(
                    1,
                    item.line,
                    item.line.col,
                    f"unknown top-level operation `{_show(name)}` in the module",
                )
                continue
            known.append((kind, item))
            if kind in ("func", "llvm") and _symbol(item):
                self.symbols.setdefault(_symbol(item), kind)
        # Order: helper, extern, host, then one or more threads (one report is enough).
        for i, (kind, item) in enumerate(known):
            want = order[i] if i < 3 else "thread"
            if kind != want:
                self.report(
                    1,
                    item.line,
                    item.line.col,
                    f"expected {describe[want]} here (module order: helper, extern, host, "
                    f"threads), found {describe[kind]}",
                )
                break
        else:
            if len(known) < 4:
                missing = (order + ["thread"])[len(known)]
                where = module.close or module.last_line()
                self.report(
                    1,
                    where,
                    where.col,
                    f"the module lacks {describe[missing]} (module order: helper, extern, host, "
                    "threads)",
                )
        # Roles by name first, so that an ordering slip is P1 alone.
        funcs = [item for kind, item in known if kind == "func"]
        llvms = [item for kind, item in known if kind == "llvm"]
        helper = next((f for f in funcs if _symbol(f) == "@helper_double"), None)
        host = next((f for f in funcs if f is not helper and _symbol(f) == "@host_container"), None)
        helper = helper or next((f for f in funcs if f is not host), None)
        host = host or next((f for f in funcs if f is not helper), None)
        extern = next(
            (f for f in llvms if _symbol(f) == "@extern_scale"), llvms[0] if llvms else None
        )
        if helper:
            self.check_fixed(helper, _HELPER_TREE, 2, "@helper_double")
        if extern:
            self.check_fixed(extern, _EXTERN_TREE, 3, "@extern_scale")
        if host:
            self.check_fixed(host, _HOST_TREE, 4, "@host_container")
        for kind, item in known:
            if kind == "thread":
                self.check_thread(item)

    # ---- P2, P3, P4: the constant preamble --------------------------------

    def check_fixed(self, node: _Node, template: _Node, rule: int, what: str) -> None:
        if rule == 3 and node.blocks:
            self.report(3, node.line, node.line.col, f"{what} is a declaration: no body")
            return
        diff = _match_node(node, template)
        if diff:
            self.report(
                rule, diff[0], diff[1], f"{what} must be exactly the spec's text: {diff[2]}"
            )

    # ---- P5..P8, P21: threads ---------------------------------------------

    def check_thread_header(self, line: _Line) -> _Tok | None:
        toks = _tokens(line.code)
        sym = next((t for t in toks if t.text.startswith("@")), None)
        want: list[tuple[str, str, str]] = []
        for label, part in _THREAD_HEADER_PARTS:
            text = part.replace("@SYM", sym.text if sym else "@thread_N")
            want.extend((t.text, label, text) for t in _tokens(text))
        for i, (w, label, part) in enumerate(want):
            if i >= len(toks) or toks[i].text != w:
                col = toks[i].col if i < len(toks) else line.end
                got = f"'{_show(toks[i].text)}'" if i < len(toks) else "the end of the line"
                self.report(5, line, col, f"thread {label} must be `{part}`, found {got}")
                return sym
        if len(toks) > len(want):
            self.report(
                5,
                line,
                toks[len(want)].col,
                f"unexpected '{_show(toks[len(want)].text)}' after the thread header",
            )
        return sym

    def check_thread(self, node: _Node) -> None:
        th = _Thread(node)
        self.threads.append(th)
        th.sym = self.check_thread_header(node.line)
        if not node.blocks:
            return  # the header check already reported the missing '{'
        if node.mids:
            self.report(5, node.mids[0], node.mids[0].col, "a dataflow.thread has exactly one body")
        body = node.body
        env = dict(_THREAD_ARGS)
        self.thread_names.update(_THREAD_ARGS)
        self.check_thread_constants(node, body)
        seen_site = False
        leading = 0  # the run of constants the body starts with (P6 judged it already)
        while leading < len(body) and self.thread_op_kind(body[leading]) == "const":
            leading += 1
        for idx, child in enumerate(body):
            kind = self.thread_op_kind(child)
            if kind == "const":
                results, _, _ = _op(child.line)
                if idx >= max(leading, 3):
                    self.report(
                        6,
                        child.line,
                        child.line.col,
                        "unexpected constant: the thread's only constants are %lo, %hi, %stp at "
                        "its start",
                    )
                for r in results:
                    env[r.text] = _norm(child.line.code.rsplit(":", 1)[-1])
                    self.thread_names.add(r.text)
            elif kind == "call":
                self.check_thread_call(th, body, idx, seen_site, env)
            elif kind == "region":
                th.sites.append(_Site(None, [self.check_region(child, env)]))
                seen_site = True
            elif kind in ("if", "for"):
                site = self.check_wrapper(child, kind, env)
                if site.regions:
                    th.sites.append(site)
                seen_site = seen_site or _has_region(child)
            elif kind == "yield":
                if idx != len(body) - 1:
                    self.report(
                        7,
                        child.line,
                        child.line.col,
                        "dataflow.thread.yield must be the thread body's last operation",
                    )
                diff = _token_diff(child.line, "dataflow.thread.yield")
                if diff or child.blocks:
                    self.report(
                        7,
                        child.line,
                        diff[0] if diff else child.line.col,
                        "the thread body ends with a bare `dataflow.thread.yield`",
                    )
            elif not _has_region(
                child
            ):  # (an unknown op holding a region is P9, reported by the stray scan)
                name = _op_name(child.line) or child.line.code.strip()
                self.report(
                    6,
                    child.line,
                    child.line.col,
                    f"unexpected operation `{_show(name)}` in a thread body: only the index "
                    "constants, the optional @helper_double call, region sites and "
                    "dataflow.thread.yield",
                )
        if not body or self.thread_op_kind(body[-1]) != "yield":
            where = node.close or node.last_line()
            self.report(
                7, where, where.col, "the thread body must end with `dataflow.thread.yield`"
            )
        self.check_close(node, 7, "the thread body")
        if not _has_region(node):
            self.report(8, node.line, node.line.col, "the thread holds no loom.spatial_region")

    @staticmethod
    def thread_op_kind(node: _Node) -> str:
        if "loom.spatial_region" in node.line.code:
            return "region"
        name = _op_name(node.line)
        if name == "arith.constant":
            return "const"
        if name in _CALLS or "call" in name or "invoke" in name:
            return "call"
        return {"scf.if": "if", "scf.for": "for", "dataflow.thread.yield": "yield"}.get(
            name, "other"
        )

    def check_thread_constants(self, node: _Node, body: list[_Node]) -> None:
        for k, (name, value) in enumerate(_THREAD_CONSTANTS):
            want = f"{name} = arith.constant {value} : index"
            if k >= len(body):
                where = node.close or node.last_line()
                self.report(
                    6,
                    where,
                    where.col,
                    "the thread body must begin with %lo = 0, %hi = 2, %stp = 1 (index "
                    f"constants): `{want}` is missing",
                )
                return
            diff = _token_diff(body[k].line, want)
            if diff or body[k].blocks:
                col, msg = diff or (body[k].line.col, "unexpected block")
                self.report(
                    6,
                    body[k].line,
                    col,
                    "the thread body must begin with %lo = 0, %hi = 2, %stp = 1 (index "
                    f"constants): {msg}",
                )
                return

    def check_thread_call(
        self, th: _Thread, body: list[_Node], idx: int, seen_site: bool, env: dict[str, str]
    ) -> None:
        node = body[idx]
        line = node.line
        th.calls.append((idx, node))
        call = self.parse_call(line, 20)
        if call is None:
            return
        if call.op.text == "func.call":
            self.check_call_target(call, line)
        else:
            self.report(
                21,
                line,
                call.op.col,
                "only `func.call @helper_double` may stand directly in a thread body, found "
                f"`{_show(call.op.text)}`",
            )
        if any(self.thread_op_kind(later) == "const" for later in body[idx + 1 :]):
            self.report(
                21,
                line,
                line.col,
                "the thread-level call comes after the index constants %lo, %hi, %stp",
            )
        if seen_site:
            self.report(
                21,
                line,
                line.col,
                "the thread-level call comes before the thread's first region site",
            )
        for i, arg in enumerate(call.args):
            if arg.text not in env:
                self.report(
                    20,
                    line,
                    arg.col,
                    f"call operand {_show(arg.text)} is not defined in the thread",
                )
            elif i < len(call.ins) and not _same_type(env[arg.text], call.ins[i].text):
                self.report(
                    23,
                    line,
                    arg.col,
                    f"{arg.text} has type {env[arg.text]}, the call passes "
                    f"{_show(call.ins[i].text)}",
                )
        for t in call.ins + call.outs:
            self.check_type_text(t.text, line, t.col)
        for i, r in enumerate(call.results):
            if r.text in env:
                self.report(
                    21, line, r.col, f"the call's result redefines the thread value {r.text}"
                )
            env[r.text] = call.outs[i].text if i < len(call.outs) else None
            self.thread_names.add(r.text)

    def check_close(self, node: _Node, rule: int, what: str) -> None:
        """A block that is not a region closes with a lone `}`."""
        if node.close is not None:
            diff = _token_diff(node.close, "}")
            if diff:
                self.report(rule, node.close, diff[0], f"{what} closes with a lone `}}`: {diff[1]}")

    # ---- P9, P10: where regions sit ---------------------------------------

    def check_wrapper(self, node: _Node, kind: str, env: dict[str, str]) -> _Site:
        site = _Site(node)
        line = node.line
        c = _Cursor(line)
        inner = dict(env)
        what = "an scf.if around a region" if kind == "if" else "an scf.for around a region"
        try:
            results = c.results()
            if results:
                self.report(10, line, results[0].col, f"{what} has no results")
            if kind == "if":
                c.expect("scf.if")
                cond = c.need(_SSA_RE, "the condition")
                if cond.text != "%flag":
                    self.report(10, line, cond.col, f"{what} is on %flag, found {_show(cond.text)}")
                if c.lit("->"):
                    self.report(10, line, c.col(), f"{what} has no results")
                    return self.wrapper_body(node, site, inner)
            else:
                c.expect("scf.for")
                site.iv = c.need(_SSA_RE, "the induction variable")
                c.expect("=")
                for want, sep in (("%lo", "to"), ("%hi", "step"), ("%stp", None)):
                    bound = c.need(_SSA_RE, f"the bound {want}")
                    if bound.text != want:
                        self.report(
                            10,
                            line,
                            bound.col,
                            f"{what} runs %lo to %hi step %stp, found {_show(bound.text)} where "
                            f"{want} belongs",
                        )
                    if sep:
                        c.expect(sep)
                col = c.col()
                if c.match(re.compile(r"iter_args\b")):
                    self.report(10, line, col, f"{what} has no iter_args")
                    return self.wrapper_body(node, site, inner)
                if c.lit("->"):
                    self.report(10, line, col, f"{what} has no results")
                    return self.wrapper_body(node, site, inner)
                if c.lit(":"):
                    ty = c.need(_TYPE_RE, "the bound type")
                    if ty.text != "index":
                        self.report(
                            23, line, ty.col, f"loop bounds are index, found {_show(ty.text)}"
                        )
                if site.iv.text in env:
                    self.report(
                        10,
                        line,
                        site.iv.col,
                        f"the induction variable redefines the thread value {site.iv.text}",
                    )
                inner[site.iv.text] = "index"
                self.thread_names.add(site.iv.text)
            c.expect("{")
            c.end()
        except _Fail as f:
            self.report(10, line, f.col, f"malformed {what}: {f.msg}")
        return self.wrapper_body(node, site, inner)

    def wrapper_body(self, node: _Node, site: _Site, env: dict[str, str]) -> _Site:
        self.check_close(node, 10, "a wrapper")
        for mid in node.mids:
            self.report(10, mid, mid.col, "a wrapper around a region has a single block: no `else`")
        body = node.body
        for j, child in enumerate(body):
            kind = self.thread_op_kind(child)
            if kind == "region":
                site.regions.append(self.check_region(child, env))
            elif kind == "call":
                self.report(
                    21,
                    child.line,
                    child.line.col,
                    "a call may stand only directly in a thread body, not inside a wrapper",
                )
            elif (
                _op_name(child.line) == "scf.yield"
                and j == len(body) - 1
                and not _token_diff(child.line, "scf.yield")
            ):
                pass  # the implicit terminator, written out: harmless (C7 notes it)
            elif not _has_region(child):  # a nested wrapper holding a region is P9 (stray scan)
                self.report(
                    10,
                    child.line,
                    child.line.col,
                    "a wrapper holds only loom.spatial_region sites, found "
                    f"`{_show(_op_name(child.line) or child.line.code.strip())}`",
                )
        if not _has_region(node):
            self.report(
                10, node.line, node.line.col, "this scf wrapper holds no loom.spatial_region"
            )
        return site

    def check_stray_regions(self, tops: list[_Node]) -> None:
        """P9: every region not checked in place sits somewhere it must not."""

        def visit(nodes: list[_Node], ancestors: list[_Node]) -> None:
            for node in nodes:
                code = node.line.code
                if "loom.spatial_region" in code and id(node) not in self.processed:
                    col = code.find("loom.spatial_region") + 1
                    if col > 1 and code[col - 2] == '"':
                        col -= 1
                    names = [_op_name(a.line) for a in ancestors]
                    if any("loom.spatial_region" in a.line.code for a in ancestors):
                        why = "nested inside another loom.spatial_region"
                    elif "func.func" in names or "llvm.func" in names:
                        why = "inside a function; regions live only in thread bodies"
                    elif "dataflow.thread" not in names:
                        why = "outside any dataflow.thread"
                    else:
                        why = "not at a thread body's top level or one scf.if/scf.for below it"
                        if self.conventions and sum(n in ("scf.if", "scf.for") for n in names) > 1:
                            self.report("C22", node.line, col, "a site has at most one wrapper")
                    self.report(9, node.line, col, f"loom.spatial_region {why}")
                for block in node.blocks:
                    visit(block, ancestors + [node])

        visit(tops, [])

    # ---- P11..P18: one region -----------------------------------------------

    def check_region(self, node: _Node, env: dict[str, str]) -> _Region:
        self.processed.add(id(node))
        region = _Region(node)
        self.regions.append(region)
        hdr = self.parse_region_header(node.line)
        region.result = hdr.result
        tail = self.parse_region_tail(node.close) if node.close else _Tail()
        if not node.blocks:
            return region  # header parse reported the missing `({`
        for mid in node.mids:
            self.report(
                11, mid, mid.col, "a loom.spatial_region has exactly one region (one entry block)"
            )
        ins, outs = tail.ins, tail.outs
        close = node.close or node.last_line()
        if hdr.operands is not None and ins is not None and len(hdr.operands) != len(ins):
            self.report(
                11,
                close,
                ins[0].col if ins else close.col,
                f"{len(hdr.operands)} operand(s) but the functional type lists {len(ins)}",
            )
        self.check_segments(node, hdr, ins, outs)
        # P15: only the thread's arguments go in; P23: with their own types.
        for i, op in enumerate(hdr.operands or []):
            if op.text not in _REGION_OPERANDS:
                self.report(
                    15,
                    node.line,
                    op.col,
                    f"region operand {_show(op.text)} is not one of the thread's %val, %mem, %flag",
                )
            if (
                ins is not None
                and i < len(ins)
                and op.text in env
                and not _same_type(env[op.text], ins[i].text)
            ):
                self.report(
                    23,
                    close,
                    ins[i].col,
                    f"operand {op.text} has type {env[op.text]}, the functional type says "
                    f"{_show(ins[i].text)}",
                )
        for t in (ins or []) + (outs or []):
            self.check_type_text(t.text, close, t.col)
        # P17, P18: result binding.
        if hdr.result is not None:
            if outs is not None and not outs:
                self.report(
                    18,
                    node.line,
                    hdr.result.col,
                    "a region that yields nothing binds no SSA result, found "
                    f"{_show(hdr.result.text)}",
                )
            else:
                env[hdr.result.text] = outs[0].text if outs else None
        elif outs:
            self.report(
                17, node.line, node.line.col, "the region's result is not bound to an SSA name"
            )
        if tail.attrs is not None:
            self.check_region_attrs(region, close, tail)
        self.check_region_body(node, hdr, ins, outs)
        return region

    def parse_region_header(self, line: _Line) -> _Header:
        hdr = _Header()
        c = _Cursor(line)
        try:
            results = c.results()
            if len(results) > 1:
                self.report(
                    11, line, results[1].col, "a loom.spatial_region binds at most one result name"
                )
            hdr.result = results[0] if results else None
            col = c.col()
            if not c.lit('"loom.spatial_region"'):
                if not c.lit("loom.spatial_region"):
                    raise _Fail(col, f'expected "loom.spatial_region", found {c.peek()}')
                self.report(
                    11,
                    line,
                    col,
                    'regions are in generic form: the name is the quoted "loom.spatial_region"',
                )
            hdr.operands = c.values()
            col = c.col()
            if not c.lit("<{"):
                raise _Fail(
                    col,
                    "expected the properties "
                    f"<{{operandSegmentSizes = ..., resultSegmentSizes = ...}}>, found {c.peek()}",
                )
            props = self.check_dict(
                line,
                col,
                c.entries("}>"),
                ("operandSegmentSizes", "resultSegmentSizes"),
                11,
                "the region's properties",
            )
            if "operandSegmentSizes" in props:
                hdr.op_segs = self.segments(line, props["operandSegmentSizes"], 11)
            if "resultSegmentSizes" in props:
                hdr.res_segs = self.segments(line, props["resultSegmentSizes"], 11)
            c.expect("(", "opening the region list `({`")
            c.expect("{", "opening the region body `({`")
            c.end()
        except _Fail as f:
            self.report(11, line, f.col, f"malformed region header: {f.msg}")
        return hdr

    def check_dict(
        self,
        line: _Line,
        col: int,
        entries: list[tuple[_Tok, _Tok | None]],
        keys: tuple[str, ...],
        rule: int,
        what: str,
    ) -> dict[str, _Tok]:
        """Exactly ``keys``, each with a value; returns key -> value."""
        out: dict[str, _Tok] = {}
        for key, value in entries:
            if key.text in out:
                self.report(rule, line, key.col, f"{what}: duplicate entry {_show(key.text)}")
            elif key.text not in keys:
                self.report(
                    rule,
                    line,
                    key.col,
                    f"{what} hold exactly {', '.join(keys)}: unexpected {_show(key.text)}",
                )
            elif value is None:
                self.report(rule, line, key.col, f"{what}: {key.text} has no value")
            else:
                out[key.text] = value
        for key in keys:
            if key not in out and not any(k.text == key for k, _ in entries):
                self.report(rule, line, col, f"{what} lack {key}")
        return out

    def segments(self, line: _Line, value: _Tok, rule: int) -> list[int] | None:
        segs = _segments(value.text)
        if segs is None:
            self.report(
                rule,
                line,
                value.col,
                f"segment sizes are written `array<i32: ...>`, found `{_show(value.text)}`",
            )
        return segs

    def parse_region_tail(self, line: _Line) -> _Tail:
        tail = _Tail()
        c = _Cursor(line)
        try:
            c.expect("}")
            c.expect(")", "closing the region list `})`")
            col = c.col()
            if c.lit("{"):
                tail.attrs_col = col
                tail.attrs = c.entries("}")
            else:
                self.report(
                    11,
                    line,
                    col,
                    "missing the trailing attribute dictionary {graph_name = ..., source_maps = "
                    "[]}",
                )
                self.report(16, line, col, "the region carries no graph_name and source_maps")
            c.expect(":", "before the region's functional type")
            tail.ins, tail.outs = c.fn_type()
            c.end()
        except _Fail as f:
            self.report(11, line, f.col, f"malformed region closing line: {f.msg}")
        return tail

    def check_segments(
        self, node: _Node, hdr: _Header, ins: list[_Tok] | None, outs: list[_Tok] | None
    ) -> None:
        """P12: four operand segments, two result segments, sums match the type."""
        for key, segs, entries, count, what in (
            ("operandSegmentSizes", hdr.op_segs, 4, ins, "operand"),
            ("resultSegmentSizes", hdr.res_segs, 2, outs, "result"),
        ):
            if segs is None:
                continue
            col = node.line.code.find(key) + 1 or node.line.col
            if len(segs) != entries:
                self.report(
                    12, node.line, col, f"{key} has {len(segs)} entries, expected {entries}"
                )
            if any(s < 0 for s in segs):
                self.report(12, node.line, col, f"{key} has a negative entry")
            if count is not None and sum(segs) != len(count):
                self.report(
                    12,
                    node.line,
                    col,
                    f"{key} sums to {sum(segs)} but the functional type has {len(count)} {what}(s)",
                )

    def check_region_attrs(self, region: _Region, line: _Line, tail: _Tail) -> None:
        """P16: exactly graph_name (a string) and source_maps = []."""
        attrs = self.check_dict(
            line,
            tail.attrs_col,
            tail.attrs or [],
            ("graph_name", "source_maps"),
            16,
            "the region's attributes",
        )
        graph = attrs.get("graph_name")
        if graph is not None:
            if re.fullmatch(r'"(?:[^"\\]|\\.)*"', graph.text):
                region.graph = graph
            else:
                self.report(
                    16, line, graph.col, f"graph_name is a string, found `{_show(graph.text)}`"
                )
        maps = attrs.get("source_maps")
        if maps is not None and [t.text for t in _tokens(maps.text)] != ["[", "]"]:
            self.report(16, line, maps.col, f"source_maps = [], found `{_show(maps.text)}`")

    def check_unique_names(self) -> None:
        """P16/P17/P24: graph names, result names, thread symbols."""
        seen_graph: dict[str, int] = {}
        seen_result: dict[str, int] = {}
        for region in self.regions:
            if region.graph is not None:
                first = seen_graph.setdefault(
                    region.graph.text, region.node.close.no if region.node.close else 0
                )
                if region.node.close and first != region.node.close.no:
                    msg = f"graph_name {_show(region.graph.text)} is already used at line {first}"
                    self.report(16, region.node.close, region.graph.col, msg)
                    self.report(24, region.node.close, region.graph.col, msg)
            if region.result is not None:
                first = seen_result.setdefault(region.result.text, region.node.line.no)
                if first != region.node.line.no:
                    msg = f"result name {region.result.text} is already bound at line {first}"
                    self.report(17, region.node.line, region.result.col, msg)
                    self.report(24, region.node.line, region.result.col, msg)
                elif region.result.text in self.thread_names:
                    self.report(
                        17,
                        region.node.line,
                        region.result.col,
                        f"result name {region.result.text} is already bound in a thread",
                    )
        seen_sym: dict[str, int] = {}
        for th in self.threads:
            if th.sym is None:
                continue
            if th.sym.text in self.symbols:
                self.report(
                    24,
                    th.node.line,
                    th.sym.col,
                    f"thread symbol {th.sym.text} is already a module-level function",
                )
            first = seen_sym.setdefault(th.sym.text, th.node.line.no)
            if first != th.node.line.no:
                self.report(
                    24,
                    th.node.line,
                    th.sym.col,
                    f"thread symbol {th.sym.text} is already defined at line {first}",
                )

    # ---- P11, P13, P14, P19, P20, P22, P23: a region body ---------------------

    def check_region_body(
        self, node: _Node, hdr: _Header, ins: list[_Tok] | None, outs: list[_Tok] | None
    ) -> None:
        body = node.body
        close = node.close or node.last_line()
        if not body:
            self.report(11, close, close.col, "the region has no entry block `^bb0(...)`")
            return
        scope = _Scope()
        ctx = _RegionCtx(args={})
        first = body[0]
        if first.line.code.strip().startswith("^"):
            args = self.check_entry_block(first.line, hdr, ins)
            for name, ty in args:
                self.define(name, ty.text, first.line, scope)
                ctx.args[name.text] = ty.text
            ops = body[1:]
        else:
            self.report(
                11,
                first.line,
                first.line.col,
                "the region body starts with its entry block `^bb0(...):`",
            )
            ops = body
        last = ops[-1] if ops else None
        if last is None or _op_name(last.line) != "loom.spatial_yield":
            self.report(
                14, close, close.col, 'the region body must end with a generic "loom.spatial_yield"'
            )
            last = None
        for op in ops:
            if op is last:
                self.check_spatial_yield(op, outs, scope)
            else:
                self.check_body_op(op, scope, ctx)

    def check_entry_block(
        self, line: _Line, hdr: _Header, ins: list[_Tok] | None
    ) -> list[tuple[_Tok, _Tok]]:
        args: list[tuple[_Tok, _Tok]] = []
        c = _Cursor(line)
        try:
            label = c.need(_LABEL_RE, "a block label")
            if label.text != "^bb0":
                self.report(
                    11, line, label.col, f"the entry block is ^bb0, found {_show(label.text)}"
                )
            if c.lit("(") and not c.lit(")"):
                while True:
                    name = c.need(_SSA_RE, "a block argument")
                    c.expect(":")
                    args.append((name, c.need(_TYPE_RE, "a type")))
                    if not c.lit(","):
                        c.expect(")")
                        break
            c.expect(":", "ending the block label")
            c.end()
        except _Fail as f:
            self.report(11, line, f.col, f"malformed entry block label: {f.msg}")
            return args
        count = (
            len(hdr.operands)
            if hdr.operands is not None
            else (len(ins) if ins is not None else None)
        )
        if count is not None and len(args) != count:
            self.report(
                13,
                line,
                line.col,
                f"^bb0 has {len(args)} argument(s) for {count} region operand(s)",
            )
        for i, (name, ty) in enumerate(args):
            if ins is not None and i < len(ins) and not _same_type(ty.text, ins[i].text):
                self.report(
                    13,
                    line,
                    ty.col,
                    f"block argument {name.text} has type {_show(ty.text)} but region operand {i} "
                    f"has type {_show(ins[i].text)}",
                )
        return args

    def define(self, name: _Tok, ty: str | None, line: _Line, scope: _Scope) -> None:
        if scope.lookup(name.text)[0]:
            self.report(13, line, name.col, f"{name.text} is defined twice in the region body")
        scope.define(name.text, ty)
        self.check_value_type(name.text, ty, line, name.col)

    def use(self, name: _Tok, line: _Line, scope: _Scope) -> str | None:
        found, ty = scope.lookup(name.text)
        if not found:
            hint = (
                " (a thread value: pass it in as a region operand)"
                if name.text in self.thread_names
                else ""
            )
            self.report(
                13,
                line,
                name.col,
                f"{_show(name.text)} is not defined in the region body before this use: only the "
                f"^bb0 arguments flow in{hint}",
            )
        return ty

    def check_value_type(self, name: str, ty: str | None, line: _Line, col: int) -> None:
        """P23: integers are i32, i1 only for the predicates %flag and %c."""
        if ty is None:
            return
        if self.check_type_text(ty, line, col) and _norm(ty) == "i1" \
                and not _PREDICATE.fullmatch(name):
            self.report(
                23,
                line,
                col,
                f"{_show(name)} has type i1, but only the predicates %flag and %c are i1 (integers "
                "are i32)",
            )

    def check_type_text(self, ty: str, line: _Line, col: int) -> bool:
        spaced = re.sub(r"(?<=\d)x", " ", ty)
        bad = [
            w for w in _INT_WIDTH_RE.findall(spaced) if w not in ("32", "1")
        ] or _FLOAT_RE.findall(spaced)
        if bad:
            self.report(
                23,
                line,
                col,
                f"type `{_show(ty)}`: all integers are i32 (i1 only for %flag/%c), no other types",
            )
        return not bad

    def check_body_op(self, node: _Node, scope: _Scope, ctx: _RegionCtx) -> None:
        line = node.line
        if line.code.strip().startswith("^"):
            self.report(
                22,
                line,
                line.col,
                "a region body is a single block ^bb0 plus structured scf nesting: no further "
                "blocks",
            )
            return
        if "loom.spatial_region" in line.code:
            return  # a nested region: P9 (stray scan)
        results, op, pos = _op(line)
        name = op.text.strip('"') if op else ""
        col = op.col if op else line.col
        # checked = False: a rejected op; its results are still bound (untyped) so that
        # later uses do not cascade into P13.
        checked = True
        if name == "loom.spatial_yield":
            self.report(
                14,
                line,
                line.col,
                '"loom.spatial_yield" must be the last operation of the region body',
            )
        elif name == "scf.if":
            self.check_scf_if(node, scope, ctx)
        elif name == "scf.for":
            self.check_scf_for(node, scope, ctx)
        elif name == "scf.yield":
            self.report(
                22,
                line,
                line.col,
                "scf.yield stands only at the end of an scf.if branch or scf.for body",
            )
        elif node.blocks:
            self.report(
                22,
                line,
                line.col,
                f"`{_show(name)}` opens a block: inside a region only scf.if and scf.for nest",
            )
            checked = False
        elif name.startswith("arith.") and name[6:] in _ARITH_OPS:
            self.check_arith(line, results, name, pos, scope, ctx)
        elif name == "llvm.freeze":
            self.check_arith(line, results, "arith.freeze", pos, scope, ctx)
        elif name in ("memref.load", "memref.store"):
            self.check_memory(line, results, name, pos, scope, ctx)
        elif name in _CALLS:
            self.check_region_call(line, scope)
        elif "call" in name or "invoke" in name:
            self.report(
                20,
                line,
                col,
                "calls are only func.call @helper_double and llvm.call @extern_scale, found "
                f"`{_show(name)}`",
            )
            checked = False
        elif name.startswith(("memref.", "affine.", "llvm.load", "llvm.store", "llvm.alloca")):
            self.report(
                19,
                line,
                col,
                "memory is accessed only by memref.load/memref.store on a region memref operand, "
                f"found `{_show(name)}`",
            )
            checked = False
        elif name.startswith(_UNSTRUCTURED) or name.startswith("scf."):
            self.report(
                22,
                line,
                col,
                "control flow inside a region is only structured scf.if/scf.for, found "
                f"`{_show(name)}`",
            )
            checked = False
        else:
            self.report(
                22,
                line,
                col,
                f"operation `{_show(name or line.code.strip())}` is not allowed in a region body",
            )
            checked = False
        if not checked:
            for r in results:
                scope.define(r.text, None)

    def check_arith(
        self, line: _Line, results: list[_Tok], name: str, pos: int, scope: _Scope, ctx: _RegionCtx
    ) -> None:
        """arith ops and llvm.freeze, parsed strictly (a malformed op is P22), typed (P23)."""
        kind = name.split(".", 1)[1]
        c = _Cursor(line, pos)
        value: _Tok | None = None
        operands: list[_Tok] = []
        try:
            if len(results) > 1:
                raise _Fail(results[1].col, f"`{name}` has one result")
            if kind == "constant":
                value = c.need(re.compile(r"-?\d+|true|false"), "an integer constant")
            else:
                if kind == "cmpi":
                    c.need(_IDENT_RE, "a comparison predicate")
                    c.expect(",")
                arity = {"select": 3, "cmpi": 2}.get(
                    kind, 1 if kind in _CAST_ARITH or kind == "freeze" else 2
                )
                for i in range(arity):
                    if i:
                        c.expect(",")
                    operands.append(c.need(_SSA_RE, "an SSA operand"))
            c.expect(":")
            op_ty = c.need(_TYPE_RE, "a type")
            res_ty = op_ty
            if kind in _CAST_ARITH:
                c.expect("to")
                res_ty = c.need(_TYPE_RE, "the result type")
            c.end()
        except _Fail as f:
            self.report(
                22,
                line,
                f.col,
                f"malformed `{'llvm.freeze' if kind == 'freeze' else name}`: {f.msg}",
            )
            for r in results:
                scope.define(r.text, None)
            return
        op_types = [op_ty.text] * len(operands)
        if kind == "select":
            op_types[0] = "i1"
        for tok, want in zip(operands, op_types):
            got = self.use(tok, line, scope)
            if not _same_type(got, want):
                self.report(
                    23,
                    line,
                    tok.col,
                    f"{tok.text} has type {got}, the operation says {_show(want)}",
                )
        self.check_type_text(op_ty.text, line, op_ty.col)
        if res_ty is not op_ty:
            self.check_type_text(res_ty.text, line, res_ty.col)
        if value is not None:
            for r in results:
                ctx.consts[r.text] = (
                    int(value.text) if value.text not in ("true", "false") else None
                )
        for r in results:
            self.define(r, "i1" if kind == "cmpi" else res_ty.text, line, scope)

    def check_memory(
        self, line: _Line, results: list[_Tok], name: str, pos: int, scope: _Scope, ctx: _RegionCtx
    ) -> None:
        """P19: only a memref<4xi32> region operand, indexed by a constant of this body."""
        c = _Cursor(line, pos)
        try:
            value = None
            if name == "memref.store":
                value = c.need(_SSA_RE, "the stored value")
                c.expect(",")
            ref = c.need(_SSA_RE, "the memref")
            c.expect("[")
            indices: list[_Tok] = []
            if not c.lit("]"):
                while True:
                    indices.append(c.need(_SSA_RE, "an index"))
                    if not c.lit(","):
                        c.expect("]")
                        break
            c.expect(":")
            ty = c.need(_TYPE_RE, "the memref type")
            c.end()
        except _Fail as f:
            self.report(19, line, f.col, f"malformed {name}: {f.msg}")
            for r in results:
                scope.define(r.text, None)
            return
        ref_type = self.use(ref, line, scope)
        if ref.text not in ctx.args or not _same_type(ctx.args[ref.text], "memref<4xi32>"):
            self.report(
                19,
                line,
                ref.col,
                f"{name} addresses {_show(ref.text)}, which is not a memref<4xi32> region operand "
                "(^bb0 argument)",
            )
        elif not _same_type(ref_type, ty.text):
            self.report(
                23,
                line,
                ty.col,
                f"{ref.text} has type {ref_type}, the access says {_show(ty.text)}",
            )
        self.check_type_text(ty.text, line, ty.col)
        if len(indices) != 1:
            self.report(19, line, ref.col, f"a memref<4xi32> takes one index, found {len(indices)}")
        for idx in indices:
            idx_type = self.use(idx, line, scope)
            if idx.text not in ctx.consts:
                self.report(
                    19,
                    line,
                    idx.col,
                    f"the index {_show(idx.text)} is not a constant defined in this region body",
                )
            elif ctx.consts[idx.text] is None or not 0 <= ctx.consts[idx.text] < 4:
                self.report(
                    19,
                    line,
                    idx.col,
                    f"the index constant {idx.text} is not in bounds 0..3 of memref<4xi32>",
                )
            if not _same_type(idx_type, "index"):
                self.report(
                    23, line, idx.col, f"memref indices are index, {idx.text} has type {idx_type}"
                )
        if value is not None:
            got = self.use(value, line, scope)
            if not _same_type(got, "i32"):
                self.report(
                    23,
                    line,
                    value.col,
                    f"the stored value {value.text} has type {got}, the memref holds i32",
                )
        for r in results:
            self.define(r, "i32", line, scope)

    def check_block(
        self,
        ops: list[_Node],
        types: list[str],
        owner: str,
        end: _Line,
        scope: _Scope,
        ctx: _RegionCtx,
    ) -> None:
        """One scf block: its ops, then an scf.yield of ``types``."""
        last = (
            ops[-1]
            if ops and _op_name(ops[-1].line) == "scf.yield" and not ops[-1].blocks
            else None
        )
        for op in ops:
            if op is not last:
                self.check_body_op(op, scope, ctx)
        if last is None:
            if types:
                self.report(
                    22, end, end.col, f"a block of {owner} inside a region ends with scf.yield"
                )
            return
        c = _Cursor(last.line)
        try:
            c.expect("scf.yield")
            values: list[_Tok] = []
            listed: list[_Tok] = []
            tok = c.match(_SSA_RE)
            if tok:
                values.append(tok)
                while c.lit(","):
                    values.append(c.need(_SSA_RE, "a yielded value"))
                c.expect(":")
                listed = [c.need(_TYPE_RE, "a type")]
                while c.lit(","):
                    listed.append(c.need(_TYPE_RE, "a type"))
            c.end()
        except _Fail as f:
            self.report(22, last.line, f.col, f"malformed scf.yield: {f.msg}")
            return
        if len(values) != len(types) or len(listed) != len(values):
            self.report(
                22,
                last.line,
                last.line.col,
                f"scf.yield of {owner} yields {len(values)} value(s) for {len(types)} result "
                "type(s)",
            )
        for i, v in enumerate(values):
            got = self.use(v, last.line, scope)
            want = listed[i].text if i < len(listed) else (types[i] if i < len(types) else None)
            if not _same_type(got, want) or (i < len(types) and not _same_type(want, types[i])):
                self.report(
                    23,
                    last.line,
                    v.col,
                    f"scf.yield's {v.text} has type {got}, {owner} yields "
                    f"{types[i] if i < len(types) else want}",
                )

    def check_scf_if(self, node: _Node, scope: _Scope, ctx: _RegionCtx) -> None:
        """P22: an scf.if inside a region has both branches, each ending in scf.yield."""
        line = node.line
        c = _Cursor(line)
        types: list[_Tok] = []
        results = c.results()
        try:
            c.expect("scf.if")
            cond = c.need(_SSA_RE, "the condition")
            if c.lit("->"):
                types = c.types() if c.lit("(") else [c.need(_TYPE_RE, "a result type")]
            c.expect("{")
            c.end()
        except _Fail as f:
            self.report(22, line, f.col, f"malformed scf.if: {f.msg}")
            for r in results:
                scope.define(r.text, None)
            return
        cond_type = self.use(cond, line, scope)
        if not _same_type(cond_type, "i1"):
            self.report(
                23, line, cond.col, f"the scf.if condition {cond.text} has type {cond_type}, not i1"
            )
        if len(results) != len(types):
            self.report(
                22,
                line,
                line.col,
                f"scf.if binds {len(results)} result(s) but declares {len(types)} type(s)",
            )
        if len(node.blocks) < 2:
            where = node.close or node.last_line()
            self.report(
                22,
                where,
                where.col,
                "an scf.if inside a region has both branches: the else branch is missing",
            )
        elif len(node.blocks) > 2:
            self.report(22, node.mids[1], node.mids[1].col, "an scf.if has exactly two branches")
        if node.mids and _token_diff(node.mids[0], "} else {"):
            self.report(
                22,
                node.mids[0],
                node.mids[0].col,
                "the branches of an scf.if are separated by `} else {`",
            )
        self.check_close(node, 22, "an scf.if")
        for i, block in enumerate(node.blocks[:2]):
            end = node.mids[i] if i < len(node.mids) else (node.close or node.last_line())
            scope.push()
            self.check_block(block, [t.text for t in types], "scf.if", end, scope, ctx)
            scope.pop()
        for i, r in enumerate(results):
            self.define(r, types[i].text if i < len(types) else None, line, scope)

    def check_scf_for(self, node: _Node, scope: _Scope, ctx: _RegionCtx) -> None:
        """P22: an scf.for inside a region carries iter_args and ends in scf.yield."""
        line = node.line
        c = _Cursor(line)
        results = c.results()
        carries: list[tuple[_Tok, _Tok]] = []
        types: list[_Tok] = []
        try:
            c.expect("scf.for")
            iv = c.need(_SSA_RE, "the induction variable")
            c.expect("=")
            lb = c.need(_SSA_RE, "the lower bound")
            c.expect("to")
            ub = c.need(_SSA_RE, "the upper bound")
            c.expect("step")
            step = c.need(_SSA_RE, "the step")
            has_iter = c.match(re.compile(r"iter_args\b")) is not None
            if has_iter:
                c.expect("(")
                while True:
                    carry = c.need(_SSA_RE, "a loop-carried value")
                    c.expect("=")
                    carries.append((carry, c.need(_SSA_RE, "its initial value")))
                    if not c.lit(","):
                        c.expect(")")
                        break
            if c.lit("->"):
                types = c.types() if c.lit("(") else [c.need(_TYPE_RE, "a result type")]
            bound_type = c.need(_TYPE_RE, "the bound type").text if c.lit(":") else "index"
            c.expect("{")
            c.end()
        except _Fail as f:
            self.report(22, line, f.col, f"malformed scf.for: {f.msg}")
            for r in results:
                scope.define(r.text, None)
            return
        for bound in (lb, ub, step):
            got = self.use(bound, line, scope)
            if not _same_type(got, "index") or bound_type != "index":
                self.report(
                    23,
                    line,
                    bound.col,
                    f"loop bounds are index, {bound.text} has type {got if got else bound_type}",
                )
        if not has_iter:
            self.report(
                22, line, line.col, "an scf.for inside a region carries its values in iter_args"
            )
        if len(carries) != len(types) or len(results) != len(types):
            self.report(
                22,
                line,
                line.col,
                f"scf.for has {len(carries)} iter_args, {len(types)} result type(s) and "
                f"{len(results)} result name(s)",
            )
        for i, (_, init) in enumerate(carries):
            got = self.use(init, line, scope)
            if i < len(types) and not _same_type(got, types[i].text):
                self.report(
                    23,
                    line,
                    init.col,
                    f"iter_args initial value {init.text} has type {got}, the loop carries "
                    f"{types[i].text}",
                )
        for mid in node.mids:
            self.report(22, mid, mid.col, "an scf.for has a single block")
        self.check_close(node, 22, "an scf.for")
        scope.push()
        self.define(iv, "index", line, scope)
        for i, (carry, _) in enumerate(carries):
            self.define(carry, types[i].text if i < len(types) else None, line, scope)
        end = node.mids[0] if node.mids else (node.close or node.last_line())
        self.check_block(node.body, [t.text for t in types], "scf.for", end, scope, ctx)
        scope.pop()
        for i, r in enumerate(results):
            self.define(r, types[i].text if i < len(types) else None, line, scope)

    def parse_call(self, line: _Line, rule: int) -> _Call | None:
        c = _Cursor(line)
        try:
            results = c.results()
            op = c.need(_IDENT_RE, "a call operation")
            callee = c.need(_SYM_RE, "the callee @symbol")
            args = c.values()
            c.expect(":", "before the call's type")
            ins, outs = c.fn_type()
            c.end()
        except _Fail as f:
            self.report(rule, line, f.col, f"malformed call: {f.msg}")
            return None
        return _Call(results, op, callee, args, ins, outs)

    def check_call_target(self, call: _Call, line: _Line) -> None:
        """P20: func.call @helper_double / llvm.call @extern_scale, as declared."""
        if call.op.text not in _CALLS:
            self.report(
                20,
                line,
                call.op.col,
                "calls are only func.call @helper_double and llvm.call @extern_scale, found "
                f"`{_show(call.op.text)}`",
            )
            return
        target, kind, decl = _CALLS[call.op.text]
        if call.callee.text != target:
            self.report(
                20,
                line,
                call.callee.col,
                f"{call.op.text} may only call {target}, found {_show(call.callee.text)}",
            )
            return
        if self.symbols.get(target) != kind:
            self.report(20, line, call.callee.col, f"{target} is not a module-level {decl}")
        if [t.text for t in call.ins] != ["i32"] or [t.text for t in call.outs] != ["i32"]:
            col = call.ins[0].col if call.ins else line.col
            self.report(20, line, col, f"the call's type must be {target}'s (i32) -> i32")
        if len(call.args) != len(call.ins):
            self.report(
                20,
                line,
                call.callee.col,
                f"{len(call.args)} operand(s) for {len(call.ins)} parameter type(s)",
            )
        if call.results and len(call.results) != len(call.outs):
            self.report(
                20,
                line,
                call.results[0].col,
                f"{len(call.results)} result name(s) for {len(call.outs)} result type(s)",
            )

    def check_region_call(self, line: _Line, scope: _Scope) -> None:
        call = self.parse_call(line, 20)
        if call is None:
            for r in _op(line)[0]:
                scope.define(r.text, None)
            return
        self.check_call_target(call, line)
        for i, arg in enumerate(call.args):
            got = self.use(arg, line, scope)
            if i < len(call.ins) and not _same_type(got, call.ins[i].text):
                self.report(
                    23,
                    line,
                    arg.col,
                    f"{arg.text} has type {got}, the call passes {_show(call.ins[i].text)}",
                )
        for t in call.ins + call.outs:
            self.check_type_text(t.text, line, t.col)
        for i, r in enumerate(call.results):
            self.define(r, call.outs[i].text if i < len(call.outs) else None, line, scope)

    def check_spatial_yield(self, node: _Node, outs: list[_Tok] | None, scope: _Scope) -> None:
        """P14: a generic yield, two segments summing to its operands, matching the results."""
        line = node.line
        c = _Cursor(line)
        try:
            col = c.col()
            if not c.lit('"loom.spatial_yield"'):
                c.expect("loom.spatial_yield")
                self.report(
                    14, line, col, 'the yield is in generic form: the quoted "loom.spatial_yield"'
                )
            values = c.values()
            col = c.col()
            c.expect("<{", "opening the yield's properties <{operandSegmentSizes = ...}>")
            props = self.check_dict(
                line, col, c.entries("}>"), ("operandSegmentSizes",), 14, "the yield's properties"
            )
            c.expect(":", "before the yield's type")
            ins, results = c.fn_type()
            c.end()
        except _Fail as f:
            self.report(14, line, f.col, f'malformed "loom.spatial_yield": {f.msg}')
            return
        if node.blocks:
            self.report(14, line, line.col, '"loom.spatial_yield" has no body')
        if results:
            self.report(14, line, results[0].col, "the yield's type returns nothing: `(...) -> ()`")
        if "operandSegmentSizes" in props:
            segs = self.segments(line, props["operandSegmentSizes"], 14)
            if segs is not None and (len(segs) != 2 or sum(segs) != len(values)):
                self.report(
                    14,
                    line,
                    props["operandSegmentSizes"].col,
                    "the yield's operandSegmentSizes must have two entries summing to its "
                    f"{len(values)} operand(s)",
                )
        if len(ins) != len(values):
            self.report(
                14,
                line,
                line.col,
                f"the yield has {len(values)} operand(s) but its type lists {len(ins)}",
            )
        if outs is not None and len(values) != len(outs):
            self.report(
                14,
                line,
                values[0].col if values else line.col,
                f"the yield yields {len(values)} value(s) but the region has {len(outs)} result(s)",
            )
        for i, v in enumerate(values):
            got = self.use(v, line, scope)
            want = outs[i].text if outs is not None and i < len(outs) else None
            listed = ins[i].text if i < len(ins) else None
            if (
                not _same_type(got, listed)
                or not _same_type(listed, want)
                or not _same_type(got, want)
            ):
                self.report(
                    14,
                    line,
                    v.col,
                    f"yielded {v.text} has type {got}, listed {listed}; the region's result type "
                    f"is {want}",
                )

    # ---- conventions ---------------------------------------------------------

    def check_conventions(self, tops: list[_Node]) -> None:
        if len(self.threads) > 2:
            self.report(
                "C1", self.threads[2].node.line, 1, "the default profile emits 1 or 2 threads"
            )
        counter = values = 0
        for t, th in enumerate(self.threads):
            if th.sym is not None and th.sym.text != f"@thread_{t}":
                self.report(
                    "C2",
                    th.node.line,
                    th.sym.col,
                    f"thread {t} is named @thread_{t}, found {th.sym.text}",
                )
            if not 1 <= len(th.sites) <= 2:
                self.report(
                    "C3",
                    th.node.line,
                    th.node.line.col,
                    f"a thread has 1 or 2 region sites, found {len(th.sites)}",
                )
            self.check_icall_convention(th)
            for site in th.sites:
                self.check_site_convention(site)
                for region in site.regions:
                    self.check_counter(region, counter, values)
                    self.check_form(region)
                    values += region.result is not None
                    counter += 1
        self.check_layout(tops)

    def check_icall_convention(self, th: _Thread) -> None:
        for n, (idx, node) in enumerate(th.calls):
            if n > 0:
                self.report("C6", node.line, node.line.col, "at most one top-level call per thread")
            elif idx != 3:
                self.report(
                    "C6",
                    node.line,
                    node.line.col,
                    "the top-level call stands right after the three index constants",
                )
            diff = _token_diff(node.line, _ICALL)
            if diff:
                self.report(
                    "C6", node.line, diff[0], f"the top-level call is `{_ICALL}`: {diff[1]}"
                )
            results = _op(node.line)[0]
            for r in results:
                for other in _walk(th.node.body):
                    if other is not node:
                        for ln in [other.line, *other.mids] + (
                            [other.close] if other.close else []
                        ):
                            for tok in _tokens(ln.code):
                                if tok.text == r.text:
                                    self.report(
                                        "C6",
                                        ln,
                                        tok.col,
                                        f"the top-level call's result {r.text} is never used",
                                    )

    def check_site_convention(self, site: _Site) -> None:
        if site.wrapper is None:
            return
        if site.iv is not None and site.iv.text != "%iv":
            self.report(
                "C19",
                site.wrapper.line,
                site.iv.col,
                f"a thread-level scf.for's induction variable is %iv, found {site.iv.text}",
            )
        if len(site.regions) != 1:
            self.report(
                "C7",
                site.wrapper.line,
                site.wrapper.line.col,
                f"a wrapper holds exactly one region site, found {len(site.regions)}",
            )
        for child in site.wrapper.body:
            if "loom.spatial_region" not in child.line.code:
                self.report(
                    "C7", child.line, child.line.col, "a wrapper holds its region and nothing else"
                )

    def check_counter(self, region: _Region, counter: int, values: int) -> None:
        """C4/C5: one module-wide counter names %rN and graph_N, once per site."""
        if region.graph is not None and region.graph.text != f'"graph_{counter}"':
            self.report(
                "C4",
                region.node.close or region.node.line,
                region.graph.col,
                f'region {counter} in emission order is named "graph_{counter}", found '
                f"{_show(region.graph.text)}",
            )
        if region.result is not None and region.result.text != f"%r{counter}":
            if region.result.text == f"%r{values}" and values != counter:
                self.report(
                    "C5",
                    region.node.line,
                    region.result.col,
                    "the counter advances for every site, also memory forms with no result: "
                    f"expected %r{counter}",
                )
            else:
                self.report(
                    "C4",
                    region.node.line,
                    region.result.col,
                    f"region {counter} in emission order binds %r{counter}, found "
                    f"{_show(region.result.text)}",
                )

    def check_form(self, region: _Region) -> None:
        """C8 (one of the six bodies, C9-C13 fix them) and C14 (their segments)."""
        node = region.node
        body = node.body
        end = node.close or node.last_line()
        best: tuple[tuple[int, int], str, tuple[_Line, int, str]] | None = None
        for name, tree in _FORM_TREES.items():
            diff = _match_list(body, tree, end)
            if diff is None:
                header, _, close = _FORMS[name]
                res = region.result.text if region.result else "%rN"
                graph = region.graph.text.strip('"') if region.graph else "graph_N"
                diff = _token_diff(node.line, header.replace("RES", res))
                if diff:
                    self.report(
                        "C14", node.line, diff[0], f"the {name} form's region header: {diff[1]}"
                    )
                if node.close:
                    diff = _token_diff(node.close, close.replace("GRAPH", graph))
                    if diff:
                        self.report(
                            "C14", node.close, diff[0], f"the {name} form's closing line: {diff[1]}"
                        )
                return
            key = (diff[0].no, diff[1])
            if best is None or key > best[0]:
                best = (key, name, diff)
        if best is not None:
            line, col, msg = best[2]
            self.report(
                "C8",
                line,
                col,
                f"the region body is none of the six forms (closest: {best[1]}): {msg}",
            )

    def check_layout(self, tops: list[_Node]) -> None:
        """C20: the canonical program's indentation and blank lines."""

        def at(line: _Line, want: int) -> None:
            lead = line.raw[: len(line.raw) - len(line.raw.lstrip())]
            if "\t" in lead:
                self.report("C20", line, 1, "indentation uses spaces, not tabs")
            elif len(lead) != want:
                self.report(
                    "C20",
                    line,
                    len(lead) + 1,
                    f"indented {len(lead)} columns, the canonical layout has {want}",
                )

        def visit(nodes: list[_Node], indent: int, in_region: bool) -> None:
            for i, node in enumerate(nodes):
                own = (
                    indent + 2
                    if in_region and not (i == 0 and node.line.code.strip().startswith("^"))
                    else indent
                )
                at(node.line, own)
                for ln in node.mids + ([node.close] if node.close else []):
                    at(ln, own)
                is_module = _op_name(node.line) == "module" and node is self.module
                for block in node.blocks:
                    visit(
                        block, 0 if is_module else own + 2, "loom.spatial_region" in node.line.code
                    )

        visit(tops, 0, False)
        end = self.module.close.no if self.module and self.module.close else len(self.lines)
        after_thread = {th.node.close.no + 1 for th in self.threads if th.node.close}
        for ln in self.lines[:end]:
            if not ln.raw.strip():
                if ln.no not in after_thread:
                    self.report(
                        "C20",
                        ln,
                        1,
                        "unexpected blank line: only each thread definition is followed by one",
                    )
            elif ln.raw != ln.raw.rstrip():
                self.report("C20", ln, len(ln.raw.rstrip()) + 1, "trailing whitespace")
        for th in self.threads:
            close = th.node.close
            if close is not None and (
                close.no >= len(self.lines) or self.lines[close.no].raw.strip()
            ):
                self.report(
                    "C20", close, close.end, "each thread definition is followed by a blank line"
                )
