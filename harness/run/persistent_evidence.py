"""The evidence of a persistent-only finding: the driver, the program's position
since its driver (worker) started and the programs before it, written beside the
finding as ``persistent`` in ``NAME.json`` and ``NAME.history.txt``.

The history is ``// -----``-separated, in order, and named ``.txt``: triage
must not take each of those programs for a finding of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.run.judge import write_finding
from harness.run.outcome import Verdict
from harness.run.persistent_target import PersistentTarget

__all__ = ["PersistentEvidence"]


@dataclass(frozen=True)
class PersistentEvidence:
    """The driver's part of a persistent-only finding: the driver, the program's
    position since its driver (worker) started, the programs before it."""

    target: PersistentTarget
    position: int
    history: tuple[str, ...]

    def write_finding(self, directory, name: str, text: str, verdict: Verdict,
                      extra: dict | None = None, *, suffix: str) -> None:
        """:func:`harness.run.judge.write_finding` plus, for a persistent-only
        finding, ``persistent`` in ``NAME.json`` (driver command line, position,
        restart interval, history file) and ``NAME.history.txt`` (the programs
        before it since the driver started); ``extra``'s keys go into ``NAME.json`` too."""
        extra = dict(extra or {})
        if verdict.persistent_only:
            history_name = f"{name}.history.txt"
            path = Path(directory) / history_name
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{history_name}.tmp")
            tmp.write_text("\n// -----\n".join(self.history), encoding="utf-8")
            os.replace(tmp, path)
            extra["persistent"] = {
                **self.target.to_json(),
                "position": self.position,
                "history": history_name,
                "history_programs": len(self.history),
            }
        write_finding(directory, name, text, self.target.process, verdict, extra=extra or None, suffix=suffix)
