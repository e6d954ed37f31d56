"""What compiling a grammar computes about it: reachability, sizes, languages, tables.

Each function takes the :class:`~harness.core.compiled.CompiledGrammar` being
built by :func:`harness.core.grammar.compile_grammar` and fills in fields
derived from its alternatives (``fail(symbol, what)`` makes the
``GrammarError`` naming a nonterminal):

* :func:`reachability`: every nonterminal is reachable from the start;
* :func:`min_sizes`: the fewest nodes and least depth of a finite derivation
  of each nonterminal and alternative, and the cheapest / shallowest
  alternatives the walk falls back to;
* :func:`languages`: how many trees each nonterminal has (None: recursive),
  its width in the choice-sequence layout, the depth of its deepest tree;
* :func:`tables`: the whole language of each nonterminal with at most
  :data:`TABLE_LIMIT` trees, as a :class:`~harness.core.compiled.Table`;
* :func:`byte_table`: the codec's byte -> alternative map.
"""

from __future__ import annotations

import math
from itertools import accumulate, product

from harness.core.compiled import CompiledGrammar, GrammarError, Node, Table
from harness.core.recursion import deep_recursion

__all__ = ["TABLE_LIMIT", "byte_table", "deepest", "languages", "min_sizes",
           "reachability", "tables"]

#: Finite languages up to this many trees are tabulated (picked whole, rendered from a cache).
TABLE_LIMIT = 4096


def reachability(g: CompiledGrammar, fail) -> None:
    seen = {g.start}
    stack = [g.start]
    while stack:
        for alt in g.alts[stack.pop()]:
            for kid in alt.kids:
                if kid not in seen:
                    seen.add(kid)
                    stack.append(kid)
    for n, name in enumerate(g.names):
        if n not in seen:
            raise fail(name, f"unreachable from the start symbol {g.start_name}")


def min_sizes(g: CompiledGrammar, fail) -> None:
    """Fewest nodes and least depth of a finite derivation, by fixpoint."""
    inf = math.inf
    size = [inf] * len(g.names)
    depth = [inf] * len(g.names)
    changed = True
    while changed:
        changed = False
        for n, alt_list in enumerate(g.alts):
            for alt in alt_list:
                s = 1 + sum(size[k] for k in alt.kids)
                d = 1 + max((depth[k] for k in alt.kids), default=0)
                if s < size[n]:
                    size[n], changed = s, True
                if d < depth[n]:
                    depth[n], changed = d, True
    stuck = [n for n in range(len(g.names)) if size[n] == inf]
    if stuck:
        # Name the cause: a stuck nonterminal on a cycle of stuck ones (the others only reach it).
        def on_cycle(n: int) -> bool:
            seen, stack = set(), [k for a in g.alts[n] for k in a.kids if size[k] == inf]
            while stack:
                k = stack.pop()
                if k == n:
                    return True
                if k not in seen:
                    seen.add(k)
                    stack.extend(j for a in g.alts[k] for j in a.kids if size[j] == inf)
            return False

        cause = next((n for n in stuck if on_cycle(n)), stuck[0])
        others = [g.names[n] for n in stuck if n != cause]
        raise fail(g.names[cause], "has no finite expansion (every alternative recurses forever)"
                   + (f"; so neither do {', '.join(others)}" if others else ""))
    g.min_size = [int(s) for s in size]
    g.min_depth = [int(d) for d in depth]
    g.alt_min_size = [tuple(1 + sum(g.min_size[k] for k in a.kids) for a in alts) for alts in g.alts]
    g.alt_min_depth = [tuple(1 + max((g.min_depth[k] for k in a.kids), default=0) for a in alts)
                       for alts in g.alts]
    g.cheapest = [min(range(len(s)), key=lambda a, s=s: (s[a], a)) for s in g.alt_min_size]
    g.shallowest = [min(range(len(d)), key=lambda a, d=d, s=s: (d[a], s[a], a))
                    for d, s in zip(g.alt_min_depth, g.alt_min_size)]


def languages(g: CompiledGrammar) -> None:
    """Tree counts and layout widths; ``None`` for nonterminals that reach recursion."""
    count: list[int | None] = [None] * len(g.names)
    width: list[int | None] = [None] * len(g.names)
    state = [0] * len(g.names)  # 0 new, 1 in progress, 2 done

    def visit(n: int) -> None:
        state[n] = 1
        infinite = False
        for alt in g.alts[n]:
            for kid in alt.kids:
                if state[kid] == 0:
                    visit(kid)
                if state[kid] == 1 or count[kid] is None:
                    infinite = True
        state[n] = 2
        if not infinite:
            count[n] = sum(math.prod(count[k] for k in a.kids) for a in g.alts[n])  # type: ignore[misc]
            own = 1 if len(g.alts[n]) > 1 else 0
            width[n] = own + max(sum(width[k] for k in a.kids) for a in g.alts[n])  # type: ignore[misc]

    with deep_recursion(10 * len(g.names) + 1000):  # one frame per nonterminal on a path
        for n in range(len(g.names)):
            if state[n] == 0:
                visit(n)
    # A nonterminal that is part of a cycle was marked finite before the cycle closed: redo
    # the marking until stable, so that anything reaching recursion is infinite.
    changed = True
    while changed:
        changed = False
        for n, alt_list in enumerate(g.alts):
            if count[n] is not None and any(count[k] is None for a in alt_list for k in a.kids):
                count[n] = width[n] = None
                changed = True
    g.count, g.width = count, width
    g.deepest = deepest(g)


def deepest(g: CompiledGrammar) -> list[int | None]:
    """The depth of each finite nonterminal's deepest tree (None: recursive)."""
    deepest: list[int | None] = [None] * len(g.names)
    # finite nonterminals only reach finite ones: settle them by fixpoint
    pending = [n for n in range(len(g.names)) if g.count[n] is not None]
    while pending:
        left = []
        for n in pending:
            kids = [k for alt in g.alts[n] for k in alt.kids]
            if all(deepest[k] is not None for k in kids):
                deepest[n] = 1 + max((deepest[k] for k in kids), default=0)  # type: ignore[type-var]
            else:
                left.append(n)
        if len(left) == len(pending):
            raise AssertionError("a finite nonterminal reaches a recursive one")
        pending = left
    return deepest


def tables(g: CompiledGrammar) -> None:
    trees: dict[int, list[tuple[Node, float]]] = {}

    def language(n: int) -> list[tuple[Node, float]]:
        if n not in trees:
            out = []
            for a, alt in enumerate(g.alts[n]):
                for combo in product(*(language(k) for k in alt.kids)):
                    out.append(((n, a, tuple(t for t, _ in combo)),
                                alt.prob * math.prod(p for _, p in combo)))
            trees[n] = out
        return trees[n]

    g.tables = [None] * len(g.names)
    g.unique = [None] * len(g.names)
    # Smallest first, so that shared subtrees are built once.
    for n in sorted(range(len(g.names)), key=lambda n: g.count[n] or math.inf):
        c = g.count[n]
        if c is None or c > TABLE_LIMIT:
            continue
        entries = language(n)
        total = sum(p for _, p in entries) or 1.0
        cumulative = tuple(list(accumulate(p / total for _, p in entries))[:-1]) + (math.inf,)
        nodes = tuple(t for t, _ in entries)
        g.tables[n] = Table(nodes, cumulative, {t: i for i, t in enumerate(nodes)},
                            {id(t): i for i, t in enumerate(nodes)}, g.deepest[n])
        if c == 1:
            g.unique[n] = nodes[0]


def byte_table(probabilities: list[float]) -> bytes:
    """byte -> alternative: each alternative owns a run of bytes in proportion to its
    probability (at least one byte each, so none is unreachable), in order."""
    k = len(probabilities)
    if k == 1:
        return bytes(256)
    if k > 256:
        raise GrammarError(f"more than 256 alternatives ({k}) cannot be one byte of the codec")
    total = sum(probabilities) or 1.0
    share = [max(1, round(256 * p / total)) for p in probabilities]
    while sum(share) > 256:  # take the excess from the largest shares
        share[share.index(max(share))] -= 1
    while sum(share) < 256:
        deficit = [256 * p / total - s for p, s in zip(probabilities, share)]
        share[deficit.index(max(deficit))] += 1
    return bytes(a for a, s in enumerate(share) for _ in range(s))
