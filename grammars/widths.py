"""The ``widths`` profile (issue 47): the wide profile beyond ``i32``, leaving P22 and P23 on purpose.

The bugs reported against MLIR's arith, index, scf and range passes sit where
every wide program stays out of: other integer widths, casts between them,
``index`` arithmetic and the ``index`` dialect's folders, the ``*_extended``
operations, bit counting, ``scf.while``, ``scf.index_switch`` and
``scf.execute_region``.  loom's own front end puts ``i8``, ``i16``, ``i64``
and ``index`` values inside region bodies too.  This profile is the wide
grammar (``grammars/wide.py``: its threads, sites, regions, statements and
guards, imported, not copied) with more statements in every statement list.

It leaves exactly two preconditions (:data:`LEAVES`), and keeps the other 22:

* **P23** (all integers ``i32``): region bodies compute on ``i1``, ``i2``,
  ``i3``, ``i7``, ``i8``, ``i16``, ``i17``, ``i33``, ``i63``, ``i64`` and
  ``index``, and ``i1`` values that are not predicates (compare results,
  the overflow bit of ``addui_extended``).  Region operands and results stay
  ``i32``/``i1``/``memref<4xi32>`` (P12-P15, P18 kept): a width statement
  starts from an ``i32`` and ends in one, so the exec rendering's calls and
  prints are those of the wide profile.
* **P22** (control flow in a region is ``scf.if``/``scf.for`` with
  ``iter_args``; the leaf operations are arith's): ``scf.while``,
  ``scf.index_switch``, ``scf.execute_region``, ``scf.for`` over ``i16``,
  ``i32`` and ``i64`` induction variables, the ``index`` dialect, ``math``
  bit counting and ``ipowi``, and the two-result ``*_extended`` operations.

A width statement over a width ``W`` is ``<make-W><ops-W><back-W>``: a ``W``
value made from an ``i32`` operand (``trunci``, ``extsi``, ``extui``,
``index_cast``, ``index_castui``, ``index.casts``, ``index.castu``, a chain
through ``i64`` or ``i16``, or an edge constant of ``W``: its minimum,
maximum, -1, 0, 1), one to three operations on ``W`` values (any in scope of
that width, so statements feed each other; casts to every other width), and
a way back to ``i32`` (a cast, or a compare of ``W`` values selecting between
``i32`` values).  Every operation is defined for every input by a guard in the
same statement, as in the wide grammar (docs/explanation/defined-results.md):
divisors ``y | 1`` (odd: never 0; an odd dividend is never the minimum, so no
``MIN / -1``) or ``(y & SMAX) | 1`` (positive), shift amounts masked below the
width (below 32 for ``index``, whose width the target chooses), overflow flags
on operands masked so that the operation cannot overflow, ``ipowi`` exponents
masked to 0-7.  ``scf.while`` runs a counter from 0 while it is below a bound
of 0, 1 or 5 trips, or ``x & 7`` (input-dependent, at most 7), its condition
forwarding the loop's arguments or a value computed from them.
"""

from __future__ import annotations

from itertools import product

from grammars.program_shape import mlir, opts
from grammars.wide import GRAMMAR as _WIDE
from grammars.wide import MAX_DEPTH_OF_BLOCKS, PREDICATES, RENDERINGS, _FAMILIES, _lines, _weighted

START = "<start>"
CONTRACT = "widths"
PROFILE = "widths"
MAX_DEPTH = 60
#: The preconditions this profile leaves, and why (the checker names exactly these).
LEAVES = {
    "P22": "scf.while, scf.index_switch, scf.execute_region, integer-typed scf.for, the index "
           "dialect, math and the two-result *_extended operations in region bodies",
    "P23": "integer widths other than i32 (i1-i64, odd widths, index) inside region bodies",
}

#: Width type -> its bits (``index`` is 64 on the hosts we run on).
BITS = {"i1": 1, "i2": 2, "i3": 3, "i7": 7, "i8": 8, "i16": 16, "i17": 17, "i33": 33, "i63": 63,
        "i64": 64, "index": 64}
_ALL_BITS = {**BITS, "i32": 32}
#: How often a width statement picks each width (the common ones of C code most).
_WIDTH_WEIGHTS = {"i1": 0.5, "i2": 0.5, "i3": 0.5, "i7": 0.5, "i8": 1.5, "i16": 1.5, "i17": 0.5,
                  "i33": 0.5, "i63": 0.5, "i64": 2.0, "index": 2.5}
RANKS = 4


def kind(t: str) -> str:
    """The binder's value type of width ``t`` (``i32`` is the wide grammar's own)."""
    return "i32" if t == "i32" else "ix" if t == "index" else f"w{BITS[t]}"


def _prefix(t: str) -> str:
    return "%b" if t == "i1" else "%ix" if t == "index" else f"%w{BITS[t]}_"


def _define(t: str) -> str:
    return "%v:i32" if t == "i32" else f"{_prefix(t)}:{kind(t)}"


def safe_bits(t: str) -> int:
    """The bits a guard may count on: ``index`` is 32 or 64 bits as the target says, so 32."""
    return 32 if t == "index" else BITS[t]


def literal(value: int, t: str) -> str:
    """``value`` as an ``arith.constant`` literal of ``t`` (wrapped to signed; i1 true/false)."""
    if t == "i1":
        return "true" if value & 1 else "false"
    bits = BITS[t]
    value &= (1 << bits) - 1
    return str(value - (1 << bits) if value >> (bits - 1) else value)


def _const(t: str, value: int) -> str:
    return f"arith.constant {literal(value, t)}" + ("" if t == "i1" else f" : {t}")


def _use(t: str) -> str:
    return f"<{t}-use>"


_FLAG_SETS = ("nsw", "nuw", "nsw, nuw")

# ------------------------------------------------------------------ making a W value


def _casts(src: str, dst: str) -> list[str]:
    """The single casts from ``src`` to ``dst`` (``{x}`` the operand)."""
    if src == dst:
        return [f"arith.bitcast {{x}} : {src} to {dst}"] if src != "index" else []
    if "index" in (src, dst):
        out = [f"arith.index_cast {{x}} : {src} to {dst}", f"arith.index_castui {{x}} : {src} to {dst}"]
        if src == "index" and dst != "i1" or dst == "index" and src != "i1":
            out += [f"index.casts {{x}} : {src} to {dst}", f"index.castu {{x}} : {src} to {dst}"]
        return out
    if _ALL_BITS[src] < _ALL_BITS[dst]:
        return [f"arith.extsi {{x}} : {src} to {dst}", f"arith.extui {{x}} : {src} to {dst}"]
    return [f"arith.trunci {{x}} : {src} to {dst}"]


def _edges(t: str) -> list[int]:
    bits = safe_bits(t) if t != "index" else 64
    values = [-(1 << (bits - 1)), (1 << (bits - 1)) - 1, -1, 0, 1]
    if t == "index":  # where a 32-bit and a 64-bit index differ
        values += [-(2**31), 2**31 - 1, 2**32]
    return sorted({v if bits > 1 else v & 1 for v in values})


def _make(t: str) -> list:
    entries = []
    for cast in _casts("i32", t):
        entries.append((f"$0 = {cast.format(x='<i32>')}\n", [_define(t)], 3.0 / len(_casts("i32", t)),
                        cast.split()[0]))
    via = "i16" if _ALL_BITS[t] > 32 else "i64"
    if t == "index":
        via = "i64"
    for first, second in product(_casts("i32", via), _casts(via, t)):
        entries.append((_lines(f"$0 = {first.format(x='<i32>')}", f"$1 = {second.format(x='$0')}"),
                        [_define(via), _define(t)], 1.5 / len(_casts("i32", via)) / len(_casts(via, t)),
                        f"{first.split()[0]} {via} {second.split()[0]}"))
    for value in _edges(t):
        entries.append((f"$0 = {_const(t, value)}\n", [_define(t)], 1.5 / len(_edges(t)), f"={value}"))
    if t == "index":
        entries.append(("$0 = index.constant 2147483648\n", [_define(t)], 0.2, "index.constant"))
    return _weighted(entries)


# ------------------------------------------------------------------ operations on W

_TOTAL = ("addi", "subi", "muli", "andi", "ori", "xori", "maxsi", "minsi", "maxui", "minui")
SIGNED_DIVISIONS = ("divsi", "remsi", "ceildivsi", "floordivsi")
UNSIGNED_DIVISIONS = ("divui", "remui", "ceildivui")
INDEX_TOTAL = ("add", "sub", "mul", "and", "or", "xor", "maxs", "mins", "maxu", "minu")
INDEX_SIGNED_DIVISIONS = ("divs", "rems", "ceildivs", "floordivs")
INDEX_UNSIGNED_DIVISIONS = ("divu", "remu", "ceildivu")


def shift_mask(t: str) -> int:
    """The largest 2^k - 1 below the width (the amounts a masked shift may take)."""
    bits = safe_bits(t)
    mask = 0
    while (mask << 1 | 1) < bits:
        mask = mask << 1 | 1
    return mask


def _divisions(t: str, op_prefix: str, ops_signed, ops_unsigned, const, ori, andi, typed: str) -> list:
    """Guarded divisions: odd/odd and any/positive (signed), any/odd (unsigned)."""
    smax = (1 << (safe_bits(t) - 1)) - 1
    u = _use(t)
    entries = []
    for op in ops_signed:
        entries.append((_lines(f"$0 = {const(1)}", f"$1 = {ori} {u}, $0{typed}", f"$2 = {ori} {u}, $0{typed}",
                               f"$3 = {op_prefix}{op} $1, $2{typed}"), [_define(t)] * 4, 1.0, f"{op}|odd/odd"))
        entries.append((_lines(f"$0 = {const(smax)}", f"$1 = {andi} {u}, $0{typed}", f"$2 = {const(1)}",
                               f"$3 = {ori} $1, $2{typed}", f"$4 = {op_prefix}{op} {u}, $3{typed}"),
                        [_define(t)] * 5, 1.0, f"{op}|positive"))
    for op in ops_unsigned:
        entries.append((_lines(f"$0 = {const(1)}", f"$1 = {ori} {u}, $0{typed}", f"$2 = {op_prefix}{op} {u}, $1{typed}"),
                        [_define(t)] * 3, 1.0, f"{op}|odd"))
    return entries


def _arith_ops(t: str) -> list:
    """(text, defines, weight, label) of the arith and math operations on W."""
    u, ty, bits = _use(t), f" : {t}", safe_bits(t)
    const = lambda v: _const(t, v)  # noqa: E731
    entries = [(f"$0 = arith.{op} {u}, {u}{ty}\n", [_define(t)], 1.0, op) for op in _TOTAL]
    if bits >= 2:
        entries += [(*e[:2], e[2] * 0.6, e[3]) for e in
                    _divisions(t, "arith.", SIGNED_DIVISIONS, UNSIGNED_DIVISIONS, const, "arith.ori", "arith.andi", ty)]
    mask = shift_mask(t)
    for op in ("shli", "shrsi", "shrui"):
        entries.append((_lines(f"$0 = {const(mask)}", f"$1 = arith.andi {u}, $0{ty}", f"$2 = arith.{op} {u}, $1{ty}"),
                        [_define(t)] * 3, 1.0, f"{op}|and{mask}"))
        entries.append((_lines(f"$0 = {const(bits - 1)}", f"$1 = arith.{op} {u}, $0{ty}"),
                        [_define(t)] * 2, 0.3, f"{op}|={bits - 1}"))
    if bits >= 3:
        entries += _flagged(t)
    entries += [(_lines(f"$0 = arith.cmpi {p}, {u}, {u}{ty}", f"$1 = arith.select $0, {u}, {u}{ty}"),
                 [_define("i1"), _define(t)], 2.0 / len(PREDICATES), f"cmpi {p}") for p in PREDICATES]
    if t != "index":  # mlir-opt-22's convert-to-llvm fails on an index addui_extended (its
        # struct keeps the index type: "llvm.extractvalue op result #0 must be LLVM dialect-compatible")
        entries.append((f"$0, $1 = arith.addui_extended {u}, {u} : {t}, i1\n", [_define(t), _define("i1")], 0.7,
                        "addui_extended"))
    for op in ("mulsi_extended", "mului_extended"):
        entries.append((f"$0, $1 = arith.{op} {u}, {u}{ty}\n", [_define(t), _define(t)], 0.7, op))
    if t != "index":
        for op in ("absi", "ctlz", "cttz", "ctpop"):
            entries.append((f"$0 = math.{op} {u}{ty}\n", [_define(t)], 0.6, op))
        if bits >= 3:
            entries.append((_lines(f"$0 = {const(7 if bits > 3 else 3)}", f"$1 = arith.andi {u}, $0{ty}",
                                   f"$2 = math.ipowi {u}, $1{ty}"), [_define(t)] * 3, 0.6, "ipowi"))
    for other in BITS:
        for cast in _casts(t, other):
            entries.append((f"$0 = {cast.format(x=u)}\n", [_define(other)], 1.5 / len(BITS) / len(_casts(t, other)),
                            f"{cast.split()[0]} {other}"))
    return entries


def _flagged(t: str) -> list:
    """addi/subi/muli/shli with overflow flags on operands that cannot overflow."""
    u, ty, bits = _use(t), f" : {t}", safe_bits(t)
    add = (1 << (bits - 2)) - 1  # a + b and a - b of [0, add] fit in bits - 1
    mul = (1 << ((bits - 1) // 2)) - 1  # a * b of [0, mul] is below 2^(bits-1)
    high = (bits - 1) // 2
    amount = 0  # x < 2^high shifted by at most `amount` stays below 2^(bits-1)
    while (amount << 1 | 1) <= bits - 1 - high:
        amount = amount << 1 | 1
    entries = []
    for flags in _FLAG_SETS:
        flag = mlir(f" overflow<{flags}>")
        for op, mask in (("addi", add), ("muli", mul)):
            entries.append((_lines(f"$0 = {_const(t, mask)}", f"$1 = arith.andi {u}, $0{ty}",
                                   f"$2 = arith.andi {u}, $0{ty}", f"$3 = arith.{op} $1, $2{flag}{ty}"),
                            [_define(t)] * 4, 0.5, f"{op}|mask{mask} {flags}"))
        entries.append((_lines(f"$0 = {_const(t, (1 << high) - 1)}", f"$1 = arith.andi {u}, $0{ty}",
                               f"$2 = {_const(t, amount)}", f"$3 = arith.andi {u}, $2{ty}",
                               f"$4 = arith.shli $1, $3{flag}{ty}"), [_define(t)] * 5, 0.5, f"shli|mask {flags}"))
    # hi - lo with lo = minui(z, hi) <= hi (unsigned)
    entries.append((_lines(f"$0 = arith.maxui {u}, {u}{ty}", f"$1 = arith.minui {u}, $0{ty}",
                           f"$2 = arith.subi $0, $1{mlir(' overflow<nuw>')}{ty}"), [_define(t)] * 3,
                    0.5, "subi|minmax nuw"))
    entries.append((_lines(f"$0 = {_const(t, add)}", f"$1 = arith.andi {u}, $0{ty}", f"$2 = arith.andi {u}, $0{ty}",
                           f"$3 = arith.subi $1, $2{mlir(' overflow<nsw>')}{ty}"), [_define(t)] * 4, 0.5,
                    f"subi|mask{add} nsw"))
    return entries


def _index_ops() -> list:
    """The index dialect: arithmetic, guarded divisions, masked shifts, compares."""
    u = _use("index")
    const = lambda v: f"index.constant {v}"  # noqa: E731
    entries = [(f"$0 = index.{op} {u}, {u}\n", [_define("index")], 0.8, f"index.{op}") for op in INDEX_TOTAL]
    entries += [(*e[:2], e[2] * 0.6, "index." + e[3]) for e in
                _divisions("index", "index.", INDEX_SIGNED_DIVISIONS, INDEX_UNSIGNED_DIVISIONS, const,
                           "index.or", "index.and", "")]
    for op in ("shl", "shrs", "shru"):
        entries.append((_lines(f"$0 = {const(31)}", f"$1 = index.and {u}, $0", f"$2 = index.{op} {u}, $1"),
                        [_define("index")] * 3, 0.8, f"index.{op}|and31"))
    entries += [(_lines(f"$0 = index.cmp {p}({u}, {u})", f"$1 = arith.select $0, {u}, {u} : index"),
                 [_define("i1"), _define("index")], 1.5 / len(PREDICATES), f"index.cmp {p}") for p in PREDICATES]
    entries.append(("$0 = index.bool.constant true\n", [_define("i1")], 0.1, "index.bool.constant"))
    return entries


def _back(t: str) -> list:
    """Back to an i32 (the region's world): a cast, or a compare of W selecting i32 values."""
    u = _use(t)
    entries = [(f"$0 = {cast.format(x=u)}\n", ["%v:i32"], 2.0 / len(_casts(t, "i32")), cast.split()[0])
               for cast in _casts(t, "i32")]
    compare = (lambda p: f"index.cmp {p}({u}, {u})") if t == "index" else (lambda p: f"arith.cmpi {p}, {u}, {u} : {t}")
    entries += [(_lines(f"$0 = {compare(p)}", "$1 = arith.select $0, <i32>, <i32> : i32"),
                 [_define("i1"), "%v:i32"], 1.0 / len(PREDICATES), f"cmpi {p}") for p in PREDICATES]
    return _weighted(entries)


GRAMMAR: dict[str, list] = dict(_WIDE)
for _t in BITS:
    GRAMMAR[_use(_t)] = [(f"$^{k}", opts(use=kind(_t), label=f"^{k}")) for k in range(RANKS)]
    GRAMMAR[f"<make-{_t}>"] = _make(_t)
    GRAMMAR[f"<op-{_t}>"] = _weighted(_arith_ops(_t) + (_index_ops() if _t == "index" else []))
    GRAMMAR[f"<ops-{_t}>"] = [(f"<op-{_t}>", opts(prob=0.55, label="1")),
                              (f"<op-{_t}><op-{_t}>", opts(prob=0.3, label="2")),
                              (f"<op-{_t}><op-{_t}><op-{_t}>", opts(prob=0.15, label="3"))]
    GRAMMAR[f"<back-{_t}>"] = _back(_t)
_WIDTH_TOTAL = sum(_WIDTH_WEIGHTS.values())
GRAMMAR["<width>"] = [(f"<make-{t}><ops-{t}><back-{t}>", opts(prob=w / _WIDTH_TOTAL, label=t))
                      for t, w in _WIDTH_WEIGHTS.items()]

# ------------------------------------------------------------------ control flow beyond scf.if/scf.for

#: scf.while bounds: (lines defining the bound as their last value, label); the counter runs
#: from 0 while it is below the bound (slt), so the trip count is the bound: 0, 1, 5 or x & 7.
_WHILE_BOUNDS = {
    "0 trips": ["$0 = arith.constant 0 : i32"],
    "1 trip": ["$0 = arith.constant 1 : i32"],
    "5 trips": ["$0 = arith.constant 5 : i32"],
    "x&7 trips": ["$0 = arith.constant 7 : i32", "$1 = arith.andi <i32>, $0 : i32"],
}


def _whiles(family: str, depth: int) -> list:
    """scf.while over (counter, value): the condition forwards both, or the value changed."""
    block = f"<while-block-{family}-{depth + 1}>"
    out = []
    for (label, bound), forward in product(_WHILE_BOUNDS.items(), ("args", "xori")):
        n = len(bound)
        # defines: the bound's lines, zero, the two results, the condition[, the forwarded value];
        # then the binds (counter, value), named the same in both regions (sibling regions may)
        z, r0, r1, c, k = n, n + 1, n + 2, n + 4, n + 5
        cond = [f"${n + 3} = arith.cmpi slt, ${c}, ${n - 1} : i32"]
        forwarded = f"${c}, ${k}"
        defines = ["%v:i32"] * n + ["%z:zero", "%v:i32", "%v:i32", "%cw:none"]
        if forward == "xori":
            c, k = c + 1, k + 1
            cond = [f"${n + 3} = arith.cmpi slt, ${c}, ${n - 1} : i32", f"${n + 4} = arith.xori ${k}, ${n - 1} : i32"]
            forwarded = f"${c}, ${n + 4}"
            defines.append("%cw:none")
        text = _lines(*bound, f"${z} = arith.constant 0 : i32",
                      f"${r0}, ${r1} = scf.while (${c} = ${z}, ${k} = <i32>) : (i32, i32) -> (i32, i32) {{",
                      *("  " + line for line in cond),
                      f"  scf.condition(${n + 3}) {forwarded} : i32, i32", "} do {",
                      f"^bb0(${c}: i32, ${k}: i32):") + block + "}\n"
        out.append((text, opts(prob=1 / 8, label=f"{label} {forward}", define=defines,
                               bind=["%j:counter", "%k:i32"])))
    return out


GRAMMAR["<while-yield>"] = [("$0 = arith.constant 1 : i32\n$1 = arith.addi <counter>, $0 : i32\n"
                             "scf.yield $1, <i32> : i32, i32\n", opts(define=["%v:i32", "%v:i32"]))]
GRAMMAR["<counter>"] = [("$^0", opts(use="counter"))]
_SWITCH_HEADS = {
    "x&3": (["$0 = arith.constant 3 : i32", "$1 = arith.andi <i32>, $0 : i32", "$2 = arith.index_cast $1 : i32 to index"],
            ["%v:i32", "%v:i32", "%ix:ix"]),
    "=2": (["$0 = arith.constant 2 : index"], ["%ix:ix"]),
    "=7": (["$0 = index.constant 7"], ["%ix:ix"]),
}
#: integer-typed scf.for: lower x & 3, upper y & 7, step 1 or 2, all of one type
_INT_LOOP_TYPES = {"i16": "arith.trunci {x} : i32 to i16", "i32": None, "i64": "arith.extsi {x} : i32 to i64"}


def _int_loop(t: str, step: int, block: str) -> tuple[str, dict]:
    make = _INT_LOOP_TYPES[t]
    lines = ["$0 = arith.constant 3 : i32", "$1 = arith.andi <i32>, $0 : i32", "$2 = arith.constant 7 : i32",
             "$3 = arith.andi <i32>, $2 : i32"]
    defines = ["%v:i32"] * 4
    lo, hi = "$1", "$3"
    if make:
        lines += [f"$4 = {make.format(x='$1')}", f"$5 = {make.format(x='$3')}"]
        defines += [_define(t)] * 2
        lo, hi = "$4", "$5"
    s, r = len(lines), len(lines) + 1
    lines += [f"${s} = arith.constant {step} : {t}"]
    defines += [_define(t), "%v:i32"]
    text = _lines(*lines) + (f"${r} = scf.for ${r + 1} = {lo} to {hi} step ${s} iter_args(${r + 2} = <i32>) "
                             f"-> (i32) : {t} {{\n") + block + "}\n"
    return text, opts(prob=1 / 2, label=f"step {step}", define=defines, bind=["%i:" + kind(t), "%k:i32"])


def _control(family: str, depth: int) -> dict[str, list]:
    block = f"<block-{family}-{depth + 1}>"  # the wide grammar's block: statements, scf.yield of an i32
    rules = {
        f"<while-{family}-{depth}>": _whiles(family, depth),
        f"<while-block-{family}-{depth + 1}>": [(f"<ops-{family}-{depth + 1}><while-yield>", opts(scope=True, indent=2))],
        f"<switch-{family}-{depth}>": [
            (_lines(*head) + f"${len(head)} = scf.index_switch ${len(head) - 1} -> i32\ncase 0 {{\n{block}}}\n"
             f"case 2 {{\n{block}}}\ndefault {{\n{block}}}\n",
             opts(prob=1 / len(_SWITCH_HEADS), label=label, define=[*defines, "%v:i32"]))
            for label, (head, defines) in _SWITCH_HEADS.items()],
        # the type, then the step: two decisions
        f"<for-int-{family}-{depth}>": [(f"<for-{t}-{family}-{depth}>", opts(prob=1 / len(_INT_LOOP_TYPES), label=t))
                                        for t in _INT_LOOP_TYPES],
        **{f"<for-{t}-{family}-{depth}>": [_int_loop(t, step, block) for step in (1, 2)] for t in _INT_LOOP_TYPES},
    }
    return rules


def _extend(family: str, depth: int) -> None:
    """The wide statement list of (family, depth) with the widths and the new control flow."""
    stmt = f"<stmt-{family}-{depth}>"
    old = [(text, dict(o)) for text, o in GRAMMAR[stmt]]
    wide_total = 1.0
    new = [("<width>", 0.3, "width")]
    if depth < MAX_DEPTH_OF_BLOCKS:
        GRAMMAR.update(_control(family, depth))
        # rarer than the wide statements' loops: each holds whole blocks of statements (the
        # switch three), and generation must stay within 2x of wide's programs/s
        new += [(f"<while-{family}-{depth}>", 0.025, "scf.while"), (f"<switch-{family}-{depth}>", 0.01, "scf.index_switch"),
                (f"$0 = scf.execute_region -> i32 {{\n<block-{family}-{depth + 1}>}}\n", 0.01, "scf.execute_region"),
                (f"<for-int-{family}-{depth}>", 0.015, "integer scf.for")]
    total = wide_total + sum(w for _, w, _ in new)
    GRAMMAR[stmt] = [(text, {**o, "prob": o["prob"] / total}) for text, o in old] + [
        (text, opts(prob=w / total, label=label, **({"define": "%v:i32"} if text.startswith("$0") else {})))
        for text, w, label in new]


for _f in _FAMILIES:
    for _depth in range(1, MAX_DEPTH_OF_BLOCKS + 1):
        _extend(_f, _depth)

__all__ = ["BITS", "CONTRACT", "GRAMMAR", "LEAVES", "MAX_DEPTH", "PROFILE", "RENDERINGS", "START"]
