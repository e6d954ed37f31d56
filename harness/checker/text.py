"""Program text as the checker reads it: lines, comments, tokens, a cursor.

Everything here works on one line at a time, because the canonical rendering
puts one operation on each line; the brace tree (tree.py) groups the lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple


_SSA = r"%[A-Za-z0-9_$.\-]+"
SSA_RE = re.compile(_SSA)
SYMBOL_RE = re.compile(r"@[A-Za-z0-9_$.\-]+")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_KEY_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_$.]*|"(?:[^"\\]|\\.)*"')
LABEL_RE = re.compile(r"\^[A-Za-z0-9_$.\-]+")
TYPE_RE = re.compile(r"!?[A-Za-z_][A-Za-z0-9_.]*(?:<(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*>)?")
_OPNAME_RE = re.compile(r'"[^"]*"|[A-Za-z_][A-Za-z0-9_$.]*')
_RESULTS_RE = re.compile(rf"\s*({_SSA}(?::\d+)?(?:\s*,\s*{_SSA}(?::\d+)?)*)\s*=(?!=)")
_TOKEN_RE = re.compile(
    r'"(?:[^"\\]|\\.)*"?|->|[%@^#!][A-Za-z0-9_$.\-]*|[A-Za-z_][A-Za-z0-9_$.]*|\d+|\S'
)
_SEGMENTS_RE = re.compile(r"array\s*<\s*i32\s*(?::\s*(-?\d+(?:\s*,\s*-?\d+)*))?\s*>")


def show(text: str, limit: int = 60) -> str:
    """User text inside a one-line message: escaped, shortened."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def collapse_spaces(text: str) -> str:
    return " ".join(text.split())


def same_type(a: str | None, b: str | None) -> bool:
    return a is None or b is None or re.sub(r"\s+", "", a) == re.sub(r"\s+", "", b)


class Token(NamedTuple):
    text: str
    col: int  # 1-based


@dataclass(eq=False)
class Line:
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


def split_lines(text: str) -> list[Line]:
    lines = []
    for no, raw in enumerate(text.split("\n"), 1):
        if raw.endswith("\r"):
            raw = raw[:-1]
        code, bare = _strip_comment(raw)
        lines.append(Line(no, raw, code.rstrip(), bare.rstrip()))
    return lines


def _strip_comment(raw: str) -> tuple[str, str]:
    """Drop a // comment outside strings; also blank the strings' insides."""
    if '"' not in raw:  # most lines: no string to skip, the first // starts the comment
        cut = raw.find("//")
        code = raw if cut < 0 else raw[:cut]
        return code, code
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


def tokenize(code: str) -> list[Token]:
    return [Token(m.group(), m.start() + 1) for m in _TOKEN_RE.finditer(code)]


def token_diff(line: Line, expected: str) -> tuple[int, str] | None:
    """First token where ``line`` differs from ``expected``: (column, message)."""
    got, want = tokenize(line.code), tokenize(expected)
    shown = show(collapse_spaces(expected), 120)
    for i, w in enumerate(want):
        if i >= len(got):
            return line.end, f"line ends where `{shown}` continues with '{show(w.text)}'"
        if got[i].text != w.text:
            return got[i].col, f"found '{show(got[i].text)}' where `{shown}` has '{show(w.text)}'"
    if len(got) > len(want):
        return got[len(want)].col, f"unexpected '{show(got[len(want)].text)}' after `{shown}`"
    return None


def op_head(line: Line) -> tuple[list[Token], Token | None, int]:
    """(result names, operation name, offset after the name) of an op line."""
    code, pos, results = line.code, 0, []
    m = _RESULTS_RE.match(code)
    if m:
        results = [
            Token(r.group(), m.start(1) + r.start() + 1) for r in SSA_RE.finditer(m.group(1))
        ]
        pos = m.end()
    while pos < len(code) and code[pos].isspace():
        pos += 1
    m2 = _OPNAME_RE.match(code, pos)
    if not m2:
        return results, None, pos
    return results, Token(m2.group(), m2.start() + 1), m2.end()


def op_name(line: Line) -> str:
    _, op, _ = op_head(line)
    return op.text.strip('"') if op else ""


def parse_segments(value: str) -> list[int] | None:
    m = _SEGMENTS_RE.fullmatch(value.strip())
    if not m:
        return None
    return [int(x) for x in m.group(1).split(",")] if m.group(1) else []


class ParseFailure(Exception):
    """A parse error inside one line: where, and what was expected."""

    def __init__(self, col: int, msg: str) -> None:
        super().__init__(msg)
        self.col, self.msg = col, msg


class Cursor:
    """A left-to-right reader over one line's code; columns are 1-based."""

    def __init__(self, line: Line, pos: int = 0) -> None:
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
            f"'{show(self.s[self.i:self.i + 16])}'"
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
            raise ParseFailure(
                self.col(), f"expected '{text}'{' ' + what if what else ''}, found {self.peek()}"
            )

    def match(self, regex: re.Pattern[str]) -> Token | None:
        self._ws()
        m = regex.match(self.s, self.i)
        if not m:
            return None
        self.i = m.end()
        return Token(m.group(), m.start() + 1)

    def need(self, regex: re.Pattern[str], what: str) -> Token:
        tok = self.match(regex)
        if tok is None:
            raise ParseFailure(self.col(), f"expected {what}, found {self.peek()}")
        return tok

    def end(self) -> None:
        self._ws()
        if self.i < len(self.s):
            raise ParseFailure(self.col(), f"unexpected {self.peek()}")

    def results(self) -> list[Token]:
        """``%a, %b =`` at the cursor (consumed), or [] (nothing consumed)."""
        m = _RESULTS_RE.match(self.s, self.i)
        if not m:
            return []
        self.i = m.end()
        return [Token(r.group(), m.start(1) + r.start() + 1) for r in SSA_RE.finditer(m.group(1))]

    def values(self) -> list[Token]:
        """``(%a, %b)``."""
        self.expect("(")
        out: list[Token] = []
        if self.lit(")"):
            return out
        while True:
            out.append(self.need(SSA_RE, "an SSA value"))
            if not self.lit(","):
                self.expect(")")
                return out

    def types(self, close: str = ")") -> list[Token]:
        """A type list after its opening parenthesis."""
        out: list[Token] = []
        if self.lit(close):
            return out
        while True:
            out.append(self.need(TYPE_RE, "a type"))
            if not self.lit(","):
                self.expect(close)
                return out

    def fn_type(self) -> tuple[list[Token], list[Token]]:
        """``(T, ...) -> T`` or ``(T, ...) -> (T, ...)``."""
        self.expect("(", "opening a functional type")
        ins = self.types()
        self.expect("->")
        outs = self.types() if self.lit("(") else [self.need(TYPE_RE, "a result type")]
        return ins, outs

    def value(self) -> Token:
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
            raise ParseFailure(start + 1, f"expected an attribute value, found {self.peek()}")
        return Token(text, start + 1)

    def entries(self, close: str) -> list[tuple[Token, Token | None]]:
        """Dictionary entries after the opening bracket, through ``close``."""
        out: list[tuple[Token, Token | None]] = []
        if self.lit(close):
            return out
        while True:
            key = self.need(_KEY_RE, "an attribute name")
            out.append((key, self.value() if self.lit("=") else None))
            if not self.lit(","):
                self.expect(close)
                return out
