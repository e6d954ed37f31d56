"""The brace tree: lines grouped into operations and blocks, and template matching.

One operation per line, a trailing ``{`` opens a block, a leading ``}`` closes
it.  The spec's fixed texts are parsed into the same tree, so comparing a
program against them is a walk over two trees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .text import Line, collapse_spaces, show, split_lines, token_diff


_MAX_DEPTH = 64  # far deeper than any program in the shape; guards against junk


@dataclass(eq=False)
class Node:
    """An operation line; with blocks if it opens ``{`` (``mids`` are ``} else {`` lines)."""

    line: Line
    blocks: list[list[Node]] = field(default_factory=list)
    mids: list[Line] = field(default_factory=list)
    close: Line | None = None

    @property
    def body(self) -> list[Node]:
        return self.blocks[0] if self.blocks else []

    def last_line(self) -> Line:
        if self.close:
            return self.close
        for block in reversed(self.blocks):
            if block:
                return block[-1].last_line()
        return self.mids[-1] if self.mids else self.line


Report = Callable[[int, Line, int, str], None]


def build_tree(lines: list[Line], report: Report | None = None) -> list[Node]:
    """Group lines into operations and blocks by their braces.

    Brace structure errors break the module itself, so they are P1.
    """

    def say(line: Line, col: int, msg: str) -> None:
        if report:
            report(1, line, col, msg)

    root = Node(Line(0, "", "", ""), [[]])
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
        node = Node(ln)
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


def template_tree(text: str) -> list[Node]:
    return build_tree(split_lines(text))


def match_list(got: list[Node], want: list[Node], end: Line) -> tuple[Line, int, str] | None:
    """First difference between two operation lists (``end``: where missing lines go)."""
    for a, e in zip(got, want):
        diff = match_node(a, e)
        if diff:
            return diff
    if len(got) > len(want):
        extra = got[len(want)].line
        return extra, extra.col, f"unexpected line `{show(collapse_spaces(extra.code), 120)}`"
    if len(got) < len(want):
        missing = show(collapse_spaces(want[len(got)].line.code), 120)
        return end, end.col, f"missing line `{missing}`"
    return None


def match_node(a: Node, e: Node) -> tuple[Line, int, str] | None:
    """First difference between an operation and a template operation."""
    diff = token_diff(a.line, e.line.code)
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
            diff = token_diff(a.mids[i - 1], e.mids[i - 1].code)
            if diff:
                return a.mids[i - 1], diff[0], diff[1]
        end = a.mids[i] if i < len(a.mids) else (a.close or a.last_line())
        found = match_list(ab, eb, end)
        if found:
            return found
    if a.close is not None and e.close is not None:
        diff = token_diff(a.close, e.close.code)
        if diff:
            return a.close, diff[0], diff[1]
    return None


def holds_region(node: Node) -> bool:
    if "loom.spatial_region" in node.line.code:
        return True
    return any(holds_region(child) for block in node.blocks for child in block)


def walk_nodes(nodes: list[Node]) -> Iterator[Node]:
    for node in nodes:
        yield node
        for block in node.blocks:
            yield from walk_nodes(block)
