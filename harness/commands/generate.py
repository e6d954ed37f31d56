"""``loomfuzz generate``: programs to a folder (one file each) or to stdout."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.commands import add_grammar_arguments, grammar_from_args, help_groups, whole_number, with_examples

DEFAULT_COUNT = 1000

EXAMPLES = (
    ("loomfuzz generate -n 1000 -o corpus --stats",
     "1,000 programs, one .mlir file each, and each weighted choice's observed frequency"),
    ("loomfuzz generate -n 50 --render oracle | mlir-opt-22 --allow-unregistered-dialect --split-input-file",
     "50 programs as one stream, parsed by upstream mlir-opt-22"),
    ("loomfuzz generate --profile wide -n 10 --seed 7 -o wide/", "the same 10 programs on any machine"),
)
_BATCH = 2000


def configure(parser: argparse.ArgumentParser) -> None:
    with_examples(parser, EXAMPLES)
    what, where, advanced = help_groups(parser, "what to generate", "where to write", "advanced")
    what.add_argument("-n", "--count", type=whole_number(0), default=DEFAULT_COUNT,
                        help=f"how many programs (default {DEFAULT_COUNT})")
    what.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same bytes (default 0)")
    advanced.add_argument("--engine", choices=("fast", "fuzzingbook"), default="fast",
                        help="fast (default) or fuzzingbook's ProbabilisticGrammarFuzzer on the same grammar")
    advanced.add_argument("--render", default="canonical", metavar="STYLE",
                        help="a rendering of the grammar: canonical (default; what loom-opt reads), "
                             "for the built-in grammars oracle (generic ops for upstream mlir-opt), or, "
                             "for any grammar in the P1-P24 contract, exec (a module in func/arith/scf/"
                             "memref/llvm whose main runs every thread and region on a table of inputs "
                             "and prints the results: mlir-runner-22 runs it)")
    add_grammar_arguments(what)
    where.add_argument("-o", "--output", default="-", metavar="DIR",
                        help="a folder for one file per program (the grammar's SUFFIX, default .mlir), or - for stdout separated by "
                             "'// -----' lines (default -)")
    where.add_argument("--stats", action="store_true",
                        help="print a table of every weighted choice's observed frequency next to its "
                             "probability, with a chi-square p-value per nonterminal")
    where.add_argument("--plot", type=Path, metavar="FILE.png",
                        help="draw every weighted choice's observed frequency against its expected "
                             "one into a PNG")
    advanced.add_argument("--no-progress", action="store_true", help="no progress bar")


def file_name(index: int, count: int, suffix: str) -> str:
    """Stable, sortable names: program-000042.mlir (wider when count needs it; the
    grammar's suffix, :func:`harness.contract.program_suffix`)."""
    return f"program-{index:0{max(6, len(str(max(count - 1, 0))))}d}{suffix}"


def _write_stream(programs, grammar, render: str, stream) -> None:
    from harness.core.render import render_stream, separated

    if render == "exec":  # a transformation of whole programs: one at a time
        from harness.execute.exec_rendering import program_renderer

        texts = separated(map(program_renderer(grammar, render), programs))
    else:
        texts = render_stream(programs, grammar, render, _BATCH)
    for text in texts:
        stream.write(text)
    stream.flush()


def _write_folder(programs, grammar, render: str, folder: Path, count: int, progress: bool) -> None:
    from harness.contract import program_suffix
    from harness.execute.exec_rendering import program_renderer

    render_program = program_renderer(grammar, render)
    suffix = program_suffix(grammar)

    if progress:
        from tqdm import tqdm

        programs = tqdm(programs, total=count, unit="prog", desc="generate", file=sys.stderr)
    for index, program in enumerate(programs):
        path = folder / file_name(index, count, suffix)
        partial = path.with_name(path.name + ".partial")
        # Written whole, then renamed: an interrupted run leaves no half file.
        partial.write_text(render_program(program))
        os.replace(partial, path)


def run(args: argparse.Namespace) -> int:
    from harness.core.engine import EngineUnavailable, generate
    from harness.core.stats import ChoiceCounts

    grammar = grammar_from_args(args)
    from harness.execute.exec_rendering import style_error

    problem = style_error(grammar, args.render)
    if problem:
        print(f"loomfuzz generate: error: {problem}", file=sys.stderr)
        return 2
    programs = generate(grammar, args.engine, args.seed, args.count)
    counts = ChoiceCounts(grammar) if args.stats or args.plot else None
    if counts is not None:
        programs = _counted(programs, counts)
    to_stdout = args.output == "-"
    try:
        if to_stdout:
            _write_stream(programs, grammar, args.render, sys.stdout)
        else:
            folder = Path(args.output)
            try:
                folder.mkdir(parents=True, exist_ok=True)
                probe = folder / ".loomfuzz-write-test"
                probe.touch()
                probe.unlink()
            except OSError as error:
                print(f"loomfuzz generate: error: cannot write to {folder}: {error.strerror or error}",
                      file=sys.stderr)
                return 1
            progress = not args.no_progress and args.count >= 100
            _write_folder(programs, grammar, args.render, folder, args.count, progress)
    except EngineUnavailable as error:
        print(f"loomfuzz generate: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        if isinstance(error, BrokenPipeError):
            raise
        print(f"loomfuzz generate: error: {error}", file=sys.stderr)
        return 1
    if args.plot is not None:
        from harness.plots import choice_frequency_chart

        try:
            choice_frequency_chart(args.plot, _choice_rows(counts),
                                   title=f"{counts.programs} programs (seed {args.seed}): observed vs expected")
        except (OSError, ValueError) as error:
            print(f"loomfuzz generate: error: cannot write the plot {args.plot}: "
                  f"{getattr(error, 'strerror', None) or error}", file=sys.stderr)
            return 1
    if args.stats:
        print(counts.table(), end="", file=sys.stderr if to_stdout else sys.stdout)
    elif not to_stdout:
        print(f"wrote {args.count} programs to {args.output}")
    return 0


def _choice_rows(counts) -> list:
    """The plot's rows (decision, alternative, observed count, expected probability) from
    harness.core.stats.ChoiceCounts."""
    from harness.plots import ChoiceRow

    return [ChoiceRow(symbol, label, observed, probability)
            for symbol, label, probability, observed, _ in counts.rows()]


def _counted(programs, counts):
    for program in programs:
        counts.add(program)
        yield program
