"""``loomfuzz plot``: campaigns' time series as PNG charts and an index.html."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
Each CAMPAIGN is an artifacts folder of `loomfuzz fuzz` (its stats.csv) or a
stats CSV file; write LABEL=PATH to name it in the legend.  Every chart
overlays all campaigns against elapsed time: executions, executions per
second, corpus size, AFL++ edges (when any campaign ran with --coverage afl),
grammar coverage (when recorded) and findings.  OUT/index.html shows the
charts under a table of each campaign's last row.  A campaign that was killed
still plots: every row written before the kill is kept.
"""

EXAMPLES = (
    ("loomfuzz plot artifacts -o plots/", "one campaign's charts: plots/index.html"),
    ("loomfuzz plot afl=runs/afl/artifacts plain=runs/plain/artifacts -o plots/",
     "two campaigns overlaid, named in the legend"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    from harness.commands import with_examples

    with_examples(parser, EXAMPLES, EPILOG)
    parser.add_argument("campaigns", nargs="+", metavar="CAMPAIGN",
                        help="artifacts folder or stats CSV file, optionally LABEL=PATH")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="OUT",
                        help="folder for the PNG files and index.html")
    parser.add_argument("--title", default="loom-fuzz campaigns", help="title of index.html")


def run(args: argparse.Namespace) -> int:
    from harness.fuzzing.plot import load_campaign, write_plots
    from harness.fuzzing.series import SeriesError

    try:
        campaigns = [load_campaign(argument) for argument in args.campaigns]
    except SeriesError as error:
        print(f"loomfuzz plot: error: {error}", file=sys.stderr)
        return 1
    labels = [c.label for c in campaigns]
    if len(set(labels)) != len(labels):
        print(f"loomfuzz plot: error: two campaigns are both labelled "
              f"{next(l for l in labels if labels.count(l) > 1)!r}: name them with LABEL=PATH",
              file=sys.stderr)
        return 1
    if args.output.exists() and not args.output.is_dir():
        print(f"loomfuzz plot: error: -o {args.output} is not a folder", file=sys.stderr)
        return 1
    try:
        written = write_plots(campaigns, args.output, title=args.title)
    except OSError as error:
        print(f"loomfuzz plot: error: cannot write to {args.output}: {error.strerror or error}", file=sys.stderr)
        return 1
    print(f"loomfuzz plot: {len(written) - 1} charts of {len(campaigns)} campaign(s) in "
          f"{args.output / 'index.html'}")
    return 0
