"""The ``// -----`` stream separator (issue 26, item 6): always a line of its own,
also after a program that does not end in a newline (it used to be glued to the
program's last line, ``x1// -----``, which ``--split-input-file`` and
``loomfuzz run -`` do not split).

Checked on the text, line by line, by nothing of the code that writes it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.engine import generate
from harness.core.grammar import default_grammar, load_file
from harness.core.render import render_stream, renderer

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]
MARKER = "// -----"

# Programs that end without a newline: "x1", "x2"; "y" adds an empty terminal at the end.
NO_NEWLINE = 'GRAMMAR = {"<start>": ["x<d>", "y<e>"], "<d>": ["1", "2"], "<e>": [""]}\n'


@pytest.fixture(scope="module")
def grammar_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("grammar") / "no_newline.py"
    path.write_text(NO_NEWLINE)
    return path


def programs_of(stream: str) -> list[str]:
    """The programs of a stream whose every separator is a line of its own; fails
    on a separator glued to a program line."""
    lines = stream.splitlines()
    assert all(line == MARKER or MARKER not in line for line in lines), stream
    programs, current = [], []
    for line in lines:
        if line == MARKER:
            programs.append("\n".join(current))
            current = []
        else:
            current.append(line)
    return programs + ["\n".join(current)]


def loomfuzz(*args: str) -> str:
    result = subprocess.run([*LOOMFUZZ, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_enumerate_stream(grammar_file):
    assert programs_of(loomfuzz("enumerate", "--grammar", str(grammar_file), "-o", "-")) == ["x1", "x2", "y"]


def test_generate_stream(grammar_file):
    out = loomfuzz("generate", "--grammar", str(grammar_file), "-n", "40", "--seed", "5", "-o", "-")
    programs = programs_of(out)
    assert len(programs) == 40 and set(programs) == {"x1", "x2", "y"}


def test_decode_stream(grammar_file, tmp_path):
    inputs = []
    for k, data in enumerate([b"\x00\x00", b"\xff\xff", b"\x00\xff"]):
        inputs.append(tmp_path / f"input-{k}")
        inputs[-1].write_bytes(data)
    out = loomfuzz("decode", "--grammar", str(grammar_file), *map(str, inputs))
    programs = programs_of(out)
    assert len(programs) == 3
    assert all(p.splitlines()[0].startswith(f"// {name}: ") for p, name in zip(programs, inputs))


def test_render_stream_between_batches(grammar_file):
    grammar = load_file(str(grammar_file))
    trees = list(generate(grammar, "fast", 2, 30))
    texts = [renderer(grammar).render(t) for t in trees]
    for batch in (1, 7, 2000):  # the separator between batches and inside one
        assert programs_of("".join(render_stream(trees, grammar, batch=batch))) == texts


def test_programs_ending_in_newline_unchanged():
    """A program that ends in a newline gets the separator right after it, as before."""
    grammar = default_grammar()
    trees = list(generate(grammar, "fast", 4, 5))
    texts = [renderer(grammar).render(t) for t in trees]
    assert all(t.endswith("\n") for t in texts)
    assert "".join(render_stream(trees, grammar)) == (MARKER + "\n").join(texts)
