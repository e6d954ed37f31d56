"""Derivation trees: the one representation under generation, mutation and triage.

A node is a plain tuple ``(nonterminal id, alternative index, children)``
with ``children`` a tuple of nodes, one per nonterminal of the chosen
expansion, in order.  Terminals are not stored (the grammar has them), nor
are names and counters: the render pass derives them, so no tree can break a
uniqueness rule.  Tuples are immutable and hashable (caches, deduplication)
and cheap to build on the fuzzing hot path; equal subtrees may be shared.

Paths address nodes: a path is the tuple of child positions from the root.
This module also converts to and from fuzzingbook's ``(symbol, children)``
trees, so fuzzingbook's own tools can read ours.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator

from harness.core.codegen import Module
from harness.core.compiled import CompiledGrammar, Node, PLACEHOLDERS

Path = tuple[int, ...]


def size(node: Node) -> int:
    """Number of nodes."""
    return 1 + sum(size(kid) for kid in node[2])


def depth(node: Node) -> int:
    return 1 + max((depth(kid) for kid in node[2]), default=0)


def walk_nodes(node: Node, path: Path = ()) -> Iterator[tuple[Path, Node]]:
    """(path, node) in pre-order (emission order)."""
    stack = [(path, node)]
    while stack:
        p, current = stack.pop()
        yield p, current
        kids = current[2]
        for i in range(len(kids) - 1, -1, -1):
            stack.append((p + (i,), kids[i]))


def choice_nodes(grammar: CompiledGrammar, tree: Node) -> list[tuple[Path, Node]]:
    """(path, node) of every node that has a choice at or below it (the nodes an encoding
    holds bytes for: a node of a unique nonterminal has none), in pre-order.  Compiled
    per grammar, one function per nonterminal: a mutator lists every new input's nodes."""
    return grammar.derived(_compile_choice_nodes)(tree)


def kid_calls(calls: list[list[str]], bind_alternative: bool = False, pad: str = "    ") -> list[str]:
    """Generated source, for the passes compiled per grammar (the node lister here, the
    encoder and layout builder of :mod:`harness.core.codec`): the calls ``calls[a]``
    alternative ``a`` makes on its children, straight-line when every alternative makes
    the same ones, else one branch per alternative on ``a`` (bound from ``node[1]``
    first when ``bind_alternative``; else the caller's code has bound it)."""
    if len(set(map(tuple, calls))) == 1:
        return [pad + call for call in calls[0]]
    return ([pad + "a = node[1]"] if bind_alternative else []) + [
        f"{pad}{'if' if a == 0 else 'elif'} a == {a}: " + ("; ".join(cs) or "pass")
        for a, cs in enumerate(calls)]


def _compile_choice_nodes(grammar: CompiledGrammar):
    """``nodes(tree)`` for :func:`choice_nodes`: :func:`choice_nodes_module`, run."""
    namespace = choice_nodes_module(grammar).load()
    lock = threading.Lock()  # the module global holds the list being filled

    def nodes(tree: Node) -> list[tuple[Path, Node]]:
        with lock:
            return namespace["nodes"](tree)

    return nodes


def choice_nodes_module(grammar: CompiledGrammar) -> Module:
    """``nodes(tree)`` as Python source for the grammar: one function per nonterminal
    appending ``(path, node)`` and calling its children's."""
    g = grammar
    module = Module(f"<choice nodes of {g.source}>", constants={"U": g.unique})
    lines = module.lines
    for n in range(len(g.names)):
        if g.unique[n] is not None:
            continue
        calls = [[f"c{k}(kids[{i}], path + ({i},))" for i, k in enumerate(alt.kids) if g.unique[k] is None]
                 for alt in g.alts[n]]
        lines += [f"def c{n}(node, path):", "    append((path, node))"]
        if any(calls):
            lines += ["    kids = node[2]", *kid_calls(calls, bind_alternative=True)]
    lines += [
        "C = [" + ", ".join("None" if g.unique[n] is not None else f"c{n}" for n in range(len(g.names))) + "]",
        "def nodes(tree):",
        "    global append",
        "    out = []",
        "    append = out.append",
        "    if U[tree[0]] is None: C[tree[0]](tree, ())",
        "    return out",
    ]
    return module


def node_at(node: Node, path: Path) -> Node:
    for i in path:
        node = node[2][i]
    return node


def replace_at(node: Node, path: Path, new: Node) -> Node:
    """A copy of ``node`` with the subtree at ``path`` replaced (shares the rest)."""
    spine = []  # the nodes down the path, rebuilt bottom-up (no recursion: paths are long)
    for i in path:
        spine.append(node)
        node = node[2][i]
    for i in range(len(path) - 1, -1, -1):
        parent = spine[i]
        kids = list(parent[2])
        kids[path[i]] = new
        new = (parent[0], parent[1], tuple(kids))
    return new


def smallest_tree(grammar: CompiledGrammar, n: int) -> Node:
    """The derivation of ``n`` with the fewest nodes (what an exhausted input decodes to)."""
    a = grammar.cheapest[n]
    return intern(grammar, (n, a, tuple(smallest_tree(grammar, k) for k in grammar.alts[n][a].kids)))


def refill(old: tuple, want: tuple[int, ...], fill) -> tuple:
    """Children for the nonterminals ``want`` (another alternative of the same node):
    the old children of the same nonterminal, in order, where there are some;
    ``fill(symbol)`` for the rest."""
    unused = list(old)
    out = []
    for symbol in want:
        for i, kid in enumerate(unused):
            if kid[0] == symbol:
                out.append(unused.pop(i))
                break
        else:
            out.append(fill(symbol))
    return tuple(out)


def intern(grammar: CompiledGrammar, node: Node) -> Node:
    """The tabulated language's own object for ``node`` (it renders and encodes from
    caches), or ``node`` itself when its nonterminal is not tabulated."""
    table = grammar.tables[node[0]]
    return table.trees[table.index[node]] if table is not None else node


def decisions(grammar: CompiledGrammar, node: Node) -> Iterator[tuple[int, int]]:
    """(nonterminal, alternative) of every node that had a choice, in pre-order."""
    alts = grammar.alts
    for _, current in walk_nodes(node):
        if len(alts[current[0]]) > 1:
            yield current[0], current[1]


def is_valid(grammar: CompiledGrammar, node: Node, symbol: int | None = None) -> bool:
    """True when ``node`` is a derivation tree of ``grammar`` (from ``symbol``)."""
    stack = [(grammar.start if symbol is None else symbol, node)]
    while stack:
        expected, current = stack.pop()
        if not (isinstance(current, tuple) and len(current) == 3 and current[0] == expected):
            return False
        n, a, kids = current
        if not (isinstance(a, int) and 0 <= a < len(grammar.alts[n])):
            return False
        want = grammar.alts[n][a].kids
        if not isinstance(kids, tuple) or len(kids) != len(want):
            return False
        stack.extend(zip(want, kids))
    return True


def describe(grammar: CompiledGrammar, node: Node) -> str:
    """A one-line summary: the label of every choice made, nested where a choice holds
    others, e.g. ``threads=1[top-call=icall sites=1[site=for[region=freeze]]]``."""

    def show(current: Node) -> list[str]:
        n, a, kids = current
        inner = [part for kid in kids for part in show(kid)]
        if len(grammar.alts[n]) == 1:
            return inner
        name = grammar.names[n][1:-1]
        text = f"{name}={grammar.alts[n][a].label or 'ε'}"
        return [f"{text}[{' '.join(inner)}]" if inner else text]

    return " ".join(show(node))


# ------------------------------------------------------ fuzzingbook trees

_UNESCAPE = str.maketrans({"\u2039": "<", "\u203a": ">"})


def _unescape(text: str) -> str:
    """Terminal text as compiled (the grammar file's ‹› read as MLIR's <>)."""
    return text.translate(_UNESCAPE)


FuzzingbookTree = tuple[str, Any]


def to_fuzzingbook(grammar: CompiledGrammar, node: Node) -> FuzzingbookTree:
    """fuzzingbook's ``(symbol, children)`` tree; terminals as written in the grammar
    (with the ``$NAME``, ``$k`` and ``$^K`` placeholders unfilled)."""
    n, a, kids = node
    alt = grammar.alts[n][a]
    children: list = []
    for part in alt.parts:
        if isinstance(part, int):
            children.append(to_fuzzingbook(grammar, kids[part]))
        else:
            text = part.written if isinstance(part, PLACEHOLDERS) else part
            if children and isinstance(children[-1][0], str) and children[-1][1] == [] \
                    and not children[-1][0].startswith("<"):
                children[-1] = (children[-1][0] + text, [])
            else:
                children.append((text, []))
    return (grammar.names[n], children)


def from_fuzzingbook(grammar: CompiledGrammar, tree: FuzzingbookTree) -> Node:
    """Our tree for a fuzzingbook derivation tree of the same grammar."""
    symbol, children = tree
    n = grammar.ids[symbol]
    kids = tuple(from_fuzzingbook(grammar, child) for child in children or ()
                 if child[0] in grammar.ids and child[1] is not None)
    kid_ids = tuple(kid[0] for kid in kids)
    text = _unescape("".join(child[0] for child in children or ()))
    candidates = [a for a, alt in enumerate(grammar.alts[n]) if alt.kids == kid_ids]
    if len(candidates) > 1:  # same nonterminals: tell them apart by the expansion text
        exact = [a for a in candidates if _unescape(grammar.alts[n][a].text) == text]
        candidates = exact or candidates
    if not candidates:
        raise ValueError(f"{symbol}: no alternative has the children {[c[0] for c in children or ()]}")
    return (n, candidates[0], kids)
