"""The compiled passes' generated modules, printed for a small grammar and read back:
what each defines, and that what it defines is what the core runs (issue 26, item 5)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

from harness.core.codec import encode, encoder_module, layout_module
from harness.core.grammar import load_file
from harness.core.render import renderer
from harness.core.render_code import render_pass_module
from harness.core.tree import choice_nodes, choice_nodes_module
from harness.core.walk import bytes_walk_module, random_trees, random_walk_module

GRAMMARS_FILE = Path(__file__).resolve().parent / "grammars" / "arith_recursive.py"


def _defined(source: str) -> dict[str, list[str]]:
    """Function name -> the names of the functions defined directly inside it ('' : top level)."""
    tree = ast.parse(source)
    out: dict[str, list[str]] = {"": []}

    def visit(body, owner: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef):
                out[owner].append(node.name)
                out[node.name] = []
                visit(node.body, node.name)

    visit(tree.body, "")
    return out


def test_generated_modules_print_compile_and_define_a_function_per_nonterminal():
    g = load_file(str(GRAMMARS_FILE))
    drawn = [n for n in range(len(g.names)) if g.unique[n] is None and g.tables[n] is None]
    listed = [n for n in range(len(g.names)) if g.unique[n] is None]
    assert drawn and set(drawn) < set(listed)  # the grammar has tabulated pieces to skip
    modules = {
        "random walk": random_walk_module(g), "bytes walk": bytes_walk_module(g),
        "encoder": encoder_module(g), "layout builder": layout_module(g),
        "choice nodes": choice_nodes_module(g), "render pass": render_pass_module(renderer(g)),
    }
    for what, module in modules.items():
        print(f"----- {what}: {module.name}\n{module.source}")  # the pytest log shows it
        compile(module.source, module.name, "exec")
        assert str(GRAMMARS_FILE) in module.name
    walk = _defined(modules["random walk"].source)
    assert walk[""] == ["make"]
    assert walk["make"] == [f"w{n}" for n in drawn] + ["expand"]
    reader = _defined(modules["bytes walk"].source)
    assert reader["make"] == [f"b{n}" for n in listed] + ["expand"]
    encoder = _defined(modules["encoder"].source)[""]
    assert [name for name in encoder if name[0] == "e" and name[1:].isdigit()] == [f"e{n}" for n in listed]
    assert {f"x{n}" for n in listed if g.tables[n] is not None} <= set(encoder)
    assert encoder[-2:] == ["encode_tree", "encode_node"]
    assert _defined(modules["layout builder"].source)[""] == [f"l{n}" for n in listed] + ["build"]
    assert _defined(modules["choice nodes"].source)[""] == [f"c{n}" for n in listed] + ["nodes"]
    render_pass = _defined(modules["render pass"].source)[""]
    assert render_pass[-3:] == ["miss", "render", "render_batch"]
    assert all(_defined(modules["render pass"].source)[f] == ["r"] for f in render_pass if f[0] == "f")


def test_what_a_generated_module_defines_is_what_the_core_runs():
    g = load_file(str(GRAMMARS_FILE))
    make = random_walk_module(g).load()["make"]
    expand = make(random.Random(3).random)
    assert [expand(g.start, 0) for _ in range(30)] == list(random_trees(g, 3, 30))
    trees = list(random_trees(g, 4, 30))
    encoder = encoder_module(g).load()
    assert [encoder["encode_tree"](t) for t in trees] == [encode(t, g) for t in trees]
    lister = choice_nodes_module(g).load()
    assert [lister["nodes"](t) for t in trees] == [choice_nodes(g, t) for t in trees]
    r = renderer(g)
    text = render_pass_module(r).load()["render"]
    assert [text(t) for t in trees] == [r.interpret(t) for t in trees]


