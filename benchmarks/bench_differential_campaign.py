#!/usr/bin/env python3
"""``--oracle differential`` campaigns per upstream pipeline, the wide profile before and after issue 23.

Usage: python benchmarks/bench_differential_campaign.py [--quick] [--minutes M] [--dir DIR]
           [--pipeline P ...] [--before REV] [--seeds N] [--mlir-opt PATH] [--json FILE]

For each pipeline (default: the four below) two campaigns of a fixed time
(default 3 minutes; --quick: 25 s), one after the other (never two at once:
the machine is shared), each with its own corpus and artifacts folders under
--dir (default: a new temporary folder, kept when a campaign has findings):

  after   loomfuzz fuzz --profile wide --oracle differential --pipeline 'builtin.module(P)'
  before  the same with --grammar wide-before.py: grammars/wide.py as it was at
          --before REV (default: the parent of the first commit that put ``divsi``
          in it, issue 23's vocabulary), taken with ``git show``.

"Before" is the old grammar run by today's engine and oracle: the
differential oracle did not exist at REV (it was merged after the
vocabulary), so a checkout of REV could not run these campaigns at all; the
grammar is the only thing the vocabulary changed.

libFuzzer runs every seed before it fuzzes and reads -max_total_time only
then; loomfuzz's own seeding covers every k-path feature of the grammar
(about 1,400 wide programs, several minutes at the oracle's few programs a
second), so a short campaign would only replay seeds.  Each campaign's corpus
is therefore seeded here with --seeds N programs drawn from its own grammar
(PCFG draws, seed 0; default 24, --quick 8; --seeds 0: loomfuzz's own seeding).

A finding ends a libFuzzer process; the campaign is then resumed on the same
corpus and artifacts for the time left (the executions add up).  mlir-opt-22's
``remove-dead-values`` rejects the exec rendering of nearly every program with
``null operand found`` (upstream llvm/llvm-project#82788, docs/explanation/
wrong-code.md), the empty input libFuzzer runs first at every start among
them: such a campaign would only ever find that.  So each campaign gets
``--expectations`` declaring that one failure (:data:`KNOWN`): its programs
are no finding and give no values to compare; --no-known counts it again.  Then one
table: pipeline, grammar, executions, exec/s, corpus start -> end, libFuzzer's
features (``ft:`` of its last status line) and the grammar k-path coverage of
the corpus, findings by kind (wrong-code, target-failure, reference-failure,
others), and for each wrong-code finding whether the reference interpreter
agrees with the unoptimized run (``interp=unopt``: the optimized run alone
differs, an optimizer bug to confirm independently; ``interp!=unopt``: our
false alarm, the rendering or the interpreter is wrong).

Pipelines (mlir-opt-22's textual pass-pipeline syntax, anchored on the module):

  canonicalize,cse,sccp        the greedy rewriter, CSE, constant propagation
  int-range-optimizations      integer range analysis and its folds
  remove-dead-values           dead results, arguments and region-branch values
  arith-expand,canonicalize    arith's expansions (ceildivsi, floordivsi, ...), then folds
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_wide_campaign import parse_summary, slug, textual

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PIPELINES = (
    "canonicalize,cse,sccp",
    "int-range-optimizations",
    "remove-dead-values",
    "arith-expand,canonicalize",
)
KINDS = ("wrong-code", "target-failure", "reference-failure")
#: Known upstream failures, given to every campaign as --expectations (--no-known: none).
KNOWN = {"description": "known upstream failures of mlir-opt-22 on exec programs",
         "rules": [{"name": "llvm-82788", "expect": "either", "stderr": "null operand found",
                    "note": "remove-dead-values erases a dead argument's definition but not "
                            "the call's operand (llvm/llvm-project#82788)"}]}
#: libFuzzer's status lines: "#256	pulse  cov: 2543 ft: 2890 corp: 254/7540b ..."
_FEATURES = re.compile(r"^#\d+\s+\w+\s+cov: (\d+) ft: (\d+)", re.M)
#: a campaign resumed with less time left than this is not worth its start-up
MIN_RESUME = 5


def before_revision(given: str | None) -> str:
    """``given``, or the parent of the first commit whose grammars/wide.py has ``divsi``."""
    if given:
        return given
    first = subprocess.run(["git", "log", "--reverse", "-G", "divsi", "--format=%H", "--",
                            "grammars/wide.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    commits = first.stdout.split()
    if not commits:
        raise SystemExit("bench_differential_campaign: no commit adds divsi to grammars/wide.py; give --before")
    return commits[0] + "^"


def write_before_grammar(revision: str, path: Path) -> None:
    done = subprocess.run(["git", "show", f"{revision}:grammars/wide.py"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench_differential_campaign: --before {revision}: {done.stderr.strip()}")
    path.write_text(done.stdout)


def seed(corpus: Path, grammar_args: list[str], count: int) -> None:
    """``count`` encoded programs of the campaign's grammar (PCFG draws, seed 0)."""
    from harness.core.codec import encode, nonempty
    from harness.core.grammar import load
    from harness.core.walk import random_trees

    grammar_file = grammar_args[1] if grammar_args[0] == "--grammar" else None
    grammar = load(grammar_file, None if grammar_file else grammar_args[1])
    corpus.mkdir(parents=True, exist_ok=True)
    for n, tree in zip(range(count), random_trees(grammar, 0)):
        (corpus / f"seed-{n:04d}").write_bytes(nonempty(encode(tree, grammar), tree, grammar))


def campaign_figures(out: str, artifacts: Path) -> dict:
    """One fuzz run's figures: its summary (executions, rate, corpus, findings, grammar
    coverage), libFuzzer's last ``ft:`` and ``cov:``.  The one place that reads the summary:
    where it becomes ARTIFACTS/fuzz-summary.jsonl, read that here instead."""
    row = parse_summary(out)
    features = _FEATURES.findall(out)
    row["cov"], row["ft"] = (int(features[-1][0]), int(features[-1][1])) if features else (None, None)
    return row


def judge_wrong_code(record: dict, program: Path) -> str:
    """Does the reference interpreter agree with the unoptimized run of this finding?"""
    from harness.execute.interpret import InterpretError, interpret_program

    try:
        interpreted = interpret_program(program.read_text())
    except InterpretError as error:  # UndefinedBehaviour too: the oracle should have dropped it
        return f"interpreter: {type(error).__name__}: {str(error)[:80]}"
    unoptimized = (record.get("oracle") or {}).get("reference_output")
    return "interp=unopt" if interpreted == unoptimized else "interp!=unopt"


def read_findings(artifacts: Path) -> list[dict]:
    """Every finding sidecar: kind, first line of the reason, and for wrong code the check."""
    found = []
    for sidecar in sorted(artifacts.glob("crash-*.json")):
        try:
            record = json.loads(sidecar.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or "outcome" not in record:
            continue
        # the optimizer's failures (crash, rejection, timeout) are the oracle's target failures
        kind = (record.get("oracle") or {}).get("kind") or record.get("finding_kind") or record.get("outcome")
        reason = (record.get("why") or record.get("reason") or "").strip().splitlines()
        program = sidecar.with_suffix(".mlir")
        found.append({"name": sidecar.stem, "kind": kind, "reason": reason[0] if reason else "",
                      "program": str(program),
                      "check": judge_wrong_code(record, program) if kind == "wrong-code" else ""})
    return found


def campaign(work: Path, pipeline: str, side: str, grammar_args: list[str], seconds: int, args) -> dict:
    folder = work / slug(pipeline) / side
    corpus, artifacts = folder / "corpus", folder / "artifacts"
    if args.seeds:
        seed(corpus, grammar_args, args.seeds)
    command = [sys.executable, "-m", "harness.cli", "fuzz", *grammar_args, "--oracle", "differential",
               "--mlir-opt", args.mlir_opt, f"--pipeline={textual(pipeline)}",
               "--seed", str(args.seed), "--timeout", f"{args.timeout:g}",
               "--corpus", str(corpus), "--artifacts", str(artifacts)]
    if args.known:
        command += ["--expectations", str(args.known)]
    print(f"bench_differential_campaign: {pipeline}, {side}: {seconds} s ...", file=sys.stderr, flush=True)
    started, logs, row, runs = time.monotonic(), [], None, 0
    while True:
        left = seconds - (time.monotonic() - started)
        runs += 1
        proc = subprocess.run([*command, "--time", str(max(1, round(left)))], capture_output=True,
                              text=True, cwd=work, env={**os.environ, "PYTHONPATH": str(ROOT)})
        out = proc.stdout + "\n" + proc.stderr
        logs.append(out)
        figures = campaign_figures(out, artifacts)
        if figures["executions"] is None:
            raise SystemExit(f"bench_differential_campaign: {pipeline} ({side}) failed (status "
                             f"{proc.returncode}), no summary:\n" + out[-3000:])
        if row is None:
            row = figures
        else:  # a resumed run: executions add up, the corpus ends where the last run left it
            row["executions"] += figures["executions"]
            row["seconds"] = (row["seconds"] or 0) + (figures["seconds"] or 0)
            row["corpus_after"] = figures["corpus_after"]
            row.update(coverage=figures["coverage"], cov=figures["cov"] or row["cov"],
                       ft=figures["ft"] or row["ft"])
        found_one = proc.returncode == 1 and figures["finding_count"]
        if not found_one or seconds - (time.monotonic() - started) < MIN_RESUME:
            break
    (folder / "fuzz.log").write_text("\n".join(logs))
    row["rate"] = row["executions"] / row["seconds"] if row["seconds"] else None
    row.update(pipeline=pipeline, side=side, runs=runs, wall=time.monotonic() - started,
               findings=read_findings(artifacts), artifacts=str(artifacts))
    return row


def format_table(rows: list[dict]) -> str:
    header = (f"{'pipeline':<26} {'grammar':<7} {'execs':>6} {'exec/s':>6} {'corpus':>11} {'ft':>6} "
              f"{'k=1':>9} {'k=2':>11}  {'wrong':>5} {'target':>6} {'ref':>4} {'other':>5}  wrong-code check")
    lines = [header, "-" * len(header)]
    for row in rows:
        kpaths = dict(re.findall(r"k=(\d) (\d+/\d+)", row["coverage"] or ""))
        counts = {kind: sum(f["kind"] == kind for f in row["findings"]) for kind in KINDS}
        other = len(row["findings"]) - sum(counts.values())
        checks = ", ".join(sorted({f["check"] for f in row["findings"] if f["check"]})) or "-"
        rate = "?" if row["rate"] is None else f"{row['rate']:.1f}"
        lines.append(
            f"{row['pipeline']:<26} {row['side']:<7} {row['executions']:>6} {rate:>6} "
            f"{row['corpus_before']:>4} -> {row['corpus_after']:<4} {row['ft'] if row['ft'] is not None else '?':>6} "
            f"{kpaths.get('1', '?'):>9} {kpaths.get('2', '?'):>11}  {counts['wrong-code']:>5} "
            f"{counts['target-failure']:>6} {counts['reference-failure']:>4} {other:>5}  {checks}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="25 s per campaign")
    parser.add_argument("--minutes", type=float, help="minutes per campaign (default 3; --quick 25 s)")
    parser.add_argument("--pipeline", action="append", metavar="P",
                        help="a pipeline (repeatable; default the four above)")
    parser.add_argument("--before", metavar="REV",
                        help="the revision whose grammars/wide.py is 'before' (default: the parent of "
                             "the first commit that adds divsi to it)")
    parser.add_argument("--seeds", type=int,
                        help="programs seeded into each corpus (default 24, --quick 8: at a loaded "
                             "machine's 1 program/s more would outlast the campaign; 0: loomfuzz's "
                             "own seeding)")
    parser.add_argument("--mlir-opt", default="mlir-opt-22", help="the optimizer (default mlir-opt-22)")
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temporary folder)")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's seed (default 1)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="time limit of one optimizer run, seconds (default 10, as loomfuzz fuzz)")
    parser.add_argument("--no-known", action="store_true",
                        help="no --expectations: the known upstream failures are findings too")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    seconds = round(args.minutes * 60) if args.minutes is not None else (25 if args.quick else 180)
    pipelines = args.pipeline or list(PIPELINES)
    if args.seeds is None:
        args.seeds = 8 if args.quick else 24
    revision = before_revision(args.before)
    work = args.dir.resolve() if args.dir else Path(tempfile.mkdtemp(prefix="loomfuzz-bench-diff-"))
    work.mkdir(parents=True, exist_ok=True)
    before = work / "wide-before.py"
    write_before_grammar(revision, before)
    args.known = None if args.no_known else work / "known-upstream.json"
    if args.known:
        args.known.write_text(json.dumps(KNOWN, indent=2) + "\n")

    load_start = os.getloadavg()
    rows = []
    for pipeline in pipelines:
        for side, grammar_args in (("before", ["--grammar", str(before)]), ("after", ["--profile", "wide"])):
            rows.append(campaign(work, pipeline, side, grammar_args, seconds, args))
    load_end = os.getloadavg()

    print(format_table(rows))
    print(f"\n{seconds} s per campaign, --seeds {args.seeds}, libFuzzer seed {args.seed}, "
          f"--timeout {args.timeout:g}; {args.mlir_opt} --pass-pipeline='builtin.module(P)'; "
          f"before = grammars/wide.py at {revision}; load average {load_start[0]:.2f} at start, "
          f"{load_end[0]:.2f} at end ({os.cpu_count()} CPUs)")
    if args.known:
        print("known upstream failures declared (no finding, no values compared): "
              + "; ".join(f"{r['name']}: {r['note']}" for r in KNOWN["rules"]))
    for row in rows:
        if row["runs"] > 1:
            print(f"  {row['pipeline']} ({row['side']}): resumed {row['runs'] - 1} time(s) after findings")
        for finding in row["findings"]:
            print(f"  {row['pipeline']} ({row['side']}): {finding['kind']} {finding['check']} "
                  f"{finding['reason'][:100]}  {finding['program']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    if any(row["findings"] for row in rows) or args.dir:
        print(f"folders (corpus, artifacts, fuzz.log per campaign): {work}")
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
