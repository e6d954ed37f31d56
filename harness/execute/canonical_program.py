"""A P1-P24 program in its canonical rendering, read into what the exec rendering
rewrites: the module-level definitions other than threads (verbatim), and each
thread's lines, regions (block arguments, body, yield) and wrappers.

Text outside the canonical rendering of the contract raises
:class:`ExecRenderError` (one line, naming the line).  Argument and operand lists
are split by :func:`harness.brackets.split_top_level`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.brackets import split_top_level

__all__ = ["ExecRenderError", "Region", "Thread", "Wrapper", "read_program"]


class ExecRenderError(ValueError):
    """The text is not a P1-P24 program in the canonical rendering (one line)."""


@dataclass
class Region:
    graph_name: str
    result: str | None  # %rN
    result_count: int
    operands: list[str]
    args: list[tuple[str, str]]  # (name, type text)
    body: list[str]
    yielded: list[str]
    yield_types: list[str]


@dataclass
class Wrapper:
    header: str  # "scf.if %flag" or "scf.for %iv = %lo to %hi step %stp"
    regions: list[Region] = field(default_factory=list)


@dataclass
class Thread:
    symbol: str
    params: list[tuple[str, str]]
    lines: list = field(default_factory=list)  # str (kept as is), Region or Wrapper


_THREAD = re.compile(r"^\s*dataflow\.thread\s+(?:private\s+)?@([\w$.-]+)\s+domain\(.*?\)\s*\((.*?)\)"
                     r"\s*ctrl\s*\(.*?\)\s*\{\s*$")
_REGION = re.compile(r'^\s*(?:(%[\w$.-]+)(?::(\d+))?\s*=\s*)?"loom\.spatial_region"\((.*?)\)')
_BLOCK = re.compile(r"^\s*\^bb0\((.*?)\):\s*$")
_YIELD = re.compile(r'^\s*"loom\.spatial_yield"\((.*?)\).*?:\s*\((.*?)\)\s*->\s*\(\)\s*$')
_REGION_END = re.compile(r'^\s*\}\)\s*\{(.*)\}\s*:\s*\((.*?)\)\s*->\s*(.*?)\s*$')
_GRAPH_NAME = re.compile(r'graph_name\s*=\s*"((?:[^"\\]|\\.)*)"')
_WRAPPER = re.compile(r"^\s*(scf\.if\s+%[\w$.-]+|scf\.for\s+%[\w$.-]+\s*=\s*%[\w$.-]+\s+to\s+%[\w$.-]+"
                      r"\s+step\s+%[\w$.-]+)\s*\{\s*$")


def _typed(text: str) -> list[tuple[str, str]]:
    out = []
    for item in split_top_level(text):
        name, _, type_ = item.partition(":")
        out.append((name.strip(), type_.strip()))
    return out


class _Lines:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.at = 0

    def next(self) -> str:
        if self.at >= len(self.lines):
            raise ExecRenderError("the program ends inside a definition")
        self.at += 1
        return self.lines[self.at - 1]

    def fail(self, what: str) -> ExecRenderError:
        return ExecRenderError(f"line {self.at}: {what}: {self.lines[self.at - 1].strip()!r}")


def _region(lines: _Lines, first: str) -> Region:
    head = _REGION.match(first)
    block = _BLOCK.match(lines.next())
    if block is None:
        raise lines.fail("expected the region's ^bb0(...) line")
    body: list[str] = []
    while True:
        line = lines.next()
        yielded = _YIELD.match(line)
        if yielded:
            break
        body.append(line)
    end = _REGION_END.match(lines.next())
    if end is None:
        raise lines.fail("expected the region's end '}) {graph_name = ...} : type'")
    graph = _GRAPH_NAME.search(end.group(1))
    if graph is None:
        raise lines.fail("the region has no graph_name")
    return Region(graph_name=graph.group(1), result=head.group(1),
                  result_count=int(head.group(2) or (1 if head.group(1) else 0)),
                  operands=split_top_level(head.group(3)), args=_typed(block.group(1)), body=body,
                  yielded=split_top_level(yielded.group(1)), yield_types=split_top_level(yielded.group(2)))


def _thread(lines: _Lines, header: re.Match) -> Thread:
    thread = Thread(symbol=header.group(1), params=_typed(header.group(2)))
    while True:
        line = lines.next()
        stripped = line.strip()
        if stripped in ("dataflow.thread.yield", '"dataflow.thread.yield"() : () -> ()'):
            if lines.next().strip() != "}":
                raise lines.fail("expected '}' after dataflow.thread.yield")
            return thread
        if _REGION.match(line):
            thread.lines.append(_region(lines, line))
        elif (wrapper := _WRAPPER.match(line)):
            inner = Wrapper(header=re.sub(r"\s+", " ", wrapper.group(1)))
            while (line := lines.next()).strip() != "}":
                if not _REGION.match(line):
                    raise lines.fail("a wrapper holds only regions (P9, P10)")
                inner.regions.append(_region(lines, line))
            thread.lines.append(inner)
        elif stripped:
            thread.lines.append(stripped)


def read_program(text: str) -> tuple[list[str], list[Thread]]:
    """The module-level definitions other than threads (verbatim) and the threads."""
    lines = _Lines(text)
    preamble: list[str] = []
    threads: list[Thread] = []
    first = lines.next().strip() if lines.lines else ""
    while not first or first.startswith("//"):
        first = lines.next().strip()
    if first != "module {":
        raise lines.fail("expected 'module {'")
    depth = 0
    while True:
        line = lines.next()
        header = _THREAD.match(line)
        if header and depth == 0:
            threads.append(_thread(lines, header))
            continue
        if depth == 0 and line.strip() == "}":
            return preamble, threads
        if "dataflow.thread" in line or "loom.spatial" in line:
            raise lines.fail("not in the canonical rendering of a P1-P24 program")
        depth += line.count("{") - line.count("}")
        if line.strip():
            preamble.append(line)
