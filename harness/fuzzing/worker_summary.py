"""What each fuzz target process reports at its end, as data.

Every process that runs inputs (the single process, each fork-mode job, a
merge's inner process) appends one :class:`WorkerSummary` as a JSON line to
``ARTIFACTS/fuzz-summary.jsonl`` (``FuzzOptions.summary``) when it ends,
however it ends (:func:`register_exit_hooks`); ``loomfuzz fuzz`` reads the
records (:func:`read_summaries`) for its totals.  Each record is one
``write()`` on an ``O_APPEND`` descriptor (as the statistics rows are): the
lines of concurrent workers do not interleave.  The target also prints the same figures as its
one ``loom-fuzz summary:`` line (:meth:`WorkerSummary.line`), for people.

Only the standard library and :mod:`harness.core.typed_json` are imported
(fuzz targets import this at start-up).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from harness.core import typed_json

__all__ = ["SUMMARY_PREFIX", "WorkerSummary", "append_summary", "read_summaries",
           "register_exit_hooks"]

#: How the human-readable summary line starts.
SUMMARY_PREFIX = "loom-fuzz summary:"


@dataclass(frozen=True)
class WorkerSummary:
    """One fuzz target process's figures at its end."""

    worker: str  # job-N, merge-P or pid-P (harness.fuzzing.program_target)
    executions: int
    seconds: float  # from the first input to the last one finished
    findings: dict[str, int] = field(default_factory=dict)  # by kind
    finding_files: tuple[str, ...] = ()  # the sidecars written
    in_target: Optional[float] = None  # seconds inside the target runs
    restarts: Optional[int] = None  # persistent: driver restarts
    restart_reasons: dict[str, int] = field(default_factory=dict)
    persistent: tuple[str, ...] = ()  # persistent: each driver's description
    edges: Optional[int] = None  # --coverage afl: distinct edges seen
    programs_checked: Optional[int] = None  # the self-fuzz target: distinct programs checked
    executors: Optional[str] = None  # the differential judge in process: what each executor did

    @property
    def exec_per_second(self) -> float:
        return self.executions / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        """The ``loom-fuzz summary:`` line printed on the target's stderr."""
        total = sum(self.findings.values())
        text = (f"{SUMMARY_PREFIX} {self.executions} executions in {self.seconds:.3f} s "
                f"({self.exec_per_second:.1f} exec/s)")
        if self.programs_checked is not None:
            return text + f"; distinct programs checked: {self.programs_checked}"
        text += f"; findings: {total}"
        if total:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(self.findings.items()))
            text += f" ({kinds}) -> {', '.join(self.finding_files)}"
        if self.in_target is not None:
            text += f"; time in target: {self.in_target:.3f} s"
        for description in self.persistent:
            text += f"; persistent: {description}"
        if self.executors:
            text += f"; executors: {self.executors}"
        if self.edges is not None:
            text += f"; coverage: {self.edges} edges seen"
        return text


def append_summary(path: str | os.PathLike, summary: WorkerSummary) -> None:
    """Append ``summary`` as one line of ``path`` (one ``write()``: whole lines
    even with many workers)."""
    data = (json.dumps(typed_json.to_json(summary), sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_summaries(path: str | os.PathLike) -> list[WorkerSummary]:
    """The records in ``path`` (none when it does not exist).  A line that is
    not a whole record (a worker killed while writing) is skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            records.append(typed_json.from_json(WorkerSummary, json.loads(line), "summary"))
        except (ValueError, typed_json.TypedJsonError):
            continue
    return records


_EXIT_HOOKS: list = []  # ctypes trampolines must live as long as the process


def register_exit_hooks(callback: Callable[[], None]) -> None:
    """Run ``callback`` however a fuzz target ends: Python's ``atexit`` covers
    atheris' ``-atheris_runs`` and an uncaught exception; C's ``on_exit``
    covers libFuzzer's own ``exit()`` (e.g. after ``-max_total_time``), which
    skips Python's.  ``callback`` must tolerate being called twice."""
    import atexit
    import ctypes

    atexit.register(callback)
    try:
        libc = ctypes.CDLL("libc.so.6")
        hook = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)(lambda status, arg: callback())
        if libc.on_exit(hook, None) == 0:
            _EXIT_HOOKS.append(hook)
    except (OSError, AttributeError):  # not glibc: Python's atexit only
        pass
