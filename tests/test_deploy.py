"""deploy/: the Kubernetes Indexed Jobs and the Slurm job arrays render, for every
index, to a loomfuzz command line that loomfuzz's own parser takes and whose
shard is that index (no cluster runs here: the index environment is set the
way each engine sets it, and the scripts are run by bash itself; a real Slurm
cluster runs them in tests/test_slurm.py, no real Kubernetes cluster runs in
the tests), and every manifest is valid against the Kubernetes schema of
KUBERNETES_VERSION (kubernetes-validate, offline, strict: unknown fields fail)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from harness import cli
from harness.fuzzing.sweep import Shard, parse_shard

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.33"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))


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


def test_sweep_page_gnu_parallel_line_runs_every_shard():
    page = (ROOT / "docs" / "how-to" / "sweep.md").read_text()
    lines = re.findall(r"^parallel .*$", page, re.M)
    assert lines, "docs/how-to/sweep.md shows the GNU parallel one-liner"
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


def _stub_loomfuzz(tmp_path: Path) -> Path:
    """A loomfuzz on PATH that records its argv (and exits 0)."""
    stub = tmp_path / "bin" / "loomfuzz"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "open(os.environ['ARGV_OUT'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    stub.chmod(0o755)
    return stub


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_kubernetes_manifests_are_valid_for_a_named_version(manifest):
    documents = list(yaml.safe_load_all(manifest.read_text()))
    assert documents
    for document in documents:
        assert kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True) == KUBERNETES_VERSION
    # the validator does reject what Kubernetes would: a misspelt field, a wrong type
    broken = json.loads(json.dumps(documents[0]))
    broken["spec"]["completionz"] = broken["spec"].pop("completions")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    broken = json.loads(json.dumps(documents[0]))
    broken["spec"]["parallelism"] = "eight"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def _campaign_argv(tmp_path: Path, command: list[str], env: dict[str, str]) -> list[str]:
    out = tmp_path / "argv.jsonl"
    out.unlink(missing_ok=True)
    stub = _stub_loomfuzz(tmp_path)
    proc = subprocess.run(command, env={"PATH": f"{stub.parent}:{os.environ['PATH']}", "ARGV_OUT": str(out),
                                        **env}, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (line,) = out.read_text().splitlines()  # the stub exits 0: the time is up after one round
    return json.loads(line)


def test_campaign_workers_share_one_corpus_with_their_own_seed_and_folder(tmp_path):
    (job,) = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "campaign-job.yaml").read_text()))
    assert job["spec"]["completionMode"] == "Indexed"
    (container,) = job["spec"]["template"]["spec"]["containers"]
    script = container["command"][1]
    assert script == "/opt/loom-fuzz/deploy/slurm/campaign.sbatch"  # deploy/ inside the image
    env = {e["name"]: e["value"] for e in container["env"]}
    renderings = []
    for index in range(job["spec"]["completions"]):  # Kubernetes: the pod's index
        command = ["bash", str(DEPLOY / "slurm" / "campaign.sbatch"), *container["args"]]
        renderings.append(_campaign_argv(tmp_path, command, {**env, "JOB_COMPLETION_INDEX": str(index)}))
    sbatch = (DEPLOY / "slurm" / "campaign.sbatch").read_text()
    low, high = map(int, re.search(r"^#SBATCH --array=(\d+)-(\d+)$", sbatch, re.M).groups())
    for index in range(low, high + 1):  # Slurm: the array task's id
        command = ["bash", str(DEPLOY / "slurm" / "campaign.sbatch"), "--loom-opt", "/opt/loom/bin/loom-raise-opt"]
        renderings.append(_campaign_argv(tmp_path, command, {"SLURM_ARRAY_TASK_ID": str(index)}))
    for argv in renderings:
        args = _parse(argv)
        assert args.command == "fuzz" and args.loom_opt == "/opt/loom/bin/loom-raise-opt"
        assert str(args.corpus) == "campaign/corpus" and args.time >= 3599
    for engine in (renderings[:8], renderings[8:]):
        assert [str(_parse(a).artifacts) for a in engine] == [f"campaign/shard-{k}/run-0" for k in range(8)]
        assert len({_parse(a).seed for a in engine}) == 8
