"""How often each weighted choice of a grammar was made, next to its probability.

Counts come from the derivation trees (every node of a nonterminal with more
than one alternative is one decision), so they describe exactly the choices
the grammar makes, whatever the grammar.  A chi-square test per nonterminal
says whether the sample fits the weights.
"""

from __future__ import annotations

import math
from typing import Iterable

from harness.core.compiled import CompiledGrammar, Node


def chi2_sf(statistic: float, df: int) -> float:
    """P(X >= statistic) for X ~ chi-square(df), integer df >= 1 (closed forms)."""
    if statistic <= 0:
        return 1.0
    half = statistic / 2
    if df % 2 == 0:
        term, total = math.exp(-half), math.exp(-half)
        for k in range(1, df // 2):
            term *= half / k
            total += term
        return min(1.0, total)
    total = math.erfc(math.sqrt(half))
    term = math.sqrt(2 * statistic / math.pi) * math.exp(-half)
    for k in range(1, (df - 1) // 2 + 1):
        total += term
        term *= statistic / (2 * k + 1)
    return min(1.0, total)


class ChoiceCounts:
    """Observed counts per weighted nonterminal and alternative."""

    def __init__(self, grammar: CompiledGrammar) -> None:
        self.grammar = grammar
        self.programs = 0
        self.decisions = grammar.decisions()
        self.counts: dict[int, list[int]] = {n: [0] * len(grammar.alts[n]) for n in self.decisions}

    def add(self, tree: Node) -> None:
        self.programs += 1
        counts = self.counts
        stack = [tree]
        while stack:
            n, a, kids = stack.pop()
            row = counts.get(n)
            if row is not None:
                row[a] += 1
            stack.extend(kids)

    def update(self, trees: Iterable[Node]) -> "ChoiceCounts":
        for tree in trees:
            self.add(tree)
        return self

    def chi_square(self, n: int) -> tuple[float, float]:
        """(statistic, p-value) of the counts of nonterminal ``n`` against its weights."""
        observed = self.counts[n]
        total = sum(observed)
        if total == 0:
            return 0.0, 1.0
        pairs = [(o, p) for o, p in zip(observed, self.grammar.probabilities(n)) if p > 0]
        statistic = sum((o - total * p) ** 2 / (total * p) for o, p in pairs)
        if len(pairs) < 2:
            return 0.0, 1.0
        return statistic, chi2_sf(statistic, len(pairs) - 1)

    def rows(self) -> list[tuple[str, str, float, int, int]]:
        """(nonterminal, alternative label, expected probability, observed count, total)."""
        out = []
        for n in self.decisions:
            observed = self.counts[n]
            total = sum(observed)
            for a, p in enumerate(self.grammar.probabilities(n)):
                out.append((self.grammar.names[n], self.grammar.label(n, a) or "ε", p, observed[a], total))
        return out

    def table(self) -> str:
        """A fixed-width table: every weighted choice, its weight, what was observed."""
        header = ("nonterminal", "alternative", "expected", "observed", "count", "chi2 p")
        rows = []
        for n in self.decisions:
            observed = self.counts[n]
            total = sum(observed) or 1
            _, p_value = self.chi_square(n)
            for a, probability in enumerate(self.grammar.probabilities(n)):
                rows.append(
                    (
                        self.grammar.names[n] if a == 0 else "",
                        self.grammar.label(n, a) or "ε",
                        f"{probability:.4f}",
                        f"{observed[a] / total:.4f}",
                        str(observed[a]),
                        f"{p_value:.3f}" if a == 0 else "",
                    )
                )
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = [
            "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            for row in [header, *rows]
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return f"{self.programs} programs\n" + "\n".join(line.rstrip() for line in lines) + "\n"
