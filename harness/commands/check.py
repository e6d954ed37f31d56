"""``loomfuzz check FILE...``: check programs against the spec's preconditions.

With ``--grammar FILE`` the programs are held to that grammar's contract: by
the checker the ``grammars`` registry attaches to it (``CONTRACT_CHECKERS``),
or, for a grammar without one, by the grammar itself: each program must be
the text of one of its derivation trees (in any of its renderings), else
``FILE:LINE: not a program of the grammar: why``.

Each FILE (``-`` for stdin) holds one program, or several separated by lines
``// -----`` (mlir-opt's ``--split-input-file`` convention); each is checked
on its own, with line numbers relative to the whole file.  Violations go to
stdout as ``FILE:LINE:COL: P<n>: what is wrong``.

Exit status: 0 when every program holds, 1 when any violation was found, 2
when a file could not be read (the other files are still checked).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

SPLIT_MARKER = "// -----"


EXAMPLES = (
    ("loomfuzz check corpus/*.mlir", "all 24 preconditions hold? one line per violation"),
    ("loomfuzz generate -n 100 | loomfuzz check -", "a stream on stdin"),
    ("loomfuzz check --profile edge edge/*.mlir", "edge programs: check names what they break"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    if parser.description is None:
        parser.description = "Check programs against the spec's preconditions P1-P24."
    from harness.commands import with_examples

    with_examples(parser, EXAMPLES)
    parser.add_argument("files", nargs="+", metavar="FILE", help="program file(s); '-' reads stdin")
    parser.add_argument(
        "--conventions",
        action="store_true",
        help="also check the default profile's sampling conventions (C1-C8, C14, C19, C20, C22)",
    )
    from harness.core.grammar import profile_names

    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--grammar",
        metavar="FILE",
        help="a grammar file: its programs are held to its contract's checker or, when it has "
        "none, each must parse as one of the grammar's programs",
    )
    source.add_argument(
        "--profile",
        choices=sorted(profile_names()),
        default=None,
        help="the profile the programs come from: conventions adds its sampling conventions "
        "(as --conventions); widths is held to P1-P24 but the P22 and P23 it leaves on purpose; "
        "the others are held to P1-P24 (edge and break leave them on purpose: check names what "
        "they break)",
    )


def split_programs(text: str) -> list[tuple[int, str]]:
    """(line offset, text) of each ``// -----``-separated program in ``text``.

    A blank chunk after a trailing marker is not a program and is dropped.
    """
    chunks: list[tuple[int, str]] = []
    start, current = 0, []
    for i, line in enumerate(text.split("\n")):
        if line.strip() == SPLIT_MARKER:
            chunks.append((start, "\n".join(current)))
            start, current = i + 1, []
        else:
            current.append(line)
    last = "\n".join(current)
    if not chunks or last.strip():
        chunks.append((start, last))
    return chunks


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _read(name: str) -> str:
    if name == "-":
        data = (
            sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        )
    else:
        with open(name, "rb") as handle:
            data = handle.read()
    return data.decode("utf-8", errors="replace")


@dataclasses.dataclass
class _Tally:
    errors: int = 0  # files that could not be read
    files: int = 0
    programs: int = 0


def _programs(names: list[str], tally: _Tally):
    """(shown name, line offset, text) of every program of the files, counted in ``tally``;
    an unreadable file is one line on stderr."""
    for name in names:
        shown = "<stdin>" if name == "-" else name
        try:
            text = _read(name)
        except OSError as exc:
            print(f"loomfuzz check: error: {shown}: {exc.strerror or exc}", file=sys.stderr)
            tally.errors += 1
            continue
        tally.files += 1
        for offset, chunk in split_programs(text):
            tally.programs += 1
            yield shown, offset, chunk


def _recognize(args: argparse.Namespace, grammar) -> int:
    """``check --grammar FILE`` for a grammar whose contract has no checker: the grammar
    is the only judge (each program must parse)."""
    from harness.core.parse import parse

    tally, rejected = _Tally(), 0
    for shown, offset, chunk in _programs(args.files, tally):
        parsed = parse(chunk, grammar)
        if not parsed.ok:
            print(f"{shown}:{offset + 1}: not a program of the grammar: {parsed.reason}")
            rejected += 1
    sys.stdout.flush()
    if rejected:
        print(f"loomfuzz check: {_plural(rejected, 'program')} of {tally.programs} not in the grammar",
              file=sys.stderr)
    elif tally.files:
        print(f"checked {_plural(tally.programs, 'program')} in {_plural(tally.files, 'file')}: all are "
              f"programs of the grammar (it has no contract checker)")
    return 2 if tally.errors else (1 if rejected else 0)


def run(args: argparse.Namespace) -> int:
    from harness.checker import PRECONDITION_COUNT, check_text

    from harness.contract import contract_checker, left_preconditions, load_grammar

    left: tuple[str, ...] = ()
    if getattr(args, "grammar", None):
        grammar = load_grammar(args.grammar)
        if contract_checker(grammar) is None:
            return _recognize(args, grammar)
        left = left_preconditions(grammar)
    elif getattr(args, "profile", None) not in (None, "conventions"):
        left = left_preconditions(load_grammar(profile=args.profile))

    conventions = bool(getattr(args, "conventions", False)) or getattr(args, "profile", None) == "conventions"
    tally, violations = _Tally(), 0
    for shown, offset, chunk in _programs(args.files, tally):
        for v in check_text(chunk, conventions=conventions):
            if v.rule in left:  # the contract leaves it on purpose
                continue
            print(dataclasses.replace(v, line=v.line + offset).format(shown))
            violations += 1
    sys.stdout.flush()
    what = (f"all {PRECONDITION_COUNT} preconditions" if not left else
            f"the preconditions but {', '.join(left)} (left on purpose)") + (
        " and the sampling conventions" if conventions else ""
    )
    if violations:
        print(
            f"loomfuzz check: {_plural(violations, 'violation')} in {_plural(tally.programs, 'program')}",
            file=sys.stderr,
        )
    elif tally.files:
        print(f"checked {_plural(tally.programs, 'program')} in {_plural(tally.files, 'file')}: {what} hold")
    if tally.errors:
        return 2
    return 1 if violations else 0
