"""The live status of ``loomfuzz fuzz``: one line, refreshed in place on a terminal.

libFuzzer's own progress lines (``#1234 NEW cov: 56 ft: 78 corp: 9/90b
lim: 17 exec/s: 123 rss: 45Mb L: 3/17 MS: 1 Custom-``; in fork mode ``#N:
cov: ... job: 7``) are hard to read and say nothing about findings.  On a
terminal they are replaced by one status line::

    [  1m05s] 12,345 exec  190/s  corpus 61  edges 311  findings 2 (crash 2)

rewritten in place (carriage return + erase line) at every sample; every
other line of the fuzz target's output (INFO lines, errors, a crash report)
is printed above it.  When the output is not a terminal (a pipe, a log
file) nothing is rewritten: all of the fuzz target's output passes through
unchanged and the status comes as plain ``loomfuzz fuzz: status: ...``
lines, one per sample.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Optional, TextIO

from harness.fuzzing.campaign_series import Snapshot

__all__ = ["StatusDisplay", "format_status", "is_progress_line"]

_PROGRESS = re.compile(r"^#\d+(?::\s+cov:|\s+(?:INITED|NEW|REDUCE|pulse|RELOAD|DONE)\b)")
_CLEAR = "\r\x1b[K"


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


def format_status(snapshot: Snapshot) -> str:
    """The one-line status of a sample."""
    parts = [f"[{_duration(snapshot.elapsed_s):>7}]"]
    parts.append("? exec" if snapshot.executions is None else f"{snapshot.executions:,} exec")
    if snapshot.exec_per_s is not None:
        parts.append(f"{snapshot.exec_per_s:,.0f}/s")
    parts.append("corpus ?" if snapshot.corpus is None else f"corpus {snapshot.corpus:,}")
    parts.append("edges -" if snapshot.edges is None else f"edges {snapshot.edges:,}")
    if snapshot.grammar_coverage is not None:
        parts.append(f"grammar {snapshot.grammar_coverage:g}")
    if snapshot.workers > 1:
        parts.append(f"workers {snapshot.workers}")
    total = sum(snapshot.findings.values())
    findings = f"findings {total}"
    if total:
        findings += " (" + ", ".join(f"{k} {v}" for k, v in sorted(snapshot.findings.items()) if v) + ")"
    parts.append(findings)
    return "  ".join(parts)


class StatusDisplay:
    """Where the fuzz target's output and the status line meet (thread-safe:
    output lines come from the main thread, samples from the sampler)."""

    def __init__(self, out: TextIO, interactive: Optional[bool] = None) -> None:
        self.out = out
        if interactive is None:
            try:
                interactive = out.isatty()
            except (AttributeError, ValueError):
                interactive = False
        self.interactive = interactive
        self.status = ""
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

    def line(self, text: str) -> None:
        """One line of the fuzz target's output (``text`` ends with a newline)."""
        with self._lock:
            if not self.interactive:
                self.out.write(text)
                self.out.flush()
                return
            if is_progress_line(text.rstrip("\n")):
                return
            if self.status:
                self.out.write(_CLEAR)
            self.out.write(text)
            if self.status:
                self.out.write(self.status)
            self.out.flush()

    def update(self, snapshot: Snapshot) -> None:
        text = format_status(snapshot)
        with self._lock:
            if self.interactive:
                self.status = text[: self._width()]
                self.out.write(_CLEAR + self.status)
            else:
                self.out.write(f"loomfuzz fuzz: status: {text}\n")
            self.out.flush()

    def close(self) -> None:
        """Leave the last status on screen and end its line."""
        with self._lock:
            if self.interactive and self.status:
                self.out.write("\n")
                self.out.flush()
            self.status = ""
