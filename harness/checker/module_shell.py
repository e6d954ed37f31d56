"""The module shell (P1) and its fixed functions: @helper_double (P2),
@extern_scale (P3), @host_container (P4).

The fixed texts are written out here from the spec, on purpose: the checker
never reads them from the renderer or the grammars.
"""

from __future__ import annotations

from .text import SYMBOL_RE, collapse_spaces, op_name, show, token_diff
from .threads import ThreadChecker
from .tree import Node, match_node, template_tree


_HELPER = """\
func.func @helper_double(%a: i32) -> i32 {
  %doubled = arith.addi %a, %a : i32
  return %doubled : i32
}"""

_EXTERN = "llvm.func @extern_scale(i32) -> i32"

_HOST = """\
func.func @host_container(%target: memref<4xi32>, %value: i32) {
  %zero = arith.constant 0 : index
  %four = arith.constant 4 : index
  %one = arith.constant 1 : index
  scf.for %hi = %zero to %four step %one {
    memref.store %value, %target[%hi] : memref<4xi32>
  }
  return
}"""


_HELPER_TREE = template_tree(_HELPER)[0]
_EXTERN_TREE = template_tree(_EXTERN)[0]
_HOST_TREE = template_tree(_HOST)[0]


def _symbol(node: Node) -> str | None:
    """The first @symbol of an item's header."""
    m = SYMBOL_RE.search(node.line.code)
    return m.group() if m else None


class ModuleChecker(ThreadChecker):
    """Checks the top level: one module holding helper, extern, host, then threads."""

    def check_module_shell(self, tops: list[Node]) -> None:
        if not tops:
            first = next((ln for ln in self.lines if ln.code.strip()), None) or self.lines[0]
            self.report(1, first, first.col, "empty program: expected a top-level `module {`")
            return
        for node in tops:
            if self.module is None and op_name(node.line) == "module":
                self.module = node
                diff = token_diff(node.line, "module {")
                if diff:
                    self.report(
                        1, node.line, diff[0], f"the module opens with `module {{`: {diff[1]}"
                    )
                if node.mids:
                    self.report(
                        1, node.mids[0], node.mids[0].col, "the module has exactly one body"
                    )
                if node.close and token_diff(node.close, "}"):
                    self.report(1, node.close, node.close.col, "the module closes with a lone `}`")
            elif self.module is None:
                self.report(
                    1,
                    node.line,
                    node.line.col,
                    f"expected `module {{`, found `{show(collapse_spaces(node.line.code))}`",
                )
            else:
                self.report(
                    1,
                    node.line,
                    node.line.col,
                    f"`{show(collapse_spaces(node.line.code))}` stands outside the single "
                    "top-level module",
                )

    @staticmethod
    def item_kind(node: Node) -> str | None:
        return {"func.func": "func", "llvm.func": "llvm", "dataflow.thread": "thread"}.get(
            op_name(node.line)
        )

    def check_module_items(self, module: Node) -> None:
        describe = {
            "func": "a func.func",
            "llvm": "the llvm.func declaration",
            "thread": "a dataflow.thread",
        }
        order = ["func", "llvm", "func"]
        known: list[tuple[str, Node]] = []
        for item in module.body:
            kind = self.item_kind(item)
            if kind is None:
                name = op_name(item.line) or item.line.code.strip()
                self.report(
                    1,
                    item.line,
                    item.line.col,
                    f"unknown top-level operation `{show(name)}` in the module",
                )
                continue
            known.append((kind, item))
            if kind in ("func", "llvm") and _symbol(item):
                self.symbols.setdefault(_symbol(item), kind)
        # Order: helper, extern, host, then one or more threads (one report is enough).
        for i, (kind, item) in enumerate(known):
            want = order[i] if i < 3 else "thread"
            if kind != want:
                self.report(
                    1,
                    item.line,
                    item.line.col,
                    f"expected {describe[want]} here (module order: helper, extern, host, "
                    f"threads), found {describe[kind]}",
                )
                break
        else:
            if len(known) < 4:
                missing = (order + ["thread"])[len(known)]
                where = module.close or module.last_line()
                self.report(
                    1,
                    where,
                    where.col,
                    f"the module lacks {describe[missing]} (module order: helper, extern, host, "
                    "threads)",
                )
        # Roles by name first, so that an ordering slip is P1 alone.
        funcs = [item for kind, item in known if kind == "func"]
        llvms = [item for kind, item in known if kind == "llvm"]
        helper = next((f for f in funcs if _symbol(f) == "@helper_double"), None)
        host = next((f for f in funcs if f is not helper and _symbol(f) == "@host_container"), None)
        helper = helper or next((f for f in funcs if f is not host), None)
        host = host or next((f for f in funcs if f is not helper), None)
        extern = next(
            (f for f in llvms if _symbol(f) == "@extern_scale"), llvms[0] if llvms else None
        )
        if helper:
            self.check_fixed(helper, _HELPER_TREE, 2, "@helper_double")
        if extern:
            self.check_fixed(extern, _EXTERN_TREE, 3, "@extern_scale")
        if host:
            self.check_fixed(host, _HOST_TREE, 4, "@host_container")
        for kind, item in known:
            if kind == "thread":
                self.check_thread(item)

    # ---- P2, P3, P4: the constant preamble --------------------------------

    def check_fixed(self, node: Node, template: Node, rule: int, what: str) -> None:
        if rule == 3 and node.blocks:
            self.report(3, node.line, node.line.col, f"{what} is a declaration: no body")
            return
        diff = match_node(node, template)
        if diff:
            self.report(
                rule, diff[0], diff[1], f"{what} must be exactly the spec's text: {diff[2]}"
            )
