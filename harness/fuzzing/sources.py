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

__all__ = ["ProgramSource", "SourceError", "from_files", "from_generator", "numbered_pieces", "split_stream"]

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
    note: str | None = None  # one line for the user (how files were read back)


class _Rerenderer:
    """Program text -> the same program in the target's rendering: parsed back into
    its derivation tree by the grammar the command line names (no other),
    rendered in ``style``; None when the grammar does not parse it (it runs as
    written)."""

    def __init__(self, grammar, style: str) -> None:
        self.grammar = grammar
        self.style = style

    def __call__(self, text: str) -> str | None:
        from harness.core.parse import parse
        from harness.core.render import render

        if self.style not in self.grammar.renderings:
            return None
        parsed = parse(text, self.grammar)
        return render(parsed.tree, self.grammar, self.style) if parsed.ok else None


def numbered_pieces(text: str) -> list[tuple[int, str]]:
    """(line number of its first line, text) of every piece of a ``// -----``-separated
    stream, blank ones included."""
    pieces, start, line = [], 0, 1
    for separator in _SEPARATOR.finditer(text):
        pieces.append((line, text[start:separator.start()]))
        line += text.count("\n", start, separator.end())
        start = separator.end()
    pieces.append((line, text[start:]))
    return pieces


def split_stream(text: str) -> list[str]:
    """The programs of a ``// -----``-separated stream (blank pieces dropped when
    there are several); a text without separator is one program."""
    pieces = [piece for _, piece in numbered_pieces(text)]
    if len(pieces) == 1:
        return pieces
    return [p for p in pieces if p.strip()]


def from_files(paths: Sequence[str], stdin=None, *, grammar=None, style: str | None = None
               ) -> ProgramSource:
    """Programs of ``.mlir`` files (each one program or a ``// -----`` stream),
    folders (their ``.mlir`` files, recursively, sorted; the grammar's suffix,
    :func:`harness.contract.program_suffix`) and ``-`` (stdin, a stream).

    With ``grammar`` and ``style`` (the target's rendering), each program is
    read back into its derivation tree and rendered in ``style``: a corpus
    written in the canonical rendering runs against ``mlir-opt`` (oracle) and
    the other way round.  A program the grammar does not parse runs as written."""
    from harness.contract import program_suffix

    rerender = _Rerenderer(grammar, style) if grammar is not None and style else None
    suffix = program_suffix(grammar)
    rendered = 0
    programs: list[str] = []
    origins: list[str] = []
    digest = hashlib.sha256()
    for given in paths:
        if given == "-":
            files: list[tuple[str, Callable[[], str]]] = [("<stdin>", (stdin or sys.stdin).read)]
        else:
            p = Path(given)
            if p.is_dir():
                found = sorted(f for f in p.rglob(f"*{suffix}")
                               if f.is_file() and not any(part.startswith(".") for part in
                                                          f.relative_to(p).parts))
                if not found:
                    raise SourceError(f"{given}: no {suffix} file in this folder")
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
                digest.update(hashlib.sha256(piece.encode("utf-8")).digest())
                text = rerender(piece) if rerender is not None else None
                if text is not None:
                    rendered += 1
                programs.append(piece if text is None else text)
                origins.append(name if len(pieces) == 1 else f"{name}#{k}")
    note = None
    if rerender is not None:
        note = (f"{rendered:,} of {len(programs):,} programs read back as programs of a grammar and "
                f"rendered in the target's {style} rendering; {len(programs) - rendered:,} run as written")
    return ProgramSource(
        count=len(programs),
        program_at=programs.__getitem__,
        origin_of=origins.__getitem__,
        identity=f"files sha256={digest.hexdigest()}" + (f" render={style}" if rerender else ""),
        note=note,
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
