"""``loomfuzz coverage``: which alternatives and parent/child pairs of the grammar a corpus reaches."""

from __future__ import annotations

import argparse
import json
import sys

from harness.commands import add_grammar_arguments, grammar_from_args

EPILOG = """\
CORPUS: fuzz inputs (raw bytes, decoded as the fuzz target does), .mlir files
(parsed back into programs of the grammar; '// -----' streams too) and
folders of them (.mlir files and files without a suffix, recursively).  A text
that is not a program of the grammar is skipped and listed.

k=1: every alternative of every nonterminal with a choice; k=2: every
alternative under every alternative of its nearest enclosing choice.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("corpus", nargs="+", metavar="CORPUS", help="fuzz inputs, program files (the grammar's SUFFIX, default .mlir), folders")
    add_grammar_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    from harness.fuzzing.grammar_coverage import corpus_coverage

    grammar = grammar_from_args(args)
    try:
        result = corpus_coverage(args.corpus, grammar)
    except FileNotFoundError as error:
        print(f"loomfuzz coverage: error: {error.filename}: no such file or folder", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
        return 0
    skipped = f", {len(result.skipped)} skipped" if result.skipped else ""
    print(f"loomfuzz coverage: {result.trees} programs ({result.fuzz_inputs} fuzz inputs, "
          f"{result.programs} from program text files){skipped}")
    print(result.report.summary())
    for line in result.report.lines():
        print(line)
    for name, why in result.skipped:
        print(f"skipped {name}: {why}")
    return 0
