"""The differential judge: does an optimizer keep an exec module's printed values?

Given a program's exec text (``harness.execute.exec_rendering``) and an
:class:`Optimizer` (``mlir-opt-22`` with a pipeline, or any mlir-opt-compatible
binary by path), :func:`judge` optimizes the text, lowers and runs both the
original and the optimized module with the trusted reference
:class:`~harness.execute.toolchain.Toolchain`, and returns one typed verdict:

* :class:`Same`: both print the same lines;
* :class:`WrongCode`: they differ; both outputs, and for every function whose
  lines differ its first :class:`Difference` (function, thread or region,
  row of the input table with the argument values, printed column, both values);
* :class:`ReferenceFailed`: the reference toolchain failed (on the original,
  or on optimized output that is valid MLIR): never the target's fault;
* :class:`TargetFailed`: the optimizer crashed, failed, timed out or printed
  something that is not MLIR;
* :class:`ExecutorsDisagree` (in process only): the IR executor and the JIT
  computed other outputs for the same modules.

:func:`judge_many` gives the same verdicts for many programs, running the
reference toolchain once per batch (falling back to one program at a time
when a batch fails as a whole).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Sequence, Union

from harness.execute import inputs
from harness.execute.exec_layout import ExecFunction, ExecLayout, layout_of
from harness.execute.exec_main import row_inputs
from harness.execute.toolchain import ReferenceFailure, Toolchain

__all__ = ["Difference", "ExecutorsDisagree", "Optimizer", "OptimizerError", "ReferenceFailed", "Same", "TargetFailed",
           "Verdict", "WrongCode", "differences", "printed_poison", "judge", "judge_many", "optimize_all", "reference_outputs"]

#: A module every pipeline accepts: the optimizer's pre-flight check.
_PROBE = "module {\n  func.func @probe(%a: i32) -> i32 {\n    %b = arith.addi %a, %a : i32\n    return %b : i32\n  }\n}\n"


class OptimizerError(Exception):
    """The optimizer cannot be used at all (one line: missing binary, pipeline refused)."""


@dataclass(frozen=True)
class Optimizer:
    """The target: a binary that reads MLIR on stdin and prints the optimized module."""

    binary: str = "mlir-opt-22"
    pipeline: str | None = None  # "-flag ..." or a textual pipeline for --pass-pipeline=
    extra_args: tuple[str, ...] = ()
    timeout: float = 60.0

    def argv(self) -> list[str]:
        args = [self.binary, *self.extra_args]
        if self.pipeline:
            args += shlex.split(self.pipeline) if self.pipeline.startswith("-") else [
                f"--pass-pipeline={self.pipeline}"]
        return args

    def describe(self) -> str:
        return shlex.join(self.argv())

    def check(self) -> None:
        """Raise :class:`OptimizerError` (one line) if the binary is missing or refuses the
        pipeline on a trivial module."""
        if shutil.which(self.binary) is None:
            raise OptimizerError(f"the optimizer {self.binary!r} is not an executable file or on PATH")
        run = self.optimize(_PROBE)
        if run.returncode != 0:
            raise OptimizerError(f"{self.describe()} fails on a trivial module: {run.first_error()}")

    def optimize(self, text: str, split: bool = False) -> "_Run":
        argv = self.argv() + (["--split-input-file"] if split else []) + ["-"]
        try:
            done = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return _Run(None, "", f"timed out after {self.timeout:g} s")
        except OSError as error:
            raise OptimizerError(f"cannot start {self.binary}: {error.strerror or error}") from None
        return _Run(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class _Run:
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str

    def first_error(self) -> str:
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        for line in lines:
            if "error" in line.lower() or "Assertion" in line:
                return line
        return lines[0] if lines else "(no message)"

    def status(self) -> str:
        if self.returncode is None:
            return self.stderr
        return f"exit {self.returncode}" if self.returncode >= 0 else f"signal {-self.returncode}"


@dataclass(frozen=True)
class Difference:
    """The first printed value of one function that differs."""

    line: int  # 1-based line of main's output
    function: ExecFunction
    row: int
    inputs: tuple[tuple[str, object], ...]  # (argument kind, value); memref: the buffer's cells
    column: str  # a result name (%r0, %icall, #0 ...) or mem[k]
    reference: str
    target: str

    def describe(self) -> str:
        where = (f"thread @{self.function.name}" if self.function.kind == "thread"
                 else f"region {self.function.name} (thread @{self.function.thread})")
        args = ", ".join(f"{kind} {value}" for kind, value in self.inputs)
        if self.function.twin_of:  # harness.execute.twins: the inputs were compile-time constants
            known = ", ".join(str(k) for k in self.function.constant_args) or "none"
            where += f" [twin @{self.function.symbol}: arguments {known} compile-time constants]"
        return (f"{where}, input row {self.row} ({args}): {self.column} is {self.target} "
                f"after optimization, {self.reference} before")


@dataclass(frozen=True)
class Same:
    output: str
    kind: str = "same"


@dataclass(frozen=True)
class WrongCode:
    reference_output: str
    target_output: str
    differences: tuple[Difference, ...]  # the first of each function that differs, in print order
    optimized_text: str
    note: str = ""  # e.g. the optimized module crashed at run time
    kind: str = "wrong-code"

    @property
    def first(self) -> Difference | None:
        return self.differences[0] if self.differences else None

    def describe(self) -> str:
        """The first difference and, when that is a thread's, the first region's too (the
        thread only shows what its regions compute)."""
        head = self.first.describe() if self.first else "the output differs"
        region = next((d for d in self.differences if d.function.kind == "region"), None)
        if region is not None and region is not self.first:
            head += f"; first region: {region.describe()}"
        return head + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class ReferenceFailed:
    stage: str  # lower or run, of the original or the optimized module
    detail: str
    kind: str = "reference-failure"


@dataclass(frozen=True)
class TargetFailed:
    stage: str  # optimize (crash, error, timeout) or output (not MLIR)
    detail: str
    stderr: str = ""
    kind: str = "target-failure"


def printed_poison(output: str) -> bool:
    """Whether an IR executor's output has a poison value (printed as ``poison``)."""
    return re.search(r"(^|, )poison(,|$)", output, re.M) is not None


@dataclass(frozen=True)
class ExecutorsDisagree:
    """The IR executor and the JIT (native/loomfuzz-interp.h, native/loomfuzz-exec.h) give
    other outputs for the same modules: a finding of its own (a bug of one executor, or
    poison / undefined behaviour the optimizer introduced that the JIT's code hides)."""

    reference_output: str  # the JIT's
    target_output: str  # the JIT's
    ir_reference_output: str
    ir_target_output: str
    optimized_text: str
    note: str
    kind: str = "executor-disagreement"
    stage: str = "executors"

    @property
    def detail(self) -> str:
        return self.describe()

    @property
    def poison(self) -> bool:
        """Poison reached a print in the IR executor's run of the optimized module."""
        return printed_poison(self.ir_target_output)

    def describe(self) -> str:
        for side, ir, jit in (("original", self.ir_reference_output, self.reference_output),
                              ("optimized module", self.ir_target_output, self.target_output)):
            ir_lines, jit_lines = ir.splitlines(), jit.splitlines()
            for k in range(max(len(ir_lines), len(jit_lines))):
                a = ir_lines[k] if k < len(ir_lines) else "(nothing)"
                b = jit_lines[k] if k < len(jit_lines) else "(nothing)"
                if a != b:
                    return f"{self.note}; {side}, line {k + 1}: IR executor {a!r}, JIT {b!r}"
        return self.note


Verdict = Union[Same, WrongCode, ReferenceFailed, TargetFailed, ExecutorsDisagree]


def differences(layout: ExecLayout, reference: str, target: str) -> tuple[Difference, ...]:
    """For every function whose lines differ, the first differing value (reference order)."""
    ref_lines, out_lines = reference.splitlines(), target.splitlines()
    found: dict[int, Difference] = {}
    for index, ref_line in enumerate(ref_lines):
        got = out_lines[index] if index < len(out_lines) else "(nothing)"
        if got == ref_line:
            continue
        fields = [f.strip() for f in ref_line.split(",")]
        number, row = int(fields[0]), int(fields[1])
        if number in found:
            continue
        function = layout.functions[number]
        columns = ["function", "row", *function.results] + (
            [f"mem[{k}]" for k in range(inputs.MEMORY_CELLS)] if function.takes_memory else [])
        got_fields = [f.strip() for f in got.split(",")]
        at = next((k for k in range(len(fields)) if k >= len(got_fields) or got_fields[k] != fields[k]),
                  len(fields))
        column = columns[at] if at < len(columns) else "line length"
        found[number] = Difference(index + 1, function, row, row_inputs(function, row), column,
                                   fields[at] if at < len(fields) else "(end)",
                                   got_fields[at] if at < len(got_fields) else "(nothing)")
    if not found and len(out_lines) != len(ref_lines):  # extra lines after the reference's
        function = layout.functions[-1]
        found[-1] = Difference(len(ref_lines) + 1, function, inputs.ROWS - 1, (), "extra line",
                               "(end)", out_lines[len(ref_lines)])
    return tuple(sorted(found.values(), key=lambda d: d.line))


def _compare(layout: ExecLayout, reference: str, optimized_text: str, toolchain: Toolchain,
             target_output: str | None = None) -> Verdict:
    """The verdict once the optimizer succeeded (``target_output``: already run in a batch)."""
    note = ""
    if target_output is None:
        try:
            lowered = toolchain.lower(optimized_text)
        except ReferenceFailure as failure:
            problem = toolchain.verify(optimized_text)
            if problem is not None:
                return TargetFailed("output", f"the optimized output is not valid MLIR: {problem}")
            return ReferenceFailed("lower (optimized)", failure.detail)
        try:
            target_output = toolchain.run(lowered)
        except ReferenceFailure as failure:
            target_output, note = failure.output, f"the optimized module {failure.detail}"
    if target_output == reference and not note:
        return Same(reference)
    return WrongCode(reference, target_output, differences(layout, reference, target_output),
                     optimized_text, note)


def _optimized(optimizer: Optimizer, text: str) -> str | TargetFailed:
    run = optimizer.optimize(text)
    if run.returncode != 0:
        return TargetFailed("optimize", f"{run.status()}: {run.first_error()}", run.stderr)
    if not run.stdout.strip():
        return TargetFailed("output", "the optimizer printed nothing")
    return run.stdout


def optimize_all(optimizer: Optimizer, texts: Sequence[str]) -> list[str | TargetFailed]:
    """Each text optimized, from one optimizer process (``--split-input-file``); one
    process per text when the batch fails or cannot be split."""
    batch = optimizer.optimize("// -----\n".join(texts), split=True)
    chunks = batch.stdout.split("// -----\n") if batch.returncode == 0 else []
    if len(chunks) == len(texts) and all(c.strip() for c in chunks):
        return list(chunks)
    return [_optimized(optimizer, text) for text in texts]


def judge(exec_text: str, optimizer: Optimizer, toolchain: Toolchain | None = None,
          reference_output: str | None = None) -> Verdict:
    """One program's verdict.  ``reference_output``: the unoptimized module's output if
    already known (e.g. shared by several optimizers)."""
    toolchain = toolchain or Toolchain()
    layout = layout_of(exec_text)
    if reference_output is None:
        try:
            reference_output = toolchain.execute(exec_text)
        except ReferenceFailure as failure:
            return ReferenceFailed(failure.stage, failure.detail)
    optimized = _optimized(optimizer, exec_text)
    if isinstance(optimized, TargetFailed):
        return optimized
    return _compare(layout, reference_output, optimized, toolchain)


def reference_outputs(exec_texts: Sequence[str], toolchain: Toolchain) -> list[str | ReferenceFailed]:
    """The unoptimized outputs, one combined run for all (one at a time if it fails)."""
    counts = [layout_of(text).lines for text in exec_texts]
    try:
        return list(toolchain.execute_many(exec_texts, counts))
    except ReferenceFailure:
        pass
    out: list[str | ReferenceFailed] = []
    for text in exec_texts:
        try:
            out.append(toolchain.execute(text))
        except ReferenceFailure as failure:
            out.append(ReferenceFailed(failure.stage, failure.detail))
    return out


def judge_many(exec_texts: Sequence[str], optimizer: Optimizer, toolchain: Toolchain | None = None,
               references: Sequence[str | ReferenceFailed] | None = None) -> list[Verdict]:
    """Every program's verdict, as :func:`judge` would give it, in fewer processes: one
    optimizer process (``--split-input-file``) and one reference run per side."""
    toolchain = toolchain or Toolchain()
    texts = list(exec_texts)
    refs = list(references) if references is not None else reference_outputs(texts, toolchain)
    layouts = [layout_of(text) for text in texts]
    optimized = optimize_all(optimizer, texts)
    live = [k for k in range(len(texts)) if isinstance(refs[k], str) and isinstance(optimized[k], str)]
    target_outputs: dict[int, str] = {}
    try:
        outputs = toolchain.execute_many([optimized[k] for k in live], [layouts[k].lines for k in live])
        target_outputs = dict(zip(live, outputs))
    except (ReferenceFailure, ValueError):
        pass  # judged one at a time below, which says whose failure it is
    verdicts: list[Verdict] = []
    for k in range(len(texts)):
        if isinstance(refs[k], ReferenceFailed):
            verdicts.append(refs[k])
        elif isinstance(optimized[k], TargetFailed):
            verdicts.append(optimized[k])
        else:
            verdict = _compare(layouts[k], refs[k], optimized[k], toolchain, target_outputs.get(k))
            if not isinstance(verdict, Same) and k in target_outputs:
                # a module that prints too many or too few lines shifts the batch's split:
                # every difference is confirmed by a run of its own
                verdict = _compare(layouts[k], refs[k], optimized[k], toolchain)
            verdicts.append(verdict)
    return verdicts
