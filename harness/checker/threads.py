"""dataflow.thread definitions (P5-P8), the thread-level call (P21), and where
regions may stand: directly in a thread body or in one scf.if/scf.for wrapper
(P9, P10)."""

from __future__ import annotations

import re

from .records import Site, Thread
from .region_ops import CALL_TARGETS
from .regions import RegionChecker
from .text import (
    SSA_RE,
    TYPE_RE,
    Cursor,
    Line,
    ParseFailure,
    Token,
    collapse_spaces,
    op_head,
    op_name,
    same_type,
    show,
    token_diff,
    tokenize,
)
from .tree import Node, holds_region


# P5, as labelled parts so a mismatch can say which part is wrong.
_THREAD_HEADER_PARTS = (
    ("operation", "dataflow.thread"),
    ("visibility", "private"),
    ("symbol", "@SYM"),
    ("domain", "domain(#dataflow.thread_domain<dense>)"),
    ("arguments", "(%mem: memref<4xi32>, %val: i32, %flag: i1)"),
    ("control operand", "ctrl (%start: none)"),
    ("body", "{"),
)

# P5 fixes the thread arguments, so their types are known without trusting the header.
_THREAD_ARGS = {"%mem": "memref<4xi32>", "%val": "i32", "%flag": "i1", "%start": "none"}
_THREAD_CONSTANTS = (("%lo", "0"), ("%hi", "2"), ("%stp", "1"))


class ThreadChecker(RegionChecker):
    """Checks a thread body and its wrappers; each region goes to RegionChecker."""

    def check_thread_header(self, line: Line) -> Token | None:
        toks = tokenize(line.code)
        sym = next((t for t in toks if t.text.startswith("@")), None)
        want: list[tuple[str, str, str]] = []
        for label, part in _THREAD_HEADER_PARTS:
            text = part.replace("@SYM", sym.text if sym else "@thread_N")
            want.extend((t.text, label, text) for t in tokenize(text))
        for i, (w, label, part) in enumerate(want):
            if i >= len(toks) or toks[i].text != w:
                col = toks[i].col if i < len(toks) else line.end
                got = f"'{show(toks[i].text)}'" if i < len(toks) else "the end of the line"
                self.report(5, line, col, f"thread {label} must be `{part}`, found {got}")
                return sym
        if len(toks) > len(want):
            self.report(
                5,
                line,
                toks[len(want)].col,
                f"unexpected '{show(toks[len(want)].text)}' after the thread header",
            )
        return sym

    def check_thread(self, node: Node) -> None:
        th = Thread(node)
        self.threads.append(th)
        th.sym = self.check_thread_header(node.line)
        if not node.blocks:
            return  # the header check already reported the missing '{'
        if node.mids:
            self.report(5, node.mids[0], node.mids[0].col, "a dataflow.thread has exactly one body")
        body = node.body
        env = dict(_THREAD_ARGS)
        self.thread_names.update(_THREAD_ARGS)
        self.check_thread_constants(node, body)
        seen_site = False
        leading = 0  # the run of constants the body starts with (P6 judged it already)
        while leading < len(body) and self.thread_op_kind(body[leading]) == "const":
            leading += 1
        for idx, child in enumerate(body):
            kind = self.thread_op_kind(child)
            if kind == "const":
                results, _, _ = op_head(child.line)
                if idx >= max(leading, 3):
                    self.report(
                        6,
                        child.line,
                        child.line.col,
                        "unexpected constant: the thread's only constants are %lo, %hi, %stp at "
                        "its start",
                    )
                for r in results:
                    env[r.text] = collapse_spaces(child.line.code.rsplit(":", 1)[-1])
                    self.thread_names.add(r.text)
            elif kind == "call":
                self.check_thread_call(th, body, idx, seen_site, env)
            elif kind == "region":
                th.sites.append(Site(None, [self.check_region(child, env)]))
                seen_site = True
            elif kind in ("if", "for"):
                site = self.check_wrapper(child, kind, env)
                if site.regions:
                    th.sites.append(site)
                seen_site = seen_site or holds_region(child)
            elif kind == "yield":
                if idx != len(body) - 1:
                    self.report(
                        7,
                        child.line,
                        child.line.col,
                        "dataflow.thread.yield must be the thread body's last operation",
                    )
                diff = token_diff(child.line, "dataflow.thread.yield")
                if diff or child.blocks:
                    self.report(
                        7,
                        child.line,
                        diff[0] if diff else child.line.col,
                        "the thread body ends with a bare `dataflow.thread.yield`",
                    )
            elif not holds_region(
                child
            ):  # (an unknown op holding a region is P9, reported by the stray scan)
                name = op_name(child.line) or child.line.code.strip()
                self.report(
                    6,
                    child.line,
                    child.line.col,
                    f"unexpected operation `{show(name)}` in a thread body: only the index "
                    "constants, the optional @helper_double call, region sites and "
                    "dataflow.thread.yield",
                )
        if not body or self.thread_op_kind(body[-1]) != "yield":
            where = node.close or node.last_line()
            self.report(
                7, where, where.col, "the thread body must end with `dataflow.thread.yield`"
            )
        self.check_close(node, 7, "the thread body")
        if not holds_region(node):
            self.report(8, node.line, node.line.col, "the thread holds no loom.spatial_region")

    @staticmethod
    def thread_op_kind(node: Node) -> str:
        if "loom.spatial_region" in node.line.code:
            return "region"
        name = op_name(node.line)
        if name == "arith.constant":
            return "const"
        if name in CALL_TARGETS or "call" in name or "invoke" in name:
            return "call"
        return {"scf.if": "if", "scf.for": "for", "dataflow.thread.yield": "yield"}.get(
            name, "other"
        )

    def check_thread_constants(self, node: Node, body: list[Node]) -> None:
        for k, (name, value) in enumerate(_THREAD_CONSTANTS):
            want = f"{name} = arith.constant {value} : index"
            if k >= len(body):
                where = node.close or node.last_line()
                self.report(
                    6,
                    where,
                    where.col,
                    "the thread body must begin with %lo = 0, %hi = 2, %stp = 1 (index "
                    f"constants): `{want}` is missing",
                )
                return
            diff = token_diff(body[k].line, want)
            if diff or body[k].blocks:
                col, msg = diff or (body[k].line.col, "unexpected block")
                self.report(
                    6,
                    body[k].line,
                    col,
                    "the thread body must begin with %lo = 0, %hi = 2, %stp = 1 (index "
                    f"constants): {msg}",
                )
                return

    def check_thread_call(
        self, th: Thread, body: list[Node], idx: int, seen_site: bool, env: dict[str, str]
    ) -> None:
        node = body[idx]
        line = node.line
        th.calls.append((idx, node))
        call = self.parse_call(line, 20)
        if call is None:
            return
        if call.op.text == "func.call":
            self.check_call_target(call, line)
        else:
            self.report(
                21,
                line,
                call.op.col,
                "only `func.call @helper_double` may stand directly in a thread body, found "
                f"`{show(call.op.text)}`",
            )
        if any(self.thread_op_kind(later) == "const" for later in body[idx + 1 :]):
            self.report(
                21,
                line,
                line.col,
                "the thread-level call comes after the index constants %lo, %hi, %stp",
            )
        if seen_site:
            self.report(
                21,
                line,
                line.col,
                "the thread-level call comes before the thread's first region site",
            )
        for i, arg in enumerate(call.args):
            if arg.text not in env:
                self.report(
                    20,
                    line,
                    arg.col,
                    f"call operand {show(arg.text)} is not defined in the thread",
                )
            elif i < len(call.ins) and not same_type(env[arg.text], call.ins[i].text):
                self.report(
                    23,
                    line,
                    arg.col,
                    f"{arg.text} has type {env[arg.text]}, the call passes "
                    f"{show(call.ins[i].text)}",
                )
        for t in call.ins + call.outs:
            self.check_type_text(t.text, line, t.col)
        for i, r in enumerate(call.results):
            if r.text in env:
                self.report(
                    21, line, r.col, f"the call's result redefines the thread value {r.text}"
                )
            env[r.text] = call.outs[i].text if i < len(call.outs) else None
            self.thread_names.add(r.text)

    # ---- P9, P10: where regions sit ---------------------------------------

    def check_wrapper(self, node: Node, kind: str, env: dict[str, str]) -> Site:
        site = Site(node)
        line = node.line
        c = Cursor(line)
        inner = dict(env)
        what = "an scf.if around a region" if kind == "if" else "an scf.for around a region"
        try:
            results = c.results()
            if results:
                self.report(10, line, results[0].col, f"{what} has no results")
            if kind == "if":
                c.expect("scf.if")
                cond = c.need(SSA_RE, "the condition")
                if cond.text != "%flag":
                    self.report(10, line, cond.col, f"{what} is on %flag, found {show(cond.text)}")
                if c.lit("->"):
                    self.report(10, line, c.col(), f"{what} has no results")
                    return self.wrapper_body(node, site, inner)
            else:
                c.expect("scf.for")
                site.iv = c.need(SSA_RE, "the induction variable")
                c.expect("=")
                for want, sep in (("%lo", "to"), ("%hi", "step"), ("%stp", None)):
                    bound = c.need(SSA_RE, f"the bound {want}")
                    if bound.text != want:
                        self.report(
                            10,
                            line,
                            bound.col,
                            f"{what} runs %lo to %hi step %stp, found {show(bound.text)} where "
                            f"{want} belongs",
                        )
                    if sep:
                        c.expect(sep)
                col = c.col()
                if c.match(re.compile(r"iter_args\b")):
                    self.report(10, line, col, f"{what} has no iter_args")
                    return self.wrapper_body(node, site, inner)
                if c.lit("->"):
                    self.report(10, line, col, f"{what} has no results")
                    return self.wrapper_body(node, site, inner)
                if c.lit(":"):
                    ty = c.need(TYPE_RE, "the bound type")
                    if ty.text != "index":
                        self.report(
                            23, line, ty.col, f"loop bounds are index, found {show(ty.text)}"
                        )
                if site.iv.text in env:
                    self.report(
                        10,
                        line,
                        site.iv.col,
                        f"the induction variable redefines the thread value {site.iv.text}",
                    )
                inner[site.iv.text] = "index"
                self.thread_names.add(site.iv.text)
            c.expect("{")
            c.end()
        except ParseFailure as f:
            self.report(10, line, f.col, f"malformed {what}: {f.msg}")
        return self.wrapper_body(node, site, inner)

    def wrapper_body(self, node: Node, site: Site, env: dict[str, str]) -> Site:
        self.check_close(node, 10, "a wrapper")
        for mid in node.mids:
            self.report(10, mid, mid.col, "a wrapper around a region has a single block: no `else`")
        body = node.body
        for j, child in enumerate(body):
            kind = self.thread_op_kind(child)
            if kind == "region":
                site.regions.append(self.check_region(child, env))
            elif kind == "call":
                self.report(
                    21,
                    child.line,
                    child.line.col,
                    "a call may stand only directly in a thread body, not inside a wrapper",
                )
            elif (
                op_name(child.line) == "scf.yield"
                and j == len(body) - 1
                and not token_diff(child.line, "scf.yield")
            ):
                pass  # the implicit terminator, written out: harmless (C7 notes it)
            elif not holds_region(child):  # a nested wrapper holding a region is P9 (stray scan)
                self.report(
                    10,
                    child.line,
                    child.line.col,
                    "a wrapper holds only loom.spatial_region sites, found "
                    f"`{show(op_name(child.line) or child.line.code.strip())}`",
                )
        if not holds_region(node):
            self.report(
                10, node.line, node.line.col, "this scf wrapper holds no loom.spatial_region"
            )
        return site

    def check_stray_regions(self, tops: list[Node]) -> None:
        """P9: every region not checked in place sits somewhere it must not."""

        def visit(nodes: list[Node], ancestors: list[Node]) -> None:
            for node in nodes:
                code = node.line.code
                if "loom.spatial_region" in code and id(node) not in self.processed:
                    col = code.find("loom.spatial_region") + 1
                    if col > 1 and code[col - 2] == '"':
                        col -= 1
                    names = [op_name(a.line) for a in ancestors]
                    if any("loom.spatial_region" in a.line.code for a in ancestors):
                        why = "nested inside another loom.spatial_region"
                    elif "func.func" in names or "llvm.func" in names:
                        why = "inside a function; regions live only in thread bodies"
                    elif "dataflow.thread" not in names:
                        why = "outside any dataflow.thread"
                    else:
                        why = "not at a thread body's top level or one scf.if/scf.for below it"
                        if self.conventions and sum(n in ("scf.if", "scf.for") for n in names) > 1:
                            self.report("C22", node.line, col, "a site has at most one wrapper")
                    self.report(9, node.line, col, f"loom.spatial_region {why}")
                for block in node.blocks:
                    visit(block, ancestors + [node])

        visit(tops, [])
