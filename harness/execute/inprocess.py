"""The differential oracle in process: the persistent driver's ``--exec`` mode.

:class:`ExecDriver` is a :class:`harness.run.persistent_runner.PersistentRunner`
(same start-up, framing, timeouts, restarts) whose programs are ``--exec``
requests: a batch of exec modules, each with its optimized text or to be
optimized by the driver's own pipeline (native/loomfuzz-exec.h has the
format).  For each module the driver parses once, executes the original,
optimizes the parsed module in place (a clone only where the JIT needs the original),
prints it and parses it again (what runs is what a separate ``mlir-opt-22``
would have printed) and executes both with its IR executor
(native/loomfuzz-interp.h: ``main`` over MLIR's IR, APInt values with poison,
no code generation).  Where that executor cannot judge (an operation it does
not know, undefined behaviour, its step budget), for a sampled share of the
programs (``cross_check``) and to confirm every difference it finds, the
driver also lowers both with the reference lowering
(:data:`harness.execute.toolchain.LOWERING`), JITs the batch as one LLVM
module (codegen without optimisation) and captures what each ``main``
prints.  Two executors that give other outputs are an
:class:`~harness.execute.differential.ExecutorsDisagree` verdict; the Python
interpreter (:mod:`harness.execute.interpret`) stays the independent reference.

:class:`InProcessExecutor` gives the verdicts of
:func:`harness.execute.differential.judge_many`:

* the optimizer is ``mlir-opt-22`` itself (the binary the driver's libMLIR
  is): the pipeline runs in the driver;
* another binary (``--mlir-opt PATH``): it runs as a process, batched as in
  the process path, and only the reference execution is in process.

A failure is attributed by the stage it happened in: the pipeline's is the
target's (``TargetFailed``), lowering or compiling the original is the
reference's (``ReferenceFailed``), an optimized module that does not compile
or run is wrong code, as in the process path.  A driver that dies or hangs
leaves no answer: the last stage marker on its stderr names the program; the
others are asked again and that one program is judged by the process path
(:class:`harness.execute.process_executor.ProcessExecutor`), which says what it
does alone.  Nothing is lost; :attr:`InProcessExecutor.fallbacks` counts them.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import threading
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field, replace
from typing import Sequence

from harness.execute.differential import (
    ExecutorsDisagree,
    Optimizer,
    ReferenceFailed,
    Same,
    TargetFailed,
    Verdict,
    WrongCode,
    differences,
    optimize_all,
    printed_poison,
)
from harness.execute.process_executor import ProcessExecutor
from harness.execute.exec_layout import layout_of
from harness.execute.toolchain import Toolchain
from harness.run.driver_binary import find_driver
from harness.run.driver_protocol import DriverError
from harness.run.persistent_runner import PersistentRunner
from harness.run.persistent_target import PersistentTarget
from harness.run.outcome import OutcomeKind
from harness.targets.target import Target

__all__ = ["EXECUTORS", "ExecDriver", "ExecResult", "ExecutorCounts", "InProcessExecutor",
           "in_process_optimizer"]

_U32 = struct.Struct("<I")
OPTIMIZE_HERE = 0xFFFFFFFF
SKIP_ORIGINAL = 1  # request flag: the original's output is known, it is not executed
INTERPRET = 2  # request flag: the IR executor (native/loomfuzz-interp.h) first
ALSO_JIT = 4  # request flag: with INTERPRET, the JIT too (a cross-check or a confirmation)
RAN_IR, RAN_JIT = 1, 2  # response: which executors gave outputs
#: InterpStatus of native/loomfuzz-interp.h, by number.
IR_STATUSES = ("ok", "unknown", "undefined", "budget", "no-main")
#: How programs are executed in process: the IR executor (the JIT where it cannot judge and
#: to confirm every difference), or the JIT alone.
EXECUTORS = ("ir", "jit")
#: ExecStage of native/loomfuzz-exec.h, by number.
STAGES = ("ok", "parse", "optimize", "reparse", "lower", "lower-optimized", "jit", "jit-optimized",
          "jit-batch", "run", "run-optimized")
_MARKER = re.compile(r"^loomfuzz-exec: program (-?\d+) stage ([\w-]+)$", re.M)
#: Drivers kept per thread (one per pipeline: triage's bisection asks for several).
MAX_DRIVERS = 4
#: Requests (batches) a driver answers before it is replaced: its context keeps every
#: program's uniqued attributes (the input tables), so it grows with what it ran.
RESTART_EVERY = 200


class ExecResult:
    """One program's answer: the stage that failed (``ok``: none), what it printed (the
    JIT's outputs when the JIT ran, else the IR executor's), and the IR executor's side."""

    __slots__ = ("stage", "detail", "reference_output", "target_output", "optimized_text",
                 "executed", "ir_status", "ir_side", "ir_why", "ir_reference", "ir_optimized")

    def __init__(self, stage: str, detail: str, reference_output: str, target_output: str,
                 optimized_text: str, executed: int = RAN_JIT, ir_status: str = "ok",
                 ir_side: int = 0, ir_why: str = "", ir_reference: str = "",
                 ir_optimized: str = "") -> None:
        self.stage = stage
        self.detail = detail
        self.reference_output = reference_output
        self.target_output = target_output
        self.optimized_text = optimized_text
        self.executed = executed
        self.ir_status = ir_status
        self.ir_side = ir_side  # where the IR executor stopped: 0 the original, 1 the optimized
        self.ir_why = ir_why
        self.ir_reference = ir_reference
        self.ir_optimized = ir_optimized

    @property
    def ran_ir(self) -> bool:
        return bool(self.executed & RAN_IR)

    @property
    def ran_jit(self) -> bool:
        return bool(self.executed & RAN_JIT)


#: One program of a request: exec text, optimized text (None: optimize in the driver), whether
#: to execute the original, request flags (INTERPRET, ALSO_JIT).
Item = tuple[str, "str | None", bool, int]


def _request(items: Sequence[Item]) -> bytes:
    parts = [_U32.pack(len(items))]
    for original, optimized, run_original, flags in items:
        data = original.encode("utf-8")
        parts += [_U32.pack(flags | (0 if run_original else SKIP_ORIGINAL)), _U32.pack(len(data)), data]
        if optimized is None:
            parts.append(_U32.pack(OPTIMIZE_HERE))
        else:
            data = optimized.encode("utf-8")
            parts += [_U32.pack(len(data)), data]
    return b"".join(parts)


def _response(payload: bytes, binary: str = "the driver") -> list[ExecResult]:
    try:
        return _parse_response(payload)
    except (struct.error, IndexError):
        # a driver built from other sources than this harness (one line, not a traceback)
        raise DriverError(f"{binary} answered in another --exec format than this harness reads: "
                          "rebuild it from native/ (bash .ci/setup)") from None


def _parse_response(payload: bytes) -> list[ExecResult]:
    at = 0

    def u32() -> int:
        nonlocal at
        (value,) = _U32.unpack_from(payload, at)
        at += 4
        return value

    def string() -> str:
        nonlocal at
        n = u32()
        value = payload[at:at + n].decode("utf-8", errors="replace")
        at += n
        return value

    out = []
    for _ in range(u32()):
        stage = u32()
        fields = (STAGES[stage] if stage < len(STAGES) else f"stage {stage}",
                  string(), string(), string(), string())
        executed, ir_status, ir_side = u32(), u32(), u32()
        out.append(ExecResult(*fields, executed,
                              IR_STATUSES[ir_status] if ir_status < len(IR_STATUSES) else f"status {ir_status}",
                              ir_side, string(), string(), string()))
    return out


class ExecDriver(PersistentRunner):
    """One ``loomfuzz-mlir-driver --exec`` (with the pipeline's pass flags, or none)."""

    def __init__(self, binary: str, pass_args: Sequence[str] = (), *, timeout: float = 120.0) -> None:
        process = Target(name="mlir-opt", argv=("mlir-opt-22", *pass_args), timeout=timeout, memory_mb=None)
        super().__init__(PersistentTarget(process, (binary, "--exec", "--fork-server", *pass_args),
                                          RESTART_EVERY,
                                          fork_server=True))

    def execute(self, items: Sequence[Item]) -> list[ExecResult | None]:
        """Each (exec text, optimized text or None: optimize here, whether to execute the
        original too, request flags) answered; None for a program the driver died or hung on
        (the caller judges it another way)."""
        if not items:
            return []
        outcome = self.run(_request(items))
        if outcome.kind is OutcomeKind.ACCEPTED:
            results = _response(self.last_output, self.target.driver[0])
            if len(results) != len(items):
                raise DriverError(f"driver {self.target.driver[0]} answered {len(results)} programs "
                                  f"of {len(items)}")
            if len(items) > 1 and any(r.stage == "jit-batch" for r in results):
                # the batch's module did not compile: each alone says whose it is
                return [self.execute([item])[0] if r.stage == "jit-batch" else r
                        for item, r in zip(items, results)]
            return list(results)
        if outcome.kind is OutcomeKind.REJECTED:  # a malformed request: a bug of ours
            raise DriverError(f"driver {self.target.driver[0]}: {outcome.stderr.strip().splitlines()[-1:]}")
        # died (crash, out of memory) or hung: the last marker names the program
        markers = _MARKER.findall(outcome.stderr)
        culprit = int(markers[-1][0]) if markers else -1
        if culprit < 0 or culprit >= len(items):
            if len(items) == 1:
                return [None]
            return [self.execute([item])[0] for item in items]
        rest = self.execute(list(items[:culprit]) + list(items[culprit + 1:]))
        return rest[:culprit] + [None] + rest[culprit:]


def in_process_optimizer(optimizer: Optimizer) -> bool:
    """True when ``optimizer`` is ``mlir-opt-22`` itself with only pass flags: the driver
    (linked with the same libMLIR) runs its pipeline in process."""
    if optimizer.extra_args:
        return False
    mine, upstream = shutil.which(optimizer.binary), shutil.which("mlir-opt-22")
    return bool(mine and upstream and os.path.realpath(mine) == os.path.realpath(upstream))


def _first_error(detail: str) -> str:
    lines = [line.strip() for line in detail.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[0] if lines else "(no message)"


def _verdict(text: str, result: ExecResult, reference: str | ReferenceFailed | None) -> Verdict:
    """The verdict the process path gives for the same failure or values."""
    stage, detail = result.stage, result.detail
    if isinstance(reference, ReferenceFailed):
        return reference
    if stage in ("parse", "lower"):
        return ReferenceFailed("lower", f"exit 1: {_first_error(detail)}")
    if stage in ("jit", "run"):
        return ReferenceFailed("run", f"exit 1: {_first_error(detail)}")
    if stage == "optimize":
        return TargetFailed("optimize", f"exit 1: {_first_error(detail)}", detail)
    if stage == "reparse":
        return TargetFailed("output", f"the optimized output is not valid MLIR: {_first_error(detail)}")
    if stage == "lower-optimized":
        return ReferenceFailed("lower (optimized)", f"exit 1: {_first_error(detail)}")
    expected = reference if reference is not None else result.reference_output
    layout = layout_of(text)
    if stage in ("jit-optimized", "run-optimized"):
        note = f"the optimized module does not compile or run: {_first_error(detail)}"
        return WrongCode(expected, "", differences(layout, expected, ""), result.optimized_text, note)
    if result.target_output == expected:
        return Same(expected)
    return WrongCode(expected, result.target_output, differences(layout, expected, result.target_output),
                     result.optimized_text)


@dataclass
class ExecutorCounts:
    """What the in-process judge did, for the run/fuzz summary."""

    ir: int = 0  # programs whose verdict the IR executor gave (a difference: confirmed by the JIT)
    jit: int = 0  # judged by the JIT alone (``executor="jit"``)
    unknown: Counter = field(default_factory=Counter)  # IR executor could not judge: why -> programs
    cross_checked: int = 0  # judged both ways (the sampled share)
    cross_agreed: int = 0
    confirmed: int = 0  # differences of the IR executor that the JIT confirmed
    disagreements: int = 0  # ExecutorsDisagree verdicts
    process: int = 0  # judged by the process path (the driver died or hung on them)

    def summary(self) -> str:
        """One line: ``ir 412, jit fallback 3 (unknown 2, undefined 1), cross-check 20/20 agree``."""
        fallback = sum(self.unknown.values())
        parts = [f"ir {self.ir}"]
        if self.jit:
            parts.append(f"jit {self.jit}")
        if fallback:
            parts.append(f"jit fallback {fallback} (" + ", ".join(
                f"{reason} {n}" for reason, n in sorted(self.unknown.items())) + ")")
        parts.append(f"cross-check {self.cross_agreed}/{self.cross_checked} agree")
        if self.confirmed:
            parts.append(f"{self.confirmed} difference(s) confirmed by the JIT")
        if self.disagreements:
            parts.append(f"{self.disagreements} executor disagreement(s)")
        if self.process:
            parts.append(f"process path {self.process}")
        return ", ".join(parts)


def _sampled(text: str, share: float) -> bool:
    """Whether a program is in the cross-checked share: by its text's CRC, so the same
    programs are sampled in every run of a seed."""
    return share > 0 and (zlib.crc32(text.encode("utf-8")) % 10_000) < share * 10_000


def _reason(result: ExecResult) -> str:
    side = "original" if result.ir_side == 0 else "optimized"
    return f"{result.ir_status} ({side})"


class InProcessExecutor:
    """The differential judge through ``--exec`` drivers, one set per calling thread.

    ``executor="ir"`` (the default): the IR executor gives the outputs; a program it cannot
    judge goes to the JIT in the same request (counted by reason), every difference it finds
    is judged again by both before it is a verdict, and ``cross_check`` (a share, 0-1) of the
    programs is judged both ways.  ``"jit"``: the JIT alone, as before the IR executor."""

    kind = "persistent"

    def __init__(self, toolchain: Toolchain, *, driver: str | None = None, executor: str = "ir",
                 cross_check: float = 0.0) -> None:
        if executor not in EXECUTORS:
            raise ValueError(f"the in-process executor is one of {', '.join(EXECUTORS)}, not {executor!r}")
        self.toolchain = toolchain
        self.binary = driver or find_driver("mlir-opt")
        if not self.binary:
            raise DriverError("no persistent MLIR driver: build it with `bash .ci/setup` "
                              "(native/README.md), or use --runner process")
        self.executor = executor
        self.cross_check = cross_check
        self.fallback = ProcessExecutor(toolchain)
        self.counts = ExecutorCounts()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[ExecDriver] = []
        self._started = 0

    @property
    def drivers_started(self) -> int:
        """Drivers started so far (one per calling thread and pipeline)."""
        with self._lock:
            return self._started

    @property
    def fallbacks(self) -> int:
        """Programs judged by the process path after the driver died on them."""
        return self.counts.process

    def driver(self, pass_args: tuple[str, ...] = ()) -> ExecDriver:
        """This thread's driver started with ``pass_args`` (its pipeline; none: it only executes)."""
        drivers: OrderedDict = getattr(self._local, "drivers", None)
        if drivers is None:
            drivers = self._local.drivers = OrderedDict()
        if pass_args in drivers:
            drivers.move_to_end(pass_args)
            return drivers[pass_args]
        driver = ExecDriver(self.binary, pass_args, timeout=self.toolchain.timeout)
        drivers[pass_args] = driver
        with self._lock:
            self._all.append(driver)
            self._started += 1
        while len(drivers) > MAX_DRIVERS:
            _, old = drivers.popitem(last=False)
            old.close()
        return driver

    def _flags(self, text: str) -> int:
        if self.executor == "jit":
            return 0
        return INTERPRET | (ALSO_JIT if _sampled(text, self.cross_check) else 0)

    def judge_many(self, exec_texts: Sequence[str], optimizer: Optimizer,
                   references: Sequence[str | ReferenceFailed] | None = None) -> list[Verdict]:
        texts = list(exec_texts)
        refs = list(references) if references is not None else [None] * len(texts)
        if in_process_optimizer(optimizer):
            pass_args = tuple(optimizer.argv()[1:])
            optimized: list[str | TargetFailed | None] = [None] * len(texts)
        else:  # the target is another binary: a process; the reference runs here
            pass_args = ()
            optimized = list(optimize_all(optimizer, texts))
        live = [k for k in range(len(texts)) if not isinstance(optimized[k], TargetFailed)]
        driver = self.driver(pass_args)
        # a known reference (the interpreter's, in triage) is not executed again
        results = driver.execute([(texts[k], optimized[k], not isinstance(refs[k], str),
                                   self._flags(texts[k])) for k in live])
        answers = dict(zip(live, results))
        # a difference the IR executor alone found is judged again by both executors
        again = [k for k in live if answers[k] is not None and answers[k].ran_ir
                 and not answers[k].ran_jit and answers[k].stage == "ok"
                 and answers[k].ir_optimized != self._expected(answers[k], refs[k])]
        if again:
            confirmed = driver.execute([(texts[k], answers[k].optimized_text, not isinstance(refs[k], str),
                                         INTERPRET | ALSO_JIT) for k in again])
            answers.update(zip(again, confirmed))  # None: the driver died on it, the process path judges
        verdicts: list[Verdict] = []
        for k, text in enumerate(texts):
            if isinstance(optimized[k], TargetFailed):
                verdicts.append(refs[k] if isinstance(refs[k], ReferenceFailed) else optimized[k])
            elif answers[k] is None:
                with self._lock:
                    self.counts.process += 1
                reference = refs[k] if isinstance(refs[k], str) else None
                verdicts.append(refs[k] if isinstance(refs[k], ReferenceFailed)
                                else self.fallback.judge(text, optimizer, reference))
            else:
                verdicts.append(self._judged(text, answers[k], refs[k], confirming=k in again))
        return verdicts

    @staticmethod
    def _expected(result: ExecResult, reference: str | ReferenceFailed | None) -> str:
        return reference if isinstance(reference, str) else result.ir_reference

    def _judged(self, text: str, result: ExecResult, reference: str | ReferenceFailed | None,
                *, confirming: bool) -> Verdict:
        """The verdict of one answer, counted (``confirming``: a second request for a
        difference the IR executor found)."""
        if isinstance(reference, ReferenceFailed):
            return reference
        with self._lock:
            counts = self.counts
            if self.executor == "jit":
                counts.jit += 1
                return _verdict(text, result, reference)
            if not result.ran_ir and result.ir_status != "ok":  # it could not judge: the JIT did
                counts.unknown[_reason(result)] += 1
            if not (result.ran_ir or result.ran_jit):  # a stage before execution failed
                return _verdict(text, result, reference)
            if result.ran_ir and not result.ran_jit:  # the IR executor's outputs, no difference
                counts.ir += 1
                return Same(self._expected(result, reference))
            verdict = _verdict(text, result, reference)
            if not result.ran_ir:
                if result.ir_status == "undefined" and result.ir_side == 1 and isinstance(verdict, Same):
                    counts.disagreements += 1
                    return ExecutorsDisagree(
                        result.reference_output, result.target_output, result.reference_output,
                        result.ir_optimized, result.optimized_text,
                        f"the IR executor finds undefined behaviour in the optimized module "
                        f"({result.ir_why}); the JIT prints the original's values")
                return verdict
            # both ran: a cross-check, or the confirmation of a difference
            if confirming:
                counts.ir += 1
            else:
                counts.cross_checked += 1
            expected = self._expected(result, reference)
            jit_reference = reference if isinstance(reference, str) else result.reference_output
            agree = result.ir_optimized == result.target_output and expected == jit_reference
            if agree and not confirming:
                counts.cross_agreed += 1
            ir_differs = result.ir_optimized != expected
            if ir_differs and isinstance(verdict, WrongCode):
                counts.confirmed += 1
                if not agree:  # e.g. poison where the JIT's code computed some value
                    verdict = replace(verdict, note=(verdict.note + "; " if verdict.note else "") +
                                      f"the IR executor prints other values (first line: "
                                      f"{_first_line(result.ir_optimized, result.target_output)})")
                return verdict
            if agree:
                return verdict
            counts.disagreements += 1
            what = ("poison reaches a print in the optimized module (IR executor); the JIT prints "
                    "the original's values" if printed_poison(result.ir_optimized) else
                    "the IR executor and the JIT give other outputs")
            return ExecutorsDisagree(jit_reference, result.target_output, expected, result.ir_optimized,
                                     result.optimized_text, what)

    def judge(self, exec_text: str, optimizer: Optimizer, reference_output: str | None = None) -> Verdict:
        """One program alone (a finding's confirmation, triage's judgements): as in
        :meth:`judge_many`, a difference is the JIT's verdict too."""
        return self.judge_many([exec_text], optimizer, None if reference_output is None
                               else [reference_output])[0]

    def close(self) -> None:
        with self._lock:
            drivers, self._all = self._all, []
        for driver in drivers:
            driver.close()


def _first_line(a: str, b: str) -> str:
    for k, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {k + 1}: {x!r}, JIT {y!r}"
    return "line count"
