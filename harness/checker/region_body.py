"""A region body's structure: the entry block, which operations may stand there
(P11, P13, P22), scf.if/scf.for with their blocks and yields (P22, P23), and the
closing "loom.spatial_yield" (P14)."""

from __future__ import annotations

import re

from .records import RegionHeader
from .region_ops import ARITH_OPS, CALL_TARGETS, RegionContext, RegionOpChecker, Scope
from .text import (
    LABEL_RE,
    SSA_RE,
    TYPE_RE,
    Cursor,
    Line,
    ParseFailure,
    Token,
    op_head,
    op_name,
    same_type,
    show,
    token_diff,
)
from .tree import Node


_UNSTRUCTURED = (
    "cf.",
    "llvm.br",
    "llvm.cond_br",
    "llvm.switch",
    "llvm.return",
    "func.return",
    "return",
)


class RegionBodyChecker(RegionOpChecker):
    """Walks a region body block by block; leaf operations go to RegionOpChecker."""

    def check_region_body(
        self, node: Node, hdr: RegionHeader, ins: list[Token] | None, outs: list[Token] | None
    ) -> None:
        body = node.body
        close = node.close or node.last_line()
        if not body:
            self.report(11, close, close.col, "the region has no entry block `^bb0(...)`")
            return
        scope = Scope()
        ctx = RegionContext(args={})
        first = body[0]
        if first.line.code.strip().startswith("^"):
            args = self.check_entry_block(first.line, hdr, ins)
            for name, ty in args:
                self.define(name, ty.text, first.line, scope)
                ctx.args[name.text] = ty.text
            ops = body[1:]
        else:
            self.report(
                11,
                first.line,
                first.line.col,
                "the region body starts with its entry block `^bb0(...):`",
            )
            ops = body
        last = ops[-1] if ops else None
        if last is None or op_name(last.line) != "loom.spatial_yield":
            self.report(
                14, close, close.col, 'the region body must end with a generic "loom.spatial_yield"'
            )
            last = None
        for op in ops:
            if op is last:
                self.check_spatial_yield(op, outs, scope)
            else:
                self.check_body_op(op, scope, ctx)

    def check_entry_block(
        self, line: Line, hdr: RegionHeader, ins: list[Token] | None
    ) -> list[tuple[Token, Token]]:
        args: list[tuple[Token, Token]] = []
        c = Cursor(line)
        try:
            label = c.need(LABEL_RE, "a block label")
            if label.text != "^bb0":
                self.report(
                    11, line, label.col, f"the entry block is ^bb0, found {show(label.text)}"
                )
            if c.lit("(") and not c.lit(")"):
                while True:
                    name = c.need(SSA_RE, "a block argument")
                    c.expect(":")
                    args.append((name, c.need(TYPE_RE, "a type")))
                    if not c.lit(","):
                        c.expect(")")
                        break
            c.expect(":", "ending the block label")
            c.end()
        except ParseFailure as f:
            self.report(11, line, f.col, f"malformed entry block label: {f.msg}")
            return args
        count = (
            len(hdr.operands)
            if hdr.operands is not None
            else (len(ins) if ins is not None else None)
        )
        if count is not None and len(args) != count:
            self.report(
                13,
                line,
                line.col,
                f"^bb0 has {len(args)} argument(s) for {count} region operand(s)",
            )
        for i, (name, ty) in enumerate(args):
            if ins is not None and i < len(ins) and not same_type(ty.text, ins[i].text):
                self.report(
                    13,
                    line,
                    ty.col,
                    f"block argument {name.text} has type {show(ty.text)} but region operand {i} "
                    f"has type {show(ins[i].text)}",
                )
        return args

    def check_body_op(self, node: Node, scope: Scope, ctx: RegionContext) -> None:
        line = node.line
        if line.code.strip().startswith("^"):
            self.report(
                22,
                line,
                line.col,
                "a region body is a single block ^bb0 plus structured scf nesting: no further "
                "blocks",
            )
            return
        if "loom.spatial_region" in line.code:
            return  # a nested region: P9 (stray scan)
        results, op, pos = op_head(line)
        name = op.text.strip('"') if op else ""
        col = op.col if op else line.col
        # checked = False: a rejected op; its results are still bound (untyped) so that
        # later uses do not cascade into P13.
        checked = True
        if name == "loom.spatial_yield":
            self.report(
                14,
                line,
                line.col,
                '"loom.spatial_yield" must be the last operation of the region body',
            )
        elif name == "scf.if":
            self.check_scf_if(node, scope, ctx)
        elif name == "scf.for":
            self.check_scf_for(node, scope, ctx)
        elif name == "scf.yield":
            self.report(
                22,
                line,
                line.col,
                "scf.yield stands only at the end of an scf.if branch or scf.for body",
            )
        elif node.blocks:
            self.report(
                22,
                line,
                line.col,
                f"`{show(name)}` opens a block: inside a region only scf.if and scf.for nest",
            )
            checked = False
        elif name.startswith("arith.") and name[6:] in ARITH_OPS:
            self.check_arith(line, results, name, pos, scope, ctx)
        elif name == "llvm.freeze":
            self.check_arith(line, results, "arith.freeze", pos, scope, ctx)
        elif name in ("memref.load", "memref.store"):
            self.check_memory(line, results, name, pos, scope, ctx)
        elif name in CALL_TARGETS:
            self.check_region_call(line, scope)
        elif "call" in name or "invoke" in name:
            self.report(
                20,
                line,
                col,
                "calls are only func.call @helper_double and llvm.call @extern_scale, found "
                f"`{show(name)}`",
            )
            checked = False
        elif name.startswith(("memref.", "affine.", "llvm.load", "llvm.store", "llvm.alloca")):
            self.report(
                19,
                line,
                col,
                "memory is accessed only by memref.load/memref.store on a region memref operand, "
                f"found `{show(name)}`",
            )
            checked = False
        elif name.startswith(_UNSTRUCTURED) or name.startswith("scf."):
            self.report(
                22,
                line,
                col,
                "control flow inside a region is only structured scf.if/scf.for, found "
                f"`{show(name)}`",
            )
            checked = False
        else:
            self.report(
                22,
                line,
                col,
                f"operation `{show(name or line.code.strip())}` is not allowed in a region body",
            )
            checked = False
        if not checked:
            for r in results:
                scope.define(r.text, None)

    def check_block(
        self,
        ops: list[Node],
        types: list[str],
        owner: str,
        end: Line,
        scope: Scope,
        ctx: RegionContext,
    ) -> None:
        """One scf block: its ops, then an scf.yield of ``types``."""
        last = (
            ops[-1]
            if ops and op_name(ops[-1].line) == "scf.yield" and not ops[-1].blocks
            else None
        )
        for op in ops:
            if op is not last:
                self.check_body_op(op, scope, ctx)
        if last is None:
            if types:
                self.report(
                    22, end, end.col, f"a block of {owner} inside a region ends with scf.yield"
                )
            return
        c = Cursor(last.line)
        try:
            c.expect("scf.yield")
            values: list[Token] = []
            listed: list[Token] = []
            tok = c.match(SSA_RE)
            if tok:
                values.append(tok)
                while c.lit(","):
                    values.append(c.need(SSA_RE, "a yielded value"))
                c.expect(":")
                listed = [c.need(TYPE_RE, "a type")]
                while c.lit(","):
                    listed.append(c.need(TYPE_RE, "a type"))
            c.end()
        except ParseFailure as f:
            self.report(22, last.line, f.col, f"malformed scf.yield: {f.msg}")
            return
        if len(values) != len(types) or len(listed) != len(values):
            self.report(
                22,
                last.line,
                last.line.col,
                f"scf.yield of {owner} yields {len(values)} value(s) for {len(types)} result "
                "type(s)",
            )
        for i, v in enumerate(values):
            got = self.use(v, last.line, scope)
            want = listed[i].text if i < len(listed) else (types[i] if i < len(types) else None)
            if not same_type(got, want) or (i < len(types) and not same_type(want, types[i])):
                self.report(
                    23,
                    last.line,
                    v.col,
                    f"scf.yield's {v.text} has type {got}, {owner} yields "
                    f"{types[i] if i < len(types) else want}",
                )

    def check_scf_if(self, node: Node, scope: Scope, ctx: RegionContext) -> None:
        """P22: an scf.if inside a region has both branches, each ending in scf.yield."""
        line = node.line
        c = Cursor(line)
        types: list[Token] = []
        results = c.results()
        try:
            c.expect("scf.if")
            cond = c.need(SSA_RE, "the condition")
            if c.lit("->"):
                types = c.types() if c.lit("(") else [c.need(TYPE_RE, "a result type")]
            c.expect("{")
            c.end()
        except ParseFailure as f:
            self.report(22, line, f.col, f"malformed scf.if: {f.msg}")
            for r in results:
                scope.define(r.text, None)
            return
        cond_type = self.use(cond, line, scope)
        if not same_type(cond_type, "i1"):
            self.report(
                23, line, cond.col, f"the scf.if condition {cond.text} has type {cond_type}, not i1"
            )
        if len(results) != len(types):
            self.report(
                22,
                line,
                line.col,
                f"scf.if binds {len(results)} result(s) but declares {len(types)} type(s)",
            )
        if len(node.blocks) < 2:
            where = node.close or node.last_line()
            self.report(
                22,
                where,
                where.col,
                "an scf.if inside a region has both branches: the else branch is missing",
            )
        elif len(node.blocks) > 2:
            self.report(22, node.mids[1], node.mids[1].col, "an scf.if has exactly two branches")
        if node.mids and token_diff(node.mids[0], "} else {"):
            self.report(
                22,
                node.mids[0],
                node.mids[0].col,
                "the branches of an scf.if are separated by `} else {`",
            )
        self.check_close(node, 22, "an scf.if")
        for i, block in enumerate(node.blocks[:2]):
            end = node.mids[i] if i < len(node.mids) else (node.close or node.last_line())
            scope.push()
            self.check_block(block, [t.text for t in types], "scf.if", end, scope, ctx)
            scope.pop()
        for i, r in enumerate(results):
            self.define(r, types[i].text if i < len(types) else None, line, scope)

    def check_scf_for(self, node: Node, scope: Scope, ctx: RegionContext) -> None:
        """P22: an scf.for inside a region carries iter_args and ends in scf.yield."""
        line = node.line
        c = Cursor(line)
        results = c.results()
        carries: list[tuple[Token, Token]] = []
        types: list[Token] = []
        try:
            c.expect("scf.for")
            iv = c.need(SSA_RE, "the induction variable")
            c.expect("=")
            lb = c.need(SSA_RE, "the lower bound")
            c.expect("to")
            ub = c.need(SSA_RE, "the upper bound")
            c.expect("step")
            step = c.need(SSA_RE, "the step")
            has_iter = c.match(re.compile(r"iter_args\b")) is not None
            if has_iter:
                c.expect("(")
                while True:
                    carry = c.need(SSA_RE, "a loop-carried value")
                    c.expect("=")
                    carries.append((carry, c.need(SSA_RE, "its initial value")))
                    if not c.lit(","):
                        c.expect(")")
                        break
            if c.lit("->"):
                types = c.types() if c.lit("(") else [c.need(TYPE_RE, "a result type")]
            bound_type = c.need(TYPE_RE, "the bound type").text if c.lit(":") else "index"
            c.expect("{")
            c.end()
        except ParseFailure as f:
            self.report(22, line, f.col, f"malformed scf.for: {f.msg}")
            for r in results:
                scope.define(r.text, None)
            return
        for bound in (lb, ub, step):
            got = self.use(bound, line, scope)
            if not same_type(got, "index") or bound_type != "index":
                self.report(
                    23,
                    line,
                    bound.col,
                    f"loop bounds are index, {bound.text} has type {got if got else bound_type}",
                )
        if not has_iter:
            self.report(
                22, line, line.col, "an scf.for inside a region carries its values in iter_args"
            )
        if len(carries) != len(types) or len(results) != len(types):
            self.report(
                22,
                line,
                line.col,
                f"scf.for has {len(carries)} iter_args, {len(types)} result type(s) and "
                f"{len(results)} result name(s)",
            )
        for i, (_, init) in enumerate(carries):
            got = self.use(init, line, scope)
            if i < len(types) and not same_type(got, types[i].text):
                self.report(
                    23,
                    line,
                    init.col,
                    f"iter_args initial value {init.text} has type {got}, the loop carries "
                    f"{types[i].text}",
                )
        for mid in node.mids:
            self.report(22, mid, mid.col, "an scf.for has a single block")
        self.check_close(node, 22, "an scf.for")
        scope.push()
        self.define(iv, "index", line, scope)
        for i, (carry, _) in enumerate(carries):
            self.define(carry, types[i].text if i < len(types) else None, line, scope)
        end = node.mids[0] if node.mids else (node.close or node.last_line())
        self.check_block(node.body, [t.text for t in types], "scf.for", end, scope, ctx)
        scope.pop()
        for i, r in enumerate(results):
            self.define(r, types[i].text if i < len(types) else None, line, scope)

    def check_spatial_yield(self, node: Node, outs: list[Token] | None, scope: Scope) -> None:
        """P14: a generic yield, two segments summing to its operands, matching the results."""
        line = node.line
        c = Cursor(line)
        try:
            col = c.col()
            if not c.lit('"loom.spatial_yield"'):
                c.expect("loom.spatial_yield")
                self.report(
                    14, line, col, 'the yield is in generic form: the quoted "loom.spatial_yield"'
                )
            values = c.values()
            col = c.col()
            c.expect("<{", "opening the yield's properties <{operandSegmentSizes = ...}>")
            props = self.check_dict(
                line, col, c.entries("}>"), ("operandSegmentSizes",), 14, "the yield's properties"
            )
            c.expect(":", "before the yield's type")
            ins, results = c.fn_type()
            c.end()
        except ParseFailure as f:
            self.report(14, line, f.col, f'malformed "loom.spatial_yield": {f.msg}')
            return
        if node.blocks:
            self.report(14, line, line.col, '"loom.spatial_yield" has no body')
        if results:
            self.report(14, line, results[0].col, "the yield's type returns nothing: `(...) -> ()`")
        if "operandSegmentSizes" in props:
            segs = self.read_segments(line, props["operandSegmentSizes"], 14)
            if segs is not None and (len(segs) != 2 or sum(segs) != len(values)):
                self.report(
                    14,
                    line,
                    props["operandSegmentSizes"].col,
                    "the yield's operandSegmentSizes must have two entries summing to its "
                    f"{len(values)} operand(s)",
                )
        if len(ins) != len(values):
            self.report(
                14,
                line,
                line.col,
                f"the yield has {len(values)} operand(s) but its type lists {len(ins)}",
            )
        if outs is not None and len(values) != len(outs):
            self.report(
                14,
                line,
                values[0].col if values else line.col,
                f"the yield yields {len(values)} value(s) but the region has {len(outs)} result(s)",
            )
        for i, v in enumerate(values):
            got = self.use(v, line, scope)
            want = outs[i].text if outs is not None and i < len(outs) else None
            listed = ins[i].text if i < len(ins) else None
            if (
                not same_type(got, listed)
                or not same_type(listed, want)
                or not same_type(got, want)
            ):
                self.report(
                    14,
                    line,
                    v.col,
                    f"yielded {v.text} has type {got}, listed {listed}; the region's result type "
                    f"is {want}",
                )
