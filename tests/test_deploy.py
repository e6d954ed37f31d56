"""deploy/: the Kubernetes Indexed Job and the Slurm job array render, for every
index, to a loomfuzz command line that loomfuzz's own parser takes and whose
shard is that index (no cluster runs here: the index environment is set the
way each engine sets it, and the sbatch script is run by bash itself)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import cli
from harness.fuzzing.sweep import Shard, parse_shard

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def _parse(argv: list[str]):
    """loomfuzz's own argparse parser on ``argv`` (what ``loomfuzz ARGV`` would parse)."""
    parser = cli._parser(argv[0])
    try:
        return parser.parse_args(argv)
    except SystemExit:
        pytest.fail(f"loomfuzz does not parse: {shlex.join(argv)}")


def _check(argv: list[str], env: dict[str, str], index: int, shards: int):
    args = _parse(argv)
    assert args.command == "enumerate" and args.run
    assert parse_shard(args.shard, env) == Shard(index, shards)
    return args


def test_kubernetes_indexed_job_gives_each_pod_its_shard():
    (job,) = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "sweep-job.yaml").read_text()))
    assert job["kind"] == "Job" and job["spec"]["completionMode"] == "Indexed"
    shards = job["spec"]["completions"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["loomfuzz"]
    argv = list(container["args"])
    assert f"--shard=auto/{shards}" in argv
    for index in range(shards):  # the Job controller sets JOB_COMPLETION_INDEX in each pod
        args = _check(argv, {"JOB_COMPLETION_INDEX": str(index)}, index, shards)
        assert args.artifacts == "/sweep/findings"
        mounts = [m["mountPath"] for m in container["volumeMounts"]]
        assert any(args.artifacts.startswith(m + "/") for m in mounts), "findings on the shared volume"


def test_slurm_array_gives_each_task_its_shard(tmp_path):
    script = (DEPLOY / "slurm" / "sweep.sbatch").read_text()
    low, high = map(int, re.search(r"^#SBATCH --array=(\d+)-(\d+)$", script, re.M).groups())
    assert low == 0
    shards = high + 1
    # a loomfuzz on PATH that records its argv: bash does the substitutions Slurm leaves to it
    stub = tmp_path / "bin" / "loomfuzz"
    stub.parent.mkdir()
    stub.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "open(os.environ['ARGV_OUT'], 'w').write(json.dumps(sys.argv[1:]))\n")
    stub.chmod(0o755)
    folders = set()
    for index in range(shards):
        env = {"PATH": f"{stub.parent}:{os.environ['PATH']}", "ARGV_OUT": str(tmp_path / "argv.json"),
               "SLURM_ARRAY_TASK_ID": str(index), "SLURM_ARRAY_JOB_ID": "77", "SLURM_CPUS_PER_TASK": "2"}
        proc = subprocess.run(["bash", str(DEPLOY / "slurm" / "sweep.sbatch")], env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        argv = json.loads((tmp_path / "argv.json").read_text())
        args = _check(argv, env, index, shards)
        assert args.jobs == 2
        folders.add(args.artifacts)
    assert folders == {f"sweep/shard-{k}" for k in range(shards)}


def test_readme_gnu_parallel_line_runs_every_shard():
    readme = (ROOT / "README.md").read_text()
    lines = re.findall(r"^parallel .*$", readme, re.M)
    assert lines, "README shows the GNU parallel one-liner"
    line = lines[0]
    command, _, values = line.partition(" ::: ")
    indices = subprocess.run(["bash", "-c", f"echo {values}"], capture_output=True, text=True).stdout.split()
    argv = shlex.split(command)
    assert argv[0] == "parallel"
    start = argv.index("loomfuzz")
    shards = int(re.search(r"--shard[ =]\{\}/(\d+)", command).group(1))
    assert [int(v) for v in indices] == list(range(shards))
    folders = set()
    for value in indices:  # GNU parallel puts each value in place of {}
        rendered = [a.replace("{}", value) for a in argv[start + 1:]]
        args = _check(rendered, {}, int(value), shards)
        folders.add(args.artifacts)
    assert len(folders) == shards
