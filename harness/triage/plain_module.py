"""A triaged program without loom's shell: plain upstream MLIR, for an upstream report.

A bucket's program is a program of loom's grammar: ``dataflow.thread`` and
``loom.spatial_region`` generic operations (unregistered upstream) around
region bodies of upstream operations.  An MLIR maintainer wants none of that
where the bug does not need it.  The exec rendering
(:func:`harness.execute.exec_rendering.exec_module`) already turns every region
into a ``func.func @region_<graph>`` and every thread into a function calling
them, in upstream dialects only; this module takes it from there:

* :func:`plain_exec` renders a bucket's program (any of the grammar's
  renderings: :func:`harness.core.parse.parse` reads it back) in the exec
  rendering;
* :func:`module_items` / :func:`module_text` split a module into its top-level
  items (functions, declarations, globals) and join them again;
* :func:`reduce_items` deletes top-level items one at a time while a check
  (the bug still shows, the module still verifies) holds, to a fixpoint;
* :func:`call_once` is the program of one function and a ``main`` that calls
  it once with one input row and prints its results on one line (the values
  ``main`` of the exec rendering prints for that row, without the function
  number and the row).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from harness.core.compiled import CompiledGrammar
from harness.core.parse import parse
from harness.core.render import render
from harness.execute import inputs
from harness.execute.exec_layout import ExecFunction
from harness.execute.exec_main import row_inputs
from harness.execute.exec_rendering import exec_module

__all__ = ["Item", "call_once", "module_items", "module_text", "plain_exec", "reduce_items", "references"]

_SYMBOL = re.compile(r"^(?:func\.func|llvm\.func|memref\.global)\s+(?:(?:private|public|nested)\s+)?@([\w$.-]+)")
_REFERENCE = re.compile(r"@([\w$.-]+)")


@dataclass(frozen=True)
class Item:
    """One top-level operation of a module, as written."""

    symbol: str | None  # the symbol it defines (None: not a function or global)
    text: str  # its lines, each ending in a newline


def plain_exec(text: str, grammar: CompiledGrammar) -> str | None:
    """The exec rendering of a program of ``grammar`` written in any of its renderings
    (None: the text is no program of the grammar, e.g. text-reduced)."""
    parsed = parse(text, grammar)
    if parsed.tree is None:
        return None
    try:
        return exec_module(render(parsed.tree, grammar))
    except ValueError:  # ExecRenderError: not a P1-P24 program
        return None


def module_items(text: str) -> list[Item]:
    """The top-level items of a module printed as the exec rendering prints it (each item
    starts in column 0; a body ends with a ``}`` line in column 0); comment lines dropped."""
    lines = [line for line in text.splitlines(keepends=True) if not line.startswith("//")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].startswith("module"):
        lines = lines[1:]
        while lines and not lines[-1].strip():
            lines.pop()
        if lines and lines[-1].rstrip() == "}":
            lines.pop()
    items, current = [], []
    for line in lines:
        if not current and not line.strip():
            continue
        current.append(line if line.endswith("\n") else line + "\n")
        opened = current[0].rstrip().endswith("{")
        if not opened or line.rstrip() == "}":
            match = _SYMBOL.match(current[0])
            items.append(Item(match.group(1) if match else None, "".join(current)))
            current = []
    if current:
        raise ValueError(f"module: an item that does not end: {current[0].strip()!r}")
    return items


def module_text(items: Sequence[Item]) -> str:
    """The module of ``items``, in order."""
    return "module {\n" + "".join(item.text for item in items) + "}\n"


def references(item: Item) -> set[str]:
    """The symbols ``item`` refers to (its own left out)."""
    return set(_REFERENCE.findall(item.text)) - {item.symbol}


def reduce_items(items: Sequence[Item], keeps: Callable[[list[Item]], bool],
                 order: Callable[[Item], int] = lambda item: 0) -> list[Item]:
    """``items`` with every item deleted whose deletion ``keeps`` accepts, tried one at a
    time in ``order`` (stable) until no deletion is accepted."""
    kept = list(items)
    changed = True
    while changed and len(kept) > 1:
        changed = False
        for item in sorted(kept, key=order):
            candidate = [k for k in kept if k is not item]
            if candidate and keeps(candidate):
                kept, changed = candidate, True
    return kept


def _i32(value: object) -> str:
    return "true" if value is True else "false" if value is False else str(value)


def _without_unused_buffer(items: list[Item], function: ExecFunction, values: tuple) -> tuple:
    """The function without its memory argument when its body never names it (nothing to
    store, nothing to print): (items, function, values)."""
    if not function.takes_memory:
        return items, function, values
    at = next(k for k, i in enumerate(items) if i.symbol == function.symbol)
    lines = items[at].text.splitlines(keepends=True)
    header = re.match(r"(func\.func @[\w$.-]+\()(.*?)(\).*)$", lines[0], re.S)
    params = [p.strip() for p in header.group(2).split(",") if p.strip()]
    kept = [p for p in params if not p.partition(":")[2].strip().startswith("memref")]
    passed = [k for k in range(len(function.arg_types)) if k not in function.constant_args]
    if len(kept) != len(params) - 1 or len(passed) != len(params):
        return items, function, values
    name = next(p for p in params if p not in kept).partition(":")[0].strip()
    if re.search(re.escape(name) + r"\b", "".join(lines[1:])):
        return items, function, values
    k = function.arg_types.index("memref")
    smaller = replace(function, arg_types=function.arg_types[:k] + function.arg_types[k + 1:],
                      constant_args=tuple(c - (c > k) for c in function.constant_args))
    text = header.group(1) + ", ".join(kept) + header.group(3) + "".join(lines[1:])
    return (items[:at] + [Item(function.symbol, text)] + items[at + 1:], smaller,
            tuple(v for j, v in enumerate(values) if j != k))


def call_once(items: Sequence[Item], function: ExecFunction, row: int) -> tuple[str, bool]:
    """(a module of ``items`` (the function, what it calls), the print declarations and a
    ``main`` that calls ``function`` once with the inputs of ``row`` (as constants; a twin's
    constant arguments are in its body already) and prints its results, then the four
    memory cells where it takes the buffer, comma-separated on one line; whether the buffer
    was left out, its argument unused)."""
    values = row_inputs(function, row)
    memory = function.takes_memory
    items, function, values = _without_unused_buffer(list(items), function, values)
    header = next(i.text.splitlines()[0] for i in items if i.symbol == function.symbol)
    params = re.match(r"func\.func @[\w$.-]+\((.*?)\)", header).group(1)
    types = [p.partition(":")[2].strip() for p in params.split(",") if p.strip()]
    body = ["func.func @main() {\n"]
    args: list[str] = []
    passed = [v for k, v in enumerate(values) if k not in function.constant_args]
    for k, ((kind, value), type_) in enumerate(zip(passed, types)):
        if kind == "memref":
            body.append(f"  %buffer = memref.alloca() : {type_}\n")
            for cell, cell_value in enumerate(value):
                body += [f"  %i{cell} = arith.constant {cell} : index\n",
                         f"  %m{cell} = arith.constant {cell_value} : i32\n",
                         f"  memref.store %m{cell}, %buffer[%i{cell}] : {type_}\n"]
            args.append("%buffer")
        else:
            body.append(f"  %a{k} = arith.constant {_i32(value)}" + (" : i32\n" if kind == "i32" else "\n"))
            args.append(f"%a{k}")
    results = len(function.results)
    bind = "" if not results else ("%r = " if results == 1 else f"%r:{results} = ")
    body.append(f"  {bind}func.call @{function.symbol}({', '.join(args)}) : ({', '.join(types)}) -> "
                f"({', '.join(['i32'] * results)})\n")
    printed = ["%r"] if results == 1 else [f"%r#{k}" for k in range(results)]
    if function.takes_memory:
        body += [f"  %l{cell} = memref.load %buffer[%i{cell}] : memref<4xi32>\n"
                 for cell in range(inputs.MEMORY_CELLS)]
        printed += [f"%l{cell}" for cell in range(inputs.MEMORY_CELLS)]
    for n, value in enumerate(printed):
        if n:
            body.append("  func.call @printComma() : () -> ()\n")
        body += [f"  %p{n} = arith.extsi {value} : i32 to i64\n", f"  func.call @printI64(%p{n}) : (i64) -> ()\n"]
    body += ["  func.call @printNewline() : () -> ()\n", "  return\n}\n"]
    needed = ("printI64", "printNewline") + (("printComma",) if len(printed) > 1 else ())
    declarations = [Item(name, f"func.func private @{name}({'i64' if name == 'printI64' else ''})\n")
                    for name in needed if not any(i.symbol == name for i in items)]
    return module_text([*items, *declarations, Item("main", "".join(body))]), memory and not function.takes_memory
