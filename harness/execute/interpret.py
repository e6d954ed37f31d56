"""The reference interpreter: what an exec module's ``main`` prints, computed in Python.

It reads the program itself (the canonical P1-P24 text, not the exec module),
with its own tokenizer and parser, and shares no code with the exec renderer:
only the input table (``harness.execute.inputs``, data).  The calling protocol
it reproduces (docs/explanation/wrong-code.md): every thread, then every
region, in program order, each once per row of the table; the ``j``-th ``i32``
argument takes ``I32[row][j % 8]``, the ``j``-th ``i1`` ``FLAGS[row][j % 8]``,
every memref the one buffer set to ``MEMORY[row]``; one line per call:
``number, row, results..., memory cells`` (the cells only when the function
takes the buffer).  A thread returns ``%icall`` and every region result in
program order; a region under ``scf.if %flag`` not taken gives 0, under
``scf.for`` the last iteration's value.  ``@extern_scale(x)`` is
``3 * x + 5``.

Integers of every width ``iN`` wrap around (kept signed), ``i1`` is 0/1 (read
signed, as -1/0, where an operation is signed), ``index`` is a 64-bit signed
integer; the ``index`` dialect computes at 64 bits.  Wherever MLIR says undefined behaviour or poison
(division by zero, signed division of the minimum by -1, a shift by the width
or more, an ``nsw`` / ``nuw`` flag violated, ``ipowi`` with a negative
exponent, an access outside ``memref<4xi32>``, a non-positive ``scf.for``
step), :class:`UndefinedBehaviour` is raised naming the line: never a silent
value.  The operations beyond ``i32`` (the ``widths`` profile) follow MLIR's
definitions: ``*_extended`` return the low half and the carry or high half,
``ceildivui`` rounds up, ``ctlz``/``cttz`` of 0 are the width, ``absi`` of the
minimum is the minimum, ``scf.while`` runs its ``before`` region until the
condition is false and returns what it forwarded.
"""

from __future__ import annotations

from typing import Callable

from harness.execute import inputs
from harness.execute.interpret_parse import InterpretError, Op, parse_module

__all__ = ["InterpretError", "UndefinedBehaviour", "interpret_program"]

#: Iterations an scf.while may run before the interpreter calls it a hang (programs bound theirs).
MAX_WHILE_TRIPS = 100_000


def _bits(type_: str) -> int:
    """The width of ``iN`` or ``index`` (64 bits, as on the hosts the JIT runs on)."""
    if type_ == "index":
        return 64
    if type_.startswith("i") and type_[1:].isdigit():
        return int(type_[1:])
    return 32


class UndefinedBehaviour(InterpretError):
    """The program reaches a case MLIR leaves undefined (or poison): no value exists."""


# ------------------------------------------------------------------ semantics


def _wrap(value: int, bits: int) -> int:
    """Two's-complement wrap of ``value`` into a signed ``bits``-bit integer (i1: 0/1)."""
    if bits == 1:
        return value & 1
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def _signed(value: int, bits: int) -> int:
    """The signed reading of a stored value (only i1 is stored otherwise: 1 is -1)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


class _Machine:
    def __init__(self, functions: dict) -> None:
        self.functions = functions

    def ub(self, op: Op, what: str) -> UndefinedBehaviour:
        return UndefinedBehaviour(f"line {op.line}: {op.name}: {what}")

    def call(self, name: str, args: list, op: Op | None = None) -> list:
        if name == "extern_scale" and (name not in self.functions or self.functions[name].body is None):
            return [_wrap(3 * args[0] + 5, 32)]
        function = self.functions.get(name)
        if function is None or function.body is None:
            raise InterpretError(f"line {op.line if op else '?'}: call to @{name}, which has no body")
        env = {param: arg for (param, _), arg in zip(function.params, args)}
        return self.block(function.body, env)

    def block(self, ops: list[Op], env: dict) -> list:
        """Run ops in ``env``; the terminator's operands' values (``[]`` if none)."""
        for op in ops:
            if op.name in ("scf.yield", "return", "func.return", "llvm.return", "loom.spatial_yield", "scf.condition"):
                return [env[v] for v in op.operands]
            values = self.op(op, env)
            for name, value in zip(op.results, values):
                env[name] = value
        return []

    def op(self, op: Op, env: dict) -> list:
        name = op.name
        args = [env[v] if v in env else self._missing(op, v) for v in op.operands]
        type_ = op.types[0] if op.types else "i32"
        bits = _bits(type_)
        if name in ("arith.constant", "index.constant", "index.bool.constant"):
            return [_wrap(op.attrs["value"], bits)]
        if name in _INTEGER:
            a, b = args
            if name in _SIGNED_READING:
                a, b = _signed(a, bits), _signed(b, bits)
            return [_INTEGER[name](self, op, a, b, bits)]
        if name in _PAIRS:
            return _PAIRS[name](_signed(args[0], bits), _signed(args[1], bits), bits)
        if name in _UNARY:
            return [_UNARY[name](_signed(args[0], bits), bits)]
        if name in ("arith.cmpi", "index.cmp"):
            a, b = _signed(args[0], bits), _signed(args[1], bits)
            ua, ub = _unsigned(a, bits), _unsigned(b, bits)
            table = {"eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b,
                     "sge": a >= b, "ult": ua < ub, "ule": ua <= ub, "ugt": ua > ub, "uge": ua >= ub}
            if op.attrs["predicate"] not in table:
                raise InterpretError(f"line {op.line}: unknown cmpi predicate {op.attrs['predicate']!r}")
            return [int(table[op.attrs["predicate"]])]
        if name == "arith.select":
            return [args[1] if args[0] else args[2]]
        if name in ("arith.index_cast", "arith.extsi", "arith.trunci", "index.casts", "arith.bitcast"):
            return [_wrap(_signed(args[0], bits), _bits(op.types[1]))]
        if name in ("arith.index_castui", "arith.extui", "index.castu"):
            return [_wrap(_unsigned(args[0], bits), _bits(op.types[1]))]
        if name == "llvm.freeze":
            return [args[0]]  # every value here is defined: freeze is the identity
        if name in ("func.call", "llvm.call"):
            return self.call(op.attrs["callee"], args, op)
        if name == "memref.load":
            memory, index = args[0], self._index(op, args[1:])
            return [memory[index]]
        if name == "memref.store":
            memory, index = args[1], self._index(op, args[2:])
            memory[index] = args[0]
            return []
        if name == "scf.if":
            if not args[0] and len(op.regions) < 2:
                return []
            return self.block(op.regions[0] if args[0] else op.regions[1], env)
        if name == "scf.while":
            return self._while(op, env, args)
        if name == "scf.index_switch":
            cases = op.attrs["cases"]
            chosen = cases.index(args[0]) if args[0] in cases else len(cases)
            return self.block(op.regions[chosen], env)
        if name == "scf.execute_region":
            return self.block(op.regions[0], env)
        if name == "scf.for":
            low, high, step, carried = args[0], args[1], args[2], args[3:]
            if step <= 0:
                raise self.ub(op, f"step {step} is not positive")
            i = low
            while i < high:
                env[op.attrs["iv"]] = i
                env.update(zip(op.attrs["carried"], carried))
                carried = self.block(op.regions[0], env)
                i += step
            return carried
        if name == "loom.spatial_region":
            inner = {param: arg for (param, _), arg in zip(op.attrs["block_args"], args)}
            return self.block(op.regions[0], inner)
        raise InterpretError(f"line {op.line}: no semantics for {name!r}")

    def _while(self, op: Op, env: dict, values: list) -> list:
        """``before`` with the loop's values; its condition false: what it forwards, else
        ``after`` with the forwarded values gives the next ones."""
        for _ in range(MAX_WHILE_TRIPS):
            env.update(zip(op.attrs["before_args"], values))
            condition, *forwarded = self.block(op.regions[0], env)
            if not condition:
                return forwarded
            env.update(zip(op.attrs["after_args"], forwarded))
            values = self.block(op.regions[1], env)
        raise InterpretError(f"line {op.line}: scf.while ran {MAX_WHILE_TRIPS} times (a hang?)")

    def _index(self, op: Op, indices: list) -> int:
        if len(indices) != 1 or not 0 <= indices[0] < inputs.MEMORY_CELLS:
            raise self.ub(op, f"index {indices} is outside memref<{inputs.MEMORY_CELLS}xi32>")
        return indices[0]

    def _missing(self, op: Op, value: str):
        raise InterpretError(f"line {op.line}: {op.name} uses {value}, which is not defined there")


def _overflow(op: Op, exact: int, bits: int, uexact: int) -> int:
    flags = op.attrs.get("overflow", [])
    if "nsw" in flags and _wrap(exact, bits) != exact:
        raise UndefinedBehaviour(f"line {op.line}: {op.name}: overflow<nsw> violated: signed overflow (poison)")
    if "nuw" in flags and _unsigned(uexact, bits) != uexact:
        raise UndefinedBehaviour(f"line {op.line}: {op.name}: overflow<nuw> violated: unsigned overflow (poison)")
    return _wrap(exact, bits)


def _division(signed: bool, rounding: str) -> Callable:
    def apply(machine: _Machine, op: Op, a: int, b: int, bits: int) -> int:
        if b == 0:
            raise machine.ub(op, "division by zero")
        if not signed:
            ua, ub = _unsigned(a, bits), _unsigned(b, bits)
            if rounding == "ceil":
                return _wrap(-(-ua // ub), bits)
            return _wrap(ua // ub if rounding == "div" else ua % ub, bits)
        if a == -(1 << (bits - 1)) and b == -1:
            raise machine.ub(op, f"signed overflow: {a} / -1")
        q = _trunc_div(a, b)
        if rounding == "rem":
            return _wrap(a - q * b, bits)
        if rounding == "ceil" and q * b != a and (a > 0) == (b > 0):
            q += 1
        if rounding == "floor" and q * b != a and (a > 0) != (b > 0):
            q -= 1
        return _wrap(q, bits)
    return apply


def _shift(kind: str) -> Callable:
    def apply(machine: _Machine, op: Op, a: int, b: int, bits: int) -> int:
        amount = _unsigned(b, bits)
        if amount >= bits:
            raise machine.ub(op, f"shift by {amount} >= bit width {bits} (poison)")
        if kind == "shli":
            flags = op.attrs.get("overflow", [])
            if "nsw" in flags and _wrap(a << amount, bits) >> amount != a:
                raise machine.ub(op, "overflow<nsw> violated: bits other than the sign's shifted out (poison)")
            if "nuw" in flags and _unsigned(a, bits) << amount >= 1 << bits:
                raise machine.ub(op, "overflow<nuw> violated: set bits shifted out (poison)")
            return _wrap(a << amount, bits)
        if kind == "shrsi":
            return _wrap(a >> amount, bits)
        return _wrap(_unsigned(a, bits) >> amount, bits)
    return apply


_INTEGER: dict[str, Callable] = {
    "arith.addi": lambda m, op, a, b, bits: _overflow(op, a + b, bits, _unsigned(a, bits) + _unsigned(b, bits)),
    "arith.subi": lambda m, op, a, b, bits: _overflow(op, a - b, bits, _unsigned(a, bits) - _unsigned(b, bits)),
    "arith.muli": lambda m, op, a, b, bits: _overflow(op, a * b, bits, _unsigned(a, bits) * _unsigned(b, bits)),
    "arith.andi": lambda m, op, a, b, bits: _wrap(a & b, bits),
    "arith.ori": lambda m, op, a, b, bits: _wrap(a | b, bits),
    "arith.xori": lambda m, op, a, b, bits: _wrap(a ^ b, bits),
    "arith.maxsi": lambda m, op, a, b, bits: _wrap(max(a, b), bits),
    "arith.minsi": lambda m, op, a, b, bits: _wrap(min(a, b), bits),
    "arith.maxui": lambda m, op, a, b, bits: a if _unsigned(a, bits) >= _unsigned(b, bits) else b,
    "arith.minui": lambda m, op, a, b, bits: a if _unsigned(a, bits) <= _unsigned(b, bits) else b,
    "arith.divsi": _division(True, "div"), "arith.divui": _division(False, "div"),
    "arith.remsi": _division(True, "rem"), "arith.remui": _division(False, "rem"),
    "arith.ceildivsi": _division(True, "ceil"), "arith.floordivsi": _division(True, "floor"),
    "arith.shli": _shift("shli"), "arith.shrsi": _shift("shrsi"), "arith.shrui": _shift("shrui"),
    "arith.ceildivui": _division(False, "ceil"),
    "math.ipowi": lambda m, op, a, b, bits: _ipowi(m, op, a, b, bits),
}
# the index dialect: the same operations at 64 bits
for _op, _arith in (("add", "addi"), ("sub", "subi"), ("mul", "muli"), ("and", "andi"), ("or", "ori"),
                    ("xor", "xori"), ("maxs", "maxsi"), ("mins", "minsi"), ("maxu", "maxui"), ("minu", "minui"),
                    ("divs", "divsi"), ("divu", "divui"), ("rems", "remsi"), ("remu", "remui"),
                    ("ceildivs", "ceildivsi"), ("ceildivu", "ceildivui"), ("floordivs", "floordivsi"),
                    ("shl", "shli"), ("shrs", "shrsi"), ("shru", "shrui")):
    _INTEGER[f"index.{_op}"] = _INTEGER[f"arith.{_arith}"]
#: Operations that read their operands signed (i1's stored 1 is -1 to them).
_SIGNED_READING = frozenset(name for name in _INTEGER if name.split(".")[1] in (
    "maxsi", "minsi", "divsi", "remsi", "ceildivsi", "floordivsi", "shrsi", "maxs", "mins", "divs", "rems",
    "ceildivs", "floordivs", "shrs", "ipowi"))


def _ipowi(machine: _Machine, op: Op, a: int, b: int, bits: int) -> int:
    if b < 0:
        raise machine.ub(op, f"ipowi with the negative exponent {b}")
    return _wrap(pow(_unsigned(a, bits), b, 1 << bits), bits)


def _extended(signed: bool) -> Callable:
    """mulsi_extended / mului_extended: the low and the high half of the full product."""
    def apply(a: int, b: int, bits: int) -> list[int]:
        full = a * b if signed else _unsigned(a, bits) * _unsigned(b, bits)
        return [_wrap(full, bits), _wrap(full >> bits, bits)]
    return apply


def _addui_extended(a: int, b: int, bits: int) -> list[int]:
    total = _unsigned(a, bits) + _unsigned(b, bits)
    return [_wrap(total, bits), int(total >> bits)]


_PAIRS: dict[str, Callable] = {"arith.addui_extended": _addui_extended, "arith.mulsi_extended": _extended(True),
                               "arith.mului_extended": _extended(False)}


def _count_leading(a: int, bits: int) -> int:
    return bits - _unsigned(a, bits).bit_length()


def _count_trailing(a: int, bits: int) -> int:
    u = _unsigned(a, bits)
    return bits if u == 0 else (u & -u).bit_length() - 1


_UNARY: dict[str, Callable] = {
    "math.absi": lambda a, bits: _wrap(abs(a), bits),
    "math.ctlz": lambda a, bits: _wrap(_count_leading(a, bits), bits),
    "math.cttz": lambda a, bits: _wrap(_count_trailing(a, bits), bits),
    "math.ctpop": lambda a, bits: _wrap(bin(_unsigned(a, bits)).count("1"), bits),
}


# ------------------------------------------------------------------ main's protocol


def _thread_results(machine: _Machine, body: list[Op], env: dict) -> list[int]:
    """Run a thread body; its results: %icall, then every region result in order
    (wrapped in scf.if not taken: 0; in scf.for: the last iteration's)."""
    out: list[int] = []
    for op in body:
        if op.name == "dataflow.thread.yield":
            break
        if op.name in ("scf.if", "scf.for"):
            machine.op(op, env)
            # result names are unique (P17) and env is this call's own: a region not
            # run leaves its names unset
            for region in op.regions[0]:
                out += [env.get(r, 0) for r in region.results]
            continue
        values = machine.op(op, env)
        for name, value in zip(op.results, values):
            env[name] = value
        if op.name == "loom.spatial_region" or (op.name == "func.call" and op.results):
            out += values
    return out


def _arguments(types: list[str], row: int, buffer: list[int]) -> list:
    args, i32s, flags = [], 0, 0
    for type_ in types:
        if type_.startswith("memref"):
            args.append(buffer)
        elif type_ == "i1":
            args.append(inputs.FLAGS[row][flags % inputs.COLUMNS])
            flags += 1
        else:
            args.append(inputs.I32[row][i32s % inputs.COLUMNS])
            i32s += 1
    return args


def _regions(ops: list[Op]) -> list[Op]:
    out = []
    for op in ops:
        if op.name == "loom.spatial_region":
            out.append(op)
        elif op.name in ("scf.if", "scf.for"):
            out += [inner for inner in op.regions[0] if inner.name == "loom.spatial_region"]
    return out


def interpret_program(text: str) -> str:
    """What the exec rendering's ``main`` prints for this P1-P24 program (canonical text).

    Raises :class:`InterpretError` for text it cannot read and
    :class:`UndefinedBehaviour` where the program has no defined result."""
    functions, threads = parse_module(text)
    if not threads:
        raise InterpretError("line 1: the module has no dataflow.thread (P1): not a P1-P24 program")
    machine = _Machine(functions)
    calls: list[tuple[list[str], Callable[[list], list[int]]]] = []
    for _, params, body in threads:
        def run_thread(args: list, params=params, body=body) -> list[int]:
            env = {name: arg for (name, _), arg in zip(params, args)}
            return _thread_results(machine, body, env)
        calls.append(([t for _, t in params], run_thread))
    for _, _, body in threads:
        for region in _regions(body):
            def run_region(args: list, region=region) -> list[int]:
                env = {name: arg for (name, _), arg in zip(region.attrs["block_args"], args)}
                return machine.block(region.regions[0], env)
            calls.append(([t for _, t in region.attrs["block_args"]], run_region))
    lines = []
    for number, (types, run) in enumerate(calls):
        takes_memory = any(t.startswith("memref") for t in types)
        for row in range(inputs.ROWS):
            buffer = list(inputs.MEMORY[row])
            values = [number, row, *run(_arguments(types, row, buffer))]
            if takes_memory:
                values += buffer
            lines.append(", ".join(str(v) for v in values) + "\n")
    return "".join(lines)
