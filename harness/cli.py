"""``loomfuzz``: a thin dispatcher; each subcommand lives in harness/commands/.

A command module offers ``configure(parser)`` and ``run(args) -> int``.  Only
the chosen command's module is imported, so ``loomfuzz generate`` starts fast.

No parser takes an abbreviation (``allow_abbrev=False``: ``--loom-op`` is not
``--loom-opt``), and an option the command does not have is one line naming the
command's closest option (:func:`unknown_options`), not the top-level usage.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from typing import Sequence

COMMANDS = {
    "generate": "expand the grammar into programs (a corpus, or a stream for mlir-opt)",
    "check": "check program files against the preconditions P1-P24",
    "decode": "print the program each fuzz input (bytes) stands for",
    "fuzz": "run a coverage-guided atheris campaign against loom-opt or mlir-opt",
    "triage": "reproduce, bucket, minimize and report crashes",
    "run": "run many programs (files, a stream or generated) against a target in batches",
    "plot": "draw campaigns' stats.csv as PNG charts with an index.html",
    "enumerate": "count, write or run every program of the grammar by its index (exhaustive sweeps)",
    "eval": "print what each program's exec rendering prints, by the reference interpreter",
    "coverage": "grammar coverage (k-path, k=1 and 2) of a corpus of fuzz inputs and .mlir files; --edges: edge-value operand coverage",
    "merge": "merge the shard folders of a sweep or campaign into one summary",
}


def _parser(selected: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loomfuzz", description="Grammar-based fuzzer for loom's MLIR optimizer.", allow_abbrev=False,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, summary in COMMANDS.items():
        sub = subparsers.add_parser(name, help=summary, description=summary, allow_abbrev=False)
        if name == selected:
            importlib.import_module(f"harness.commands.{name}").configure(sub)
    return parser


def command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of command ``name`` inside ``loomfuzz``'s."""
    (subparsers,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices[name]


def unknown_options(command: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The one-line error for arguments ``command`` does not take, with the closest option of
    its own for each mistyped one (``--loomopt``: did you mean --loom-opt?)."""
    options = [o for action in command._actions for o in action.option_strings]
    parts = []
    for extra in extras:
        name = extra.split("=", 1)[0]
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.75) if name.startswith("-") else []
        if close:
            parts.append(f"{extra} (did you mean {close[0]}?)")
        elif name[:1] == "-" and name[1:2] != "-" and command.prog.endswith(" fuzz"):
            parts.append(f"{extra} (a libFuzzer flag? they go after --)")
        else:
            parts.append(extra)
    what = "option" if all(e.startswith("-") for e in extras) else "argument"
    return (f"{command.prog}: error: unknown {what}{'s' if len(extras) > 1 else ''}: {', '.join(parts)}; "
            f"see {command.prog} --help")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in argv if not a.startswith("-")), None)
    parser = _parser(selected if selected in COMMANDS else None)
    args, extras = parser.parse_known_args(argv)
    if extras:  # the command's own closest options, not loomfuzz's usage
        print(unknown_options(command_parser(parser, args.command), extras), file=sys.stderr)
        return 2
    args.argv = tuple(argv)  # as typed: a campaign's summary names the command that resumes it
    module = importlib.import_module(f"harness.commands.{args.command}")
    from harness.commands import TargetOptionsConflict, settle_target_options
    from harness.core.compiled import GrammarError
    from harness.run.stop_requests import interrupt_handlers
    from harness.run.probe import PipelineRefused

    try:
        settle_target_options(args)
    except TargetOptionsConflict as error:
        print(f"loomfuzz {args.command}: error: {error}", file=sys.stderr)
        return 2
    try:
        with interrupt_handlers():  # SIGINT/SIGTERM/SIGHUP: runs killed, Interrupted raised
            return module.run(args)
    except (GrammarError, PipelineRefused) as error:  # a bad grammar or pipeline: one line, exit 2
        print(f"loomfuzz {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:
        print(f"loomfuzz {args.command}: interrupted", file=sys.stderr)
        return getattr(error, "exit_status", 130)
    except BrokenPipeError:
        # The reader went away (`loomfuzz generate | head`): not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
