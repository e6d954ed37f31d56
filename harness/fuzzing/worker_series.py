"""One fuzz target process's rows in ``stats-workers.csv`` (:mod:`harness.fuzzing.series`).

Grammar coverage.  The column stays empty unless a fuzz target provides it:
``series.set("grammar_coverage", value)`` in its test loop.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from harness.fuzzing.series import DEFAULT_INTERVAL, WORKER_COLUMNS, AppendOnlyCsv
from harness.run.outcome import FINDING_KINDS

__all__ = ["GAUGES", "WorkerSeries"]

#: Values a fuzz target may provide with :meth:`WorkerSeries.set`.
GAUGES = ("grammar_coverage", "restarts", "restart_reasons")


class WorkerSeries:
    """One fuzz target process's rows in ``stats-workers.csv``.

    The fuzz target calls :meth:`due` cheaply after every execution and
    :meth:`record` when it is; :meth:`finding` for each finding;
    :meth:`set` for gauges it computes (``grammar_coverage``); :meth:`close`
    at exit (the last row, ``final`` = 1).
    """

    def __init__(self, path: str | os.PathLike, worker: str, interval: float = DEFAULT_INTERVAL) -> None:
        self.file = AppendOnlyCsv(Path(path), WORKER_COLUMNS)
        self.worker = worker
        self.interval = interval
        self.started = time.monotonic()
        self.next_row = self.started + interval
        self.findings = {kind: 0 for kind in FINDING_KINDS}
        self.gauges: dict[str, object] = {}
        self._previous = (self.started, 0)
        self.closed = False

    @classmethod
    def open(cls, path: Optional[str | os.PathLike], worker: str,
             interval: float = DEFAULT_INTERVAL) -> Optional["WorkerSeries"]:
        """The series ``loomfuzz fuzz`` asked for (``FuzzOptions.stats``), or None
        when it asked for none or the file cannot be opened."""
        if not path:
            return None
        try:
            return cls(path, worker, max(interval, 0.05))
        except OSError:
            return None  # the statistics must never stop a fuzz target

    def set(self, name: str, value) -> None:
        """A gauge for the next rows, e.g. ``set("grammar_coverage", 0.42)``."""
        if name not in GAUGES:
            raise KeyError(f"unknown series value {name!r} (known: {', '.join(GAUGES)})")
        self.gauges[name] = value

    def finding(self, kind: str) -> None:
        if kind in self.findings:
            self.findings[kind] += 1

    def record(self, executions: int, edges: Optional[int] = None, *, final: bool = False) -> None:
        now = time.monotonic()
        before, done_before = self._previous
        rate = (executions - done_before) / (now - before) if now > before else 0.0
        self._previous = (now, executions)
        self.next_row = now + self.interval
        row = {
            "unix_time": time.time(),
            "worker": self.worker,
            "elapsed_s": now - self.started,
            "executions": executions,
            "exec_per_s": rate,
            "edges": edges,
            "findings": sum(self.findings.values()),
            "final": int(final),
            **self.gauges,
        }
        for kind, count in self.findings.items():
            row[f"findings_{kind}"] = count
        try:
            self.file.write(row)
        except OSError:
            pass  # a full disk must not end the campaign here; the campaign reports it

    def close(self, executions: int, edges: Optional[int] = None) -> None:
        if self.closed:
            return
        self.closed = True
        self.record(executions, edges, final=True)
        self.file.close()
