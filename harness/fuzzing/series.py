"""A campaign's time series: ``stats.csv`` (merged) and ``stats-workers.csv`` (per worker).

Two files in the campaign's artifacts folder:

``stats-workers.csv``
    Written by every fuzz target process
    (:class:`harness.fuzzing.worker_series.WorkerSeries`): one row
    every ``interval`` seconds and a last row at exit, each with the
    worker's own counters.  In ``--jobs N`` mode every libFuzzer job is a
    process of its own and appends to the same file; a row is a single
    ``write()`` to a file opened ``O_APPEND``, so rows of several processes
    never interleave.  Columns: :data:`WORKER_COLUMNS`.

``stats.csv``
    Written by ``loomfuzz fuzz``
    (:class:`harness.fuzzing.campaign_series.CampaignSeries`): one row every
    ``interval`` seconds merging the workers' latest rows with what only the
    campaign sees (the corpus folder, the findings' sidecars), and a last
    row (``final`` = 1) with the figures of the final summary.  Columns:
    :data:`COLUMNS`.

Both files are appended one flushed row at a time, so a campaign killed at
any moment keeps every row written so far; :func:`read_series` tolerates a
torn last line.  A campaign that starts where an earlier one left a
``stats.csv`` first renames the old files to ``stats-<its start>.csv`` /
``stats-workers-<its start>.csv``: nothing is lost.

This module is the files' format: their columns, writing whole rows, reading
them back (:func:`read_series`), moving an earlier campaign's aside.
"""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from harness.run.outcome import FINDING_KINDS

__all__ = [
    "COLUMNS",
    "DEFAULT_INTERVAL",
    "STATS_FILE",
    "WORKERS_FILE",
    "WORKER_COLUMNS",
    "AppendOnlyCsv",
    "SeriesError",
    "parse_rows",
    "parse_value",
    "read_series",
    "rotate_previous",
]

STATS_FILE = "stats.csv"
WORKERS_FILE = "stats-workers.csv"
DEFAULT_INTERVAL = 2.0

FINDING_COLUMNS = tuple(f"findings_{kind}" for kind in FINDING_KINDS)

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


class AppendOnlyCsv:
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


def parse_value(name: str, cell: str):
    """A cell of column ``name`` as written: text for the text columns, else a number
    (None when empty); ValueError when it is not one."""
    return cell if name in _TEXT_COLUMNS else _number(cell)


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
            try:
                row[name] = parse_value(name, cell)
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
