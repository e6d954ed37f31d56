"""The mutator's tree operators (Grammarinator's verbs): each a function of what it reads
(:class:`Context`) and its input tree(s), returning the :class:`Edit` it made or None
when it does not apply.  Every operator builds a derivation tree of the grammar
(children always match the chosen alternative), within the walk's depth budget."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple, Optional

from harness.core.byte_mutate import FastRandom
from harness.core.compiled import CompiledGrammar, Node
from harness.core.pool import SubtreePool
from harness.core.tree import Path, depth, intern, node_at, refill, replace_at, smallest_tree
from harness.core.tree_index import TreeIndex


class Edit(NamedTuple):
    """What an operator made: ``result`` from ``tree``; where it replaced one subtree,
    its ``path`` and the ``new`` subtree (so the result's encoding is the tree's with
    one span replaced, :class:`harness.core.codec.Layout`), else None for both."""

    tree: Node
    result: Node
    path: Optional[Path] = None
    new: Optional[Node] = None


def replaced(tree: Node, path: Path, new: Node) -> Edit:
    """The edit putting ``new`` at ``path`` in ``tree``."""
    return Edit(tree, replace_at(tree, path, new), path, new)


@dataclass(frozen=True)
class Repetitions:
    """Where a grammar repeats: list-like nonterminals and right-recursive chains."""

    #: n -> (element symbol, {copies: alternative})
    lists: dict[int, tuple[int, dict[int, int]]]
    #: n -> (element symbol, recursive alternative)
    chains: dict[int, tuple[int, int]]

    @classmethod
    def of(cls, grammar: CompiledGrammar) -> "Repetitions":
        lists, chains = {}, {}
        for n, alt_list in enumerate(grammar.alts):
            if len(alt_list) < 2:
                continue
            symbols = {k for alt in alt_list for k in alt.kids}
            lengths = {len(alt.kids): a for a, alt in enumerate(alt_list)}
            if len(symbols) == 1 and len(lengths) == len(alt_list) and len(lengths) > 1:
                lists[n] = (next(iter(symbols)), lengths)
                continue
            for a, alt in enumerate(alt_list):
                if len(alt.kids) == 2 and alt.kids[1] == n and alt.kids[0] != n:
                    chains[n] = (alt.kids[0], a)
                    break
        return cls(lists, chains)


@dataclass
class Context:
    """What the operators read: the grammar, the tree index, the pool, the random
    generator, and ``regenerate(symbol, depth)`` (a subtree drawn from the PCFG with
    that same generator)."""

    grammar: CompiledGrammar
    index: TreeIndex
    pool: SubtreePool
    rng: FastRandom
    regenerate: Callable[[int, int], Node]
    repetitions: Repetitions = field(init=False)
    #: whether the grammar is recursive (only then can an edit pass the depth budget)
    recursive: bool = field(init=False)
    #: per nonterminal, its deepest tree's depth (infinite when recursive)
    deepest: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.repetitions = Repetitions.of(self.grammar)
        self.recursive = self.grammar.max_bytes is None
        self.deepest = [math.inf if d is None else d for d in self.grammar.deepest]

    def fits_depth(self, path: Path, new: Node) -> bool:
        """Whether ``new`` at ``path`` keeps a tree within the walk's depth budget (a tree
        of depth at most ``max_depth``: exactly the trees its encoding decodes back to)."""
        if not self.recursive:
            return True
        return _depth_at_most(new, self.grammar.max_depth - len(path), self.deepest)


def _depth_at_most(node: Node, budget: int, deepest: list[float]) -> bool:
    """``depth(node) <= budget``, looking only as deep as the grammar leaves in doubt."""
    if deepest[node[0]] <= budget:
        return True
    if budget <= 1:
        return budget == 1 and not node[2]
    return all(_depth_at_most(kid, budget - 1, deepest) for kid in node[2])


# ------------------------------------------------------------ the mutations


def regenerate_node(ctx: Context, tree: Node) -> Optional[Edit]:
    """The subtree under a random node redrawn from the PCFG."""
    nodes = ctx.index(tree).nodes
    if not nodes:
        return None
    path, node = nodes[ctx.rng.below(len(nodes))]
    return replaced(tree, path, ctx.regenerate(node[0], len(path)))


def switch_alternative(ctx: Context, tree: Node) -> Optional[Edit]:
    """A node switched to another alternative; children of the same nonterminal kept,
    in order, the rest drawn."""
    g, rng = ctx.grammar, ctx.rng
    nodes = ctx.index(tree).choices
    if not nodes:
        return None
    path, (n, a, kids) = nodes[rng.below(len(nodes))]
    b = rng.below(len(g.alts[n]) - 1)
    b += b >= a
    depth_below = len(path) + 1
    # The walk's own depth rule (walk.py): the kids kept sat at this depth already and
    # the new ones come from the walk, so this is the whole depth check.
    if ctx.recursive and len(path) + g.alt_min_depth[n][b] > g.max_depth:
        return None
    new = intern(g, (n, b, refill(kids, g.alts[n][b].kids, lambda k: ctx.regenerate(k, depth_below))))
    return replaced(tree, path, new)


def replace_from_pool(ctx: Context, tree: Node) -> Optional[Edit]:
    """A subtree replaced by one of the same nonterminal seen in earlier inputs."""
    pooled = ctx.pool.pooled
    entry = ctx.index(tree)
    key = ("pooled", len(pooled))  # the set only grows: its size says when to look again
    nodes = entry.derived.get(key)
    if nodes is None:
        nodes = entry.derived[key] = [(p, node) for p, node in entry.nodes if node[0] in pooled]
    if not nodes:
        return None
    rng = ctx.rng
    path, node = nodes[rng.below(len(nodes))]
    # (subtree, [its depth]) pairs, distinct subtrees: at most one equals node.  Read
    # as pairs: looking a subtree up would hash all of it.
    candidates = ctx.pool.candidates(node[0])
    i = rng.below(len(candidates))
    new, slot = candidates[i]
    if new == node:
        j = rng.below(len(candidates) - 1)
        new, slot = candidates[j + (j >= i)]
    if ctx.recursive:
        if slot[0] is None:
            slot[0] = depth(new)
        if slot[0] > ctx.grammar.max_depth - len(path):
            return None
    return replaced(tree, path, new)


def _repeated(ctx: Context, tree: Node, grow: int) -> list[tuple[Path, Node]]:
    """Repetition nodes that can change their number of elements by ``grow`` (cached
    per tree)."""
    entry = ctx.index(tree)
    out = entry.derived.get(("repeated", grow))
    if out is not None:
        return out
    reps = ctx.repetitions
    out = entry.derived[("repeated", grow)] = []
    for p, node in entry.nodes:
        n = node[0]
        if n in reps.lists:
            if len(node[2]) + grow in reps.lists[n][1] and (grow or len(node[2]) > 1):
                out.append((p, node))
        elif n in reps.chains and node[1] == reps.chains[n][1]:
            out.append((p, node))
    return out


def delete_repeated(ctx: Context, tree: Node) -> Optional[Edit]:
    """One element of a repetition removed."""
    candidates = _repeated(ctx, tree, -1)
    if not candidates:
        return None
    path, (n, a, kids) = candidates[ctx.rng.below(len(candidates))]
    lists = ctx.repetitions.lists
    if n in lists:
        i = ctx.rng.below(len(kids))
        return replaced(tree, path, intern(ctx.grammar, (n, lists[n][1][len(kids) - 1], kids[:i] + kids[i + 1:])))
    return replaced(tree, path, kids[1])  # a chain link replaced by its tail


def replicate_repeated(ctx: Context, tree: Node) -> Optional[Edit]:
    """One element of a repetition duplicated."""
    candidates = _repeated(ctx, tree, +1)
    if not candidates:
        return None
    path, node = candidates[ctx.rng.below(len(candidates))]
    n, a, kids = node
    if n in ctx.repetitions.lists:
        element, lengths = ctx.repetitions.lists[n]
        if kids:
            i = ctx.rng.below(len(kids))
            grown = kids[:i + 1] + kids[i:]
        else:  # nothing to copy yet: a new element from the PCFG
            grown = (ctx.regenerate(element, len(path) + 1),)
        new = intern(ctx.grammar, (n, lengths[len(kids) + 1], grown))
    else:
        new = (n, a, (kids[0], node))  # the link's element once more in front
    return replaced(tree, path, new) if ctx.fits_depth(path, new) else None


def _swaps(ctx: Context, tree: Node) -> list[tuple[str, Path, Node]]:
    """The repetitions with two elements that differ (cached per tree)."""
    reps = ctx.repetitions
    entry = ctx.index(tree)
    options = entry.derived.get("swaps")
    if options is None:
        options = entry.derived["swaps"] = []
        for p, node in entry.nodes:
            n = node[0]
            if n in reps.lists and len(node[2]) > 1 and len(set(node[2])) > 1:
                options.append(("list", p, node))
            elif n in reps.chains and node[1] == reps.chains[n][1]:
                # a chain of two or more links, each with its own element
                if node[2][1][0] == n and node[2][1][1] == reps.chains[n][1]:
                    options.append(("chain", p, node))
    return options


def swap_repeated(ctx: Context, tree: Node) -> Optional[Edit]:
    """Two elements of a repetition exchanged."""
    options = _swaps(ctx, tree)
    if not options:
        return None
    rng = ctx.rng
    kind, path, node = options[rng.below(len(options))]
    if kind == "list":
        n, a, kids = node
        i, j = rng.below(len(kids)), rng.below(len(kids) - 1)
        j += j >= i
        swapped = list(kids)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        return replaced(tree, path, intern(ctx.grammar, (n, a, tuple(swapped))))
    n = node[0]
    links = _chain_links(tree, path, n, ctx.repetitions.chains[n][1])
    i, j = rng.below(len(links)), rng.below(len(links) - 1)
    j += j >= i
    first, second = node_at(tree, links[i] + (0,)), node_at(tree, links[j] + (0,))
    if not (ctx.fits_depth(links[i] + (0,), second) and ctx.fits_depth(links[j] + (0,), first)):
        return None
    result = replace_at(replace_at(tree, links[i] + (0,), second), links[j] + (0,), first)
    return Edit(tree, result)  # two places changed: no single span to splice


def _chain_links(tree: Node, path: Path, n: int, recursive: int) -> list[Path]:
    """Paths of the links of the chain starting at ``path`` (each a node of ``n``
    with the recursive alternative)."""
    links = []
    node = tree
    for i in path:
        node = node[2][i]
    while node[0] == n and node[1] == recursive:
        links.append(path)
        path = path + (1,)
        node = node[2][1]
    return links


def switches(ctx: Context, tree: Node) -> Iterator[Edit]:
    """The last resort when the drawn operators all failed: every node switched to every
    other alternative (children kept, the rest drawn, else their smallest derivations,
    which encode shortest), nodes in random order, within the depth budget."""
    g = ctx.grammar
    nodes = ctx.index(tree).choices
    start = ctx.rng.below(len(nodes)) if nodes else 0
    for k in range(len(nodes)):
        path, (n, a, kids) = nodes[(start + k) % len(nodes)]
        for b in range(len(g.alts[n])):
            if b == a:
                continue
            below = len(path) + 1
            for fill in (lambda k: ctx.regenerate(k, below), lambda k: smallest_tree(g, k)):
                new = (n, b, refill(kids, g.alts[n][b].kids, fill))
                if ctx.fits_depth(path, new):
                    yield replaced(tree, path, new)


# ------------------------------------------------------------- the crossover


def splice(ctx: Context, recipient: Node, donor: Node) -> Optional[Edit]:
    """A subtree of ``recipient`` replaced by a subtree of the same nonterminal from
    ``donor`` (a site drawn uniformly among those with a donor subtree that differs from
    it: drawn among the sites of a nonterminal ``donor`` has, a site without one set
    aside)."""
    entry = ctx.index(donor)
    donors = entry.derived.get("donors")
    if donors is None:
        donors = entry.derived["donors"] = {}
        for _, node in entry.nodes:
            donors.setdefault(node[0], []).append(node)
    sites = [(p, node) for p, node in ctx.index(recipient).nodes if node[0] in donors]
    rng = ctx.rng
    while sites:
        k = rng.below(len(sites))
        path, node = sites[k]
        options = [d for d in donors[node[0]] if d != node]
        if options:
            new = options[rng.below(len(options))]
            return replaced(recipient, path, new) if ctx.fits_depth(path, new) else None
        sites[k] = sites[-1]
        sites.pop()
    return None


#: The tree operators by name (the byte operator is the mutator's: it works on bytes).
TREE_OPERATORS: dict[str, Callable[[Context, Node], Optional[Edit]]] = {
    "regenerate_node": regenerate_node,
    "switch_alternative": switch_alternative,
    "replace_from_pool": replace_from_pool,
    "delete_repeated": delete_repeated,
    "replicate_repeated": replicate_repeated,
    "swap_repeated": swap_repeated,
}
