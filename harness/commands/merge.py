"""``loomfuzz merge``: the shard folders of a sweep or campaign as one summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
Each task of a job array writes a folder of its own (sweep/shard-K,
campaign/shard-K).  merge reads them all and writes OUT/summary.md and
OUT/summary.json: what each shard did, which indices of each sweep are done
over all shards, and the distinct findings, one per program (the same program
found by two shards counts once).  The crash database and the report of all
shards come from one triage over the same folders (the second example).

Exit status: 0 merged (every sweep complete), 1 merged but a sweep has indices
not run yet, 2 a folder that is no shard.
"""

EXAMPLES = (
    ("loomfuzz merge sweep/shard-* --out sweep/merged", "one summary of a job array's shard folders"),
    ("loomfuzz triage --loom-opt PATH sweep/shard-* --out sweep/merged/triage",
     "the crash database and report of all shards"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    from harness.commands import with_examples

    with_examples(parser, EXAMPLES, EPILOG)
    parser.add_argument("folders", nargs="+", type=Path, metavar="SHARD",
                        help="the shard folders (a sweep's or a campaign's --artifacts)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write summary.md and summary.json there (default: print only)")


def run(args: argparse.Namespace) -> int:
    from harness.fuzzing.merge import MergeError, format_merged, merge_shards, write_merged

    try:
        summary = merge_shards(args.folders)
    except MergeError as error:
        print(f"loomfuzz merge: error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(format_merged(summary))
    if args.out is not None:
        try:
            _, text = write_merged(summary, args.out)
        except OSError as error:
            print(f"loomfuzz merge: error: {error.filename or args.out}: {error.strerror or error}",
                  file=sys.stderr)
            return 2
        print(f"merge: {text}", file=sys.stderr)
    return 0 if summary.complete else 1
