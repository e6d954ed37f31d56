"""What a persistent runner counts: programs, drivers started and workers forked,
restarts by reason, seconds in the target and starting, findings confirmed in a
fresh process and how many of them were persistent-only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["PersistentStats"]


@dataclass
class PersistentStats:
    programs: int = 0  # answered, crashed or timed out: each counted once
    starts: int = 0  # drivers started (exec)
    workers: int = 0  # fork-server workers forked
    restarts: Counter = field(default_factory=Counter)  # reason -> count
    seconds_in_target: float = 0.0  # from sending a program to its answer (or death)
    seconds_starting: float = 0.0  # from starting a driver to its LFD1
    confirmations: int = 0  # fresh-process runs of findings
    seconds_confirming: float = 0.0
    persistent_only: int = 0

    @property
    def restart_count(self) -> int:
        return sum(self.restarts.values())

    def describe(self) -> str:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(self.restarts.items()))
        return (f"{self.restart_count} restarts ({reasons or 'none'}), "
                f"{self.seconds_starting:.2f} s starting drivers, "
                f"{self.confirmations} findings re-run in a fresh process "
                f"({self.persistent_only} persistent-only)")
