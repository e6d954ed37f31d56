"""The whole walk, assembled: the order of the passes, check_text and check_file.

Each layer extends the one below it and hands nested parts down:
ModuleChecker -> ThreadChecker -> RegionChecker -> RegionBodyChecker ->
RegionOpChecker -> CheckerState.  ConventionChecker only reads what that walk
recorded.
"""

from __future__ import annotations

from pathlib import Path

from .conventions import ConventionChecker
from .module_shell import ModuleChecker
from .text import show
from .tree import build_tree
from .violation import Violation


class Checker(ModuleChecker, ConventionChecker):
    """One program's check: preconditions, then (if asked) conventions."""

    def run(self) -> list[Violation]:
        tops = build_tree(self.lines, self.report)
        self.check_module_shell(tops)
        if self.module is not None:
            self.check_module_items(self.module)
        self.check_stray_regions(tops)
        self.check_unique_names()
        if self.conventions and self.module is not None:
            self.check_conventions(tops)
        return sorted(self.found, key=Violation.sort_key)


def check_text(text: str, conventions: bool = False) -> list[Violation]:
    """Every violated precondition (and, if asked, convention) of one program.

    Sorted by (line, column, rule); ``[]`` when the program is in the shape.
    Never raises.
    """
    try:
        return Checker(text, conventions).run()
    except Exception as exc:  # pragma: no cover - a checker bug, never an input's fault
        return [
            Violation("P1", 1, 1, f"internal checker error (please report): {show(repr(exc))}")
        ]


def check_file(path: str | Path, conventions: bool = False) -> list[Violation]:
    """check_text on a file's contents (undecodable bytes read as U+FFFD)."""
    data = Path(path).read_bytes()
    return check_text(data.decode("utf-8", errors="replace"), conventions=conventions)
