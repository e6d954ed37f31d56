"""The differential oracle behind the runner interface (``--oracle differential``).

:class:`DifferentialRunner` is a :class:`harness.run.runners.Runner`: it takes
programs in the canonical rendering, renders each for execution
(:func:`harness.execute.exec_rendering.exec_module`) and judges them in batches
through the settings' executor (:mod:`harness.execute.executors`,
``--runner persistent|process``: in the persistent driver's ``--exec`` mode,
or one optimizer process with ``--split-input-file`` and one reference run
per side for a whole batch).  Each program's :class:`OracleVerdict` is a runner verdict:

* ``wrong-code``: the optimized module prints other values; confirmed by a
  judgement of the program alone (the executor's ``judge``);
* ``reference-failure``: the trusted toolchain failed; never the target's;
* ``crash`` / ``timeout`` / ``oom``: the optimizer failed; the program is run
  alone in a fresh process (:func:`harness.run.process.run_program`) and judged
  as ``--oracle crash`` would judge it;
* ``target-failure``: the optimizer exited 0 but printed something that is not
  MLIR;
* no finding: the same values, or a program the reference interpreter
  (:mod:`harness.execute.interpret`) shows to reach undefined behaviour (no
  value exists to compare).

One program alone, as triage reproduces, bisects and minimizes a finding, is
judged by :func:`judge_alone` (any pipeline, the interpreter's values as the
reference); :func:`in_process_unavailable` says whether the in-process judge runs.

A finding leaves ``NAME.mlir`` (the canonical program), ``NAME.json`` (with an
``oracle`` object: both outputs, the differences, the optimizer command) and
the sidecars ``NAME.exec.mlir`` and ``NAME.optimized.mlir``.
"""

from __future__ import annotations

import atexit
import shlex
import threading
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator

from harness.checker import check_text
from harness.execute.differential import (
    _PROBE,
    Optimizer,
    OptimizerError,
    ReferenceFailed,
    ExecutorsDisagree,
    Same,
    TargetFailed,
    Verdict as Judgement,
    WrongCode,
)
from harness.execute.executors import default_executor_kind, make_executor
from harness.execute.interpret import InterpretError, UndefinedBehaviour, interpret_program
from harness.execute.process_executor import Executor
from harness.execute.releases import exec_for_releases
from harness.execute.canonical_program import ExecRenderError
from harness.execute.exec_layout import layout_of
from harness.execute.toolchain import LOWERING, Toolchain, ToolchainError
from harness.execute.twins import DEFAULT_TWINS, TwinPlan, expected_output, plan_for, sampled
from harness.run.atomic import write_atomically
from harness.run.driver_protocol import DriverError
from harness.targets.expectations import Expectations
from harness.targets.identity import HEX_ELEMENTS_OPTION, identify_named
from harness.run.probe import PipelineRefused
from harness.run.judge import judge as judge_crash
from harness.run.outcome import Outcome, OutcomeKind, Verdict
from harness.run.process import run_program
from harness.targets.target import Target
from harness.run.runners import Program, Result, Runner

__all__ = ["DEFAULT_TWINS", "ORACLES", "DifferentialRunner", "OracleError", "OracleSettings", "OracleVerdict",
           "check_oracle", "close_executors", "in_process_unavailable", "judge_alone", "oracle_settings",
           "oracle_target", "verdict_record"]

ORACLES = ("crash", "differential")
DEFAULT_BATCH = 24


class OracleError(PipelineRefused):
    """The optimizer or the reference toolchain cannot be used (one line; like a refused
    pipeline, ``harness.cli`` exits 2)."""


@dataclass(frozen=True)
class OracleSettings:
    """What ``--oracle differential`` runs: the target optimizer and the trusted toolchain."""

    optimizer: Optimizer
    toolchain: Toolchain = Toolchain()
    batch_size: int = DEFAULT_BATCH
    #: the optimizer's LLVM major release (its ``--version``; None: unknown, taken as current)
    release: int | None = None
    #: how programs are executed (harness.execute.executors): ``persistent`` (in process, the
    #: driver's --exec mode) or ``process`` (mlir-opt-22 + mlir-runner-22 processes)
    runner: str = "process"
    #: in process: ``ir`` (the IR executor; the JIT confirms and falls in) or ``jit`` alone
    in_process: str = "ir"
    #: in process: the share of programs judged by both the IR executor and the JIT
    cross_check: float = 0.02
    #: the share of programs judged with constant twins (harness.execute.twins), and how many
    #: twins of each function they get
    twins: float = DEFAULT_TWINS
    twin_rows: int = 2
    #: every program with exactly these twins (triage: a finding's own plan), whatever ``twins``
    twin_plan: TwinPlan | None = None

    def executor(self) -> Executor:
        """The executor of :attr:`runner`, one per settings (its drivers live per thread until
        :func:`close_executors` or the end of the process).  Raises ``DriverError``."""
        key = (self.runner, self.toolchain, self.in_process, self.cross_check)  # what it depends on
        with _EXECUTORS_LOCK:
            executor = _EXECUTORS.get(key)
            if executor is None:
                executor = _EXECUTORS[key] = make_executor(self.runner, self.toolchain,
                                                           in_process=self.in_process,
                                                           cross_check=self.cross_check)
            return executor

    def plan(self, canonical: str) -> TwinPlan | None:
        """The program's constant twins: the fixed plan, or for the sampled share its own."""
        if self.twin_plan is not None:
            return self.twin_plan
        return plan_for(canonical, self.twin_rows) if sampled(canonical, self.twins) else None

    def exec_text(self, canonical: str) -> str:
        """The exec rendering of a canonical program, with its twins (:meth:`plan`), as this
        optimizer's release parses it (MLIR 15/16: without overflow flags,
        harness.execute.releases)."""
        return exec_for_releases((self.release,), canonical, self.plan(canonical))


_EXECUTORS: dict[tuple, Executor] = {}
_EXECUTORS_LOCK = threading.Lock()


def close_executors() -> None:
    """Stop every executor's drivers (they also die with this process)."""
    with _EXECUTORS_LOCK:
        executors = list(_EXECUTORS.values())
        _EXECUTORS.clear()
    for executor in executors:
        executor.close()


atexit.register(close_executors)


@dataclass(frozen=True)
class OracleVerdict(Verdict):
    """A runner verdict carrying the differential judgement (None: the crash oracle's)."""

    judgement: object = None
    exec_text: str = ""

    def to_json(self) -> dict:
        return {**super().to_json(), "oracle": verdict_record(self.judgement)}


def verdict_record(judgement) -> dict | None:
    """The ``oracle`` object of a finding's JSON."""
    if isinstance(judgement, WrongCode):
        return {"kind": judgement.kind, "reference_output": judgement.reference_output,
                "target_output": judgement.target_output, "note": judgement.note,
                "first_difference": judgement.describe(),
                "differences": [{"line": d.line, "function": d.function.symbol,
                                 "kind": d.function.kind, "name": d.function.name,
                                 "thread": d.function.thread, "row": d.row,
                                 "inputs": [list(i) for i in d.inputs], "column": d.column,
                                 "reference": d.reference, "target": d.target}
                                for d in judgement.differences]}
    if isinstance(judgement, (ReferenceFailed, TargetFailed, ExecutorsDisagree)):
        return {"kind": judgement.kind, "stage": judgement.stage, "detail": judgement.detail}
    return None


def oracle_settings(optimizer: Optimizer, toolchain: Toolchain | None = None,
                    batch_size: int = DEFAULT_BATCH, runner: str | None = None,
                    twins: float = DEFAULT_TWINS) -> OracleSettings:
    """The settings for ``optimizer``, its release read once from its ``--version``;
    ``runner`` None: persistent where the driver is built (``batch``: the process path);
    ``twins``: the share of programs judged with constant twins.

    An optimizer of another release than the reference toolchain prints in that release's
    way; where it has the option, it prints dense elements as literals instead of hex,
    whose layout differs between releases (LLVM 24's ``i1`` hex is refused by MLIR 22):
    the reference must read what the target wrote, or every program is a finding."""
    runner = "process" if runner == "batch" else runner or default_executor_kind()
    toolchain = toolchain or Toolchain()
    mine, reference = identify_named(optimizer.binary), identify_named(toolchain.mlir_opt)
    release = mine.major if mine else None
    if (mine and reference and mine.version != reference.version and mine.hex_elements_option
            and not any(a.startswith(f"--{HEX_ELEMENTS_OPTION}") for a in optimizer.extra_args)):
        optimizer = replace(optimizer, extra_args=(*optimizer.extra_args, f"--{HEX_ELEMENTS_OPTION}=-1"))
    return OracleSettings(optimizer, toolchain, batch_size, release=release, runner=runner, twins=twins)


def oracle_target(optimizer: Optimizer, timeout: float, expectations: Expectations | None = None) -> Target:
    """The optimizer as a runner target: the programs it is given are canonical (the
    runner renders them for execution), its command line is the optimizer's.
    ``expectations`` judge the optimizer's failures (None: every exec program is accepted);
    a known upstream failure declared there is no finding."""
    return Target(name="differential", argv=tuple(optimizer.argv()), render="canonical",
                  timeout=timeout, memory_mb=None, expectations=expectations,
                  build=identify_named(optimizer.binary))


def check_oracle(settings: OracleSettings) -> None:
    """Raise :class:`OracleError` (one line) unless the toolchain is complete and the
    optimizer turns a trivial module into valid MLIR."""
    try:
        settings.toolchain.check()
        settings.optimizer.check()
        settings.executor()
    except (ToolchainError, OptimizerError, DriverError) as error:
        raise OracleError(str(error)) from None
    printed = settings.optimizer.optimize(_PROBE).stdout
    problem = settings.toolchain.verify(printed) if printed.strip() else "it printed nothing"
    if problem is not None:
        raise OracleError(f"{settings.optimizer.describe()} does not print MLIR for a trivial "
                          f"module: {problem}")


def _undefined(canonical: str) -> str | None:
    """The interpreter's reason when the program has no defined output, else None."""
    try:
        interpret_program(canonical)
    except UndefinedBehaviour as error:
        return str(error)
    except InterpretError:
        return None  # a construct the interpreter does not read: judged by execution alone
    return None


def judge_alone(canonical: str, settings: OracleSettings, pipeline: str | None = None, *,
                confirm: bool = False) -> Judgement | None:
    """``canonical`` judged alone under ``pipeline`` (None: the settings' own), the reference
    values from the interpreter (twins: their rows' values again); None for a program off
    P1-P24 or with undefined behaviour (it has no values to compare).  With ``confirm``, a
    ``wrong-code`` verdict is judged again with the reference toolchain's own values (both
    sides executed).  Raises ``DriverError``."""
    if check_text(canonical):
        return None
    try:
        reference = interpret_program(canonical)
        exec_text = settings.exec_text(canonical)
    except (InterpretError, ExecRenderError):
        return None
    layout = layout_of(exec_text)
    if any(f.twin_of for f in layout.functions):  # the twins print their rows' values again
        reference = expected_output(layout, reference)
    optimizer = settings.optimizer if pipeline is None else replace(settings.optimizer, pipeline=pipeline)
    executor = settings.executor()
    verdict = executor.judge(exec_text, optimizer, reference_output=reference)
    if confirm and isinstance(verdict, WrongCode):
        confirmed = executor.judge(exec_text, optimizer)
        verdict = confirmed if isinstance(confirmed, WrongCode) else verdict
    return verdict


def in_process_unavailable(settings: OracleSettings) -> str | None:
    """None where the in-process judge runs for ``settings``, else why not (one line)."""
    try:
        replace(settings, runner="persistent").executor()
    except DriverError as error:
        return str(error)
    return None


class DifferentialRunner(Runner):
    """Programs (canonical text) judged by execution, ``batch_size`` per worker step."""

    kind = "differential"

    def __init__(self, settings: OracleSettings, *, jobs: int = 1,
                 expectations: Expectations | None = None) -> None:
        super().__init__(oracle_target(settings.optimizer, settings.optimizer.timeout, expectations),
                         jobs=jobs)
        self.settings = settings
        self.executor = settings.executor()
        #: target processes per judged batch: the optimizer, a lowering and a run per side;
        #: in process, the optimizer and the reference are the driver (a process only when
        #: the optimizer is another binary)
        self._processes = 5 if self.executor.kind == "process" else 0
        self._twinned = 0  # programs judged with constant twins (harness.execute.twins)

    def executor_summary(self) -> str | None:
        counts = getattr(self.executor, "counts", None)  # in process: ExecutorCounts
        parts = [counts.summary()] if counts is not None else []
        if self.settings.twins or self.settings.twin_plan:
            parts.append(f"constant twins in {self._twinned} of {self.stats.programs} programs")
        return "; ".join(parts) or None

    def run(self, programs: Iterable[Program]) -> Iterator[Result]:
        # Each program is rendered for execution here, in the calling thread, while the
        # workers wait on their drivers (the GIL is free then): a worker only judges.  Up to
        # two batches per worker wait their turn, so that a worker that finishes early finds
        # the next one rendered while the oldest is still being judged.
        window: list[Future] = []
        batch: list[Prepared] = []
        for program in programs:
            batch.append(self._prepare(program))
            if len(batch) >= self.settings.batch_size:
                window.append(self._pool.submit(self._judge_prepared, batch))
                batch = []
            while len(window) > 2 * self.jobs:
                yield from self._counted(window.pop(0).result())
        if batch:
            window.append(self._pool.submit(self._judge_prepared, batch))
        for future in window:
            yield from self._counted(future.result())

    def _counted(self, results: list[Result]) -> Iterator[Result]:
        for result in results:
            with self._lock:
                self.stats.programs += 1
                self.stats.executions += result.executions
            yield result

    def _one(self, program: Program) -> Result:
        return self._judge_prepared([self._prepare(program)])[0]

    def _prepare(self, program: Program) -> "Prepared":
        """The program with its exec rendering (twins and all), or its result when it has
        none (not a P1-P24 program)."""
        try:
            exec_text = self.settings.exec_text(program.text)
        except ExecRenderError as error:
            return Prepared(program, "", self._plain(program, "", f"not a P1-P24 program: {error}"))
        if self.settings.plan(program.text) is not None:
            with self._lock:
                self._twinned += 1
        return Prepared(program, exec_text)

    def _judge_prepared(self, batch: list["Prepared"]) -> list[Result]:
        """Every program of ``batch`` judged in one request to this worker's driver.

        The reference interpreter's check for undefined behaviour (a program with no
        defined output is no finding) runs only on what would otherwise be a finding:
        its verdict is the same, and the programs that agree (nearly all) do not pay a
        Python interpretation each."""
        live = [p for p in batch if p.result is None]
        if live:
            verdicts = self.executor.judge_many([p.exec_text for p in live], self.settings.optimizer)
            self._count(self._processes)
            for prepared, verdict in zip(live, verdicts):
                prepared.result = self._judged(prepared.program, prepared.exec_text, verdict)
        return [p.result for p in batch]

    def _result(self, program, outcome, verdict, executions) -> "OracleResult":
        return OracleResult(program, outcome, verdict, executions, settings=self.settings)

    def _plain(self, program: Program, exec_text: str, why: str, executions: int = 0) -> Result:
        outcome = Outcome(OutcomeKind.ACCEPTED, 0, None, "", "", 0.0, why)
        verdict = OracleVerdict(outcome, "same values", False, "", "", exec_text=exec_text)
        return self._result(program, outcome, verdict, executions)

    def _judged(self, program: Program, exec_text: str, verdict) -> Result:
        if not isinstance(verdict, Same):
            reason = _undefined(program.text)
            if reason is not None:  # no defined output: nothing to compare, whatever it printed
                return self._plain(program, exec_text, f"undefined behaviour: {reason}", executions=1)
        if isinstance(verdict, TargetFailed) and verdict.stage == "optimize":
            outcome = run_program(self.target, exec_text)  # alone, in a fresh process
            self._count(1)
            plain = judge_crash(self.target, exec_text, outcome)
            return self._result(program, outcome, OracleVerdict(
                outcome, plain.expected, plain.finding, plain.why, plain.rule, plain.kind,
                judgement=verdict, exec_text=exec_text), 2)
        if isinstance(verdict, WrongCode):  # confirmed alone: deterministic or not a finding
            verdict = self.executor.judge(exec_text, self.settings.optimizer)
            self._count(self._processes)  # the same, for this program alone
        optimized = verdict.optimized_text if isinstance(verdict, (WrongCode, ExecutorsDisagree)) else ""
        outcome = Outcome(OutcomeKind.ACCEPTED, 0, None, optimized, getattr(verdict, "stderr", ""),
                          0.0, "exit status 0")
        if isinstance(verdict, Same):
            same = OracleVerdict(outcome, "same values", False, "", "", exec_text=exec_text)
            return self._result(program, outcome, same, 1)
        if isinstance(verdict, WrongCode):
            why = f"wrong-code: {verdict.describe()}"
        elif isinstance(verdict, ReferenceFailed):
            why = f"reference-failure ({verdict.stage}): {verdict.detail}"
        elif isinstance(verdict, ExecutorsDisagree):
            why = f"executor-disagreement: {verdict.describe()}"
        else:
            why = f"target-failure ({verdict.stage}): {verdict.detail}"
        finding = OracleVerdict(outcome, "same values", True, why[:300], "", verdict.kind,
                                judgement=verdict, exec_text=exec_text)
        return self._result(program, outcome, finding, 2)


@dataclass
class Prepared:
    """A program on its way to the judge: its exec rendering, and its result once judged
    (set at once when it has no exec rendering)."""

    program: Program
    exec_text: str
    result: Result | None = None


@dataclass(frozen=True)
class OracleResult(Result):
    """A result whose finding also leaves the exec and optimized texts."""

    settings: OracleSettings | None = None

    def write_finding(self, directory, name: str, target: Target, extra=None, *, suffix: str) -> None:
        if isinstance(self.verdict, OracleVerdict):
            write_sidecars(directory, name, self.verdict)
            extra = {**finding_extra(self.settings, name), **(extra or {})}
        super().write_finding(directory, name, target, extra, suffix=suffix)


def write_sidecars(directory, name: str, verdict: OracleVerdict) -> None:
    """``NAME.exec.mlir`` and ``NAME.optimized.mlir`` next to a finding."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if verdict.exec_text:
        write_atomically(d / f"{name}.exec.mlir", verdict.exec_text)
    if isinstance(verdict.judgement, (WrongCode, ExecutorsDisagree)):
        write_atomically(d / f"{name}.optimized.mlir", verdict.judgement.optimized_text)


def finding_extra(settings: OracleSettings, name: str) -> dict:
    """The JSON keys of a differential finding beyond the runner's."""
    optimizer = settings.optimizer.describe()
    lowering = shlex.join([settings.toolchain.mlir_opt, *LOWERING])
    runner = shlex.join([settings.toolchain.runner, "-e", "main", "-entry-point-result=void", "-O0",
                         f"-shared-libs={settings.toolchain.runtime_library}"])
    builds = {role: (build.to_json() if build else None) for role, build in (
        ("optimizer_build", identify_named(settings.optimizer.binary)),
        ("reference_build", identify_named(settings.toolchain.mlir_opt)))}
    return {"oracle_name": "differential",
            "command": f"{optimizer} < {name}.exec.mlir | {lowering} | {runner}",
            "optimizer": optimizer, **builds}
