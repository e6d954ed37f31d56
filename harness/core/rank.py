"""Ranking: every derivation tree of a grammar numbered 0 .. count-1, both ways.

A finite grammar has finitely many derivation trees (the default profile:
854,700); a recursive one has finitely many up to a depth bound.
:class:`Ranking` counts them and maps an index to its tree (:meth:`unrank`)
and a tree to its index (:meth:`rank`), so that a sweep can name every
program by a number, split the numbers into shards, and resume at any one.

The order depends on the grammar's structure only, never on its weights:

* the trees of a nonterminal come alternative by alternative, in the order
  the grammar lists them (all trees of alternative 0 first);
* within an alternative, the trees are the children's indices read as one
  mixed-radix number, the first child most significant (lexicographic order
  of the children's own indices).

That is the order of ``itertools.product`` over the alternatives' children,
which is what a brute-force expansion gives.  Sizes are Python ints, so
counts of any size are exact.

A depth bound ``D`` restricts the trees to those of depth at most ``D``
(:func:`harness.core.tree.depth`: a leaf has depth 1), the walk's own
``MAX_DEPTH`` meaning.  The number of trees of nonterminal ``n`` of depth at
most ``d`` is counted bottom-up over ``d`` once per bound and kept; for a
finite nonterminal and a budget at least its deepest tree, that is the
compiled grammar's ``count[n]``.  Tabulated finite nonterminals
(``grammar.tables``) are unranked by one list look-up into the table's own
tree objects (re-ordered into this module's order once, so the renderer's
per-subtree cache applies), which is what makes unranking the whole default
profile cheap.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from harness.core.compiled import CompiledGrammar, Node
from harness.core.recursion import allow_trees_of_depth

__all__ = ["Ranking", "RankingError", "ranking"]


class RankingError(ValueError):
    """The grammar or tree cannot be ranked as asked (one line for the user)."""


class Ranking:
    """Counting, ranking and unranking of ``grammar``'s derivation trees from
    ``symbol`` (default: the start), up to depth ``max_depth`` (required when
    the grammar is recursive; for a finite grammar, None means no bound)."""

    def __init__(self, grammar: CompiledGrammar, max_depth: int | None = None,
                 symbol: int | None = None) -> None:
        g = grammar
        self.grammar = g
        self.symbol = g.start if symbol is None else symbol
        if max_depth is not None and max_depth < 1:
            raise RankingError(f"a depth bound must be 1 or more, not {max_depth}")
        deepest = g.deepest
        if max_depth is None:
            if deepest[self.symbol] is None:
                cycle = next(n for n in range(len(g.names)) if deepest[n] is None and _on_cycle(g, n))
                raise RankingError(f"the grammar is recursive ({g.names[cycle]} derives itself): "
                                   "give a depth bound (--max-depth D)")
            max_depth = deepest[self.symbol]
        self.max_depth: int = max_depth
        self.deepest = deepest
        # by_depth[d][n]: trees of n of depth <= d (d = 0 .. max_depth, and on to the
        # deepest finite nonterminal, whose whole language the tables below list).
        names = range(len(g.names))
        levels = max([max_depth, *(x for x in deepest if x is not None)])
        by_depth: list[list[int]] = [[0] * len(g.names)]
        for d in range(1, levels + 1):
            below = by_depth[-1]
            row = []
            for n in names:
                if deepest[n] is not None and d >= deepest[n]:
                    row.append(g.count[n])  # finite and within budget: the compiled count
                    continue
                total = 0
                for kids in g.alt_kids[n]:
                    product = 1
                    for k in kids:
                        product *= below[k]
                        if not product:
                            break
                    total += product
                row.append(total)
            by_depth.append(row)
        self._by_depth = by_depth
        self.count: int = by_depth[max_depth][self.symbol]
        self._alt_cache: dict[tuple[int, int], tuple[tuple[int, ...], list[tuple[int, ...]]]] = {}
        # Tabulated nonterminals: their table's trees in this module's order, and back.
        self._listed: dict[int, list[Node]] = {}
        self._listed_rank: dict[int, dict[Node, int]] = {}
        for n in names:
            table = g.tables[n]
            if table is not None and g.unique[n] is None:
                own = [table.trees[table.index[self._build(n, i, deepest[n])]]
                       for i in range(g.count[n])]
                self._listed[n] = own
                self._listed_rank[n] = {tree: i for i, tree in enumerate(own)}
        allow_trees_of_depth(max_depth)  # (un)ranking recurses once per level

    # ----------------------------------------------------------------- counts

    def count_of(self, n: int, depth: int) -> int:
        """How many trees ``n`` has of depth at most ``depth`` (within this ranking's bound)."""
        return self._by_depth[max(0, min(depth, self.max_depth))][n]

    def _alternatives(self, n: int, d: int) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
        """(cumulative tree counts per alternative, per alternative the children's counts)
        for ``n`` with depth budget ``d``."""
        key = (n, d)
        hit = self._alt_cache.get(key)
        if hit is None:
            below = self._by_depth[d - 1]
            radices = [tuple(below[k] for k in kids) for kids in self.grammar.alt_kids[n]]
            sizes = []
            for radix in radices:
                product = 1
                for r in radix:
                    product *= r
                sizes.append(product)
            hit = self._alt_cache[key] = (tuple(accumulate(sizes)), radices)
        return hit

    # -------------------------------------------------------------- unranking

    def unrank(self, index: int) -> Node:
        """The tree numbered ``index`` (0 <= index < count)."""
        if not 0 <= index < self.count:
            raise RankingError(f"index {index} is out of range: the grammar has {self.count:,} "
                               f"trees (0 to {self.count - 1:,})")
        return self._unrank(self.symbol, index, self.max_depth)

    def _unrank(self, n: int, index: int, d: int) -> Node:
        g = self.grammar
        deepest = self.deepest[n]
        if deepest is not None and d >= deepest:
            unique = g.unique[n]
            if unique is not None:
                return unique
            listed = self._listed.get(n)
            if listed is not None:
                return listed[index]
            d = deepest  # any larger budget counts the same trees: share one cache entry
        return self._build(n, index, d)

    def _build(self, n: int, index: int, d: int) -> Node:
        cumulative, radices = self._alternatives(n, d)
        if len(cumulative) == 1:
            a, rest = 0, index
        else:
            a = bisect_right(cumulative, index)
            rest = index - (cumulative[a - 1] if a else 0)
        kids = self.grammar.alt_kids[n][a]
        unrank = self._unrank
        d -= 1
        if len(kids) == 1:  # the common shapes without the general loop
            return (n, a, (unrank(kids[0], rest, d),))
        radix = radices[a]
        if len(kids) == 2:
            first, second = divmod(rest, radix[1])
            return (n, a, (unrank(kids[0], first, d), unrank(kids[1], second, d)))
        digits = [0] * len(kids)
        for j in range(len(kids) - 1, -1, -1):  # the first child is the most significant digit
            rest, digits[j] = divmod(rest, radix[j])
        return (n, a, tuple([unrank(k, digit, d) for k, digit in zip(kids, digits)]))

    # ---------------------------------------------------------------- ranking

    def rank(self, tree: Node) -> int:
        """The index of ``tree``; raises RankingError for a tree that is not one of
        this ranking's (another nonterminal, a bad alternative, deeper than the bound)."""
        if not (isinstance(tree, tuple) and len(tree) == 3 and tree[0] == self.symbol):
            raise RankingError(f"not a derivation tree of {self.grammar.names[self.symbol]}")
        return self._rank(tree, self.max_depth)

    def _rank(self, node: Node, d: int) -> int:
        g = self.grammar
        n, a, kids = node
        if d < 1:
            raise RankingError(f"the tree is deeper than the bound {self.max_depth}")
        deepest = self.deepest[n]
        if deepest is not None and d >= deepest:
            if g.unique[n] is not None:
                return 0
            listed = self._listed_rank.get(n)
            if listed is not None:
                found = listed.get(node)
                if found is not None:
                    return found
            d = deepest
        if not (type(a) is int and 0 <= a < len(g.alts[n])):
            raise RankingError(f"{g.names[n]} has no alternative {a!r}")
        want = g.alt_kids[n][a]
        if not (isinstance(kids, tuple) and tuple(k[0] if isinstance(k, tuple) and k else None
                                                  for k in kids) == want):
            raise RankingError(f"{g.names[n]}: the children do not match alternative {a}")
        cumulative, radices = self._alternatives(n, d)
        index = 0
        for kid, radix in zip(kids, radices[a]):
            index = index * radix + self._rank(kid, d - 1)
        return index + (cumulative[a - 1] if a else 0)


def ranking(grammar: CompiledGrammar, max_depth: int | None = None) -> Ranking:
    """The (cached) ranking of ``grammar``'s start symbol up to ``max_depth``."""
    return grammar.derived(Ranking, max_depth)




def _on_cycle(g: CompiledGrammar, n: int) -> bool:
    seen: set[int] = set()
    stack = [k for kids in g.alt_kids[n] for k in kids]
    while stack:
        k = stack.pop()
        if k == n:
            return True
        if k not in seen:
            seen.add(k)
            stack.extend(j for kids in g.alt_kids[k] for j in kids)
    return False
