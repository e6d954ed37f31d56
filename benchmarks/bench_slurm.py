#!/usr/bin/env python3
"""A sweep slice on a real single-node Slurm cluster: one process vs a 4-task array.

    python benchmarks/bench_slurm.py [--count N] [--submits K]

Starts a throwaway cluster (deploy/slurm/local-cluster.sh) in a temporary
folder, builds the fake loom-opt (tests/fixtures/fake_loom_opt.c, --plant=segv)
and measures, on this machine's cores:

1. The test's sweep slice (indices 0..N-1, default 4000): one process
   (``loomfuzz enumerate --run --jobs 2``) against a 4-task job array
   (deploy/slurm/sweep.sbatch, one CPU per task: two tasks at a time on a
   2-core node), wall time from start (or submission) until every task is
   done.  Both find the same programs; on one machine the array cannot be
   faster: the point is that it runs.
2. Scheduler overhead per task: K single jobs (``sbatch --wrap``), each the
   time from ``sbatch`` until the job's first line runs (median and max).

The cluster is stopped at the end, also on failure.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLURM = ROOT / "deploy" / "slurm"


def _wait(env: dict, job: str, seconds: float = 600.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True, text=True).stdout
        if not out.strip():
            return
        time.sleep(0.05)
    raise SystemExit(f"bench_slurm: job {job} not done after {seconds} s")


def _findings(folders: list[Path]) -> set[str]:
    return {p.stem for folder in folders for p in folder.glob("crash-*.mlir")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--count", type=int, default=4000, help="programs in the slice (default 4000)")
    parser.add_argument("--submits", type=int, default=10, help="single jobs for the overhead (default 10)")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    cluster = work / "cluster"
    fake = work / "fake-loom-opt"
    subprocess.run([os.environ.get("CC", "cc"), "-O1", "-o", str(fake), str(ROOT / "tests/fixtures/fake_loom_opt.c")],
                   check=True)
    env = {**os.environ, "SLURM_CONF": str(cluster / "slurm.conf"), "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}:/usr/sbin"}
    target = ["--loom-opt", str(fake), "--pass-args=--plant=segv"]
    slice_ = ["--start", "0", "--count", str(options.count)]
    subprocess.run([str(SLURM / "local-cluster.sh"), "start", str(cluster)], check=True)
    try:
        load = os.getloadavg()[0]
        began = time.monotonic()
        subprocess.run([sys.executable, "-m", "harness.cli", "enumerate", "--run", *slice_, *target, "--jobs", "2",
                        "--artifacts", str(work / "one"), "--no-progress"], env=env, capture_output=True)
        one = time.monotonic() - began

        began = time.monotonic()
        array = subprocess.run(["sbatch", "--parsable", "--array=0-3", "--cpus-per-task=1", "--mem=1G",
                                str(SLURM / "sweep.sbatch"), *target, *slice_], cwd=work, check=True,
                               env={**env, "SHARDS": "4"}, capture_output=True, text=True).stdout.strip()
        _wait(env, array)
        spread = time.monotonic() - began
        same = _findings([work / "one"]) == _findings([work / "sweep" / f"shard-{k}" for k in range(4)])

        delays = []
        for n in range(options.submits):
            stamp = work / f"start-{n}"
            sent = time.time()
            job = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "--wrap",
                                  f"{sys.executable} -c 'import time; print(time.time())' > {stamp}"],
                                 cwd=work, env=env, check=True, capture_output=True, text=True).stdout.strip()
            _wait(env, job)
            delays.append(float(stamp.read_text()) - sent)
    finally:
        subprocess.run([str(SLURM / "local-cluster.sh"), "stop", str(cluster)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    print(f"bench_slurm: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load average {load:.2f} at the start")
    print(f"  sweep of {options.count:,} programs (fake loom-opt, --plant=segv)")
    print(f"    one process, --jobs 2:            {one:6.1f} s")
    print(f"    4-task Slurm array, 1 CPU a task:  {spread:6.1f} s   ({spread / one:.2f}x the one process; "
          f"same findings: {'yes' if same else 'NO'})")
    print(f"  scheduler overhead, sbatch to the job's first line ({options.submits} jobs): "
          f"median {statistics.median(delays):.2f} s, max {max(delays):.2f} s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
