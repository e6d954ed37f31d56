"""Shard results as one: the folders of a sharded sweep or campaign merged into one summary.

Each task of a job array (Slurm, Kubernetes, GNU parallel) writes a folder of
its own.  A sweep shard holds its journal (``sweep-<fingerprint>.jsonl``,
:mod:`harness.fuzzing.journal`), a campaign shard its ``stats.csv``
(:mod:`harness.fuzzing.series`); both hold their findings as ``NAME.mlir``
(the program the target read; the grammar's suffix) with ``NAME.json`` (the outcome) beside it.

:func:`merge_shards` reads the folders (it never writes into them) and gives
one :class:`MergedSummary`: what each shard did (programs and outcomes, or
executions and corpus), which indices of each sweep are done across the
shards, and the distinct findings, one per program: a finding's identity is
the SHA-256 of its program text (the identity triage gives a member), so the
same program found by two shards is counted once, with both shards named.
The crash database and the report of all shards are triage's
(``loomfuzz triage SHARD...``): one triage over every shard folder.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from harness.fuzzing.findings import programs_beside
from harness.fuzzing.journal import JournalError, SweepJournal, merge_ranges
from harness.fuzzing.series import STATS_FILE, SeriesError, read_series

__all__ = ["MergeError", "MergedSummary", "ShardSummary", "format_merged", "merge_shards", "write_merged"]


class MergeError(Exception):
    """A folder cannot be merged; the message is one line naming it."""


@dataclass
class ShardSummary:
    folder: str
    kind: str  # "sweep" or "campaign"
    programs: int = 0  # sweep: indices in its range(s)
    done: int = 0  # sweep: indices journaled as run
    outcomes: Counter = field(default_factory=Counter)  # sweep: outcome kind -> programs
    runs: int = 0  # campaign: runs of `loomfuzz fuzz` (stats.csv and the earlier stats-<start>.csv)
    executions: int = 0  # campaign: over all its runs (the last row of each series)
    corpus: int = 0  # campaign: the largest corpus a run ended with
    elapsed_s: float = 0.0
    findings: int = 0  # finding files in the folder (programs, not distinct over shards)

    def to_json(self) -> dict:
        return {"folder": self.folder, "kind": self.kind, "programs": self.programs, "done": self.done,
                "outcomes": dict(self.outcomes), "runs": self.runs, "executions": self.executions, "corpus": self.corpus,
                "elapsed_s": self.elapsed_s, "findings": self.findings}


@dataclass
class MergedSummary:
    shards: list[ShardSummary]
    sweeps: dict[str, dict]  # source -> {"range": [lo, hi], "gaps": n, "done": [[lo, hi], ...], "missing": n}
    findings: dict[str, dict]  # SHA-256 of the program -> kind, why, shards, files

    @property
    def outcomes(self) -> Counter:
        total: Counter = Counter()
        for shard in self.shards:
            total.update(shard.outcomes)
        return total

    @property
    def complete(self) -> bool:
        return all(s["missing"] == 0 for s in self.sweeps.values())

    def to_json(self) -> dict:
        kinds = Counter(f["kind"] for f in self.findings.values())
        return {
            "shards": [s.to_json() for s in self.shards],
            "sweeps": self.sweeps,
            "outcomes": dict(self.outcomes),
            "executions": sum(s.executions for s in self.shards),
            "findings": len(self.findings),
            "findings_by_kind": dict(sorted(kinds.items())),
            "distinct_findings": [{"sha256": key, **value} for key, value in sorted(self.findings.items())],
        }


def merge_shards(folders: Iterable[Path | str]) -> MergedSummary:
    """One summary of the shard ``folders``; raises :class:`MergeError`."""
    shards: list[ShardSummary] = []
    ranges: dict[str, list] = {}  # a sweep's source and target, as one key -> its ranges and done parts
    findings: dict[str, dict] = {}
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise MergeError(f"{folder}: not a folder")
        journals = sorted(folder.glob("sweep-*.jsonl"))
        series = _series_files(folder)
        files = _finding_files(folder)
        if not journals and not series and not files:
            raise MergeError(f"{folder}: not a shard folder (no sweep journal sweep-*.jsonl, no "
                             f"{STATS_FILE}, no findings)")
        shard = ShardSummary(str(folder), "sweep" if journals else "campaign")
        for path in journals:
            journal = _open_journal(path)
            lo, hi = journal.identity["range"]
            shard.programs += hi - lo
            shard.done += journal.done_count
            shard.outcomes.update(journal.outcomes)
            key = json.dumps({k: v for k, v in journal.identity.items() if k != "range"}, sort_keys=True)
            entry = ranges.setdefault(key, [[], []])
            entry[0].append((lo, hi))
            entry[1].extend(journal.done)
        for path in series:  # one file per run of `loomfuzz fuzz` in this folder
            try:
                rows = read_series(path)
            except SeriesError as error:
                raise MergeError(str(error)) from None
            if rows:
                last = rows[-1]
                shard.runs += 1
                shard.executions += int(last.get("executions") or 0)
                shard.corpus = max(shard.corpus, int(last.get("corpus") or 0))
                shard.elapsed_s += float(last.get("elapsed_s") or 0.0)
        for program, record in files:
            shard.findings += 1
            text = program.read_bytes()
            entry = findings.setdefault(hashlib.sha256(text).hexdigest(), {
                "kind": record.get("finding_kind") or record.get("outcome"),
                "why": record.get("why", ""), "shards": [], "files": []})
            if shard.folder not in entry["shards"]:
                entry["shards"].append(shard.folder)
            entry["files"].append(str(program))
        shards.append(shard)
    sweeps = {}
    for key, (parts, done) in ranges.items():
        covered = merge_ranges(parts)
        done = merge_ranges(done)
        lo, hi = covered[0][0], covered[-1][1]
        # indices between the shards' ranges (a shard left out) are missing too
        sweeps[json.loads(key)["source"]] = {
            "range": [lo, hi], "gaps": len(covered) - 1, "done": [list(r) for r in done],
            "missing": (hi - lo) - sum(b - a for a, b in done)}
    return MergedSummary(shards, sweeps, findings)


def _open_journal(path: Path) -> SweepJournal:
    """The journal at ``path``, opened with the identity of its own header."""
    try:
        header = json.loads(path.read_text(encoding="utf-8").partition("\n")[0])
        identity = header["identity"]
    except (OSError, ValueError, KeyError, TypeError):
        raise MergeError(f"{path}:1: not a loom-fuzz sweep journal") from None
    try:
        return SweepJournal.open(path.parent, identity)
    except JournalError as error:
        raise MergeError(str(error)) from None


def _series_files(folder: Path) -> list[Path]:
    """Every ``stats.csv`` under ``folder`` (a campaign shard may hold one folder per run of
    ``loomfuzz fuzz``) and the series of earlier runs (``stats-<start>.csv``), not the
    workers' files."""
    return sorted(p for p in folder.rglob("stats*.csv")
                  if p.name == STATS_FILE or (p.name.startswith("stats-") and not p.name.startswith("stats-workers")))


def _finding_files(folder: Path) -> list[tuple[Path, dict]]:
    """``NAME.mlir`` (the grammar's suffix) with its ``NAME.json`` outcome record, for every
    finding under ``folder`` (hidden and ``.partial`` files are skipped: a writer may have died)."""
    found = []
    programs: dict[Path, dict[str, str]] = {}  # folder -> its findings' record -> program
    for sidecar in sorted(folder.rglob("*.json")):
        if sidecar.parent not in programs:
            programs[sidecar.parent] = programs_beside(sidecar.parent)
        name = programs[sidecar.parent].get(sidecar.name)
        if name is None:
            continue
        program = sidecar.parent / name
        try:
            record = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise MergeError(f"{sidecar}: not a finding record (JSON expected)") from None
        if isinstance(record, dict) and record.get("finding"):
            found.append((program, record))
    return found


def format_merged(summary: MergedSummary, shown: int = 20) -> str:
    """The merged summary as Markdown (also the text ``loomfuzz merge`` prints)."""
    lines = [f"# Merged summary of {len(summary.shards)} shard(s)", ""]
    for source, sweep in summary.sweeps.items():
        lo, hi = sweep["range"]
        state = "complete" if not sweep["missing"] else f"{sweep['missing']:,} not run yet"
        gaps = f", {sweep['gaps']} gap(s) between the shards' ranges" if sweep["gaps"] else ""
        lines.append(f"- sweep `{source}`: indices {lo}-{hi - 1}, {state}{gaps}")
    executions = sum(s.executions for s in summary.shards)
    if executions:
        lines.append(f"- campaign executions: {executions:,} over "
                     f"{sum(s.kind == 'campaign' for s in summary.shards)} worker(s)")
    lines += ["", "| shard | kind | programs / executions | corpus | outcomes | findings |",
              "|---|---|---|---|---|---|"]
    for s in summary.shards:
        if s.kind == "sweep":
            done = f"{s.done:,} of {s.programs:,}"
            outcomes = ", ".join(f"{k} {n:,}" for k, n in sorted(s.outcomes.items())) or "-"
            lines.append(f"| {s.folder} | sweep | {done} | - | {outcomes} | {s.findings:,} |")
        else:
            lines.append(f"| {s.folder} | campaign | {s.executions:,} in {s.runs} run(s) | {s.corpus:,} | - "
                         f"| {s.findings:,} |")
    total = summary.outcomes
    if total:
        lines += ["", "outcomes: " + ", ".join(f"{k} {n:,}" for k, n in sorted(total.items()))]
    kinds = Counter(f["kind"] for f in summary.findings.values())
    files = sum(len(f["files"]) for f in summary.findings.values())
    lines += ["", f"distinct findings: {len(summary.findings):,} programs ("
              + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none")
              + f"), from {files:,} finding file(s)"]
    for key, f in sorted(summary.findings.items())[:shown]:
        lines.append(f"- `{key[:12]}` {f['kind']} in {len(f['shards'])} shard(s): {f['files'][0]}")
    if len(summary.findings) > shown:
        lines.append(f"- ... and {len(summary.findings) - shown:,} more (summary.json lists them all)")
    return "\n".join(lines) + "\n"


def write_merged(summary: MergedSummary, out: Path | str) -> tuple[Path, Path]:
    """``OUT/summary.json`` and ``OUT/summary.md``, each written whole."""
    from harness.run.atomic import write_atomically

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data, text = out / "summary.json", out / "summary.md"
    write_atomically(data, json.dumps(summary.to_json(), indent=2, sort_keys=True) + "\n")
    write_atomically(text, format_merged(summary))
    return data, text
