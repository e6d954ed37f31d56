"""Edge values and what arith computes with them: concrete values and known intervals.

The edge classes of an ``i32`` operand (:data:`I32_CLASSES`) are the values where
folders and range analyses go wrong: ``0``, ``1``, ``-1``, ``2``, ``INT_MIN``,
``INT_MIN+1``, ``INT_MAX``, ``INT_MAX-1`` and the powers of two ``2^k``
(``k`` 2..30: 4 to 2^30; 2 is its own class).  An ``i1`` operand has two:
``true`` and ``false``.  Every other width has the same classes at its own
bounds (issue 47: the minimum of ``i8`` is not that of ``i64``), named with the
width so that they never merge with ``i32``'s: ``i8:MIN``, ``i8:MAX-1``,
``index:0``, ``i17:2^k`` (:func:`edge_classes`); where a narrow width makes two
classes one value (``i2``'s 1 is its ``MAX``) the bound's name wins.

Values are Python ints: ``i32`` (and ``i64``, ``index``) signed, ``i1`` 0/1, as
:mod:`harness.execute.interpret` keeps them (this module shares no code with it).
:func:`concrete` is one operation on known operands; it raises :class:`Undefined`
where MLIR gives no value (division by zero, ``INT_MIN / -1``, a shift by the
width or more, a violated ``nsw``/``nuw`` flag: poison).  :func:`interval` is
the same operation on known intervals ``(lo, hi)`` (signed; a constant is
``(v, v)``; the whole type is what nothing is known of): the exact hull when the
operands are small enough to enumerate, else a sound rule for the operations a
range analysis knows (``andi`` with a non-negative mask, ``minsi``/``maxsi``,
``remui``/``remsi`` by a known divisor, shifts by a known amount, casts, ...),
else the whole type.  Nothing is guessed: an operation it does not know gives the
whole type.
"""

from __future__ import annotations

__all__ = ["BITS", "EDGE_CLASSES", "I1_CLASSES", "I32_CLASSES", "NARROW", "Undefined", "bits_of", "classes_in",
           "concrete", "edge_class", "edge_classes", "full", "interval", "narrow"]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
#: The edge classes of an i32 operand, in the order tables print them.
I32_CLASSES = ("0", "1", "-1", "2", "2^k", "INT_MIN", "INT_MIN+1", "INT_MAX", "INT_MAX-1")
I1_CLASSES = ("false", "true")
EDGE_CLASSES = {"i32": I32_CLASSES, "i1": I1_CLASSES}
_I32_VALUES = {0: "0", 1: "1", -1: "-1", 2: "2", INT_MIN: "INT_MIN", INT_MIN + 1: "INT_MIN+1", INT_MAX: "INT_MAX",
               INT_MAX - 1: "INT_MAX-1"}
_POWERS = tuple(1 << k for k in range(2, 31))
#: A known interval is narrow when it holds at most this many values (and not the whole type).
NARROW = 16
#: Intervals whose product of sizes is at most this are enumerated (the exact hull).
_ENUMERATE = 256
BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}


class Undefined(Exception):
    """No value: undefined behaviour or poison."""


def bits_of(type_: str) -> int | None:
    """The width of ``iN`` or ``index`` (64: the host's); None for any other type."""
    if type_ in BITS:
        return BITS[type_]
    if type_.startswith("i") and type_[1:].isdigit() and int(type_[1:]) > 0:
        return int(type_[1:])
    return None


def _bound_values(bits: int) -> dict[int, str]:
    """value -> class of an integer width other than i32 and i1, the bounds' names first."""
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    out: dict[int, str] = {}
    for value, name in ((low, "MIN"), (high, "MAX"), (low + 1, "MIN+1"), (high - 1, "MAX-1"), (0, "0"), (1, "1"),
                        (-1, "-1"), (2, "2")):
        if low <= value <= high:
            out.setdefault(value, name)
    return out


def edge_classes(type_: str) -> tuple[str, ...]:
    """The edge classes of an operand of ``type_`` (() for a type that is not an integer)."""
    if type_ in EDGE_CLASSES:
        return EDGE_CLASSES[type_]
    bits = bits_of(type_)
    if bits is None:
        return ()
    names = list(dict.fromkeys(_bound_values(bits).values()))
    if _powers(bits):
        names.append("2^k")
    return tuple(f"{type_}:{name}" for name in names)


def _powers(bits: int) -> list[int]:
    """The powers of two of the width's 2^k class: 4 and up, below the bounds' own values."""
    return [p for p in (1 << k for k in range(2, bits - 1)) if p not in _bound_values(bits)]


def edge_class(value: int, type_: str) -> str | None:
    """The edge class of a value of ``type_`` (None: not an edge value, or not an integer)."""
    if type_ == "i1":
        return "true" if value else "false"
    if type_ == "i32":
        name = _I32_VALUES.get(value)
        if name is None and value > 2 and value & (value - 1) == 0:
            return "2^k"
        return name
    bits = bits_of(type_)
    if bits is None:
        return None
    name = _bound_values(bits).get(value)
    if name is None and value > 2 and value & (value - 1) == 0:
        name = "2^k"
    return f"{type_}:{name}" if name else None


def full(type_: str) -> tuple[int, int]:
    """The interval of every value of ``type_`` (nothing known)."""
    bits = bits_of(type_) or 64
    return (0, 1) if bits == 1 else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def narrow(known: tuple[int, int], type_: str) -> bool:
    """Whether ``known`` is a narrow range: 2..NARROW values, less than the whole type."""
    size = known[1] - known[0] + 1
    return 1 < size <= NARROW and known != full(type_)


def classes_in(known: tuple[int, int], type_: str) -> set[str]:
    """The edge classes of ``type_`` with a value inside ``known``."""
    lo, hi = known
    if type_ == "i1":
        return {name for v, name in ((0, "false"), (1, "true")) if lo <= v <= hi}
    if type_ == "i32":
        found = {name for v, name in _I32_VALUES.items() if lo <= v <= hi}
        if any(lo <= p <= hi for p in _POWERS):
            found.add("2^k")
        return found
    bits = bits_of(type_)
    if bits is None:
        return set()
    found = {f"{type_}:{name}" for v, name in _bound_values(bits).items() if lo <= v <= hi}
    if any(lo <= p <= hi for p in _powers(bits)):
        found.add(f"{type_}:2^k")
    return found


# ------------------------------------------------------------------ concrete semantics


def _wrap(value: int, bits: int) -> int:
    if bits == 1:
        return value & 1
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _u(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def _flags(exact: int, uexact: int, bits: int, flags: tuple[str, ...]) -> int:
    if "nsw" in flags and _wrap(exact, bits) != exact:
        raise Undefined("signed overflow under nsw")
    if "nuw" in flags and _u(uexact, bits) != uexact:
        raise Undefined("unsigned overflow under nuw")
    return _wrap(exact, bits)


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _divide(kind: str, a: int, b: int, bits: int) -> int:
    if b == 0:
        raise Undefined("division by zero")
    if kind in ("divui", "remui"):
        ua, ub = _u(a, bits), _u(b, bits)
        return _wrap(ua // ub if kind == "divui" else ua % ub, bits)
    if a == -(1 << (bits - 1)) and b == -1 and bits > 1:
        raise Undefined("INT_MIN / -1")
    q = _tdiv(a, b)
    if kind == "remsi":
        return _wrap(a - q * b, bits)
    if kind == "ceildivsi" and q * b != a and (a > 0) == (b > 0):
        q += 1
    if kind == "floordivsi" and q * b != a and (a > 0) != (b > 0):
        q -= 1
    return _wrap(q, bits)


def _shift(kind: str, a: int, b: int, bits: int) -> int:
    amount = _u(b, bits)
    if amount >= bits:
        raise Undefined("shift by the width or more")
    if kind == "shli":
        return _wrap(a << amount, bits)
    return _wrap(a >> amount if kind == "shrsi" else _u(a, bits) >> amount, bits)


_PREDICATES = {"eq": lambda a, b, ua, ub: a == b, "ne": lambda a, b, ua, ub: a != b,
               "slt": lambda a, b, ua, ub: a < b, "sle": lambda a, b, ua, ub: a <= b,
               "sgt": lambda a, b, ua, ub: a > b, "sge": lambda a, b, ua, ub: a >= b,
               "ult": lambda a, b, ua, ub: ua < ub, "ule": lambda a, b, ua, ub: ua <= ub,
               "ugt": lambda a, b, ua, ub: ua > ub, "uge": lambda a, b, ua, ub: ua >= ub}
_BINARY = {"addi", "subi", "muli", "andi", "ori", "xori", "maxsi", "minsi", "maxui", "minui", "divsi", "divui",
           "remsi", "remui", "ceildivsi", "floordivsi", "shli", "shrsi", "shrui", "add", "mul", "sub"}


#: The index dialect's operations (without ``index.``) as the arith ones they compute at 64 bits.
INDEX_AS_ARITH = {"and": "andi", "or": "ori", "xor": "xori", "maxs": "maxsi", "mins": "minsi", "maxu": "maxui",
                  "minu": "minui", "divs": "divsi", "divu": "divui", "rems": "remsi", "remu": "remui",
                  "ceildivs": "ceildivsi", "floordivs": "floordivsi", "shl": "shli", "shrs": "shrsi",
                  "shru": "shrui", "casts": "index_cast", "castu": "index_castui"}


def concrete(name: str, args: list[int], types: tuple[str, str], attr: object = ()) -> int:
    """One operation's value.  ``name`` without its dialect for arith (``addi``), ``llvm.add``
    as ``add``, the index dialect's as :data:`INDEX_AS_ARITH` says; ``types``: (operand type,
    result type; ``index`` for the index dialect's untyped text); ``attr``: the overflow flags,
    or cmpi's predicate.  Raises :class:`Undefined`, or KeyError for an operation it does not know."""
    name = INDEX_AS_ARITH.get(name, name)
    if not types[0] and name in _BINARY:
        types = ("index", "index")
    bits = bits_of(types[0]) or 64
    if name in _BINARY:
        a, b = args[0], args[1]
        if name in ("addi", "add"):
            return _flags(a + b, _u(a, bits) + _u(b, bits), bits, attr)
        if name in ("subi", "sub"):
            return _flags(a - b, _u(a, bits) - _u(b, bits), bits, attr)
        if name in ("muli", "mul"):
            return _flags(a * b, _u(a, bits) * _u(b, bits), bits, attr)
        if name in ("andi", "ori", "xori"):
            return _wrap(a & b if name == "andi" else a | b if name == "ori" else a ^ b, bits)
        if name in ("maxsi", "minsi"):
            return max(a, b) if name == "maxsi" else min(a, b)
        if name in ("maxui", "minui"):
            a_first = _u(a, bits) >= _u(b, bits)
            return (a if a_first else b) if name == "maxui" else (b if a_first else a)
        if name.startswith("sh"):
            return _shift(name, a, b, bits)
        return _divide(name, a, b, bits)
    if name == "cmpi":
        return int(_PREDICATES[attr](args[0], args[1], _u(args[0], bits), _u(args[1], bits)))
    if name == "select":
        return args[1] if args[0] else args[2]
    out = bits_of(types[1]) or 64
    if name in ("extsi", "trunci", "index_cast"):
        value = -args[0] if bits == 1 and name == "extsi" else args[0]  # i1 true sign-extends to -1
        return _wrap(value, out)
    if name in ("extui", "index_castui"):
        return _wrap(_u(args[0], bits), out)
    if name == "bitcast" and bits == out:
        return args[0]
    if name == "freeze":
        return args[0]
    raise KeyError(name)


# ------------------------------------------------------------------ intervals


def _hull(values) -> tuple[int, int] | None:
    values = list(values)
    return (min(values), max(values)) if values else None


def _enumerated(name: str, known: list[tuple[int, int]], types: tuple[str, str], attr) -> tuple[int, int] | None:
    results = []

    def walk(k: int, args: list[int]) -> None:
        if k == len(known):
            try:
                results.append(concrete(name, args, types, attr))
            except Undefined:
                pass  # poison may be anything: no constraint
            return
        for v in range(known[k][0], known[k][1] + 1):
            walk(k + 1, args + [v])

    walk(0, [])
    return _hull(results)


def _corners(fn, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    values = [fn(x, y) for x in a for y in b]
    return min(values), max(values)


def _rule(name: str, a: tuple[int, int], b: tuple[int, int], type_: str, attr) -> tuple[int, int] | None:
    """A sound interval for a binary operation on wide operands (None: the whole type)."""
    bits = bits_of(type_) or 64
    lo_t, hi_t = full(type_)
    nonneg_a, nonneg_b = a[0] >= 0, b[0] >= 0
    if name == "andi" and (nonneg_a or nonneg_b):
        return 0, min(x[1] for x in (a, b) if x[0] >= 0)
    if name in ("ori", "xori") and nonneg_a and nonneg_b:
        top = (1 << max(a[1], b[1]).bit_length()) - 1
        return (max(a[0], b[0]) if name == "ori" else 0), top
    if name == "minsi":
        return min(a[0], b[0]), min(a[1], b[1])
    if name == "maxsi":
        return max(a[0], b[0]), max(a[1], b[1])
    if name == "minui" and (nonneg_a or nonneg_b):
        if nonneg_a and nonneg_b:
            return min(a[0], b[0]), min(a[1], b[1])
        return 0, (a if nonneg_a else b)[1]
    if name == "maxui" and nonneg_a and nonneg_b:
        return max(a[0], b[0]), max(a[1], b[1])
    if name in ("addi", "subi", "muli", "add", "sub", "mul"):
        op = {"a": lambda x, y: x + y, "s": lambda x, y: x - y, "m": lambda x, y: x * y}[name[0]]
        lo, hi = _corners(op, a, b)
        return (lo, hi) if lo_t <= lo and hi <= hi_t else None
    if name == "remui" and b[0] >= 1:
        return 0, min(b[1] - 1, a[1] if nonneg_a else b[1] - 1)
    if name == "remsi" and (b[0] >= 1 or b[1] <= -1):
        m = max(abs(b[0]), abs(b[1])) - 1
        return (0, min(m, a[1])) if nonneg_a else (max(-m, a[0]), m if a[1] >= 0 else 0)
    if name in ("divui", "divsi") and b[0] >= 1 and (nonneg_a or name == "divui"):
        if not nonneg_a:  # unsigned: the dividend is any of 0..2^bits-1
            return (0, ((1 << bits) - 1) // b[0]) if b[0] >= 2 else None
        return a[0] // b[1], a[1] // b[0]
    if name in ("shrui", "shrsi") and 0 <= b[0] and b[1] < bits:
        if name == "shrsi":
            return _corners(lambda x, y: x >> y, a, b)
        if nonneg_a:
            return a[0] >> b[1], a[1] >> b[0]
        return (0, ((1 << bits) - 1) >> b[0]) if b[0] >= 1 else None
    return None


def _cmpi(pred: str, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    if pred.startswith("u") and not ((a[0] >= 0 and b[0] >= 0) or (a[1] < 0 and b[1] < 0)):
        return 0, 1  # the unsigned order differs from the signed one across 0
    signed = {"ult": "slt", "ule": "sle", "ugt": "sgt", "uge": "sge"}.get(pred, pred)
    always = {"eq": a[0] == a[1] == b[0] == b[1], "ne": a[1] < b[0] or b[1] < a[0], "slt": a[1] < b[0],
              "sle": a[1] <= b[0], "sgt": a[0] > b[1], "sge": a[0] >= b[1]}
    never = {"eq": a[1] < b[0] or b[1] < a[0], "ne": a[0] == a[1] == b[0] == b[1], "slt": a[0] >= b[1],
             "sle": a[0] > b[1], "sgt": a[1] <= b[0], "sge": a[1] < b[0]}
    return (1, 1) if always[signed] else (0, 0) if never[signed] else (0, 1)


def _cast(name: str, a: tuple[int, int], types: tuple[str, str]) -> tuple[int, int]:
    src, dst = bits_of(types[0]) or 64, types[1]
    lo_t, hi_t = full(dst)
    if name in ("extui", "index_castui") and a[0] < 0:
        a = (a[0] + (1 << src), a[1] + (1 << src)) if a[1] < 0 else (0, (1 << src) - 1)
    if name == "extsi" and src == 1:
        a = (-a[1], -a[0])
    return a if lo_t <= a[0] and a[1] <= hi_t else full(dst)


def interval(name: str, known: list[tuple[int, int]], types: tuple[str, str], attr: object = ()) -> tuple[int, int]:
    """What is known of the result (see the module docstring); ``types`` as :func:`concrete`'s."""
    whole = full(types[1])
    size = 1
    for lo, hi in known:
        size *= hi - lo + 1
    if size <= _ENUMERATE:
        try:
            return _enumerated(name, known, types, attr) or whole
        except KeyError:
            return whole
    if name == "select":
        if known[0][0] == known[0][1]:
            return known[1] if known[0][0] else known[2]
        return min(known[1][0], known[2][0]), max(known[1][1], known[2][1])
    if name == "cmpi":
        return _cmpi(attr, known[0], known[1])
    if name in ("extsi", "extui", "trunci", "index_cast", "index_castui"):
        return _cast(name, known[0], types)
    if name == "freeze":
        return known[0]
    if name in _BINARY:
        found = _rule(name, known[0], known[1], types[0], attr)
        if found is not None and whole[0] <= found[0] <= found[1] <= whole[1]:
            return found
    return whole
