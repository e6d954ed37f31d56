#!/usr/bin/env python3
"""The documentation's long steps, run at the size the pages give.

    python benchmarks/bench_docs.py [--page tutorial.md] [--all] [--keep DIR]

tests/test_docs_run.py runs every ```console block of the tutorial and the
how-to guides but those marked ``<!-- test: benchmark -->`` (a one-minute
campaign, a 30,000-program sweep). This runs each page that has such a step
whole, in order, in a scratch folder of its own (the benchmark steps included,
so a later step sees what they wrote), checks every command's output against
the page as the suite does (tests/doc_blocks.py), and prints each command's
wall time. ``--all`` runs every page, not only those with a benchmark step.
Exit 1 when a page no longer prints what it says.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import doc_blocks  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--page", action="append", help="a page under docs/ (repeatable)")
    parser.add_argument("--all", action="store_true", help="every page, not only those with a benchmark step")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    args = parser.parse_args()
    pages = [doc_blocks.DOCS / p for p in args.page] if args.page else doc_blocks.pages()
    failed = False
    for page in pages:
        blocks = doc_blocks.blocks(page)
        if not args.all and not args.page and not any(b.benchmark for b in blocks):
            continue
        with tempfile.TemporaryDirectory(prefix="bench-docs-") as scratch:
            folder = doc_blocks.scratch_folder((args.keep or Path(scratch)) / page.stem)
            for block in blocks:
                if block.skip is not None:
                    print(f"{block.name}: skipped ({block.skip})")
                    continue
                for command in block.commands:
                    single = doc_blocks.Block(block.page, block.line, [command], None, block.benchmark,
                                              block.exit_status, block.factor)
                    began = time.monotonic()
                    problems = doc_blocks.check_block(single, folder)
                    mark = "benchmark " if block.benchmark else ""
                    print(f"{block.name}: {mark}{time.monotonic() - began:7.1f} s  $ {command.text[:100]}")
                    for problem in problems:
                        failed = True
                        print(problem, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
