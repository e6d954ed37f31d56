"""A campaign's corpus folder: seeding an empty one, inspecting a given one, counting files.

* :func:`seed_corpus` fills an empty corpus folder with encoded programs
  that together cover every alternative of the grammar and every
  parent/child pair of choices (k-path coverage, :func:`seed_programs`);
* :func:`inspect_corpus` reads every corpus file once and reports those it
  cannot read, the empty ones and those that are not canonical encodings;
* :func:`count_files` counts the files as libFuzzer sees them (the campaign's
  statistics sample it every few seconds).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CorpusReport", "count_files", "inspect_corpus", "seed_corpus", "seed_programs"]


def seed_programs(grammar, count: int = 48, seed: int = 0, *, draws: int = 20_000,
                  patience: int = 300) -> list[bytes]:
    """Encoded programs for an empty corpus: trees drawn from the PCFG (``seed``),
    each kept when it adds a k-path feature not seen yet, until the grammar's
    features are covered, ``draws`` trees were tried or ``patience`` draws in a
    row added nothing (a wide grammar has features too rare to wait for: the
    fuzzer's mutations reach them); then more drawn trees up to ``count``."""
    from harness.core.codec import encode, nonempty
    from harness.core.features import KPathFeatures
    from harness.core.walk import random_trees

    features = KPathFeatures(grammar)
    covered: set[int] = set()
    out: list[bytes] = []
    seen: set[bytes] = set()
    last_new = 0
    for drawn, tree in enumerate(random_trees(grammar, seed)):
        exploring = len(covered) < len(features) and drawn < draws and drawn - last_new < patience
        if not exploring and len(out) >= count:
            break
        new = features.of(tree) - covered
        if not new and exploring:
            continue
        if new:
            last_new = drawn
        covered |= new
        data = nonempty(encode(tree, grammar), tree, grammar)  # libFuzzer skips empty files
        if data not in seen:
            seen.add(data)
            out.append(data)
    return out


def seed_corpus(corpus: Path, grammar, count: int = 48, seed: int = 0) -> int:
    """Write :func:`seed_programs` into ``corpus`` (named by SHA-1, as libFuzzer
    names its files); returns how many files were written."""
    corpus.mkdir(parents=True, exist_ok=True)
    written = 0
    for data in seed_programs(grammar, count, seed):
        path = corpus / hashlib.sha1(data).hexdigest()
        if not path.exists():
            path.write_bytes(data)
            written += 1
    return written


@dataclass
class CorpusReport:
    readable: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    empty: list[str] = field(default_factory=list)
    noncanonical: list[str] = field(default_factory=list)


def _corpus_entries(corpus: Path) -> list[Path]:
    entries = []
    for root, dirs, files in os.walk(corpus):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        entries.extend(Path(root) / f for f in sorted(files))
    return entries


def inspect_corpus(corpus: Path, grammar) -> CorpusReport:
    """Read every corpus file once: unreadable, empty and non-canonical ones."""
    from harness.core.codec import decode, encode, max_input_length

    limit = max_input_length(grammar)

    report = CorpusReport()
    for path in _corpus_entries(corpus):
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block: never open it
                report.unreadable.append((str(path), "not a regular file"))
                continue
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
        except OSError as error:
            report.unreadable.append((str(path), error.strerror or str(error)))
            continue
        if not data:
            report.empty.append(str(path))
            continue
        report.readable += 1
        if len(data) > limit or data.rstrip(b"\0") != encode(decode(data, grammar), grammar).rstrip(b"\0"):
            report.noncanonical.append(str(path))
    return report


def count_files(folder: Path) -> int:
    """Regular files under ``folder`` (hidden folders skipped, as libFuzzer does).
    ``os.scandir``: file types come with the listing, no stat per file (the
    statistics sampler counts the corpus every few seconds)."""
    if not folder.is_dir():
        return 0
    total, pending = 0, [folder]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.is_dir():
                        if not entry.is_symlink() and not entry.name.startswith("."):
                            pending.append(Path(entry.path))
                    elif entry.is_file():
                        total += 1
        except OSError:
            continue
    return total

