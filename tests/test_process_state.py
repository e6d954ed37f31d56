"""No stale or leaked process-wide state in the core (issue 26, item 3): a grammar
file edited while the process runs is read again, and drawing, decoding or
ranking trees leaves the interpreter's recursion limit as it found it."""

from __future__ import annotations

import os
import sys

from harness.core.engine import generate
from harness.core.grammar import load_file
from harness.core.render import render


def test_edited_grammar_file_is_read_again(tmp_path):
    path = tmp_path / "g.py"
    path.write_text('GRAMMAR = {"<start>": ["first\\n"]}\n')
    first = load_file(str(path))
    assert load_file(str(path)) is first  # unchanged file: the cache serves it
    path.write_text('GRAMMAR = {"<start>": ["second version\\n"]}\n')
    stamp = os.stat(path).st_mtime_ns + 2_000_000_000
    os.utime(path, ns=(stamp, stamp))  # a later modification time, whatever the clock's resolution
    second = load_file(str(path))
    assert [render(t, second) for t in generate(second, "fast", 0, 1)] == ["second version\n"]
