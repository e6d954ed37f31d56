#!/usr/bin/env python3
"""What the AFL++ coverage bridge costs and what it buys, in one run.

    python benchmarks/bench_coverage.py [--quick] [--seeds 1,2,3] [--cap N] [--jobs J]

Builds tests/fixtures/deep_bug.c with afl-clang-fast, then:

1. Speed, same instrumented binary, bridge on and off:
   a. the runner alone: the same programs through harness.run.process.run_program,
      alternating blocks with the bridge (start_run / finish_run around each
      run, __AFL_SHM_ID in the target's environment) and without;
   b. the fuzz target end to end on the same inputs: the encoded programs
      given to fuzz_targets/loom_opt_fuzzer.py as files (libFuzzer runs each
      once), with and without coverage afl, grammar features off in both,
      one at a time, best of three (the exec/s of its summary record).
   Goal: the bridge costs at most 15%.
2. Runs to find the deep bug (P ~ 5.9e-6 per generated program, see
   deep_bug.c), fuzz target with and without --coverage afl, fixed seeds,
   capped at --cap runs ("> cap" when not found); J runs at a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.core.codec import encode, nonempty  # noqa: E402
from harness.core.grammar import default_grammar  # noqa: E402
from harness.core.render import render  # noqa: E402
from harness.core.walk import random_trees  # noqa: E402
from harness.fuzzing.options import CoverageKind, FeatureMode, FuzzOptions, write_options  # noqa: E402
from harness.fuzzing.worker_summary import read_summaries  # noqa: E402
from harness.run.coverage import open_bridge  # noqa: E402

GRAMMAR = default_grammar()
from harness.run.process import run_program
from harness.targets.target import Target

FUZZ_TARGET = ROOT / "fuzz_targets" / "loom_opt_fuzzer.py"
DEEP_BUG = ROOT / "tests" / "fixtures" / "deep_bug.c"
BUG_MARK = "freeze of a carried value"


def build(workdir: Path) -> str:
    compiler = shutil.which("afl-clang-fast")
    if not compiler:
        sys.exit("bench_coverage: afl-clang-fast not found (apt-get install afl++ afl++-clang)")
    out = workdir / "deep-bug-afl"
    env = {**os.environ, "AFL_QUIET": "1"}
    subprocess.run([compiler, "-O1", "-o", str(out), str(DEEP_BUG)], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(out)


def runner_rates(binary: str, count: int, block: int = 50) -> tuple[float, float, float]:
    """(runs/s without, runs/s with the bridge, finish_run us) on the same programs."""
    texts = [render(t, GRAMMAR) for t in random_trees(GRAMMAR, 3, count)]
    plain = Target(name="loom-opt", argv=(binary,))
    with open_bridge("afl", binary) as bridge:
        bridged = Target(name="loom-opt", argv=(binary,), env={**plain.env, **bridge.env})
        for text in texts[:20]:  # warm up both paths
            run_program(plain, text)
            bridge.start_run()
            run_program(bridged, text)
            bridge.finish_run()
        spent = {False: 0.0, True: 0.0}
        finish = 0.0
        for start in range(0, count, block):
            chunk = texts[start:start + block]
            for with_bridge in ((False, True) if (start // block) % 2 == 0 else (True, False)):
                t0 = time.perf_counter()
                if with_bridge:
                    for text in chunk:
                        bridge.start_run()
                        run_program(bridged, text)
                        t1 = time.perf_counter()
                        bridge.finish_run()
                        finish += time.perf_counter() - t1
                else:
                    for text in chunk:
                        run_program(plain, text)
                spent[with_bridge] += time.perf_counter() - t0
    return count / spent[False], count / spent[True], finish / count * 1e6


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOMFUZZ_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def options_file(workdir: Path, name: str, **fields) -> str:
    """``--options=FILE`` for a fuzz target run; its record goes to ``NAME-summary.jsonl``."""
    path = workdir / f"{name}-options.json"
    write_options(FuzzOptions(summary=workdir / f"{name}-summary.jsonl", **fields), path)
    return f"--options={path}"


def fuzz(binary: str, workdir: Path, *, bridge: bool, seed: int, runs: int) -> tuple[int, float, bool]:
    """(executions, exec/s, deep bug found) of one fuzz target run."""
    artifacts = workdir / f"{'afl' if bridge else 'none'}-{seed}-{runs}"
    option = options_file(workdir, artifacts.name, binary=binary, artifacts=artifacts,
                          coverage=CoverageKind.AFL if bridge else CoverageKind.NONE)
    command = [sys.executable, str(FUZZ_TARGET), option, f"-seed={seed}", f"-atheris_runs={runs}"]
    proc = subprocess.run(command, capture_output=True, text=True, env=clean_env(), cwd=workdir)
    records = read_summaries(workdir / f"{artifacts.name}-summary.jsonl")
    if len(records) != 1:
        sys.exit(f"bench_coverage: no summary from the fuzz target:\n{proc.stderr[-3000:]}")
    found = any(BUG_MARK in p.read_text() for p in artifacts.glob("crash-*.json"))
    return records[0].executions, records[0].exec_per_second, found


def replay(binary: str, workdir: Path, files: list[str], *, bridge: bool) -> float:
    """exec/s of the fuzz target running ``files`` once each (no mutation);
    grammar features off in both modes, so the bridge is the only difference."""
    name = f"replay-{'afl' if bridge else 'none'}"
    summary = workdir / f"{name}-summary.jsonl"
    summary.unlink(missing_ok=True)
    option = options_file(workdir, name, binary=binary, artifacts=workdir / "replay",
                          coverage=CoverageKind.AFL if bridge else CoverageKind.NONE,
                          grammar_features=FeatureMode.OFF)
    command = [sys.executable, str(FUZZ_TARGET), option, *files]
    proc = subprocess.run(command, capture_output=True, text=True, env=clean_env(), cwd=workdir)
    records = read_summaries(summary)
    if len(records) != 1 or records[0].executions != len(files):
        sys.exit(f"bench_coverage: the replay did not run every input:\n{proc.stderr[-3000:]}")
    return records[0].exec_per_second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="fewer runs, one seed")
    parser.add_argument("--seeds", help="comma-separated libFuzzer seeds for part 2")
    parser.add_argument("--cap", type=int, help="runs per hunt before giving up")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="fuzz runs at a time (default: 2)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else ([3] if args.quick else [1, 2, 3])
    cap = args.cap or (8000 if args.quick else 20000)
    runner_n, fuzz_n, rounds = (400, 800, 2) if args.quick else (1500, 2000, 3)

    with tempfile.TemporaryDirectory(prefix="bench-coverage-") as tmp:
        workdir = Path(tmp)
        binary = build(workdir)

        print("1. speed, deep_bug built with afl-clang-fast, bridge off / on")
        without, with_, finish_us = runner_rates(binary, runner_n)
        print(f"   runner only ({runner_n} programs): {without:7.1f} runs/s off, {with_:7.1f} on "
              f"-> bridge costs {100 * (1 - with_ / without):5.1f}%  "
              f"(finish_run {finish_us:.1f} us per run)")
        # the same inputs through the fuzz target (libFuzzer runs each file
        # given on its command line once), one mode at a time, best of `rounds`
        inputs = workdir / "inputs"
        inputs.mkdir()
        files = []
        for i, tree in enumerate(random_trees(GRAMMAR, 5, fuzz_n)):
            path = inputs / f"{i:05d}"
            path.write_bytes(nonempty(encode(tree, GRAMMAR), tree, GRAMMAR))
            files.append(str(path))
        best = {False: 0.0, True: 0.0}
        for _ in range(rounds):
            for bridge in (False, True):
                best[bridge] = max(best[bridge], replay(binary, workdir, files, bridge=bridge))
        print(f"   fuzz target, same {fuzz_n} inputs (best of {rounds}): {best[False]:7.1f} exec/s off, "
              f"{best[True]:7.1f} on -> bridge costs {100 * (1 - best[True] / best[False]):5.1f}%")

        print(f"2. runs to find the deep bug (cap {cap:,}, seeds {', '.join(map(str, seeds))})")
        jobs = [(bridge, seed) for seed in seeds for bridge in (True, False)]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {job: pool.submit(fuzz, binary, workdir, bridge=job[0], seed=job[1], runs=cap)
                       for job in jobs}
            results = {job: f.result() for job, f in futures.items()}
        found = {True: [], False: []}
        for seed in seeds:
            cells = []
            for bridge in (True, False):
                executions, _, hit = results[(bridge, seed)]
                found[bridge].append(executions if hit else None)
                cells.append(f"{executions:>7,}" if hit else f"> {cap:,}".rjust(7))
            print(f"   seed {seed}: with bridge {cells[0]}   without {cells[1]}")

        def summary(values: list[int | None]) -> tuple[str, float]:
            # censored runs count as the cap: a lower bound of the median
            filled = [v if v is not None else cap for v in values]
            med = statistics.median(filled)
            censored = sum(v is None for v in values)
            text = f"{med:,.0f}" if med < cap else f"> {cap:,}"
            return text + (f" ({censored}/{len(values)} not found)" if censored else ""), med

        text_on, med_on = summary(found[True])
        text_off, med_off = summary(found[False])
        ratio = med_off / med_on
        bound = ">= " if any(v is None for v in found[False]) else ""
        print(f"   median runs to find: with bridge {text_on}, without {text_off}; "
              f"ratio without/with {bound}{ratio:.1f}x")


if __name__ == "__main__":
    main()
