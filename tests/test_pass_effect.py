"""The pass effect (harness/run/pass_effect.py) and its op counter (harness/run/op_count.py).

Everything runs through the real mlir-opt-22.  The counter is checked on hand-written
modules against counts written down by hand and against mlir-opt-22's own
``print-op-stats`` (the real parser counts the same text); the pass effect on
modules whose answer is known (a foldable addi, a duplicate for cse, dead code,
a pass with nothing to do), and on a small wide sample through ``loomfuzz run``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from harness.run.op_count import count_ops, read_module, strip_locations
from harness.run.pass_effect import (PassEffectError, PassEffectSettings, compare, measure, pipeline_steps,
                                     sampled, step_target, target_steps)
from harness.targets.target import resolve_target

MLIR_OPT = shutil.which("mlir-opt-22")
pytestmark = pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt-22 is not installed")

LOOPS = """\
func.func @loops(%x: i32, %m: memref<4xi32>, %c: i1) -> i32 {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %x, %m[%i] : memref<4xi32>
  }
  %r = scf.if %c -> (i32) {
    %a = arith.addi %x, %x : i32
    scf.yield %a : i32
  } else {
    scf.yield %x : i32
  }
  scf.if %c {
    memref.store %r, %m[%c0] : memref<4xi32>
  }
  %s:2 = scf.for %j = %c0 to %c4 step %c1 iter_args(%p = %x, %q = %r) -> (i32, i32) {
    %t = arith.muli %p, %q : i32
    scf.yield %t, %p : i32, i32
  }
  %v = func.call @twice(%s#0) : (i32) -> i32
  return %v : i32
}
func.func @twice(%y: i32) -> i32 {
  %z = arith.addi %y, %y : i32
  return %z : i32
}
llvm.func @scale(%a: i32) -> i32 {
  %k = llvm.mlir.constant(3 : i32) : i32
  %b = llvm.mul %a, %k : i32
  llvm.return %b : i32
}
func.func private @printI64(i64)
"""
#: written down by hand: the parser also builds the two scf.yield a printer leaves out
LOOPS_COUNTS = {"builtin.module": 1, "func.func": 3, "llvm.func": 1, "arith.constant": 3, "scf.for": 2,
                "memref.store": 2, "scf.if": 2, "arith.addi": 2, "scf.yield": 5, "arith.muli": 1,
                "func.call": 1, "func.return": 2, "llvm.mlir.constant": 1, "llvm.mul": 1, "llvm.return": 1}

WHILE = """\
func.func @w(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %r = scf.while (%i = %c0) : (i32) -> i32 {
    %lt = arith.cmpi slt, %i, %n : i32
    scf.condition(%lt) %i : i32
  } do {
  ^bb0(%j: i32):
    %c1 = arith.constant 1 : i32
    %k = arith.addi %j, %c1 : i32
    scf.yield %k : i32
  }
  return %r : i32
}
"""
WHILE_COUNTS = {"builtin.module": 1, "func.func": 1, "arith.constant": 2, "scf.while": 1, "arith.cmpi": 1,
                "scf.condition": 1, "arith.addi": 1, "scf.yield": 1, "func.return": 1}

FOLDABLE = """\
func.func @f(%x: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %s = arith.addi %c1, %c2 : i32
  %r = arith.muli %x, %s : i32
  return %r : i32
}
"""
DUPLICATE = """\
func.func @f(%x: i32, %y: i32) -> i32 {
  %a = arith.addi %x, %y : i32
  %b = arith.addi %x, %y : i32
  %r = arith.muli %a, %b : i32
  return %r : i32
}
"""
DEAD = """\
func.func @f(%x: i32, %y: i32) -> i32 {
  %dead = arith.subi %x, %y : i32
  %r = arith.xori %x, %y : i32
  return %r : i32
}
"""


def _printed(text: str, pipeline: str = "builtin.module()", *flags: str) -> str:
    done = subprocess.run([MLIR_OPT, *flags, f"--pass-pipeline={pipeline}", "-"], input=text,
                          capture_output=True, text=True, check=True)
    return done.stdout


def _op_stats(text: str) -> dict:
    """mlir-opt-22's own count of the operations it parses in ``text``."""
    done = subprocess.run([MLIR_OPT, "--pass-pipeline=builtin.module(print-op-stats{json=true})", "-o",
                           "/dev/null", "-"], input=text, capture_output=True, text=True, check=True)
    return json.loads(done.stderr)


@pytest.mark.parametrize("flags", [(), ("--mlir-print-debuginfo", "--mlir-print-local-scope"),
                                   ("--mlir-print-op-generic",)])
def test_counter_matches_hand_count_and_the_parser(flags):
    for text, counts in ((LOOPS, LOOPS_COUNTS), (WHILE, WHILE_COUNTS)):
        printed = _printed(text, "builtin.module()", *flags)
        assert dict(count_ops(printed)) == counts
        assert dict(count_ops(printed)) == _op_stats(printed)


def test_counter_matches_the_parser_on_wide_programs_after_passes():
    from harness.contract import load_grammar
    from harness.core.engine import generate
    from harness.core.render import renderer
    from harness.execute.exec_rendering import exec_module

    grammar = load_grammar(None, "wide")
    canonical = renderer(grammar, "canonical").render
    for k, tree in enumerate(generate(grammar, "fast", 11, 6)):
        pipeline = ("builtin.module()", "builtin.module(canonicalize)", "builtin.module(sccp,cse)")[k % 3]
        printed = _printed(exec_module(canonical(tree)), pipeline, "--mlir-print-debuginfo",
                           "--mlir-print-local-scope")
        assert dict(count_ops(printed)) == _op_stats(printed)


def test_reader_sees_locations_results_and_operands():
    module = read_module(_printed(DUPLICATE, "builtin.module()", "--mlir-print-debuginfo",
                                  "--mlir-print-local-scope"))
    adds = [op for op in module.ops if op.name == "arith.addi"]
    assert [op.loc for op in adds] == ['"<stdin>":2:8', '"<stdin>":3:8']
    assert [op.operands for op in adds] == [("%arg0", "%arg1")] * 2
    mul = next(op for op in module.ops if op.name == "arith.muli")
    assert mul.operands == ("%0", "%1") and mul.results == ("%2",)
    assert "loc(" not in strip_locations(_printed(LOOPS, "builtin.module()", "--mlir-print-debuginfo"))


def _effect(text: str, step: str):
    target = resolve_target("mlir-opt", pipeline=f"builtin.module({step})")
    others, steps = target_steps(target)
    assert steps == (step,)
    before = _printed(text, "builtin.module()", "--mlir-print-debuginfo", "--mlir-print-local-scope")
    after = subprocess.run([*step_target(target, others, step).argv, "-"], input=before, capture_output=True,
                           text=True, check=True).stdout
    return compare(before, after)


def test_canonicalize_folds_the_constant_addi():
    effect = _effect(FOLDABLE, "canonicalize")
    assert effect.changed and effect.rewritten
    assert effect.folded == Counter({"arith.addi": 1})
    assert effect.removed == Counter({"arith.constant": 2})  # their only user folded
    assert effect.after["arith.addi"] == 0 and effect.after["arith.constant"] == 1


def test_cse_replaces_the_duplicate():
    effect = _effect(DUPLICATE, "cse")
    assert effect.replaced == Counter({"arith.addi": 1})
    assert not effect.folded and not effect.removed and not effect.added
    assert effect.before["arith.addi"] - effect.after["arith.addi"] == 1


def test_canonicalize_removes_dead_code_and_a_pass_with_nothing_to_do_changes_nothing():
    effect = _effect(DEAD, "canonicalize")
    assert effect.removed == Counter({"arith.subi": 1}) and not effect.folded and not effect.replaced
    idle = _effect(DEAD, "symbol-dce")
    assert not idle.changed and not idle.rewritten
    assert not any((idle.folded, idle.replaced, idle.removed, idle.added))


RANGES = """\
func.func @g(%x: i32) -> i1 {
  %c7 = arith.constant 7 : i32
  %c8 = arith.constant 8 : i32
  %a = arith.andi %x, %c7 : i32
  %b = arith.cmpi ult, %a, %c8 : i32
  return %b : i1
}
"""


def test_sccp_folds_constants_and_int_range_optimizations_folds_a_known_range():
    """sccp knows constants, not ranges: it folds the addi, and leaves the cmpi on andi's
    range [0, 7] to int-range-optimizations, which folds it (and the dead andi goes)."""
    sccp = _effect(FOLDABLE + RANGES, "sccp")
    assert sccp.folded == Counter({"arith.addi": 1}) and sccp.after["arith.cmpi"] == 1
    ranges = _effect(FOLDABLE + RANGES, "int-range-optimizations")
    assert ranges.folded == Counter({"arith.addi": 1, "arith.cmpi": 1})
    assert ranges.removed["arith.andi"] == 1 and ranges.after["arith.andi"] == 0


def test_skipped_functions_are_left_out_of_every_count():
    """An exec module's @main is the harness's driver: --pass-effect leaves it out."""
    with_main = FOLDABLE + FOLDABLE.replace("@f(", "@main(")
    target = resolve_target("mlir-opt", pipeline="builtin.module(canonicalize)")
    whole = measure(target, [with_main]).passes[0]
    program = measure(target, [with_main], PassEffectSettings(skip=("main",))).passes[0]
    assert whole.folded["arith.addi"] == 2 and program.folded["arith.addi"] == 1
    assert whole.before["func.func"] == 2 and program.before["func.func"] == 1
    assert program.changed == 1
    kept = DEAD.replace("  %dead = arith.subi %x, %y : i32\n", "").replace("@f(", "@g(")
    idle = measure(target, [DEAD.replace("@f(", "@main(") + kept], PassEffectSettings(skip=("main",))).passes[0]
    assert idle.changed == 0 and not idle.removed  # only @main's dead subi went


def test_steps_of_pipelines():
    assert pipeline_steps("builtin.module(canonicalize,cse,sccp,symbol-dce)") == (
        "canonicalize", "cse", "sccp", "symbol-dce")
    assert pipeline_steps("builtin.module(func.func(cse,canonicalize{max-iterations=2}),"
                          "arith-int-range-narrowing{int-bitwidths-supported=8,16})") == (
        "func.func(cse)", "func.func(canonicalize{max-iterations=2})",
        "arith-int-range-narrowing{int-bitwidths-supported=8,16}")
    with pytest.raises(PassEffectError):
        pipeline_steps("builtin.module()")
    flags = resolve_target("mlir-opt", pipeline="--canonicalize --cse")
    assert target_steps(flags) == (("--allow-unregistered-dialect",), ("canonicalize", "cse"))


def test_one_splitter_reads_pipelines_and_argument_lists():
    """harness.brackets.split_top_level is both readers' (pass pipelines, the canonical program's
    block arguments): commas inside (), [], {} and <> stay; empty items go."""
    from harness.brackets import split_top_level

    assert split_top_level("a, b(c, d){x = [1, 2]}, memref<4xi32>,, ") == [
        "a", "b(c, d){x = [1, 2]}", "memref<4xi32>"]
    assert split_top_level("%arg0: i32, %m: memref<2x4xi32>") == ["%arg0: i32", "%m: memref<2x4xi32>"]
    assert split_top_level("  ") == []
    assert pipeline_steps("builtin.module(canonicalize{test-convergence=true enable-patterns=[a, b]},cse)") == (
        "canonicalize{test-convergence=true enable-patterns=[a, b]}", "cse")


def test_measure_counts_add_up_over_a_nested_pipeline():
    """Per pass and name, after = before - folded - replaced - removed + added; the counts
    before and after are the parser's (the counter is checked above)."""
    target = resolve_target("mlir-opt", pipeline="builtin.module(func.func(canonicalize,cse),sccp)")
    effect = measure(target, [FOLDABLE, DUPLICATE, DEAD, LOOPS], PassEffectSettings(runner="batch"))
    assert [p.step for p in effect.passes] == ["func.func(canonicalize)", "func.func(cse)", "sccp"]
    assert effect.unreadable == 0 and all(p.programs == 4 and p.failed == 0 for p in effect.passes)
    for p in effect.passes:
        for name in set(p.before) | set(p.after):
            assert p.after[name] == p.before[name] - p.folded[name] - p.replaced[name] - p.removed[name] + p.added[name]
    canonicalize = effect.passes[0]
    assert canonicalize.folded["arith.addi"] == 1 and canonicalize.removed["arith.subi"] == 1
    assert effect.passes[1].replaced["arith.addi"] == 1  # DUPLICATE's second addi
    assert effect.passes[0].after == effect.passes[1].before


def test_measure_process_and_batch_agree_and_sampling_is_a_function_of_the_text():
    target = resolve_target("mlir-opt", pipeline="builtin.module(canonicalize,cse)")
    texts = [FOLDABLE, DUPLICATE, DEAD, "this is not MLIR"]
    one = measure(target, texts, PassEffectSettings(runner="batch")).to_json()
    two = measure(target, texts, PassEffectSettings(runner="process")).to_json()
    assert one == two and one["unreadable"] == 1
    assert [sampled(t, 0.5) for t in texts] == [sampled(t, 0.5) for t in texts]
    assert not any(sampled(t, 0) for t in texts) and all(sampled(t, 1) for t in texts)
    assert 300 < sum(sampled(str(k), 0.5) for k in range(800)) < 500


def test_run_prints_the_table_and_keeps_the_numbers(tmp_path):
    def run(folder):
        return subprocess.run([sys.executable, "-m", "harness.cli", "run", "--profile", "wide", "--target",
                               "mlir-opt", "-n", "24", "--seed", "3", "--runner", "batch", "--no-progress",
                               "--pass-effect", "0.5", "--artifacts", str(folder)],
                              capture_output=True, text=True, timeout=120)

    done = run(tmp_path / "a")
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert "pass effect (--pass-effect 0.5" in done.stdout
    for step in ("canonicalize", "cse", "sccp", "symbol-dce"):
        assert any(line.split()[:1] == [step] for line in done.stdout.splitlines())
    report = json.loads((tmp_path / "a" / "pass-effect.json").read_text())
    assert 0 < report["sampled"] < 24 and report["of"] == 24
    assert [p["pass"] for p in report["passes"]] == ["canonicalize", "cse", "sccp", "symbol-dce"]
    assert report["passes"][0]["changed"] > 0  # canonicalize always finds something in wide programs
    again = run(tmp_path / "b")
    assert (tmp_path / "b" / "pass-effect.json").read_bytes() == (tmp_path / "a" / "pass-effect.json").read_bytes()
    assert again.returncode == 0


def test_a_pass_the_target_does_not_have_is_one_line(tmp_path):
    target = resolve_target("mlir-opt", pipeline="builtin.module(canonicalize,no-such-pass)")
    with pytest.raises(PassEffectError, match="no-such-pass"):
        measure(target, [FOLDABLE])
    (tmp_path / "p.mlir").write_text(FOLDABLE)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "coverage", str(tmp_path), "--pass-effect",
                           "--pipeline", "builtin.module(no-such-pass)"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no-such-pass" in done.stderr


def test_coverage_shows_the_pass_effect_beside_grammar_coverage(tmp_path):
    subprocess.run([sys.executable, "-m", "harness.cli", "generate", "--profile", "wide", "-n", "6", "--seed", "4",
                    "-o", str(tmp_path / "corpus"), "--no-progress"], check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "coverage", "--profile", "wide",
                           str(tmp_path / "corpus"), "--pass-effect", "--twins", "1", "--json",
                           "--pipeline", "builtin.module(canonicalize,int-range-optimizations)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    effect = report["pass_effect"]
    assert effect["programs"] == 6 and effect["twinned"] == 6
    assert [p["pass"] for p in effect["passes"]] == ["canonicalize", "int-range-optimizations"]
    assert all(p["programs"] == 6 and p["ops_before"] > 0 for p in effect["passes"])


def test_run_with_the_differential_oracle_measures_what_it_optimizes(tmp_path):
    """--oracle differential: the exec renderings it judges (twins and all), @main left out."""
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--profile", "wide", "--oracle",
                           "differential", "--pipeline", "builtin.module(int-range-optimizations)", "--twins", "1",
                           "--runner", "batch", "-n", "6", "--seed", "2", "--no-progress", "--pass-effect", "1",
                           "--artifacts", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "pass-effect.json").read_text())
    assert report["sampled"] == 6 and report["functions_not_measured"] == ["main", "exec_line_*"]
    (step,) = report["passes"]
    assert step["pass"] == "int-range-optimizations" and step["programs"] == 6 and step["ops_before"] > 0
    assert "@main, @exec_line_* not measured" in done.stdout


def test_run_refuses_a_target_without_a_pass_before_the_sweep(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--target", "mlir-opt", "-n", "2",
                           "--pipeline=--allow-unregistered-dialect", "--pass-effect", "1", "--no-progress",
                           "--artifacts", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "runs no pass" in done.stderr
    assert not list(tmp_path.glob("sweep-*.jsonl"))  # refused before any program ran


def test_run_refuses_a_share_out_of_range(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--target", "mlir-opt", "-n", "2",
                           "--pass-effect", "2", "--artifacts", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "--pass-effect" in done.stderr and "from 0 to 1" in done.stderr
