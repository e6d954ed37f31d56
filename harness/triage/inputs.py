"""Triage's inputs: the fuzz artifacts and ``.mlir`` files (the grammar's suffix)
named on the command line or found in folders, each read into a program (a derivation
tree, or the text as given when it is not in the shape).

What is collected, what is skipped and why: step 1 of
:mod:`harness.triage.pipeline`.  An input's identity (:attr:`Input.sha`) is
the SHA-256 of its program's canonical rendering, or of its text.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from harness.contract import program_suffix
from harness.core.codec import decode
from harness.core.compiled import CompiledGrammar, Node
from harness.core.grammar import default_grammar
from harness.core.parse import parse, split_programs
from harness.core.render import render
from harness.targets.target import Target
from harness.triage.wrong_code import left_to_the_oracle

__all__ = ["ARTIFACT_PREFIXES", "Collection", "Input", "InputError", "collect_inputs", "findings_of_other_builds",
           "load_input_file"]

ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-", "minimized-from-")
#: with the grammar's program suffix (harness.contract.program_suffix): not a raw artifact
_NOT_ARTIFACT_SUFFIXES = (".json", ".txt", ".log", ".md", ".partial")  # .partial: half-written


class InputError(Exception):
    """An input cannot be read; the message is one line naming the file."""


def _sha(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()



@dataclass(frozen=True)
class Input:
    path: str  # the file, or FILE#k for the k-th program of a stream
    file_sha: str  # SHA-256 of the file's bytes (of the chunk's text for a chunk)
    source: str  # "bytes" | "mlir"
    program: Node | None  # the derivation tree; None: not in the grammar, triaged as text
    text: str  # canonical rendering (program) or the text as given
    not_in_shape: str | None = None
    grammar: CompiledGrammar | None = None

    @property
    def sha(self) -> str:
        return _sha(self.text)

    @property
    def form(self) -> str:
        return "tree" if self.program is not None else "text"

    def target_text(self, target: Target) -> str:
        """The text the target reads: its rendering of the tree, or the text as given."""
        if self.program is None:
            return self.text
        return self.text if target.render == "canonical" else render(self.program, self.grammar,
                                                                       target.render)


@dataclass
class Collection:
    inputs: list[Input] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)


def _is_artifact(name: str, program: str) -> bool:
    """Is ``name`` a raw fuzz artifact (``program``: the grammar's program suffix)?"""
    return name.startswith(ARTIFACT_PREFIXES) and not name.endswith((program, *_NOT_ARTIFACT_SUFFIXES))


def load_input_file(path: Path, display: str | None = None,
                    grammar: CompiledGrammar | None = None) -> list[Input]:
    """The inputs one file holds (one, or one per program of a ``// -----`` stream)."""
    display = display or str(path)
    grammar = grammar or default_grammar()
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"{display}: cannot read: {e.strerror or e}") from None
    if path.suffix != program_suffix(grammar):
        program = decode(data, grammar)
        return [Input(display, _sha(data), "bytes", program, render(program, grammar), None, grammar)]
    text = data.decode("utf-8", errors="replace")
    chunks = split_programs(text)
    if len(chunks) > 1:
        chunks = [c for c in chunks if c.strip()]
    inputs = []
    for k, chunk in enumerate(chunks, 1):
        name = display if len(chunks) == 1 else f"{display}#{k}"
        file_sha = _sha(data) if len(chunks) == 1 else _sha(chunk)
        parsed = parse(chunk, grammar)
        if parsed.tree is not None:
            inputs.append(Input(name, file_sha, "mlir", parsed.tree, render(parsed.tree, grammar),
                                None, grammar))
        else:
            inputs.append(Input(name, file_sha, "mlir", None, chunk, parsed.reason, grammar))
    return inputs


def collect_inputs(paths: Sequence[str], *, exclude: Iterable[str] = (),
                   grammar: CompiledGrammar | None = None) -> Collection:
    """Every input under ``paths`` (files as given, folders scanned); raises InputError."""
    excluded = {os.path.realpath(p) for p in exclude}
    program = program_suffix(grammar)  # no grammar: the default's, .mlir
    out = Collection()
    seen_files: set[str] = set()
    for given in paths:
        p = Path(given)
        if not p.exists():
            raise InputError(f"{given}: no such file or folder")
        if p.is_file():
            real = os.path.realpath(p)
            if real not in seen_files:
                seen_files.add(real)
                out.inputs.extend(load_input_file(p, given, grammar))
            continue
        if not p.is_dir():
            raise InputError(f"{given}: not a file or a folder")
        if not os.access(p, os.R_OK | os.X_OK):
            raise InputError(f"{given}: cannot read the folder")

        def walk_error(error: OSError) -> None:
            raise InputError(f"{error.filename}: cannot read the folder: {error.strerror}")

        for root, dirs, files in os.walk(p, onerror=walk_error):
            dirs[:] = sorted(
                d for d in dirs
                if not d.startswith(".") and os.path.realpath(os.path.join(root, d)) not in excluded
            )
            names = set(files)
            for name in sorted(files):
                full = Path(root) / name
                real = os.path.realpath(full)
                if name.startswith(".") or real in excluded or real in seen_files:
                    continue
                if any(real == e or real.startswith(e + "-") for e in excluded):
                    continue  # the database's -wal/-shm files
                oracle_file = left_to_the_oracle(full, names)
                if oracle_file:
                    out.skipped.append((str(full), oracle_file))
                    continue
                stem, suffix = os.path.splitext(name)
                if suffix in (program, ".json") and stem in names and _is_artifact(stem, program):
                    out.skipped.append((str(full), f"sidecar of {stem}"))
                    continue
                if _is_artifact(name, program) or suffix == program:
                    seen_files.add(real)
                    out.inputs.extend(load_input_file(full, grammar=grammar))
                else:
                    out.skipped.append((str(full), f"not a fuzz artifact or {program} file"))
    return out


def findings_of_other_builds(paths: Sequence[str], key: str, binary: str, *, exclude: Iterable[str] = (),
                             others: Iterable[str] = ()) -> tuple[int, str, str] | None:
    """(how many, an example's record, the build it names) of the findings under ``paths``
    whose JSON record names another build than ``key`` (its binary ``binary``: for records
    older than the key), or None; findings of the kinds ``others`` are left out (another
    triage's: the crash triage skips wrong-code findings).  Triage never buckets another
    build's findings (issue 46: 150 ``mlir-opt-19`` findings bucketed by a stand-in triage)."""
    from harness.targets.folders import recorded_key

    excluded = {os.path.realpath(p) for p in exclude}
    skipped = set(others)
    real = os.path.realpath(binary)
    records: list[Path] = []
    for given in paths:
        p = Path(given)
        if p.is_file():
            records.extend(q for q in (p.with_name(p.name + ".json"), p.with_suffix(".json")) if q.is_file())
        elif p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = [d for d in dirs if not d.startswith(".")
                           and os.path.realpath(os.path.join(root, d)) not in excluded]
                records.extend(Path(root) / f for f in files if f.endswith(".json") and f.startswith(ARTIFACT_PREFIXES))
    found: list[tuple[str, str]] = []
    for record_path in sorted(set(records)):
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or not isinstance(record.get("target"), dict):
            continue
        if record.get("finding_kind") in skipped:
            continue
        recorded = recorded_key(record)
        if recorded is not None:
            if recorded != key:
                found.append((str(record_path), recorded))
            continue
        build = record["target"].get("build") or {}
        if build.get("binary") and os.path.realpath(build["binary"]) != real:
            found.append((str(record_path), build["binary"]))
    if not found:
        return None
    return len(found), found[0][0], found[0][1]
