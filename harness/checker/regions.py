"""One loom.spatial_region as a whole: its header and closing line (P11), segment
sizes (P12), operands (P15), attributes (P16), result binding (P17, P18), and the
names that must be unique across the program (P16, P17, P24)."""

from __future__ import annotations

import re

from .records import Region, RegionHeader, RegionTail
from .region_body import RegionBodyChecker
from .text import Cursor, Line, ParseFailure, Token, same_type, show, tokenize
from .tree import Node


_REGION_OPERANDS = ("%val", "%mem", "%flag")  # P15


class RegionChecker(RegionBodyChecker):
    """Checks a region's header and closing line, then hands its body down."""

    def check_region(self, node: Node, env: dict[str, str]) -> Region:
        self.processed.add(id(node))
        region = Region(node)
        self.regions.append(region)
        hdr = self.parse_region_header(node.line)
        region.result = hdr.result
        tail = self.parse_region_tail(node.close) if node.close else RegionTail()
        if not node.blocks:
            return region  # header parse reported the missing `({`
        for mid in node.mids:
            self.report(
                11, mid, mid.col, "a loom.spatial_region has exactly one region (one entry block)"
            )
        ins, outs = tail.ins, tail.outs
        close = node.close or node.last_line()
        if hdr.operands is not None and ins is not None and len(hdr.operands) != len(ins):
            self.report(
                11,
                close,
                ins[0].col if ins else close.col,
                f"{len(hdr.operands)} operand(s) but the functional type lists {len(ins)}",
            )
        self.check_segments(node, hdr, ins, outs)
        # P15: only the thread's arguments go in; P23: with their own types.
        for i, op in enumerate(hdr.operands or []):
            if op.text not in _REGION_OPERANDS:
                self.report(
                    15,
                    node.line,
                    op.col,
                    f"region operand {show(op.text)} is not one of the thread's %val, %mem, %flag",
                )
            if (
                ins is not None
                and i < len(ins)
                and op.text in env
                and not same_type(env[op.text], ins[i].text)
            ):
                self.report(
                    23,
                    close,
                    ins[i].col,
                    f"operand {op.text} has type {env[op.text]}, the functional type says "
                    f"{show(ins[i].text)}",
                )
        for t in (ins or []) + (outs or []):
            self.check_type_text(t.text, close, t.col)
        # P17, P18: result binding.
        if hdr.result is not None:
            if outs is not None and not outs:
                self.report(
                    18,
                    node.line,
                    hdr.result.col,
                    "a region that yields nothing binds no SSA result, found "
                    f"{show(hdr.result.text)}",
                )
            else:
                env[hdr.result.text] = outs[0].text if outs else None
        elif outs:
            self.report(
                17, node.line, node.line.col, "the region's result is not bound to an SSA name"
            )
        if tail.attrs is not None:
            self.check_region_attrs(region, close, tail)
        self.check_region_body(node, hdr, ins, outs)
        return region

    def parse_region_header(self, line: Line) -> RegionHeader:
        hdr = RegionHeader()
        c = Cursor(line)
        try:
            results = c.results()
            if len(results) > 1:
                self.report(
                    11, line, results[1].col, "a loom.spatial_region binds at most one result name"
                )
            hdr.result = results[0] if results else None
            col = c.col()
            if not c.lit('"loom.spatial_region"'):
                if not c.lit("loom.spatial_region"):
                    raise ParseFailure(col, f'expected "loom.spatial_region", found {c.peek()}')
                self.report(
                    11,
                    line,
                    col,
                    'regions are in generic form: the name is the quoted "loom.spatial_region"',
                )
            hdr.operands = c.values()
            col = c.col()
            if not c.lit("<{"):
                raise ParseFailure(
                    col,
                    "expected the properties "
                    f"<{{operandSegmentSizes = ..., resultSegmentSizes = ...}}>, found {c.peek()}",
                )
            props = self.check_dict(
                line,
                col,
                c.entries("}>"),
                ("operandSegmentSizes", "resultSegmentSizes"),
                11,
                "the region's properties",
            )
            if "operandSegmentSizes" in props:
                hdr.op_segs = self.read_segments(line, props["operandSegmentSizes"], 11)
            if "resultSegmentSizes" in props:
                hdr.res_segs = self.read_segments(line, props["resultSegmentSizes"], 11)
            c.expect("(", "opening the region list `({`")
            c.expect("{", "opening the region body `({`")
            c.end()
        except ParseFailure as f:
            self.report(11, line, f.col, f"malformed region header: {f.msg}")
        return hdr

    def parse_region_tail(self, line: Line) -> RegionTail:
        tail = RegionTail()
        c = Cursor(line)
        try:
            c.expect("}")
            c.expect(")", "closing the region list `})`")
            col = c.col()
            if c.lit("{"):
                tail.attrs_col = col
                tail.attrs = c.entries("}")
            else:
                self.report(
                    11,
                    line,
                    col,
                    "missing the trailing attribute dictionary {graph_name = ..., source_maps = "
                    "[]}",
                )
                self.report(16, line, col, "the region carries no graph_name and source_maps")
            c.expect(":", "before the region's functional type")
            tail.ins, tail.outs = c.fn_type()
            c.end()
        except ParseFailure as f:
            self.report(11, line, f.col, f"malformed region closing line: {f.msg}")
        return tail

    def check_segments(
        self, node: Node, hdr: RegionHeader, ins: list[Token] | None, outs: list[Token] | None
    ) -> None:
        """P12: four operand segments, two result segments, sums match the type."""
        for key, segs, entries, count, what in (
            ("operandSegmentSizes", hdr.op_segs, 4, ins, "operand"),
            ("resultSegmentSizes", hdr.res_segs, 2, outs, "result"),
        ):
            if segs is None:
                continue
            col = node.line.code.find(key) + 1 or node.line.col
            if len(segs) != entries:
                self.report(
                    12, node.line, col, f"{key} has {len(segs)} entries, expected {entries}"
                )
            if any(s < 0 for s in segs):
                self.report(12, node.line, col, f"{key} has a negative entry")
            if count is not None and sum(segs) != len(count):
                self.report(
                    12,
                    node.line,
                    col,
                    f"{key} sums to {sum(segs)} but the functional type has {len(count)} {what}(s)",
                )

    def check_region_attrs(self, region: Region, line: Line, tail: RegionTail) -> None:
        """P16: exactly graph_name (a string) and source_maps = []."""
        attrs = self.check_dict(
            line,
            tail.attrs_col,
            tail.attrs or [],
            ("graph_name", "source_maps"),
            16,
            "the region's attributes",
        )
        graph = attrs.get("graph_name")
        if graph is not None:
            if re.fullmatch(r'"(?:[^"\\]|\\.)*"', graph.text):
                region.graph = graph
            else:
                self.report(
                    16, line, graph.col, f"graph_name is a string, found `{show(graph.text)}`"
                )
        maps = attrs.get("source_maps")
        if maps is not None and [t.text for t in tokenize(maps.text)] != ["[", "]"]:
            self.report(16, line, maps.col, f"source_maps = [], found `{show(maps.text)}`")

    def check_unique_names(self) -> None:
        """P16/P17/P24: graph names, result names, thread symbols."""
        seen_graph: dict[str, int] = {}
        seen_result: dict[str, int] = {}
        for region in self.regions:
            if region.graph is not None:
                first = seen_graph.setdefault(
                    region.graph.text, region.node.close.no if region.node.close else 0
                )
                if region.node.close and first != region.node.close.no:
                    msg = f"graph_name {show(region.graph.text)} is already used at line {first}"
                    self.report(16, region.node.close, region.graph.col, msg)
                    self.report(24, region.node.close, region.graph.col, msg)
            if region.result is not None:
                first = seen_result.setdefault(region.result.text, region.node.line.no)
                if first != region.node.line.no:
                    msg = f"result name {region.result.text} is already bound at line {first}"
                    self.report(17, region.node.line, region.result.col, msg)
                    self.report(24, region.node.line, region.result.col, msg)
                elif region.result.text in self.thread_names:
                    self.report(
                        17,
                        region.node.line,
                        region.result.col,
                        f"result name {region.result.text} is already bound in a thread",
                    )
        seen_sym: dict[str, int] = {}
        for th in self.threads:
            if th.sym is None:
                continue
            if th.sym.text in self.symbols:
                self.report(
                    24,
                    th.node.line,
                    th.sym.col,
                    f"thread symbol {th.sym.text} is already a module-level function",
                )
            first = seen_sym.setdefault(th.sym.text, th.node.line.no)
            if first != th.node.line.no:
                self.report(
                    24,
                    th.node.line,
                    th.sym.col,
                    f"thread symbol {th.sym.text} is already defined at line {first}",
                )
