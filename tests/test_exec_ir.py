"""The IR executor (native/loomfuzz-interp.cpp) behind the in-process judge
(harness/execute/inprocess.py): it agrees with the JIT and with the Python interpreter, finds
planted wrong rewrites alone (each confirmed by the JIT), and hands what it does not know to the
JIT without losing a verdict."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from harness.contract import load_grammar
from harness.core.engine import generate
from harness.core.render import renderer
from harness.execute.differential import ExecutorsDisagree, Optimizer, Same, WrongCode
from harness.execute.executors import ProcessExecutor
from harness.execute.inprocess import InProcessExecutor
from harness.execute.interpret import interpret_program
from harness.execute.exec_rendering import exec_module
from harness.execute.toolchain import Toolchain
from harness.run.driver_binary import find_driver

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "fixtures" / "wrong_rewrite_opt.py"
#: The issue's four pipelines; benchmarks/bench_exec.py --ir runs 5,000 programs through them.
PIPELINES = ("builtin.module(canonicalize,cse)", "builtin.module(sccp)",
             "builtin.module(int-range-optimizations)", "builtin.module(canonicalize,cse,sccp,symbol-dce)")
SAMPLE = 72  # programs per pipeline: 288 judged both ways


def _programs(count: int, seed: int) -> list[str]:
    grammar = load_grammar(None, "wide")
    render = renderer(grammar, "canonical").render
    return [render(tree) for tree in generate(grammar, "fast", seed, count)]


def _executor(**options) -> InProcessExecutor:
    if not find_driver("mlir-opt"):  # .ci/setup builds it: missing is a failure
        pytest.fail("no persistent driver: run `bash .ci/setup`")
    return InProcessExecutor(Toolchain(timeout=30.0), **options)


def _judge(executor, texts, optimizer, batch: int = 24) -> list:
    verdicts = []
    for at in range(0, len(texts), batch):
        verdicts += executor.judge_many(texts[at:at + batch], optimizer)
    return verdicts


def _wrapper(tmp_path: Path, name: str, body: str) -> str:
    """An optimizer binary: mlir-opt-22 with the arguments, its output rewritten by ``body``
    (Python with ``text`` in scope)."""
    script = tmp_path / f"{name}.py"
    script.write_text("import re, subprocess, sys\n"
                      "done = subprocess.run(['mlir-opt-22', *sys.argv[1:]], stdin=sys.stdin, "
                      "capture_output=True, text=True)\n"
                      "sys.stderr.write(done.stderr)\ntext = done.stdout\n" + body +
                      "\nsys.stdout.write(text)\nsys.exit(done.returncode)\n")
    binary = tmp_path / name
    binary.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    binary.chmod(0o755)
    return str(binary)


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_ir_executor_agrees_with_the_jit_and_the_interpreter(pipeline):
    programs = _programs(SAMPLE, 17)
    texts = [exec_module(p) for p in programs]
    both = _executor(cross_check=1.0)  # every program judged by the IR executor and the JIT
    try:
        verdicts = _judge(both, texts, Optimizer(pipeline=pipeline))
    finally:
        both.close()
    for program, verdict in zip(programs, verdicts):
        assert isinstance(verdict, Same), verdict
        assert verdict.output == interpret_program(program)
    counts = both.counts
    assert counts.cross_checked == counts.cross_agreed == SAMPLE, counts.summary()
    assert not counts.unknown and not counts.disagreements and not counts.process


def test_ir_executor_alone_judges_without_the_jit():
    programs = _programs(48, 5)
    alone = _executor(cross_check=0.0)
    try:
        verdicts = _judge(alone, [exec_module(p) for p in programs], Optimizer(pipeline=PIPELINES[3]))
    finally:
        alone.close()
    assert [v.output for v in verdicts] == [interpret_program(p) for p in programs]
    assert alone.counts.ir == 48 and alone.counts.cross_checked == 0 and not alone.counts.unknown
    assert alone.counts.summary().startswith("ir 48, cross-check 0/0 agree")


def test_planted_rewrites_are_found_by_the_ir_executor_and_confirmed_by_the_jit(tmp_path):
    """The double of tests/test_oracle.py (operands of a subi swapped): every difference the
    IR executor finds is judged again by both executors, and the verdicts are the process
    path's (the JIT's values)."""
    subtraction = re.compile(r"= arith\.subi (%[\w$.#-]+), (?!\1 )(%[\w$.#-]+) : i32\n")
    programs = [p for p in _programs(480, 22) if subtraction.search(p)][:36]
    texts = [exec_module(p) for p in programs]
    double = Optimizer(str(DOUBLE), "builtin.module(cse)", (f"--plant-log={tmp_path / 'log'}",))
    ir = _executor(cross_check=0.0)
    try:
        verdicts = _judge(ir, texts, double)
    finally:
        ir.close()
    wrong = [v for v in verdicts if isinstance(v, WrongCode)]
    assert wrong, "the double planted nothing that changes a value"
    assert ir.counts.confirmed == len(wrong) and ir.counts.ir == len(texts)
    assert ir.counts.cross_checked == 0 and not ir.counts.disagreements
    assert verdicts == _judge(ProcessExecutor(Toolchain()), texts, double)


def test_an_operation_it_does_not_know_goes_to_the_jit(tmp_path):
    """A target that prints each value through f64 (arith.sitofp / arith.fptosi: floats are
    outside the IR executor's model): counted, judged by the JIT, the same values."""
    optimizer = _wrapper(tmp_path, "through-f64", (
        "text = re.sub(r'(%(\\d+)) = arith\\.extsi (%[\\w#]+) : i32 to i64',\n"
        "              lambda m: f'%fp{m.group(2)} = arith.sitofp {m.group(3)} : i32 to f64\\n'\n"
        "                        f'    {m.group(1)} = arith.fptosi %fp{m.group(2)} : f64 to i64', text)"))
    programs = _programs(12, 9)
    ir = _executor(cross_check=0.0)
    try:
        verdicts = _judge(ir, [exec_module(p) for p in programs], Optimizer(optimizer, PIPELINES[0]))
    finally:
        ir.close()
    assert [v.output for v in verdicts] == [interpret_program(p) for p in programs], verdicts
    assert sum(ir.counts.unknown.values()) == 12 and ir.counts.ir == 0, ir.counts.summary()
    assert list(ir.counts.unknown) == ["unknown (optimized)"]
    assert "jit fallback 12 (unknown (optimized) 12)" in ir.counts.summary()


def test_poison_reaching_a_print_is_a_finding(tmp_path):
    """A target that prints ub.poison instead of a region's value: the IR executor prints
    "poison"; the JIT's code prints some number: a finding either way, never dropped."""
    optimizer = _wrapper(tmp_path, "prints-poison", (
        "first = r'(%\\d+) = arith\\.extsi %[\\w#]+ : i32 to i64(\\n\\s*(?:func\\.)?call @printI64\\(\\1\\))'\n"
        "text = '// -----\\n'.join(re.sub(first, r'\\1 = ub.poison : i64\\2', module, count=1)\n"
        "                          for module in text.split('// -----\\n'))  # once per module"))
    programs = _programs(6, 3)
    ir = _executor(cross_check=0.0)
    try:
        verdicts = _judge(ir, [exec_module(p) for p in programs], Optimizer(optimizer, PIPELINES[0]))
    finally:
        ir.close()
    assert programs and all(isinstance(v, (WrongCode, ExecutorsDisagree)) for v in verdicts), verdicts
    for verdict in verdicts:
        if isinstance(verdict, ExecutorsDisagree):
            assert verdict.poison and "poison reaches a print" in verdict.describe()
        else:
            assert "IR executor prints other values" in verdict.note
    assert ir.counts.confirmed + ir.counts.disagreements == len(programs)


def test_an_overflow_flag_the_inputs_violate_is_caught_by_the_ir_executor_alone(tmp_path):
    """A target that marks every plain ``arith.addi`` ``nsw``: on the table's edge values
    (2147483647 doubled by @helper_double) the flag is violated and the sum is poison.  The
    JIT's code wraps and prints the original's values, so only the IR executor sees it: an
    executor disagreement naming poison, not a silent ``same``."""
    optimizer = _wrapper(tmp_path, "adds-nsw", (
        "text = re.sub(r'^(\\s*%\\w+ = arith\\.addi [^:\\n]*?)( : i32)$',\n"
        "              lambda m: m.group(0) if 'overflow' in m.group(1) else m.group(1) + ' overflow<nsw>' + m.group(2),\n"
        "              text, flags=re.M)"))
    programs = [p for p in _programs(24, 8) if "= func.call @helper_double(%val)" in exec_module(p)][:4]
    ir = _executor(cross_check=0.0)
    try:
        verdicts = _judge(ir, [exec_module(p) for p in programs], Optimizer(optimizer, PIPELINES[0]))
    finally:
        ir.close()
    assert len(programs) == 4 and all(isinstance(v, ExecutorsDisagree) and v.poison for v in verdicts), verdicts
    assert all(v.target_output == v.reference_output for v in verdicts)  # the JIT wraps: same values
    assert ir.counts.disagreements == 4 and "4 executor disagreement(s)" in ir.counts.summary()


_PRINTS_7 = """// loomfuzz-exec 0 @main thread "main" "main" args= results=
module {
func.func private @printI64(i64)
func.func private @printNewline()
func.func @main() {
%s
  func.call @printI64(%%c) : (i64) -> ()
  func.call @printNewline() : () -> ()
  return
}
}
"""
#: Optimized forms of a main that prints 7: what the IR executor says of each, what the JIT prints.
_CASES = {
    "branch-on-poison": ("""  %p = ub.poison : i1
  %c = scf.if %p -> i64 {
    %a = arith.constant 7 : i64
    scf.yield %a : i64
  } else {
    %b = arith.constant 7 : i64
    scf.yield %b : i64
  }""", "undefined", "scf.if on poison"),
    "loop-past-the-budget": ("""  %lo = arith.constant 0 : index
  %hi = arith.constant 30000000 : index
  %one = arith.constant 1 : index
  %seven = arith.constant 7 : i64
  %zero = arith.constant 0 : i64
  %c = scf.for %i = %lo to %hi step %one iter_args(%x = %seven) -> (i64) {
    %y = arith.addi %x, %zero : i64
    scf.yield %y : i64
  }""", "budget", "steps"),
    "through-f64": ("""  %f = arith.constant 7.0 : f64
  %c = arith.fptosi %f : f64 to i64""", "unknown", "f64"),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_what_the_ir_executor_cannot_judge_the_jit_does(case):
    """Undefined behaviour, the step budget, a type it does not model: the driver says which
    and why, and the JIT's output answers in the same request."""
    from harness.execute.inprocess import INTERPRET, ExecDriver

    body, status, why = _CASES[case]
    original = _PRINTS_7 % "  %c = arith.constant 7 : i64"
    driver = ExecDriver(find_driver("mlir-opt") or pytest.fail("no driver"))
    try:
        (result,) = driver.execute([(original, _PRINTS_7 % body, True, INTERPRET)])
    finally:
        driver.close()
    assert result.stage == "ok" and not result.ran_ir and result.ran_jit
    assert (result.ir_status, result.ir_side) == (status, 1) and why in result.ir_why, result.ir_why
    assert result.ir_reference == "7\n" and result.reference_output == result.target_output == "7\n"


def test_undefined_behaviour_the_jit_hides_is_a_finding(tmp_path):
    """An optimizer whose output branches on poison where the original is defined: the JIT
    prints the original's values, the IR executor says undefined: an executor disagreement."""
    fixed = tmp_path / "optimized.mlir"
    fixed.write_text(_PRINTS_7 % _CASES["branch-on-poison"][0])
    binary = tmp_path / "branches-on-poison"
    binary.write_text(f"#!/bin/sh\ncat >/dev/null\ncat {fixed}\n")
    binary.chmod(0o755)
    ir = _executor(cross_check=0.0)
    try:
        (verdict,) = ir.judge_many([_PRINTS_7 % "  %c = arith.constant 7 : i64"], Optimizer(str(binary)))
    finally:
        ir.close()
    assert isinstance(verdict, ExecutorsDisagree), verdict
    assert "undefined behaviour in the optimized module" in verdict.note and "scf.if on poison" in verdict.note
    assert ir.counts.unknown == {"undefined (optimized)": 1} and ir.counts.disagreements == 1


@pytest.mark.parametrize("pipeline", ["", "builtin.module(canonicalize,cse)", "builtin.module(convert-scf-to-cf)",
                                      "builtin.module(arith-expand,int-range-optimizations)"])
def test_the_rarer_operations_agree_with_the_jit(pipeline):
    """tests/fixtures/exec_ir_ops.mlir (scf.while, index_switch, execute_region with cf
    inside, cf.switch, dynamic memrefs with dim/copy/cast/dealloc, the index dialect, the
    extended multiplications, ceil/floor division, math's integer ops), 36 input pairs: the IR
    executor's outputs are the JIT's, before and after the pipeline."""
    from harness.execute.inprocess import ALSO_JIT, INTERPRET, ExecDriver

    text = (ROOT / "tests" / "fixtures" / "exec_ir_ops.mlir").read_text()
    driver = ExecDriver(find_driver("mlir-opt") or pytest.fail("no driver"),
                        [f"--pass-pipeline={pipeline}"] if pipeline else [])
    try:
        (result,) = driver.execute([(text, None, True, INTERPRET | ALSO_JIT)])
    finally:
        driver.close()
    assert result.stage == "ok" and result.ran_ir and result.ran_jit, (result.ir_status, result.ir_why)
    assert result.reference_output.count("\n") == 42
    assert result.ir_reference == result.reference_output
    assert result.ir_optimized == result.target_output == result.reference_output
