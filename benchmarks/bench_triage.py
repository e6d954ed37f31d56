#!/usr/bin/env python3
"""Triage cost on the fake loom-opt: target runs per minimized bucket, wall time per input.

    python benchmarks/bench_triage.py [--quick] [--jobs N]

Builds tests/fixtures/fake_loom_opt.c (planted bugs: assert, segv, fatal,
flaky), writes fuzz-style artifact folders of random programs (fixed seeds),
and runs the whole triage pipeline (``harness.triage.pipeline.run_triage``, repeat 3)
on each, with a fresh database.  Then, to measure the minimizer on harder
starting points than each bucket's simplest member, it minimizes every
crashing input on its own with the same predicate triage uses.

Goal: median target runs per minimized bucket <= 25.

Then (issue 27) the cost of triage per input and the buckets per real bug, by
running ``loomfuzz triage`` as a user does (a subprocess, ``--jobs 2``) on
three sets of findings, each target wrapped by a script that counts its
processes:

* stand-in: the fake loom-opt with its deterministic bugs (assert, segv,
  fatal) on fuzz-style artifacts of random programs, 5/6 of them crashing;
* heap double: the fake's ``heap`` bug (one bug, three symptoms at random)
  and its ``assert`` bug: 2 real bugs;
* mlir-opt-22 (``--target mlir-opt --profile wide``, pipeline
  canonicalize,cse,sccp): random wide programs as ``.mlir`` files (mlir-opt-22
  accepts them all: this measures the inputs that do not reproduce).

Then (issues 24 and 27) triage through ``--runner process`` and ``--runner
persistent`` side by side on the same findings (:func:`compare_runners`):
target runs, target processes started (execs, counted by wrappers around the
tool and its driver) and wall time per input, and whether both gave the same
buckets, signatures and minimized programs.  Two targets: the persistent
double (tests/fixtures/persistent_fake.c as loom-opt, 35 ms of start-up like
mlir-opt-22, crashes planted on llvm.freeze and llvm.call) and mlir-opt-22
itself with the driver .ci/setup builds (random wide programs, which it
accepts: repeats).  ``--only-runners`` runs this part alone.

With ``--baseline DIR`` (a checkout of loom-fuzz before issue 27, e.g. made by
``git worktree add DIR COMMIT``) the same findings are triaged by that
checkout too, side by side: processes and wall time per input, buckets, bugs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core.codec import decode, encode
from harness.core.grammar import default_grammar
from harness.core.reduce import minimize
from harness.core.walk import random_trees
from harness.targets.target import resolve_target
from harness.triage.crashdb import TriageDB
from harness.triage.minimize import Interesting, attempts_for
from harness.triage.pipeline import TriageConfig, run_triage
from harness.triage.runs import TriageRunner

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fixtures" / "fake_loom_opt.c"
GOAL = 25


def build_fake(directory: Path) -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        sys.exit("bench_triage: no C compiler to build the fake loom-opt")
    out = directory / "fake-loom-opt"
    subprocess.run([cc, "-O1", "-g", "-o", str(out), str(FAKE)], check=True)
    return str(out)


def bug_name(row) -> str:
    if row["type"] == "assert":
        return "flaky" if "stale call result" in row["message"] else "assert"
    return {"SIGSEGV": "segv", "llvm-error": "fatal"}.get(row["type"], row["type"] or row["kind"])


def table(rows: list[list], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(c).rjust(w) if isinstance(c, (int, float)) else str(c).ljust(w)
                              for c, w in zip(r, widths))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="fewer seeds and inputs")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--baseline", metavar="DIR", help="a loom-fuzz checkout to compare with")
    parser.add_argument("--only-cli", action="store_true", help="only the per-input comparison")
    parser.add_argument("--only-runners", action="store_true", help="only process vs persistent")
    args = parser.parse_args()
    if args.only_runners:
        work = Path(tempfile.mkdtemp(prefix="bench-triage-"))
        try:
            compare_runners(work, args)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    if args.only_cli:
        work = Path(tempfile.mkdtemp(prefix="bench-triage-"))
        try:
            compare_cli(work, build_fake(work), args)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    seeds, inputs = (2, 200) if args.quick else (5, 400)

    work = Path(tempfile.mkdtemp(prefix="bench-triage-"))
    try:
        fake = build_fake(work)
        target = resolve_target("loom-opt", loom_opt=fake)
        grammar = default_grammar()
        per_bucket: dict[str, list] = {}
        per_input_ms: list[float] = []
        runs_rows = []
        crashing_programs = []
        for seed in range(seeds):
            folder = work / f"fuzz-{seed}"
            folder.mkdir()
            for tree in random_trees(grammar, 1000 + seed, inputs):
                data = encode(tree, grammar)
                (folder / f"crash-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
            config = TriageConfig(
                inputs=[str(folder)], target=target, db_path=str(work / f"t{seed}.db"),
                out_dir=str(work / f"out{seed}"), jobs=args.jobs, repeat=3, progress=False,
            )
            started = time.perf_counter()
            summary = run_triage(config, log=lambda message: None)
            elapsed = time.perf_counter() - started
            per_input_ms.append(1000 * elapsed / summary.inputs)
            runs_rows.append([
                seed, summary.inputs, summary.unique, summary.buckets, summary.flaky,
                round(1000 * summary.seconds_reproduce / summary.unique, 2),
                round(summary.seconds_minimize, 3), round(elapsed, 2), round(per_input_ms[-1], 2),
            ])
            with TriageDB(config.db_path, create=False) as db:
                for b in db.buckets():
                    per_bucket.setdefault(bug_name(b), []).append(
                        (b["min_runs"], b["min_evaluations"], b["minimized_tree"], b["reproduction"])
                    )
                    members = db.members(b["id"])
                    hits = sum(m["hits"] for m in members)
                    attempts = sum(m["attempts"] for m in members)
                    n = attempts_for(hits, attempts) if hits < attempts else 1  # as triage does
                    for m in members:
                        crashing_programs.append((b["signature"], n, m["data"]))

        print(f"triage runs (fake loom-opt, repeat 3, --jobs {args.jobs}):")
        print(table(runs_rows, ["seed", "inputs", "distinct", "buckets", "flaky inputs",
                                "ms/program (repro)", "minimize s", "total s", "ms/input"]))
        print()
        rows = []
        all_runs = []
        for bug, results in sorted(per_bucket.items()):
            runs = [r[0] for r in results]
            all_runs += runs
            rows.append([bug, len(results), statistics.median(runs), max(runs),
                         statistics.median(r[1] for r in results), results[0][2], results[0][3]])
        print("target runs per minimized bucket (from the bucket's simplest member):")
        print(table(rows, ["bug", "buckets", "median runs", "max runs", "median candidates",
                           "minimized", "reproduction"]))
        median = statistics.median(all_runs)
        print(f"\nmedian target runs per minimized bucket: {median} (goal <= {GOAL}: "
              f"{'met' if median <= GOAL else 'NOT met'}); wall time per input: "
              f"{statistics.median(per_input_ms):.2f} ms (median over runs, all phases)")

        # every crashing input minimized on its own (harder starting points)
        per_bug: dict[str, list[int]] = {}
        seen = set()
        for signature, n, data in crashing_programs:
            program = decode(data, grammar)
            if program in seen:
                continue
            seen.add(program)
            predicate = Interesting(TriageRunner(target), signature, n, grammar)
            minimize(program, grammar, predicate.program)
            name = "flaky" if "stale call result" in signature else signature.split(" ")[0]
            per_bug.setdefault(name, []).append(predicate.runs)
        rows = []
        everything = []
        for name, runs in sorted(per_bug.items()):
            runs.sort()
            everything += runs
            rows.append([name, len(runs), statistics.median(runs), runs[int(0.9 * (len(runs) - 1))], max(runs)])
        print("\ntarget runs to minimize each crashing input on its own:")
        print(table(rows, ["signature", "inputs", "median", "p90", "max"]))
        print(f"all inputs: median {statistics.median(everything)}, "
              f"deterministic bugs only: median "
              f"{statistics.median([r for n, rs in per_bug.items() if n != 'flaky' for r in rs])}")
        print()
        compare_cli(work, fake, args)
        print()
        compare_runners(work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def counting_wrapper(work: Path, name: str, binary: str) -> tuple[Path, Path]:
    """A script that counts its runs in a file, then runs ``binary``."""
    count = work / f"{name}.count"
    wrapper = work / name
    wrapper.write_text(f'#!/bin/sh\necho >> "{count}"\nexec "{binary}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, count


def triage_cli(tree: Path, out: Path, inputs: Path | list[Path], target_args: list[str], env: dict,
               jobs: int) -> dict:
    """``loomfuzz triage`` of the loom-fuzz in ``tree`` on ``inputs`` (in their order): wall
    time and report.json."""
    named = [str(p) for p in inputs] if isinstance(inputs, list) else [str(inputs)]
    command = [sys.executable, "-m", "harness.cli", "triage", *target_args, "--db", str(out / "t.db"),
               "--out", str(out), "--jobs", str(jobs), "--no-progress", *named]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=tree, env={**os.environ, **env, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"bench_triage: triage in {tree} failed:\n{proc.stderr}")
    import json

    import re

    runs = re.search(r"(\d+) target runs in", proc.stderr)  # loom-fuzz since issue 27 counts them
    return {"seconds": seconds, "report": json.loads((out / "report.json").read_text()),
            "runs": int(runs.group(1)) if runs else None}


def compare_cli(work: Path, fake: str, args) -> None:
    """Processes and wall time per input, buckets and bugs, for this tree (and --baseline)."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from tests.triage_inputs import make_corpus  # the tests' corpus maker: known bugs per input

    grammar = default_grammar()
    quick = args.quick
    sets = []
    stand_in = work / "cli-stand-in"
    make_corpus(stand_in, seed=11, crashing=250 if quick else 500, clean=50 if quick else 100)
    sets.append(("stand-in", stand_in, "fake", ["--pass-args=--plant=assert,segv,fatal --loom-lower-for-to-graph"],
                 3))
    heap = work / "cli-heap"
    make_corpus(heap, seed=27, crashing=150 if quick else 300, clean=0, plants=("assert", "heap"))
    sets.append(("heap double", heap, "fake", ["--pass-args=--plant=assert,heap --loom-lower-for-to-graph"], 2))
    from harness.core.grammar import load_profile
    from harness.core.render import render as render_tree

    wide = load_profile("wide")
    upstream = work / "cli-mlir-opt"
    upstream.mkdir()
    for k, tree in enumerate(random_trees(wide, 2027, 100 if quick else 200)):
        (upstream / f"finding-{k}.mlir").write_text(render_tree(tree, wide, "oracle"))
    sets.append(("mlir-opt-22", upstream, "mlir",
                 ["--target", "mlir-opt", "--profile", "wide", "--pipeline", "builtin.module(canonicalize,cse,sccp)"],
                 None))
    mlir = shutil.which("mlir-opt-22") or "/usr/lib/llvm-22/bin/mlir-opt"
    trees = [("after", ROOT)] + ([("before", Path(args.baseline).resolve())] if args.baseline else [])
    rows = []
    for name, inputs, kind, target_args, real_bugs in sets:
        for label, tree in trees:
            wrapper, count = counting_wrapper(work, f"{name.replace(' ', '-')}-{label}",
                                              fake if kind == "fake" else mlir)
            env = {"MLIR_OPT": str(wrapper)} if kind == "mlir" else {}
            extra = ["--loom-opt", str(wrapper)] if kind == "fake" else []
            result = triage_cli(tree, work / f"out-{name.replace(' ', '-')}-{label}", inputs,
                                [*extra, *target_args], env, args.jobs)
            processes = len(count.read_text().splitlines()) if count.exists() else 0
            report = result["report"]
            members = report["totals"]["members"]
            buckets = len(report["buckets"])
            bugs = sum(1 for b in report["buckets"] if b.get("duplicate_of") is None)
            runs = result["runs"] if result["runs"] is not None else processes  # before: one run, one process
            rows.append([name, label, members, round(runs / members, 2), processes, round(processes / members, 2),
                         round(1000 * result["seconds"] / members, 1), buckets, bugs,
                         round(bugs / real_bugs, 2) if real_bugs else "-"])
    print(f"loomfuzz triage as a user runs it (--jobs {args.jobs}; target processes counted by a wrapper):")
    print(table(rows, ["findings", "code", "inputs", "runs/input", "processes", "processes/input", "ms/input (wall)",
                       "buckets", "bugs", "bugs reported/real bug"]))
    print("(bugs: entries of the report, a bucket with its duplicates folded under it; before issue 27 "
          "every bucket was one)")


def _triage_with(kind: str, target, inputs: Path, out: Path, jobs: int) -> tuple[object, float, list]:
    """One in-process triage through ``--runner kind``: (summary, seconds, buckets)."""
    config = TriageConfig(inputs=[str(inputs)], target=target, db_path=str(out / "t.db"), out_dir=None,
                          jobs=jobs, repeat=3, progress=False, runner=kind)
    out.mkdir()
    started = time.perf_counter()
    summary = run_triage(config, log=lambda message: None)
    seconds = time.perf_counter() - started
    with TriageDB(config.db_path, create=False) as db:
        buckets = sorted((b["signature"], b["minimized_text"]) for b in db.buckets())
    return summary, seconds, buckets


def compare_runners(work: Path, args) -> None:
    """Triage of the same findings through --runner process and --runner persistent."""
    from harness.core.grammar import load_profile
    from harness.core.render import render as render_tree
    from harness.targets.expectations import parse_expectations
    from harness.run.driver_binary import DRIVER_ENV, LOOM_DRIVER_ENV, default_driver_path
    from harness.targets.target import Target

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    double = work / "persistent-fake"
    subprocess.run([cc, "-O1", "-o", str(double), str(ROOT / "tests" / "fixtures" / "persistent_fake.c")],
                   check=True)
    grammar = default_grammar()
    n = 60 if args.quick else 150
    texts = sorted((render_tree(t, grammar) for t in random_trees(grammar, 24, 8 * n)), key=len, reverse=True)
    fake_inputs = work / "runners-fake"
    fake_inputs.mkdir()
    chosen = ([t for t in texts if "llvm.freeze" in t][: n // 2]
              + [t for t in texts if "llvm.call" in t and "llvm.freeze" not in t][: n // 4]
              + [t for t in texts if "llvm.call" not in t and "llvm.freeze" not in t][: n // 4])
    for k, text in enumerate(chosen):
        (fake_inputs / f"finding-{k}.mlir").write_text(text)
    wide = load_profile("wide")
    mlir_inputs = work / "runners-mlir"
    mlir_inputs.mkdir()
    for k, tree in enumerate(random_trees(wide, 2024, 40 if args.quick else 100)):
        (mlir_inputs / f"finding-{k}.mlir").write_text(render_tree(tree, wide, "oracle"))

    tool, tool_count = counting_wrapper(work, "runners-tool", str(double))
    driver, driver_count = counting_wrapper(work, "runners-driver", str(double))
    driver.write_text(driver.read_text().replace('"$@"', '--persistent "$@"'))
    mlir, mlir_count = counting_wrapper(work, "runners-mlir-opt",
                                        shutil.which("mlir-opt-22") or "/usr/lib/llvm-22/bin/mlir-opt")
    mlir_driver, mlir_driver_count = counting_wrapper(
        work, "runners-mlir-driver", os.environ.get(DRIVER_ENV) or str(default_driver_path()))
    either = parse_expectations({"rules": [{"name": "any", "expect": "either"}]}, "bench:any")
    fake_target = Target("loom-opt", (str(tool), "--startup-ms=35", "--abort-on=llvm.freeze",
                                      "--segv-on=llvm.call"), expectations=either)
    mlir_target = resolve_target("mlir-opt", pipeline="builtin.module(canonicalize,cse,sccp)")
    mlir_target = Target(mlir_target.name, (str(mlir), *mlir_target.argv[1:]), mlir_target.render,
                         expectations=mlir_target.expectations)
    saved = {k: os.environ.get(k) for k in (LOOM_DRIVER_ENV, DRIVER_ENV)}
    os.environ[LOOM_DRIVER_ENV], os.environ[DRIVER_ENV] = str(driver), str(mlir_driver)
    rows = []
    try:
        for name, target, inputs, counts in (
                ("persistent double", fake_target, fake_inputs, (tool_count, driver_count)),
                ("mlir-opt-22", mlir_target, mlir_inputs, (mlir_count, mlir_driver_count))):
            results = {}
            for kind in ("process", "persistent"):
                for count in counts:
                    count.unlink(missing_ok=True)
                summary, seconds, buckets = _triage_with(kind, target, inputs,
                                                         work / f"runners-{name[:4]}-{kind}", args.jobs)
                execs = sum(len(c.read_text().splitlines()) for c in counts if c.exists())
                results[kind] = buckets
                rows.append([name, kind, summary.inputs, summary.buckets, summary.target_runs, execs,
                             summary.processes, round(execs / summary.inputs, 2),
                             round(1000 * seconds / summary.inputs, 1)])
            rows[-1].append("yes" if results["process"] == results["persistent"] else "NO")
            rows[-2].append("")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    print(f"triage through --runner process vs persistent (in-process run_triage, repeat 3, --jobs {args.jobs}; "
          "execs counted by wrappers, processes = execs + forks):")
    print(table(rows, ["findings", "runner", "inputs", "buckets", "target runs", "execs", "processes",
                       "execs/input", "ms/input (wall)", "same buckets+minimized"]))


if __name__ == "__main__":
    main()
