"""Grammar coverage of a corpus: which alternatives (k = 1) and parent/child
alternative pairs (k = 2) its programs reach (:mod:`harness.core.features`).

A corpus is any mix of fuzz inputs (raw bytes: every byte string decodes to a
program, :func:`harness.core.codec.decode`) and program files (``.mlir``, or
the grammar's ``SUFFIX``: :func:`harness.contract.program_suffix`; parsed back
into trees, :func:`harness.core.parse.parse`; a file may hold several
programs separated by ``// -----``).  A text that is not a program of the
grammar is not guessed at: it is counted and listed as skipped, with the
parser's reason.

In a folder (read recursively, hidden entries skipped as libFuzzer does),
program files are programs and files without a suffix are fuzz inputs
(libFuzzer names corpus entries by SHA-1 and findings ``crash-<sha1>``);
other files (``.json`` sidecars, journals, ``stats.csv``) are not inputs.  A
file named on its own is read by its suffix: the program suffix is text, anything
else is fuzz bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from harness.contract import program_suffix
from harness.core.features import CoverageReport, KPathFeatures

__all__ = ["CorpusCoverage", "corpus_coverage", "corpus_files"]


@dataclass
class CorpusCoverage:
    report: CoverageReport
    fuzz_inputs: int = 0  # byte files decoded
    programs: int = 0  # programs parsed from .mlir files
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file or file#k, reason)

    @property
    def trees(self) -> int:
        return self.fuzz_inputs + self.programs

    def as_json(self) -> dict:
        return {"fuzz_inputs": self.fuzz_inputs, "programs": self.programs,
                "skipped": [{"file": name, "reason": why} for name, why in self.skipped],
                **self.report.as_json()}


def corpus_files(paths: Iterable[str | Path], suffix: str) -> Iterator[tuple[Path, bool]]:
    """(file, is program text) for every input under ``paths``: a program's file ends in
    ``suffix`` (the grammar's, :func:`harness.contract.program_suffix`); a missing path
    raises FileNotFoundError naming it."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.startswith("."):
                        continue
                    own = Path(name).suffix
                    if own == suffix or not own:
                        yield Path(root) / name, own == suffix
        elif path.exists():
            yield path, path.suffix == suffix
        else:
            raise FileNotFoundError(2, "no such file or folder", str(given))


def corpus_coverage(paths: Iterable[str | Path], grammar, features: KPathFeatures | None = None
                    ) -> CorpusCoverage:
    """The k = 1 and k = 2 coverage of every program under ``paths``."""
    from harness.core.codec import decode
    from harness.core.parse import parse, split_programs

    features = features or KPathFeatures(grammar)
    covered: set[int] = set()
    result = CorpusCoverage(report=features.report(covered))
    for path, is_text in corpus_files(paths, program_suffix(grammar)):
        try:
            data = path.read_bytes()
        except OSError as error:
            result.skipped.append((str(path), f"cannot read: {error.strerror or error}"))
            continue
        if not is_text:
            covered |= features.of(decode(data, grammar))
            result.fuzz_inputs += 1
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            result.skipped.append((str(path), f"not UTF-8 text (byte {error.start})"))
            continue
        pieces = split_programs(text)
        if len(pieces) > 1:
            pieces = [piece for piece in pieces if piece.strip()]
        for k, piece in enumerate(pieces, 1):
            name = str(path) if len(pieces) == 1 else f"{path}#{k}"
            parsed = parse(piece, grammar)
            if parsed.tree is None:
                result.skipped.append((name, parsed.reason))
                continue
            covered |= features.of(parsed.tree)
            result.programs += 1
    result.report = features.report(covered)
    return result


def fuzz_corpus_coverage(folder: str | Path, grammar) -> CoverageReport:
    """The coverage of a libFuzzer corpus folder: every regular file is a fuzz input,
    whatever its name (as libFuzzer reads it), decoded with ``grammar``."""
    from harness.core.codec import decode

    features = KPathFeatures(grammar)
    covered: set[int] = set()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            path = Path(root) / name
            try:
                if path.is_file():
                    covered |= features.of(decode(path.read_bytes(), grammar))
            except OSError:
                continue  # the campaign already warned about unreadable corpus files
    return features.report(covered)
