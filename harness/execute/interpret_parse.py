"""The reference interpreter's own reader: MLIR text -> a small tree of ops.

A tokenizer and a recursive-descent parser for the ops the interpreter knows
(custom forms of func, arith, scf, memref, llvm; the generic
``"loom.spatial_region"`` / ``"loom.spatial_yield"``; ``dataflow.thread``).
It shares nothing with the exec renderer, whose output it is meant to check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["InterpretError", "Op", "parse_module"]


class InterpretError(Exception):
    """The text is not a program this interpreter reads (line and what is wrong)."""


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
    while p.accept(","):  # addui_extended's ``: i64, i1``
        op.types.append(p.type())


def _index_binary(p: _Parser, op: Op) -> None:
    """``index.add %a, %b``: no type (always index)."""
    op.operands = [p.kind("value")]
    p.expect(",")
    op.operands.append(p.kind("value"))
    op.types = ["index"]


def _index_cmp(p: _Parser, op: Op) -> None:
    """``index.cmp slt(%a, %b)``."""
    op.attrs["predicate"] = p.kind("word")
    p.expect("(")
    op.operands = p.value_list(")")
    op.types = ["index"]


def _index_constant(p: _Parser, op: Op) -> None:
    """``index.constant 5`` and ``index.bool.constant true``."""
    tok = p.take()
    value = {"true": 1, "false": 0}.get(tok.text)
    op.attrs["value"] = int(tok.text) if value is None else value
    op.types = ["index" if value is None else "i1"]


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
        carried = _bound_operands(p, op)
        p.expect("->")
        op.types = p.type_list()
    op.attrs["carried"] = carried
    _for_type(p, op)
    op.regions.append(p.block())


def _bound_operands(p: _Parser, op: Op) -> list:
    """``%a = %x, ...)`` after a ``(`` (scf.for's iter_args, scf.while's inits): the names bound,
    each ``%x`` appended to ``op``'s operands."""
    names = []
    while not p.accept(")"):
        names.append(p.kind("value"))
        p.expect("=")
        op.operands.append(p.kind("value"))
        p.accept(",")
    return names


def _for_type(p: _Parser, op: Op) -> None:
    """scf.for's optional ``: iN`` (an integer-typed induction variable)."""
    op.attrs["iv_type"] = p.type() if p.accept(":") else "index"


def _while(p: _Parser, op: Op) -> None:
    """``scf.while (%a = %x, ...) : (types) -> (types) { before } do { ^bb0(...): after }``."""
    p.expect("(")
    before = _bound_operands(p, op)
    p.expect(":")
    p.type_list()
    p.expect("->")
    op.types = p.type_list()
    op.attrs["before_args"] = before
    op.regions.append(p.block())
    p.expect("do")
    p.expect("{")
    after = []
    if p.peek().kind == "block":
        p.take()
        after = [name for name, _ in p.typed_params()]
        p.expect(":")
    body = []
    while not p.accept("}"):
        body.append(p.op())
    op.attrs["after_args"] = after
    op.regions.append(body)


def _condition(p: _Parser, op: Op) -> None:
    """``scf.condition(%c) %a, %b : types``: the condition, then the forwarded values."""
    p.expect("(")
    op.operands = [p.kind("value")]
    p.expect(")")
    _yield(p, op)


def _index_switch(p: _Parser, op: Op) -> None:
    """``scf.index_switch %x -> types case N {...} ... default {...}``."""
    op.operands = [p.kind("value")]
    if p.accept("->"):
        op.types = p.type_list()
    cases = []
    while p.accept("case"):
        cases.append(int(p.kind("number")))
        op.regions.append(p.block())
    p.expect("default")
    op.regions.append(p.block())
    op.attrs["cases"] = cases


def _execute_region(p: _Parser, op: Op) -> None:
    if p.accept("->"):
        op.types = p.type_list()
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
    "arith.bitcast": _cast, "index.casts": _cast, "index.castu": _cast,
    "math.absi": _unary, "math.ctlz": _unary, "math.cttz": _unary, "math.ctpop": _unary,
    "index.cmp": _index_cmp, "index.constant": _index_constant, "index.bool.constant": _index_constant,
    "scf.while": _while, "scf.condition": _condition, "scf.index_switch": _index_switch,
    "scf.execute_region": _execute_region,
}



#: Binary integer ops read as ``%x = op %a, %b [overflow<...>] : type``.
BINARY_OPS = ("arith.addi", "arith.subi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
              "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui", "arith.divsi", "arith.divui",
              "arith.remsi", "arith.remui", "arith.ceildivsi", "arith.floordivsi", "arith.shli",
              "arith.shrsi", "arith.shrui", "arith.ceildivui", "arith.addui_extended",
              "arith.mulsi_extended", "arith.mului_extended", "math.ipowi")
#: The index dialect's binary ops, ``index.op %a, %b`` (no type).
INDEX_BINARY_OPS = tuple(f"index.{name}" for name in (
    "add", "sub", "mul", "and", "or", "xor", "maxs", "mins", "maxu", "minu", "divs", "divu", "rems", "remu",
    "ceildivs", "ceildivu", "floordivs", "shl", "shrs", "shru"))
for _name in BINARY_OPS:
    _SYNTAX[_name] = _binary
for _name in INDEX_BINARY_OPS:
    _SYNTAX[_name] = _index_binary


def parse_module(text: str):
    """(functions by name, threads as (name, params, body)) of a module's text."""
    return _Parser(text).module()
