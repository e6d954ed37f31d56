"""A campaign's findings: the sidecars and crash files the fuzz target wrote.

A finding is ``crash-<sha1>`` (libFuzzer's input file) with the target's
``crash-<sha1>.mlir`` and ``.json`` sidecar beside it in the artifacts
folder.  :class:`FindingCounter` counts the sidecars written since the campaign
started (new ones, and those of findings found again) while it runs (the statistics' findings columns),
and the folder's findings (those of earlier runs too: what the live status shows); it hands
each finding over once (:meth:`FindingCounter.take_new`), and :func:`reason_key` says which
share a reason (the live status prints the first of each).  :func:`collect_findings` gathers
this run's at the end, and names the crash files without a sidecar: exceptions of the
harness itself, not findings; :func:`folder_findings` gathers all of the folder's.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Mapping, Optional

__all__ = ["FindingCounter", "collect_findings", "crash_files", "finding_kind", "finding_reason",
           "folder_findings", "programs_beside", "reason_key", "sidecars", "written_since"]


def programs_beside(folder: Path) -> dict[str, str]:
    """Record name (``NAME.json``) -> program name for the findings in ``folder`` (not
    below it): the program is ``NAME<suffix>``, whatever the grammar's suffix (one dot,
    e.g. ``.mlir``: ``NAME.exec.mlir`` and ``NAME.history.txt`` are other sidecars).
    The folder is listed once: a campaign's artifacts may hold thousands of findings."""
    names = set(os.listdir(folder))
    out: dict[str, str] = {}
    for name in sorted(names):
        stem, _, ext = name.rpartition(".")
        if stem and ext != "json" and not name.startswith(".") and f"{stem}.json" in names:
            out.setdefault(f"{stem}.json", name)
    return out


def finding_kind(record: Mapping) -> str:
    """A finding's kind from its sidecar (harness.run.outcome.FINDING_KINDS)."""
    return str(record.get("finding_kind") or record.get("outcome") or "unknown")


def finding_reason(record: Mapping) -> str:
    """What a finding's sidecar says it is (``crash: LLVM ERROR: ...``)."""
    return str(record.get("why") or record.get("reason") or finding_kind(record))


def reason_key(record: Mapping) -> str:
    """Findings with one reason share this key: numbers (addresses, sizes, values) do not count."""
    return re.sub(r"\b(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?)\b", "#", finding_reason(record))


def _read_record(path: Path) -> Optional[dict]:
    """A finding's sidecar record; None when it is not one (or not whole yet)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "outcome" in record else None


def sidecars(artifacts: Path) -> dict[str, int]:
    """Sidecar name -> modification time (ns)."""
    if not artifacts.is_dir():
        return {}
    out = {}
    for p in artifacts.iterdir():
        if p.suffix == ".json" and not p.name.startswith("."):
            try:
                out[p.name] = p.stat().st_mtime_ns
            except OSError:
                continue  # removed meanwhile
    return out


def written_since(artifacts: Path, before: Mapping[str, int]) -> set[str]:
    """The sidecars written since ``before``: new ones, and those of findings found again
    (same input, same name: the fuzz target rewrote the sidecar)."""
    return {name for name, mtime in sidecars(artifacts).items() if before.get(name) != mtime}


def crash_files(artifacts: Path) -> set[str]:
    if not artifacts.is_dir():
        return set()
    return {
        p.name for p in artifacts.iterdir()
        if re.fullmatch(r"(crash|timeout|oom|leak|slow-unit)-[0-9a-f]{40}", p.name)
    }


def _by_kind(kinds) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


class FindingCounter:
    """The findings of a campaign's folder while it runs: those written since it started (each
    sidecar read once) and those it held before (``earlier``: sidecar name -> record)."""

    def __init__(self, artifacts: Path, before: Mapping[str, int],
                 earlier: Optional[Mapping[str, Mapping]] = None) -> None:
        self.artifacts = artifacts
        self.before = before
        self.kinds: dict[str, str] = {}  # sidecar name -> kind, written in this run
        self.earlier = {name: finding_kind(record) for name, record in (earlier or {}).items()}
        self._new: list[tuple[str, dict]] = []  # read, not yet taken

    def counts(self) -> dict[str, int]:
        """This run's findings by kind (found again included: the sidecar was written again)."""
        for name in sorted(written_since(self.artifacts, self.before) - set(self.kinds)):
            record = _read_record(self.artifacts / name)
            if record is not None:  # else still being written: read at the next sample
                self.kinds[name] = finding_kind(record)
                self._new.append((name, record))
        return _by_kind(self.kinds.values())

    def folder_counts(self) -> dict[str, int]:
        """The folder's findings by kind (earlier runs' and this run's, each once), as of the last
        :meth:`counts`."""
        return _by_kind({**self.earlier, **self.kinds}.values())

    def take_new(self) -> list[tuple[str, dict]]:
        """The findings read since the last call (sidecar name, record), each handed over once."""
        taken, self._new = self._new, []
        return taken


def collect_findings(artifacts: Path, sidecars_before: Mapping[str, int],
                     crashes_before: set[str]) -> tuple[dict[str, list[dict]], list[str]]:
    """(the findings new since the start, by kind: their sidecar records; the
    crash files new since the start that have no sidecar)."""
    findings: dict[str, list[dict]] = {}
    new_sidecars = sorted(written_since(artifacts, sidecars_before))
    for name in new_sidecars:
        record = _read_record(artifacts / name)
        if record is not None:
            findings.setdefault(finding_kind(record), []).append(record)
    stems = {name[: -len(".json")] for name in new_sidecars}
    orphans = sorted(n for n in crash_files(artifacts) - crashes_before if n not in stems)
    return findings, orphans


def folder_findings(artifacts: Path) -> dict[str, dict]:
    """Every finding the folder holds: sidecar name -> record (whatever run wrote it)."""
    out = {}
    for name in sorted(sidecars(artifacts)):
        record = _read_record(artifacts / name)
        if record is not None:
            out[name] = record
    return out
