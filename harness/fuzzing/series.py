"""A campaign's time series: ``stats.csv`` (merged) and ``stats-workers.csv`` (per worker).

Two files in the campaign's artifacts folder:

``stats-workers.csv``
    Written by every fuzz target process (:class:`WorkerSeries`): one row
    every ``interval`` seconds and a last row at exit, each with the
    worker's own counters.  In ``--jobs N`` mode every libFuzzer job is a
    process of its own and appends to the same file; a row is a single
    ``write()`` to a file opened ``O_APPEND``, so rows of several processes
    never interleave.  Columns: :data:`WORKER_COLUMNS`.

``stats.csv``
    Written by ``loomfuzz fuzz`` (:class:`CampaignSeries`): one row every
    ``interval`` seconds merging the workers' latest rows with what only the
    campaign sees (the corpus folder, the findings' sidecars), and a last
    row (``final`` = 1) with the figures of the final summary.  Columns:
    :data:`COLUMNS`.

Both files are appended one flushed row at a time, so a campaign killed at
any moment keeps every row written so far; :func:`read_series` tolerates a
torn last line.  A campaign that starts where an earlier one left a
``stats.csv`` first renames the old files to ``stats-<its start>.csv`` /
``stats-workers-<its start>.csv``: nothing is lost.

Merging.  ``executions`` is the sum over workers of their latest row (every
process counts from 0; a finished job keeps its last figure); ``edges`` and
``grammar_coverage`` are the most any worker reached (a distinct-edge count
does not add up across processes; this is also what the summary reports).
``exec_per_s`` is the sum of the rates the workers measured over their last
interval (of those that wrote a row lately).  Without any worker row
(``--self``), ``executions`` comes from libFuzzer's own progress lines and
the rate is the one since the previous row.

Grammar coverage.  The column stays empty unless a fuzz target provides it:
``series.set("grammar_coverage", value)`` in its test loop.
"""

from __future__ import annotations

import csv
import io
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence

from harness.run.runner import FINDING_KINDS

__all__ = [
    "COLUMNS",
    "STATS_FILE",
    "WORKERS_FILE",
    "WORKER_COLUMNS",
    "CampaignSeries",
    "SeriesError",
    "WorkerSeries",
    "read_series",
    "rotate_previous",
]

STATS_FILE = "stats.csv"
WORKERS_FILE = "stats-workers.csv"
DEFAULT_INTERVAL = 2.0

FINDING_COLUMNS = tuple(f"findings_{kind}" for kind in FINDING_KINDS)
#: Values a fuzz target may provide with :meth:`WorkerSeries.set`.
GAUGES = ("grammar_coverage", "restarts", "restart_reasons")

COLUMNS = (
    "elapsed_s", "executions", "exec_per_s", "corpus", "edges", "grammar_coverage",
    "findings", *FINDING_COLUMNS, "restarts", "restart_reasons", "workers", "unix_time", "final",
)
WORKER_COLUMNS = (
    "unix_time", "worker", "elapsed_s", "executions", "exec_per_s", "edges", "grammar_coverage",
    "findings", *FINDING_COLUMNS, "restarts", "restart_reasons", "final",
)
_TEXT_COLUMNS = {"worker", "restart_reasons"}


class SeriesError(Exception):
    """A series file cannot be read; the message names the file and line."""


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value == value else ""
    return str(value)


def _line(values: Iterable) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([_cell(v) for v in values])
    return buffer.getvalue()


class _AppendOnlyCsv:
    """A CSV file that gets whole rows, each one ``write()`` on an ``O_APPEND`` descriptor."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = tuple(columns)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if os.fstat(self.fd).st_size == 0:
            os.write(self.fd, _line(self.columns).encode())

    def write(self, row: Mapping[str, object]) -> None:
        os.write(self.fd, _line(row.get(c) for c in self.columns).encode())

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# ------------------------------------------------------------------ reading


def _number(text: str):
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_rows(text: str, source: str = "<series>") -> list[dict]:
    """Rows of a series file's text.  A last line without its newline (a
    campaign killed mid-write) is dropped; a repeated header is skipped;
    anything else malformed is a :class:`SeriesError` naming the line."""
    lines = text.split("\n")
    torn = lines.pop()  # "" when the text ends with a newline
    if not lines:
        if torn:
            return []  # only a torn header
        raise SeriesError(f"{source}: empty file, not a loom-fuzz stats series")
    header = next(csv.reader([lines[0]]))
    if "elapsed_s" not in header or "executions" not in header:
        raise SeriesError(f"{source}:1: not a loom-fuzz stats series (header {lines[0][:80]!r})")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        cells = next(csv.reader([line]))
        if cells == header:
            continue
        if len(cells) != len(header):
            raise SeriesError(f"{source}:{number}: {len(cells)} fields, the header has {len(header)}")
        row = {}
        for name, cell in zip(header, cells):
            if name in _TEXT_COLUMNS:
                row[name] = cell
                continue
            try:
                row[name] = _number(cell)
            except ValueError:
                raise SeriesError(f"{source}:{number}: column {name}: not a number: {cell!r}") from None
        rows.append(row)
    del torn  # a torn last line is the one a killed writer left: not an error
    return rows


def read_series(path: str | os.PathLike) -> list[dict]:
    """The rows of ``stats.csv`` or ``stats-workers.csv`` as dicts of numbers (None when empty)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise SeriesError(f"{path}: cannot read: {reason}") from None
    return parse_rows(text, str(path))


def rotate_previous(folder: Path) -> list[Path]:
    """Rename an earlier campaign's series files out of the way (``stats-<start>.csv``)."""
    moved = []
    stats = folder / STATS_FILE
    if not stats.exists() or stats.stat().st_size == 0:
        return moved
    try:
        rows = read_series(stats)
        start = rows[0]["unix_time"] - rows[0]["elapsed_s"] if rows else stats.stat().st_mtime
    except (SeriesError, KeyError, TypeError):
        start = stats.stat().st_mtime
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start))
    for name in (STATS_FILE, WORKERS_FILE):
        old = folder / name
        if old.exists():
            stem = name[: -len(".csv")]
            new = folder / f"{stem}-{stamp}.csv"
            k = 1
            while new.exists():
                k += 1
                new = folder / f"{stem}-{stamp}-{k}.csv"
            os.replace(old, new)
            moved.append(new)
    return moved


# ------------------------------------------------------------------ workers


class WorkerSeries:
    """One fuzz target process's rows in ``stats-workers.csv``.

    The fuzz target calls :meth:`due` cheaply after every execution and
    :meth:`record` when it is; :meth:`finding` for each finding;
    :meth:`set` for gauges it computes (``grammar_coverage``); :meth:`close`
    at exit (the last row, ``final`` = 1).
    """

    def __init__(self, path: str | os.PathLike, worker: str, interval: float = DEFAULT_INTERVAL) -> None:
        self.file = _AppendOnlyCsv(Path(path), WORKER_COLUMNS)
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


# ----------------------------------------------------------------- campaign


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
                parsed = {k: (v if k in _TEXT_COLUMNS else _number(v)) for k, v in row.items()}
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
        _AppendOnlyCsv(self.workers_path, WORKER_COLUMNS).close()
        self.file = _AppendOnlyCsv(folder / STATS_FILE, COLUMNS)
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
