"""``loomfuzz enumerate``: every program of a grammar by its index: count, write or run them."""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

from harness.commands import (
    TargetError,
    add_grammar_arguments,
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
Every derivation tree of the grammar has an index, 0 to COUNT-1, in an order
fixed by the grammar's structure (alternatives in grammar order, children as
mixed-radix digits, the first most significant), never by its weights: the
same index is the same program on any machine.  A recursive grammar needs a
depth bound (--max-depth D: the trees of depth at most D).

  loomfuzz enumerate --shard 2/8 -o - | mlir-opt-22 ... --split-input-file

--run runs the programs against the target through --runner (default: the
persistent driver where it is built, else batches), exactly as `loomfuzz
run` does (findings as crash-<sha1>.mlir/.json in --artifacts, a summary at
the end), and keeps a journal in --artifacts: the same command run again
after an interruption (even kill -9) runs only what is left.

Exit status: 0 done (no finding), 1 findings or an error, 2 the target refuses
its pipeline or arguments (checked on a trivial module first), 130 interrupted.
"""


EXAMPLES = (
    ("loomfuzz enumerate --count-only", "how many programs the grammar has (854700 for the default profile)"),
    ("loomfuzz enumerate --start 1000 --count 50 -o progs/", "programs 1000 to 1049: progs/program-0001000.mlir ..."),
    ("loomfuzz enumerate --run --target mlir-opt --jobs 2", "the exhaustive sweep through upstream mlir-opt-22"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = ("loomfuzz enumerate [--count-only | -o DIR | --run [--loom-opt PATH | --target NAME]]\n"
                    "                          [--start I] [--count N] [options]")
    with_examples(parser, EXAMPLES, EPILOG)
    what, where, how_much, oracles, advanced = help_groups(
        parser, "what to enumerate", "where to write", "how much", "oracles", "advanced")
    add_grammar_arguments(what)
    what.add_argument("--max-depth", type=whole_number(1), metavar="D",
                      help="only trees of depth at most D (required for a recursive grammar)")
    what.add_argument("--count-only", action="store_true", help="print how many programs there are")
    what.add_argument("--run", action="store_true",
                      help="run the programs against the target (the options below) instead of "
                           "writing them")
    add_target_arguments(what, judging=oracles, limits=advanced)
    where.add_argument("-o", "--output", metavar="DIR",
                       help="a folder for one file per program (the grammar's SUFFIX, default .mlir), named by index, or - for stdout "
                            "separated by '// -----' lines (default -, unless --run)")
    how_much.add_argument("--start", type=whole_number(0), default=0, metavar="I",
                          help="the first index (default 0)")
    how_much.add_argument("--count", type=whole_number(0), metavar="N",
                          help="how many indices from --start (default: all to the end)")
    advanced.add_argument("--render", metavar="STYLE",
                          help="with -o: a rendering of the grammar (default canonical; --run renders "
                               "for the target)")
    add_sweep_arguments(parser, where=where, how=how_much, oracles=oracles, advanced=advanced)


def _error(message: str) -> int:
    print(f"loomfuzz enumerate: error: {message}", file=sys.stderr)
    return 1


def grammar_fingerprint(grammar, style: str) -> str:
    """What decides the text of every index: the grammar's structure and the style's
    terminals (not its weights, which the order ignores)."""
    shape = (grammar.start, grammar.names, grammar.alt_kids, grammar.renderings[style],
             [[(a.counter, a.indent) for a in alts] for alts in grammar.alts])
    return hashlib.sha256(repr(shape).encode("utf-8")).hexdigest()[:16]


def run(args: argparse.Namespace) -> int:
    from harness.core.rank import RankingError, ranking
    from harness.fuzzing.sweep import ShardError, parse_shard

    grammar = grammar_from_args(args)
    try:
        space = ranking(grammar, args.max_depth)
    except RankingError as error:
        return _error(str(error))
    if args.count_only:
        print(space.count)
        return 0
    if args.run and args.output is not None:
        return _error("give --run (run the programs) or -o (write them), not both")
    if not space.count:
        return _error(f"the grammar has no tree of depth at most {space.max_depth}")
    if args.start >= space.count:
        return _error(f"--start {args.start} is past the last index ({space.count - 1:,})")
    count = space.count - args.start if args.count is None else args.count
    if args.start + count > space.count:
        return _error(f"--start {args.start} --count {count} goes past the last index "
                      f"({space.count - 1:,}): at most {space.count - args.start:,} from there")
    try:
        shard = parse_shard(args.shard) if args.shard else None
    except ShardError as error:
        return _error(str(error))
    if args.run:
        return _sweep(args, grammar, space, count, shard)
    style = args.render or "canonical"
    if style not in grammar.renderings:
        return _error(f"--render {style}: the grammar has the renderings {', '.join(grammar.renderings)}")
    indices = shard.part(args.start, count) if shard else range(args.start, args.start + count)
    return _write(args, grammar, space, style, indices)


def _write(args, grammar, space, style: str, indices: range) -> int:
    from harness.commands.generate import file_name
    from harness.contract import program_suffix
    from harness.core.render import marker_after, renderer

    render = renderer(grammar, style).render
    output = args.output or "-"
    if output == "-":
        out = sys.stdout
        chunk: list[str] = []
        previous = None
        for index in indices:
            text = render(space.unrank(index))
            chunk.append(text if previous is None else marker_after(previous) + text)
            previous = text
            if len(chunk) == 2000:
                out.write("".join(chunk))
                chunk.clear()
        out.write("".join(chunk))
        out.flush()
        return 0
    folder = Path(output)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return _error(f"cannot write to {folder}: {error.strerror or error}")
    numbered = indices
    suffix = program_suffix(grammar)
    if not args.no_progress and len(indices) >= 100:
        from tqdm import tqdm

        numbered = tqdm(indices, unit="prog", desc="enumerate", file=sys.stderr)
    try:
        for index in numbered:
            # named by index over the whole space, so that every shard names alike
            path = folder / file_name(index, space.count, suffix)
            partial = path.with_name(path.name + ".partial")
            partial.write_text(render(space.unrank(index)))  # written whole, then renamed
            os.replace(partial, path)
    except OSError as error:
        return _error(f"{error.filename or folder}: {error.strerror or error}")
    print(f"wrote {len(indices):,} programs (indices {indices.start:,}-{indices.stop - 1:,}) to {folder}")
    return 0


def _sweep(args, grammar, space, count: int, shard) -> int:
    from harness.contract import program_suffix
    from harness.core.render import renderer

    if args.render is not None:
        return _error("--render is for -o: --run renders the programs for the target")
    try:
        target = sweep_target(args, grammar)
    except TargetError as error:
        return _error(str(error))
    render = renderer(grammar, target.render).render
    name = grammar.meta.get("PROFILE") or Path(grammar.source).name
    depth = f" max-depth={args.max_depth}" if args.max_depth else ""
    source = (f"enumerate grammar={name} sha={grammar_fingerprint(grammar, target.render)}{depth} "
              f"render={target.render}")
    return sweep_command(args, target, count, lambda index: render(space.unrank(index)),
                         source=source, suffix=program_suffix(grammar), start=args.start, shard=shard,
                         origin_of=lambda index: f"enumerate index {index}")
