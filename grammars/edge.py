"""The ``edge`` profile: valid MLIR that steps outside P1-P24 where loom's pass trusts its input.

Built from the default grammar (``program_shape.py``) by editing a deep copy:
every direction below is a weighted alternative, so the fuzzer, codec, mutator
and minimizer treat it like any other choice.  The oracle rendering of every
program parses and verifies in ``mlir-opt-22 --allow-unregistered-dialect``
(tests/test_edge_break.py); the canonical one is what loom-opt reads.

Directions (the last section of ``shared/notes/field-notes.md`` says why
each one matters):

* wrappers around a site besides ``scf.if``/``scf.for``: ``scf.while``,
  ``scf.index_switch``, ``scf.parallel``, ``scf.forall`` (parallel ones with
  a bounded extent of 2, 8 or 32 points) and ``scf.execute_region``;
* two wrapper levels (an outer ``scf.if``/``scf.for``/``scf.forall`` around
  any of the single wrappers, whose induction variables are renamed so that
  nothing shadows);
* ``graph_name`` missing, empty, needing quotes as a symbol (``"graph $R"``,
  ``"graph-$R.x"``), clashing with another region's name or with the
  symbols ``thread_0`` and ``helper_double``; non-empty ``source_maps``;
* region bodies with a memory result (the region yields its memref operand),
  memrefs of other shapes (dynamic ``memref<?xi32>``, rank 0
  ``memref<i32>``, unranked ``memref<*xi32>``, made at the site from
  ``%mem`` by ``memref.cast`` or ``memref.alloc``) and other integer widths
  (``i64``, ``i16`` values through ``arith.extsi``/``arith.trunci``).

The wide profile (issue 9) does not exist yet, so its constructs are not
mixed in here.
"""

from __future__ import annotations

import copy

from grammars.program_shape import GRAMMAR as _DEFAULT
from grammars.program_shape import RENDERINGS as _DEFAULT_RENDERINGS
from grammars.program_shape import mlir, opts
from grammars.transform import distinct_children

START = "<start>"
#: Programs of this grammar step outside P1-P24 on purpose (valid MLIR all the same).
CONTRACT = "edge"
PROFILE = "edge"

#: The site's region attributes: graph_name and source_maps, normal or edge.
_ATTRS = "<attrs>"


def _value_region(body: str, result: str, type_: str = "i32") -> str:
    """A value region over ``%val`` (or a value of another width) whose attributes vary."""
    return (
        "<value-region-open>"
        + mlir(body)
        + mlir(
            f'      "loom.spatial_yield"({result}) <{{operandSegmentSizes = '
            f"array<i32: 1, 0>}}> : ({type_}) -> ()\n"
        )
        + "<region-end>"
        + mlir(" ")
        + _ATTRS
        + mlir(f" : ({type_}) -> {type_}\n")
    )


def _memory_region(prelude: str, operand: str, memref: str, body: str) -> str:
    """A memory region without result over ``operand`` of type ``memref``."""
    return (
        mlir(
            prelude
            + f'  "loom.spatial_region"(%val, {operand}) <{{operandSegmentSizes = '
            "array<i32: 1, 0, 1, 0>, resultSegmentSizes = array<i32: 0, 0>}> ({\n"
            f"    ^bb0(%payload: i32, %memory: {memref}):\n"
            + body
            + '      "loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()\n'
        )
        + "<region-end>"
        + mlir(" ")
        + _ATTRS
        + mlir(f" : (i32, {memref}) -> ()\n")
    )


GRAMMAR: dict[str, list] = copy.deepcopy(_DEFAULT)

# --- the six default bodies, with their attributes as a choice -------------------------
_DEFAULT_ATTRS = mlir(' {graph_name = "graph_$R", source_maps = []}')
for _symbol in ("<memory-region>", "<branch-region>"):
    (_text,) = GRAMMAR[_symbol]
    assert _DEFAULT_ATTRS in _text, _symbol
    GRAMMAR[_symbol] = [_text.replace(_DEFAULT_ATTRS, mlir(" ") + _ATTRS)]
GRAMMAR["<value-region-close>"] = [mlir(" ") + _ATTRS + mlir(" : (i32) -> i32\n")]

GRAMMAR[_ATTRS] = [
    (mlir('{graph_name = "graph_$R", source_maps = []}'), opts(prob=0.58, label="normal")),
    (mlir("{source_maps = []}"), opts(prob=0.06, label="name-missing")),
    (mlir('{graph_name = "", source_maps = []}'), opts(prob=0.06, label="name-empty")),
    (mlir('{graph_name = "graph $R", source_maps = []}'), opts(prob=0.05, label="name-space")),
    (mlir('{graph_name = "graph-$R.x", source_maps = []}'), opts(prob=0.05, label="name-punct")),
    # attribute order swapped so that the text differs from the normal name of region 0
    (mlir('{source_maps = [], graph_name = "graph_0"}'), opts(prob=0.05, label="name-clash-region")),
    (mlir('{graph_name = "thread_0", source_maps = []}'), opts(prob=0.05, label="name-clash-thread")),
    (mlir('{graph_name = "helper_double", source_maps = []}'), opts(prob=0.05, label="name-clash-helper")),
    (mlir('{graph_name = "graph_$R", source_maps = [affine_map<(d0) -> (d0)>]}'),
     opts(prob=0.05, label="source-maps")),
]

# --- more bodies ------------------------------------------------------------------------
GRAMMAR["<region>"] = [
    ("<arith-region>", opts(prob=0.12, label="arith")),
    ("<memory-region>", opts(prob=0.12, label="memory")),
    ("<branch-region>", opts(prob=0.10, label="branch")),
    ("<freeze-region>", opts(prob=0.08, label="freeze")),
    ("<loop-region>", opts(prob=0.10, label="loop")),
    ("<call-region>", opts(prob=0.06, label="call")),
    ("<memory-result-region>", opts(prob=0.10, label="memory-result")),
    ("<dynamic-memref-region>", opts(prob=0.08, label="memref-dynamic")),
    ("<rank0-memref-region>", opts(prob=0.08, label="memref-rank0")),
    ("<unranked-memref-region>", opts(prob=0.06, label="memref-unranked")),
    ("<wide-int-region>", opts(prob=0.10, label="other-width")),
]
GRAMMAR["<memory-result-region>"] = [
    mlir(
        '  %r$R = "loom.spatial_region"(%val, %mem) <{operandSegmentSizes = '
        "array<i32: 1, 0, 1, 0>, resultSegmentSizes = array<i32: 0, 1>}> ({\n"
        "    ^bb0(%payload: i32, %memory: memref<4xi32>):\n"
        "      %z = arith.constant 0 : index\n"
        "      memref.store %payload, %memory[%z] : memref<4xi32>\n"
        '      "loom.spatial_yield"(%memory) <{operandSegmentSizes = array<i32: 0, 1>}> '
        ": (memref<4xi32>) -> ()\n"
    )
    + "<region-end>"
    + mlir(" ")
    + _ATTRS
    + mlir(" : (i32, memref<4xi32>) -> memref<4xi32>\n")
]
GRAMMAR["<dynamic-memref-region>"] = [
    _memory_region(
        "  %dyn$R = memref.cast %mem : memref<4xi32> to memref<?xi32>\n",
        "%dyn$R",
        "memref<?xi32>",
        "      %z = arith.constant 0 : index\n"
        "      memref.store %payload, %memory[%z] : memref<?xi32>\n",
    )
]
GRAMMAR["<rank0-memref-region>"] = [
    _memory_region(
        "  %cell$R = memref.alloc() : memref<i32>\n",
        "%cell$R",
        "memref<i32>",
        "      memref.store %payload, %memory[] : memref<i32>\n",
    )
]
GRAMMAR["<unranked-memref-region>"] = [
    _memory_region(
        "  %any$R = memref.cast %mem : memref<4xi32> to memref<*xi32>\n",
        "%any$R",
        "memref<*xi32>",
        "      %z = arith.constant 0 : index\n",
    )
]
def _wide_int_region(make: str, width: str) -> tuple[str, dict]:
    """A value region over ``%val`` converted to ``width`` at the site by ``make``."""
    return (
        mlir(
            f"  %w$R = {make} %val : i32 to {width}\n"
            f'  %r$R = "loom.spatial_region"(%w$R) <{{operandSegmentSizes = '
            "array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({\n"
            f"    ^bb0(%a: {width}):\n"
            f"      %s = arith.addi %a, %a : {width}\n"
            f"      %p = arith.muli %s, %a : {width}\n"
            f'      "loom.spatial_yield"(%p) <{{operandSegmentSizes = array<i32: 1, 0>}}> '
            f": ({width}) -> ()\n"
        )
        + "<region-end>"
        + mlir(" ")
        + _ATTRS
        + mlir(f" : ({width}) -> {width}\n"),
        opts(label=width),
    )


GRAMMAR["<wide-int-region>"] = [_wide_int_region("arith.extsi", "i64"),
                                _wide_int_region("arith.trunci", "i16")]

# --- wrappers ---------------------------------------------------------------------------
# (opening text, closing text) of each wrapper at thread level; ``{iv}`` names its
# induction variable (renamed one level down so that no name shadows another).


def _wrappers(level: str) -> dict[str, tuple[str, str]]:
    iv = "%iv" if level == "outer" else "%jv"
    return {
        "if": ("  scf.if %flag {\n", "  }\n"),
        "for": (f"  scf.for {iv} = %lo to %hi step %stp {{\n", "  }\n"),
        "while": ("  scf.while : () -> () {\n    scf.condition(%flag)\n  } do {\n",
                  "    scf.yield\n  }\n"),
        "index-switch": ("  scf.index_switch %lo\n  case 1 {\n    scf.yield\n  }\n  default {\n",
                         "    scf.yield\n  }\n"),
        "execute-region": ("  scf.execute_region {\n", "    scf.yield\n  }\n"),
    }


_EXTENTS = "<extent>"
GRAMMAR[_EXTENTS] = [
    ("2", opts(prob=0.5, label="2")),
    ("8", opts(prob=0.3, label="8")),
    ("32", opts(prob=0.2, label="32")),
]


def _parallel(level: str) -> dict[str, tuple[str, str]]:
    p = "%pi" if level == "outer" else "%pj"
    f = "%fi" if level == "outer" else "%fj"
    e = "%ext$R" if level == "outer" else "%extj$R"
    return {
        "parallel": (mlir(f"  {e} = arith.constant ") + _EXTENTS + mlir(
            f" : index\n  scf.parallel ({p}) = (%lo) to ({e}) step (%stp) {{\n"), mlir("  }\n")),
        "forall": (mlir(f"  scf.forall ({f}) in (") + _EXTENTS + mlir(") {\n"), mlir("  }\n")),
    }


def _wrapped(opening: str, closing: str, inner: str) -> tuple[str, dict]:
    return (opening + inner + closing, opts(indent=2))


_SITE_WEIGHTS = {
    "none": 0.22, "if": 0.07, "for": 0.07, "while": 0.09, "index-switch": 0.09,
    "parallel": 0.09, "forall": 0.09, "execute-region": 0.08, "two-levels": 0.20,
}

GRAMMAR["<site>"] = [("<unwrapped>", opts(prob=_SITE_WEIGHTS["none"], counter="R", label="none"))]
for _name, (_open, _close) in [*((k, (mlir(o), mlir(c))) for k, (o, c) in _wrappers("outer").items()),
                               *_parallel("outer").items()]:
    _symbol = f"<{_name}-wrapped>"
    GRAMMAR[_symbol] = [_wrapped(_open, _close, "<region>")]
    GRAMMAR["<site>"].append((_symbol, opts(prob=_SITE_WEIGHTS[_name], counter="R", label=_name)))
GRAMMAR["<site>"].append(("<two-levels>", opts(prob=_SITE_WEIGHTS["two-levels"], counter="R",
                                                label="two-levels")))

# Two levels: an outer scf.if / scf.for / scf.forall around any single wrapper.
_inner = []
for _name, (_open, _close) in [*((k, (mlir(o), mlir(c))) for k, (o, c) in _wrappers("inner").items()),
                               *_parallel("inner").items()]:
    _symbol = f"<inner-{_name}>"
    GRAMMAR[_symbol] = [_wrapped(_open, _close, "<region>")]
    _inner.append((_symbol, opts(label=_name)))
GRAMMAR["<inner-wrapped>"] = _inner
_outer = _wrappers("outer")
_outer_parallel = _parallel("outer")
GRAMMAR["<two-levels>"] = [
    (_wrapped(mlir(_outer["if"][0]), mlir(_outer["if"][1]), "<inner-wrapped>")[0], opts(indent=2, label="if")),
    (_wrapped(mlir(_outer["for"][0]), mlir(_outer["for"][1]), "<inner-wrapped>")[0], opts(indent=2, label="for")),
    (_wrapped(*_outer_parallel["forall"], "<inner-wrapped>")[0], opts(indent=2, label="forall")),
]

GRAMMAR = distinct_children(GRAMMAR)
RENDERINGS = copy.deepcopy(_DEFAULT_RENDERINGS)

#: Per decision, the labels of the alternatives the default profile has too: any other
#: label a tree takes is an edge construct (harness.contract names them in findings).
NORMAL: dict[str, set[str]] = {
    "<site>": {"none", "if", "for"},
    "<region>": {"arith", "memory", "branch", "freeze", "loop", "call"},
    "<attrs>": {"normal"},
}
