#!/usr/bin/env python3
"""Constant twins: what the optimizer does with them, what they cost, what they find.

    python benchmarks/bench_twins.py [-n N] [--seed S] [--false-alarms M] [--quick]

On N wide programs (seed S), side by side in one run:

* (a) **what the optimizer changes**, per pass (mlir-opt-22, each pass alone):
  the share of functions whose body it changes and the share of their
  ``arith`` operations (other than constants) it removes, in the original
  functions and in their twins (the first twin: every input a constant from
  a row of edge values);
* (b) **what twins cost**: the differential judge in process
  (``loomfuzz run --oracle differential``, canonicalize,cse,sccp) with the
  share of twinned programs 0, 0.25 (the default) and 1: programs per second
  and the ratio to no twins;
* (c) **what they find**: the two planted folds of
  tests/fixtures/edge_fold_opt.py (an edge constant, a narrow known range),
  findings with twins 0, 0.25 and 1;
* (d) **false alarms**: M programs (default 2,000), every one with twins,
  through mlir-opt-22 with canonicalize,cse,sccp and with
  int-range-optimizations: findings (must be 0).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.contract import load_grammar  # noqa: E402
from harness.core.engine import generate  # noqa: E402
from harness.core.render import renderer  # noqa: E402
from harness.execute.exec_rendering import exec_module  # noqa: E402
from harness.execute.twins import TwinPlan, plan_for, with_twins  # noqa: E402

PASSES = ("canonicalize", "sccp", "cse", "int-range-optimizations", "arith-int-range-narrowing{int-bitwidths-supported=8,16}",
          "loop-invariant-code-motion", "inline")
DOUBLE = ROOT / "tests" / "fixtures" / "edge_fold_opt.py"
_FUNCTION = re.compile(r"^\s*func\.func @([\w$.-]+)\(.*?^\s{0,2}\}$", re.M | re.S)
_OP = re.compile(r"= arith\.(?!constant)\w+")


def programs(count: int, seed: int) -> list[str]:
    grammar = load_grammar(None, "wide")
    render = renderer(grammar, "canonical").render
    return [render(tree) for tree in generate(grammar, "fast", seed, count)]


def _bodies(text: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in _FUNCTION.finditer(text)}


def _normal(body: str) -> list[str]:
    """A body's operations without SSA names (so renaming is no change)."""
    return [re.sub(r"%[\w$.#-]+", "%", line.strip()) for line in body.splitlines()[1:]]


def changes(texts: list[str]) -> dict[str, dict[str, list[int]]]:
    """pass -> side -> [functions, changed, ops before, ops after]."""
    out = {}
    for name in PASSES:
        sides = {"original": [0, 0, 0, 0], "twin": [0, 0, 0, 0]}
        for text in texts:
            done = subprocess.run(["mlir-opt-22", f"--pass-pipeline=builtin.module({name})"], input=text,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                continue
            before, after = _bodies(text), _bodies(done.stdout)
            printed = _bodies(subprocess.run(["mlir-opt-22"], input=text, capture_output=True, text=True).stdout)
            for symbol in before:
                if symbol == "main" or not symbol.startswith(("region_", "thread_")) and "__twin" not in symbol:
                    continue
                side = sides["twin" if "__twin" in symbol else "original"]
                side[0] += 1
                side[1] += _normal(after.get(symbol, "")) != _normal(printed.get(symbol, ""))
                side[2] += len(_OP.findall(printed.get(symbol, "")))
                side[3] += len(_OP.findall(after.get(symbol, "")))
        out[name] = sides
    return out


def loomfuzz_run(work: Path, *args: str) -> tuple[float, int, str]:
    """(seconds, findings, the summary's run line) of one ``loomfuzz run``."""
    artifacts = work / f"a{time.monotonic_ns()}"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--oracle", "differential",
                           "--profile", "wide", "--no-progress", "--artifacts", str(artifacts), *args],
                          cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"loomfuzz run failed: {done.stderr.strip()}")
    return seconds, len(list(artifacts.glob("crash-*.json"))), done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--false-alarms", type=int, default=2000, metavar="M")
    parser.add_argument("--quick", action="store_true", help="-n 60 --false-alarms 200")
    args = parser.parse_args()
    if args.quick:
        args.n, args.false_alarms = 60, 200
    texts = programs(args.n, args.seed)
    twinned = [with_twins(exec_module(p), TwinPlan((plan_for(p).rows[0],))) for p in texts]

    print(f"(a) what mlir-opt-22 changes, {args.n} wide programs (seed {args.seed}), each pass alone")
    print(f"  {'pass':<40} {'functions changed':>27} {'arith ops removed':>27}")
    print(f"  {'':<40} {'original':>13} {'twin':>13} {'original':>13} {'twin':>13}")
    for name, sides in changes(twinned).items():
        o, t = sides["original"], sides["twin"]
        share = lambda a, b: f"{100 * a / b:5.1f}%" if b else "    -"  # noqa: E731
        print(f"  {name[:40]:<40} {share(o[1], o[0]):>13} {share(t[1], t[0]):>13} "
              f"{share(o[2] - o[3], o[2]):>13} {share(t[2] - t[3], t[2]):>13}")

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"\n(b) the judge in process with twins, {args.n} programs, canonicalize,cse,sccp "
              f"(interleaved, twice each)")
        seconds = {share: 0.0 for share in ("0", "0.25", "1")}
        for _ in range(2):
            for share in seconds:
                seconds[share] += loomfuzz_run(work, "-n", str(args.n), "--seed", str(args.seed), "--twins", share,
                                               "--pipeline", "builtin.module(canonicalize,cse,sccp)")[0]
        for share, spent in seconds.items():
            print(f"  twins {share:>4}: {2 * args.n / spent:6.1f} programs/s  "
                  f"(cost {spent / seconds['0']:.2f}x no twins)")

        print(f"\n(c) planted folds found (tests/fixtures/edge_fold_opt.py), {args.n} programs")
        for bug in ("edge", "range"):
            wrapper = work / f"{bug}-opt"
            wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} --bug={bug} "$@"\n')
            wrapper.chmod(0o755)
            found = {share: loomfuzz_run(work, "--mlir-opt", str(wrapper), "-n", str(args.n), "--seed",
                                         str(args.seed), "--twins", share, "--pipeline",
                                         "builtin.module(canonicalize)")[1] for share in ("0", "0.25", "1")}
            print(f"  {bug:<6} findings: " + ", ".join(f"twins {s}: {n}" for s, n in found.items()))

        print(f"\n(d) false alarms on mlir-opt-22, {args.false_alarms} programs, all with twins")
        for pipeline in ("builtin.module(canonicalize,cse,sccp)", "builtin.module(int-range-optimizations)"):
            spent, found, _ = loomfuzz_run(work, "-n", str(args.false_alarms), "--seed", str(args.seed + 1),
                                           "--twins", "1", "--pipeline", pipeline)
            print(f"  {pipeline:<42} findings {found}  ({spent:.0f} s)")
            if found:
                print("  a finding on the real mlir-opt-22: a false alarm until proven a known bug "
                      "(tests/test_upstream_mlir.py, docs/reference/upstream-bugs.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
