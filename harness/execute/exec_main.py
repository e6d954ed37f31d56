"""The exec module's ``main`` over the input table (``harness.execute.inputs``):
the table as public mutable globals, then per function of the layout a loop over
the rows that loads its arguments, calls it and prints one line (function
number, row, every result, the four memory cells if it takes the buffer).

:func:`row_inputs` says what ``main`` passes a function in a row (a difference's
inputs, a constant twin's constants).
"""

from __future__ import annotations

from harness.execute import inputs
from harness.execute.exec_layout import ExecFunction

__all__ = ["main_function", "row_inputs", "table_globals"]

#: The i32 table's columns: i32 arguments, then memory cells; flags have a table of i1.
_WIDTH = inputs.COLUMNS + inputs.MEMORY_CELLS
_TABLE = f"memref<{inputs.ROWS}x{_WIDTH}xi32>"
_FLAGS = f"memref<{inputs.ROWS}x{inputs.COLUMNS}xi1>"


def row_inputs(function: ExecFunction, row: int) -> tuple[tuple[str, object], ...]:
    """What ``main`` passes ``function`` in ``row``: (argument kind, value) per argument, the
    buffer's cells for a memref (harness.execute.inputs)."""
    out, i32s, flags = [], 0, 0
    for kind in function.arg_types:
        if kind == "i32":
            out.append((kind, inputs.I32[row][i32s % inputs.COLUMNS]))
            i32s += 1
        elif kind == "i1":
            out.append((kind, inputs.FLAGS[row][flags % inputs.COLUMNS]))
            flags += 1
        else:
            out.append((kind, list(inputs.MEMORY[row])))
    return tuple(out)


def table_globals() -> str:
    """``@exec_table`` and ``@exec_flags``: the input table as public, mutable globals.  Code
    outside the module may write them before ``main`` runs, so no optimizer may take their
    initial values as known.  Flags are ``i1`` cells, so an argument is always one load."""
    rows = ", ".join("[" + ", ".join(str(v) for v in (*inputs.I32[r], *inputs.MEMORY[r])) + "]"
                     for r in range(inputs.ROWS))
    flags = ", ".join("[" + ", ".join("true" if v else "false" for v in inputs.FLAGS[r]) + "]"
                      for r in range(inputs.ROWS))
    return (f"memref.global @exec_table : {_TABLE} = dense<[{rows}]>\n"
            f"memref.global @exec_flags : {_FLAGS} = dense<[{flags}]>\n")


def main_function(functions: list[tuple[ExecFunction, list[str]]]) -> str:
    """``func.func @main``: each function (with its argument type texts), in layout order,
    called once per row of the table and its results printed."""
    table = _TABLE
    out = [
        "func.func @main() {\n",
        "  %zero = arith.constant 0 : index\n",
        "  %one = arith.constant 1 : index\n",
        f"  %rows = arith.constant {inputs.ROWS} : index\n",
        f"  %flags = memref.get_global @exec_flags : {_FLAGS}\n",
        f"  %table = memref.get_global @exec_table : {table}\n",
        "  %buffer = memref.alloca() : memref<4xi32>\n",
    ]
    out += [f"  %col{c} = arith.constant {c} : index\n" for c in range(_WIDTH)]
    memory_column = inputs.COLUMNS

    def print_value(value: str, n: int, comma: bool = True) -> list[str]:
        return [f"    %p{n} = arith.extsi {value} : i32 to i64\n",
                f"    func.call @printI64(%p{n}) : (i64) -> ()\n"] + (
            ["    func.call @printComma() : () -> ()\n"] if comma else [])

    for number, (function, types) in enumerate(functions):
        out.append(f"  // {number}: @{function.symbol}\n")
        out.append("  scf.for %row = %zero to %rows step %one {\n")
        if function.takes_memory:
            for cell in range(inputs.MEMORY_CELLS):
                out.append(f"    %m{cell} = memref.load %table[%row, %col{memory_column + cell}] : {table}\n")
                out.append(f"    memref.store %m{cell}, %buffer[%col{cell}] : memref<4xi32>\n")
        args, i32s, flags = [], 0, 0
        for k, kind in enumerate(function.arg_types):
            if kind == "memref":
                args.append("%buffer")
            elif kind == "i32":
                out.append(f"    %a{k} = memref.load %table[%row, %col{i32s % inputs.COLUMNS}] : {table}\n")
                args.append(f"%a{k}")
                i32s += 1
            else:
                out.append(f"    %a{k} = memref.load %flags[%row, %col{flags % inputs.COLUMNS}] : {_FLAGS}\n")
                args.append(f"%a{k}")
                flags += 1
        results = len(function.results)
        bind = "" if not results else ("%res = " if results == 1 else f"%res:{results} = ")
        result_type = ", ".join(["i32"] * results)
        out.append(f"    {bind}func.call @{function.symbol}({', '.join(args)}) : ({', '.join(types)}) -> "
                   f"({result_type})\n")
        out.append(f"    %id = arith.constant {number} : i64\n")
        out.append("    func.call @printI64(%id) : (i64) -> ()\n")
        out.append("    func.call @printComma() : () -> ()\n")
        out.append("    %row64 = arith.index_cast %row : index to i64\n")
        out.append("    func.call @printI64(%row64) : (i64) -> ()\n")
        values = ["%res"] if results == 1 else [f"%res#{k}" for k in range(results)]
        if function.takes_memory:
            for cell in range(inputs.MEMORY_CELLS):
                out.append(f"    %l{cell} = memref.load %buffer[%col{cell}] : memref<4xi32>\n")
            values += [f"%l{cell}" for cell in range(inputs.MEMORY_CELLS)]
        for n, value in enumerate(values):
            out.append("    func.call @printComma() : () -> ()\n")
            out += print_value(value, n, comma=False)
        out.append("    func.call @printNewline() : () -> ()\n")
        out.append("  }\n")
    out.append("  return\n}\n")
    return "".join(out)
