#!/usr/bin/env python3
"""Grouping of crashes whose symptom varies (issue 49): bugs per real bug, triage time per
finding, and whether two triages of the same findings give the same bugs.

    nice python benchmarks/bench_grouping.py --baseline DIR [--mlir-findings DIR] [--heap N] [--codes after,before]

For each set of findings and each checkout (this one, ``after``; ``--baseline DIR``, a
checkout of loom-fuzz before issue 49, ``before``), ``loomfuzz triage`` runs as a user runs
it (a subprocess, a fresh database) twice: the input folders in one order with ``--jobs
2``, then in the other order with ``--jobs 1``.  Reported: the bugs of the first triage
(report entries: a bucket with its duplicates folded under it) per real bug, its wall time
and target runs per finding, and whether the second triage grouped the same programs into
the same bugs (compared by the members' SHA-256, so bucket numbers do not matter).

Sets of findings:

* heap double: tests/fixtures/fake_loom_opt.c with ``--plant=heap,assert``: ``heap`` dies at
  random with one of three symptoms, ``assert`` is another bug (2 real bugs), ``--heap N``
  programs (fixed seed) written as fuzz artifacts by the tests' corpus maker;
* heap-by-size double: the same programs with ``--plant=heap-by-size,assert``: the symptoms
  vary only on programs of three sites or more, so each symptom's minimized program shows it
  alone (as the MLIR 19 findings do);
* MLIR 19 (``--mlir-findings DIR``): the findings of ``loomfuzz run --target mlir-opt-19
  --pipeline 'builtin.module(remove-dead-values)' --profile wide -n 600 --artifacts DIR``,
  one memory-corrupting bug (1 real bug).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from bench_triage import build_fake, table, triage_cli  # noqa: E402

MLIR19 = ["--target", "mlir-opt-19", "--pipeline", "builtin.module(remove-dead-values)", "--profile", "wide"]


def partition(report: dict) -> set[frozenset]:
    """The bugs of a report as sets of member SHA-256s (a bucket with its duplicates)."""
    by_id = {b["id"]: b for b in report["buckets"]}
    groups: dict[int, set] = {}
    for b in report["buckets"]:
        primary = b["duplicate_of"] if b["duplicate_of"] is not None else b["id"]
        groups.setdefault(primary, set()).update(m["sha256"] for m in by_id[b["id"]]["inputs"])
    return {frozenset(g) for g in groups.values()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--baseline", metavar="DIR", help="a loom-fuzz checkout before issue 49")
    parser.add_argument("--mlir-findings", metavar="DIR", help="mlir-opt-19 remove-dead-values findings")
    parser.add_argument("--heap", type=int, default=240, help="programs of the doubles (default 240; 0: none)")
    parser.add_argument("--codes", default="after,before", help="which checkouts to run (default after,before)")
    args = parser.parse_args()
    from tests.triage_inputs import make_corpus

    work = Path(tempfile.mkdtemp(prefix="bench-grouping-"))
    try:
        fake = build_fake(work)
        heap = work / "heap"
        if args.heap:
            make_corpus(heap, seed=27, crashing=args.heap, clean=0, plants=("assert", "heap"))
        folders = [heap / "run-a" / "artifacts", heap / "run-b"]
        sets = [(f"{plant} double", folders,
                 ["--loom-opt", fake, f"--pass-args=--plant=assert,{plant} --loom-lower-for-to-graph"], 2)
                for plant in ("heap", "heap-by-size")]
        if not args.heap:
            sets = []
        if args.mlir_findings:
            folder = Path(args.mlir_findings)
            # two folders, so that the second triage can name them in the other order
            halves = [work / "mlir-a", work / "mlir-b"]
            for half in halves:
                half.mkdir()
            for k, path in enumerate(sorted(folder.glob("crash-*.mlir"))):
                shutil.copy(path, halves[k % 2] / path.name)
            sets.append(("MLIR 19 remove-dead-values", halves, MLIR19, 1))
        trees = [("after", ROOT)] + ([("before", Path(args.baseline).resolve())] if args.baseline else [])
        trees = [(label, tree) for label, tree in trees if label in args.codes.split(",")]
        rows = []
        for name, folders, target_args, real in sets:
            for label, tree in trees:
                slug = f"{name.split()[0]}-{label}"
                first = triage_cli(tree, work / f"{slug}-1", folders, target_args, {}, 2)
                second = triage_cli(tree, work / f"{slug}-2", folders[::-1], target_args, {}, 1)
                report = first["report"]
                members = report["totals"]["members"]
                bugs = len(partition(report))
                rows.append([name, label, members, len(report["buckets"]), bugs, round(bugs / real, 2),
                             round(first["runs"] / members, 2), round(1000 * first["seconds"] / members, 1),
                             len(partition(second["report"])),
                             "yes" if partition(second["report"]) == partition(report) else "no"])
                print(f"{name} ({label}): {rows[-1]}", flush=True)
        print()
        print(table(rows, ["findings", "code", "inputs", "buckets", "bugs", "bugs/real bug", "runs/input",
                           "ms/input (wall)", "bugs, 2nd triage", "same bugs"]))
        print("(first triage: folders in one order, --jobs 2; second: the other order, --jobs 1)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
