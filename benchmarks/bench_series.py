#!/usr/bin/env python3
"""What recording stats.csv costs a campaign (issue 12).

1. The fuzz target's per-execution hook: the check after every execution,
   and one row written (every --stats-interval seconds), in microseconds.
2. The campaign's sampler: one merged row (read the workers' new rows,
   count a corpus folder of 5,000 files, scan the artifacts folder).
3. End to end: the fuzz target replaying the same inputs against the fake
   loom-opt (tests/fixtures/fake_loom_opt.c, no planted bug), statistics off
   (no stats file in the options) and on (a row every 0.1 s, 20x the default rate),
   alternated, best of N each.

    python benchmarks/bench_series.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.codec import encode, nonempty  # noqa: E402
from harness.core.grammar import default_grammar  # noqa: E402
from harness.core.walk import random_trees  # noqa: E402
from harness.fuzzing.options import FeatureMode, FuzzOptions, StatsOptions, write_options  # noqa: E402
from harness.fuzzing.campaign_series import CampaignSeries  # noqa: E402
from harness.fuzzing.worker_series import WorkerSeries  # noqa: E402
from harness.fuzzing.worker_summary import read_summaries  # noqa: E402

FUZZ_TARGET = REPO / "fuzz_targets" / "loom_opt_fuzzer.py"


def hook_costs(workdir: Path) -> tuple[float, float]:
    """(µs per execution for the due-check, µs per row written)."""
    series = WorkerSeries(workdir / "w.csv", "pid-1", interval=3600)
    now = time.monotonic()
    check = timeit.timeit(lambda: now >= series.next_row, number=1_000_000) / 1_000_000 * 1e6
    rows = 2000
    started = time.perf_counter()
    for i in range(rows):
        series.record(i, 17)
    row = (time.perf_counter() - started) / rows * 1e6
    return check, row


def sampler_cost(workdir: Path, samples: int) -> float:
    """ms per merged row with two workers writing and a corpus of 5,000 files."""
    from harness.fuzzing.corpus import count_files
    from harness.fuzzing.findings import FindingCounter

    corpus, artifacts = workdir / "corpus", workdir / "artifacts"
    corpus.mkdir()
    artifacts.mkdir()
    for i in range(5000):
        (corpus / f"{i:040x}").write_bytes(b"\1\2\3")
    series = CampaignSeries(artifacts, corpus_size=lambda: count_files(corpus),
                            findings=FindingCounter(artifacts, set()).counts,
                            libfuzzer_executions=lambda: None, interval=3600)
    workers = [WorkerSeries(series.workers_path, f"job-{k}", 3600) for k in (1, 2)]
    started = time.perf_counter()
    for i in range(samples):
        for worker in workers:
            worker.record(i * 10, 5)
        series.sample()
    return (time.perf_counter() - started) / samples * 1e3


def replay(binary: str, workdir: Path, files: list[str], stats: bool) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOMFUZZ_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    summary = workdir / "replay-summary.jsonl"
    summary.unlink(missing_ok=True)
    options = FuzzOptions(
        target="loom-opt", binary=binary, pass_args=("--plant=none",), grammar_features=FeatureMode.OFF,
        artifacts=workdir / "replay", summary=summary,
        stats=StatsOptions(workdir / "replay-stats.csv", 0.1) if stats else None)
    write_options(options, workdir / "replay-options.json")
    command = [sys.executable, str(FUZZ_TARGET), f"--options={workdir / 'replay-options.json'}", *files]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=workdir)
    records = read_summaries(summary)
    if len(records) != 1 or records[0].executions != len(files):
        sys.exit(f"bench_series: the replay did not run every input:\n{proc.stderr[-3000:]}")
    return records[0].exec_per_second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--quick", action="store_true", help="fewer inputs and rounds")
    args = parser.parse_args()
    inputs_n, rounds, samples = (600, 2, 20) if args.quick else (2000, 5, 100)
    with tempfile.TemporaryDirectory(prefix="bench-series-") as tmp:
        workdir = Path(tmp)
        check, row = hook_costs(workdir)
        print(f"1. fuzz target hook: {check:.3f} us per execution (the due-check), {row:.1f} us per row written")
        print(f"2. campaign sampler: {sampler_cost(workdir, samples):.2f} ms per merged row "
              "(2 workers, corpus of 5,000 files)")
        binary = str(workdir / "fake-loom-opt")
        subprocess.run(["cc", "-O1", "-o", binary, str(REPO / "tests" / "fixtures" / "fake_loom_opt.c")],
                       check=True)
        folder = workdir / "inputs"
        folder.mkdir()
        files = []
        grammar = default_grammar()
        for i, tree in enumerate(random_trees(grammar, 9, inputs_n)):
            path = folder / f"{i:05d}"
            path.write_bytes(nonempty(encode(tree, grammar), tree, grammar))
            files.append(str(path))
        best = {False: 0.0, True: 0.0}
        for _ in range(rounds):
            for stats in (False, True):
                best[stats] = max(best[stats], replay(binary, workdir, files, stats))
        rows = (workdir / "replay-stats.csv").read_text().count("\n") - 1
        print(f"3. fuzz target, the same {inputs_n} inputs (best of {rounds}): {best[False]:.1f} exec/s "
              f"without stats, {best[True]:.1f} with a row every 0.1 s ({rows} rows in all rounds) "
              f"-> ratio {best[True] / best[False]:.3f}")


if __name__ == "__main__":
    main()
