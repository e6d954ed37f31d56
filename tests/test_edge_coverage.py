"""Edge-value operand coverage (harness/execute/edge_coverage.py, edge_values.py) and
`loomfuzz coverage --edges`: hand-written modules with known answers, the run-time part
against the reference interpreter, the compile-time intervals sound against execution,
twins reaching strictly more constants on 100 wide programs, a measured twin module
parsed by mlir-opt-22."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import load_grammar
from harness.core.engine import generate
from harness.core.render import renderer
from harness.execute import edge_coverage as ec
from harness.execute import inputs
from harness.execute.edge_values import classes_in, edge_class, edge_classes, narrow
from harness.execute.interpret import interpret_program
from harness.execute.exec_layout import layout_of
from harness.execute.exec_rendering import exec_module
from harness.execute.twins import expected_output, plan_for, with_twins

ROOT = Path(__file__).resolve().parent.parent
INT_MIN, INT_MAX = -2 ** 31, 2 ** 31 - 1


def _wide(count: int, seed: int) -> list[str]:
    grammar = load_grammar(None, "wide")
    render = renderer(grammar, "canonical").render
    return [render(tree) for tree in generate(grammar, "fast", seed, count)]


def test_edge_classes():
    assert [edge_class(v, "i32") for v in (0, 1, -1, 2, 4, 1 << 30, INT_MIN, INT_MIN + 1, INT_MAX, INT_MAX - 1)] == \
        ["0", "1", "-1", "2", "2^k", "2^k", "INT_MIN", "INT_MIN+1", "INT_MAX", "INT_MAX-1"]
    assert edge_class(7, "i32") is None and edge_class(-4, "i32") is None and edge_class(0, "memref") is None
    # every other width has its own classes (issue 47): i8's minimum is not i64's
    assert [edge_class(v, "i8") for v in (-128, 127, -127, 126, 64, 0)] == \
        ["i8:MIN", "i8:MAX", "i8:MIN+1", "i8:MAX-1", "i8:2^k", "i8:0"]
    assert edge_class(-128, "i64") is None and edge_class(-(1 << 63), "index") == "index:MIN"
    assert edge_classes("i2") == ("i2:MIN", "i2:MAX", "i2:MIN+1", "i2:MAX-1")  # i2's 1 is its MAX
    assert classes_in((-130, -120), "i8") == {"i8:MIN", "i8:MIN+1"} and classes_in((0, 7), "i17") == {
        "i17:0", "i17:1", "i17:2", "i17:2^k"}
    assert (edge_class(1, "i1"), edge_class(0, "i1")) == ("true", "false")
    assert classes_in((0, 7), "i32") == {"0", "1", "2", "2^k"}
    assert classes_in((INT_MAX - 3, INT_MAX), "i32") == {"INT_MAX", "INT_MAX-1"}
    assert narrow((0, 15), "i32") and not narrow((0, 16), "i32") and not narrow((0, 1), "i1")


# A module without a layout comment: every function but main runs on every row.
DIVSI = """\
func.func @f(%a: i32) -> i32 {
  %m = arith.constant -2147483648 : i32
  %one = arith.constant 1 : i32
  %d = arith.ori %a, %one : i32
  %q = arith.divsi %m, %d : i32
  return %q : i32
}
"""
MASK = """\
func.func @g(%a: i32, %c: i1) -> i32 {
  %mask = arith.constant 7 : i32
  %x = arith.andi %a, %mask : i32
  %y = arith.subi %x, %mask overflow<nsw> : i32
  %z = arith.extui %c : i1 to i32
  %w = arith.muli %z, %a : i32
  %four = arith.constant 4 : i32
  %r = arith.remui %a, %four : i32
  %s = arith.select %c, %mask, %four : i32
  %t = arith.xori %r, %s : i32
  %u = scf.if %c -> (i32) {
    scf.yield %mask : i32
  } else {
    scf.yield %four : i32
  }
  %v = arith.maxsi %u, %a : i32
  return %v : i32
}
"""
RUN_TIME = """\
func.func @h(%a: i32) -> i32 {
  %c = arith.constant 3 : i32
  %s = arith.addi %a, %c : i32
  return %s : i32
}
"""


def test_a_constant_int_min_reaches_divsi_operand_0():
    seen = ec.module_coverage(DIVSI)
    assert ("arith.divsi", 0, "INT_MIN") in seen.constant
    assert ("arith.divsi", 0, "INT_MIN") in seen.run_time
    assert not {t for t in seen.constant if t[:2] == ("arith.divsi", 1)}  # %a | 1 is unknown
    assert ("arith.divsi", 1, "-1") in seen.run_time  # the rows where %a is -1 ...
    assert seen.stopped_rows == 2  # ... stop there: INT_MIN / -1 has no value
    assert seen.programs == 1 and seen.operations == 2  # ori, divsi (constants are not measured)
    assert {t[:2] for t in seen.possible} == {("arith.ori", 0), ("arith.ori", 1), ("arith.divsi", 0),
                                              ("arith.divsi", 1)}


def test_narrow_ranges_an_analysis_knows():
    seen = ec.module_coverage(MASK)
    # andi with 7: [0, 7] holds 0, 1, 2 and 4
    assert {c for op, pos, c in seen.narrow if (op, pos) == ("arith.subi", 0)} == {"0", "1", "2", "2^k"}
    assert not {t for t in seen.constant if t[:2] == ("arith.subi", 0)}
    assert ("arith.subi", 1, "2^k") not in seen.constant  # 7 is no edge value
    # extui of an i1: [0, 1]
    assert {c for op, pos, c in seen.narrow if (op, pos) == ("arith.muli", 0)} == {"0", "1"}
    # remui by 4 ([0, 3]) xor a select of the constants 7 and 4 ([4, 7])
    assert {c for op, pos, c in seen.narrow if (op, pos) == ("arith.xori", 0)} == {"0", "1", "2"}
    assert {c for op, pos, c in seen.narrow if (op, pos) == ("arith.xori", 1)} == {"2^k"}
    # scf.if of two constants: [4, 7]
    assert {c for op, pos, c in seen.narrow if (op, pos) == ("arith.maxsi", 0)} == {"2^k"}
    # an i1 has no narrow range; its constants and values are false/true
    assert not {t for t in seen.narrow if t[:2] == ("arith.select", 0)}
    assert {c for op, pos, c in seen.run_time if (op, pos) == ("arith.select", 0)} == {"false", "true"}
    assert {c for op, pos, c in seen.possible if (op, pos) == ("arith.select", 0)} == {"false", "true"}


def test_a_value_known_only_at_run_time():
    seen = ec.module_coverage(RUN_TIME)
    for edge in ("-1", "INT_MIN", "INT_MAX", "0", "1"):
        assert ("arith.addi", 0, edge) in seen.run_time
        assert ("arith.addi", 0, edge) not in seen.constant | seen.narrow
    assert {c for op, pos, c in seen.constant if pos == 1} == set()  # 3 is no edge value
    row = seen.table()[0]
    assert (row.op, row.position, row.constant, row.narrow, row.total) == ("arith.addi", 0, 0, 0, 9)
    assert row.run_time == len({"0", "1", "-1", "INT_MIN", "INT_MAX", "INT_MIN+1", "INT_MAX-1", "2", "2^k"}
                               & {edge_class(r[0] + 0, "i32") for r in inputs.I32})
    merged = ec.edge_coverage([RUN_TIME, DIVSI])
    assert merged.programs == 2 and merged.run_time >= seen.run_time
    assert "2 programs" in merged.summary() and "run time" in merged.summary()


def test_an_i1_constant_reaches_scf_if_and_select():
    seen = ec.module_coverage("""\
func.func @k(%a: i32, %m: memref<4xi32>) -> i32 {
  %t = arith.constant true
  %i = arith.constant 3 : index
  %z = arith.extui %t : i1 to i32
  %s = arith.select %t, %a, %z : i32
  scf.if %t {
    memref.store %s, %m[%i] : memref<4xi32>
  }
  return %s : i32
}
""")
    assert {("scf.if", 0, "true"), ("arith.select", 0, "true"), ("arith.extui", 0, "true"),
            ("arith.select", 2, "1")} <= seen.constant
    assert ("memref.store", 0, "INT_MIN") in seen.run_time and seen.stopped_rows == 0


def _run_rows(text: str):
    """Every call main makes, run by the edge coverage's own runner: (printed lines, and
    the (id(op), operand values) of every step), with the compile-time intervals."""
    functions = ec._module(text)
    static: dict = {}
    for name, function in functions.items():
        if name != "main":
            ec._known_block(function.body, {p: ec.full(t) for p, t in function.params}, ec.EdgeCoverage(), static)
    runner = ec._Runner({n: f for n, f in functions.items() if n != "main"}, set())
    runner.trace = []
    lines = []
    for number, (symbol, kinds, constant, rows) in enumerate(ec._calls(text, functions)):
        for row in rows:
            buffer = list(inputs.MEMORY[row])
            args = ec._arguments(kinds, row, buffer)
            runner.steps = 0
            results = runner.call(symbol, [a for k, a in enumerate(args) if k not in constant])
            lines.append(", ".join(map(str, [number, row, *results, *(buffer if "memref" in kinds else [])])))
    return lines, runner.trace, static


def test_run_time_values_are_the_interpreters_and_the_intervals_hold():
    steps = 0
    for program in _wide(40, 17):
        text = with_twins(exec_module(program), plan_for(program))
        lines, trace, static = _run_rows(text)
        assert lines == expected_output(layout_of(text), interpret_program(program)).splitlines()
        for op, values in trace:
            for k, value in enumerate(values):
                if isinstance(value, int):  # a buffer is a list
                    lo, hi = static[op][k]
                    assert lo <= value <= hi
            steps += 1
    assert steps > 50_000


@pytest.fixture(scope="module")
def sample():
    programs = _wide(100, 5)
    plain = [exec_module(p) for p in programs]
    twinned = [with_twins(exec_module(p), plan_for(p)) for p in programs]
    return plain, twinned


def test_twins_reach_strictly_more_constants(sample):
    plain, twinned = (ec.edge_coverage(texts) for texts in sample)
    assert plain.programs == twinned.programs == 100
    assert plain.constant < twinned.constant  # strictly more triples as constants
    assert len(twinned.constant) >= len(plain.constant) + 20
    assert twinned.run_time == plain.run_time  # a twin computes its original's values
    assert twinned.possible == plain.possible and twinned.operations > plain.operations
    assert plain.narrow and plain.constant < plain.possible and plain.run_time <= plain.possible


def test_a_measured_twin_module_is_valid_mlir(sample, mlir_opt, tmp_path):
    text = sample[1][0]
    assert ec.module_coverage(text).constant
    path = tmp_path / "twins.mlir"
    path.write_text(text)
    done = subprocess.run([mlir_opt, str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_coverage_command_prints_edges(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k, program in enumerate(_wide(20, 9)):
        (corpus / f"p{k}.mlir").write_text(program)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "harness.cli", "coverage", str(corpus), *a],  # noqa: E731
                                    capture_output=True, text=True, env=env, cwd=ROOT)
    done = run("--profile", "wide", "--edges", "--twins", "1")
    assert done.returncode == 0, done.stderr
    assert "edge values at operands: 20 exec modules (20 with constant twins: --twins 1)" in done.stdout
    assert any(line.split()[:2] == ["arith.divsi", "0"] for line in done.stdout.splitlines())
    assert done.stdout.splitlines()[-1].startswith("edge values: 20 programs")
    plain = json.loads(run("--profile", "wide", "--edges", "--twins", "0", "--json").stdout)["edges"]
    twins = json.loads(run("--profile", "wide", "--edges", "--json").stdout)["edges"]  # default 0.25
    assert plain["twinned"] == 0 and 0 < twins["twinned"] < 20 and plain["programs"] == 20
    assert len(plain["constant"]) <= len(twins["constant"])
    assert "edges" not in json.loads(run("--profile", "wide", "--json").stdout)
    refused = run("--grammar", str(ROOT / "tests" / "grammars" / "calc.py"), "--edges")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
