"""loomfuzz merge: shard folders of real sweeps as one summary, duplicates counted once,
bad input one line and exit 2 (the Slurm path runs it on a real cluster: test_slurm.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _loomfuzz(*argv, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, argv)], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def test_merged_shards_are_the_whole_sweep_and_duplicates_count_once(fake_loom_opt, tmp_path):
    target = ["--loom-opt", fake_loom_opt, "--pass-args=--plant=segv", "--no-progress"]
    _loomfuzz("enumerate", "--run", "--count", "600", "--artifacts", "whole", *target, cwd=tmp_path)
    for k in range(3):
        _loomfuzz("enumerate", "--run", "--count", "600", "--shard", f"{k}/3", "--artifacts", f"shard-{k}",
                  *target, cwd=tmp_path)
    whole = {p.read_text() for p in (tmp_path / "whole").glob("crash-*.mlir")}
    assert whole
    # a program found again by another shard (as campaign workers do) is one finding
    copy = next((tmp_path / "shard-0").glob("crash-*.mlir"))
    (tmp_path / "shard-2" / "again").mkdir()
    for suffix in (".mlir", ".json"):
        shutil.copy(copy.with_suffix(suffix), tmp_path / "shard-2" / "again" / ("crash-copy" + suffix))

    proc = _loomfuzz("merge", "shard-0", "shard-1", "shard-2", "--out", "merged", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["findings"] == len(whole)
    distinct = {Path(tmp_path, f["files"][0]).read_text() for f in summary["distinct_findings"]}
    assert distinct == whole
    (twice,) = [f for f in summary["distinct_findings"] if len(f["files"]) == 2]
    assert twice["shards"] == ["shard-0", "shard-2"]
    assert sum(summary["outcomes"].values()) == 600
    (sweep,) = summary["sweeps"].values()
    assert sweep["range"] == [0, 600] and sweep["missing"] == 0 and sweep["gaps"] == 0
    assert (tmp_path / "merged" / "summary.md").read_text().startswith("# Merged summary of 3 shard(s)")

    # a shard left out: the summary says which part is missing, exit 1
    proc = _loomfuzz("merge", "shard-0", "shard-2", cwd=tmp_path)
    assert proc.returncode == 1
    assert "gap(s)" in proc.stdout


def test_a_folder_that_is_no_shard_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = _loomfuzz("merge", "empty", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("loomfuzz merge: error: empty: not a shard folder")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "sweep-000000000000.jsonl").write_text("not json\n")
    proc = _loomfuzz("merge", "bad", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "bad/sweep-000000000000.jsonl:1: not a loom-fuzz sweep journal" in line
    assert not (tmp_path / "merged").exists()
