"""Upstream MLIR bugs found by loom-fuzz, pinned as observed in mlir-opt-22 (and 16).

These tests document the behaviour of Debian's ``mlir-opt-22`` (LLVM 22.1.8)
on programs the fuzzer found, and of LLVM's development head with every
upstream pass (``mlir-opt-head``: the torch-mlir 20261001 wheel's MLIR
bindings, llvm-project 10dbfc4863c9), measured by running each program through
it.  They assert what happens today, bug included, so that a change of
behaviour (an upgrade of a release or of the head's wheel that fixes the bug,
or changes it) makes them fail and gets looked at.

int-range-optimizations hangs on nested loops (issue 9's wide campaign)
-----------------------------------------------------------------------

Found by ``mlir-opt-22 --allow-unregistered-dialect --split-input-file
--pass-pipeline='builtin.module(int-range-optimizations)'`` over 5,000
``loomfuzz generate --profile wide --seed 1 --render oracle`` programs (program
3477 of the stream), minimized by ``loomfuzz triage --target mlir-opt --profile
wide --pipeline 'builtin.module(int-range-optimizations)'``
(tests/programs/upstream_int_range_hang_wide.mlir, a program of the wide
grammar; P1-P24 hold) and by hand to one function
(tests/programs/upstream_int_range_hang_func.mlir).

An ``scf.for`` carries an i32 ``%k0``; the body computes ``%v4 = 1 + %k0`` and
passes it through an inner ``scf.for``'s ``iter_args`` back to the yield.
IntegerRangeAnalysis then widens the range of ``%k0`` by one per solver visit
([1,1], [1,2], [1,3], ...) with no widening operator, so the fixpoint takes
about 2^31 steps on i32: the pass runs for hours (the same function on i8
finishes in 0.2 s, on i16 in 2.3 s; i32 is 2^16 times the i16 work).  Not a
crash: no diagnostic, no output, 100% CPU until killed.  The bounds do not
matter (the loops here run zero times; 1 to 4 hangs too); one loop alone does
not hang.  Upstream knows the ratchet (llvm/llvm-project #192235, #193338,
fixed in main by #196616, a per-lattice widening budget, after LLVM 22; the
head with every pass finishes both programs). The other pipelines of the
campaign accept the same program at once.

sccp folds a loop that may run zero times to its yield (MLIR 16, wrong code)
----------------------------------------------------------------------------

Found by the differential judge (``Optimizer(binary="mlir-opt-16",
pipeline="builtin.module(canonicalize,cse,sccp)")``) on the exec rendering of
wide program 84 of seed 7 (tests/programs/upstream_mlir16_sccp_zero_trip_wide.mlir),
its overflow flags left out for release 16 (harness/execute/releases.py);
minimized by hand to ``ZERO_TRIP``.  An ``scf.for`` from 0 to an unknown ``%n``
whose body yields a constant: MLIR 16's sccp replaces the loop's result by that
constant, but for ``%n <= 0`` the loop runs zero times and its result is its
``iter_args`` initial value (the scf.for semantics; the reference interpreter,
the unoptimized run and mlir-opt-19/22 agree).  In the wide program, region
graph_14's loop runs ``(a & 31) + 31 & 1`` times: for ``a = 1`` zero times, so
the region returns 32, and mlir-opt-16's output returns 1.  Debian's mlir-opt-19
(19.1.7), mlir-opt-22 and the head keep the loop: fixed upstream between 16 and 19.

remove-dead-values deletes values still in use (MLIR 22 and 19; issue 35's hunt)
--------------------------------------------------------------------------------

Found by the crash hunt of 2026-12-06 (``loomfuzz run --target mlir-opt-22
--pipeline 'builtin.module(remove-dead-values,canonicalize)' --profile wide -n
20000 --seed 36``: 2 of 20,000 programs), confirmed by running
``mlir-opt-22 --allow-unregistered-dialect --remove-dead-values`` on each file
alone, and minimized by ``loomfuzz triage --target mlir-opt-22 --pipeline
'builtin.module(remove-dead-values)' --profile wide`` (P1-P24 hold). Both
programs parse and verify without the pass. In both, a region's result is used
only by an unregistered op (``loom.spatial_yield``) and flows from an
``scf.if`` whose branch calls a function: remove-dead-values erases the
call's operand (``tests/programs/upstream_rdv_null_operand_wide.mlir``: the
verifier then reports ``null operand found`` on the ``func.call``, exit 1, as
in llvm/llvm-project #82788, open) or a loop bound, after which its own
cleanup patterns dereference the null value
(``tests/programs/upstream_rdv_trip_count_crash_wide.mlir``: SIGSEGV in
``mlir::constantTripCount``). MLIR 19 aborts on both ("SmallVector unable to
grow", the crash tests/test_target_model.py finds on about half of the wide
programs). The head with every pass takes both (its output verifies): fixed or
changed upstream after LLVM 22; iree-opt registers no remove-dead-values.

canonicalize spins on the control flow of a zero-trip loop (19, 22 and the head)
-------------------------------------------------------------------------------

Found by the same hunt (``--pipeline 'builtin.module(convert-scf-to-cf,canonicalize,
lift-cf-to-scf)'``, and ``convert-scf-to-cf,canonicalize`` on the development
head: the same 9 of 20,000 wide programs time out on both), minimized by
``loomfuzz triage --target mlir-opt-22 --pipeline
'builtin.module(convert-scf-to-cf,canonicalize)' --timeout 3``
(``tests/programs/upstream_cf_canonicalize_hang_wide.mlir``): an ``scf.for``
from 1 to 1 inside ``scf.if``s on one condition. ``convert-scf-to-cf`` alone
takes 0.06 s; ``canonicalize`` after it never ends (a backtrace of the
running process: ``applyPatternsGreedily`` folding a commutative op, again
and again). mlir-opt-19, mlir-opt-22 and both heads (iree-opt and
mlir-opt-head, LLVM 24.0.0git) all hang. The same spin as llvm/llvm-project PR #221037 ("Fix
non-termination in simplifyBrToBlockWithSinglePred", closed): its reproducer
(``CF_SPIN`` below) hangs ``canonicalize`` on 22 and on the head too.

int-range-optimizations folds ceildivsi(INT_MIN, d > 0) to its negation (MLIR 22; wrong code)
----------------------------------------------------------------------------------------------

Found by the wrong-code hunt with constant twins (``loomfuzz run --oracle
differential --target mlir-opt-22 --pipeline
'builtin.module(int-range-optimizations,canonicalize)' --profile wide -n 3000
--seed 41 --twins 1``: 3 of 3,000 programs, all in twins whose ``i32`` argument
is the constant INT_MIN), minimized by ``loomfuzz triage --oracle differential``
to one ``arith.ceildivsi %a0, 3`` (``tests/programs/upstream_ceildivsi_int_min_wide.mlir``,
twins ``8:ff,21:83``; culprit ``int-range-optimizations``). By hand, ceil(-2^31 / 3)
is -715827882 (arith's definition, its own folder and ``arith-expand`` since
llvm/llvm-project #133774; the interpreter and the unoptimized run agree); the
pass folds it to +715827882: ``intrange::inferCeilDivS`` still computes
``-(-a / b)`` for a negative dividend, and ``-INT_MIN`` wraps. MLIR 19 folds it
right; MLIR 16 folds it wrong too, and MLIR 15 and 16's canonicalize as well (their
own folder: #89382, fixed by #90947 in 19); MLIR 15 and iree-opt have no
int-range-optimizations; the head with every pass folds it wrong too. Known upstream:
#215696 (open, the inference). #214637 (merged 2026-08-12, after the head) made arith's
own folder fold ceildivsi with an INT_MIN operand; the folder it replaced gave up there
(its description: a missed fold, not a miscompile), as the head's canonicalize still does.
Without twins the pass never sees INT_MIN as a constant here: 20,000 wide programs
through int-range-optimizations gave no finding.

arith-int-range-narrowing: a shift past its new width, overflow flags kept (MLIR 22; poison)
--------------------------------------------------------------------------------------------

The same hunt through ``arith-int-range-narrowing{int-bitwidths-supported=8,16,32},canonicalize``:
85 of 3,000 programs, wrong-code (the JIT's values differ) and executor-disagreement (the IR
executor sees poison reach a print). Triage minimized the shifts to ``-1 >> (x & 31)``
narrowed to ``i8`` (``NARROW_SHIFT``; upstream #218191, fixed by #218495 after LLVM 22); the
others narrow an ``i32`` ``muli ... overflow<nsw, nuw>`` of two values in [0, 255] to ``i16``
with both flags kept, though 65025 overflows ``i16`` signed (``NARROW_FLAGS``; not found
reported upstream; the head with every pass keeps the flags too). The head folds the shift
to -1 and narrows ``NARROW_MAXSI`` only to ``i16``, where [0, 255] fits signed. The hunt of 2026-12-07 (range-known operands,
``canonicalize,arith-int-range-narrowing{int-bitwidths-supported=8,16}``, 3,000 programs,
seed 101) found a third: ``maxsi(0, x & 255)`` narrowed to a signed ``i8`` maximum, where 255
is -1 (``NARROW_MAXSI``; as upstream #189676, merged after LLVM 22).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.execute.differential import Optimizer, WrongCode, judge
from harness.execute.interpret import interpret_program
from harness.execute.releases import for_release, major_version
from harness.execute.exec_rendering import exec_module

PROGRAMS = Path(__file__).parent / "programs"
ROOT = Path(__file__).resolve().parent.parent
WIDE = PROGRAMS / "upstream_int_range_hang_wide.mlir"
FUNC = PROGRAMS / "upstream_int_range_hang_func.mlir"
ZERO_TRIP_WIDE = PROGRAMS / "upstream_mlir16_sccp_zero_trip_wide.mlir"
ZERO_TRIP = """\
func.func @f(%n: index, %init: i32) -> i32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1 : i32
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%k = %init) -> (i32) {
    scf.yield %one : i32
  }
  return %r : i32
}
"""

#: How long a run must last to count as the hang.  A run that terminates takes
#: about 0.1 s on these programs; the hang, about 2^31 solver steps.
HANG_SECONDS = 5.0

INT_RANGE = "--pass-pipeline=builtin.module(int-range-optimizations)"

#: What mlir-opt-22 --int-range-optimizations prints for FUNC with i8 for i32
#: (the range saturates after 2^7 steps; nothing is folded).
I8_OUTPUT = """\
module {
  func.func @f() -> i8 {
    %c1_i8 = arith.constant 1 : i8
    %c1 = arith.constant 1 : index
    %0 = scf.for %arg0 = %c1 to %c1 step %c1 iter_args(%arg1 = %c1_i8) -> (i8) {
      %1 = arith.addi %arg1, %c1_i8 : i8
      %2 = scf.for %arg2 = %c1 to %c1 step %c1 iter_args(%arg3 = %1) -> (i8) {
        scf.yield %arg3 : i8
      }
      scf.yield %2 : i8
    }
    return %0 : i8
  }
}

"""


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _hangs(argv: list[str], text: str) -> subprocess.TimeoutExpired:
    """Run argv on text; return the TimeoutExpired (its process group killed) or fail.

    The whole group: the wheel's ``iree-opt`` is a Python script that runs the real
    binary as a child, which a kill of the script alone leaves spinning."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(text.encode(), timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired as expired:
        os.killpg(proc.pid, signal.SIGKILL)
        expired.stdout, expired.stderr = proc.communicate()
        deadline = time.monotonic() + 10
        while _group_alive(proc.pid):  # nothing of the hang outlives the test
            assert time.monotonic() < deadline, f"{argv[0]}'s process group still runs after SIGKILL"
            time.sleep(0.05)
        return expired
    proc = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    pytest.fail(f"{' '.join(argv)} finished within {HANG_SECONDS:g} s (exit {proc.returncode}): "
                "the upstream hang is gone or changed; stderr:\n" + proc.stderr.decode()[-2000:])


def test_wide_program_hangs_int_range_optimizations(mlir_opt):
    expired = _hangs([mlir_opt, "--allow-unregistered-dialect", INT_RANGE], WIDE.read_text())
    assert not expired.stdout  # the module is printed only at the end
    assert not expired.stderr  # no diagnostic, no stack dump


@pytest.mark.parametrize("pipeline", [None, "canonicalize,cse,sccp", "remove-dead-values",
                                      "convert-scf-to-cf"])
def test_wide_program_is_valid_for_the_other_pipelines(mlir_opt, pipeline):
    argv = [mlir_opt, "--allow-unregistered-dialect"]
    if pipeline:
        argv.append(f"--pass-pipeline=builtin.module({pipeline})")
    proc = subprocess.run(argv, input=WIDE.read_text(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith("module {")
    assert '"dataflow.thread"' in proc.stdout


def test_function_hangs_int_range_optimizations(mlir_opt):
    expired = _hangs([mlir_opt, "--int-range-optimizations"], FUNC.read_text())
    assert not expired.stdout
    assert not expired.stderr


@pytest.mark.parametrize("program", [WIDE, FUNC], ids=["wide", "func"])
def test_the_head_with_every_pass_no_longer_ratchets(program):
    """Measured: LLVM's head (10dbfc4863c9) has #196616's widening budget; both programs finish."""
    done = _on_head("--allow-unregistered-dialect", INT_RANGE, text=program.read_text())
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("module {")


def test_function_on_i8_terminates(mlir_opt):
    """The mechanism: on i8 the same ratchet ends after 2^7 steps."""
    proc = subprocess.run([mlir_opt, "--int-range-optimizations"],
                          input=FUNC.read_text().replace("i32", "i8"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout == I8_OUTPUT


def _sccp(binary: str, text: str) -> str:
    proc = subprocess.run([binary, "--pass-pipeline=builtin.module(sccp)"], input=text,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_mlir_16_sccp_folds_a_loop_that_may_not_run(mlir_opt):
    """Known bug, expected: it fails when mlir-opt-16 stops folding (by hand: %n = 0 runs the
    loop zero times, so @f returns %init, not 1)."""
    wrong = _sccp("mlir-opt-16", ZERO_TRIP)
    assert "scf.for" not in wrong and "return %c1_i32 : i32" in wrong, wrong
    assert "scf.for" in _sccp(mlir_opt, ZERO_TRIP)  # the current release keeps the loop
    assert "scf.for" in _sccp(_every_pass_head(), ZERO_TRIP)  # and the head with every pass


def test_the_judge_finds_it_in_the_wide_program():
    program = ZERO_TRIP_WIDE.read_text()
    text = for_release(exec_module(program), major_version("mlir-opt-16"))
    verdict = judge(text, Optimizer(binary="mlir-opt-16", pipeline="builtin.module(canonicalize,cse,sccp)"))
    assert isinstance(verdict, WrongCode), verdict
    assert verdict.reference_output == interpret_program(program)  # independently: the interpreter
    region = next(d for d in verdict.differences if d.function.name == "graph_14")
    assert (region.reference, region.target) == ("32", "1"), verdict.describe()
    same = judge(text, Optimizer(binary="mlir-opt-22", pipeline="builtin.module(canonicalize,cse,sccp)"))
    assert same.kind == "same", same


RDV_NULL_OPERAND = PROGRAMS / "upstream_rdv_null_operand_wide.mlir"
RDV_TRIP_COUNT = PROGRAMS / "upstream_rdv_trip_count_crash_wide.mlir"


def _remove_dead_values(binary: str, program: Path, *passes: str) -> subprocess.CompletedProcess:
    pipeline = ",".join(("remove-dead-values", *passes))
    return subprocess.run([binary, "--allow-unregistered-dialect", f"--pass-pipeline=builtin.module({pipeline})",
                           str(program)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("program", [RDV_NULL_OPERAND, RDV_TRIP_COUNT])
def test_remove_dead_values_programs_are_valid_without_the_pass(mlir_opt, program):
    done = subprocess.run([mlir_opt, "--allow-unregistered-dialect", str(program)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # it parses and verifies: the pass breaks it
    cse = subprocess.run([mlir_opt, "--allow-unregistered-dialect", "--cse", "--canonicalize", str(program)],
                         capture_output=True, text=True)
    assert cse.returncode == 0, cse.stderr  # other passes take it


def test_remove_dead_values_leaves_a_null_operand(mlir_opt):
    done = _remove_dead_values(mlir_opt, RDV_NULL_OPERAND)
    assert done.returncode == 1
    assert "error: null operand found" in done.stderr and "func.call" in done.stderr


def test_remove_dead_values_crashes_in_constant_trip_count(mlir_opt):
    done = _remove_dead_values(mlir_opt, RDV_TRIP_COUNT)
    assert done.returncode < 0 or done.returncode == 139, done.returncode  # SIGSEGV
    assert "mlir::constantTripCount" in done.stderr


@pytest.mark.parametrize("program", [RDV_NULL_OPERAND, RDV_TRIP_COUNT])
def test_the_head_with_every_pass_takes_both(program):
    """Measured: LLVM's head (10dbfc4863c9) neither leaves a null operand nor crashes on either
    program: its remove-dead-values output verifies, and canonicalize after it too."""
    for passes in ((), ("canonicalize",)):
        done = _remove_dead_values(_every_pass_head(), program, *passes)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert done.stdout.startswith("module {")


@pytest.mark.parametrize("program", [RDV_NULL_OPERAND, RDV_TRIP_COUNT])
def test_mlir_19_aborts_on_both(program):
    binary = shutil.which("mlir-opt-19")
    if binary is None:
        pytest.fail("mlir-opt-19 is not installed (bash .ci/setup installs it)")
    done = _remove_dead_values(binary, program)
    assert done.returncode != 0 and "SmallVector unable to grow" in done.stderr


def test_the_fuzzer_finds_them_through_its_persistent_driver(tmp_path):
    """Both through loomfuzz run (the MLIR 22 driver), each a finding of its own kind."""
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--target", "mlir-opt-22", "--pipeline",
                           "builtin.module(remove-dead-values)", "--artifacts", str(tmp_path / "a"),
                           "--no-progress", str(RDV_NULL_OPERAND), str(RDV_TRIP_COUNT)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1, done.stderr
    kinds = sorted(json.loads(p.read_text())["finding_kind"] for p in (tmp_path / "a").glob("crash-*.json"))
    assert kinds == ["crash", "unexpected-rejection"], (kinds, done.stdout)
    assert "runner persistent, driver loomfuzz-mlir-driver," in done.stdout


CF_HANG = PROGRAMS / "upstream_cf_canonicalize_hang_wide.mlir"
CF_SPIN = """\
func.func @loop() {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %enter = arith.cmpi sgt, %c2, %c0 : i32
  cf.cond_br %enter, ^exit, ^header(%c2 : i32)
^header(%iv: i32):
  %done = arith.cmpi eq, %iv, %c2 : i32
  cf.cond_br %done, ^exit, ^latch
^latch:
  %next = arith.addi %iv, %c1 : i32
  cf.br ^header(%next : i32)
^exit:
  return
}
"""


def _head() -> str:
    found = shutil.which("iree-opt") or shutil.which("iree-opt", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("iree-opt is not installed (bash .ci/setup installs the test extras)")
    return found


def _every_pass_head() -> str:
    """``mlir-opt-head``: LLVM's development head with every upstream pass (torch-mlir's bindings,
    llvm-project 10dbfc4863c9 in torch-mlir 20261001)."""
    found = shutil.which("mlir-opt-head") or shutil.which("mlir-opt-head", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("mlir-opt-head is not installed (bash .ci/setup installs the test extras)")
    return found


def _on_head(*args: str, text: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([_every_pass_head(), *args], input=text, capture_output=True, text=True, timeout=120)
    return done


def test_canonicalize_after_scf_to_cf_hangs_on_22(mlir_opt):
    lowered = subprocess.run([mlir_opt, "--allow-unregistered-dialect",
                              "--pass-pipeline=builtin.module(convert-scf-to-cf)", str(CF_HANG)],
                             capture_output=True, text=True, timeout=30)
    assert lowered.returncode == 0, lowered.stderr  # the lowering alone is quick
    expired = _hangs([mlir_opt, "--allow-unregistered-dialect",
                      "--pass-pipeline=builtin.module(convert-scf-to-cf,canonicalize)"], CF_HANG.read_text())
    assert not expired.stderr  # no diagnostic, no stack dump


@pytest.mark.parametrize("head", [_head, _every_pass_head], ids=["iree-opt", "mlir-opt-head"])
def test_the_development_head_hangs_too(head):
    _hangs([head(), "--allow-unregistered-dialect",
            "--pass-pipeline=builtin.module(convert-scf-to-cf,canonicalize)"], CF_HANG.read_text())
    _hangs([head(), "--canonicalize"], CF_SPIN)


def test_the_upstream_reproducer_of_the_spin_hangs_22(mlir_opt):
    _hangs([mlir_opt, "--canonicalize"], CF_SPIN)


CEILDIVSI_WIDE = PROGRAMS / "upstream_ceildivsi_int_min_wide.mlir"
CEILDIVSI_TWINS = "8:ff,21:83"  # the finding's constant twins (harness/execute/twins.py)
CEILDIVSI = """\
func.func @f() -> i32 {
  %a = arith.constant -2147483648 : i32
  %b = arith.constant DIVISOR : i32
  %r = arith.ceildivsi %a, %b : i32
  return %r : i32
}
"""


def _folded(binary: str, divisor: int, *passes: str) -> str:
    done = subprocess.run([binary, *passes], input=CEILDIVSI.replace("DIVISOR", str(divisor)),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("divisor", [2, 3, 5, 7])
def test_mlir_22_int_range_optimizations_folds_ceildivsi_of_int_min_to_its_negation(mlir_opt, divisor):
    """Known bug, expected: ceildivsi(INT_MIN, d > 0) is ceil(-2^31 / d) (arith's definition, its
    folder and arith-expand since llvm/llvm-project #133774), but MLIR 22's range inference
    computes it as -(-a / d), and -INT_MIN wraps: the pass folds it to the positive value.
    Upstream: #215696 (open) changes intrange::inferCeilDivS; MLIR 19 folds it right."""
    right = -((2 ** 31) // divisor)  # ceil(-2^31 / d) for d > 0, by hand
    folded = _folded(mlir_opt, divisor, "--int-range-optimizations")
    assert f"arith.constant {-right} : i32" in folded, folded  # the bug
    binary = shutil.which("mlir-opt-19")
    if binary is None:
        pytest.fail("mlir-opt-19 is not installed (bash .ci/setup installs it)")
    assert f"arith.constant {right} : i32" in _folded(binary, divisor, "--int-range-optimizations")


@pytest.mark.parametrize("divisor", [2, 3, 5, 7])
def test_the_head_with_every_pass_folds_ceildivsi_of_int_min_to_its_negation_too(divisor):
    """Measured: LLVM's head (10dbfc4863c9) has the bug (#215696, open, is not in it); its own
    folder (canonicalize) leaves the operation alone: the conservative folder #214637 replaced
    (merged 2026-08-12, after this head)."""
    right = -((2 ** 31) // divisor)
    head = _every_pass_head()
    assert f"arith.constant {-right} : i32" in _folded(head, divisor, "--int-range-optimizations")
    assert "arith.ceildivsi" in _folded(head, divisor, "--canonicalize")


def _release(major: int) -> str:
    binary = shutil.which(f"mlir-opt-{major}")
    if binary is None:
        pytest.fail(f"mlir-opt-{major} is not installed (bash .ci/setup installs it)")
    return binary


@pytest.mark.parametrize("divisor", [2, 3, 7])
def test_older_releases_fold_ceildivsi_of_int_min_to_its_negation_too(divisor):
    """Known bugs, expected: MLIR 15 and 16's own folder (canonicalize) gives the same wrong
    positive value (llvm/llvm-project #89382, fixed by #90947 in 19, where the folder gives
    up instead), and MLIR 16's int-range-optimizations too (found by triage --releases)."""
    right = -((2 ** 31) // divisor)
    for major in (15, 16):
        assert f"arith.constant {-right} : i32" in _folded(_release(major), divisor, "--canonicalize")
    assert f"arith.constant {-right} : i32" in _folded(_release(16), divisor, "--int-range-optimizations")
    for major in (19, 22):  # the fixed folder leaves it alone
        assert "arith.ceildivsi" in _folded(_release(major), divisor, "--canonicalize")


def test_the_judge_finds_the_ceildivsi_fold_only_with_twins():
    """The hunt's finding (run --oracle differential --twins 1, int-range-optimizations,canonicalize,
    wide seed 41), minimized by triage: INT_MIN reaches ceildivsi as a twin's constant."""
    from harness.execute.twins import TwinPlan, with_twins
    from twin_values import interpreted

    program = CEILDIVSI_WIDE.read_text()
    optimizer = Optimizer(pipeline="builtin.module(int-range-optimizations)")
    text = with_twins(exec_module(program), TwinPlan.parse(CEILDIVSI_TWINS))
    verdict = judge(text, optimizer)
    assert isinstance(verdict, WrongCode), verdict
    assert verdict.reference_output == interpreted(program, CEILDIVSI_TWINS)  # independently
    (difference,) = [d for d in verdict.differences if d.function.name == "graph_0"]
    assert difference.function.twin_of and difference.row == 8
    assert (difference.reference, difference.target) == ("-715827882", "715827882"), verdict.describe()
    assert judge(exec_module(program), optimizer).kind == "same"  # at run time the pass cannot fold it


NARROW_SHIFT = """\
func.func @f(%x: i32) -> i32 {
  %c31 = arith.constant 31 : i32
  %m1 = arith.constant -1 : i32
  %s = arith.andi %x, %c31 : i32
  %r = arith.shrsi %m1, %s : i32
  return %r : i32
}
"""
NARROW_FLAGS = """\
func.func @f(%x: i32, %y: i32) -> i32 {
  %c255 = arith.constant 255 : i32
  %a = arith.andi %x, %c255 : i32
  %b = arith.andi %y, %c255 : i32
  %m = arith.muli %a, %b overflow<nsw, nuw> : i32
  return %m : i32
}
"""


NARROW_MAXSI = """\
func.func @f(%x: i32) -> i32 {
  %c255 = arith.constant 255 : i32
  %c0 = arith.constant 0 : i32
  %a = arith.andi %x, %c255 : i32
  %r = arith.maxsi %c0, %a : i32
  return %r : i32
}
"""


def _narrowed(binary: str, text: str, widths: str) -> str:
    done = subprocess.run([binary, f"--arith-int-range-narrowing=int-bitwidths-supported={widths}"], input=text,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_mlir_22_narrowing_narrows_a_shift_past_its_new_width(mlir_opt):
    """Known bug, expected: -1 >> (x & 31) is -1 for every x in i32, but narrowed to i8 a shift
    by 8..31 is poison (arith.shrsi's definition). llvm/llvm-project #218191, fixed after LLVM 22
    by #218495. Found by the hunt (arith-int-range-narrowing{8,16,32},canonicalize, --twins 1):
    the IR executor's poison, the JIT's garbage."""
    out = _narrowed(mlir_opt, NARROW_SHIFT, "8")
    assert re.search(r"arith\.shrsi %\S+, %\S+ : i8", out), out
    head = _narrowed(_every_pass_head(), NARROW_SHIFT, "8")  # measured: the head folds it to -1
    assert "shrsi" not in head and re.search(r"return %c-1_i32 : i32", head), head


def test_mlir_22_narrowing_keeps_overflow_flags_that_no_longer_hold(mlir_opt):
    """Known bug, expected: the i32 product of two values in [0, 255] is below 2^16, so nsw and
    nuw hold in i32; narrowed to i16 the pass keeps ``overflow<nsw, nuw>``, and 255 * 255 =
    65025 > 32767 overflows i16 signed: poison where the original is 65025 (by arith.muli's
    definition of nsw). Not found reported upstream. Without the flags it narrows right."""
    out = _narrowed(mlir_opt, NARROW_FLAGS, "16")
    assert re.search(r"arith\.muli %\S+, %\S+ overflow<nsw, nuw> : i16", out), out
    assert 255 * 255 > 2 ** 15 - 1  # the signed i16 range the flag promises to stay in
    plain = _narrowed(mlir_opt, NARROW_FLAGS.replace(" overflow<nsw, nuw>", ""), "16")
    assert re.search(r"arith\.muli %\S+, %\S+ : i16", plain), plain


def test_the_head_with_every_pass_keeps_the_overflow_flags_too():
    """Measured: LLVM's head (10dbfc4863c9) narrows the product to i16 with both flags kept, as 22."""
    out = _narrowed(_every_pass_head(), NARROW_FLAGS, "16")
    assert re.search(r"arith\.muli %\S+, %\S+ overflow<nsw, nuw> : i16", out), out


@pytest.mark.parametrize("op, program, by_hand", [
    ("maxsi", NARROW_MAXSI, (255, max(255 - 256, 0))),  # x = -1: 255 before; maxsi(-1, 0) = 0 in i8
    ("divsi", NARROW_MAXSI.replace("%c0 = arith.constant 0", "%c0 = arith.constant 2")
     .replace("arith.maxsi %c0, %a", "arith.divsi %a, %c0"), (127, int((255 - 256) / 2))),  # divsi(-1, 2) = 0
])
def test_mlir_22_narrowing_narrows_a_signed_operation_past_the_sign_bit(mlir_opt, op, program, by_hand):
    """Known bug, expected: maxsi(0, x & 255) and divsi(x & 255, 2) read a value in [0, 255];
    the pass narrows the signed operation to i8, where 255 is -1, so for x = -1 the maximum
    gives 0 (255 before) and the quotient 0 (127 before): the i8 range holds [0, 255] only
    unsigned.  As llvm/llvm-project #189676 ("Avoid sign overflow when narrowing signed
    operations"), merged after LLVM 22.  Found by the hunt of 2026-12-07
    (canonicalize,arith-int-range-narrowing{8,16}: maxsi in 3 of 3,000 programs, then divsi in
    49 of 20,000)."""
    out = _narrowed(mlir_opt, program, "8,16")
    assert re.search(r"arith\.trunci %\S+ : i32 to i8", out), out
    assert re.search(rf"arith\.{op} %\S+, %\S+ : i8", out), out
    assert re.search(r"arith\.extui %\S+ : i8 to i32", out), out  # the i8 result read back unsigned
    before, after = by_hand
    assert before != after and after == 0
    # measured: LLVM's head (10dbfc4863c9, with #189676) narrows it to i16, where [0, 255] fits signed
    head = _narrowed(_every_pass_head(), program, "8,16")
    assert re.search(rf"arith\.{op} %\S+, %\S+ : i16", head) and ": i8" not in head, head
