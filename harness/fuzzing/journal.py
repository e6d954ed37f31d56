"""The sweep journal: which indices of a sweep are done, durable across SIGKILL.

One append-only JSON-lines file per sweep, ``DIR/sweep-<fingerprint>.jsonl``,
where the fingerprint (12 hex digits of a SHA-256) names what is swept: the
program source, the index range and the target (binary, arguments, limits,
expectations).  The same command run again finds its journal and resumes;
another sweep into the same folder gets a journal of its own.

* Line 1, the header: ``{"journal": "loom-fuzz-sweep/1", "fingerprint": ...,
  "identity": {...}, "created": ...}``.
* Then one line per finished batch: ``{"done": [lo, hi], "outcomes":
  {"accepted": 61, "rejected": 2, ...}, "findings": [{"index": i, "name":
  "crash-<sha1>", "kind": "crash", "outcome": "crash", "why": "...",
  "origin": "..."}], "processes": 3, "seconds": 0.41}``.  Each line is
  written with one ``write`` on an ``O_APPEND`` descriptor and ``fsync``-ed
  before the next batch is journaled.

The sweep writes a batch's finding files first and journals the batch
after, so a kill between the two only makes the restart run that batch
again (rewriting the same files); a batch is in the journal only when all
its results are on disk.  The done ranges of a journal never overlap (it
says which line breaks that if they do); a last line cut short by a kill is
dropped on reopening.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

__all__ = ["FORMAT", "JournalError", "SweepJournal", "fingerprint", "merge_ranges"]

FORMAT = "loom-fuzz-sweep/1"


class JournalError(Exception):
    """The journal cannot be used; the message is one line naming the file."""


def fingerprint(identity: Mapping) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


@dataclass
class SweepJournal:
    path: Path
    identity: dict
    done: list[tuple[int, int]] = field(default_factory=list)  # merged, sorted
    outcomes: Counter = field(default_factory=Counter)
    findings: list[dict] = field(default_factory=list)
    batches: int = 0

    @classmethod
    def open(cls, directory: Path, identity: dict) -> "SweepJournal":
        """The journal of the sweep ``identity`` in ``directory``: created, or read to resume."""
        fp = fingerprint(identity)
        path = Path(directory) / f"sweep-{fp}.jsonl"
        journal = cls(path, identity)
        if path.exists():
            journal._load(fp)
        else:
            header = {"journal": FORMAT, "fingerprint": fp, "identity": identity,
                      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
            tmp = path.with_name(f".{path.name}.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(header, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            _fsync_dir(path.parent)
        return journal

    def _load(self, fp: str) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as e:
            raise JournalError(f"{self.path}: cannot read the journal: {e.strerror or e}") from None
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data):
            # a line cut short by a kill: its batch is not done; drop the piece
            with open(self.path, "r+b") as f:
                f.truncate(len(complete))
                os.fsync(f.fileno())
        lines = complete.decode("utf-8", errors="replace").splitlines()
        where = lambda n: f"{self.path}:{n}"  # noqa: E731
        try:
            header = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            header = None
        if not isinstance(header, dict) or header.get("journal") != FORMAT:
            raise JournalError(f"{where(1)}: not a loom-fuzz sweep journal ({FORMAT} header expected)")
        if header.get("fingerprint") != fp:
            raise JournalError(f"{where(1)}: the journal is of another sweep (fingerprint "
                               f"{header.get('fingerprint')}, not {fp})")
        ranges: list[tuple[int, int]] = []
        for n, line in enumerate(lines[1:], 2):
            try:
                rec = json.loads(line)
                lo, hi = (int(x) for x in rec["done"])
                outcomes = {str(k): int(v) for k, v in rec.get("outcomes", {}).items()}
                findings = list(rec.get("findings", []))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise JournalError(f"{where(n)}: not a batch record") from None
            if not lo < hi:
                raise JournalError(f"{where(n)}: empty range [{lo}, {hi})")
            for a, b in ranges:
                if lo < b and a < hi:
                    raise JournalError(f"{where(n)}: [{lo}, {hi}) overlaps [{a}, {b}) done before: "
                                       "the journal is inconsistent")
            ranges.append((lo, hi))
            self.outcomes.update(outcomes)
            self.findings.extend(findings)
            self.batches += 1
        self.done = merge_ranges(ranges)

    @property
    def done_count(self) -> int:
        return sum(hi - lo for lo, hi in self.done)

    def remaining(self, first: int, end: int) -> list[tuple[int, int]]:
        """The ranges of ``[first, end)`` not done yet, in order."""
        gaps, at = [], first
        for lo, hi in self.done:
            if hi <= at:
                continue
            if lo >= end:
                break
            if lo > at:
                gaps.append((at, lo))
            at = max(at, hi)
        if at < end:
            gaps.append((at, end))
        return gaps

    def record(self, lo: int, hi: int, outcomes: Mapping[str, int], findings: list[dict],
               processes: int, seconds: float) -> None:
        """Journal the batch ``[lo, hi)`` (its finding files are already written)."""
        rec = {"done": [lo, hi], "outcomes": dict(outcomes), "findings": findings,
               "processes": processes, "seconds": round(seconds, 4)}
        line = (json.dumps(rec, sort_keys=True) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        self.done = merge_ranges([*self.done, (lo, hi)])
        self.outcomes.update(outcomes)
        self.findings.extend(findings)
        self.batches += 1


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
