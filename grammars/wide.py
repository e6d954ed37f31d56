"""The ``wide`` profile: every program meets P1-P24, far beyond the six fixed bodies.

The conventions C1-C23 are lifted where the preconditions allow:

* 1-8 threads of 1-6 sites (one most likely, then two; the rest share what
  is left evenly, so the maxima are common enough to test), the optional
  ``%icall`` (P21) in any thread;
* a site is one region, or an ``scf.if %flag`` / ``scf.for %iv = %lo to %hi
  step %stp`` wrapper holding one to three regions (P9, P10: one level);
* a region's operands are any sequence of 0-3 of ``%val``/``%flag`` in the
  value segment and 0-2 ``%mem`` in the memory segment (at least one operand;
  P12, P13, P15), with 0, 1 or 2 ``i32`` results and a yield to match (P14,
  P17, P18);
* region bodies are built from statements, not picked from a list:
  ``arith.constant`` (i32, and index 0-3 for P19), ``addi``, ``subi``,
  ``muli``, ``andi``, ``ori``, ``xori``, ``llvm.freeze``, ``memref.load`` /
  ``memref.store`` on a memory operand at an index constant of the region
  (P19), calls to ``@helper_double`` / ``@extern_scale`` (P20, rare), nested
  ``scf.if %c -> (i32)`` with both branches and ``scf.for`` with
  ``iter_args`` over bounds defined in the region (P22), blocks nested up to
  depth 3.

Operands are values defined earlier in scope, of the right type, by
construction: the core's binder (``harness.core.scope``).  Block arguments,
induction variables and loop-carried values are ``bind``; every operation
result is ``define``; each operand is a ``use`` whose rank is one more choice
of the choice sequence.  The grammar is written so that a value of every
type an operand needs is always in scope (the compiler checks it): a body
without an ``i32`` operand starts with an ``i32`` constant, memory operations
and loops bring the index constants they read, and statements that need an
``i1`` or a memref exist only in the bodies of regions that have one (the
statement families below, one per (``%flag`` operand?, ``%mem`` operand?)).

Value names are prefix + number in emission order (``%v`` i32 results,
``%x`` index constants, ``%s`` positive index constants usable as a step,
``%a``/``%c``/``%m`` block arguments, ``%i`` induction variables, ``%k``
loop-carried values), numbered per region (``local``: every region starts
again at ``%a0``, as the spec's bodies all use ``%a``; MLIR lets sibling
regions reuse names, and P24 asks uniqueness only of results and graph
names).  The predicate block arguments are ``%c0``, ``%c1``, ...: P23's
``%c``.  Thread and region numbering is as in the default profile (counters
``T`` and ``R``; one ``R`` per region).
"""

from __future__ import annotations

from itertools import product

from grammars.program_shape import GRAMMAR as _DEFAULT
from grammars.program_shape import RENDERINGS as _DEFAULT_RENDERINGS
from grammars.program_shape import mlir, opts

START = "<start>"
CONTRACT = "P1-P24"
PROFILE = "wide"
#: Deep enough for 8 threads x 6 sites and three levels of blocks; statement lists
#: stop early only when they would pass it.
MAX_DEPTH = 60

MAX_THREADS = 8
MAX_SITES = 6
MAX_DEPTH_OF_BLOCKS = 3
#: How many ranks an operand choice has (0 = the most recent value of its type).
RANKS = {"i32": 6, "i1": 2, "memref": 2, "index": 4, "step": 3}

_I32_LITERALS = ["0", "1", "2", "3", "7", "-1", "42", "-2147483648", "2147483647"]
_BINARY = ["addi", "subi", "muli", "andi", "ori", "xori"]


def _counted(symbol: str, maximum: int, one: float, two: float) -> list:
    """1..maximum copies of ``symbol``: one and two with these probabilities, the rest
    sharing what is left evenly (small programs common, the maximum still often seen)."""
    rest = (1 - one - two) / (maximum - 2) if maximum > 2 else 0.0
    probs = [one, two, *[rest] * (maximum - 2)][:maximum]
    return [(symbol * k, opts(prob=p, label=str(k))) for k, p in zip(range(1, maximum + 1), probs)]


def _uses(kinds: tuple[str, ...], ranks: int) -> list:
    return [(f"$^{k}", opts(use=list(kinds) if len(kinds) > 1 else kinds[0], label=f"^{k}"))
            for k in range(ranks)]


GRAMMAR: dict[str, list] = {
    START: ["<module>"],
    "<module>": _DEFAULT["<module>"],
    "<preamble>": _DEFAULT["<preamble>"],
    "<helper-double>": _DEFAULT["<helper-double>"],
    "<extern-scale>": _DEFAULT["<extern-scale>"],
    "<host-container>": _DEFAULT["<host-container>"],
    "<threads>": _counted("<thread>", MAX_THREADS, 0.7, 0.2),
    "<thread>": _DEFAULT["<thread>"],
    "<thread-open>": _DEFAULT["<thread-open>"],
    "<bounds>": _DEFAULT["<bounds>"],
    "<top-call>": _DEFAULT["<top-call>"],
    "<icall>": _DEFAULT["<icall>"],
    "<sites>": _counted("<site>", MAX_SITES, 0.65, 0.2),
    "<thread-close>": _DEFAULT["<thread-close>"],
    "<site>": [
        ("<region>", opts(prob=2 / 4, label="none")),
        (mlir("  scf.if %flag {\n") + "<wrapped>" + mlir("  }\n"), opts(prob=1 / 4, indent=2, label="if")),
        (mlir("  scf.for %iv = %lo to %hi step %stp {\n") + "<wrapped>" + mlir("  }\n"),
         opts(prob=1 / 4, indent=2, label="for")),
    ],
    "<wrapped>": _counted("<region>", 3, 0.7, 0.2),
    "<region>": [
        ("<region-0>", opts(prob=0.25, counter="R", label="0 results")),
        ("<region-1>", opts(prob=0.55, counter="R", label="1 result")),
        ("<region-2>", opts(prob=0.20, counter="R", label="2 results")),
    ],
    "<region-end>": [mlir("  })")],
    # Operands every body reads.
    "<i32>": _uses(("i32",), RANKS["i32"]),
    "<i1>": _uses(("i1",), RANKS["i1"]),
    "<memref>": _uses(("memref",), RANKS["memref"]),
    "<index>": _uses(("index", "step"), RANKS["index"]),
    "<step>": _uses(("step",), RANKS["step"]),
    "<i32-const>": [(f"$0 = arith.constant {v} : i32\n", opts(define="%v:i32", label=v)) for v in _I32_LITERALS],
    "<index-const>": [(f"$0 = arith.constant {v} : index\n", opts(define="%x:index", label=str(v)))
                      for v in range(4)],
    "<step-const>": [(f"$0 = arith.constant {v} : index\n", opts(define="%s:step", label=str(v)))
                     for v in range(1, 4)],
}

# ------------------------------------------------------------------ regions

_VALUE_OPERANDS = {"val": ("%val", "i32", "%a:i32"), "flag": ("%flag", "i1", "%c:i1")}
_RESULTS = {0: "()", 1: "i32", 2: "(i32, i32)"}


def _signatures() -> list[tuple[tuple[str, ...], int, float]]:
    """(value operands, number of %mem, weight): 0-3 of %val/%flag, 0-2 %mem, at least one."""
    out = []
    value_weight = {0: 0.2, 1: 0.4, 2: 0.25, 3: 0.15}
    mem_weight = {0: 0.55, 1: 0.3, 2: 0.15}
    for count in range(4):
        for values in product(("val", "flag"), repeat=count):
            for mems in range(3):
                if count + mems == 0:
                    continue
                # %val more often than %flag, at the same length
                bias = 1.0
                for v in values:
                    bias *= 1.2 if v == "val" else 0.8
                out.append((values, mems, value_weight[count] * mem_weight[mems] * bias / 2 ** count))
    return out


def _family(values: tuple[str, ...], mems: int) -> str:
    """c: an i1 operand; m: a memref operand; base: neither."""
    return ("c" if "flag" in values else "") + ("m" if mems else "") or "base"


def _region(values: tuple[str, ...], mems: int, results: int) -> tuple[str, dict]:
    operands = [_VALUE_OPERANDS[v][0] for v in values] + ["%mem"] * mems
    types = [_VALUE_OPERANDS[v][1] for v in values] + ["memref<4xi32>"] * mems
    binds = [_VALUE_OPERANDS[v][2] for v in values] + ["%m:memref"] * mems
    args = ", ".join(f"${k}: {t}" for k, t in enumerate(types))
    bind_result = {0: "", 1: "%r$R = ", 2: "%r$R:2 = "}[results]
    family = _family(values, mems)
    body = f"<body-{family}-{results}>" if "val" in values else f"<seeded-body-{family}-{results}>"
    text = mlir(
        f'  {bind_result}"loom.spatial_region"({", ".join(operands)}) <{{operandSegmentSizes = '
        f"array<i32: {len(values)}, 0, {mems}, 0>, resultSegmentSizes = array<i32: {results}, 0>}}> ({{\n"
        f"    ^bb0({args}):\n"
    ) + body + mlir(
        f' {{graph_name = "graph_$R", source_maps = []}} : ({", ".join(types)}) -> {_RESULTS[results]}\n'
    )
    label = ",".join(values) + ("|" + ",".join(["mem"] * mems) if mems else "")
    return text, opts(bind=binds, local=True, label=label)


_YIELDS = {
    0: mlir('"loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()\n'),
    1: mlir('"loom.spatial_yield"(') + "<i32>" + mlir(') <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()\n'),
    2: mlir('"loom.spatial_yield"(') + "<i32>, <i32>"
    + mlir(") <{operandSegmentSizes = array<i32: 2, 0>}> : (i32, i32) -> ()\n"),
}

_SIGNATURES = _signatures()
_FAMILIES = sorted({_family(values, mems) for values, mems, _ in _SIGNATURES})

for _results in range(3):
    _total = sum(w for *_, w in _SIGNATURES)
    GRAMMAR[f"<region-{_results}>"] = []
    for _values, _mems, _weight in _SIGNATURES:
        _text, _options = _region(_values, _mems, _results)
        GRAMMAR[f"<region-{_results}>"].append((_text, {**_options, "prob": _weight / _total}))
        _f = _family(_values, _mems)
        # the body's statements at column 6 (the region at 2); the region's end below them
        GRAMMAR[f"<body-{_f}-{_results}>"] = [f"<body-lines-{_f}-{_results}><region-end>"]
        GRAMMAR[f"<body-lines-{_f}-{_results}>"] = [(f"<ops-{_f}-1><yield-{_results}>", opts(indent=6))]
        if "val" not in _values:
            GRAMMAR[f"<seeded-body-{_f}-{_results}>"] = [f"<seed><body-{_f}-{_results}>"]
    GRAMMAR[f"<yield-{_results}>"] = [_YIELDS[_results]]

# A body without an i32 operand starts with an i32 constant (so <i32> always has a value).
GRAMMAR["<seed>"] = [(f"      $0 = arith.constant {v} : i32\n", opts(define="%v:i32", label=v))
                     for v in _I32_LITERALS[:4]]

# --------------------------------------------------------------- statements


def _statements(family: str, depth: int) -> dict[str, list]:
    """Statement lists of one family (c: an i1 is in scope; m: a memref is) at block depth."""
    ops, stmt, block = f"<ops-{family}-{depth}>", f"<stmt-{family}-{depth}>", f"<block-{family}-{depth + 1}>"
    rules: dict[str, list] = {
        # zero or more statements, about two on average
        ops: [("", opts(prob=0.3, label="end")), (stmt + ops, opts(prob=0.7, label="more"))],
    }
    choices: list = []

    def add(text: str, weight: float, label: str, **options) -> None:
        choices.append((text, opts(prob=weight, label=label, **options)))

    add("<i32-const>", 8, "const")
    for op in _BINARY:
        add(f"$0 = arith.{op} <i32>, <i32> : i32\n", 5, op, define="%v:i32")
    add("$0 = llvm.freeze <i32> : i32\n", 1, "freeze", define="%v:i32")
    add("$0 = func.call @helper_double(<i32>) : (i32) -> i32\n", 0.1, "func.call", define="%v:i32")
    add("$0 = llvm.call @extern_scale(<i32>) : (i32) -> i32\n", 0.1, "llvm.call", define="%v:i32")
    if "m" in family:
        add("<index-const>" + "<store>", 5, "store")
        add("<index-const>" + "<load>", 5, "load")
    if depth < MAX_DEPTH_OF_BLOCKS:
        if "c" in family:
            add(f"$0 = scf.if <i1> -> (i32) {{\n{block}}} else {{\n{block}}}\n", 4, "scf.if", define="%v:i32")
        add(f"<index-const><step-const><for-{family}-{depth}>", 4, "scf.for")
        rules[f"<for-{family}-{depth}>"] = [
            ("$0 = scf.for $1 = <index> to <index> step <step> iter_args($2 = <i32>) -> (i32) {\n"
             + block + "}\n", opts(define="%v:i32", bind=["%i:iv", "%k:i32"]))
        ]
        rules[block] = [(f"<ops-{family}-{depth + 1}><block-yield>", opts(scope=True, indent=2))]
    total = sum(o["prob"] for _, o in choices)
    rules[stmt] = [(text, {**o, "prob": o["prob"] / total}) for text, o in choices]
    return rules


GRAMMAR["<block-yield>"] = ["scf.yield <i32> : i32\n"]
GRAMMAR["<store>"] = ["memref.store <i32>, <memref>[<index>] : " + mlir("memref<4xi32>\n")]
GRAMMAR["<load>"] = [("$0 = memref.load <memref>[<index>] : " + mlir("memref<4xi32>\n"), opts(define="%v:i32"))]
for _f in _FAMILIES:
    for _depth in range(1, MAX_DEPTH_OF_BLOCKS + 1):
        GRAMMAR.update(_statements(_f, _depth))


#: The oracle rendering: threads as in the default profile, each region with a second,
#: empty region (see program_shape.py).
RENDERINGS = {"oracle": {key: _DEFAULT_RENDERINGS["oracle"][key]
                         for key in ("<thread-open>", "<thread-close>", "<region-end>")}}
