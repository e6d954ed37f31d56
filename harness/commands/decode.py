"""``loomfuzz decode``: the program each fuzz input (raw bytes) stands for."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands import add_grammar_arguments, grammar_from_args, with_examples


EXAMPLES = (
    ("loomfuzz decode artifacts/crash-0a1b...", "the program a finding's input stands for"),
    ("loomfuzz decode --tree fuzz-corpus/*", "the derivation's choices of each corpus input"),
    ("loomfuzz decode --render oracle artifacts/crash-0a1b... | mlir-opt-22 --allow-unregistered-dialect",
     "the same program, as upstream mlir-opt-22 reads it"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    with_examples(parser, EXAMPLES)
    parser.add_argument("inputs", nargs="+", metavar="FILE", help="fuzz inputs (crash-*, corpus files)")
    parser.add_argument("--render", default="canonical", metavar="STYLE",
                        help="a rendering of the grammar (canonical, oracle for the built-in ones, or "
                             "exec for a grammar in the P1-P24 contract)")
    parser.add_argument("--tree", action="store_true",
                        help="print the derivation's choices instead of the text")
    add_grammar_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from harness.core.codec import decode
    from harness.core.render import marker_after
    from harness.core.tree import describe
    from harness.execute.exec_rendering import program_renderer, style_error

    grammar = grammar_from_args(args)
    problem = style_error(grammar, args.render)
    if problem:
        print(f"loomfuzz decode: error: {problem}", file=sys.stderr)
        return 2
    render = program_renderer(grammar, args.render)
    status = 0
    previous = None  # the text written for the last input decoded
    for name in args.inputs:
        try:
            data = Path(name).read_bytes()
        except OSError as error:
            print(f"loomfuzz decode: error: {name}: {error.strerror or error}", file=sys.stderr)
            status = 1
            continue
        tree = decode(data, grammar)
        if previous is not None:
            sys.stdout.write(marker_after(previous))
        if args.tree:
            previous = f"{name}: {describe(grammar, tree)}\n"
        else:
            previous = f"// {name}: {describe(grammar, tree)}\n" + render(tree)
        sys.stdout.write(previous)
    return status
