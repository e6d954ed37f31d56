"""The ``break`` profile: programs that violate exactly one precondition, the rest intact.

Each precondition P<n> that can be broken alone has a *transformation*: a
function that takes a deep copy of the default grammar (``program_shape.py``)
and changes one rule, usually by adding a broken variant of one nonterminal
(a thread header, a region body, a site's wrapper) and making every program
hold exactly one occurrence of it.  :func:`grammar_for` gives the grammar of
one precondition; :data:`GRAMMAR` puts them all under one top-level choice
labelled ``P1`` ... ``P24`` (uniform over the breakable ones), each branch
with its nonterminals renamed ``<P7-...>``.  The first decision of every
tree of this profile is therefore the broken precondition: harness.contract
reads it off the tree.

Nothing is patched as text: the codec, mutator, minimizer and parser work on
these grammars unchanged (a mutation never leaves the branch, so a mutated
break program still breaks the same precondition).

Preconditions that cannot be broken alone are listed in :data:`UNBREAKABLE`
with the reason; README.md repeats the list.
"""

from __future__ import annotations

import copy
import re
from typing import Callable

from grammars.program_shape import GRAMMAR as _DEFAULT
from grammars.program_shape import RENDERINGS as _DEFAULT_RENDERINGS
from grammars.program_shape import mlir, opts
from grammars.transform import distinct_children, prune

START = "<start>"
#: Every program breaks exactly one precondition (the label of its first choice).
CONTRACT = "break-one"
PROFILE = "break"

Grammar = dict[str, list]
Oracle = dict[str, list]

#: Preconditions no single rule change breaks without breaking another, and why (none:
#: every one has a transformation).
UNBREAKABLE: dict[str, str] = {}
#: Parts of a precondition that another precondition states too, so that breaking that
#: part always breaks both: the transformation breaks the precondition another way.
SHARED_PARTS: dict[str, str] = {
    "P24": "graph names and result names unique in the module are also P16 and P17: "
           "P24 is broken alone by two threads with one symbol",
    "P16": "a graph_name used twice is also P24: P16 is broken alone by a missing graph_name "
           "or one attribute too many",
    "P17": "a result name bound twice is also P24 (and invalid MLIR): P17 is broken alone by "
           "a value region whose result is not bound",
    "P11": "segment sizes moved to the discardable dictionary are also P16 (its exact keys): "
           "P11 is broken alone by one entry too many in the properties",
    "P22": "a second block in a region is also P11 (one entry block): P22 is broken alone by "
           "an scf.for without iter_args or an scf.if without else",
}

_NONTERMINAL = re.compile(r"<([^<> ]*)>")

# ----------------------------------------------------------------------------- helpers


def _text(expansion) -> str:
    return expansion if isinstance(expansion, str) else expansion[0]


def _one(g: Grammar, symbol: str) -> str:
    """The text of a nonterminal with a single expansion."""
    (expansion,) = g[symbol]
    return _text(expansion)


def _replace(text: str, old: str, new: str) -> str:
    old, new = mlir(old), mlir(new)
    assert old in text, old
    return text.replace(old, new)


def _broken_threads(g: Grammar, broken_thread: str) -> None:
    """Exactly one thread of every program is ``broken_thread`` (first, second or only)."""
    g["<threads>"] = [
        (broken_thread, opts(prob=1 / 2, label="1")),
        (broken_thread + "<thread>", opts(prob=1 / 4, label="broken+1")),
        ("<thread>" + broken_thread, opts(prob=1 / 4, label="1+broken")),
    ]


def _broken_sites(g: Grammar, broken_site: str) -> None:
    """Exactly one site of every program is ``broken_site``: a thread holding it, and
    maybe one normal site before or after it, then maybe a normal thread."""
    g["<broken-sites>"] = [
        (broken_site, opts(prob=1 / 2, label="1")),
        (broken_site + "<site>", opts(prob=1 / 4, label="broken+1")),
        ("<site>" + broken_site, opts(prob=1 / 4, label="1+broken")),
    ]
    thread = _one(g, "<thread>").replace("<sites>", "<broken-sites>")
    g["<broken-thread>"] = [(thread, opts(counter="T"))]
    _broken_threads(g, "<broken-thread>")


def _broken_region(g: Grammar, variants: dict[str, str]) -> None:
    """Exactly one region of every program is one of ``variants`` (label -> region text),
    at any of the default nestings."""
    g["<broken-region>"] = [(text, opts(label=label)) for label, text in variants.items()]
    site = []
    for expansion in g["<site>"]:
        text, options = expansion
        broken = text.replace(">", "-broken>") if text != "<unwrapped>" else "<broken-region>"
        if text != "<unwrapped>":
            g[broken] = [(_text(e).replace("<region>", "<broken-region>"), e[1]) for e in g[text]]
        site.append((broken, dict(options)))
    g["<broken-site>"] = site
    _broken_sites(g, "<broken-site>")


def _value_region(header_operands: str, block_args: str, body: str, result: str,
                  segments: str = "1, 0, 0, 0", close_type: str = "(i32) -> i32",
                  binding: str = "%r$R = ", yield_text: str | None = None,
                  attrs: str = '{graph_name = "graph_$R", source_maps = []}') -> str:
    """A region with the default value region's layout, every part replaceable."""
    yield_line = yield_text if yield_text is not None else (
        f'      "loom.spatial_yield"({result}) <{{operandSegmentSizes = array<i32: 1, 0>}}> '
        ": (i32) -> ()\n")
    return (
        mlir(
            f'  {binding}"loom.spatial_region"({header_operands}) <{{operandSegmentSizes = '
            f"array<i32: {segments}>, resultSegmentSizes = array<i32: 1, 0>}}> ({{\n"
            f"    ^bb0({block_args}):\n" + body + yield_line
        )
        + "<region-end>"
        + mlir(f" {attrs} : {close_type}\n")
    )


_ARITH_BODY = "      %s = arith.addi %a, %a : i32\n      %p = arith.muli %s, %a : i32\n"


def _arith(**changes: str) -> str:
    return _value_region(changes.pop("operands", "%val"), changes.pop("args", "%a: i32"),
                         changes.pop("body", _ARITH_BODY), "%p", **changes)


# ------------------------------------------------------------------ transformations
# Each takes the default grammar and its oracle overrides (deep copies) and changes them
# in place.


def _p1(g: Grammar, oracle: Oracle) -> None:
    """The module's definitions out of order."""
    g["<module>"] = [
        (mlir("module {\n") + "<extern-scale><helper-double><host-container><threads>" + mlir("}\n"),
         opts(label="extern-first")),
        (mlir("module {\n") + "<helper-double><extern-scale><threads><host-container>" + mlir("}\n"),
         opts(label="host-last")),
    ]


def _p2(g: Grammar, oracle: Oracle) -> None:
    """@helper_double multiplies instead of adding."""
    g["<helper-double>"] = [_replace(_one(g, "<helper-double>"), "arith.addi %a, %a", "arith.muli %a, %a")]


def _p3(g: Grammar, oracle: Oracle) -> None:
    """@extern_scale is defined, not declared."""
    g["<extern-scale>"] = [mlir(
        "llvm.func @extern_scale(%x: i32) -> i32 {\n"
        "  llvm.return %x : i32\n"
        "}\n")]


def _p4(g: Grammar, oracle: Oracle) -> None:
    """@host_container loops to 3, or stores at 0."""
    host = _one(g, "<host-container>")
    g["<host-container>"] = [
        (_replace(host, "%four = arith.constant 4 : index", "%four = arith.constant 3 : index"),
         opts(label="bound-3")),
        (_replace(host, "%target[%hi]", "%target[%zero]"), opts(label="store-at-0")),
    ]


def _p5(g: Grammar, oracle: Oracle) -> None:
    """A thread with an extra argument or an extra control operand."""
    header = _one(g, "<thread-open>")
    (oracle_header,) = oracle["<thread-open>"]
    variants = {
        "extra-argument": (_replace(header, "%flag: i1)", "%flag: i1, %extra: i32)"),
                           _replace(oracle_header, "%flag: i1,", "%flag: i1, %extra: i32,")),
        "extra-ctrl": (_replace(header, "ctrl (%start: none)", "ctrl (%start: none, %go: none)"),
                       _replace(oracle_header, "%start: none)", "%start: none, %go: none)")),
    }
    g["<broken-thread-open>"] = [(text, opts(label=label)) for label, (text, _) in variants.items()]
    oracle["<broken-thread-open>"] = [text for text, _ in variants.values()]
    thread = _one(g, "<thread>").replace("<thread-open>", "<broken-thread-open>")
    g["<broken-thread>"] = [(thread, opts(counter="T"))]
    _broken_threads(g, "<broken-thread>")


def _p6(g: Grammar, oracle: Oracle) -> None:
    """A thread whose index constants are not 0, 2, 1 in that order."""
    bounds = _one(g, "<bounds>")
    lo, hi, stp = bounds.splitlines(keepends=True)
    g["<broken-bounds>"] = [
        (_replace(bounds, "%hi = arith.constant 2", "%hi = arith.constant 3"), opts(label="hi-3")),
        (hi + lo + stp, opts(label="hi-first")),
    ]
    thread = _one(g, "<thread>").replace("<bounds>", "<broken-bounds>")
    g["<broken-thread>"] = [(thread, opts(counter="T"))]
    _broken_threads(g, "<broken-thread>")


def _p7(g: Grammar, oracle: Oracle) -> None:
    """A thread without its dataflow.thread.yield."""
    g["<broken-thread-close>"] = [_replace(_one(g, "<thread-close>"), "  dataflow.thread.yield\n", "")]
    (oracle_close,) = oracle["<thread-close>"]
    oracle["<broken-thread-close>"] = [_replace(oracle_close, '  "dataflow.thread.yield"() : () -> ()\n', "")]
    thread = _one(g, "<thread>").replace("<thread-close>", "<broken-thread-close>")
    g["<broken-thread>"] = [(thread, opts(counter="T"))]
    _broken_threads(g, "<broken-thread>")


def _p8(g: Grammar, oracle: Oracle) -> None:
    """A thread without any region."""
    thread = _one(g, "<thread>").replace("<sites>", "")
    g["<broken-thread>"] = [(thread, opts(counter="T"))]
    _broken_threads(g, "<broken-thread>")


def _p9(g: Grammar, oracle: Oracle) -> None:
    """A region two wrappers deep (scf.for inside scf.if, or scf.if inside scf.for)."""
    g["<inner-if>"] = [(mlir("  scf.if %flag {\n") + "<region>" + mlir("  }\n"), opts(indent=2))]
    g["<inner-for>"] = [(mlir("  scf.for %jv = %lo to %hi step %stp {\n") + "<region>" + mlir("  }\n"),
                         opts(indent=2))]
    g["<broken-site>"] = [
        (mlir("  scf.if %flag {\n") + "<inner-for>" + mlir("  }\n"),
         opts(indent=2, counter="R", label="for-in-if")),
        (mlir("  scf.for %iv = %lo to %hi step %stp {\n") + "<inner-if>" + mlir("  }\n"),
         opts(indent=2, counter="R", label="if-in-for")),
    ]
    _broken_sites(g, "<broken-site>")


def _p10(g: Grammar, oracle: Oracle) -> None:
    """A wrapper of the wrong form: scf.if with an empty else, scf.for from %stp."""
    g["<broken-site>"] = [
        (mlir("  scf.if %flag {\n") + "<region>" + mlir("  } else {\n  }\n"),
         opts(indent=2, counter="R", label="if-else")),
        (mlir("  scf.for %iv = %stp to %hi step %stp {\n") + "<region>" + mlir("  }\n"),
         opts(indent=2, counter="R", label="for-from-1")),
    ]
    _broken_sites(g, "<broken-site>")


def _p11(g: Grammar, oracle: Oracle) -> None:
    """A region whose properties dictionary holds one more entry."""
    region = _arith()
    old = mlir("resultSegmentSizes = array<i32: 1, 0>}>")
    assert old in region
    _broken_region(g, {"extra-property": region.replace(
        old, mlir("resultSegmentSizes = array<i32: 1, 0>, tag = 1 : i32}>"))})


def _p12(g: Grammar, oracle: Oracle) -> None:
    """operandSegmentSizes with five entries, or summing to two for one operand."""
    _broken_region(g, {"five-segments": _arith(segments="1, 0, 0, 0, 0"),
                       "sum-2": _arith(segments="2, 0, 0, 0")})


def _p13(g: Grammar, oracle: Oracle) -> None:
    """^bb0 with an extra argument."""
    _broken_region(g, {"extra-block-argument": _arith(args="%a: i32, %extra: i32")})


def _p14(g: Grammar, oracle: Oracle) -> None:
    """A value region whose yield yields nothing."""
    _broken_region(g, {"yield-nothing": _arith(
        yield_text='      "loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()\n')})


def _p15(g: Grammar, oracle: Oracle) -> None:
    """A region whose operand is the thread's %icall (a value defined in the thread)."""
    g["<broken-sites>"] = [
        ("<broken-site>", opts(prob=1 / 2, label="1")),
        ("<broken-site><site>", opts(prob=1 / 4, label="broken+1")),
        ("<site><broken-site>", opts(prob=1 / 4, label="1+broken")),
    ]
    g["<broken-site>"] = [(_arith(operands="%icall"), opts(counter="R", label="icall-operand"))]
    thread = _one(g, "<thread>").replace("<top-call>", "<icall>").replace("<sites>", "<broken-sites>")
    g["<broken-thread>"] = [(thread, opts(counter="T"))]
    _broken_threads(g, "<broken-thread>")


def _p16(g: Grammar, oracle: Oracle) -> None:
    """A region without graph_name, or with one more attribute."""
    _broken_region(g, {
        "no-graph-name": _arith(attrs="{source_maps = []}"),
        "extra-attribute": _arith(attrs='{graph_name = "graph_$R", note = "x", source_maps = []}'),
    })


def _p17(g: Grammar, oracle: Oracle) -> None:
    """A value region whose result is not bound to a name."""
    _broken_region(g, {"unbound-result": _arith(binding="")})


def _p18(g: Grammar, oracle: Oracle) -> None:
    """A memory region (yields nothing) bound to a result name."""
    _broken_region(g, {"bound-memory-region": _replace(
        _one(g, "<memory-region>"), '  "loom.spatial_region"(%val, %mem)',
        '  %r$R = "loom.spatial_region"(%val, %mem)')})


def _p19(g: Grammar, oracle: Oracle) -> None:
    """A memory region indexing with its payload, not a constant."""
    memory = _one(g, "<memory-region>")
    _broken_region(g, {"index-from-payload": _replace(
        memory, "%z = arith.constant 0 : index", "%z = arith.index_cast %payload : i32 to index")})


def _p20(g: Grammar, oracle: Oracle) -> None:
    """A call to a symbol the module does not define."""
    _broken_region(g, {"undefined-callee": _arith(
        body="      %p = func.call @helper_triple(%a) : (i32) -> i32\n")})


def _p21(g: Grammar, oracle: Oracle) -> None:
    """A thread whose %icall comes after its sites."""
    thread = _one(g, "<thread>").replace("<top-call><sites>", "<sites><icall>")
    g["<broken-thread>"] = [(thread, opts(counter="T"))]
    _broken_threads(g, "<broken-thread>")


def _p22(g: Grammar, oracle: Oracle) -> None:
    """A region whose scf.for carries no iter_args, or whose scf.if has no else."""
    _broken_region(g, {
        "for-without-iter-args": _arith(body=(
            "      %c0 = arith.constant 0 : index\n"
            "      %c2 = arith.constant 2 : index\n"
            "      %c1 = arith.constant 1 : index\n"
            "      scf.for %i = %c0 to %c2 step %c1 {\n"
            "        %t = arith.addi %a, %a : i32\n"
            "      }\n"
            "      %p = arith.muli %a, %a : i32\n")),
        "if-without-else": _value_region("%val, %flag", "%a: i32, %c: i1", (
            "      scf.if %c {\n"
            "        %t = arith.addi %a, %a : i32\n"
            "      }\n"
            "      %p = arith.muli %a, %a : i32\n"), "%p", segments="2, 0, 0, 0",
            close_type="(i32, i1) -> i32"),
    })


def _p23(g: Grammar, oracle: Oracle) -> None:
    """A region computing in i64 in between."""
    _broken_region(g, {"i64-inside": _arith(body=(
        "      %w = arith.extsi %a : i32 to i64\n"
        "      %s = arith.addi %w, %w : i64\n"
        "      %p = arith.trunci %s : i64 to i32\n"))})


def _p24(g: Grammar, oracle: Oracle) -> None:
    """Two threads with one symbol (both under one value of the thread counter)."""
    body = _one(g, "<thread>")
    g["<broken-thread>"] = [(body + body, opts(counter="T", label="thread-symbol"))]
    _broken_threads(g, "<broken-thread>")


TRANSFORMATIONS: dict[str, Callable[[Grammar, Oracle], None]] = {
    f"P{n}": globals()[f"_p{n}"] for n in range(1, 25) if f"_p{n}" in globals()
}
BREAKABLE = tuple(TRANSFORMATIONS)


# ------------------------------------------------------------------------- grammars


def _rename(text: str, prefix: str, symbols) -> str:
    return _NONTERMINAL.sub(lambda m: f"<{prefix}-{m.group(1)}>" if m.group(0) in symbols else m.group(0),
                            text)


def grammar_for(precondition: str) -> tuple[Grammar, dict[str, Oracle]]:
    """(GRAMMAR, RENDERINGS) of the programs that break ``precondition`` alone."""
    if precondition not in TRANSFORMATIONS:
        known = ", ".join(BREAKABLE)
        why = UNBREAKABLE.get(precondition)
        raise ValueError(f"cannot break {precondition} alone" + (f" ({why})" if why else "")
                         + f"; breakable: {known}")
    g = copy.deepcopy(_DEFAULT)
    oracle = copy.deepcopy(_DEFAULT_RENDERINGS["oracle"])
    TRANSFORMATIONS[precondition](g, oracle)
    g = distinct_children(prune(g, START))
    for symbol in [k for k in oracle if f"{k[:-1]}-0>" in g]:  # moved into <S-N> children
        for number, expansion in enumerate(oracle.pop(symbol)):
            oracle[f"{symbol[:-1]}-{number}>"] = [expansion]
    return g, {"oracle": {k: v for k, v in oracle.items() if k in g}}


def _all() -> tuple[Grammar, dict[str, Oracle]]:
    grammar: Grammar = {START: []}
    oracle: Oracle = {}
    for precondition in BREAKABLE:
        g, renderings = grammar_for(precondition)
        symbols = set(g)
        for symbol, expansions in g.items():
            renamed = []
            for expansion in expansions:
                if isinstance(expansion, str):
                    renamed.append(_rename(expansion, precondition, symbols))
                else:
                    renamed.append((_rename(expansion[0], precondition, symbols), expansion[1]))
            grammar[_rename(symbol, precondition, symbols)] = renamed
        for symbol, expansions in renderings["oracle"].items():
            oracle[_rename(symbol, precondition, symbols)] = [
                _rename(_text(e), precondition, symbols) for e in expansions]
        grammar[START].append((f"<{precondition}-start>", opts(label=precondition)))
    return grammar, {"oracle": oracle}


GRAMMAR, RENDERINGS = _all()
