"""The exec layout: what each line an exec module's ``main`` prints stands for
(function number, symbol, thread or region, argument kinds, results, a constant
twin's rows), recorded in the module's ``// loomfuzz-exec`` comments and read
back from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.execute import inputs
from harness.execute.canonical_program import ExecRenderError

__all__ = ["ExecFunction", "ExecLayout", "layout_line", "layout_of"]

_LAYOUT = "// loomfuzz-exec"


@dataclass(frozen=True)
class ExecFunction:
    """One function ``main`` calls: its number is its position in the layout."""

    symbol: str  # without @
    kind: str  # "thread" or "region"
    name: str  # the thread's symbol or the region's graph_name
    thread: str  # the thread it belongs to
    arg_types: tuple[str, ...]  # "i32", "i1" or "memref"
    results: tuple[str, ...]  # one name per printed result (%icall, %r0, %r1#0, ...)
    #: a constant twin's (harness.execute.twins): the function it twins, its rows, and the
    #: argument positions that are compile-time constants there
    twin_of: str = ""
    rows: tuple[int, ...] = ()  # () : every row of the table
    constant_args: tuple[int, ...] = ()

    @property
    def takes_memory(self) -> bool:
        return "memref" in self.arg_types


@dataclass(frozen=True)
class ExecLayout:
    """What each printed line of an exec module's ``main`` stands for."""

    functions: tuple[ExecFunction, ...]
    rows: int = inputs.ROWS

    @property
    def lines(self) -> int:
        return sum(len(f.rows) if f.rows else self.rows for f in self.functions)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def layout_line(number: int, f: ExecFunction) -> str:
    """The ``// loomfuzz-exec`` comment that records one function of the layout."""
    twin = (f" twin=@{f.twin_of} rows={','.join(map(str, f.rows))} "
            f"constants={','.join(map(str, f.constant_args))}" if f.twin_of else "")
    return (f"{_LAYOUT} {number} @{f.symbol} {f.kind} {_quote(f.name)} {_quote(f.thread)} "
            f"args={','.join(f.arg_types)} results={','.join(f.results)}{twin}\n")


_LAYOUT_LINE = re.compile(rf'^{_LAYOUT} (\d+) @(\S+) (thread|region) "((?:[^"\\]|\\.)*)" '
                          r'"((?:[^"\\]|\\.)*)" args=(\S*) results=(\S*)'
                          r'(?: twin=@(\S+) rows=(\S*) constants=(\S*))?$', re.M)


def layout_of(exec_text: str) -> ExecLayout:
    """The layout an exec module's ``// loomfuzz-exec`` comments record."""
    functions = []
    for match in _LAYOUT_LINE.finditer(exec_text):
        number, symbol, kind, name, thread, args, results, twin_of, rows, constants = match.groups()
        if int(number) != len(functions):
            raise ExecRenderError(f"exec layout: function {number} out of order")
        unquote = lambda s: re.sub(r"\\(.)", r"\1", s)  # noqa: E731
        functions.append(ExecFunction(symbol, kind, unquote(name), unquote(thread),
                                      tuple(a for a in args.split(",") if a),
                                      tuple(r for r in results.split(",") if r), twin_of or "",
                                      tuple(int(r) for r in (rows or "").split(",") if r),
                                      tuple(int(c) for c in (constants or "").split(",") if c)))
    if not functions:
        raise ExecRenderError("not an exec module: no '// loomfuzz-exec' layout comments")
    return ExecLayout(tuple(functions))
