"""Grammar coverage: k-path features of derivation trees (k = 1 and 2), for any grammar.

* k = 1: which alternative of which nonterminal was chosen;
* k = 2: which alternative was chosen under which alternative of the nearest
  enclosing choice (the parent/child pair, nonterminals with a single
  alternative being looked through).

Only nonterminals with more than one alternative count (the others are
chosen whenever they are reached).  :class:`KPathFeatures` numbers every
feature the grammar can produce, once, so that a fuzz target can reserve one
libFuzzer counter per feature at start-up and a campaign or a corpus can be
reported as "covered / possible" with the uncovered entries named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from harness.core.compiled import CompiledGrammar, Node

ROOT = (-1, -1)  # the parent of the outermost choices


@dataclass(frozen=True)
class Feature:
    k: int
    parent: tuple[int, int]  # (nonterminal, alternative) of the enclosing choice; ROOT for k=1
    choice: tuple[int, int]  # (nonterminal, alternative)


class KPathFeatures:
    """Every k-path feature (k = 1, 2) of a grammar, numbered 0..len-1."""

    def __init__(self, grammar: CompiledGrammar) -> None:
        self.grammar = grammar
        g = grammar
        decision = [len(alts) > 1 for alts in g.alts]
        self.decision = decision
        features: list[Feature] = []
        for n in range(len(g.names)):
            if decision[n]:
                for a in range(len(g.alts[n])):
                    features.append(Feature(1, ROOT, (n, a)))
        # k = 2: from every choice (and the root), the choices reachable through
        # nonterminals without a choice.
        parents = [ROOT] + [(n, a) for n in range(len(g.names)) if decision[n]
                            for a in range(len(g.alts[n]))]
        for parent in parents:
            if parent == ROOT:
                start = [g.start]
            else:
                start = list(g.alts[parent[0]][parent[1]].kids)
            seen: set[int] = set()
            stack = list(start)
            reached: list[int] = []
            while stack:
                m = stack.pop()
                if m in seen:
                    continue
                seen.add(m)
                if decision[m]:
                    reached.append(m)
                else:
                    stack.extend(g.alts[m][0].kids)
            for m in sorted(reached):
                for b in range(len(g.alts[m])):
                    features.append(Feature(2, parent, (m, b)))
        self.features = features
        self.index = {f: i for i, f in enumerate(features)}
        self.k1 = sum(1 for f in features if f.k == 1)

    def __len__(self) -> int:
        return len(self.features)

    def of(self, tree: Node) -> set[int]:
        """The features one tree has."""
        return set(self.counts(tree))

    def counts(self, tree: Node) -> dict[int, int]:
        """How often the tree has each of its features (libFuzzer buckets hit counts, so
        a program with more of a feature than any before is new to it too)."""
        index, decision, out = self.index, self.decision, {}
        stack: list[tuple[Node, tuple[int, int]]] = [(tree, ROOT)]
        while stack:
            (n, a, kids), parent = stack.pop()
            if decision[n]:
                for key in (index[Feature(1, ROOT, (n, a))], index[Feature(2, parent, (n, a))]):
                    out[key] = out.get(key, 0) + 1
                parent = (n, a)
            for kid in kids:
                stack.append((kid, parent))
        return out

    def union(self, trees: Iterable[Node]) -> set[int]:
        seen: set[int] = set()
        for tree in trees:
            seen |= self.of(tree)
        return seen

    def name(self, i: int) -> str:
        f = self.features[i]
        g = self.grammar

        def choice(c: tuple[int, int]) -> str:
            return f"{g.names[c[0]]}={g.label(c[0], c[1]) or 'ε'}"

        if f.k == 1:
            return choice(f.choice)
        return f"{'(root)' if f.parent == ROOT else choice(f.parent)} > {choice(f.choice)}"

    def report(self, covered: set[int]) -> "CoverageReport":
        k1 = [i for i, f in enumerate(self.features) if f.k == 1]
        k2 = [i for i, f in enumerate(self.features) if f.k == 2]
        return CoverageReport(
            k1_covered=sum(1 for i in k1 if i in covered), k1_total=len(k1),
            k2_covered=sum(1 for i in k2 if i in covered), k2_total=len(k2),
            uncovered_k1=[self.name(i) for i in k1 if i not in covered],
            uncovered_k2=[self.name(i) for i in k2 if i not in covered],
        )


@dataclass
class CoverageReport:
    k1_covered: int
    k1_total: int
    k2_covered: int
    k2_total: int
    uncovered_k1: list[str]
    uncovered_k2: list[str]

    def summary(self) -> str:
        return (f"grammar coverage: k=1 {self.k1_covered}/{self.k1_total}, "
                f"k=2 {self.k2_covered}/{self.k2_total}")

    def as_json(self) -> dict:
        return {
            "k1": {"covered": self.k1_covered, "total": self.k1_total, "uncovered": self.uncovered_k1},
            "k2": {"covered": self.k2_covered, "total": self.k2_total, "uncovered": self.uncovered_k2},
        }

    def lines(self) -> Iterator[str]:
        yield f"{'k':>2}  {'covered':>7}  {'total':>5}  {'share':>6}"
        for k, c, t in ((1, self.k1_covered, self.k1_total), (2, self.k2_covered, self.k2_total)):
            yield f"{k:>2}  {c:>7}  {t:>5}  {c / t if t else 1:>6.1%}"
        for k, names in ((1, self.uncovered_k1), (2, self.uncovered_k2)):
            for name in names:
                yield f"uncovered k={k}: {name}"
