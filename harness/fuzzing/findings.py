"""A campaign's findings: the sidecars and crash files the fuzz target wrote.

A finding is ``crash-<sha1>`` (libFuzzer's input file) with the target's
``crash-<sha1>.mlir`` and ``.json`` sidecar beside it in the artifacts
folder.  :class:`FindingCounter` counts the sidecars written since the campaign
started (new ones, and those of findings found again) while it runs (the statistics' findings columns);
:func:`collect_findings` gathers them at the end, and names the crash files
without a sidecar: exceptions of the harness itself, not findings.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Mapping

__all__ = ["FindingCounter", "collect_findings", "crash_files", "finding_kind", "programs_beside", "sidecars",
           "written_since"]


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


class FindingCounter:
    """Findings by kind from the sidecars new since the campaign started (each read once)."""

    def __init__(self, artifacts: Path, before: Mapping[str, int]) -> None:
        self.artifacts = artifacts
        self.before = before
        self.kinds: dict[str, str] = {}  # sidecar name -> kind

    def counts(self) -> dict[str, int]:
        for name in sorted(written_since(self.artifacts, self.before) - set(self.kinds)):
            try:
                record = json.loads((self.artifacts / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # still being written: read at the next sample
            if isinstance(record, dict) and "outcome" in record:
                self.kinds[name] = finding_kind(record)
        counts: dict[str, int] = {}
        for kind in self.kinds.values():
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def collect_findings(artifacts: Path, sidecars_before: Mapping[str, int],
                     crashes_before: set[str]) -> tuple[dict[str, list[dict]], list[str]]:
    """(the findings new since the start, by kind: their sidecar records; the
    crash files new since the start that have no sidecar)."""
    findings: dict[str, list[dict]] = {}
    new_sidecars = sorted(written_since(artifacts, sidecars_before))
    for name in new_sidecars:
        try:
            record = json.loads((artifacts / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or "outcome" not in record:
            continue
        findings.setdefault(finding_kind(record), []).append(record)
    stems = {name[: -len(".json")] for name in new_sidecars}
    orphans = sorted(n for n in crash_files(artifacts) - crashes_before if n not in stems)
    return findings, orphans
