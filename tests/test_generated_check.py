"""Generated programs satisfy every precondition and per-program convention.

The checker reads text and never imports the renderer, so this is an
independent check of the whole generation path.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.checker import check_text
from harness.core.engine import generate
from harness.core.grammar import default_grammar
from harness.core.render import render

G = default_grammar()


def assert_all_pass(programs) -> int:
    distinct = set(programs)
    for program in distinct:
        violations = check_text(render(program, G), conventions=True)
        assert violations == [], (program, [v.format("<generated>") for v in violations])
    return len(distinct)


@pytest.mark.slow
def test_thousands_of_fast_programs_pass_the_checker(samples):
    count = samples(3_000, 10_000)  # --full-samples: the 10,000
    assert assert_all_pass(generate(G, "fast", 77, count)) > count // 2


def test_fuzzingbook_programs_pass_the_checker():
    assert_all_pass(generate(G, "fuzzingbook", 78, 300))


def test_generate_stream_passes_loomfuzz_check():
    command = f"{sys.executable} -m harness.cli generate -n 300 --seed 5 | {sys.executable} -m harness.cli check --conventions -"
    result = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[:2000] + result.stderr[:2000]
    assert "300 programs" in result.stdout
