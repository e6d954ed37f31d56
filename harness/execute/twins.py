"""Constant twins: an exec module whose functions also run with their inputs known at compile time.

In the exec rendering (:mod:`harness.execute.exec_rendering`) every input reaches
a function at run time, loaded from public globals, so no folder and no range
analysis ever sees an edge value (INT_MIN, -1, 0, INT_MAX ...) as a constant.
A *twin* of a function is the same function for one row of the input table
with some or all of its ``i32``/``i1`` arguments defined in its body by
``arith.constant`` (and, when all are, the buffer's four cells stored from
constants at its entry): the optimizer can fold what execution computes.

A :class:`TwinPlan` says which rows and which arguments: one :class:`TwinRow`
(row, mask) per twin of every function; argument ``k`` (counting ``i32`` and
``i1`` arguments) is a constant when bit ``k % 8`` of the mask is set, and a
mask of ``0xff`` makes every argument and the memory constant.  ``main`` calls
every twin once after the original calls and prints its line exactly as the
original's line for that row (the twin's own function number, the row, the
results, the cells), so a twin's expected values are the original program's
values for that row (:func:`expected_output`), and the differential judge
compares a module with twins like any other.  The layout comments name each
twin (``twin=@original rows=R constants=K,...``), so :func:`plan_of` reads the
plan back from an exec text (triage keeps a finding's plan while it minimizes).

The plan of a program is drawn from its text (:func:`plan_for`), so the same
program always gets the same twins: the first row from the rows of edge values
with everything constant, the others from the whole table with a partial mask.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from harness.execute import inputs
from harness.execute.canonical_program import ExecRenderError
from harness.execute.exec_layout import ExecFunction, ExecLayout, layout_line, layout_of
from harness.execute.exec_main import print_line, row_inputs

__all__ = ["ALL", "DEFAULT_TWINS", "EDGE_ROWS", "TwinPlan", "TwinRow", "expected_output", "plan_for", "plan_of",
           "sampled", "with_twins"]

#: The share of programs the differential oracle judges with twins by default (each twin
#: adds a copy of every function: about a quarter more work in all).
DEFAULT_TWINS = 0.25
#: The mask that makes every argument and the memory a compile-time constant.
ALL = 0xFF
#: The rows whose i32 values are the edge values 0, 1, -1, 7, INT_MIN, INT_MAX (rotated).
EDGE_ROWS = 12


@dataclass(frozen=True)
class TwinRow:
    """One twin of every function: the row its constants come from, and which are constant."""

    row: int
    mask: int = ALL

    def __post_init__(self) -> None:
        if not 0 <= self.row < inputs.ROWS or not 0 < self.mask <= ALL:
            raise ValueError(f"a twin row is 0..{inputs.ROWS - 1} with a mask 1..ff, not {self.text()}")

    def constant(self, k: int) -> bool:
        """Whether the ``k``-th scalar argument is a compile-time constant."""
        return bool(self.mask >> (k % 8) & 1)

    def text(self) -> str:
        return f"{self.row}:{self.mask:02x}"


@dataclass(frozen=True)
class TwinPlan:
    rows: tuple[TwinRow, ...]

    def text(self) -> str:
        """``8:ff,3:05``: what the finding's record and the triage database keep."""
        return ",".join(r.text() for r in self.rows)

    @classmethod
    def parse(cls, text: str) -> "TwinPlan":
        """The plan :meth:`text` wrote; ``ValueError`` (one line) for anything else."""
        rows = []
        for item in text.split(","):
            row, sep, mask = item.strip().partition(":")
            if not sep or not row.isdigit():
                raise ValueError(f"a twin plan is ROW:MASK,... (mask in hex), not {text!r}")
            rows.append(TwinRow(int(row), int(mask, 16)))
        return cls(tuple(rows))


def sampled(canonical: str, share: float) -> bool:
    """Whether the program is one of the ``share`` that get twins (a function of its text)."""
    if share <= 0:
        return False
    digest = hashlib.blake2b(canonical.encode(), digest_size=8, person=b"twins-share").digest()
    return int.from_bytes(digest, "big") / 2 ** 64 < share


def plan_for(canonical: str, rows: int = 2) -> TwinPlan:
    """The program's twins, drawn from its text: the same program, the same plan."""
    rng = random.Random(hashlib.sha256(canonical.encode()).digest())
    plan = [TwinRow(rng.randrange(EDGE_ROWS), ALL)]
    while len(plan) < rows:
        plan.append(TwinRow(rng.randrange(inputs.ROWS), rng.randrange(1, ALL)))
    return TwinPlan(tuple(plan))


# ------------------------------------------------------------------ writing the twins

_HEADER = re.compile(r"^func\.func @([\w$.-]+)\((.*?)\)(.*)\{$")


def _function_text(exec_text: str, symbol: str) -> str:
    match = re.search(rf"^func\.func @{re.escape(symbol)}\(.*?^\}}\n", exec_text, re.M | re.S)
    if match is None:
        raise ExecRenderError(f"exec module: no function @{symbol} to twin")
    return match.group(0)


def _constant(kind: str, value: int) -> str:
    return ("true" if value else "false") if kind == "i1" else f"{value} : i32"


def _constants(function: ExecFunction, twin: TwinRow) -> tuple[int, ...]:
    """The argument positions that are compile-time constants in this twin."""
    scalars = [k for k, kind in enumerate(function.arg_types) if kind != "memref"]
    return tuple(k for n, k in enumerate(scalars) if twin.constant(n))


def _twin_function(text: str, symbol: str, function: ExecFunction, twin: TwinRow,
                   constant: tuple[int, ...]) -> str:
    lines = text.splitlines(keepends=True)
    header = _HEADER.match(lines[0].rstrip("\n"))
    if header is None:
        raise ExecRenderError(f"exec module: @{function.symbol}'s header is not 'func.func @f(...) {{'")
    params = [p.strip() for p in header.group(2).split(",") if p.strip()]
    if len(params) != len(function.arg_types):
        raise ExecRenderError(f"exec module: @{function.symbol} takes {len(params)} arguments, its layout "
                              f"says {len(function.arg_types)}")
    values = [value for _, value in row_inputs(function, twin.row)]
    body = []
    for k in constant:
        name = params[k].partition(":")[0].strip()
        body.append(f"  {name} = arith.constant {_constant(function.arg_types[k], values[k])}\n")
    if twin.mask == ALL and function.takes_memory:  # the cells main stored: known here too
        buffer = params[function.arg_types.index("memref")].partition(":")[0].strip()
        for cell, value in enumerate(inputs.MEMORY[twin.row]):
            body += [f"  %twin_i{cell} = arith.constant {cell} : index\n",
                     f"  %twin_m{cell} = arith.constant {value} : i32\n",
                     f"  memref.store %twin_m{cell}, {buffer}[%twin_i{cell}] : memref<4xi32>\n"]
    kept = ", ".join(p for k, p in enumerate(params) if k not in constant)
    head = f"func.func @{symbol}({kept}){header.group(3)}{{\n"
    return head + "".join(body) + "".join(lines[1:])


_TABLE = f"memref<{inputs.ROWS}x{inputs.COLUMNS + inputs.MEMORY_CELLS}xi32>"
_FLAGS = f"memref<{inputs.ROWS}x{inputs.COLUMNS}xi1>"


def _twin_call(number: int, twin_fn: ExecFunction, function: ExecFunction, types: list[str],
               constant: tuple[int, ...], row: int) -> str:
    """``main``'s call of one twin and its printed line (the original's line for ``row``)."""
    p = f"%t{number}_"
    out = [f"  // {number}: @{twin_fn.symbol} (twin of @{function.symbol}, row {row})\n",
           f"  {p}row = arith.constant {row} : index\n"]
    if function.takes_memory:
        for cell, value in enumerate(inputs.MEMORY[row]):
            out += [f"  {p}m{cell} = arith.constant {value} : i32\n",
                    f"  memref.store {p}m{cell}, %buffer[%col{cell}] : memref<4xi32>\n"]
    args, arg_types, i32s, flags = [], [], 0, 0
    for k, kind in enumerate(function.arg_types):
        column = None
        if kind == "i32":
            column, table, i32s = i32s % inputs.COLUMNS, ("%table", _TABLE), i32s + 1
        elif kind == "i1":
            column, table, flags = flags % inputs.COLUMNS, ("%flags", _FLAGS), flags + 1
        if k in constant:
            continue
        if kind == "memref":
            args.append("%buffer")
        else:
            out.append(f"  {p}a{k} = memref.load {table[0]}[{p}row, %col{column}] : {table[1]}\n")
            args.append(f"{p}a{k}")
        arg_types.append(types[k])
    results = len(function.results)
    bind = "" if not results else (f"{p}res = " if results == 1 else f"{p}res:{results} = ")
    out.append(f"  {bind}func.call @{twin_fn.symbol}({', '.join(args)}) : ({', '.join(arg_types)}) -> "
               f"({', '.join(['i32'] * results)})\n")
    out.append(f"  {p}id = arith.constant {number} : i64\n")
    values = [f"{p}res"] if results == 1 else [f"{p}res#{k}" for k in range(results)]
    if function.takes_memory:
        out += [f"  {p}l{cell} = memref.load %buffer[%col{cell}] : memref<4xi32>\n"
                for cell in range(inputs.MEMORY_CELLS)]
        values += [f"{p}l{cell}" for cell in range(inputs.MEMORY_CELLS)]
    out.append(print_line(f"{p}id", f"{p}row", values, "  "))
    return "".join(out)


_MAIN_END = "  return\n}\n}\n"


def with_twins(exec_text: str, plan: TwinPlan) -> str:
    """The exec module with a twin of every function per row of ``plan`` (see the module
    docstring).  Raises :class:`ExecRenderError` (one line) for a text that is not an exec
    module or already has twins."""
    layout = layout_of(exec_text)
    if any(f.twin_of for f in layout.functions):
        raise ExecRenderError("exec module: it has twins already")
    if not exec_text.endswith(_MAIN_END):
        raise ExecRenderError("exec module: it does not end with main's return")
    taken = set(re.findall(r"^func\.func @([\w$.-]+)", exec_text, re.M))
    comments, functions, calls = [], [], []
    number = len(layout.functions)
    for t, twin in enumerate(plan.rows):
        for function in layout.functions:
            text = _function_text(exec_text, function.symbol)
            types = [p.partition(":")[2].strip() for p in
                     _HEADER.match(text.splitlines()[0]).group(2).split(",") if p.strip()]
            symbol = f"{function.symbol}__twin{t}"
            while symbol in taken:
                symbol += "_"
            taken.add(symbol)
            constant = _constants(function, twin)
            twin_fn = ExecFunction(symbol, function.kind, function.name, function.thread, function.arg_types,
                                   function.results, twin_of=function.symbol, rows=(twin.row,),
                                   constant_args=constant)
            comments.append(layout_line(number, twin_fn))
            functions.append(_twin_function(text, symbol, function, twin, constant))
            calls.append(_twin_call(number, twin_fn, function, types, constant, twin.row))
            number += 1
    head, sep, rest = exec_text.partition("module {\n")
    body = rest[:-len(_MAIN_END)]
    main_at = body.rindex("func.func @main() {\n")
    plan_line = f"// loomfuzz-exec twins {plan.text()}\n"
    return (head + plan_line + "".join(comments) + sep + body[:main_at] + "".join(functions) + body[main_at:]
            + "".join(calls) + _MAIN_END)


_PLAN = re.compile(r"^// loomfuzz-exec twins (\S+)$", re.M)


def plan_of(exec_text: str) -> TwinPlan | None:
    """The plan an exec module's twins were written with (None: it has none)."""
    match = _PLAN.search(exec_text)
    return TwinPlan.parse(match.group(1)) if match else None


def expected_output(layout: ExecLayout, base_output: str) -> str:
    """The output of a module with twins, from its original's output (a twin prints the
    original's line for its row under its own number)."""
    lines = base_output.splitlines()
    originals = [f for f in layout.functions if not f.twin_of]
    number_of = {f.symbol: n for n, f in enumerate(layout.functions)}
    out = list(lines)
    for function in layout.functions[len(originals):]:
        row = function.rows[0]
        index = number_of[function.twin_of] * layout.rows + row
        if index >= len(lines):
            raise ValueError(f"the original output has {len(lines)} lines, the layout more")
        fields = lines[index].split(",", 2)
        out.append(",".join([str(number_of[function.symbol]), *fields[1:]]))
    return "\n".join(out) + ("\n" if out else "")
