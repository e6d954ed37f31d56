"""The exec rendering: a P1-P24 program (canonical text) -> a module that runs.

The contract fixes the structure (threads of sites, wrappers, regions with
block arguments and a ``loom.spatial_yield``), and region bodies are upstream
ops already, so any grammar in the contract gets this rendering: it is a
text -> text transformation of the canonical rendering, written in custom
assembly forms only (func, arith, scf, memref, llvm; no ``<{...}>``).

* every region -> ``func.func @region_<graph name>(block arguments) -> (yielded
  types)``, its body verbatim, its yield a ``return``;
* every thread -> ``func.func @<thread>(%mem, %val, %flag) -> (...)``: its
  index constants, its ``%icall``, its sites as calls, its ``scf.if %flag`` /
  ``scf.for`` wrappers; it returns ``%icall`` and every region result in
  program order (a wrapper yields its regions' results: the last iteration's
  for ``scf.for``, zeros when ``scf.if`` is not taken);
* ``@helper_double`` and ``@host_container`` as written, ``@extern_scale``
  with the body ``3 * x + 5`` (i32, wrapping; :data:`EXTERN_SCALE`);
* ``@exec_table`` and ``@exec_flags`` hold the input table
  (``harness.execute.inputs``) in public mutable globals (code outside may write it before ``main``: its values
  are unknown to an optimizer); ``main`` calls every thread, then every region
  function, once per row, printing one line per call: function number, row, every result, then the
  four memory cells if the function takes the buffer.

All functions are public and ``main`` reads its inputs from that memory inside a
loop, so an optimizer cannot fold a function to its values on the table: the
optimized code is each region's general code.  The module begins with
``// loomfuzz-exec`` comments naming each function number (:func:`layout_of`).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Callable

from harness.execute import inputs

__all__ = ["ExecFunction", "ExecLayout", "ExecRenderError", "EXEC_STYLE", "EXTERN_SCALE", "exec_module", "exec_renderer",
           "program_renderer", "row_inputs", "style_error", "layout_line", "layout_of"]

#: The body given to ``llvm.func @extern_scale`` (declared only in the program).
EXTERN_SCALE = """llvm.func @extern_scale(%x: i32) -> i32 {
  %three = llvm.mlir.constant(3 : i32) : i32
  %five = llvm.mlir.constant(5 : i32) : i32
  %scaled = llvm.mul %x, %three : i32
  %shifted = llvm.add %scaled, %five : i32
  llvm.return %shifted : i32
}
"""

_PRINT_DECLARATIONS = (
    "func.func private @printI64(i64)\n"
    "func.func private @printComma()\n"
    "func.func private @printNewline()\n"
)
_LAYOUT = "// loomfuzz-exec"


class ExecRenderError(ValueError):
    """The text is not a P1-P24 program in the canonical rendering (one line)."""


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


@dataclass(frozen=True)
class ExecLayout:
    """What each printed line of an exec module's ``main`` stands for."""

    functions: tuple[ExecFunction, ...]
    rows: int = inputs.ROWS

    @property
    def lines(self) -> int:
        return sum(len(f.rows) if f.rows else self.rows for f in self.functions)


# ------------------------------------------------------------------ reading the program


@dataclass
class _Region:
    graph_name: str
    result: str | None  # %rN
    result_count: int
    operands: list[str]
    args: list[tuple[str, str]]  # (name, type text)
    body: list[str]
    yielded: list[str]
    yield_types: list[str]


@dataclass
class _Wrapper:
    header: str  # "scf.if %flag" or "scf.for %iv = %lo to %hi step %stp"
    regions: list[_Region] = field(default_factory=list)


@dataclass
class _Thread:
    symbol: str
    params: list[tuple[str, str]]
    lines: list = field(default_factory=list)  # str (kept as is), _Region or _Wrapper


_THREAD = re.compile(r"^\s*dataflow\.thread\s+(?:private\s+)?@([\w$.-]+)\s+domain\(.*?\)\s*\((.*?)\)"
                     r"\s*ctrl\s*\(.*?\)\s*\{\s*$")
_REGION = re.compile(r'^\s*(?:(%[\w$.-]+)(?::(\d+))?\s*=\s*)?"loom\.spatial_region"\((.*?)\)')
_BLOCK = re.compile(r"^\s*\^bb0\((.*?)\):\s*$")
_YIELD = re.compile(r'^\s*"loom\.spatial_yield"\((.*?)\).*?:\s*\((.*?)\)\s*->\s*\(\)\s*$')
_REGION_END = re.compile(r'^\s*\}\)\s*\{(.*)\}\s*:\s*\((.*?)\)\s*->\s*(.*?)\s*$')
_GRAPH_NAME = re.compile(r'graph_name\s*=\s*"((?:[^"\\]|\\.)*)"')
_WRAPPER = re.compile(r"^\s*(scf\.if\s+%[\w$.-]+|scf\.for\s+%[\w$.-]+\s*=\s*%[\w$.-]+\s+to\s+%[\w$.-]+"
                      r"\s+step\s+%[\w$.-]+)\s*\{\s*$")


def _split_list(text: str) -> list[str]:
    """Comma-separated items at bracket depth 0."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        items.append(text[start:].strip())
    return items


def _typed(text: str) -> list[tuple[str, str]]:
    out = []
    for item in _split_list(text):
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


def _region(lines: _Lines, first: str) -> _Region:
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
    return _Region(graph_name=graph.group(1), result=head.group(1),
                   result_count=int(head.group(2) or (1 if head.group(1) else 0)),
                   operands=_split_list(head.group(3)), args=_typed(block.group(1)), body=body,
                   yielded=_split_list(yielded.group(1)), yield_types=_split_list(yielded.group(2)))


def _thread(lines: _Lines, header: re.Match) -> _Thread:
    thread = _Thread(symbol=header.group(1), params=_typed(header.group(2)))
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
            inner = _Wrapper(header=re.sub(r"\s+", " ", wrapper.group(1)))
            while (line := lines.next()).strip() != "}":
                if not _REGION.match(line):
                    raise lines.fail("a wrapper holds only regions (P9, P10)")
                inner.regions.append(_region(lines, line))
            thread.lines.append(inner)
        elif stripped:
            thread.lines.append(stripped)


def _read(text: str) -> tuple[list[str], list[_Thread]]:
    """The module-level definitions other than threads (verbatim) and the threads."""
    lines = _Lines(text)
    preamble: list[str] = []
    threads: list[_Thread] = []
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


# ------------------------------------------------------------------ writing the module


def _function_symbol(name: str, taken: set[str], fallback: str) -> str:
    symbol = f"region_{name}" if re.fullmatch(r"[\w$.]+", name) else fallback
    while symbol in taken:
        symbol += "_"
    taken.add(symbol)
    return symbol


def _kind(type_text: str) -> str:
    if type_text.startswith("memref"):
        return "memref"
    if type_text in ("i32", "i1"):
        return type_text
    raise ExecRenderError(f"argument type {type_text!r} is not i32, i1 or memref<4xi32>")


def _result_names(region: _Region) -> list[str]:
    if region.result_count == 1:
        return [region.result]
    return [f"{region.result}#{k}" for k in range(region.result_count)]


def _call(region: _Region, symbol: str, indent: str) -> str:
    types = ", ".join(t for _, t in region.args)
    results = ", ".join(region.yield_types)
    bind = ""
    if region.result_count:
        bind = region.result + (f":{region.result_count}" if region.result_count > 1 else "") + " = "
    result_type = results if len(region.yield_types) == 1 else f"({results})"
    return f"{indent}{bind}func.call @{symbol}({', '.join(region.operands)}) : ({types}) -> {result_type}\n"


def _region_function(region: _Region, symbol: str) -> str:
    args = ", ".join(f"{n}: {t}" for n, t in region.args)
    results = ", ".join(region.yield_types)
    head = f"func.func @{symbol}({args})" + (f" -> ({results})" if results else "") + " {\n"
    ret = "  return" + (f" {', '.join(region.yielded)} : {results}" if region.yielded else "") + "\n"
    body = textwrap.indent(textwrap.dedent("\n".join(region.body)), "  ")
    return head + (body + "\n" if body.strip() else "") + ret + "}\n"


_THREAD_CALL = re.compile(r"(%[\w$.-]+)\s*=\s*func\.call\b")


def _thread_function(thread: _Thread, symbols: dict[int, str]) -> tuple[str, list[str]]:
    """The thread as a function, and the names of the region results it returns."""
    body: list[str] = []
    returned: list[str] = []  # the SSA values returned
    printed: list[str] = []  # what they are: %icall and the regions' result names
    wrappers = 0
    needs_zero = False
    for item in thread.lines:
        if isinstance(item, str):
            body.append(f"  {item}\n")
            call = _THREAD_CALL.match(item)
            if call:  # the optional %icall (P21): returned and printed too
                returned.append(call.group(1))
                printed.append(call.group(1))
        elif isinstance(item, _Region):
            body.append(_call(item, symbols[id(item)], "  "))
            returned += _result_names(item)
            printed += _result_names(item)
        else:
            inner = [name for region in item.regions for name in _result_names(region)]
            calls = "".join(_call(region, symbols[id(region)], "    ") for region in item.regions)
            if not inner:
                body.append(f"  {item.header} {{\n{calls}  }}\n")
                continue
            needs_zero = True
            name = f"%exec_w{wrappers}"
            wrappers += 1
            types = ", ".join(["i32"] * len(inner))
            bind = name + (f":{len(inner)}" if len(inner) > 1 else "")
            zeros = ", ".join(["%exec_zero"] * len(inner))
            yield_line = f"    scf.yield {', '.join(inner)} : {types}\n"
            if item.header.startswith("scf.if"):
                body.append(f"  {bind} = {item.header} -> ({types}) {{\n{calls}{yield_line}"
                            f"  }} else {{\n    scf.yield {zeros} : {types}\n  }}\n")
            else:
                carried = ", ".join(f"%exec_o{wrappers}_{k} = %exec_zero" for k in range(len(inner)))
                body.append(f"  {bind} = {item.header} iter_args({carried}) -> ({types}) {{\n"
                            f"{calls}{yield_line}  }}\n")
            returned += [name] if len(inner) == 1 else [f"{name}#{k}" for k in range(len(inner))]
            printed += inner
    params = ", ".join(f"{n}: {t}" for n, t in thread.params)
    types = ", ".join(["i32"] * len(returned))
    head = f"func.func @{thread.symbol}({params})" + (f" -> ({types})" if returned else "") + " {\n"
    zero = "  %exec_zero = arith.constant 0 : i32\n" if needs_zero else ""
    ret = "  return" + (f" {', '.join(returned)} : {types}" if returned else "") + "\n"
    return head + zero + "".join(body) + ret + "}\n", printed


#: The i32 table's columns: i32 arguments, then memory cells; flags have a table of i1.
_WIDTH = inputs.COLUMNS + inputs.MEMORY_CELLS
_TABLE = f"memref<{inputs.ROWS}x{_WIDTH}xi32>"
_FLAGS = f"memref<{inputs.ROWS}x{inputs.COLUMNS}xi1>"


def _table_globals() -> str:
    """``@exec_table`` and ``@exec_flags``: the input table as public, mutable globals.  Code
    outside the module may write them before ``main`` runs, so no optimizer may take their
    initial values as known.  Flags are ``i1`` cells, so an argument is always one load."""
    rows = ", ".join("[" + ", ".join(str(v) for v in (*inputs.I32[r], *inputs.MEMORY[r])) + "]"
                     for r in range(inputs.ROWS))
    flags = ", ".join("[" + ", ".join("true" if v else "false" for v in inputs.FLAGS[r]) + "]"
                      for r in range(inputs.ROWS))
    return (f"memref.global @exec_table : {_TABLE} = dense<[{rows}]>\n"
            f"memref.global @exec_flags : {_FLAGS} = dense<[{flags}]>\n")


def _main(functions: list[tuple[ExecFunction, list[str]]]) -> str:
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


def exec_module(canonical: str) -> str:
    """The exec rendering of one program in the canonical rendering (P1-P24).

    Raises :class:`ExecRenderError` (one line) for text outside the contract."""
    preamble, threads = _read(canonical)
    if not threads:
        raise ExecRenderError("the program has no dataflow.thread (P1)")
    taken = {t.symbol for t in threads} | {"helper_double", "extern_scale", "host_container", "main",
                                           "exec_table", "exec_flags"}
    symbols: dict[int, str] = {}
    regions: list[tuple[_Region, str]] = []
    for thread in threads:
        for item in thread.lines:
            for region in ([item] if isinstance(item, _Region) else
                           item.regions if isinstance(item, _Wrapper) else []):
                symbols[id(region)] = _function_symbol(region.graph_name, taken, f"region_{len(regions)}")
                regions.append((region, thread.symbol))
    functions: list[tuple[ExecFunction, list[str]]] = []
    thread_texts = []
    for thread in threads:
        text, returned = _thread_function(thread, symbols)
        thread_texts.append(text)
        types = [t for _, t in thread.params]
        functions.append((ExecFunction(thread.symbol, "thread", thread.symbol, thread.symbol,
                                       tuple(_kind(t) for t in types), tuple(returned)), types))
    for region, owner in regions:
        types = [t for _, t in region.args]
        names = tuple(f"#{k}" for k in range(len(region.yield_types)))
        functions.append((ExecFunction(symbols[id(region)], "region", region.graph_name, owner,
                                       tuple(_kind(t) for t in types), names), types))
    layout = "".join(layout_line(n, f) for n, (f, _) in enumerate(functions))
    preamble_text = "".join(line + "\n" for line in preamble)
    preamble_text = re.sub(r"^llvm\.func @extern_scale\(i32\) -> i32\n", EXTERN_SCALE, preamble_text,
                           flags=re.M)
    return (layout + "module {\n" + preamble_text + _PRINT_DECLARATIONS + "".join(thread_texts)
            + "".join(_region_function(r, symbols[id(r)]) for r, _ in regions)
            + _table_globals() + _main(functions) + "}\n")


EXEC_STYLE = "exec"


def style_error(grammar, style: str) -> str | None:
    """Why ``--render style`` does not apply to the grammar (one line), or None."""
    if style == EXEC_STYLE:
        from harness.contract import in_contract

        if grammar.meta.get("CONTRACT") is None:
            return (f"--render exec: not a rendering of this grammar (it has no contract; its "
                    f"renderings: {', '.join(grammar.renderings)})")
        if not in_contract(grammar):
            return (f"--render exec needs a grammar whose CONTRACT is P1-P24, "
                    f"not {grammar.meta.get('CONTRACT')!r}")
        return None
    if style not in grammar.renderings:
        return (f"--render {style}: the grammar has the renderings {', '.join(grammar.renderings)}"
                + (", and exec" if style_error(grammar, EXEC_STYLE) is None else ""))
    return None


def program_renderer(grammar, style: str) -> Callable[[object], str]:
    """tree -> text in one of the grammar's renderings or ``exec``."""
    if style == EXEC_STYLE:
        return exec_renderer(grammar)
    from harness.core.render import renderer

    return renderer(grammar, style).render


def exec_renderer(grammar) -> Callable[[object], str]:
    """tree -> exec text for a grammar in the P1-P24 contract (its canonical rendering,
    transformed)."""
    from harness.core.render import renderer

    canonical = renderer(grammar, "canonical").render
    return lambda tree: exec_module(canonical(tree))


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
