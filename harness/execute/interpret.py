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

Integers are i32 with wrap-around (kept signed), ``i1`` is 0/1, ``index`` is
a 64-bit signed integer.  Wherever MLIR says undefined behaviour or poison
(division by zero, ``divsi`` INT_MIN / -1, a shift by 32 or more, an ``nsw`` /
``nuw`` flag violated, an access outside ``memref<4xi32>``, a non-positive
``scf.for`` step), :class:`UndefinedBehaviour` is raised naming the line:
never a silent value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from harness.execute import inputs

__all__ = ["InterpretError", "UndefinedBehaviour", "interpret_program"]

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}


class InterpretError(Exception):
    """The text is not a program this interpreter reads (line and what is wrong)."""


class UndefinedBehaviour(InterpretError):
    """The program reaches a case MLIR leaves undefined (or poison): no value exists."""


# ------------------------------------------------------------------ tokens

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<value>%[A-Za-z0-9_$.\-]+(?:\#\d+)?)
  | (?P<symbol>@(?:"(?:[^"\\]|\\.)*"|[A-Za-z0-9_$.\-]+))
  | (?P<block>\^[A-Za-z0-9_$.\-]+)
  | (?P<arrow>->)
  | (?P<number>-?\d+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<punct>[()\[\]{}<>:,=\#!?*])
""", re.X)


@dataclass
class _Token:
    kind: str
    text: str
    line: int


def _tokens(text: str) -> list[_Token]:
    out, at, line = [], 0, 1
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise InterpretError(f"line {line}: cannot read {text[at:at + 20]!r}")
        kind = match.lastgroup
        if kind != "space":
            out.append(_Token(kind, match.group(), line))
        line += match.group().count("\n")
        at = match.end()
    out.append(_Token("end", "", line))
    return out


# ------------------------------------------------------------------ the tree


@dataclass
class Op:
    name: str
    line: int
    results: list[str] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)
    attrs: dict[str, object] = field(default_factory=dict)
    regions: list[list["Op"]] = field(default_factory=list)
    types: list[str] = field(default_factory=list)


@dataclass
class _Function:
    name: str
    params: list[tuple[str, str]]
    body: list[Op] | None  # None: a declaration


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.at = 0

    # -- primitives
    def peek(self, offset: int = 0) -> _Token:
        return self.toks[min(self.at + offset, len(self.toks) - 1)]

    def take(self) -> _Token:
        tok = self.toks[self.at]
        self.at += 1
        return tok

    def fail(self, what: str) -> InterpretError:
        tok = self.peek()
        return InterpretError(f"line {tok.line}: {what}, found {tok.text or 'the end'!r}")

    def expect(self, text: str) -> _Token:
        if self.peek().text != text:
            raise self.fail(f"expected {text!r}")
        return self.take()

    def accept(self, text: str) -> bool:
        if self.peek().text == text:
            self.at += 1
            return True
        return False

    def kind(self, kind: str) -> str:
        if self.peek().kind != kind:
            raise self.fail(f"expected a {kind}")
        return self.take().text

    def skip_balanced(self) -> None:
        """Skip one bracketed group starting at the current token."""
        pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
        stack = [pairs[self.take().text]]
        while stack:
            tok = self.take()
            if tok.kind == "end":
                raise self.fail("unbalanced brackets")
            if tok.text in pairs:
                stack.append(pairs[tok.text])
            elif tok.text == stack[-1]:
                stack.pop()

    def type(self) -> str:
        word = self.kind("word")
        if word == "memref":
            self.expect("<")
            inner = []
            while not self.accept(">"):
                inner.append(self.take().text)
            return "memref<" + "".join(inner) + ">"
        return word

    def type_list(self) -> list[str]:
        """``(t, ...)`` or a single type."""
        if self.accept("("):
            out = []
            while not self.accept(")"):
                out.append(self.type())
                self.accept(",")
            return out
        return [self.type()]

    def value_list(self, close: str) -> list[str]:
        out = []
        while not self.accept(close):
            out.append(self.kind("value"))
            self.accept(",")
        return out

    def typed_params(self) -> list[tuple[str, str]]:
        self.expect("(")
        out = []
        while not self.accept(")"):
            name = self.kind("value")
            self.expect(":")
            out.append((name, self.type()))
            self.accept(",")
        return out

    # -- module
    def module(self) -> tuple[dict[str, _Function], list[tuple[str, list[tuple[str, str]], list[Op]]]]:
        functions: dict[str, _Function] = {}
        threads = []
        self.expect("module")
        self.expect("{")
        while not self.accept("}"):
            word = self.kind("word")
            if word in ("func.func", "llvm.func"):
                self.accept("private")
                name = self.kind("symbol")[1:]
                if self.peek(1).kind == "value":
                    params = self.typed_params()
                else:  # a declaration: (types) only
                    self.expect("(")
                    params = []
                    while not self.accept(")"):
                        params.append(("", self.type()))
                        self.accept(",")
                if self.accept("->"):
                    self.type_list()
                body = self.block() if self.peek().text == "{" else None
                functions[name] = _Function(name, params, body)
            elif word == "dataflow.thread":
                self.accept("private")
                name = self.kind("symbol")[1:]
                self.expect("domain")
                self.skip_balanced()
                params = self.typed_params()
                self.expect("ctrl")
                self.skip_balanced()
                threads.append((name, params, self.block()))
            else:
                raise self.fail(f"unexpected module-level operation {word!r}")
        if self.peek().kind != "end":
            raise self.fail("expected the end after the module")
        return functions, threads

    def block(self) -> list[Op]:
        self.expect("{")
        ops = []
        while not self.accept("}"):
            ops.append(self.op())
        return ops

    def op(self) -> Op:
        line = self.peek().line
        results: list[str] = []
        if self.peek().kind == "value":
            while True:
                name = self.kind("value")
                if self.accept(":"):
                    results += [f"{name}#{k}" for k in range(int(self.kind("number")))]
                else:
                    results.append(name)
                if not self.accept(","):
                    break
            self.expect("=")
        tok = self.take()
        name = tok.text.strip('"') if tok.kind == "string" else tok.text
        op = Op(name, line, results)
        handler = _SYNTAX.get(name)
        if handler is None:
            raise InterpretError(f"line {line}: unknown operation {name!r}")
        handler(self, op)
        return op


def _binary(p: _Parser, op: Op) -> None:
    op.operands = [p.kind("value")]
    p.expect(",")
    op.operands.append(p.kind("value"))
    if p.accept("overflow"):
        p.expect("<")
        flags = []
        while not p.accept(">"):
            flags.append(p.kind("word"))
            p.accept(",")
        op.attrs["overflow"] = flags
    p.expect(":")
    op.types = [p.type()]


def _constant(p: _Parser, op: Op) -> None:
    tok = p.take()
    op.attrs["value"] = {"true": 1, "false": 0}.get(tok.text, None)
    if op.attrs["value"] is None:
        if tok.kind != "number":
            raise InterpretError(f"line {tok.line}: a constant must be an integer, not {tok.text!r}")
        op.attrs["value"] = int(tok.text)
    if p.accept(":"):
        op.types = [p.type()]
    else:
        op.types = ["i1"]


def _cmpi(p: _Parser, op: Op) -> None:
    op.attrs["predicate"] = p.kind("word")
    p.expect(",")
    _binary(p, op)


def _select(p: _Parser, op: Op) -> None:
    op.operands = [p.kind("value")]
    for _ in range(2):
        p.expect(",")
        op.operands.append(p.kind("value"))
    p.expect(":")
    op.types = [p.type()]


def _cast(p: _Parser, op: Op) -> None:
    op.operands = [p.kind("value")]
    p.expect(":")
    source = p.type()
    p.expect("to")
    op.types = [source, p.type()]


def _unary(p: _Parser, op: Op) -> None:
    op.operands = [p.kind("value")]
    p.expect(":")
    op.types = [p.type()]


def _call(p: _Parser, op: Op) -> None:
    op.attrs["callee"] = p.kind("symbol")[1:]
    p.expect("(")
    op.operands = p.value_list(")")
    p.expect(":")
    p.type_list()
    p.expect("->")
    op.types = p.type_list()


def _load(p: _Parser, op: Op) -> None:
    op.operands = [p.kind("value")]
    p.expect("[")
    op.operands += p.value_list("]")
    p.expect(":")
    op.types = [p.type()]


def _store(p: _Parser, op: Op) -> None:
    stored = p.kind("value")
    p.expect(",")
    _load(p, op)
    op.operands.insert(0, stored)


def _if(p: _Parser, op: Op) -> None:
    op.operands = [p.kind("value")]
    if p.accept("->"):
        op.types = p.type_list()
    op.regions.append(p.block())
    if p.accept("else"):
        op.regions.append(p.block())


def _for(p: _Parser, op: Op) -> None:
    op.attrs["iv"] = p.kind("value")
    p.expect("=")
    op.operands = [p.kind("value")]
    p.expect("to")
    op.operands.append(p.kind("value"))
    p.expect("step")
    op.operands.append(p.kind("value"))
    carried = []
    if p.accept("iter_args"):
        p.expect("(")
        while not p.accept(")"):
            carried.append(p.kind("value"))
            p.expect("=")
            op.operands.append(p.kind("value"))
            p.accept(",")
        p.expect("->")
        op.types = p.type_list()
    op.attrs["carried"] = carried
    op.regions.append(p.block())


def _yield(p: _Parser, op: Op) -> None:
    while p.peek().kind == "value":
        op.operands.append(p.take().text)
        p.accept(",")
    if p.accept(":"):
        op.types = p.type_list() if p.peek().text != "(" else p.type_list()
        while p.accept(","):
            op.types.append(p.type())


def _generic(p: _Parser, op: Op) -> None:
    """``"loom.spatial_region"(...) <{...}> ({ ^bb0(...): ... }) {attrs} : type`` and
    ``"loom.spatial_yield"(...) <{...}> : type``."""
    p.expect("(")
    op.operands = p.value_list(")")
    if p.peek().text == "<":
        p.skip_balanced()
    if p.accept("("):
        p.expect("{")
        op.attrs["block_args"] = [] if p.peek().kind != "block" else (p.take(), p.typed_params(),
                                                                      p.expect(":"))[1]
        body = []
        while not p.accept("}"):
            body.append(p.op())
        op.regions.append(body)
        while p.accept(","):  # further (empty) regions of the oracle rendering
            p.skip_balanced()
        p.expect(")")
    if p.accept("{"):
        while not p.accept("}"):
            key = p.kind("word")
            p.expect("=")
            if p.peek().kind == "string":
                op.attrs[key] = p.take().text[1:-1]
            elif p.peek().text in "[{(<":
                p.skip_balanced()
            else:
                p.take()
            p.accept(",")
    p.expect(":")
    p.type_list()
    p.expect("->")
    op.types = p.type_list()


def _none(p: _Parser, op: Op) -> None:
    pass


def _return(p: _Parser, op: Op) -> None:
    _yield(p, op)


_SYNTAX: dict[str, Callable[[_Parser, Op], None]] = {
    "arith.constant": _constant, "arith.cmpi": _cmpi, "arith.select": _select,
    "arith.index_cast": _cast, "arith.index_castui": _cast, "arith.extsi": _cast, "arith.extui": _cast,
    "arith.trunci": _cast, "llvm.freeze": _unary, "func.call": _call, "llvm.call": _call,
    "memref.load": _load, "memref.store": _store, "scf.if": _if, "scf.for": _for,
    "scf.yield": _yield, "func.return": _return, "return": _return, "llvm.return": _return,
    "loom.spatial_region": _generic, "loom.spatial_yield": _generic,
    "dataflow.thread.yield": _none,
}


# ------------------------------------------------------------------ semantics


def _wrap(value: int, bits: int) -> int:
    """Two's-complement wrap of ``value`` into a signed ``bits``-bit integer (i1: 0/1)."""
    if bits == 1:
        return value & 1
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


class _Machine:
    def __init__(self, functions: dict[str, _Function]) -> None:
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
            if op.name in ("scf.yield", "return", "func.return", "llvm.return", "loom.spatial_yield"):
                return [env[v] for v in op.operands]
            values = self.op(op, env)
            for name, value in zip(op.results, values):
                env[name] = value
        return []

    def op(self, op: Op, env: dict) -> list:
        name = op.name
        args = [env[v] if v in env else self._missing(op, v) for v in op.operands]
        type_ = op.types[0] if op.types else "i32"
        bits = _BITS.get(type_, 32)
        if name == "arith.constant":
            return [_wrap(op.attrs["value"], bits)]
        if name in _INTEGER:
            return [_INTEGER[name](self, op, args[0], args[1], bits)]
        if name == "arith.cmpi":
            a, b = args
            ua, ub = _unsigned(a, bits), _unsigned(b, bits)
            table = {"eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b,
                     "sge": a >= b, "ult": ua < ub, "ule": ua <= ub, "ugt": ua > ub, "uge": ua >= ub}
            if op.attrs["predicate"] not in table:
                raise InterpretError(f"line {op.line}: unknown cmpi predicate {op.attrs['predicate']!r}")
            return [int(table[op.attrs["predicate"]])]
        if name == "arith.select":
            return [args[1] if args[0] else args[2]]
        if name in ("arith.index_cast", "arith.extsi", "arith.trunci"):
            return [_wrap(args[0], _BITS[op.types[1]])]
        if name in ("arith.index_castui", "arith.extui"):
            return [_wrap(_unsigned(args[0], _BITS[op.types[0]]), _BITS[op.types[1]])]
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
    "arith.maxsi": lambda m, op, a, b, bits: max(a, b),
    "arith.minsi": lambda m, op, a, b, bits: min(a, b),
    "arith.maxui": lambda m, op, a, b, bits: a if _unsigned(a, bits) >= _unsigned(b, bits) else b,
    "arith.minui": lambda m, op, a, b, bits: a if _unsigned(a, bits) <= _unsigned(b, bits) else b,
    "arith.divsi": _division(True, "div"), "arith.divui": _division(False, "div"),
    "arith.remsi": _division(True, "rem"), "arith.remui": _division(False, "rem"),
    "arith.ceildivsi": _division(True, "ceil"), "arith.floordivsi": _division(True, "floor"),
    "arith.shli": _shift("shli"), "arith.shrsi": _shift("shrsi"), "arith.shrui": _shift("shrui"),
}
for _name in _INTEGER:
    _SYNTAX.setdefault(_name, _binary)


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
    functions, threads = _Parser(text).module()
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
