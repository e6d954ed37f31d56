"""The default profile's sampling conventions that one program can show (C1-C8
with C9-C13's fixed bodies, C14, C19, C20, C22); read from the records the
precondition pass left behind."""

from __future__ import annotations

from .records import Region, Site, Thread
from .state import CheckerState
from .text import Line, op_head, op_name, show, token_diff, tokenize
from .tree import Node, match_list, template_tree, walk_nodes


# The six region forms of C8 (bodies from ^bb0 through the yield) and their
# header/closing lines (C14).  RES and GRAPH are filled with the region's own
# names, so that numbering is judged by C4 alone.
_VALUE_HEADER = (
    'RES = "loom.spatial_region"(%val) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, '
    "resultSegmentSizes = array<i32: 1, 0>}> ({"
)
_VALUE_CLOSE = '}) {graph_name = "GRAPH", source_maps = []} : (i32) -> i32'
_FORMS: dict[str, tuple[str, str, str]] = {
    "arith": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %s = arith.addi %a, %a : i32
  %p = arith.muli %s, %a : i32
  "loom.spatial_yield"(%p) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
    "memory": (
        '"loom.spatial_region"(%val, %mem) <{operandSegmentSizes = array<i32: 1, 0, 1, 0>, '
        "resultSegmentSizes = array<i32: 0, 0>}> ({",
        """\
^bb0(%payload: i32, %memory: memref<4xi32>):
  %z = arith.constant 0 : index
  memref.store %payload, %memory[%z] : memref<4xi32>
  "loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()""",
        '}) {graph_name = "GRAPH", source_maps = []} : (i32, memref<4xi32>) -> ()',
    ),
    "branch": (
        'RES = "loom.spatial_region"(%val, %flag) <{operandSegmentSizes = array<i32: 2, 0, 0, 0>, '
        "resultSegmentSizes = array<i32: 1, 0>}> ({",
        """\
^bb0(%a: i32, %c: i1):
  %sel = scf.if %c -> (i32) {
    %t = arith.addi %a, %a : i32
    scf.yield %t : i32
  } else {
    %m = arith.muli %a, %a : i32
    scf.yield %m : i32
  }
  "loom.spatial_yield"(%sel) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        '}) {graph_name = "GRAPH", source_maps = []} : (i32, i1) -> i32',
    ),
    "freeze": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %stable = llvm.freeze %a : i32
  "loom.spatial_yield"(%stable) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
    "loop": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %acc = scf.for %i = %c0 to %c2 step %c1 iter_args(%carry = %a) -> (i32) {
    %next = arith.addi %carry, %a : i32
    scf.yield %next : i32
  }
  "loom.spatial_yield"(%acc) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
    "call (func.call)": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %called = func.call @helper_double(%a) : (i32) -> i32
  "loom.spatial_yield"(%called) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
    "call (llvm.call)": (
        _VALUE_HEADER,
        """\
^bb0(%a: i32):
  %called = llvm.call @extern_scale(%a) : (i32) -> i32
  "loom.spatial_yield"(%called) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()""",
        _VALUE_CLOSE,
    ),
}
_ICALL = "%icall = func.call @helper_double(%val) : (i32) -> i32"


_FORM_TREES = {name: template_tree(body) for name, (_, body, _) in _FORMS.items()}


class ConventionChecker(CheckerState):
    """Judges the conventions after the precondition walk."""

    def check_conventions(self, tops: list[Node]) -> None:
        if len(self.threads) > 2:
            self.report(
                "C1", self.threads[2].node.line, 1, "the default profile emits 1 or 2 threads"
            )
        counter = values = 0
        for t, th in enumerate(self.threads):
            if th.sym is not None and th.sym.text != f"@thread_{t}":
                self.report(
                    "C2",
                    th.node.line,
                    th.sym.col,
                    f"thread {t} is named @thread_{t}, found {th.sym.text}",
                )
            if not 1 <= len(th.sites) <= 2:
                self.report(
                    "C3",
                    th.node.line,
                    th.node.line.col,
                    f"a thread has 1 or 2 region sites, found {len(th.sites)}",
                )
            self.check_icall_convention(th)
            for site in th.sites:
                self.check_site_convention(site)
                for region in site.regions:
                    self.check_counter(region, counter, values)
                    self.check_form(region)
                    values += region.result is not None
                    counter += 1
        self.check_layout(tops)

    def check_icall_convention(self, th: Thread) -> None:
        for n, (idx, node) in enumerate(th.calls):
            if n > 0:
                self.report("C6", node.line, node.line.col, "at most one top-level call per thread")
            elif idx != 3:
                self.report(
                    "C6",
                    node.line,
                    node.line.col,
                    "the top-level call stands right after the three index constants",
                )
            diff = token_diff(node.line, _ICALL)
            if diff:
                self.report(
                    "C6", node.line, diff[0], f"the top-level call is `{_ICALL}`: {diff[1]}"
                )
            results = op_head(node.line)[0]
            for r in results:
                for other in walk_nodes(th.node.body):
                    if other is not node:
                        for ln in [other.line, *other.mids] + (
                            [other.close] if other.close else []
                        ):
                            for tok in tokenize(ln.code):
                                if tok.text == r.text:
                                    self.report(
                                        "C6",
                                        ln,
                                        tok.col,
                                        f"the top-level call's result {r.text} is never used",
                                    )

    def check_site_convention(self, site: Site) -> None:
        if site.wrapper is None:
            return
        if site.iv is not None and site.iv.text != "%iv":
            self.report(
                "C19",
                site.wrapper.line,
                site.iv.col,
                f"a thread-level scf.for's induction variable is %iv, found {site.iv.text}",
            )
        if len(site.regions) != 1:
            self.report(
                "C7",
                site.wrapper.line,
                site.wrapper.line.col,
                f"a wrapper holds exactly one region site, found {len(site.regions)}",
            )
        for child in site.wrapper.body:
            if "loom.spatial_region" not in child.line.code:
                self.report(
                    "C7", child.line, child.line.col, "a wrapper holds its region and nothing else"
                )

    def check_counter(self, region: Region, counter: int, values: int) -> None:
        """C4/C5: one module-wide counter names %rN and graph_N, once per site."""
        if region.graph is not None and region.graph.text != f'"graph_{counter}"':
            self.report(
                "C4",
                region.node.close or region.node.line,
                region.graph.col,
                f'region {counter} in emission order is named "graph_{counter}", found '
                f"{show(region.graph.text)}",
            )
        if region.result is not None and region.result.text != f"%r{counter}":
            if region.result.text == f"%r{values}" and values != counter:
                self.report(
                    "C5",
                    region.node.line,
                    region.result.col,
                    "the counter advances for every site, also memory forms with no result: "
                    f"expected %r{counter}",
                )
            else:
                self.report(
                    "C4",
                    region.node.line,
                    region.result.col,
                    f"region {counter} in emission order binds %r{counter}, found "
                    f"{show(region.result.text)}",
                )

    def check_form(self, region: Region) -> None:
        """C8 (one of the six bodies, C9-C13 fix them) and C14 (their segments)."""
        node = region.node
        body = node.body
        end = node.close or node.last_line()
        best: tuple[tuple[int, int], str, tuple[Line, int, str]] | None = None
        for name, tree in _FORM_TREES.items():
            diff = match_list(body, tree, end)
            if diff is None:
                header, _, close = _FORMS[name]
                res = region.result.text if region.result else "%rN"
                graph = region.graph.text.strip('"') if region.graph else "graph_N"
                diff = token_diff(node.line, header.replace("RES", res))
                if diff:
                    self.report(
                        "C14", node.line, diff[0], f"the {name} form's region header: {diff[1]}"
                    )
                if node.close:
                    diff = token_diff(node.close, close.replace("GRAPH", graph))
                    if diff:
                        self.report(
                            "C14", node.close, diff[0], f"the {name} form's closing line: {diff[1]}"
                        )
                return
            key = (diff[0].no, diff[1])
            if best is None or key > best[0]:
                best = (key, name, diff)
        if best is not None:
            line, col, msg = best[2]
            self.report(
                "C8",
                line,
                col,
                f"the region body is none of the six forms (closest: {best[1]}): {msg}",
            )

    def check_layout(self, tops: list[Node]) -> None:
        """C20: the canonical program's indentation and blank lines."""

        def at(line: Line, want: int) -> None:
            lead = line.raw[: len(line.raw) - len(line.raw.lstrip())]
            if "\t" in lead:
                self.report("C20", line, 1, "indentation uses spaces, not tabs")
            elif len(lead) != want:
                self.report(
                    "C20",
                    line,
                    len(lead) + 1,
                    f"indented {len(lead)} columns, the canonical layout has {want}",
                )

        def visit(nodes: list[Node], indent: int, in_region: bool) -> None:
            for i, node in enumerate(nodes):
                own = (
                    indent + 2
                    if in_region and not (i == 0 and node.line.code.strip().startswith("^"))
                    else indent
                )
                at(node.line, own)
                for ln in node.mids + ([node.close] if node.close else []):
                    at(ln, own)
                is_module = op_name(node.line) == "module" and node is self.module
                for block in node.blocks:
                    visit(
                        block, 0 if is_module else own + 2, "loom.spatial_region" in node.line.code
                    )

        visit(tops, 0, False)
        end = self.module.close.no if self.module and self.module.close else len(self.lines)
        after_thread = {th.node.close.no + 1 for th in self.threads if th.node.close}
        for ln in self.lines[:end]:
            if not ln.raw.strip():
                if ln.no not in after_thread:
                    self.report(
                        "C20",
                        ln,
                        1,
                        "unexpected blank line: only each thread definition is followed by one",
                    )
            elif ln.raw != ln.raw.rstrip():
                self.report("C20", ln, len(ln.raw.rstrip()) + 1, "trailing whitespace")
        for th in self.threads:
            close = th.node.close
            if close is not None and (
                close.no >= len(self.lines) or self.lines[close.no].raw.strip()
            ):
                self.report(
                    "C20", close, close.end, "each thread definition is followed by a blank line"
                )
