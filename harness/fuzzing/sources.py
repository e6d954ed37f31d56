"""Indexed program sources for sweeps: files and streams, or the generator.

A :class:`ProgramSource` is what :func:`harness.fuzzing.sweep.run_sweep`
needs: how many programs, the text of program ``i``, where it came from, and
an identity string for the sweep's journal (the same identity means the same
text for every index).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

__all__ = ["ProgramSource", "SourceError", "from_files", "from_generator", "split_stream"]

#: A line where MLIR's --split-input-file cuts its input.
_SEPARATOR = re.compile(r"^// -----[^\n]*(?:\n|\Z)", re.MULTILINE)


class SourceError(Exception):
    """A program source cannot be read; one line naming the file."""


@dataclass(frozen=True)
class ProgramSource:
    count: int
    program_at: Callable[[int], str]
    origin_of: Callable[[int], str]
    identity: str


def split_stream(text: str) -> list[str]:
    """The programs of a ``// -----``-separated stream (blank pieces dropped when
    there are several); a text without separator is one program."""
    pieces = _SEPARATOR.split(text)
    if len(pieces) == 1:
        return pieces
    return [p for p in pieces if p.strip()]


def from_files(paths: Sequence[str], stdin=None) -> ProgramSource:
    """Programs of ``.mlir`` files (each one program or a ``// -----`` stream),
    folders (their ``.mlir`` files, recursively, sorted) and ``-`` (stdin, a stream)."""
    programs: list[str] = []
    origins: list[str] = []
    digest = hashlib.sha256()
    for given in paths:
        if given == "-":
            files: list[tuple[str, Callable[[], str]]] = [("<stdin>", (stdin or sys.stdin).read)]
        else:
            p = Path(given)
            if p.is_dir():
                found = sorted(f for f in p.rglob("*.mlir")
                               if f.is_file() and not any(part.startswith(".") for part in
                                                          f.relative_to(p).parts))
                if not found:
                    raise SourceError(f"{given}: no .mlir file in this folder")
                files = [(str(f), f.read_text) for f in found]
            elif p.is_file():
                files = [(given, p.read_text)]
            else:
                raise SourceError(f"{given}: no such file or folder")
        for name, read in files:
            try:
                text = read()
            except (OSError, UnicodeDecodeError) as error:
                reason = getattr(error, "strerror", None) or error
                raise SourceError(f"{name}: cannot read: {reason}") from None
            pieces = split_stream(text)
            if not any(piece.strip() for piece in pieces):
                raise SourceError(f"{name}: no program in it (empty)")
            for k, piece in enumerate(pieces, 1):
                programs.append(piece)
                origins.append(name if len(pieces) == 1 else f"{name}#{k}")
                digest.update(hashlib.sha256(piece.encode("utf-8")).digest())
    return ProgramSource(
        count=len(programs),
        program_at=programs.__getitem__,
        origin_of=origins.__getitem__,
        identity=f"files sha256={digest.hexdigest()}",
    )


class _Sequential:
    """Random access over a generator that is cheap to replay: program ``i``
    is drawn by advancing (or restarting) one iterator; only that one is rendered."""

    def __init__(self, make: Callable[[], Iterator], render: Callable[[object], str]) -> None:
        self._make = make
        self._render = render
        self._iterator = make()
        self._next = 0

    def __call__(self, index: int) -> str:
        if index < self._next:
            self._iterator, self._next = self._make(), 0
        if index > self._next:
            next(itertools.islice(self._iterator, index - self._next, index - self._next), None)
        self._next = index + 1
        return self._render(next(self._iterator))


def from_generator(grammar, engine: str, seed: int, count: int, render_style: str) -> ProgramSource:
    """``loomfuzz generate``'s programs of ``grammar``: ``count`` draws of ``engine``
    from ``seed``, rendered for the target (``canonical`` or ``oracle``)."""
    from harness.core.engine import generate
    from harness.core.render import renderer

    render = renderer(grammar, render_style).render
    program_at = _Sequential(lambda: iter(generate(grammar, engine, seed, count)), render)
    return ProgramSource(
        count=count,
        program_at=program_at,
        origin_of=lambda i: f"generate --engine {engine} --seed {seed}, program {i}",
        identity=(f"generate grammar={grammar.source} engine={engine} seed={seed} count={count} "
                  f"render={render_style}"),
    )
