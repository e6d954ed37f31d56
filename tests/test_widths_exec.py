"""The widths profile's semantics (issue 47) in every executor: the Python reference interpreter
(harness/execute/interpret.py) and the driver's IR executor (native/loomfuzz-interp*.cpp), each
written from MLIR's definitions, agree with the JIT (mlir-runner-22) on programs of the profile
and, through the issue's four pipelines, on their optimized forms.  benchmarks/bench_widths_exec.py
runs the same comparison at full size."""

from __future__ import annotations

import pytest

from harness.contract import load_grammar
from harness.core.engine import generate
from harness.core.render import renderer
from harness.execute.differential import Optimizer, Same
from harness.execute.exec_layout import layout_of
from harness.execute.exec_rendering import exec_module
from harness.execute.inprocess import InProcessExecutor
from harness.execute.interpret import interpret_program
from harness.execute.toolchain import Toolchain
from harness.run.driver_binary import find_driver

PIPELINES = ("builtin.module(canonicalize,cse)", "builtin.module(sccp)",
             "builtin.module(int-range-optimizations)", "builtin.module(canonicalize,cse,sccp,symbol-dce)")
SAMPLE = 20  # programs per pipeline


def programs(count: int, seed: int) -> list[str]:
    grammar = load_grammar(None, "widths")
    render = renderer(grammar, "canonical").render
    return [render(tree) for tree in generate(grammar, "fast", seed, count)]


def test_the_interpreter_agrees_with_the_jit():
    texts = programs(80, 471)
    execs = [exec_module(text) for text in texts]
    jit = Toolchain(timeout=300.0).execute_many(execs, [layout_of(e).lines for e in execs])
    for number, (text, expected) in enumerate(zip(texts, jit)):
        assert interpret_program(text) == expected, f"program {number}:\n{text}"


#: One region per case, every line an edge of its width: what the JIT prints is the truth.
EDGES = """module {
func.func @helper_double(%a: i32) -> i32 {
  %doubled = arith.addi %a, %a : i32
  return %doubled : i32
}
llvm.func @extern_scale(i32) -> i32
func.func @host_container(%target: memref<4xi32>, %value: i32) {
  %zero = arith.constant 0 : index
  %four = arith.constant 4 : index
  %one = arith.constant 1 : index
  scf.for %hi = %zero to %four step %one {
    memref.store %value, %target[%hi] : memref<4xi32>
  }
  return
}
dataflow.thread private @thread_0 domain(#dataflow.thread_domain<dense>)(%mem: memref<4xi32>, %val: i32, %flag: i1) ctrl (%start: none) {
  %lo = arith.constant 0 : index
  %hi = arith.constant 2 : index
  %stp = arith.constant 1 : index
  %r0:2 = "loom.spatial_region"(%val) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 2, 0>}> ({
    ^bb0(%a0: i32):
      %b0 = arith.trunci %a0 : i32 to i1
      %b1 = arith.constant true
      %b2 = arith.maxsi %b0, %b1 : i1
      %v0 = arith.extsi %b2 : i1 to i32
      %w2_0 = arith.constant -2 : i2
      %w2_1 = math.ctlz %w2_0 : i2
      %w2_2 = arith.constant 0 : i2
      %w2_3 = math.cttz %w2_2 : i2
      %w2_4 = arith.addi %w2_1, %w2_3 : i2
      %v1 = arith.extsi %w2_4 : i2 to i32
      %w17_0 = arith.trunci %a0 : i32 to i17
      %w17_1 = arith.constant -65536 : i17
      %w17_2, %w17_3 = arith.mulsi_extended %w17_0, %w17_1 : i17
      %w17_4 = math.absi %w17_1 : i17
      %w17_5 = arith.constant 5 : i17
      %w17_6 = math.ipowi %w17_0, %w17_5 : i17
      %w17_7 = arith.xori %w17_3, %w17_4 : i17
      %w17_8 = arith.addi %w17_7, %w17_6 : i17
      %v2 = arith.extui %w17_8 : i17 to i32
      %ix0 = arith.index_cast %a0 : i32 to index
      %ix1 = index.constant -3
      %ix2 = index.ceildivs %ix0, %ix1
      %ix3 = index.floordivs %ix0, %ix1
      %ix4 = index.ceildivu %ix0, %ix1
      %ix5 = index.xor %ix2, %ix3
      %ix6 = index.add %ix5, %ix4
      %v3 = index.casts %ix6 : index to i32
      %w63_0 = arith.extui %a0 : i32 to i63
      %w63_1, %b3 = arith.addui_extended %w63_0, %w63_0 : i63, i1
      %w63_2, %w63_3 = arith.mului_extended %w63_1, %w63_1 : i63
      %w63_5 = arith.constant 1 : i63
      %w63_6 = arith.ori %w63_0, %w63_5 : i63
      %w63_4 = arith.ceildivui %w63_3, %w63_6 : i63
      %v4 = arith.trunci %w63_4 : i63 to i32
      %v5 = arith.select %b3, %v3, %v4 : i32
      %v6 = arith.addi %v0, %v1 : i32
      %v7 = arith.addi %v6, %v2 : i32
      %v8 = arith.xori %v7, %v5 : i32
      "loom.spatial_yield"(%v8, %v4) <{operandSegmentSizes = array<i32: 2, 0>}> : (i32, i32) -> ()
  }) {graph_name = "graph_0", source_maps = []} : (i32) -> (i32, i32)
  dataflow.thread.yield
}

}
"""


def test_edge_cases_of_each_width_agree_with_the_jit():
    """ctlz/cttz of i2, signed max of i1 (true is -1), mulsi_extended and absi at i17's minimum,
    ipowi, the index dialect's roundings of negative quotients, i63 extended ops and ceildivui."""
    assert interpret_program(EDGES) == Toolchain().execute(exec_module(EDGES))


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_the_ir_executor_agrees_with_the_jit_before_and_after_each_pipeline(pipeline):
    if not find_driver("mlir-opt"):
        pytest.fail("no persistent driver: run `bash .ci/setup`")
    texts = programs(SAMPLE, 4700 + PIPELINES.index(pipeline))
    both = InProcessExecutor(Toolchain(timeout=60.0), cross_check=1.0)
    try:
        verdicts = both.judge_many([exec_module(text) for text in texts], Optimizer(pipeline=pipeline))
    finally:
        both.close()
    for text, verdict in zip(texts, verdicts):
        assert isinstance(verdict, Same), verdict
        assert verdict.output == interpret_program(text)
    counts = both.counts
    assert counts.cross_checked == counts.cross_agreed == SAMPLE, counts.summary()
    assert not counts.unknown and not counts.disagreements, counts.summary()
