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
  ``muli``, ``andi``, ``ori``, ``xori``, ``maxsi``/``minsi``/``maxui``/
  ``minui``, ``llvm.freeze``, ``memref.load`` / ``memref.store`` on a memory
  operand at an index constant of the region (P19), also as store-then-load
  of the same or another index, calls to ``@helper_double`` /
  ``@extern_scale`` (P20, rare), nested ``scf.if %c -> (i32)`` with both
  branches and ``scf.for`` with ``iter_args`` over bounds defined in the
  region (P22), blocks nested up to depth 4;
* issue 23's vocabulary, each construct defined for every input by a guard in
  the same statement (docs/explanation/defined-results.md): ``divsi``,
  ``divui``, ``remsi``, ``remui``, ``ceildivsi``, ``floordivsi`` with guarded
  divisors, ``shli``/``shrsi``/``shrui`` by masked amounts, ``cmpi`` (all ten
  predicates; the i1 is a ``%c`` predicate, P23) feeding ``scf.if`` and
  ``arith.select``, ``addi``/``subi``/``muli`` with overflow flags on
  operands that cannot overflow, and ``scf.for`` loops from 0 or 1 to
  ``index_cast`` of a masked i32 (0-7 trips) carrying one or two values;
* range-known values (issue 35, ``<ranged>``, ``<ranged-select>``,
  ``<ranged-if>``): an i32 clamped by ``maxsi``/``minsi`` or ``maxui``/``minui``
  to a few values next to an edge value (INT_MIN, INT_MAX, -1, 0, 1, 2^k) or
  to one exactly, bits pinned by a mask and ``ori``/``xori``, the sign bit set
  or cleared, two constants merged by ``arith.select`` or by an ``scf.if``
  yielding one from each branch: what an integer range analysis knows exactly
  or tightly.  Each is total (no guard needed); its value is the statement's
  last, so the next operation's operand often reads it.

Operands are values defined earlier in scope, of the right type, by
construction: the core's binder (``harness.core.scope``).  Block arguments,
induction variables and loop-carried values are ``bind``; every operation
result is ``define``; each operand is a ``use`` whose rank is one more choice
of the choice sequence.  The grammar is written so that a value of every
type an operand needs is always in scope (the compiler checks it): a body
without an ``i32`` operand starts with an ``i32`` constant, memory operations
and loops bring the index constants they read, and statements that need an
``i1`` or a memref exist only in the bodies of regions that have one (the
statement families below, one per (``%flag`` operand?, ``%mem`` operand?)); a
``cmpi`` turns the rest of its statement list into the family with an i1.

Value names are prefix + number in emission order (``%v`` i32 results,
``%x`` index constants, ``%s`` positive index constants usable as a step,
``%n`` data-driven loop bounds (their own type: never a memory index),
``%a``/``%c``/``%m`` block arguments, ``%i`` induction variables, ``%k``
loop-carried values), numbered per region (``local``: every region starts
again at ``%a0``, as the spec's bodies all use ``%a``; MLIR lets sibling
regions reuse names, and P24 asks uniqueness only of results and graph
names).  The predicate block arguments and ``cmpi`` results are ``%c0``,
``%c1``, ...: P23's ``%c``.  Thread and region numbering is as in the default
profile (counters ``T`` and ``R``; one ``R`` per region).
"""

from __future__ import annotations

from itertools import product

from grammars.program_shape import GRAMMAR as _DEFAULT
from grammars.program_shape import RENDERINGS as _DEFAULT_RENDERINGS
from grammars.program_shape import mlir, opts

START = "<start>"
CONTRACT = "P1-P24"
PROFILE = "wide"
#: Deep enough for 8 threads x 6 sites and four levels of blocks; statement lists
#: stop early only when they would pass it.
MAX_DEPTH = 60

MAX_THREADS = 8
MAX_SITES = 6
MAX_DEPTH_OF_BLOCKS = 4
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
#
# Every statement's result is defined for every input, by construction inside the
# statement itself (docs/explanation/defined-results.md says why, construct by
# construct): a guarded operation and its guard are one alternative, the guarded
# operand read by name ($k), never by a free rank.  A statement is written as its
# lines; ``$k`` numbers its new values in order (its ``define`` list), ``<i32>`` is a
# free operand (a value defined before the statement).

_I32 = "%v:i32"


def _lines(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


def _guarded(guard: list[str], op: str, operands: str) -> tuple[str, list[str]]:
    """The guard's lines, then ``$n = arith.op OPERANDS : i32`` (n = the guard's count),
    OPERANDS naming the guard's values; and the statement's defines (all i32)."""
    n = len(guard)
    return _lines(*guard, f"${n} = arith.{op} {operands} : i32"), [_I32] * (n + 1)


#: Divisors that are >= 1 (so neither 0 nor -1): safe for every division and remainder.
_POSITIVE = {
    "and7|1": ["$0 = arith.constant 7 : i32", "$1 = arith.andi <i32>, $0 : i32",
               "$2 = arith.constant 1 : i32", "$3 = arith.ori $1, $2 : i32"],
    "andmax|1": ["$0 = arith.constant 2147483647 : i32", "$1 = arith.andi <i32>, $0 : i32",
                 "$2 = arith.constant 1 : i32", "$3 = arith.ori $1, $2 : i32"],
    "maxsi1": ["$0 = arith.constant 1 : i32", "$1 = arith.maxsi <i32>, $0 : i32"],
    **{f"={k}": [f"$0 = arith.constant {k} : i32"] for k in ("1", "2", "3", "7", "2147483647")},
}
#: Divisors that are not 0 but may be negative (or huge unsigned): unsigned operations only.
_NONZERO = {
    "or1": ["$0 = arith.constant 1 : i32", "$1 = arith.ori <i32>, $0 : i32"],
    "ormin": ["$0 = arith.constant -2147483648 : i32", "$1 = arith.ori <i32>, $0 : i32"],
    "maxui1": ["$0 = arith.constant 1 : i32", "$1 = arith.maxui <i32>, $0 : i32"],
    "=-1": ["$0 = arith.constant -1 : i32"],
}
#: Signed division by any non-zero divisor, the dividend kept from INT_MIN: x | 1 is odd
#: and x & INT_MAX is not negative (so never INT_MIN / -1), the divisor y | 1 is odd.
_SIGNED_PAIRS = {
    "odd/odd": (["$0 = arith.constant 1 : i32", "$1 = arith.ori <i32>, $0 : i32",
                 "$2 = arith.ori <i32>, $0 : i32"], "$1, $2"),
    "nonneg/odd": (["$0 = arith.constant 2147483647 : i32", "$1 = arith.andi <i32>, $0 : i32",
                    "$2 = arith.constant 1 : i32", "$3 = arith.ori <i32>, $2 : i32"], "$1, $3"),
}
SIGNED_DIVISIONS = ("divsi", "remsi", "ceildivsi", "floordivsi")
UNSIGNED_DIVISIONS = ("divui", "remui")
SHIFTS = ("shli", "shrsi", "shrui")
MIN_MAX = ("maxsi", "minsi", "maxui", "minui")
PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


def _weighted(entries: list[tuple[str, list[str], float, str]]) -> list:
    """Alternatives from (text, defines, weight, label), the weights made probabilities."""
    total = sum(w for _, _, w, _ in entries)
    return [(text, opts(prob=w / total, label=label, define=defines)) for text, defines, w, label in entries]


#: ceildivsi and floordivsi half as often: loom rejects them (no canonical actors), so a fifth
#: of the divisions rather than a third keeps most wide programs publishable by loom-opt.
_DIVISION_WEIGHTS = {"divsi": 1.0, "remsi": 1.0, "ceildivsi": 0.5, "floordivsi": 0.5, "divui": 1.0, "remui": 1.0}


def _divisions() -> list:
    entries = []
    for op, op_weight in _DIVISION_WEIGHTS.items():
        signed = op in SIGNED_DIVISIONS
        for name, guard in _POSITIVE.items():
            weight = op_weight * (0.3 / 5 if name.startswith("=") else 0.7 / 3)
            entries.append((*_guarded(guard, op, f"<i32>, ${len(guard) - 1}"), weight, f"{op}|{name}"))
        extra = _SIGNED_PAIRS if signed else {n: (g, f"<i32>, ${len(g) - 1}") for n, g in _NONZERO.items()}
        for name, (guard, operands) in extra.items():
            entries.append((*_guarded(guard, op, operands), op_weight / len(extra), f"{op}|{name}"))
    return _weighted(entries)


def _shifts() -> list:
    entries = []
    for op in SHIFTS:
        for mask, weight in (("31", 0.75), ("7", 0.1)):
            guard = [f"$0 = arith.constant {mask} : i32", "$1 = arith.andi <i32>, $0 : i32"]
            entries.append((*_guarded(guard, op, "<i32>, $1"), weight, f"{op}|and{mask}"))
        for amount in ("0", "1", "31"):
            entries.append((*_guarded([f"$0 = arith.constant {amount} : i32"], op, "<i32>, $0"), 0.05,
                            f"{op}|={amount}"))
    return _weighted(entries)


def _flagged() -> list:
    """addi/subi/muli with overflow flags, where the operands cannot overflow."""
    entries = []
    for op, masks, flags in (("addi", ("255", "32767", "1073741823"), "<flags-any>"),
                             ("muli", ("255", "32767"), "<flags-any>"),
                             ("subi", ("255", "32767", "1073741823"), "<flags-nsw>")):
        for mask in masks:  # both operands in [0, mask]: the sum, product or difference fits
            guard = [f"$0 = arith.constant {mask} : i32", "$1 = arith.andi <i32>, $0 : i32",
                     "$2 = arith.andi <i32>, $0 : i32"]
            entries.append((*_guarded(guard, op, "$1, $2" + flags), 1.0 / len(masks), f"{op}|mask{mask}"))
    # a - b with a >= 256 (bit 8 set, so also >= INT_MIN + 256) and 0 <= b <= 255
    guard = ["$0 = arith.constant 256 : i32", "$1 = arith.ori <i32>, $0 : i32",
             "$2 = arith.constant 255 : i32", "$3 = arith.andi <i32>, $2 : i32"]
    entries.append((*_guarded(guard, "subi", "$1, $3<flags-any>"), 0.7, "subi|ordered"))
    # hi - lo with hi = maxui(x, y) and lo = minui(z, hi) <= hi (unsigned)
    guard = ["$0 = arith.maxui <i32>, <i32> : i32", "$1 = arith.minui <i32>, $0 : i32"]
    entries.append((*_guarded(guard, "subi", "$0, $1<flags-nuw>"), 0.3, "subi|minmax"))
    return _weighted(entries)


#: Range-known values (issue 35): results an analysis knows to lie in a few values next to
#: an edge value (INT_MIN, INT_MIN+1, -1, 0, 1, 2^k, INT_MAX-1, INT_MAX), or exactly.  Every
#: operation here is total (min/max, masks, constants, select, scf.if): nothing to guard.  The
#: ranged value is the statement's last one (rank 0 of the next free <i32>), so the operand
#: of the next division, shift, comparison, min/max or flagged operation often reads it (a
#: divisor or shift amount still through its own guard).
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
#: maxsi(x, LO) then minsi(_, HI), or the other order: [LO, HI] (a constant where LO == HI,
#: HI where LO > HI).
_SIGNED_CLAMPS = [(INT_MIN, INT_MIN + 3), (INT_MIN + 1, INT_MIN + 4), (INT_MAX - 3, INT_MAX),
                  (INT_MAX - 4, INT_MAX - 1), (-2, 1), (-1, 2), (255, 257), (2**30 - 1, 2**30 + 1),
                  (INT_MIN, INT_MIN), (INT_MAX, INT_MAX), (-1, -1), (INT_MAX, INT_MIN)]
#: one bound: maxsi(x, C) is [C, INT_MAX], minsi(x, C) is [INT_MIN, C]
_SIGNED_BOUNDS = [("maxsi", INT_MAX - 7), ("maxsi", INT_MAX - 1), ("maxsi", -1), ("maxsi", 2**30),
                  ("minsi", INT_MIN + 7), ("minsi", INT_MIN + 1), ("minsi", 0), ("minsi", -2**30)]
#: maxui(x, LO) then minui(_, HI), both unsigned (written signed): [LO, HI] in the unsigned
#: order, so (INT_MAX-1, INT_MIN+1) is {INT_MAX-1, INT_MAX, INT_MIN, INT_MIN+1}, across
#: the signed wrap; one bound: maxui(x, -4) is {-4..-1}, minui(x, C) is [0, C]
_UNSIGNED_CLAMPS = [(1, 2), (INT_MAX - 1, INT_MIN + 1), (INT_MIN, INT_MIN + 3), (2**16 - 1, 2**16 + 1)]
_UNSIGNED_BOUNDS = [("maxui", -4), ("maxui", INT_MIN), ("minui", 3), ("minui", 1)]
#: (x & M) OP B with B & M == 0: [B, B + M] (OP ori or xori); and the sign bit or low bits pinned
_PINS = [("ori", 3, INT_MIN), ("ori", 1, INT_MAX - 1), ("ori", 3, INT_MAX - 3), ("ori", 1, -2),
         ("ori", 7, -8), ("ori", 1, 2**30), ("ori", 1, 2), ("xori", 1, INT_MIN), ("xori", 3, -1),
         ("xori", 7, INT_MAX - 7)]
_SIGN_PINS = [("ori", INT_MIN, "sign set"), ("andi", INT_MAX, "sign clear"), ("andi", -4, "low bits clear"),
              ("ori", 3, "low bits set")]
#: Two constants merged by select or scf.if on an i1: a range of two values (an analysis
#: keeps their hull, or the union), close to each other or far apart.
_PAIRS = [(INT_MIN, INT_MIN + 1), (INT_MAX, INT_MAX - 1), (-1, 0), (0, 1), (1, -1), (2, 1), (INT_MIN, INT_MAX),
          (-1, INT_MIN), (INT_MAX, 0), (2**30, 2**30 - 1)]


def _ranged() -> list:
    entries = []
    for lo, hi in _SIGNED_CLAMPS:
        lines = [f"$0 = arith.constant {lo} : i32", "$1 = arith.maxsi <i32>, $0 : i32",
                 f"$2 = arith.constant {hi} : i32", "$3 = arith.minsi $1, $2 : i32"]
        entries.append((_lines(*lines), [_I32] * 4, 0.35 / len(_SIGNED_CLAMPS) / 2, f"clamp {lo}..{hi}"))
        lines = [f"$0 = arith.constant {hi} : i32", "$1 = arith.minsi <i32>, $0 : i32",
                 f"$2 = arith.constant {lo} : i32", "$3 = arith.maxsi $1, $2 : i32"]
        entries.append((_lines(*lines), [_I32] * 4, 0.35 / len(_SIGNED_CLAMPS) / 2, f"clamp' {lo}..{hi}"))
    for op, c in _SIGNED_BOUNDS:
        lines = [f"$0 = arith.constant {c} : i32", f"$1 = arith.{op} <i32>, $0 : i32"]
        entries.append((_lines(*lines), [_I32] * 2, 0.15 / len(_SIGNED_BOUNDS), f"{op} {c}"))
    for lo, hi in _UNSIGNED_CLAMPS:
        lines = [f"$0 = arith.constant {lo} : i32", "$1 = arith.maxui <i32>, $0 : i32",
                 f"$2 = arith.constant {hi} : i32", "$3 = arith.minui $1, $2 : i32"]
        entries.append((_lines(*lines), [_I32] * 4, 0.12 / len(_UNSIGNED_CLAMPS), f"uclamp {lo}..{hi}"))
    for op, c in _UNSIGNED_BOUNDS:
        lines = [f"$0 = arith.constant {c} : i32", f"$1 = arith.{op} <i32>, $0 : i32"]
        entries.append((_lines(*lines), [_I32] * 2, 0.08 / len(_UNSIGNED_BOUNDS), f"{op} {c}"))
    for op, mask, base in _PINS:
        lines = [f"$0 = arith.constant {mask} : i32", "$1 = arith.andi <i32>, $0 : i32",
                 f"$2 = arith.constant {base} : i32", f"$3 = arith.{op} $1, $2 : i32"]
        entries.append((_lines(*lines), [_I32] * 4, 0.22 / len(_PINS), f"(x&{mask}) {op} {base}"))
    for op, c, label in _SIGN_PINS:
        lines = [f"$0 = arith.constant {c} : i32", f"$1 = arith.{op} <i32>, $0 : i32"]
        entries.append((_lines(*lines), [_I32] * 2, 0.08 / len(_SIGN_PINS), label))
    return _weighted(entries)


GRAMMAR["<ranged>"] = _ranged()
# select of two constants on an i1 (statements of families with an i1 only)
GRAMMAR["<ranged-select>"] = _weighted([
    (_lines(f"$0 = arith.constant {a} : i32", f"$1 = arith.constant {b} : i32", "$2 = arith.select <i1>, $0, $1 : i32"),
     [_I32] * 3, 1.0, f"{a}|{b}") for a, b in _PAIRS])
# scf.if yielding a constant from each branch; each constant inside its own block (scope)
GRAMMAR["<ranged-if>"] = [
    (f"$0 = scf.if <i1> -> (i32) {{\n<yield-const-{a}>}} else {{\n<yield-const-{b}>}}\n",
     opts(prob=1 / len(_PAIRS), label=f"{a}|{b}", define=_I32)) for a, b in _PAIRS]
for _v in sorted({v for pair in _PAIRS for v in pair}):
    GRAMMAR[f"<yield-const-{_v}>"] = [(f"<const-{_v}><yield-last>", opts(scope=True, indent=2))]
    GRAMMAR[f"<const-{_v}>"] = [(f"$0 = arith.constant {_v} : i32\n", opts(define=_I32))]
GRAMMAR["<yield-last>"] = ["scf.yield <last-i32> : i32\n"]
GRAMMAR["<last-i32>"] = [("$^0", opts(use="i32"))]


GRAMMAR["<division>"] = _divisions()
GRAMMAR["<shift>"] = _shifts()
GRAMMAR["<flagged>"] = _flagged()
# MLIR 15 and 16 do not parse overflow<...>: harness/execute/releases.py leaves the flags out of
# the rendered text for such a target (a rendering blanking them would not parse back)
GRAMMAR["<flags-any>"] = [(mlir(f" overflow<{f}>"), opts(label=f)) for f in ("nsw", "nuw", "nsw, nuw")]
GRAMMAR["<flags-nsw>"] = [mlir(" overflow<nsw>")]
GRAMMAR["<flags-nuw>"] = [mlir(" overflow<nuw>")]
# a predicate: an i1 named %c (P23: the only i1 values are the predicates %flag and %c)
GRAMMAR["<compare>"] = [(f"$0 = arith.cmpi {p}, <i32>, <i32> : i32\n", opts(define="%c:i1", label=p))
                        for p in PREDICATES]
# a memref store, then a load of the same or of another index (of the same or the other memref)
GRAMMAR["<store-load>"] = [
    (_lines(f"$0 = arith.constant {i} : index", "memref.store <i32>, <memref>[$0] : " + mlir("memref<4xi32>"),
            *([f"$1 = memref.load <memref>[$0] : " + mlir("memref<4xi32>")] if i == j else
              [f"$1 = arith.constant {j} : index", "$2 = memref.load <memref>[$1] : " + mlir("memref<4xi32>")])),
     opts(prob=(0.5 / 4 if i == j else 0.5 / 12), label=f"{i}->{j}",
          define=["%x:index", _I32] if i == j else ["%x:index", "%x:index", _I32]))
    for i in range(4) for j in range(4)
]
#: Trip counts of the data-driven loops: bound = index_cast(x & mask), from `lower` by `step`.
_LOOP_MASKS = {"7": 0.6, "3": 0.25, "1": 0.15}
_LOOP_STEPS = {("0", "1"): 0.7, ("1", "1"): 0.1, ("0", "2"): 0.1, ("1", "2"): 0.1}
# The head of a data-driven loop: its bounds, defined last in the order the loop reads them
# at rank 0 (<loop-lower> the index, <loop-bound> the bound, <loop-step> the step).
GRAMMAR["<loop-head>"] = [
    (_lines(f"$0 = arith.constant {mask} : i32", "$1 = arith.andi <i32>, $0 : i32",
            "$2 = arith.index_cast $1 : i32 to index", f"$3 = arith.constant {lower} : index",
            f"$4 = arith.constant {step} : index"),
     opts(prob=mw * sw, label=f"&{mask} {lower}:{step}",
          define=[_I32, _I32, "%n:bound", "%x:index", "%s:step"]))
    for (mask, mw), ((lower, step), sw) in product(_LOOP_MASKS.items(), _LOOP_STEPS.items())
]
GRAMMAR["<loop-lower>"] = [("$^0", opts(use="index"))]
GRAMMAR["<loop-bound>"] = [("$^0", opts(use="bound"))]
GRAMMAR["<loop-step>"] = [("$^0", opts(use="step"))]
_LOOP_HEADER = "scf.for $%d = <loop-lower> to <loop-bound> step <loop-step> iter_args("


def _data_loops(block: str, block2: str) -> list:
    """scf.for over [lower, index_cast(x & mask)) by step, carrying one or two i32."""
    return [
        ("<loop-head>$0 = " + _LOOP_HEADER % 1 + "$2 = <i32>) -> (i32) {\n" + block + "}\n",
         opts(prob=0.7, label="x1", define=_I32, bind=["%i:iv", "%k:i32"])),
        ("<loop-head>$0, $1 = " + _LOOP_HEADER % 2 + "$3 = <i32>, $4 = <i32>) -> (i32, i32) {\n" + block2 + "}\n",
         opts(prob=0.3, label="x2", define=[_I32, _I32], bind=["%i:iv", "%k:i32", "%k:i32"])),
    ]


def _statements(family: str, depth: int) -> dict[str, list]:
    """Statement lists of one family (c: an i1 is in scope; m: a memref is) at block depth."""
    ops, stmt, block = f"<ops-{family}-{depth}>", f"<stmt-{family}-{depth}>", f"<block-{family}-{depth + 1}>"
    block2 = f"<block2-{family}-{depth + 1}>"
    more = [("", opts(prob=0.3, label="end")), (stmt + ops, opts(prob=0.7, label="more"))]
    if "c" not in family:  # a comparison: the rest of the list may branch and select on it
        with_c = "c" if family == "base" else "c" + family
        more = [("", opts(prob=0.3, label="end")), (stmt + ops, opts(prob=0.64, label="more")),
                (f"<compare><ops-{with_c}-{depth}>", opts(prob=0.06, label="compare"))]
    rules: dict[str, list] = {ops: more}  # zero or more statements, about two on average
    choices: list = []

    def add(text: str, weight: float, label: str, **options) -> None:
        choices.append((text, opts(prob=weight, label=label, **options)))

    add("<i32-const>", 8, "const")
    for op in _BINARY:
        add(f"$0 = arith.{op} <i32>, <i32> : i32\n", 4, op, define=_I32)
    for op in MIN_MAX:
        add(f"$0 = arith.{op} <i32>, <i32> : i32\n", 1.5, op, define=_I32)
    add("<division>", 7, "division")
    add("<shift>", 5, "shift")
    add("<flagged>", 5, "overflow flags")
    add("<ranged>", 5, "range-known")
    add("$0 = llvm.freeze <i32> : i32\n", 1, "freeze", define=_I32)
    add("$0 = func.call @helper_double(<i32>) : (i32) -> i32\n", 0.1, "func.call", define=_I32)
    add("$0 = llvm.call @extern_scale(<i32>) : (i32) -> i32\n", 0.1, "llvm.call", define=_I32)
    if "c" in family:
        add("<compare>", 3, "cmpi")
        add("$0 = arith.select <i1>, <i32>, <i32> : i32\n", 4, "select", define=_I32)
        add("<ranged-select>", 2, "select of constants")
    if "m" in family:
        add("<index-const>" + "<store>", 5, "store")
        add("<index-const>" + "<load>", 5, "load")
        add("<store-load>", 4, "store-load")
    if depth < MAX_DEPTH_OF_BLOCKS:
        if "c" in family:
            add(f"$0 = scf.if <i1> -> (i32) {{\n{block}}} else {{\n{block}}}\n", 4, "scf.if", define=_I32)
            add("<ranged-if>", 1.5, "scf.if of constants")
        add(f"<index-const><step-const><for-{family}-{depth}>", 3, "scf.for")
        add(f"<data-for-{family}-{depth}>", 3, "data scf.for")
        rules[f"<for-{family}-{depth}>"] = [
            ("$0 = scf.for $1 = <index> to <index> step <step> iter_args($2 = <i32>) -> (i32) {\n"
             + block + "}\n", opts(define=_I32, bind=["%i:iv", "%k:i32"]))
        ]
        rules[f"<data-for-{family}-{depth}>"] = _data_loops(block, block2)
        rules[block] = [(f"<ops-{family}-{depth + 1}><block-yield>", opts(scope=True, indent=2))]
        rules[block2] = [(f"<ops-{family}-{depth + 1}><block-yield-2>", opts(scope=True, indent=2))]
    total = sum(o["prob"] for _, o in choices)
    rules[stmt] = [(text, {**o, "prob": o["prob"] / total}) for text, o in choices]
    return rules


GRAMMAR["<block-yield>"] = ["scf.yield <i32> : i32\n"]
GRAMMAR["<block-yield-2>"] = ["scf.yield <i32>, <i32> : i32, i32\n"]
GRAMMAR["<store>"] = ["memref.store <i32>, <memref>[<index>] : " + mlir("memref<4xi32>\n")]
GRAMMAR["<load>"] = [("$0 = memref.load <memref>[<index>] : " + mlir("memref<4xi32>\n"), opts(define=_I32))]
for _f in _FAMILIES:
    for _depth in range(1, MAX_DEPTH_OF_BLOCKS + 1):
        GRAMMAR.update(_statements(_f, _depth))


#: The oracle rendering: threads as in the default profile, each region with a second,
#: empty region (see program_shape.py).
RENDERINGS = {"oracle": {key: _DEFAULT_RENDERINGS["oracle"][key]
                         for key in ("<thread-open>", "<thread-close>", "<region-end>")}}
