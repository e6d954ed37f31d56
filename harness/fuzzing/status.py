"""The live status of ``loomfuzz fuzz``: one line, refreshed in place on a terminal.

libFuzzer's and the workers' own output (progress lines such as ``#1234 NEW cov: 56 ft: 78
corp: 9/90b ...``, INFO lines, one ``ERROR: libFuzzer: fuzz target exited`` per finding in fork
mode, atheris' tracebacks) goes to the campaign's log file (harness.fuzzing.campaign); the
terminal gets one status line::

    [  1m05s]  12,345 exec  190/s  corpus 61  findings 2 (crash 2)  left 54s

rewritten in place (carriage return + erase line) at every sample, with the few lines of
loomfuzz's own (a finding of a new reason, an error of the fuzz target) printed above it.
When the output is not a terminal (a pipe, a log file) nothing is rewritten: the status comes
as plain ``loomfuzz fuzz: status: ...`` lines, one every :data:`PLAIN_EVERY` seconds and a
last one at the end.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Mapping, Optional, TextIO

from harness.fuzzing.campaign_series import Snapshot

__all__ = ["PLAIN_EVERY", "StatusDisplay", "format_status", "is_progress_line"]

_PROGRESS = re.compile(r"^#\d+(?::\s+cov:|\s+(?:INITED|NEW|REDUCE|pulse|RELOAD|DONE)\b)")
_CLEAR = "\r\x1b[K"

#: Seconds between two plain status lines (output not a terminal): a log stays readable.
PLAIN_EVERY = 5.0


def is_progress_line(line: str) -> bool:
    """A libFuzzer progress line (what the status line replaces on a terminal)."""
    return bool(_PROGRESS.match(line))


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_status(snapshot: Snapshot, findings: Optional[Mapping[str, int]] = None,
                  left: Optional[float] = None) -> str:
    """The one-line status of a sample: ``findings`` are the counts to show (default the
    sample's), ``left`` the seconds left of ``--time``."""
    parts = [f"[{_duration(snapshot.elapsed_s):>7}]"]
    parts.append("? exec" if snapshot.executions is None else f"{snapshot.executions:,} exec")
    if snapshot.exec_per_s is not None:
        parts.append(f"{snapshot.exec_per_s:,.0f}/s")
    parts.append("corpus ?" if snapshot.corpus is None else f"corpus {snapshot.corpus:,}")
    if snapshot.edges is not None:
        parts.append(f"edges {snapshot.edges:,}")
    if snapshot.grammar_coverage is not None:
        parts.append(f"grammar {snapshot.grammar_coverage:g}")
    if snapshot.workers > 1:
        parts.append(f"workers {snapshot.workers}")
    counts = snapshot.findings if findings is None else findings
    total = sum(counts.values())
    text = f"findings {total}"
    if total:
        text += " (" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v) + ")"
    parts.append(text)
    if left is not None:
        parts.append(f"left {_duration(max(0.0, left))}")
    return "  ".join(parts)


class StatusDisplay:
    """Where the status line and loomfuzz's own lines meet (thread-safe: messages come from
    the main thread and the sampler, samples from the sampler)."""

    def __init__(self, out: TextIO, interactive: Optional[bool] = None,
                 plain_every: float = PLAIN_EVERY) -> None:
        self.out = out
        if interactive is None:
            try:
                interactive = out.isatty()
            except (AttributeError, ValueError):
                interactive = False
        self.interactive = interactive
        self.plain_every = plain_every
        self.status = ""
        self._last_plain: Optional[float] = None
        self._lock = threading.Lock()

    def _width(self) -> int:
        """The width of the terminal the status line is written to (``$COLUMNS`` first, as
        ``shutil.get_terminal_size`` does, but measured on ``out``, not on stdout: the two
        can be different terminals, or stdout none at all); 100 if it cannot be told."""
        try:
            columns = int(os.environ.get("COLUMNS", "0"))
        except ValueError:
            columns = 0
        if columns <= 0:
            try:
                columns = os.get_terminal_size(self.out.fileno()).columns
            except (AttributeError, OSError, ValueError):  # no descriptor, or not a terminal
                columns = 100
        return max(20, columns - 1)

    def _write(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (BrokenPipeError, ValueError):  # nobody reads our output any more
            pass

    def message(self, text: str) -> None:
        """One line of loomfuzz's own, printed above the status line."""
        text = text.rstrip("\n") + "\n"
        with self._lock:
            if self.interactive and self.status:
                self._write(_CLEAR + text + self.status)
            else:
                self._write(text)

    def update(self, snapshot: Snapshot, findings: Optional[Mapping[str, int]] = None,
               left: Optional[float] = None) -> None:
        text = format_status(snapshot, findings, left)
        with self._lock:
            if self.interactive:
                self.status = text[: self._width()]
                self._write(_CLEAR + self.status)
                return
            now = time.monotonic()
            if snapshot.final or self._last_plain is None or now - self._last_plain >= self.plain_every:
                self._last_plain = now
                self._write(f"loomfuzz fuzz: status: {text}\n")

    def close(self) -> None:
        """Leave the last status on screen and end its line."""
        with self._lock:
            if self.interactive and self.status:
                self._write("\n")
            self.status = ""
