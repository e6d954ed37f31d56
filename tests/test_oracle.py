"""``--oracle differential`` on ``run``: the planted wrong rewrites of the double are found,
real mlir-opt-22 raises no false alarm, bad settings are one line and exit 2."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.execute.interpret import interpret_program
from harness.execute.exec_layout import layout_of
from harness.execute.twins import expected_output, plan_of
from harness.execute.toolchain import Toolchain, ToolchainError
from twin_values import interpreted

ROOT = Path(__file__).resolve().parents[1]
DOUBLE = ROOT / "tests" / "fixtures" / "wrong_rewrite_opt.py"
PIPELINE = "builtin.module(canonicalize,cse,sccp)"


@pytest.fixture(scope="module", autouse=True)
def toolchain():
    try:
        Toolchain().check()
    except ToolchainError as error:  # .ci/setup installs it: a missing toolchain is a failure
        pytest.fail(str(error))


def loomfuzz(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=None)


def _run(tmp_path: Path, *extra: str, count: int) -> subprocess.CompletedProcess:
    return loomfuzz("run", "--profile", "wide", "-n", str(count), "--seed", "3", "--oracle",
                    "differential", "--pipeline", PIPELINE, "--artifacts", str(tmp_path / "a"),
                    "--no-progress", "--jobs", "2", *extra, cwd=ROOT)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """100 wide programs through the double (canonicalize, cse, sccp): (folder, optimizer, log)."""
    tmp_path = tmp_path_factory.mktemp("swept")
    log = tmp_path / "planted.log"
    optimizer = tmp_path / "buggy-opt"  # the double, logging what it plants
    optimizer.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} --plant-log={log} "$@"\n')
    optimizer.chmod(0o755)
    done = _run(tmp_path, "--mlir-opt", str(optimizer), count=100)
    assert done.returncode == 1, done.stderr
    return tmp_path, optimizer, log


def test_each_planted_wrong_rewrite_is_found(swept):
    tmp_path, _, log = swept
    planted = log.read_text()
    for op in ("arith.subi", "arith.maxsi", "arith.xori"):
        assert op in planted  # every bug had its chance
    findings = sorted((tmp_path / "a").glob("crash-*.json"))
    assert len(findings) >= 3
    kinds = set()
    for path in findings:
        record = json.loads(path.read_text())
        name = path.name.removesuffix(".json")
        program = (tmp_path / "a" / f"{name}.mlir").read_text()
        assert record["finding_kind"] == "wrong-code"
        kinds.add(record["finding_kind"])
        assert "dataflow.thread" in program  # the canonical program
        assert name == "crash-" + hashlib.sha1(program.encode()).hexdigest()
        oracle = record["oracle"]
        # the reference values are the interpreter's, computed from the program alone (a
        # program judged with constant twins: their lines repeat their rows' values)
        exec_text = (tmp_path / "a" / f"{name}.exec.mlir").read_text()
        expected = interpret_program(program)
        if plan_of(exec_text) is not None:
            expected = expected_output(layout_of(exec_text), expected)
        assert oracle["reference_output"] == expected
        assert oracle["target_output"] != oracle["reference_output"]
        first = oracle["differences"][0]
        ref_line = oracle["reference_output"].splitlines()[first["line"] - 1]
        assert first["reference"] in ref_line.split(", ")
        assert str(first["row"]) == ref_line.split(", ")[1]
        optimized = (tmp_path / "a" / f"{name}.optimized.mlir").read_text()
        assert "func.func @main" in exec_text and "func.func @main" in optimized
        assert "mlir-runner-22" in record["command"]
    assert kinds == {"wrong-code"}


def test_no_false_alarm_on_mlir_opt_22(tmp_path):
    done = _run(tmp_path, count=100)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "findings:   none" in done.stdout
    assert "100 programs" in done.stdout.replace(",", "")


@pytest.mark.parametrize("extra, said", [
    (("--pipeline", "builtin.module(no-such-pass)"), "fails on a trivial module"),
    (("--reference-runner", "/nonexistent/mlir-runner"), "the reference runner"),
    (("--runtime-library", "/nonexistent/libmlir_c_runner_utils.so"), "the runtime library"),
    (("--mlir-opt", "/bin/echo"), "does not print MLIR"),
    (("--mlir-opt", "/nonexistent/opt"), "not an executable file"),
])
def test_bad_settings_are_one_line_and_exit_2(tmp_path, extra, said):
    done = loomfuzz("run", "--profile", "wide", "-n", "3", "--oracle", "differential",
                    "--artifacts", str(tmp_path / "a"), "--no-progress", *extra, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and lines[0].startswith("loomfuzz run: error:")
    assert not list((tmp_path / "a").glob("crash-*")) if (tmp_path / "a").exists() else True


PLANTED = {"cse": "arith.subi", "canonicalize": "arith.maxsi", "sccp": "arith.xori"}


def test_triage_gives_one_bucket_per_planted_bug_and_a_lit_test(swept, tmp_path):
    folder, optimizer, _ = swept
    done = loomfuzz("triage", str(folder / "a"), "--profile", "wide", "--oracle", "differential",
                    "--mlir-opt", str(optimizer), "--pipeline", PIPELINE, "--out", str(tmp_path / "t"),
                    "--max-candidates", "12", "--no-progress", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "t" / "report.json").read_text())
    buckets = report["buckets"]
    assert {b["oracle"] for b in buckets} == {"differential"} and {b["kind"] for b in buckets} == {"wrong-code"}
    culprits = [b["culprit"] for b in buckets]
    assert sorted(culprits) == sorted(set(culprits))  # one bucket per culprit pass
    assert set(culprits) <= set(PLANTED) and len(culprits) >= 2
    originals = [p.read_text() for p in (folder / "a").glob("crash-*.mlir") if ".exec" not in p.name
                 and ".optimized" not in p.name]
    assert sum(b["members"] for b in buckets) == len(originals)
    for bucket in buckets:
        program = (tmp_path / "t" / bucket["minimized"]["path"]).read_text()
        assert PLANTED[bucket["culprit"]] in program  # the op the planted bug rewrites survives
        assert len(program) < min(len(text) for text in originals)  # minimized
        passes = ["canonicalize", "cse", "sccp"]  # PIPELINE's: the shortest differing prefix
        shortest = passes[:passes.index(bucket["culprit"]) + 1]
        assert bucket["details"]["pipeline"] == f"builtin.module({','.join(shortest)})"
        assert bucket["signature"].startswith(f"wrong-code | {bucket['culprit']} | ")
        # both outputs, the reference's being the interpreter's values of the minimized program
        expected = interpreted(program, bucket["details"].get("twins"))
        assert (tmp_path / "t" / bucket["reference_output"]).read_text() == expected
        assert (tmp_path / "t" / bucket["observed_output"]).read_text() != expected
        test = tmp_path / "t" / bucket["regression_test"]
        run = next(line for line in test.read_text().splitlines() if line.startswith("// RUN:"))
        command = run.removeprefix("// RUN:").replace("%s", str(test))
        assert str(optimizer) in command
        buggy = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
        assert buggy.returncode != 0 and "error:" in buggy.stderr  # FileCheck fails on the double
        good = subprocess.run(["bash", "-o", "pipefail", "-c", command.replace(str(optimizer), "mlir-opt-22")],
                              capture_output=True, text=True)
        assert good.returncode == 0, good.stderr  # and passes on mlir-opt-22


@pytest.mark.parametrize("command", ["fuzz", "triage"])
def test_fuzz_and_triage_refuse_an_optimizer_that_prints_no_mlir(tmp_path, command):
    where = (["--corpus", str(tmp_path / "c"), "--artifacts", str(tmp_path / "a"), "--runs", "5"]
             if command == "fuzz" else [str(tmp_path), "--out", str(tmp_path / "t")])
    done = loomfuzz(command, "--profile", "wide", "--oracle", "differential", "--mlir-opt", "/bin/echo",
                    *where, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not print MLIR" in lines[0]
    assert not (tmp_path / "a").exists() and not (tmp_path / "t").exists()


def test_pipeline_bisection_keeps_a_nested_pipeline_whole_then_bisects_inside():
    from harness.triage.wrong_code import culprit_pass

    pipeline = "builtin.module(canonicalize,func.func(cse,sccp),symbol-dce)"
    asked = []

    def differs(prefix: str) -> bool:  # a bug in sccp: any pipeline that runs it differs
        asked.append(prefix)
        return "sccp" in prefix

    assert culprit_pass(differs, pipeline) == ("func.func(sccp)", "builtin.module(canonicalize,func.func(cse,sccp))")
    assert asked == ["builtin.module(canonicalize)", "builtin.module(canonicalize,func.func(cse,sccp))",
                     "builtin.module(canonicalize,func.func(cse))", "builtin.module(canonicalize,func.func(cse,sccp))"]
    assert culprit_pass(lambda p: False, pipeline) == ("", pipeline)


def test_enumerate_run_takes_the_oracle(tmp_path):
    done = loomfuzz("enumerate", "--run", "--oracle", "differential", "--pipeline", PIPELINE,
                    "--count", "30", "--artifacts", str(tmp_path / "a"), "--no-progress", cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runner differential" in done.stdout and "findings:   none" in done.stdout
    assert "programs:   30 (indices 0-29)" in done.stdout
    assert "accepted            30" in done.stdout


def test_the_crash_triage_leaves_wrong_code_findings_to_the_oracle(swept, tmp_path):
    folder, _, _ = swept
    done = loomfuzz("triage", str(folder / "a"), "--target", "mlir-opt", "--out", str(tmp_path / "t"),
                    "--no-progress", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    findings = len(list((folder / "a").glob("crash-*.json")))
    assert "run 1: 0 input(s)" in done.stderr
    assert f"{4 * findings + 1} file(s) skipped" in done.stderr  # 4 files a finding, the journal


def test_a_differential_fuzz_campaign_finds_a_planted_bug_and_counts_it(swept, tmp_path):
    """``fuzz --oracle differential`` against the double: a wrong-code finding, written as
    ``run`` writes one, and counted by kind in the summary's ``stats.csv``."""
    _, optimizer, _ = swept
    artifacts, corpus = tmp_path / "a", tmp_path / "c"
    done = loomfuzz("fuzz", "--profile", "wide", "--oracle", "differential", "--mlir-opt", str(optimizer),
                    "--pipeline", PIPELINE, "--corpus", str(corpus), "--artifacts", str(artifacts),
                    "--runs", "120", "--seed", "1", cwd=ROOT)
    kinds = [json.loads(p.read_text()).get("finding_kind") for p in artifacts.glob("crash-*.json")]
    assert "wrong-code" in kinds, done.stdout[-2000:] + done.stderr[-2000:]
    finding = next(p for p in artifacts.glob("crash-*.json") if json.loads(p.read_text())["finding_kind"] == "wrong-code")
    assert finding.with_suffix(".exec.mlir").exists() and finding.with_suffix(".optimized.mlir").exists()
    rows = (artifacts / "stats.csv").read_text().splitlines()
    header, last = rows[0].split(","), rows[-1].split(",")
    assert int(last[header.index("findings_wrong-code")]) == kinds.count("wrong-code")
    assert "executed:    in process (the driver's --exec mode)" in done.stdout  # the default runner


def test_a_differential_fuzz_campaign_stops_at_its_time_limit_within_the_seed_corpus(tmp_path):
    """libFuzzer reads -max_total_time only after running every seed; the differential oracle
    judges about a hundred programs a second in the driver, so 2,000 seeds outlast ``--time 3``
    and loomfuzz itself must stop the campaign (it ran for minutes over its 1,369 seeds before;
    400 seeds were all run inside 3 s once the IR executor judged in the driver): exit 0, a
    summary that says so, executions fewer than the seeds."""
    from harness.core.codec import encode, nonempty
    from harness.core.grammar import load
    from harness.core.walk import random_trees

    grammar = load(profile="wide")
    corpus, artifacts = tmp_path / "c", tmp_path / "a"
    corpus.mkdir()
    for n, tree in zip(range(SEEDS := 2000), random_trees(grammar, 5)):
        (corpus / f"seed-{n:04d}").write_bytes(nonempty(encode(tree, grammar), tree, grammar))
    done = loomfuzz("fuzz", "--profile", "wide", "--oracle", "differential", "--pipeline", PIPELINE,
                    "--corpus", str(corpus), "--artifacts", str(artifacts), "--time", "3",
                    "--seed", "1", cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "stopped:     at --time 3 by loomfuzz" in done.stdout, done.stdout
    executions, seconds = re.search(r"executions:\s+(\d+) \([\d.]+/s over ([\d.]+) s\)", done.stdout).groups()
    assert 0 < int(executions) < SEEDS and float(seconds) < 10, done.stdout
    assert f"corpus:      {SEEDS} -> {SEEDS} files" in done.stdout


def test_a_known_upstream_failure_found_again_and_declared_in_expectations(tmp_path):
    """mlir-opt-22's remove-dead-values leaves a call without its operand (``null operand
    found``, llvm/llvm-project#82788) on the exec rendering of nearly every program, the empty
    input libFuzzer runs first among them.  Found again into the same artifacts folder it is
    still a finding (the campaign said "exited with status 77 without a finding" before);
    declared in ``--expectations`` it is none, and the campaign runs on."""
    from harness.core.codec import encode, nonempty
    from harness.core.grammar import load
    from harness.core.walk import random_trees

    grammar = load(profile="wide")
    corpus = tmp_path / "c"
    corpus.mkdir()
    for n, tree in zip(range(4), random_trees(grammar, 5)):
        (corpus / f"seed-{n}").write_bytes(nonempty(encode(tree, grammar), tree, grammar))

    def fuzz(artifacts: Path, *extra: str) -> subprocess.CompletedProcess:
        return loomfuzz("fuzz", "--profile", "wide", "--oracle", "differential",
                        "--pipeline", "builtin.module(remove-dead-values)", "--corpus", str(corpus),
                        "--artifacts", str(artifacts), "--runs", "8", "--seed", "1", *extra, cwd=ROOT)

    for attempt in (1, 2):
        done = fuzz(tmp_path / "a")
        assert done.returncode == 1, (attempt, done.stdout[-2000:] + done.stderr[-2000:])
        assert "findings:    1 (unexpected-rejection: 1)" in done.stdout, (attempt, done.stdout)
        record = json.loads(next((tmp_path / "a").glob("crash-*.json")).read_text())
        assert "null operand found" in record["reason"] and record["oracle"]["kind"] == "target-failure"
    known = tmp_path / "known.json"
    known.write_text(json.dumps({"rules": [{"name": "llvm-82788", "expect": "either",
                                            "stderr": "null operand found"}]}))
    done = fuzz(tmp_path / "b", "--expectations", str(known))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "findings:    none" in done.stdout and re.search(r"executions:\s+(\d+)", done.stdout)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    done = fuzz(tmp_path / "c2", "--expectations", str(bad))
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "bad.json" in done.stderr, done.stderr
    # the same declaration on a sweep: run --oracle differential reads --expectations too
    sweep = ("run", "--profile", "wide", "--oracle", "differential", "-n", "6", "--seed", "3",
             "--pipeline", "builtin.module(remove-dead-values)")
    done = loomfuzz(*sweep, "--artifacts", str(tmp_path / "r1"), cwd=ROOT)
    assert done.returncode == 1 and list((tmp_path / "r1").glob("crash-*.json")), done.stderr[-2000:]
    done = loomfuzz(*sweep, "--artifacts", str(tmp_path / "r2"), "--expectations", str(known), cwd=ROOT)
    assert done.returncode == 0 and not list((tmp_path / "r2").glob("crash-*.json")), done.stderr[-2000:]
    done = loomfuzz(*sweep, "--artifacts", str(tmp_path / "r3"), "--expectations", str(bad), cwd=ROOT)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "bad.json" in done.stderr, done.stderr
