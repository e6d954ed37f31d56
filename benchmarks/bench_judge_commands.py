#!/usr/bin/env python3
"""The wrong-code judge where users see it: whole commands against the crash oracle.

    python benchmarks/bench_judge_commands.py [-n N] [--process-n N] [--fuzz-runs N]
                                              [--rounds R] [--seed S] [--pipeline P]

In one run, the same wide programs (``--profile wide``, seed S) of the same grammar through
the same pipeline on ``mlir-opt-22``, each row a whole ``loomfuzz`` command in a fresh
process with its own artifacts folder (nothing resumed), the rows interleaved round by round
so that a change in the shared machine's load hits all of them:

=====================  ==============================================================
crash-only             ``loomfuzz run --target mlir-opt --runner persistent``
crash-only, jobs 2     the same with ``--jobs 2``
differential           ``loomfuzz run --oracle differential`` (default twins, in process)
twins 0                the same with ``--twins 0``
differential, jobs 2   the same as differential with ``--jobs 2``
process path           the same as differential with ``--runner process`` (``--process-n``)
fuzz crash-only        ``loomfuzz fuzz --target mlir-opt --runner persistent --runs``
fuzz differential      ``loomfuzz fuzz --oracle differential --runs`` (the atheris path)
=====================  ==============================================================

For each row: programs per second by the whole command's wall clock (start-up included) and by
the command's own rate line (``programs/s over`` of ``run``, ``executions: (N/s`` of ``fuzz``),
the CPU seconds of the command and every process below it (a cpuacct cgroup per command, as
``bench_hunt.py`` measures: a fork server's workers are counted; ``RUSAGE_CHILDREN`` where no
cgroup can be made, which misses them), and the ratios that matter: each
judge's cost against crash-only (the wall time per program, and the CPU per program), and
``--jobs 2`` against ``--jobs 1`` for both oracles.  Every differential row must report no
finding on mlir-opt-22 (a false alarm fails the benchmark, exit 1).  A fuzz command's whole
time is mostly seeding its corpus: its rows are compared by their rate line.

``--baseline DIR`` adds the differential rows (jobs 1 and 2) run by another checkout (the
code before a change), interleaved with this one's: before and after in one run.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_hunt import chunk_cgroup, run_measured  # noqa: E402  (a cpuacct cgroup per command)

PIPELINE = "builtin.module(canonicalize,cse,sccp)"


@dataclass
class Row:
    name: str
    argv: list[str]
    programs: int
    fuzz: bool = False
    root: Path = ROOT  # the checkout whose harness runs the command
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)  # the command's own rate line
    findings: list[str] = field(default_factory=list)
    cpu_method: str = ""  # cpuacct (the command and every process below it) or rusage

    def per_second(self) -> float:
        return self.programs * len(self.walls) / sum(self.walls)

    def own_rate(self) -> float:
        return sum(self.rates) / len(self.rates) if self.rates else float("nan")

    def cpu_per_program(self) -> float:
        return sum(self.cpus) / (self.programs * len(self.cpus))


def _loomfuzz() -> list[str]:
    return [sys.executable, "-m", "harness.cli"]


def rows(args) -> list[Row]:
    common = ["--profile", "wide", "--pipeline", args.pipeline, "--seed", str(args.seed), "--no-progress"]
    run = [*_loomfuzz(), "run", "-n"]
    crash = ["--target", "mlir-opt", "--runner", "persistent", *common]
    differential = ["--oracle", "differential", *common]
    fuzz_common = ["--profile", "wide", "--pipeline", args.pipeline, "--seed", str(args.seed + 1),
                   "--runs", str(args.fuzz_runs)]
    out = [
        Row("crash-only", [*run, str(args.count), *crash], args.count),
        Row("crash-only, --jobs 2", [*run, str(args.count), *crash, "--jobs", "2"], args.count),
        Row("differential", [*run, str(args.count), *differential], args.count),
        Row("differential --twins 0", [*run, str(args.count), *differential, "--twins", "0"], args.count),
        Row("differential --jobs 2", [*run, str(args.count), *differential, "--jobs", "2"], args.count),
        Row("differential --runner process", [*run, str(args.process_count), *differential, "--runner",
                                              "process"], args.process_count),
    ]
    if args.baseline:
        base = Path(args.baseline).resolve()
        out += [Row("differential (baseline)", [*run, str(args.count), *differential], args.count, root=base),
                Row("differential --jobs 2 (baseline)", [*run, str(args.count), *differential, "--jobs", "2"],
                    args.count, root=base)]
    if args.fuzz_runs:
        fuzz = [*_loomfuzz(), "fuzz"]
        out += [Row("fuzz crash-only", [*fuzz, "--target", "mlir-opt", "--runner", "persistent", *fuzz_common],
                    args.fuzz_runs, fuzz=True),
                Row("fuzz differential", [*fuzz, "--oracle", "differential", *fuzz_common], args.fuzz_runs,
                    fuzz=True)]
    return out


_RUN_RATE = re.compile(r"([\d,.]+) programs/s over")
_FUZZ_RATE = re.compile(r"executions:\s+([\d,]+) \(([\d.]+)/s")
_FINDINGS = re.compile(r"findings:\s+(.*)")


def measure(row: Row, work: Path, round_: int) -> None:
    folder = work / f"{re.sub(r'[^a-z0-9]+', '-', row.name)}-{round_}"
    extra = ["--artifacts", str(folder)]
    if row.fuzz:
        extra += ["--corpus", str(folder / "corpus")]
    started = time.monotonic()
    group = chunk_cgroup(f"loomfuzz-judge-{os.getpid()}")
    result, cpu, method = run_measured(["nice", "-n", "5", *row.argv, *extra], group, cwd=row.root,
                                       env={**os.environ, "PYTHONPATH": str(row.root)})
    row.walls.append(time.monotonic() - started)
    row.cpus.append(cpu)
    row.cpu_method = method
    output = result.stdout + result.stderr
    if row.fuzz:
        match = _FUZZ_RATE.search(output)
        if match:
            row.rates.append(float(match.group(2)))
            row.programs = int(match.group(1).replace(",", ""))
    else:
        match = _RUN_RATE.search(output)
        if match:
            row.rates.append(float(match.group(1).replace(",", "")))
    if result.returncode not in (0, 1) or not match:
        raise SystemExit(f"{row.name}: exit {result.returncode}\n{output[-2000:]}")
    found = _FINDINGS.search(output)
    if found and found.group(1).strip() not in ("none", "0"):
        row.findings.append(found.group(1).strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    parser.add_argument("-n", "--count", type=int, default=2000, help="programs per run command (default 2000)")
    parser.add_argument("--process-n", dest="process_count", type=int, default=200,
                        help="programs of the --runner process row (default 200)")
    parser.add_argument("--fuzz-runs", type=int, default=1000,
                        help="executions per fuzz command (default 1000; 0: no fuzz rows)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, every row once each (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pipeline", default=PIPELINE)
    parser.add_argument("--baseline", metavar="DIR",
                        help="another checkout (its harness/ and native/: the code before a change): "
                             "its differential rows too, interleaved with this checkout's")
    args = parser.parse_args()
    table = rows(args)
    with tempfile.TemporaryDirectory(prefix="bench-judge-") as work:
        for round_ in range(args.rounds):
            for row in table:
                measure(row, Path(work), round_)
                print(f"  round {round_ + 1}: {row.name}: {row.walls[-1]:.1f} s", file=sys.stderr, flush=True)
    by = {row.name: row for row in table}
    crash = by["crash-only"]
    print(f"pipeline {args.pipeline}, wide programs seed {args.seed}, {args.rounds} round(s), "
          f"load average {os.getloadavg()[0]:.1f}, CPU by {crash.cpu_method}")
    print("| command | programs | programs/s (whole command) | programs/s (its rate line) | "
          "CPU ms/program | cost vs crash-only (wall) | cost vs crash-only (CPU) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    fuzz_crash = by.get("fuzz crash-only")
    for row in table:
        if row.fuzz:  # by the rate line (the whole command is mostly its corpus' seeding)
            print(f"| {row.name} | {row.programs:,} | | {row.own_rate():.1f} | | "
                  f"{fuzz_crash.own_rate() / row.own_rate():.2f}x (rate lines) | |")
            continue
        print(f"| {row.name} | {row.programs:,} | {row.per_second():.1f} | {row.own_rate():.1f} | "
              f"{row.cpu_per_program() * 1e3:.2f} | {crash.per_second() / row.per_second():.2f}x | "
              f"{row.cpu_per_program() / crash.cpu_per_program():.2f}x |")
    print(f"--jobs 2 / --jobs 1: crash-only {by['crash-only, --jobs 2'].per_second() / crash.per_second():.2f}x, "
          f"differential {by['differential --jobs 2'].per_second() / by['differential'].per_second():.2f}x "
          f"(whole commands, wall)")
    print(f"in process / process path: "
          f"{by['differential'].per_second() / by['differential --runner process'].per_second():.1f}x")
    if args.baseline:
        old, new = by["differential (baseline)"], by["differential"]
        print(f"this checkout / baseline: differential {new.per_second() / old.per_second():.2f}x, "
              f"--jobs 2 {by['differential --jobs 2'].per_second() / by['differential --jobs 2 (baseline)'].per_second():.2f}x")
    alarms = [f"{row.name}: {f}" for row in table if row.name != "crash-only" for f in row.findings]
    if alarms:
        print("false alarms on mlir-opt-22: " + "; ".join(alarms))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
