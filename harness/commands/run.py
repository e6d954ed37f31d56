"""``loomfuzz run``: many programs against a target, in batches, resumable."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Iterable

from harness.commands import (
    TargetError,
    add_grammar_arguments,
    share,
    add_sweep_arguments,
    add_target_arguments,
    grammar_from_args,
    help_groups,
    sweep_command,
    sweep_target,
    whole_number,
    with_examples,
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
by a run in a fresh process.  With a reference build (--reference-mlir-opt,
--reference-loom-opt; default batches) --runner persistent runs each build
through the driver of its own build (mlir-opt-19: loomfuzz-mlir-driver-19); a
build without one runs in batches, said in one line; the summary's runs: line
names how each ran, and under --oracle differential an executors: line counts
the outputs the driver died on (executed by the toolchain's processes instead).  Each finding leaves
crash-<sha1 of the program text>.mlir and .json (whatever its kind) in
--artifacts, as fuzz does; `loomfuzz triage DIR` reads them.  The folder also
keeps the sweep's journal (sweep-<fingerprint>.jsonl): the same command run
again after an interruption (even kill -9) runs only what is left.

Before the first program the target runs once on a trivial module: a pass
pipeline or argument it refuses is one line and exit status 2.

--pass-effect SHARE: after the sweep, that share of its programs (drawn by
their text) runs again through the target's passes one at a time (the
target's binary and arguments, each pass alone, in order; with --oracle
differential the optimizer's pipeline on the exec renderings it judges, twins
and all, their driver @main left out), and the summary adds a table per pass: the share of programs whose
printed module it changed, the share in which it rewrote an operation other
than a constant, and how many operations it folded into constants, replaced,
removed and added (pass-effect.json in --artifacts keeps the numbers, by
operation name).

Exit status: 0 no finding, 1 findings or an error, 2 the target refuses its
pipeline or arguments, 130 interrupted.
"""


EXAMPLES = (
    ("loomfuzz run --target mlir-opt -n 100000 --jobs 2",
     "a sweep of 100,000 generated programs through upstream mlir-opt-22, no loom needed"),
    ("loomfuzz run --loom-opt ~/loom/build/bin/loom-raise-opt programs/ --artifacts run-found",
     "the programs of a folder through your loom build; findings in run-found/"),
    ("loomfuzz run --oracle differential --mlir-opt mlir-opt-19 --profile wide -n 5000",
     "wrong code: each program executed before and after mlir-opt-19's pipeline"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = ("loomfuzz run [--loom-opt PATH | --target NAME] [-n N | INPUT ...]\n"
                    "                    [--artifacts DIR] [--jobs N] [options]")
    with_examples(parser, EXAMPLES, EPILOG)
    what, where, how_much, oracles, advanced = help_groups(
        parser, "what to run", "where to write", "how much", "oracles", "advanced")
    what.add_argument("inputs", nargs="*", metavar="INPUT",
                      help="program files (the grammar's SUFFIX, default .mlir), folders of them, or - (a '// -----' stream on stdin)")
    add_target_arguments(what, judging=oracles, limits=advanced)
    add_grammar_arguments(what)
    how_much.add_argument("-n", "--count", type=whole_number(1),
                          help="with no INPUT: how many programs to generate (default 1000)")
    advanced.add_argument("--seed", type=int, default=0, help="with no INPUT: generator seed (default 0)")
    advanced.add_argument("--engine", choices=("fast", "fuzzingbook"), default="fast",
                          help="with no INPUT: generator engine (default fast)")
    add_sweep_arguments(parser, where=where, how=how_much, oracles=oracles, advanced=advanced)
    oracles.add_argument("--pass-effect", type=share, default=0.0, metavar="SHARE",
                        help="after the sweep, run this share of its programs through the target's passes "
                             "one at a time and print per pass how often it changed them and the operations "
                             "it folded, replaced, removed and added (pass-effect.json; default 0: off)")


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
    if args.pass_effect > 0 and args.oracle != "differential":
        from harness.run.pass_effect import PassEffectError, target_steps

        try:
            target_steps(target)  # a target whose passes cannot be told apart: one line, before the sweep
        except PassEffectError as error:
            return _error(str(error))
    status = sweep_command(args, target, source.count, source.program_at, source=source.identity,
                           suffix=program_suffix(grammar), shard=shard, origin_of=source.origin_of)
    if args.pass_effect > 0 and status in (0, 1):
        part = shard.part(0, source.count) if shard else range(source.count)
        failure = _pass_effect(args, target, (source.program_at(k) for k in part), len(part))
        if failure:
            return _error(failure)
    return status


def _pass_effect(args: argparse.Namespace, target, programs: Iterable[str], count: int) -> str | None:
    """Measure and print the pass effect of the ``--pass-effect`` share of the ``count``
    ``programs`` (their text as the target reads it); returns a one-line error, or None."""
    from dataclasses import replace
    from pathlib import Path

    from harness.commands import oracle_from_args
    from harness.run.atomic import write_atomically
    from harness.run.pass_effect import PassEffectError, PassEffectSettings, measure, sampled
    from harness.targets.target import TargetNotFound, resolve_target

    runner = args.runner if args.runner in ("process", "batch") else "batch"
    settings = PassEffectSettings(args.pass_effect, runner, args.jobs, args.batch_size)
    chosen = [text for text in programs if sampled(text, settings.share)]
    try:
        if args.oracle == "differential":
            from harness.execute.exec_main import HARNESS_FUNCTIONS

            settings = replace(settings, skip=HARNESS_FUNCTIONS)  # the exec module's driver, not the program
            oracle = oracle_from_args(args)
            chosen = [oracle.exec_text(text) for text in chosen]
            target = resolve_target(oracle.optimizer.binary, pipeline=oracle.optimizer.pipeline,
                                    timeout=oracle.optimizer.timeout)
        effect = measure(target, chosen, settings)
    except (PassEffectError, TargetNotFound) as error:
        return str(error)
    report = {"share": args.pass_effect, "sampled": len(chosen), "of": count, **effect.to_json()}
    write_atomically(Path(args.artifacts) / "pass-effect.json", json.dumps(report, indent=2) + "\n")
    print(effect.describe(f"pass effect (--pass-effect {args.pass_effect:g}: {len(chosen):,} of "
                          f"{count:,} programs)"), flush=True)
    return None
