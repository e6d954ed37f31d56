"""The leaf operations of a region body: SSA scope (P13), arith and llvm.freeze
(P22), memory accesses (P19), calls (P20), and their types (P23)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from .state import CheckerState
from .text import (
    IDENT_RE,
    SSA_RE,
    SYMBOL_RE,
    TYPE_RE,
    Cursor,
    Line,
    ParseFailure,
    Token,
    collapse_spaces,
    op_head,
    same_type,
    show,
)


# P23: the only i1 values are the predicates %flag and %c (numbered %c0, %c1, ... where a
# region takes %flag more than once)
_PREDICATE = re.compile(r"%flag|%c[0-9]*")
# P20: the only calls, each with its callee, the callee's kind and its declaring op.
CALL_TARGETS = {
    "func.call": ("@helper_double", "func", "func.func"),
    "llvm.call": ("@extern_scale", "llvm", "llvm.func"),
}


# Region-body operations (P22 lists the control flow, P19 the memory accesses).
_BINARY_ARITH = {
    "addi", "subi", "muli", "divsi", "divui", "remsi", "remui", "andi", "ori", "xori",
    "shli", "shrsi", "shrui", "maxsi", "maxui", "minsi", "minui", "ceildivsi",
    "ceildivui", "floordivsi",
}  # fmt: skip
_CAST_ARITH = {"index_cast", "index_castui", "extsi", "extui", "trunci", "bitcast"}
# arith ops that may carry integer overflow flags: `arith.addi %a, %b overflow<nsw, nuw> : i32`
_OVERFLOW_FLAGGED = {"addi", "subi", "muli", "shli"}
_OVERFLOW_FLAGS = re.compile(r"overflow\s*<\s*(?:nsw|nuw)\s*(?:,\s*(?:nsw|nuw)\s*)?>")
ARITH_OPS = _BINARY_ARITH | _CAST_ARITH | {"constant", "cmpi", "select"}


class ParsedCall(NamedTuple):
    results: list[Token]
    op: Token
    callee: Token
    args: list[Token]
    ins: list[Token]
    outs: list[Token]


class Scope:
    """SSA names visible inside one region body (nested blocks push frames)."""

    def __init__(self) -> None:
        self.frames: list[dict[str, str | None]] = [{}]

    def push(self) -> None:
        self.frames.append({})

    def pop(self) -> None:
        self.frames.pop()

    def lookup(self, name: str) -> tuple[bool, str | None]:
        for frame in reversed(self.frames):
            if name in frame:
                return True, frame[name]
        return False, None

    def define(self, name: str, ty: str | None) -> None:
        self.frames[-1][name] = ty


@dataclass
class RegionContext:
    args: dict[str, str]  # ^bb0 arguments: name -> type
    consts: dict[str, int | None] = field(default_factory=dict)  # arith.constant results


class RegionOpChecker(CheckerState):
    """Checks one leaf operation of a region body against the values in scope."""

    def define(self, name: Token, ty: str | None, line: Line, scope: Scope) -> None:
        if scope.lookup(name.text)[0]:
            self.report(13, line, name.col, f"{name.text} is defined twice in the region body")
        scope.define(name.text, ty)
        self.check_value_type(name.text, ty, line, name.col)

    def use(self, name: Token, line: Line, scope: Scope) -> str | None:
        found, ty = scope.lookup(name.text)
        if not found:
            hint = (
                " (a thread value: pass it in as a region operand)"
                if name.text in self.thread_names
                else ""
            )
            self.report(
                13,
                line,
                name.col,
                f"{show(name.text)} is not defined in the region body before this use: only the "
                f"^bb0 arguments flow in{hint}",
            )
        return ty

    def check_value_type(self, name: str, ty: str | None, line: Line, col: int) -> None:
        """P23: integers are i32, i1 only for the predicates %flag and %c."""
        if ty is None:
            return
        if self.check_type_text(ty, line, col) and collapse_spaces(ty) == "i1" \
                and not _PREDICATE.fullmatch(name):
            self.report(
                23,
                line,
                col,
                f"{show(name)} has type i1, but only the predicates %flag and %c are i1 (integers "
                "are i32)",
            )

    def check_arith(
        self,
        line: Line,
        results: list[Token],
        name: str,
        pos: int,
        scope: Scope,
        ctx: RegionContext,
    ) -> None:
        """arith ops and llvm.freeze, parsed strictly (a malformed op is P22), typed (P23)."""
        kind = name.split(".", 1)[1]
        c = Cursor(line, pos)
        value: Token | None = None
        operands: list[Token] = []
        try:
            if len(results) > 1:
                raise ParseFailure(results[1].col, f"`{name}` has one result")
            if kind == "constant":
                value = c.need(re.compile(r"-?\d+|true|false"), "an integer constant")
            else:
                if kind == "cmpi":
                    c.need(IDENT_RE, "a comparison predicate")
                    c.expect(",")
                arity = {"select": 3, "cmpi": 2}.get(
                    kind, 1 if kind in _CAST_ARITH or kind == "freeze" else 2
                )
                for i in range(arity):
                    if i:
                        c.expect(",")
                    operands.append(c.need(SSA_RE, "an SSA operand"))
            if kind in _OVERFLOW_FLAGGED and c.match(_OVERFLOW_FLAGS) is None and c.lit("overflow"):
                raise ParseFailure(c.col(), "overflow flags are `overflow<nsw>`, `overflow<nuw>` or "
                                            "`overflow<nsw, nuw>`")
            c.expect(":")
            op_ty = c.need(TYPE_RE, "a type")
            res_ty = op_ty
            if kind in _CAST_ARITH:
                c.expect("to")
                res_ty = c.need(TYPE_RE, "the result type")
            c.end()
        except ParseFailure as f:
            self.report(
                22,
                line,
                f.col,
                f"malformed `{'llvm.freeze' if kind == 'freeze' else name}`: {f.msg}",
            )
            for r in results:
                scope.define(r.text, None)
            return
        op_types = [op_ty.text] * len(operands)
        if kind == "select":
            op_types[0] = "i1"
        for tok, want in zip(operands, op_types):
            got = self.use(tok, line, scope)
            if not same_type(got, want):
                self.report(
                    23,
                    line,
                    tok.col,
                    f"{tok.text} has type {got}, the operation says {show(want)}",
                )
        self.check_type_text(op_ty.text, line, op_ty.col)
        if res_ty is not op_ty:
            self.check_type_text(res_ty.text, line, res_ty.col)
        if value is not None:
            for r in results:
                ctx.consts[r.text] = (
                    int(value.text) if value.text not in ("true", "false") else None
                )
        for r in results:
            self.define(r, "i1" if kind == "cmpi" else res_ty.text, line, scope)

    def check_memory(
        self,
        line: Line,
        results: list[Token],
        name: str,
        pos: int,
        scope: Scope,
        ctx: RegionContext,
    ) -> None:
        """P19: only a memref<4xi32> region operand, indexed by a constant of this body."""
        c = Cursor(line, pos)
        try:
            value = None
            if name == "memref.store":
                value = c.need(SSA_RE, "the stored value")
                c.expect(",")
            ref = c.need(SSA_RE, "the memref")
            c.expect("[")
            indices: list[Token] = []
            if not c.lit("]"):
                while True:
                    indices.append(c.need(SSA_RE, "an index"))
                    if not c.lit(","):
                        c.expect("]")
                        break
            c.expect(":")
            ty = c.need(TYPE_RE, "the memref type")
            c.end()
        except ParseFailure as f:
            self.report(19, line, f.col, f"malformed {name}: {f.msg}")
            for r in results:
                scope.define(r.text, None)
            return
        ref_type = self.use(ref, line, scope)
        if ref.text not in ctx.args or not same_type(ctx.args[ref.text], "memref<4xi32>"):
            self.report(
                19,
                line,
                ref.col,
                f"{name} addresses {show(ref.text)}, which is not a memref<4xi32> region operand "
                "(^bb0 argument)",
            )
        elif not same_type(ref_type, ty.text):
            self.report(
                23,
                line,
                ty.col,
                f"{ref.text} has type {ref_type}, the access says {show(ty.text)}",
            )
        self.check_type_text(ty.text, line, ty.col)
        if len(indices) != 1:
            self.report(19, line, ref.col, f"a memref<4xi32> takes one index, found {len(indices)}")
        for idx in indices:
            idx_type = self.use(idx, line, scope)
            if idx.text not in ctx.consts:
                self.report(
                    19,
                    line,
                    idx.col,
                    f"the index {show(idx.text)} is not a constant defined in this region body",
                )
            elif ctx.consts[idx.text] is None or not 0 <= ctx.consts[idx.text] < 4:
                self.report(
                    19,
                    line,
                    idx.col,
                    f"the index constant {idx.text} is not in bounds 0..3 of memref<4xi32>",
                )
            if not same_type(idx_type, "index"):
                self.report(
                    23, line, idx.col, f"memref indices are index, {idx.text} has type {idx_type}"
                )
        if value is not None:
            got = self.use(value, line, scope)
            if not same_type(got, "i32"):
                self.report(
                    23,
                    line,
                    value.col,
                    f"the stored value {value.text} has type {got}, the memref holds i32",
                )
        for r in results:
            self.define(r, "i32", line, scope)

    def parse_call(self, line: Line, rule: int) -> ParsedCall | None:
        c = Cursor(line)
        try:
            results = c.results()
            op = c.need(IDENT_RE, "a call operation")
            callee = c.need(SYMBOL_RE, "the callee @symbol")
            args = c.values()
            c.expect(":", "before the call's type")
            ins, outs = c.fn_type()
            c.end()
        except ParseFailure as f:
            self.report(rule, line, f.col, f"malformed call: {f.msg}")
            return None
        return ParsedCall(results, op, callee, args, ins, outs)

    def check_call_target(self, call: ParsedCall, line: Line) -> None:
        """P20: func.call @helper_double / llvm.call @extern_scale, as declared."""
        if call.op.text not in CALL_TARGETS:
            self.report(
                20,
                line,
                call.op.col,
                "calls are only func.call @helper_double and llvm.call @extern_scale, found "
                f"`{show(call.op.text)}`",
            )
            return
        target, kind, decl = CALL_TARGETS[call.op.text]
        if call.callee.text != target:
            self.report(
                20,
                line,
                call.callee.col,
                f"{call.op.text} may only call {target}, found {show(call.callee.text)}",
            )
            return
        if self.symbols.get(target) != kind:
            self.report(20, line, call.callee.col, f"{target} is not a module-level {decl}")
        if [t.text for t in call.ins] != ["i32"] or [t.text for t in call.outs] != ["i32"]:
            col = call.ins[0].col if call.ins else line.col
            self.report(20, line, col, f"the call's type must be {target}'s (i32) -> i32")
        if len(call.args) != len(call.ins):
            self.report(
                20,
                line,
                call.callee.col,
                f"{len(call.args)} operand(s) for {len(call.ins)} parameter type(s)",
            )
        if call.results and len(call.results) != len(call.outs):
            self.report(
                20,
                line,
                call.results[0].col,
                f"{len(call.results)} result name(s) for {len(call.outs)} result type(s)",
            )

    def check_region_call(self, line: Line, scope: Scope) -> None:
        call = self.parse_call(line, 20)
        if call is None:
            for r in op_head(line)[0]:
                scope.define(r.text, None)
            return
        self.check_call_target(call, line)
        for i, arg in enumerate(call.args):
            got = self.use(arg, line, scope)
            if i < len(call.ins) and not same_type(got, call.ins[i].text):
                self.report(
                    23,
                    line,
                    arg.col,
                    f"{arg.text} has type {got}, the call passes {show(call.ins[i].text)}",
                )
        for t in call.ins + call.outs:
            self.check_type_text(t.text, line, t.col)
        for i, r in enumerate(call.results):
            self.define(r, call.outs[i].text if i < len(call.outs) else None, line, scope)
