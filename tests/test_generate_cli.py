"""``loomfuzz generate`` as a user runs it: a real subprocess of the console script."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.core.engine import generate
from harness.core.grammar import default_grammar
from harness.core.render import SPLIT_MARKER, render

G = default_grammar()

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]


def loomfuzz(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*LOOMFUZZ, *args], capture_output=True, text=True, timeout=120, **kwargs)


def test_stdout_stream_is_reproducible_and_split():
    first = loomfuzz("generate", "-n", "50", "--seed", "3")
    second = loomfuzz("generate", "-n", "50", "--seed", "3")
    other = loomfuzz("generate", "-n", "50", "--seed", "4")
    assert first.returncode == 0 and first.stdout == second.stdout != other.stdout
    chunks = first.stdout.split(SPLIT_MARKER)
    assert chunks == [render(p, G) for p in generate(G, "fast", 3, 50)]


def test_folder_output_has_stable_sortable_names(tmp_path):
    result = loomfuzz("generate", "-n", "12", "--seed", "8", "--render", "oracle", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"program-{i:06d}.mlir" for i in range(12)]
    expected = [render(p, G, "oracle") for p in generate(G, "fast", 8, 12)]
    assert [(tmp_path / n).read_text() for n in names] == expected


def test_stats_table_lists_every_choice(tmp_path):
    result = loomfuzz("generate", "-n", "400", "--stats", "-o", str(tmp_path), "--no-progress")
    assert result.returncode == 0
    for label in ("<threads>", "<top-call>", "icall", "<sites>", "<site>", "for", "<region>",
                  "freeze", "<call-region>", "llvm", "0.0909", "chi2 p"):
        assert label in result.stdout
    assert result.stdout.startswith("400 programs")


def test_fuzzingbook_engine_through_the_cli():
    result = loomfuzz("generate", "-n", "5", "--engine", "fuzzingbook", "--seed", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("module {") == 5


@pytest.mark.parametrize(
    "args, message",
    [
        (["-n", "-3"], "must be 0 or more"),
        (["-n", "many"], "not a whole number"),
        (["--engine", "afl"], "invalid choice: 'afl'"),
        (["--render", "pretty"], "--render pretty: the grammar has the renderings canonical, oracle"),
    ],
)
def test_bad_arguments_are_one_line_errors(args, message):
    result = loomfuzz("generate", *args)
    assert result.returncode == 2
    assert message in result.stderr.splitlines()[-1]


def test_unwritable_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = loomfuzz("generate", "-n", "3", "-o", str(blocker / "corpus"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"loomfuzz generate: error: cannot write to {blocker / 'corpus'}: Not a directory"
    ]


def test_zero_programs_is_fine():
    result = loomfuzz("generate", "-n", "0")
    assert result.returncode == 0 and result.stdout == ""
