"""What the checker reports: one broken rule at one place in the text."""

from __future__ import annotations

from dataclasses import dataclass


PRECONDITION_COUNT = 24  # P1..P24 of the spec


@dataclass(frozen=True)
class Violation:
    """One broken rule: a precondition ``P1``..``P24`` or a convention ``C1``..``C23``."""

    rule: str  # "P7" or "C20"
    line: int  # 1-based
    column: int  # 1-based
    message: str  # one line

    @property
    def precondition(self) -> int | None:
        """The precondition number, or None for a sampling convention."""
        return int(self.rule[1:]) if self.rule.startswith("P") else None

    @property
    def convention(self) -> str | None:
        """The convention tag (``"C20"``), or None for a precondition."""
        return self.rule if self.rule.startswith("C") else None

    def format(self, path: str) -> str:
        """``PATH:LINE:COL: P<n>: message`` (or ``C<n>``)."""
        return f"{path}:{self.line}:{self.column}: {self.rule}: {self.message}"

    def sort_key(self) -> tuple[int, int, int, int]:
        # Preconditions before conventions at the same place.
        return (self.line, self.column, self.rule[0] != "P", int(self.rule[1:]))
