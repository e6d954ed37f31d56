"""Constant twins (issue 35 item 1 and its tests): edge values known at compile time.

Real mlir-opt-22 and mlir-runner-22, real ``loomfuzz`` subprocesses, LLVM's real
``lit``; the reference values are the interpreter's (harness/execute/interpret.py,
which knows nothing of twins).  The test double tests/fixtures/edge_fold_opt.py is
mlir-opt-22 with a wrong fold that needs an operand known at compile time: an edge
constant (``x * -1``, ``x * INT_MIN``, ``x * INT_MAX`` folded to ``x``) or a narrow
known range (``m - y`` with ``m`` masked to ``[0, 255]`` rewritten as ``y - m``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import load_grammar
from harness.core.engine import generate
from harness.core.render import renderer
from harness.execute import inputs
from harness.execute.interpret import interpret_program
from harness.execute.canonical_program import ExecRenderError
from harness.execute.exec_layout import layout_of
from harness.execute.exec_rendering import exec_module
from harness.execute.toolchain import Toolchain
from harness.execute.twins import ALL, TwinPlan, TwinRow, expected_output, plan_for, plan_of, sampled, with_twins
from twin_values import interpreted

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "fixtures" / "edge_fold_opt.py"
CANONICALIZE = "builtin.module(canonicalize)"


def loomfuzz(*args, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _programs(count: int, seed: int) -> list[str]:
    grammar = load_grammar(None, "wide")
    render = renderer(grammar, "canonical").render
    return [render(tree) for tree in generate(grammar, "fast", seed, count)]


@pytest.fixture(scope="module")
def sample() -> list[str]:
    return _programs(40, seed=35)


def _double(tmp_path: Path, bug: str, plant_log: Path | None = None) -> Path:
    """The double as one executable; with ``plant_log``, one line per wrong fold it made."""
    wrapper = tmp_path / f"{bug}-fold-opt"
    log = f" --plant-log={plant_log}" if plant_log else ""
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {DOUBLE} --bug={bug}{log} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


# ------------------------------------------------ the twins themselves


def test_the_plan_is_the_programs_own_and_reads_back(sample):
    plans = [plan_for(p) for p in sample]
    assert plans == [plan_for(p) for p in sample]  # the same text, the same plan
    assert len({p.text() for p in plans}) > len(plans) // 2  # and the texts differ
    for plan in plans:
        first, second = plan.rows
        assert first.mask == ALL and first.row < 12  # everything constant, a row of edge values
        assert 0 < second.mask < ALL
        assert TwinPlan.parse(plan.text()) == plan
        assert plan_of(with_twins(exec_module(sample[0]), plan)) == plan
    assert plan_of(exec_module(sample[0])) is None
    with pytest.raises(ValueError, match="ROW:MASK"):
        TwinPlan.parse("seven")
    with pytest.raises(ValueError, match="0..23"):
        TwinRow(24, ALL)
    with pytest.raises(ExecRenderError, match="twins already"):
        with_twins(with_twins(exec_module(sample[0]), plans[0]), plans[0])
    share = sum(sampled(p, 0.25) for p in _programs(400, seed=36)) / 400
    assert 0.18 < share < 0.32
    assert not any(sampled(p, 0.0) for p in sample) and all(sampled(p, 1.0) for p in sample)


def test_twins_print_their_rows_values_as_the_interpreter_computes_them(sample):
    """Real execution of every module with twins (mlir-opt-22 lowering, mlir-runner-22) gives
    the interpreter's values of the original program, each twin's line its row's line."""
    toolchain = Toolchain()
    toolchain.check()
    texts = [with_twins(exec_module(p), plan_for(p)) for p in sample]
    outputs = toolchain.execute_many(texts, [layout_of(t).lines for t in texts])
    for program, text, output in zip(sample, texts, outputs):
        layout = layout_of(text)
        originals = [f for f in layout.functions if not f.twin_of]
        assert len(layout.functions) == 3 * len(originals)
        assert output == expected_output(layout, interpret_program(program))
        for number, function in enumerate(layout.functions[len(originals):], start=len(originals)):
            line = output.splitlines()[len(originals) * inputs.ROWS + number - len(originals)]
            assert line.split(", ")[:2] == [str(number), str(function.rows[0])]
            body = re.search(rf"^func\.func @{re.escape(function.symbol)}\((.*?)\).*?^\}}", text, re.M | re.S)
            params = [p.split(":")[0].strip() for p in body.group(1).split(",") if p.strip()]
            for k in function.constant_args:  # defined in the body, no longer a parameter
                assert re.search(r"^  %\w+ = arith\.constant ", body.group(0), re.M)
                assert len(params) == len(function.arg_types) - len(function.constant_args)


def test_the_folders_fire_on_the_twins(sample):
    """canonicalize leaves far fewer arith operations in the twins than in their originals."""
    def remaining(text: str) -> dict[str, int]:
        return {m.group(1): len(re.findall(r"= arith\.(?!constant)\w+", m.group(0)))
                for m in re.finditer(r"^\s*func\.func @([\w$.-]+)\(.*?^\s{0,2}\}$", text, re.M | re.S)}

    totals = {"original": [0, 0], "twin": [0, 0]}
    for program in sample:
        text = with_twins(exec_module(program), TwinPlan((plan_for(program).rows[0],)))
        done = subprocess.run(["mlir-opt-22", f"--pass-pipeline={CANONICALIZE}"], input=text,
                              capture_output=True, text=True, check=True)
        before, after = remaining(text), remaining(done.stdout)
        for symbol, count in before.items():
            if symbol != "main":
                side = totals["twin" if "__twin" in symbol else "original"]
                side[0] += count
                side[1] += after.get(symbol, 0)
    kept = {side: after / before for side, (before, after) in totals.items()}
    assert kept["twin"] < kept["original"] / 3, kept


def test_no_false_alarm_with_twins_on_mlir_opt_22(tmp_path):
    """No finding through canonicalize,cse,sccp; through int-range-optimizations only MLIR 22's
    known miscompilation (docs/reference/upstream-bugs.md: ceildivsi(INT_MIN, d > 0) folded to
    its negation, llvm/llvm-project#215696; pinned in tests/test_upstream_mlir.py), which the
    range-known operands make INT_MIN reach at compile time: every finding triages to it."""
    for pipeline in ("builtin.module(canonicalize,cse,sccp)", "builtin.module(int-range-optimizations)"):
        artifacts = tmp_path / pipeline
        done = loomfuzz("run", "--oracle", "differential", "--pipeline", pipeline, "--profile", "wide",
                        "-n", 150, "--seed", 37, "--twins", 1, "--artifacts", artifacts, "--no-progress")
        assert "constant twins in 150 of 150 programs" in done.stdout, done.stdout + done.stderr
        if "canonicalize" in pipeline:
            assert done.returncode == 0 and "findings:   none" in done.stdout, done.stdout + done.stderr
            continue
        assert done.returncode in (0, 1), done.stdout + done.stderr
        if done.returncode == 0:
            continue
        assert {f["finding_kind"] for f in _findings(artifacts)} == {"wrong-code"}, done.stdout
        triaged = loomfuzz("triage", artifacts, "--profile", "wide", "--oracle", "differential",
                           "--pipeline", pipeline, "--out", tmp_path / "triage", "--no-progress")
        assert triaged.returncode == 0, triaged.stderr
        for bucket in json.loads((tmp_path / "triage" / "report.json").read_text())["buckets"]:
            details = bucket["details"]
            assert bucket["culprit"] == "int-range-optimizations", bucket
            assert "arith.ceildivsi" in bucket["signature"], bucket["signature"]
            assert "-2147483648" in details["first_difference"], details["first_difference"]
            assert int(details["observed_value"]) == -int(details["reference_value"]), details


# ------------------------------------------------ wrong folds found, triaged, a lit test


def _findings(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("crash-*.json"))]


@pytest.fixture(scope="module")
def edge_run(tmp_path_factory):
    """300 wide programs through the edge double: with the default share of twins (no
    ``--twins``), with every program twinned and with none; per run the findings and the
    wrong folds the double made (its plant log: many more than the findings, since a fold
    whose value no output reads is no finding)."""
    tmp_path = tmp_path_factory.mktemp("edge")
    runs = {}
    for twins in ("default", "1", "0"):
        log = tmp_path / f"plants-{twins}.log"
        double = _double(tmp_path, "edge", plant_log=log)
        share = () if twins == "default" else ("--twins", twins)
        done = loomfuzz("run", "--oracle", "differential", "--mlir-opt", double, "--pipeline",
                        "builtin.module(canonicalize,cse)", "--profile", "wide", "-n", 300, "--seed", 5,
                        *share, "--artifacts", tmp_path / twins, "--no-progress")
        plants = log.read_text().count("\n") if log.exists() else 0
        runs[twins] = (done, _findings(tmp_path / twins), plants)
    return tmp_path, _double(tmp_path, "edge"), runs


def test_an_edge_fold_is_found_and_twins_put_it_in_reach(edge_run):
    """Found by a plain differential run (twins are on by default); the twins make the double
    fold wrongly several times as often, and nearly every finding is a twin's.  (The
    range-known operands of the wide grammar put edge constants before the folders without
    twins too, which is why the run without them is not always empty.)"""
    _, _, runs = edge_run
    done, findings, _ = runs["default"]
    assert done.returncode == 1 and findings, done.stdout + done.stderr
    twinned = int(re.search(r"constant twins in (\d+) of 300 programs", done.stdout).group(1))
    assert 40 <= twinned <= 110, done.stdout  # the default share, 0.25
    done, findings, plants = runs["1"]
    twin_findings = [f for f in findings if "compile-time constants" in f["oracle"]["first_difference"]]
    assert len(twin_findings) >= 2, [f["oracle"]["first_difference"] for f in findings]
    for finding in twin_findings:
        first = finding["oracle"]["differences"][0]
        assert "__twin" in first["function"]
    plain_done, plain, plain_plants = runs["0"]
    assert plants > 3 * plain_plants and len(plain) < len(twin_findings), (plants, plain_plants, plain_done.stdout)


def test_the_edge_fold_triages_to_one_bucket_with_a_lit_test(edge_run):
    tmp_path, double, _ = edge_run
    out = tmp_path / "triage"
    done = loomfuzz("triage", tmp_path / "1", "--profile", "wide", "--oracle", "differential",
                    "--mlir-opt", double, "--pipeline", "builtin.module(canonicalize,cse)", "--out", out,
                    "--max-candidates", 12, "--no-progress")
    assert done.returncode == 0, done.stderr
    buckets = json.loads((out / "report.json").read_text())["buckets"]
    assert len(buckets) == 1, [(b["culprit"], b["signature"]) for b in buckets]
    (bucket,) = buckets
    assert bucket["kind"] == "wrong-code" and bucket["culprit"] == "canonicalize"
    assert bucket["details"]["pipeline"] == "builtin.module(canonicalize)"
    twins = bucket["details"]["twins"]
    assert twins, bucket["details"]  # minimized with the twins it was found with
    first = bucket["details"]["first_difference"]
    assert "compile-time constants" in first and "input row" in first  # the operand values
    program = (out / bucket["minimized"]["path"]).read_text()
    assert "arith.muli" in program
    assert (out / bucket["reference_output"]).read_text() == interpreted(program, twins)
    # the lit test, under LLVM's lit: fails on the double, passes on mlir-opt-22
    folder = out / Path(bucket["regression_test"]).parent
    assert (folder / "lit.cfg.py").exists()
    lit = shutil.which("lit", path=str(Path(sys.executable).parent)) or "lit"
    failing = subprocess.run([lit, "-v", str(folder)], capture_output=True, text=True)
    assert failing.returncode != 0 and "FAIL" in failing.stdout, failing.stdout + failing.stderr
    fixed = tmp_path / "fixed"
    shutil.copytree(folder, fixed)
    test = fixed / "regression.mlir"
    test.write_text(test.read_text().replace(str(double), "mlir-opt-22", 1))
    passing = subprocess.run([lit, "-v", str(fixed)], capture_output=True, text=True)
    assert passing.returncode == 0 and "PASS" in passing.stdout, passing.stdout + passing.stderr


def test_a_narrow_range_fold_is_found(tmp_path):
    """Rarer than the edge fold: the double's pattern (a value masked to [0, 255] minus a
    known one) appears in about 2 of 100 programs, and its result is read by an output in
    about one of ten of those, so the run takes 1,000 programs."""
    double = _double(tmp_path, "range")
    done = loomfuzz("run", "--oracle", "differential", "--mlir-opt", double, "--pipeline", CANONICALIZE,
                    "--profile", "wide", "-n", 1000, "--seed", 5, "--artifacts", tmp_path / "a", "--no-progress")
    assert done.returncode == 1, done.stdout + done.stderr
    findings = _findings(tmp_path / "a")
    assert findings and {f["finding_kind"] for f in findings} == {"wrong-code"}
