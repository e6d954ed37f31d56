"""``loomfuzz decode``: the program each fuzz input (raw bytes) stands for."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="FILE", help="fuzz inputs (crash-*, corpus files)")
    parser.add_argument("--render", choices=("canonical", "oracle"), default="canonical")
    parser.add_argument("--tree", action="store_true", help="print the shape tree instead of the text")


def run(args: argparse.Namespace) -> int:
    from harness.core.codec import decode
    from harness.core.render import SPLIT_MARKER, render
    from harness.core.tree import describe

    status = 0
    for index, name in enumerate(args.inputs):
        try:
            data = Path(name).read_bytes()
        except OSError as error:
            print(f"loomfuzz decode: error: {name}: {error.strerror or error}", file=sys.stderr)
            status = 1
            continue
        program = decode(data)
        if index:
            sys.stdout.write(SPLIT_MARKER)
        if args.tree:
            print(f"{name}: {describe(program)}")
        else:
            sys.stdout.write(f"// {name}: {describe(program)}\n" + render(program, args.render))
    return status
