"""Minimization: the smallest tree that is still interesting, for any grammar.

:func:`minimize` is hierarchical delta debugging over the derivation tree (as
in HDD/Perses and picireny): it visits the tree level by level from the root
(coarse to fine) and, at each node, tries in order

1. removing elements of a repetition (the grammar's lists and
   right-recursive chains, :class:`harness.core.mutate.Repetitions`): halves
   first, then single elements;
2. hoisting: replacing the node by a descendant of the same nonterminal;
3. switching to a simpler alternative (fewer nodes in its smallest
   derivation, then earlier in the grammar), keeping the children of the
   same nonterminals and filling the rest with their smallest derivations;
4. replacing the subtree by the nonterminal's smallest derivation.

A candidate is kept when it is interesting and smaller by :func:`sort_key`
(nodes, then the ranks of the alternatives chosen); sweeps repeat until one
changes nothing, so the result is 1-minimal with respect to these steps.
Every candidate is a derivation tree of the grammar, so the result renders,
encodes and stays in the grammar's language.  Answers are cached by tree, so
no tree is tested twice; ``evaluations`` counts predicate calls.

:func:`reduce_lines` is the fallback for what the grammar cannot express:
line-level delta debugging (Zeller's ddmin) on the text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from harness.core.compiled import CompiledGrammar, Node
from harness.core.mutate import Repetitions
from harness.core.tree import Path, intern, node_at, refill, replace_at, smallest_tree, walk_nodes

__all__ = ["LineReduction", "Minimization", "minimize", "reduce_lines", "sort_key"]


def _ranks(grammar: CompiledGrammar) -> list[tuple[int, ...]]:
    """Per nonterminal, each alternative's simplicity rank (0 = simplest)."""
    out = []
    for n, alt_list in enumerate(grammar.alts):
        order = sorted(range(len(alt_list)), key=lambda a: (grammar.alt_min_size[n][a], a))
        rank = [0] * len(alt_list)
        for r, a in enumerate(order):
            rank[a] = r
        out.append(tuple(rank))
    return out


def sort_key(grammar: CompiledGrammar, tree: Node) -> tuple[int, int]:
    """Smaller is simpler: number of nodes, then the ranks of the alternatives chosen."""
    ranks = grammar_ranks(grammar)
    nodes = rank = 0
    stack = [tree]
    while stack:
        n, a, kids = stack.pop()
        nodes += 1
        rank += ranks[n][a]
        stack.extend(kids)
    return nodes, rank


def grammar_ranks(grammar: CompiledGrammar) -> list[tuple[int, ...]]:
    return grammar.derived(_ranks)


@dataclass
class Minimization:
    """The result of :func:`minimize`."""

    tree: Node
    original: Node
    evaluations: int = 0  # predicate calls (cache misses)
    candidates: int = 0  # candidates considered, cached ones included
    steps: list[str] = field(default_factory=list)  # accepted reductions, in order
    seconds: float = 0.0
    exhausted: bool = False  # stopped by max_evaluations before the fixpoint


def _candidates(grammar: CompiledGrammar, reps: Repetitions, tree: Node, path: Path,
                node: Node) -> Iterator[tuple[str, Node]]:
    """(description, smaller tree) for one node, biggest steps first."""
    n, a, kids = node
    name = grammar.names[n]
    where = "/".join(map(str, path)) or "root"
    if n in reps.lists and kids:
        lengths = reps.lists[n][1]
        k = len(kids)
        tried = set()
        for size in sorted({k // 2, 1} - {0}, reverse=True):  # drop halves, then singles
            for start in range(0, k, size):
                keep = kids[:start] + kids[start + size:]
                if len(keep) in lengths and keep not in tried:
                    tried.add(keep)
                    yield (f"{name} at {where}: drop {size} of {k}",
                           intern(grammar, (n, lengths[len(keep)], keep)))
    if n in reps.chains and a == reps.chains[n][1]:
        yield f"{name} at {where}: drop a list element", kids[1]
    seen = set()
    for sub_path, sub in walk_nodes(node):
        if sub_path and sub[0] == n and sub not in seen:
            seen.add(sub)
            yield f"{name} at {where}: hoist {'/'.join(map(str, sub_path))}", sub
    ranks = grammar_ranks(grammar)[n]
    for b in sorted((b for b in range(len(grammar.alts[n])) if ranks[b] < ranks[a]),
                    key=lambda b: ranks[b]):
        new_kids = refill(kids, grammar.alts[n][b].kids, lambda k: smallest_tree(grammar, k))
        yield (f"{name} at {where}: {grammar.label(n, a) or 'ε'} -> {grammar.label(n, b) or 'ε'}",
               intern(grammar, (n, b, new_kids)))
    smallest = smallest_tree(grammar, n)
    if smallest != node:
        yield f"{name} at {where}: smallest derivation", intern(grammar, smallest)


def minimize(
    tree: Node,
    grammar: CompiledGrammar,
    still_interesting: Callable[[Node], bool],
    *,
    max_evaluations: int | None = None,
    cache: dict[Node, bool] | None = None,
) -> Minimization:
    """The HDD fixpoint of ``tree`` (assumed interesting, never tested) under
    ``still_interesting``.  ``cache`` (tree -> answer) may be shared between calls."""
    start = time.monotonic()
    known = {} if cache is None else cache
    known[tree] = True
    reps = Repetitions.of(grammar)
    result = Minimization(tree=tree, original=tree)
    current = tree
    current_key = sort_key(grammar, current)
    unique = grammar.unique

    def accept(candidate: Node) -> bool | None:
        """True: interesting (and smaller); None: the budget is spent."""
        nonlocal current, current_key
        result.candidates += 1
        key = sort_key(grammar, candidate)
        if key >= current_key:
            return False
        answer = known.get(candidate)
        if answer is None:
            if max_evaluations is not None and result.evaluations >= max_evaluations:
                result.exhausted = True
                return None
            answer = bool(still_interesting(candidate))
            known[candidate] = answer
            result.evaluations += 1
        if answer:
            current, current_key = candidate, key
        return answer

    changed = True
    while changed and not result.exhausted:
        changed = False
        level = 0
        while not result.exhausted:
            paths = [p for p, node in walk_nodes(current) if len(p) == level and unique[node[0]] is None]
            if not paths:
                break
            for path in paths:
                if result.exhausted:
                    break
                progress = True
                while progress and not result.exhausted:  # the same place until it gives nothing
                    progress = False
                    try:
                        node = node_at(current, path)
                    except IndexError:
                        break
                    if unique[node[0]] is not None:
                        break
                    for description, smaller in _candidates(grammar, reps, current, path, node):
                        verdict = accept(replace_at(current, path, smaller))
                        if verdict is None:
                            break
                        if verdict:
                            result.steps.append(description)
                            changed = progress = True
                            break
            level += 1
    result.tree = current
    result.seconds = time.monotonic() - start
    return result


# ------------------------------------------------------------- text (ddmin)


@dataclass
class LineReduction:
    """The result of :func:`reduce_lines`."""

    text: str
    original_lines: int
    lines: int
    evaluations: int = 0
    seconds: float = 0.0
    exhausted: bool = False


def reduce_lines(
    text: str,
    still_interesting: Callable[[str], bool],
    *,
    max_evaluations: int = 1000,
) -> LineReduction:
    """ddmin over the lines of ``text`` (assumed interesting), then single-line removal to a fixpoint."""
    start = time.monotonic()
    lines = text.splitlines(keepends=True)
    cache: dict[tuple[int, ...], bool] = {}
    state = {"evaluations": 0, "exhausted": False}

    def test(keep: tuple[int, ...]) -> bool:
        if keep in cache:
            return cache[keep]
        if state["evaluations"] >= max_evaluations:
            state["exhausted"] = True
            return False
        state["evaluations"] += 1
        answer = bool(still_interesting("".join(lines[k] for k in keep)))
        cache[keep] = answer
        return answer

    current = tuple(range(len(lines)))
    cache[current] = True
    n = 2
    while len(current) >= 2 and not state["exhausted"]:
        size = len(current)
        chunk = -(-size // n)
        subsets = [current[k : k + chunk] for k in range(0, size, chunk)]
        reduced = False
        for subset in subsets:  # reduce to a subset
            if len(subset) < size and test(subset):
                current, n, reduced = subset, 2, True
                break
        if not reduced:
            for k in range(len(subsets)):  # reduce to a complement
                complement = tuple(i for j, sub in enumerate(subsets) if j != k for i in sub)
                if len(complement) < size and test(complement):
                    current, n, reduced = complement, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= size:
                break
            n = min(size, 2 * n)
    # one-line removals to a fixpoint (ddmin's 1-minimality, cheaply re-checked)
    progress = True
    while progress and not state["exhausted"]:
        progress = False
        for k in range(len(current)):
            candidate = current[:k] + current[k + 1 :]
            if candidate and test(candidate):
                current, progress = candidate, True
                break
    reduced_text = "".join(lines[k] for k in current)
    return LineReduction(
        text=reduced_text,
        original_lines=len(lines),
        lines=len(current),
        evaluations=state["evaluations"],
        seconds=time.monotonic() - start,
        exhausted=state["exhausted"],
    )
