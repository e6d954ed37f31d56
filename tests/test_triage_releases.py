"""The releases a wrong-code bucket reproduces on (issue 35 item 4: ``triage --releases``).

Real ``loomfuzz`` subprocesses, the real installed releases (mlir-opt-15, -16, -19, -22
from .ci/setup; the development head: the iree-base-compiler wheel's iree-opt and
mlir-opt-head, with every upstream pass, over the torch-mlir wheel's bindings) and the
trusted toolchain (mlir-opt-22 lowering, mlir-runner-22); the reference values are the
interpreter's.  Two real findings:

* a finding of ``run --oracle differential`` through the test double
  tests/fixtures/wrong_rewrite_opt.py (mlir-opt-22 with a wrong rewrite planted under
  ``cse``): it reproduces on the double alone, every real release computes right;
* the real MLIR 22 bug of docs/reference/upstream-bugs.md: ``int-range-optimizations``
  folds ``ceildivsi(INT_MIN, d > 0)`` to its negation (llvm/llvm-project #214637,
  #215696), the pinned program tests/programs/upstream_ceildivsi_int_min_wide.mlir with
  the constant twins the hunt found it with (its ``NAME.exec.mlir`` sidecar, as ``run``
  writes it).  MLIR 19 folds it right; MLIR 15 and iree-opt have no such pass; the head
  with every pass folds it wrong too (its own JIT says so).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.execute.exec_rendering import exec_module
from harness.execute.twins import TwinPlan, with_twins
from harness.targets.identity import which
from harness.triage.crashdb import TriageDB
from harness.triage.releases import found_releases, releases_from_option

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "fixtures" / "wrong_rewrite_opt.py"
DOUBLE_PIPELINE = "builtin.module(canonicalize,cse,sccp)"
CEILDIVSI = ROOT / "tests" / "programs" / "upstream_ceildivsi_int_min_wide.mlir"
CEILDIVSI_TWINS = "8:ff,21:83"  # the hunt's finding's constant twins (tests/test_upstream_mlir.py)
CEILDIVSI_PIPELINE = "builtin.module(int-range-optimizations,canonicalize)"


def loomfuzz(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)


def installed(*names: str) -> None:
    missing = [name for name in names if which(name) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed (bash .ci/setup installs them)")


@pytest.fixture(scope="module")
def double_finding(tmp_path_factory) -> tuple[Path, Path]:
    """(folder with one wrong-code finding, the double): 8 wide programs through the double."""
    work = tmp_path_factory.mktemp("double")
    optimizer = work / "buggy-opt"
    optimizer.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} "$@"\n')
    optimizer.chmod(0o755)
    done = loomfuzz("run", "--profile", "wide", "-n", 8, "--seed", 3, "--oracle", "differential",
                    "--pipeline", DOUBLE_PIPELINE, "--mlir-opt", optimizer, "--artifacts", work / "a",
                    "--no-progress")
    assert done.returncode == 1, done.stderr[-2000:]
    assert len(list((work / "a").glob("crash-*.json"))) >= 1
    return work / "a", optimizer


def triage_double(double_finding, out: Path, *extra) -> subprocess.CompletedProcess:
    folder, optimizer = double_finding
    return loomfuzz("triage", folder, "--profile", "wide", "--oracle", "differential", "--mlir-opt", optimizer,
                    "--pipeline", DOUBLE_PIPELINE, "--out", out, "--max-candidates", 12, *extra)


def the_bucket(out: Path):
    with TriageDB(str(out / "triage.db"), create=False) as db:
        (bucket,) = db.buckets("differential")
    return bucket, json.loads(bucket["details"])


def by_name(details: dict) -> dict[str, dict]:
    return {r["name"]: r for r in details["releases"]}


@pytest.fixture(scope="module")
def double_triaged(double_finding, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    installed("mlir-opt-15", "mlir-opt-16", "mlir-opt-19", "mlir-opt-22", "iree-opt", "mlir-opt-head")
    out = tmp_path_factory.mktemp("double-triaged") / "t"
    done = triage_double(double_finding, out)  # --releases auto, the default; progress lines (no terminal)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def test_a_planted_rewrite_reproduces_on_the_double_alone(double_triaged, double_finding):
    out, done = double_triaged
    bucket, details = the_bucket(out)
    assert bucket["kind"] == "wrong-code" and bucket["culprit"] == "cse"
    assert details["found_pipeline"] == DOUBLE_PIPELINE  # the whole pipeline, not the bisection's prefix
    releases = details["releases"]
    names = [r["name"] for r in releases]
    # the optimizer under test first, then the releases in release order
    assert names == ["buggy-opt", "MLIR 15", "MLIR 16", "MLIR 19", "MLIR 22", "head (24.0.0git, iree-opt)",
                     "head (24.0.0git, mlir-opt-head)"], names
    double, found = releases[0], by_name(details)
    assert double["under_test"] and double["binary"] == str(double_finding[1])
    assert double["result"] == "reproduces" and double["same_first_difference"] is True, double
    for name in ("MLIR 15", "MLIR 16", "MLIR 19", "MLIR 22", "head (24.0.0git, mlir-opt-head)"):
        # MLIR 15/16: the program without flags; the head with every pass: run by its own JIT
        assert found[name]["result"] == "correct", found[name]
        assert not found[name]["under_test"]
    assert found["MLIR 22"]["version"].startswith("22.") and found["MLIR 22"]["binary"].endswith("mlir-opt-22")
    head = found["head (24.0.0git, iree-opt)"]
    assert head["result"] == "rejects" and head["detail"] == "it has no pass sccp", head
    # said once which releases were found, and shown by the progress line of the minimize stage
    (said,) = [line for line in done.stderr.splitlines() if line.startswith("triage: releases found: ")]
    assert "MLIR 19 (/usr/bin/mlir-opt-19, LLVM 19." in said and "iree-opt, LLVM 24.0.0git)" in said
    assert "mlir-opt-head, LLVM 24.0.0git)" in said
    assert re.search(r"triage: minimize 1/1 buckets, 7 release judgement\(s\)", done.stderr), done.stderr
    summary = ("buggy-opt (under test): reproduces; MLIR 15: correct; MLIR 16: correct; MLIR 19: correct; "
               "MLIR 22: correct; head (24.0.0git, iree-opt): rejects; head (24.0.0git, mlir-opt-head): correct")
    assert f"  releases: {summary}" in done.stdout.splitlines()


def test_the_reports_show_where_it_reproduces(double_triaged, double_finding):
    out, _ = double_triaged
    bucket, details = the_bucket(out)
    report = json.loads((out / "report.json").read_text())
    (entry,) = [b for b in report["buckets"] if b["id"] == bucket["id"]]
    assert entry["details"]["releases"] == details["releases"]
    assert set(details["releases"][0]) == {"name", "binary", "version", "result", "detail",
                                           "same_first_difference", "under_test"}
    md = (out / "report.md").read_text()
    assert (f"- [bucket {bucket['id']}](#bucket-{bucket['id']}): buggy-opt (under test): reproduces; "
            "MLIR 15: correct") in md  # the summary, per bucket
    assert f"Reproduces on (the minimized program under `{DOUBLE_PIPELINE}`" in md
    assert "| build | binary | LLVM | result | detail |" in md
    assert re.search(r"\| MLIR 19 \| `/usr/bin/mlir-opt-19` \| 19\.\d+\.\d+ \| correct \|", md), md
    assert "| head (24.0.0git, iree-opt) | " in md and "| rejects | it has no pass sccp |" in md
    page = (out / "report.html").read_text()
    assert '<table class="releases">' in page and '<ul id="releases">' in page
    assert '<tr class="release reproduces"><td>buggy-opt <small>(under test)</small>' in page
    assert page.count('<tr class="release correct">') == 5
    shown = loomfuzz("triage", "show", bucket["id"], "--db", out / "triage.db", "--out", out)
    assert shown.returncode == 0, shown.stderr
    assert "releases:     buggy-opt (under test): reproduces; MLIR 15: correct" in shown.stdout
    assert f"(under {DOUBLE_PIPELINE})" in shown.stdout


def test_named_releases_none_and_a_missing_one(double_finding, tmp_path):
    named = triage_double(double_finding, tmp_path / "named", "--no-progress",
                          "--releases", f"mlir-opt-19,{tmp_path / 'mlir-opt-99'},/usr/bin/mlir-opt-19")
    assert named.returncode == 0, named.stderr[-3000:]
    assert "triage: releases named: " in named.stderr
    _, details = the_bucket(tmp_path / "named")
    names = [r["name"] for r in details["releases"]]
    assert names == ["buggy-opt", "MLIR 19", "mlir-opt-99"], names  # mlir-opt-19 once, whatever its names
    missing = details["releases"][2]
    assert missing["result"] == "not run" and missing["version"] is None
    assert missing["detail"] == f"{tmp_path / 'mlir-opt-99'} is not an executable file or on PATH"
    assert details["releases"][1]["result"] == "correct"

    none = triage_double(double_finding, tmp_path / "none", "--no-progress", "--releases", "none")
    assert none.returncode == 0, none.stderr[-3000:]
    _, details = the_bucket(tmp_path / "none")
    assert "releases" not in details and "triage: releases" not in none.stderr
    assert "  releases: " not in none.stdout
    assert "Reproduces on" not in (tmp_path / "none" / "report.md").read_text()

    bad = triage_double(double_finding, tmp_path / "bad", "--releases", "mlir-opt-19,")
    assert bad.returncode == 1 and bad.stderr.strip().splitlines() == [
        "loomfuzz triage: error: --releases takes auto, none or PATH[,PATH...], not 'mlir-opt-19,'"]


def test_the_upstream_ceildivsi_bug_reproduces_on_mlir_22_not_19(tmp_path):
    """The real bug through real mlir-opt-22 as the optimizer under test: MLIR 22 (and 16)
    fold ceildivsi(INT_MIN, 3) to +715827882, MLIR 19 computes -715827882, as the
    interpreter does; MLIR 15 and iree-opt have no int-range-optimizations; the head with
    every pass reproduces it, judged by its own JIT."""
    installed("mlir-opt-15", "mlir-opt-16", "mlir-opt-19", "mlir-opt-22", "iree-opt", "mlir-opt-head")
    folder = tmp_path / "a"
    folder.mkdir()
    program = CEILDIVSI.read_text()
    (folder / "crash-ceildivsi.mlir").write_text(program)
    (folder / "crash-ceildivsi.exec.mlir").write_text(with_twins(exec_module(program), TwinPlan.parse(CEILDIVSI_TWINS)))
    (folder / "crash-ceildivsi.json").write_text(json.dumps({"finding_kind": "wrong-code"}))
    out = tmp_path / "t"
    done = loomfuzz("triage", folder, "--profile", "wide", "--oracle", "differential", "--pipeline",
                    CEILDIVSI_PIPELINE, "--out", out, "--max-candidates", 20, "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    bucket, details = the_bucket(out)
    assert bucket["culprit"] == "int-range-optimizations" and "arith.ceildivsi" in bucket["minimized_text"]
    assert (details["reference_value"], details["observed_value"]) == ("-715827882", "715827882")
    found = by_name(details)
    assert list(found) == ["MLIR 15", "MLIR 16", "MLIR 19", "MLIR 22", "head (24.0.0git, iree-opt)",
                           "head (24.0.0git, mlir-opt-head)"]  # 22 is under test
    assert found["MLIR 22"]["under_test"] and found["MLIR 22"]["result"] == "reproduces"
    assert found["MLIR 22"]["same_first_difference"] is True
    assert found["MLIR 19"]["result"] == "correct", found["MLIR 19"]
    assert found["MLIR 16"]["result"] == "reproduces" and found["MLIR 16"]["same_first_difference"] is True
    every_pass = found["head (24.0.0git, mlir-opt-head)"]
    assert every_pass["result"] == "reproduces" and every_pass["same_first_difference"] is True, every_pass
    for name in ("MLIR 15", "head (24.0.0git, iree-opt)"):
        assert found[name]["result"] == "rejects"
        assert found[name]["detail"] == "it has no pass int-range-optimizations", found[name]
    assert ("MLIR 15: rejects; MLIR 16: reproduces; MLIR 19: correct; MLIR 22 (under test): reproduces; "
            "head (24.0.0git, iree-opt): rejects; head (24.0.0git, mlir-opt-head): reproduces") in (
        out / "report.md").read_text()


def test_auto_finds_each_mlir_opt_n_once_in_release_order(tmp_path):
    installed("mlir-opt-16", "mlir-opt-19", "iree-opt", "mlir-opt-head")
    folder = tmp_path / "bin"
    folder.mkdir()
    os.symlink(which("mlir-opt-19"), folder / "mlir-opt-19")
    os.symlink(which("mlir-opt-19"), folder / "mlir-opt-91")  # the same binary under another name
    os.symlink(which("mlir-opt-16"), folder / "mlir-opt-16")
    os.symlink(which("mlir-opt-16"), folder / "mlir-opt-tool")  # no mlir-opt-N: not a release
    (folder / "mlir-opt-18").write_text("not executable\n")
    found = found_releases(str(folder))
    assert found[:2] == [str(folder / "mlir-opt-16"), str(folder / "mlir-opt-19")]
    # the heads' tools, beside this Python or on PATH: the one with every pass first
    assert [os.path.basename(p) for p in found[2:]] == ["mlir-opt-head", "iree-opt"]
    selection = releases_from_option("auto", path=str(folder))
    assert [r.name for r in selection.releases] == ["MLIR 16", "MLIR 19", "head (24.0.0git, iree-opt)",
                                                    "head (24.0.0git, mlir-opt-head)"]
    assert selection.describe().startswith(f"releases found: MLIR 16 ({folder / 'mlir-opt-16'}, LLVM 16.")
    assert releases_from_option("none").releases == ()
    with pytest.raises(ValueError, match="--releases takes auto, none or PATH"):
        releases_from_option("")
