"""How often each convention choice was made, next to the PCFG's weight.

Counts come from the choice sequence (:func:`harness.core.choices.choices_of`), so
they describe exactly the decisions the grammar makes: C1 threads, C6 the
optional call, C3 sites, C7 nesting, C8 body, C9 callee.  A chi-square test
per decision says whether the sample fits the weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

from harness.core.choices import choices_of
from harness.core.grammar import DECISIONS
from harness.core.tree import Program

#: The convention each decision implements, for the table.
CONVENTIONS = {
    "<threads>": "C1 threads",
    "<top-call>": "C6 top-level call",
    "<sites>": "C3 sites per thread",
    "<site>": "C7 nesting",
    "<region>": "C8 body",
    "<call-region>": "C9 callee",
}

_LABELS = {
    "<threads>": ("1", "2"),
    "<top-call>": ("absent", "present"),
    "<sites>": ("1", "2"),
}


def alternative_label(symbol: str, index: int) -> str:
    if symbol in _LABELS:
        return _LABELS[symbol][index]
    return DECISIONS[symbol].alternatives[index].strip("<>").removesuffix("-region")


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


@dataclass
class ChoiceCounts:
    """Observed counts per decision and alternative."""

    programs: int = 0
    counts: dict[str, list[int]] = field(
        default_factory=lambda: {s: [0] * len(d.alternatives) for s, d in DECISIONS.items()}
    )

    def add(self, program: Program) -> None:
        self.programs += 1
        counts = self.counts
        for decision, _slot, choice in choices_of(program):
            counts[decision.symbol][choice] += 1

    def update(self, programs: Iterable[Program]) -> "ChoiceCounts":
        for program in programs:
            self.add(program)
        return self

    def chi_square(self, symbol: str) -> tuple[float, float]:
        """(statistic, p-value) of the counts against the grammar's weights."""
        observed = self.counts[symbol]
        total = sum(observed)
        if total == 0:
            return 0.0, 1.0
        probabilities = DECISIONS[symbol].probabilities
        statistic = sum((o - total * p) ** 2 / (total * p) for o, p in zip(observed, probabilities))
        return statistic, chi2_sf(statistic, len(observed) - 1)

    def table(self) -> str:
        """A fixed-width table: every choice, its weight, what was observed."""
        header = ("convention", "choice", "expected", "observed", "count", "chi2 p")
        rows = []
        for symbol, decision in DECISIONS.items():
            observed = self.counts[symbol]
            total = sum(observed) or 1
            _, p_value = self.chi_square(symbol)
            for index, probability in enumerate(decision.probabilities):
                rows.append(
                    (
                        CONVENTIONS[symbol] if index == 0 else "",
                        alternative_label(symbol, index),
                        f"{probability:.4f}",
                        f"{observed[index] / total:.4f}",
                        str(observed[index]),
                        f"{p_value:.3f}" if index == 0 else "",
                    )
                )
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = [
            "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            for row in [header, *rows]
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return f"{self.programs} programs\n" + "\n".join(line.rstrip() for line in lines) + "\n"
