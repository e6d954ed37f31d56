#!/usr/bin/env python3
"""A `--profile wide` campaign against upstream mlir-opt-22, one per pass pipeline (issue 9).

Usage: python benchmarks/bench_wide_campaign.py [--quick] [--minutes M] [--dir DIR]
                                                [--pipeline P ...] [--persistent] [--stop-at-first]

For each pipeline (default: the four below), one
``loomfuzz fuzz --target mlir-opt --profile wide --pipeline 'builtin.module(P)'``
campaign of a fixed time (default 3 minutes; --quick: 30 s), one after the
other (never two at once: the machine is shared), each with its own corpus
and artifacts folders under --dir (default: a new temporary folder, kept when
some campaign has findings).  Then a table: pipeline, executions, exec/s,
corpus before -> after, findings (count, then kind and the first line of the
reason of each, from the ``crash-<sha1>.json`` sidecars).  The numbers are
parsed from the fuzz command's summary.

A single libFuzzer process stops at its first finding; so that every
pipeline gets its whole time, each campaign runs by default as libFuzzer's
fork mode with one worker (``-- -fork=1 -ignore_crashes=1 -ignore_timeouts=1
-ignore_ooms=1``: one job at a time, a finding ends that worker and another
starts).  --stop-at-first runs a single process instead.

Pipelines (mlir-opt-22's textual pass-pipeline syntax, anchored on the module):

  canonicalize,cse,sccp     the greedy rewriter, CSE, constant propagation
  remove-dead-values        dead results, arguments and region-branch values
  int-range-optimizations   integer range analysis (dataflow) and its folds
  convert-scf-to-cf         scf.if / scf.for to a CFG

The expectations are mlir-opt's built-in ones: every wide program (oracle
rendering) is valid MLIR, so anything but an acceptance with output is a
finding (crash, timeout, oom, unexpected rejection).
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

ROOT = Path(__file__).resolve().parent.parent

PIPELINES = (
    "canonicalize,cse,sccp",
    "remove-dead-values",
    "int-range-optimizations",
    "convert-scf-to-cf",
)

_EXECUTIONS = re.compile(r"^\s*executions:\s+(\d+)(?: \(([\d.]+)/s over ([\d.]+) s\))?", re.M)
_CORPUS = re.compile(r"^\s*corpus:\s+(\d+) -> (\d+) files", re.M)
_FINDINGS = re.compile(r"^\s*findings:\s+(?:none|(\d+) \(([^)]*)\))", re.M)
_COVERAGE = re.compile(r"^\s*grammar coverage: (.*)$", re.M)


def textual(pipeline: str) -> str:
    """``canonicalize,cse`` -> ``builtin.module(canonicalize,cse)``; flags and
    pipelines already anchored pass through."""
    if pipeline.startswith("-") or pipeline.startswith("builtin.module("):
        return pipeline
    return f"builtin.module({pipeline})"


def slug(pipeline: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", pipeline).strip("-") or "pipeline"


def parse_summary(out: str) -> dict:
    """The figures of ``loomfuzz fuzz``'s summary (the last one in ``out``)."""
    start = out.rfind("loomfuzz fuzz: summary")
    summary = out[start:] if start >= 0 else out
    row: dict = {"executions": None, "rate": None, "seconds": None,
                 "corpus_before": None, "corpus_after": None, "finding_count": 0,
                 "finding_kinds": "", "coverage": ""}
    m = _EXECUTIONS.search(summary)
    if m:
        row["executions"] = int(m.group(1))
        if m.group(2):
            row["rate"] = float(m.group(2))
            row["seconds"] = float(m.group(3))
    m = _CORPUS.search(summary)
    if m:
        row["corpus_before"], row["corpus_after"] = int(m.group(1)), int(m.group(2))
    m = _FINDINGS.search(summary)
    if m and m.group(1):
        row["finding_count"] = int(m.group(1))
        row["finding_kinds"] = m.group(2)
    m = _COVERAGE.search(summary)
    if m:
        row["coverage"] = m.group(1).strip()
    row["summary_found"] = start >= 0
    return row


def read_findings(artifacts: Path) -> list[dict]:
    """kind, first line of the reason and file of every finding sidecar."""
    found = []
    for sidecar in sorted(artifacts.glob("*.json")):
        if sidecar.name.startswith("."):
            continue
        try:
            record = json.loads(sidecar.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or "outcome" not in record:
            continue
        reason = (record.get("reason") or record.get("why") or "").strip().splitlines()
        found.append({
            "name": record.get("name", sidecar.stem),
            "kind": record.get("finding_kind") or record.get("outcome"),
            "reason": reason[0] if reason else "",
            "program": str(sidecar.with_suffix(".mlir")),
        })
    return found


def campaign(work: Path, pipeline: str, seconds: int, args) -> dict:
    name = slug(pipeline)
    corpus = work / name / "corpus"
    artifacts = work / name / "artifacts"
    command = [sys.executable, "-m", "harness.cli", "fuzz", "--target", "mlir-opt",
               "--profile", "wide", f"--pipeline={textual(pipeline)}",
               "--time", str(seconds), "--seed", str(args.seed),
               "--timeout", f"{args.timeout:g}",
               "--corpus", str(corpus), "--artifacts", str(artifacts)]
    command.extend(["--runner", "persistent" if args.persistent else "process"])
    if not args.stop_at_first:
        command += ["--", "-fork=1", "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"]
    print(f"bench_wide_campaign: {pipeline}: {seconds} s campaign ...", file=sys.stderr, flush=True)
    print("  " + " ".join(command[1:]), file=sys.stderr, flush=True)
    log = work / name / "fuzz.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=work,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.monotonic() - started
    out = proc.stdout + "\n" + proc.stderr
    log.write_text(out)
    row = parse_summary(proc.stdout or out)
    if row["executions"] is None and not row["summary_found"]:
        raise SystemExit(f"bench_wide_campaign: the {pipeline} campaign failed (status "
                         f"{proc.returncode}), no summary; log in {log}:\n" + out[-3000:])
    row.update(pipeline=pipeline, status=proc.returncode, wall=wall, log=str(log),
               artifacts=str(artifacts), findings=read_findings(artifacts))
    return row


def format_table(rows: list[dict]) -> str:
    header = f"{'pipeline':<26} {'executions':>10} {'exec/s':>8} {'corpus':>13}  findings"
    lines = [header, "-" * (len(header) + 40)]
    for row in rows:
        executions = "?" if row["executions"] is None else str(row["executions"])
        rate = "?" if row["rate"] is None else f"{row['rate']:.1f}"
        corpus = (f"{row['corpus_before']} -> {row['corpus_after']}"
                  if row["corpus_before"] is not None else "?")
        count = max(row["finding_count"], len(row["findings"]))
        findings = "none" if not count else f"{count}"
        lines.append(f"{row['pipeline']:<26} {executions:>10} {rate:>8} {corpus:>13}  {findings}")
        by_reason: dict[tuple[str, str], int] = {}
        for finding in row["findings"]:
            key = (finding["kind"], finding["reason"])
            by_reason[key] = by_reason.get(key, 0) + 1
        for (kind, reason), n in sorted(by_reason.items()):
            lines.append(f"{'':<61}  {n} x {kind}: {reason[:100]}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="30 s per pipeline")
    parser.add_argument("--minutes", type=float, help="minutes per pipeline (default 3; --quick 0.5)")
    parser.add_argument("--pipeline", action="append", metavar="P",
                        help="a pipeline (repeatable; default the four of issue 9), e.g. "
                             "'canonicalize,cse,sccp' or a full 'builtin.module(...)'")
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temporary folder)")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's seed (default 1)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="time limit of one mlir-opt run, seconds (default 10, as loomfuzz fuzz)")
    parser.add_argument("--persistent", action="store_true",
                        help="run programs through the persistent driver (loomfuzz fuzz --runner persistent)")
    parser.add_argument("--stop-at-first", action="store_true",
                        help="a single libFuzzer process, which stops at its first finding")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    minutes = args.minutes if args.minutes is not None else (0.5 if args.quick else 3.0)
    seconds = max(1, round(minutes * 60))
    pipelines = args.pipeline or list(PIPELINES)

    if args.dir:
        work = args.dir.resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="loomfuzz-bench-wide-"))
    rows = [campaign(work, pipeline, seconds, args) for pipeline in pipelines]

    print(format_table(rows))
    mode = "persistent driver" if args.persistent else "a process per program"
    stop = "single process, stops at first finding" if args.stop_at_first else "fork mode, 1 worker"
    print(f"\n{seconds} s per pipeline, seed {args.seed}, {mode}, {stop}, --timeout {args.timeout:g}; "
          f"mlir-opt-22 --allow-unregistered-dialect --pass-pipeline='builtin.module(P)'")
    for row in rows:
        if row["coverage"]:
            print(f"  {row['pipeline']}: {row['coverage']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    if any(row["findings"] or row["finding_count"] for row in rows) or args.dir:
        print(f"folders (corpus, artifacts, fuzz.log per pipeline): {work}")
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
