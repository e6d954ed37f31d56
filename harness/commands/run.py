"""``loomfuzz run``: many programs against a target, in batches, resumable."""

from __future__ import annotations

import argparse
import sys

from harness.commands import (
    TargetError,
    add_grammar_arguments,
    add_sweep_arguments,
    add_target_arguments,
    grammar_from_args,
    sweep_command,
    sweep_target,
    whole_number,
)

EPILOG = """\
Programs: .mlir files (one program each, or a '// -----' stream), folders of
them, '-' for a stream on stdin; or, with no input, generate's programs
(-n/--seed/--engine), rendered for the target.  File programs are read back
into derivation trees by the grammar (--grammar/--profile, else the default
profile; no other) and rendered the way the target reads them (canonical for
loom-opt, oracle for mlir-opt); a file the grammar does not parse goes to the
target as it is written.

They run through --runner (default: the persistent driver where it is built,
else batches through the target's --split-input-file), --jobs at once; every
program gets the outcome it would get alone, and every finding is confirmed
by a run in a fresh process.  Each finding leaves
crash-<sha1 of the program text>.mlir and .json (whatever its kind) in
--artifacts, as fuzz does; `loomfuzz triage DIR` reads them.  The folder also
keeps the sweep's journal (sweep-<fingerprint>.jsonl): the same command run
again after an interruption (even kill -9) runs only what is left.

Before the first program the target runs once on a trivial module: a pass
pipeline or argument it refuses is one line and exit status 2.

Exit status: 0 no finding, 1 findings or an error, 2 the target refuses its
pipeline or arguments, 130 interrupted.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("inputs", nargs="*", metavar="INPUT",
                        help="program files (the grammar's SUFFIX, default .mlir), folders of them, or - (a '// -----' stream on stdin)")
    parser.add_argument("-n", "--count", type=whole_number(1),
                        help="with no INPUT: how many programs to generate (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="with no INPUT: generator seed (default 0)")
    parser.add_argument("--engine", choices=("fast", "fuzzingbook"), default="fast",
                        help="with no INPUT: generator engine (default fast)")
    add_target_arguments(parser)
    add_grammar_arguments(parser)
    add_sweep_arguments(parser)


def _error(message: str) -> int:
    print(f"loomfuzz run: error: {message}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    from harness.contract import program_suffix
    from harness.fuzzing.sources import SourceError, from_files, from_generator
    from harness.fuzzing.sweep import ShardError, parse_shard

    if args.inputs and args.count is not None:
        return _error("give INPUT files or -n/--count (programs to generate), not both")
    try:
        shard = parse_shard(args.shard) if args.shard else None
    except ShardError as error:
        return _error(str(error))
    grammar = grammar_from_args(args)  # a bad grammar: one line, exit 2 (harness.cli)
    try:
        target = sweep_target(args, grammar)
    except TargetError as error:
        return _error(str(error))
    try:
        if args.inputs:
            source = from_files(args.inputs, grammar=grammar, style=target.render)
        else:
            source = from_generator(grammar, args.engine, args.seed, args.count or 1000,
                                    target.render)
    except SourceError as error:
        return _error(str(error))
    if source.note:
        print(f"loomfuzz run: {source.note}", file=sys.stderr)
    return sweep_command(args, target, source.count, source.program_at, source=source.identity,
                         suffix=program_suffix(grammar), shard=shard, origin_of=source.origin_of)
