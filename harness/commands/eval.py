"""``loomfuzz eval FILE...``: what each program's exec rendering prints, by the reference interpreter.

Each FILE holds one P1-P24 program in the canonical rendering, or several
separated by ``// -----`` lines (``loomfuzz generate`` output).  The output is
exactly what ``main`` of ``--render exec`` prints under mlir-runner-22, one
program after another, separated by ``// -----`` lines.
"""

from __future__ import annotations

import argparse
import sys


EXAMPLES = (
    ("loomfuzz eval program.mlir", "what its exec rendering prints, without running anything"),
    ("loomfuzz generate -n 20 | loomfuzz eval -", "the values of 20 programs, one after another"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    from harness.commands import with_examples

    with_examples(parser, EXAMPLES)
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="programs in the canonical rendering (several per file separated by "
                             "'// -----' lines); - reads stdin")


def run(args: argparse.Namespace) -> int:
    import re

    from harness.execute.interpret import InterpretError, interpret_program
    from harness.fuzzing.sources import numbered_pieces

    status, first = 0, True
    for path in args.files:
        try:
            text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as error:
            print(f"loomfuzz eval: error: {path}: {getattr(error, 'strerror', None) or error}", file=sys.stderr)
            status = 2
            continue
        if "// loomfuzz-exec" in text:
            print(f"loomfuzz eval: error: {path}: an exec module; give the program it was rendered from",
                  file=sys.stderr)
            status = 2
            continue
        for offset, program in [(n, t) for n, t in numbered_pieces(text) if t.strip()]:
            try:
                output = interpret_program(program)
            except InterpretError as error:
                # line numbers in the file, not in the one program
                message = re.sub(r"^line (\d+)", lambda m: f"line {int(m.group(1)) + offset - 1}", str(error))
                print(f"loomfuzz eval: error: {path}: {message}", file=sys.stderr)
                status = 2
                continue
            sys.stdout.write(("" if first else "// -----\n") + output)
            first = False
    sys.stdout.flush()
    return status
