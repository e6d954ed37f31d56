"""The exec rendering: a P1-P24 program (canonical text) -> a module that runs.

The contract fixes the structure (threads of sites, wrappers, regions with
block arguments and a ``loom.spatial_yield``), and region bodies are upstream
ops already, so any grammar in the contract gets this rendering: it is a
text -> text transformation of the canonical rendering
(:mod:`harness.execute.canonical_program` reads it), written in custom
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
  four memory cells if the function takes the buffer, through the private line printers
  ``@exec_line_<n>`` (:mod:`harness.execute.exec_main`).

All functions are public and ``main`` reads its inputs from that memory inside a
loop, so an optimizer cannot fold a function to its values on the table: the
optimized code is each region's general code.  The module begins with
``// loomfuzz-exec`` comments naming each function number
(:func:`harness.execute.exec_layout.layout_of`).  ``exec`` is also a
``--render`` style beside the grammar's own renderings (:func:`program_renderer`).
"""

from __future__ import annotations

import re
import textwrap
from typing import Callable

from harness.execute.canonical_program import ExecRenderError, Region, Thread, Wrapper, read_program
from harness.execute.exec_layout import ExecFunction, layout_line
from harness.execute.exec_main import main_function, table_globals

__all__ = ["EXEC_STYLE", "EXTERN_SCALE", "exec_module", "exec_renderer", "program_renderer", "style_error"]

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


def _result_names(region: Region) -> list[str]:
    if region.result_count == 1:
        return [region.result]
    return [f"{region.result}#{k}" for k in range(region.result_count)]


def _call(region: Region, symbol: str, indent: str) -> str:
    types = ", ".join(t for _, t in region.args)
    results = ", ".join(region.yield_types)
    bind = ""
    if region.result_count:
        bind = region.result + (f":{region.result_count}" if region.result_count > 1 else "") + " = "
    result_type = results if len(region.yield_types) == 1 else f"({results})"
    return f"{indent}{bind}func.call @{symbol}({', '.join(region.operands)}) : ({types}) -> {result_type}\n"


def _region_function(region: Region, symbol: str) -> str:
    args = ", ".join(f"{n}: {t}" for n, t in region.args)
    results = ", ".join(region.yield_types)
    head = f"func.func @{symbol}({args})" + (f" -> ({results})" if results else "") + " {\n"
    ret = "  return" + (f" {', '.join(region.yielded)} : {results}" if region.yielded else "") + "\n"
    body = textwrap.indent(textwrap.dedent("\n".join(region.body)), "  ")
    return head + (body + "\n" if body.strip() else "") + ret + "}\n"


_THREAD_CALL = re.compile(r"(%[\w$.-]+)\s*=\s*func\.call\b")


def _thread_function(thread: Thread, symbols: dict[int, str]) -> tuple[str, list[str]]:
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
        elif isinstance(item, Region):
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


def exec_module(canonical: str) -> str:
    """The exec rendering of one program in the canonical rendering (P1-P24).

    Raises :class:`ExecRenderError` (one line) for text outside the contract."""
    preamble, threads = read_program(canonical)
    if not threads:
        raise ExecRenderError("the program has no dataflow.thread (P1)")
    printer = next((t.symbol for t in threads if re.fullmatch(r"exec_line_\d+", t.symbol)), None)
    if printer is not None:
        raise ExecRenderError(f"thread @{printer} has the name of the exec module's line printer")
    taken = {t.symbol for t in threads} | {"helper_double", "extern_scale", "host_container", "main",
                                           "exec_table", "exec_flags"}
    symbols: dict[int, str] = {}
    regions: list[tuple[Region, str]] = []
    for thread in threads:
        for item in thread.lines:
            for region in ([item] if isinstance(item, Region) else
                           item.regions if isinstance(item, Wrapper) else []):
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
            + table_globals() + main_function(functions) + "}\n")


# ------------------------------------------------------------------ exec as a --render style

EXEC_STYLE = "exec"


def style_error(grammar, style: str) -> str | None:
    """Why ``--render style`` does not apply to the grammar (one line), or None."""
    if style == EXEC_STYLE:
        from harness.contract import exec_renderable

        if grammar.meta.get("CONTRACT") is None:
            return (f"--render exec: not a rendering of this grammar (it has no contract; its "
                    f"renderings: {', '.join(grammar.renderings)})")
        if not exec_renderable(grammar):
            return (f"--render exec needs a grammar whose CONTRACT is P1-P24 (or leaves only "
                    f"preconditions on region bodies), not {grammar.meta.get('CONTRACT')!r}")
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
