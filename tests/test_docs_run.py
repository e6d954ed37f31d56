"""The tutorial and the how-to guides run: each page's ```console blocks, in
order, in a scratch folder of the page's own, every command's output checked
against what the page prints (the convention: tests/doc_blocks.py and
tests/README.md). A page that has gone stale fails here, naming its line."""

from __future__ import annotations

import pytest

from tests import doc_blocks

PAGES = doc_blocks.pages()


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_runs_as_written(page, tmp_path):
    folder = doc_blocks.scratch_folder(tmp_path / "work")
    problems = []
    for block in doc_blocks.blocks(page):
        if block.skip is None and not block.benchmark:
            problems += doc_blocks.check_block(block, folder)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_page_has_commands_that_run(page):
    """No page is left out by skipping all of it: each has a block the suite runs."""
    runnable = [b for b in doc_blocks.blocks(page) if b.skip is None and not b.benchmark and b.commands]
    assert runnable, f"{page.name}: no ```console block the suite runs"


def test_convention_catches_a_stale_page():
    """The matcher is strict where the page is exact and lenient only where it says so."""
    output = "loomfuzz fuzz: summary\n  executions:  5621 (93.0/s over 60.4 s)\n  findings:    199 (crash: 199)\n"
    assert doc_blocks.mismatch(["  executions:  ~4,000 (~90/s over ~60 s)"], output) is None
    assert doc_blocks.mismatch(["  executions:  ~400 (~90/s over ~60 s)"], output)  # outside x3
    assert doc_blocks.mismatch(["  findings:    199 (crash: 199)"], output) is None
    assert doc_blocks.mismatch(["  findings:    173 (crash: 173)"], output)  # an exact figure
    assert doc_blocks.mismatch(["loomfuzz fuzz: summary", "...", "  findings:    199 ..."], output) is None
    # consecutive unless elided, and in order
    assert doc_blocks.mismatch(["loomfuzz fuzz: summary", "  findings:    199 (crash: 199)"], output)
    assert doc_blocks.mismatch(["  findings:    ...", "...", "loomfuzz fuzz: summary"], output)
    assert doc_blocks.mismatch(["in artifacts/loom-opt-210fb26a0d/fuzz"],
                               "in artifacts/loom-opt-f6434707e9/fuzz") is None


def test_blocks_read_their_options(tmp_path):
    page = doc_blocks.DOCS / "scratch-test.md"
    text = ("<!-- test: skip needs a GPU -->\n```console\n$ a \\\n   --b\nout\n```\n\n"
            "<!-- test: benchmark; exit 2; approx 1.5 -->\n```console\n$ c\n```\n")
    page.write_text(text)
    try:
        first, second = doc_blocks.blocks(page)
    finally:
        page.unlink()
    assert first.skip == "needs a GPU" and first.commands[0].text == "a  --b"
    assert first.commands[0].expected == ["out"]
    assert second.benchmark and second.exit_status == 2 and second.factor == 1.5
