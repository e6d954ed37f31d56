"""The walk's shared state, its report, and the judgements every level uses
(closing braces, attribute dictionaries, segment sizes, type widths)."""

from __future__ import annotations

import re

from .records import Region, Thread
from .text import Line, Token, parse_segments, show, split_lines, token_diff
from .tree import Node
from .violation import Violation


_INT_WIDTH_RE = re.compile(r"\b[su]?i(\d+)\b")
_FLOAT_RE = re.compile(r"\b(?:bf16|tf32|f\d+|f8E\w+)\b")


class CheckerState:
    """The state of one walk over one program; the checker's layers extend it."""

    def __init__(self, text: str, conventions: bool) -> None:
        self.conventions = conventions
        self.lines = split_lines(text)
        self.found: set[Violation] = set()
        self.module: Node | None = None
        self.symbols: dict[str, str] = {}  # module-level @name -> "func" | "llvm"
        self.threads: list[Thread] = []
        self.regions: list[Region] = []
        self.processed: set[int] = set()  # id() of regions checked where they stand
        self.thread_names: set[str] = set()  # every SSA name bound at thread level

    def report(self, rule: int | str, line: Line, col: int, msg: str) -> None:
        tag = f"P{rule}" if isinstance(rule, int) else rule
        self.found.add(Violation(tag, max(line.no, 1), max(col, 1), msg))

    def check_close(self, node: Node, rule: int, what: str) -> None:
        """A block that is not a region closes with a lone `}`."""
        if node.close is not None:
            diff = token_diff(node.close, "}")
            if diff:
                self.report(rule, node.close, diff[0], f"{what} closes with a lone `}}`: {diff[1]}")

    def check_dict(
        self,
        line: Line,
        col: int,
        entries: list[tuple[Token, Token | None]],
        keys: tuple[str, ...],
        rule: int,
        what: str,
    ) -> dict[str, Token]:
        """Exactly ``keys``, each with a value; returns key -> value."""
        out: dict[str, Token] = {}
        for key, value in entries:
            if key.text in out:
                self.report(rule, line, key.col, f"{what}: duplicate entry {show(key.text)}")
            elif key.text not in keys:
                self.report(
                    rule,
                    line,
                    key.col,
                    f"{what} hold exactly {', '.join(keys)}: unexpected {show(key.text)}",
                )
            elif value is None:
                self.report(rule, line, key.col, f"{what}: {key.text} has no value")
            else:
                out[key.text] = value
        for key in keys:
            if key not in out and not any(k.text == key for k, _ in entries):
                self.report(rule, line, col, f"{what} lack {key}")
        return out

    def read_segments(self, line: Line, value: Token, rule: int) -> list[int] | None:
        segs = parse_segments(value.text)
        if segs is None:
            self.report(
                rule,
                line,
                value.col,
                f"segment sizes are written `array<i32: ...>`, found `{show(value.text)}`",
            )
        return segs

    def check_type_text(self, ty: str, line: Line, col: int) -> bool:
        spaced = re.sub(r"(?<=\d)x", " ", ty)
        bad = [
            w for w in _INT_WIDTH_RE.findall(spaced) if w not in ("32", "1")
        ] or _FLOAT_RE.findall(spaced)
        if bad:
            self.report(
                23,
                line,
                col,
                f"type `{show(ty)}`: all integers are i32 (i1 only for %flag/%c), no other types",
            )
        return not bad
