"""The reference interpreter: every op's semantics checked against real execution
(mlir-runner-22 on the exec rendering), and a loud error for every undefined case."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.execute.interpret import InterpretError, UndefinedBehaviour, interpret_program
from harness.execute.exec_rendering import exec_module
from harness.execute.toolchain import Toolchain

ROOT = Path(__file__).resolve().parent.parent
CANONICAL = ROOT / "tests" / "programs" / "canonical.mlir"

# The canonical program up to thread_0's index constants: the preamble and a thread header.
_PREAMBLE = CANONICAL.read_text().split("  %icall")[0]

# Guards that keep every row of the input table defined: %nz in {1, 3, 5, 7},
# %neg in {-2, -4, -6, -8}, %sh in 0..31, %ha < 2^16, %hb < 2^15.
_GUARDS = """%k0 = arith.constant 0 : i32
%k1 = arith.constant 1 : i32
%k7 = arith.constant 7 : i32
%k31 = arith.constant 31 : i32
%kffff = arith.constant 65535 : i32
%k7fff = arith.constant 32767 : i32
%b7 = arith.andi %b, %k7 : i32
%nz = arith.ori %b7, %k1 : i32
%nz1 = arith.addi %nz, %k1 : i32
%neg = arith.subi %k0, %nz1 : i32
%sh = arith.andi %b, %k31 : i32
%ha = arith.andi %a, %kffff : i32
%hb = arith.andi %b, %k7fff : i32
"""

_CASES = {
    "divsi": "%y = arith.divsi %a, %nz : i32", "divsi-neg": "%y = arith.divsi %a, %neg : i32",
    "divui": "%y = arith.divui %a, %nz : i32", "remsi": "%y = arith.remsi %a, %nz : i32",
    "remsi-neg": "%y = arith.remsi %a, %neg : i32", "remui": "%y = arith.remui %a, %neg : i32",
    "ceildivsi": "%y = arith.ceildivsi %a, %nz : i32", "ceildivsi-neg": "%y = arith.ceildivsi %a, %neg : i32",
    "floordivsi": "%y = arith.floordivsi %a, %nz : i32",
    "floordivsi-neg": "%y = arith.floordivsi %a, %neg : i32",
    "shli": "%y = arith.shli %a, %sh : i32", "shrsi": "%y = arith.shrsi %a, %sh : i32",
    "shrui": "%y = arith.shrui %a, %sh : i32",
    **{f"cmpi-{p}": f"%p = arith.cmpi {p}, %a, %b : i32\n%y = arith.select %p, %a, %b : i32"
       for p in ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")},
    "cmpi-eq-same": "%p = arith.cmpi eq, %a, %a : i32\n%y = arith.select %p, %b, %a : i32",
    "select-flag": "%y = arith.select %c, %a, %b : i32",
    "maxsi": "%y = arith.maxsi %a, %b : i32", "minsi": "%y = arith.minsi %a, %b : i32",
    "maxui": "%y = arith.maxui %a, %b : i32", "minui": "%y = arith.minui %a, %b : i32",
    "addi-flags": "%y = arith.addi %ha, %hb overflow<nsw, nuw> : i32",
    "subi-nsw": "%y = arith.subi %hb, %ha overflow<nsw> : i32",
    "subi-nuw": "%big = arith.ori %ha, %kffff : i32\n%y = arith.subi %big, %hb overflow<nuw> : i32",
    "muli-flags": "%y = arith.muli %ha, %hb overflow<nsw, nuw> : i32",
    "wrap": "%s = arith.addi %a, %b : i32\n%t = arith.muli %s, %b : i32\n%y = arith.subi %t, %a : i32",
    "for-dynamic": """%a3 = arith.andi %a, %k7 : i32
%lb = arith.index_cast %a3 : i32 to index
%b15 = arith.andi %b, %k31 : i32
%ub = arith.index_cast %b15 : i32 to index
%bit = arith.andi %b, %k1 : i32
%st32 = arith.addi %bit, %k1 : i32
%st = arith.index_cast %st32 : i32 to index
%y = scf.for %i = %lb to %ub step %st iter_args(%acc = %a) -> (i32) {
  %ii = arith.index_cast %i : index to i32
  %n = arith.addi %acc, %ii : i32
  %n2 = arith.muli %n, %b : i32
  scf.yield %n2 : i32
}""",
    "if-nested": """%y = scf.if %c -> (i32) {
  %q = scf.if %c -> (i32) {
    %d = func.call @helper_double(%a) : (i32) -> i32
    scf.yield %d : i32
  } else {
    scf.yield %b : i32
  }
  scf.yield %q : i32
} else {
  %e = llvm.call @extern_scale(%b) : (i32) -> i32
  %f = llvm.freeze %e : i32
  scf.yield %f : i32
}""",
    "memory-alias": """%x1 = arith.constant 1 : index
memref.store %a, %m0[%x1] : memref<4xi32>
%l = memref.load %m1[%x1] : memref<4xi32>
%b3 = arith.andi %b, %k7 : i32
%b2 = arith.andi %b3, %k1 : i32
%idx = arith.index_cast %b2 : i32 to index
%o = memref.load %m1[%idx] : memref<4xi32>
memref.store %b, %m1[%idx] : memref<4xi32>
%w = memref.load %m0[%idx] : memref<4xi32>
%lw = arith.xori %l, %w : i32
%y = arith.addi %lw, %o : i32""",
}


def _region(number: int, body: str) -> str:
    lines = "".join(f"      {line}\n" for line in (_GUARDS + body).splitlines())
    return (
        f'  %r{number} = "loom.spatial_region"(%val, %val, %flag, %mem, %mem) <{{operandSegmentSizes = '
        "array<i32: 3, 0, 2, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({\n"
        "    ^bb0(%a: i32, %b: i32, %c: i1, %m0: memref<4xi32>, %m1: memref<4xi32>):\n"
        + lines
        + '      "loom.spatial_yield"(%y) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()\n'
        f'  }}) {{graph_name = "graph_{number}", source_maps = []}} : '
        "(i32, i32, i1, memref<4xi32>, memref<4xi32>) -> i32\n")


def _program(bodies: list[str]) -> str:
    sites = "".join(_region(n, body) for n, body in enumerate(bodies))
    return _PREAMBLE + sites + "  dataflow.thread.yield\n}\n\n}\n"


def test_every_op_agrees_with_mlir_runner():
    """The interpreter's values are the ones real MLIR computes, for every op of the next
    grammars (division family, shifts, ten predicates, flags, dynamic loops, aliasing)."""
    program = _program(list(_CASES.values()))
    real = Toolchain().execute(exec_module(program))
    mine = interpret_program(program)
    names = ["thread"] + list(_CASES)
    disagree = sorted({names[int(a.split(",")[0])] for a, b in zip(real.splitlines(), mine.splitlines())
                       if a != b})
    assert disagree == []
    assert real == mine
    # the guards did not make the cases trivial: each region prints several distinct values
    per_region: dict[str, set] = {}
    for line in mine.splitlines():
        fields = line.split(", ")
        per_region.setdefault(names[int(fields[0])], set()).add(fields[2] if len(fields) > 2 else "")
    assert all(len(values) > 2 for name, values in per_region.items() if name != "thread"), per_region


_UNDEFINED = {
    "division by zero": "%z = arith.constant 0 : i32\n%y = arith.divsi %a, %z : i32",
    "divui by zero": "%z = arith.constant 0 : i32\n%y = arith.divui %a, %z : i32",
    "remui by zero": "%z = arith.constant 0 : i32\n%y = arith.remui %a, %z : i32",
    "INT_MIN / -1": "%n = arith.constant -2147483648 : i32\n%m = arith.constant -1 : i32\n"
                    "%y = arith.divsi %n, %m : i32",
    "remsi INT_MIN % -1": "%n = arith.constant -2147483648 : i32\n%m = arith.constant -1 : i32\n"
                          "%y = arith.remsi %n, %m : i32",
    "ceildivsi INT_MIN / -1": "%n = arith.constant -2147483648 : i32\n%m = arith.constant -1 : i32\n"
                              "%y = arith.ceildivsi %n, %m : i32",
    "floordivsi by zero": "%z = arith.constant 0 : i32\n%y = arith.floordivsi %a, %z : i32",
    "shift by 32": "%s = arith.constant 32 : i32\n%y = arith.shli %a, %s : i32",
    "shift by -1": "%s = arith.constant -1 : i32\n%y = arith.shrui %a, %s : i32",
    "nsw": "%x = arith.constant 2147483647 : i32\n%one = arith.constant 1 : i32\n"
           "%y = arith.addi %x, %one overflow<nsw> : i32",
    "nuw": "%x = arith.constant -1 : i32\n%one = arith.constant 1 : i32\n"
           "%y = arith.addi %x, %one overflow<nuw> : i32",
    "muli nsw": "%x = arith.constant 65536 : i32\n%y = arith.muli %x, %x overflow<nsw> : i32",
    "subi nuw": "%x = arith.constant 0 : i32\n%one = arith.constant 1 : i32\n"
                "%y = arith.subi %x, %one overflow<nuw> : i32",
    "out of bounds": "%x = arith.constant 4 : index\n%y = memref.load %m0[%x] : memref<4xi32>",
    "negative index": "%x = arith.constant -1 : index\n%v = arith.constant 1 : i32\n"
                      "memref.store %v, %m1[%x] : memref<4xi32>\n%y = arith.addi %v, %v : i32",
    "zero step": "%z = arith.constant 0 : index\n%e = arith.constant 4 : index\n"
                 "%y = scf.for %i = %z to %e step %z iter_args(%k = %a) -> (i32) {\n  scf.yield %k : i32\n}",
}
_MESSAGES = {
    "division by zero": "division by zero", "divui by zero": "division by zero",
    "remui by zero": "division by zero", "INT_MIN / -1": "signed overflow",
    "remsi INT_MIN % -1": "signed overflow", "ceildivsi INT_MIN / -1": "signed overflow",
    "floordivsi by zero": "division by zero", "shift by 32": "shift by 32 >= bit width 32",
    "shift by -1": "shift by 4294967295", "nsw": "overflow<nsw>", "nuw": "overflow<nuw>",
    "muli nsw": "overflow<nsw>", "subi nuw": "overflow<nuw>", "out of bounds": "outside memref<4xi32>",
    "negative index": "outside memref<4xi32>", "zero step": "step 0 is not positive",
}


@pytest.mark.parametrize("case", sorted(_UNDEFINED))
def test_undefined_behaviour_is_a_loud_error(case):
    program = _program([_UNDEFINED[case]])
    with pytest.raises(UndefinedBehaviour) as raised:
        interpret_program(program)
    message = str(raised.value)
    assert _MESSAGES[case] in message
    line = int(message.split(":")[0].removeprefix("line "))
    op = message.split(": ")[1]
    assert op in program.splitlines()[line - 1]  # the line named is the offending op's


def test_unreadable_program_names_the_line():
    program = _program(["%y = arith.frobnicate %a, %b : i32"])
    with pytest.raises(InterpretError, match=r"line 3\d: unknown operation 'arith.frobnicate'"):
        interpret_program(program)


def _eval(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "eval", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True)


def test_eval_prints_what_the_exec_module_prints(tmp_path):
    done = _eval(str(CANONICAL))
    assert done.returncode == 0, done.stderr
    assert done.stdout == Toolchain().execute(exec_module(CANONICAL.read_text()))
    two = _eval("-", stdin=CANONICAL.read_text() + "// -----\n" + CANONICAL.read_text())
    assert two.stdout == done.stdout + "// -----\n" + done.stdout


def test_eval_bad_input_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.mlir"
    good = CANONICAL.read_text()
    bad.write_text(good + "// -----\n" + _program(["%y = arith.divsi %a, %a : i32"]).replace(
        "%y = arith.divsi %a, %a", "%y = arith.divsi %a, %k0"))
    done = _eval(str(bad), str(tmp_path / "missing.mlir"))
    assert done.returncode == 2
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 2
    offending = good.count("\n") + 1 + next(k for k, line in enumerate(
        bad.read_text().split("// -----\n")[1].splitlines(), 1) if "divsi" in line)
    assert errors[0] == (f"loomfuzz eval: error: {bad}: line {offending}: arith.divsi: division by zero")
    assert "missing.mlir" in errors[1]
    assert done.stdout.count("\n") > 0  # the good program's output is not lost
