"""The differential oracle in process: the persistent driver's ``--exec`` mode.

:class:`ExecDriver` is a :class:`harness.run.persistent.PersistentRunner`
(same start-up, framing, timeouts, restarts) whose programs are ``--exec``
requests: a batch of exec modules, each with its optimized text or to be
optimized by the driver's own pipeline (native/loomfuzz-exec.h has the
format).  For each module the driver parses once, optimizes a clone,
prints and parses it again (what runs is what a separate ``mlir-opt-22``
would have printed), lowers both with the reference lowering
(:data:`harness.execute.toolchain.LOWERING`), JITs the whole batch as one
LLVM module (codegen without optimisation) and captures what each ``main``
prints.

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
from collections import OrderedDict
from typing import Sequence

from harness.execute.differential import (
    Optimizer,
    ReferenceFailed,
    Same,
    TargetFailed,
    Verdict,
    WrongCode,
    differences,
    optimize_all,
)
from harness.execute.process_executor import ProcessExecutor
from harness.execute.render_exec import layout_of
from harness.execute.toolchain import Toolchain
from harness.run.persistent import DriverError, PersistentRunner, PersistentTarget, find_driver
from harness.run.outcome import OutcomeKind
from harness.run.target import Target

__all__ = ["ExecDriver", "ExecResult", "InProcessExecutor", "in_process_optimizer"]

_U32 = struct.Struct("<I")
OPTIMIZE_HERE = 0xFFFFFFFF
SKIP_ORIGINAL = 1  # request flag: the original's output is known, it is not executed
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
    """One program's answer: the stage that failed (``ok``: none) and what it printed."""

    __slots__ = ("stage", "detail", "reference_output", "target_output", "optimized_text")

    def __init__(self, stage: str, detail: str, reference_output: str, target_output: str,
                 optimized_text: str) -> None:
        self.stage = stage
        self.detail = detail
        self.reference_output = reference_output
        self.target_output = target_output
        self.optimized_text = optimized_text


def _request(items: Sequence[tuple[str, str | None, bool]]) -> bytes:
    parts = [_U32.pack(len(items))]
    for original, optimized, run_original in items:
        data = original.encode("utf-8")
        parts += [_U32.pack(0 if run_original else SKIP_ORIGINAL), _U32.pack(len(data)), data]
        if optimized is None:
            parts.append(_U32.pack(OPTIMIZE_HERE))
        else:
            data = optimized.encode("utf-8")
            parts += [_U32.pack(len(data)), data]
    return b"".join(parts)


def _response(payload: bytes) -> list[ExecResult]:
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
        out.append(ExecResult(STAGES[stage] if stage < len(STAGES) else f"stage {stage}",
                              string(), string(), string(), string()))
    return out


class ExecDriver(PersistentRunner):
    """One ``loomfuzz-mlir-driver --exec`` (with the pipeline's pass flags, or none)."""

    def __init__(self, binary: str, pass_args: Sequence[str] = (), *, timeout: float = 120.0) -> None:
        process = Target(name="mlir-opt", argv=("mlir-opt-22", *pass_args), timeout=timeout, memory_mb=None)
        super().__init__(PersistentTarget(process, (binary, "--exec", "--fork-server", *pass_args),
                                          RESTART_EVERY,
                                          fork_server=True))

    def execute(self, items: Sequence[tuple[str, str | None, bool]]) -> list[ExecResult | None]:
        """Each (exec text, optimized text or None: optimize here, whether to execute the
        original too) answered; None for a program the driver died or hung on (the caller
        judges it another way)."""
        if not items:
            return []
        outcome = self.run(_request(items))
        if outcome.kind is OutcomeKind.ACCEPTED:
            results = _response(self.last_output)
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


class InProcessExecutor:
    """The differential judge through ``--exec`` drivers, one set per calling thread."""

    kind = "persistent"

    def __init__(self, toolchain: Toolchain, *, driver: str | None = None) -> None:
        self.toolchain = toolchain
        self.binary = driver or find_driver("mlir-opt")
        if not self.binary:
            raise DriverError("no persistent MLIR driver: build it with `bash .ci/setup` "
                              "(native/README.md), or use --runner process")
        self.fallback = ProcessExecutor(toolchain)
        self.fallbacks = 0  # programs judged by the process path after the driver died on them
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[ExecDriver] = []

    def _driver(self, pass_args: tuple[str, ...]) -> ExecDriver:
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
        while len(drivers) > MAX_DRIVERS:
            _, old = drivers.popitem(last=False)
            old.close()
        return driver

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
        # a known reference (the interpreter's, in triage) is not executed again
        results = self._driver(pass_args).execute(
            [(texts[k], optimized[k], not isinstance(refs[k], str)) for k in live])
        answers = dict(zip(live, results))
        verdicts: list[Verdict] = []
        for k, text in enumerate(texts):
            if isinstance(optimized[k], TargetFailed):
                verdicts.append(refs[k] if isinstance(refs[k], ReferenceFailed) else optimized[k])
            elif answers[k] is None:
                with self._lock:
                    self.fallbacks += 1
                reference = refs[k] if isinstance(refs[k], str) else None
                verdicts.append(refs[k] if isinstance(refs[k], ReferenceFailed)
                                else self.fallback.judge(text, optimizer, reference))
            else:
                verdicts.append(_verdict(text, answers[k], refs[k]))
        return verdicts

    def judge(self, exec_text: str, optimizer: Optimizer, reference_output: str | None = None) -> Verdict:
        return self.judge_many([exec_text], optimizer, None if reference_output is None
                               else [reference_output])[0]

    def close(self) -> None:
        with self._lock:
            drivers, self._all = self._all, []
        for driver in drivers:
            driver.close()
