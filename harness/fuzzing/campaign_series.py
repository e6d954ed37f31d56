"""``stats.csv`` of one ``loomfuzz fuzz`` run: the workers' rows merged with what only
the campaign sees (the corpus folder, the findings' sidecars); the format is
:mod:`harness.fuzzing.series`'s, the workers' side
:mod:`harness.fuzzing.worker_series`.

Merging.  ``executions`` is the sum over workers of their latest row (every
process counts from 0; a finished job keeps its last figure); ``edges`` and
``grammar_coverage`` are the most any worker reached (a distinct-edge count
does not add up across processes; this is also what the summary reports).
``exec_per_s`` is the sum of the rates the workers measured over their last
interval (of those that wrote a row lately).  Without any worker row
(``--self``), ``executions`` comes from libFuzzer's own progress lines and
the rate is the one since the previous row.
"""

from __future__ import annotations

import csv
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional

from harness.fuzzing.series import (
    COLUMNS,
    DEFAULT_INTERVAL,
    STATS_FILE,
    WORKER_COLUMNS,
    WORKERS_FILE,
    AppendOnlyCsv,
    parse_value,
    rotate_previous,
)
from harness.run.outcome import FINDING_KINDS

__all__ = ["CampaignSeries", "Snapshot"]


class _WorkerTail:
    """Reads the rows workers appended since the last look (whole lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.pending = b""
        self.header: Optional[list[str]] = None
        self.latest: dict[str, dict] = {}

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return
        self.offset += len(data)
        data = self.pending + data
        complete, _, self.pending = data.rpartition(b"\n")
        if not complete:
            return
        for line in complete.decode("utf-8", errors="replace").split("\n"):
            cells = next(csv.reader([line])) if line else []
            if not cells:
                continue
            if self.header is None or cells == self.header:
                self.header = cells
                continue
            if len(cells) != len(self.header):
                continue
            row = dict(zip(self.header, cells))
            worker = row.get("worker", "")
            try:
                parsed = {k: parse_value(k, v) for k, v in row.items()}
            except ValueError:
                continue
            self.latest[worker] = parsed

    def total(self, name: str) -> Optional[int]:
        values = [r[name] for r in self.latest.values() if r.get(name) is not None]
        return sum(values) if values else None

    def most(self, name: str):
        values = [r[name] for r in self.latest.values() if r.get(name) is not None]
        return max(values) if values else None

    def newest(self) -> Optional[float]:
        """The wall-clock time of the newest worker row (what the totals are "as of")."""
        times = [r["unix_time"] for r in self.latest.values() if r.get("unix_time") is not None]
        return max(times) if times else None

    def running(self) -> int:
        return sum(1 for r in self.latest.values() if not r.get("final"))


@dataclass
class Snapshot:
    """One merged sample: a row of ``stats.csv`` and what the live status shows."""

    elapsed_s: float
    executions: Optional[int]
    exec_per_s: Optional[float]
    corpus: Optional[int]
    edges: Optional[int]
    grammar_coverage: Optional[float]
    findings: dict[str, int] = field(default_factory=dict)
    workers: int = 0
    final: bool = False
    restarts: Optional[int] = None  # persistent driver restarts, all workers (None: not persistent)
    restart_reasons: str = ""  # "crash:3 timeout:1"

    def row(self) -> dict:
        row = {
            "elapsed_s": self.elapsed_s,
            "executions": self.executions,
            "exec_per_s": self.exec_per_s,
            "corpus": self.corpus,
            "edges": self.edges,
            "grammar_coverage": self.grammar_coverage,
            "findings": sum(self.findings.values()),
            "workers": self.workers,
            "restarts": self.restarts,
            "restart_reasons": self.restart_reasons,
            "unix_time": time.time(),
            "final": int(self.final),
        }
        for kind in FINDING_KINDS:
            row[f"findings_{kind}"] = self.findings.get(kind, 0)
        return row


class CampaignSeries:
    """``stats.csv`` of one ``loomfuzz fuzz`` run, sampled by a background thread.

    The campaign's main thread is busy streaming the fuzz target's output;
    every ``interval`` seconds the sampler reads the workers' new rows, counts
    the corpus files and the findings' sidecars (through the callables the
    campaign gives), appends a row and hands the sample to ``on_sample`` (the
    live status).  :meth:`finish` stops the sampler and writes the last row.
    """

    def __init__(
        self,
        folder: Path,
        *,
        corpus_size: Callable[[], int],
        findings: Callable[[], Mapping[str, int]],
        libfuzzer_executions: Callable[[], Optional[int]],
        interval: float = DEFAULT_INTERVAL,
        on_sample: Optional[Callable[[Snapshot], None]] = None,
        started: Optional[float] = None,
    ) -> None:
        self.folder = folder
        self.interval = interval
        self.corpus_size = corpus_size
        self.findings = findings
        self.libfuzzer_executions = libfuzzer_executions
        self.on_sample = on_sample
        rotate_previous(folder)
        self.workers_path = folder / WORKERS_FILE
        # Created (with its header) before any worker starts: fork-mode jobs race otherwise.
        AppendOnlyCsv(self.workers_path, WORKER_COLUMNS).close()
        self.file = AppendOnlyCsv(folder / STATS_FILE, COLUMNS)
        self.tail = _WorkerTail(self.workers_path)
        self.started = time.monotonic() if started is None else started
        self.wall_started = time.time() - (time.monotonic() - self.started)
        self._rate_base: tuple[float, int, Optional[float], str] = (self.wall_started, 0, None, "")
        self.last: Optional[Snapshot] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def restart_reasons(self) -> str:
        """The workers' restart reasons summed: ``crash:3 timeout:1``."""
        total: dict[str, int] = {}
        for row in self.tail.latest.values():
            for part in str(row.get("restart_reasons") or "").split():
                reason, _, count = part.rpartition(":")
                if reason and count.isdigit():
                    total[reason] = total.get(reason, 0) + int(count)
        return " ".join(f"{k}:{v}" for k, v in sorted(total.items()))

    def worker_restarts(self) -> tuple[Optional[int], str]:
        """(driver restarts of all workers, their reasons) from the workers' rows."""
        self.tail.poll()
        return self.tail.total("restarts"), self.restart_reasons()

    def worker_executions(self) -> Optional[int]:
        self.tail.poll()
        return self.tail.total("executions")

    def sample(self, *, final: bool = False, executions: Optional[int] = None,
               corpus: Optional[int] = None, edges: Optional[int] = None,
               findings: Optional[Mapping[str, int]] = None,
               elapsed: Optional[float] = None) -> Snapshot:
        """Merge what is known now into a row; the keyword values override (the final row)."""
        with self._lock:
            self.tail.poll()
            now = time.monotonic() - self.started if elapsed is None else elapsed
            previous = self.last
            if executions is None:
                # The workers' rows lag by up to an interval and libFuzzer's lines come
                # irregularly: the larger of the two, never less than the last row.
                known = [n for n in (self.tail.total("executions"), self.libfuzzer_executions(),
                                     previous.executions if previous is not None else None)
                         if n is not None]
                executions = max(known) if known else 0  # nothing has reported a run yet
            if edges is None:
                edges = self.tail.most("edges")
            rate = self._rate(executions, now)
            snapshot = Snapshot(
                elapsed_s=now,
                executions=executions,
                exec_per_s=rate,
                corpus=self.corpus_size() if corpus is None else corpus,
                edges=edges,
                grammar_coverage=self.tail.most("grammar_coverage"),
                findings=dict(self.findings() if findings is None else findings),
                workers=self.tail.running(),
                final=final,
                restarts=self.tail.total("restarts"),
                restart_reasons=self.restart_reasons(),
            )
            try:
                self.file.write(snapshot.row())
            except OSError:
                pass
            self.last = snapshot
        if self.on_sample is not None:
            self.on_sample(snapshot)
        return snapshot

    def _rate(self, executions: Optional[int], now: float) -> Optional[float]:
        """Executions per second since the previous row.  The workers write their
        rows at their own times: the rate is measured between the newest worker
        rows of two samples (exact for one worker), not between the samples."""
        as_of, counted, source = self.tail.newest(), self.tail.total("executions"), "workers"
        if as_of is None or counted is None:  # no worker rows (--self): libFuzzer's counts
            if executions is None:
                return None
            as_of, counted, source = self.wall_started + now, executions, "libfuzzer"
        before, done_before, rate_before, source_before = self._rate_base
        if source != source_before:  # the first worker rows: measure from the start
            before, done_before = self.wall_started, 0
        if as_of > before:
            rate = (counted - done_before) / (as_of - before)
            self._rate_base = (as_of, counted, rate, source)
            return rate
        # No new worker row since the last sample: a phase slip between the
        # workers' clocks and ours, or a worker stuck in a long target run.
        stuck = time.time() - as_of > 1.5 * self.interval + 1.0
        return 0.0 if stuck else rate_before

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="loomfuzz-stats", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def finish(self, **final_values) -> Snapshot:
        """Stop sampling and write the last row (the final summary's figures)."""
        self.stop()
        snapshot = self.sample(final=True, **final_values)
        self.file.close()
        return snapshot
