"""Progress of a triage phase: a tqdm bar on a terminal, else a line every few seconds.

Without a terminal (a log, CI, a pipe) a bar is useless, so a background
thread prints one line per :data:`INTERVAL` seconds, and one when the phase
starts and ends::

    triage: reproduce 120/500 inputs, 3 buckets, 141 target runs, 6 s, about 19 s left

The line is printed even while one item takes long (a bucket whose
minimization runs for a minute), so silence always means something is wrong.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

__all__ = ["INTERVAL", "Progress"]

#: Seconds between two progress lines without a terminal.
INTERVAL = 2.0


class Progress:
    """``with Progress("reproduce", total, "inputs", status) as p: ... p.update()``.

    ``status()`` gives the rest of the line (buckets, target runs), read at each line;
    it is called from the ticking thread, so it must only read counters.
    """

    def __init__(self, phase: str, total: int, unit: str, status: Callable[[], str], *,
                 enabled: bool = True, stream: TextIO | None = None, interval: float = INTERVAL) -> None:
        self.phase, self.total, self.unit, self.status = phase, total, unit, status
        self.stream = stream or sys.stderr
        self.interval = interval
        self.done = 0
        self.enabled = enabled and total > 0
        self.terminal = self.enabled and self.stream.isatty()
        self._bar = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()

    def line(self) -> str:
        elapsed = time.monotonic() - self._started
        left = ""
        if 0 < self.done < self.total:
            left = f", about {elapsed / self.done * (self.total - self.done):.0f} s left"
        status = self.status()
        return (f"triage: {self.phase} {self.done}/{self.total} {self.unit}"
                f"{', ' + status if status else ''}, {elapsed:.0f} s{left}")

    def _print(self) -> None:
        print(self.line(), file=self.stream, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._print()

    def __enter__(self) -> "Progress":
        self._started = time.monotonic()
        if self.terminal:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=self.phase, unit=self.unit.rstrip("s"),
                             file=self.stream, leave=False, dynamic_ncols=True)
        elif self.enabled:
            self._print()
            self._thread = threading.Thread(target=self._tick, name=f"progress-{self.phase}", daemon=True)
            self._thread.start()
        return self

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.set_postfix_str(self.status(), refresh=False)
            self._bar.update(n)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if exc[0] is None:
                self._print()
