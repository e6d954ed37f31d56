"""Two builds under ``--oracle differential``: both read the exec rendering, both outputs run.

:func:`exec_divergence_settings` makes the :class:`harness.oracles.divergence_runner.DivergenceSettings`
of a differential run with a reference build: each canonical program is rendered
for execution as *both* releases parse it (flagless when either is MLIR 15/16,
:mod:`harness.execute.releases`: the two builds read the same bytes), with the
constant twins the differential oracle gives the same program
(:class:`ExecPreparation`: ``--twins``, the same deterministic share, so the same
``--seed`` gives the same bytes; the twins are added before the release
adaptation, since their copies of the bodies carry flags too), and an
output is executed when the two normal forms differ, by the judge the settings
name (:attr:`OracleSettings.runner`):

* ``process``: the trusted toolchain's processes (lowered with ``mlir-opt-22``,
  run with ``mlir-runner-22``), and the primary build a fresh process per program;
* ``persistent``: the persistent driver's ``--exec`` mode (:class:`InProcessSides`):
  both outputs executed in one request by the IR executor, judged again by the
  JIT (what ``mlir-runner-22`` computes) where their values differ or show
  poison; the primary build, when it is ``mlir-opt-22`` itself, optimized in the
  driver too when a divergence is confirmed (a program it fails on, or a driver
  that dies, runs as a process: that says exactly how it fails).  An output the
  driver dies on is executed by the trusted toolchain's processes instead, and
  the deaths are counted (:meth:`InProcessSides.summary`: one line of the run's
  and triage's summaries).  The reference build's confirmation is always its own
  process (the side runners of :class:`harness.oracles.divergence_runner.DivergenceRunner`
  run each build through the driver of its own build where it has one).

Where the settings name the persistent runner but the driver cannot stand for a part
(no driver built, another reference toolchain, another primary binary), that part
runs as processes and :attr:`DivergenceSettings.note` says so in one line.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import partial
from typing import Sequence

from harness.execute.differential import _PROBE, OptimizerError, printed_poison
from harness.execute.inprocess import INTERPRET, InProcessExecutor, in_process_optimizer
from harness.oracles.differential_runner import OracleError, OracleSettings, oracle_target
from harness.execute.releases import exec_for_releases, major_version
from harness.execute.toolchain import Toolchain
from harness.execute.twins import TwinPlan, plan_of
from harness.oracles.divergence_runner import DivergenceSettings, failed_execution
from harness.run.outcome import Outcome, OutcomeKind
from harness.run.driver_protocol import DriverError
from harness.run.process import run_program
from harness.targets.target import Target

__all__ = ["ExecPreparation", "InProcessSides", "check_reference_optimizer", "differential_target",
           "exec_divergence_settings", "in_process_note", "twins_of"]


@dataclass(frozen=True)
class ExecPreparation:
    """What both builds read of a canonical program (``DivergenceSettings.prepare``): its exec
    rendering with the twins ``oracle`` gives it (:meth:`OracleSettings.plan`: the program's own
    plan for the ``--twins`` share, the choice the differential oracle makes), as every one of
    ``releases`` parses it."""

    oracle: OracleSettings
    releases: tuple[int | None, ...]

    def __call__(self, canonical: str) -> str:
        return exec_for_releases(self.releases, canonical, self.oracle.plan(canonical))

    def with_plan(self, plan: TwinPlan | None) -> "ExecPreparation":
        """Every program with exactly ``plan`` (None: none), whatever the share: triage keeps a
        finding's twins while it minimizes (drawn again from a smaller program, they would
        be other twins, and the bug could be lost)."""
        return replace(self, oracle=replace(self.oracle, twins=0.0, twin_plan=plan))


def twins_of(prepared: str) -> str | None:
    """The constant twins of a text both builds read, as their plan's text (``8:ff,3:05``), or None."""
    plan = plan_of(prepared)
    return plan.text() if plan is not None else None


def _execute(toolchain: Toolchain, text: str) -> str:
    return toolchain.execute(text)


def _same_binary(name: str, upstream: str) -> bool:
    mine, theirs = shutil.which(name), shutil.which(upstream)
    return bool(mine and theirs and os.path.realpath(mine) == os.path.realpath(theirs))


#: What an ``--exec`` stage that failed on an output (executed alone) is called in its line.
_FAILED = {"parse": "lower", "reparse": "lower", "lower-optimized": "lower", "jit-optimized": "run",
           "run-optimized": "run"}


class InProcessSides:
    """The two builds' part in the persistent driver (see the module docstring): each
    output's values (:meth:`execute_all`) and, where the primary build is ``mlir-opt-22``,
    its run of a program (:meth:`run_primary`); counted in :attr:`counts` (``deaths``: outputs
    the driver died on, executed by the toolchain's processes instead; ``primary_deaths``:
    programs it died optimizing, run by the primary build's process instead)."""

    def __init__(self, oracle: OracleSettings, *, primary_in_driver: bool) -> None:
        executor = oracle.executor()  # the settings' own drivers (closed with the executors)
        executor = getattr(executor, "base", executor)  # under the head's wrapper (execute/head_executor.py)
        if not isinstance(executor, InProcessExecutor):
            raise DriverError("the settings' executor is not the persistent driver")
        self.executor = executor
        self.toolchain = oracle.toolchain
        self.pass_args = tuple(oracle.optimizer.argv()[1:])
        self.primary_in_driver = primary_in_driver and in_process_optimizer(oracle.optimizer)
        self.counts = {"requests": 0, "jit": 0, "process": 0, "deaths": 0, "primary_deaths": 0}
        self._known: OrderedDict[str, str] = OrderedDict()  # optimized text -> values (IR executor's)
        self._lock = threading.Lock()

    def _remember(self, text: str, values: str) -> None:
        with self._lock:
            self._known[text] = values
            while len(self._known) > 64:
                self._known.popitem(last=False)

    def _ask(self, pass_args: tuple[str, ...], items: list) -> list:
        with self._lock:
            self.counts["requests"] += 1
        return self.executor.driver(pass_args).execute(items)

    def _values(self, text: str, result) -> str:
        """One output's values from its answer (None: the driver died on it, the trusted
        toolchain's processes say what it prints or how it fails)."""
        if result is None:
            with self._lock:
                self.counts["process"] += 1
                self.counts["deaths"] += 1
            try:
                return self.toolchain.execute(text)
            except Exception as error:  # noqa: BLE001 - as the process path compares it
                return failed_execution(error)
        if result.stage == "ok":
            return result.target_output if result.ran_jit else result.ir_optimized
        stage = _FAILED.get(result.stage, result.stage)
        lines = [line.strip() for line in result.detail.splitlines() if line.strip()]
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "(no message)")
        return failed_execution(f"{stage}: {first}")

    def run_primary(self, target: Target, prepared: str) -> Outcome:
        """The primary build on ``prepared`` alone: optimized in the driver (what a separate
        ``mlir-opt-22`` prints), its values kept for :meth:`execute_all`; a program the pipeline
        or the parser refuses, or one the driver dies on, runs as a process."""
        if not self.primary_in_driver:
            return run_program(target, prepared)
        started = time.monotonic()
        (result,) = self._ask(self.pass_args, [(prepared, None, False, INTERPRET)])
        if result is None or result.stage in ("parse", "optimize", "reparse") or not result.optimized_text.strip():
            with self._lock:
                self.counts["process"] += 1
                self.counts["primary_deaths"] += result is None
            return run_program(target, prepared)  # how it fails, exactly
        if result.stage == "ok":
            self._remember(result.optimized_text, self._values(result.optimized_text, result))
        return Outcome(OutcomeKind.ACCEPTED, 0, None, result.optimized_text, "", time.monotonic() - started,
                       "exit status 0")

    def execute_all(self, texts: Sequence[str]) -> list[str]:
        """Each output's printed values in one request, by the IR executor; where they differ
        or show poison, by the JIT again (the values ``mlir-runner-22`` prints).  An output the
        driver died on has the toolchain's values already: it is not sent again."""
        with self._lock:
            values = {t: self._known[t] for t in texts if t in self._known}
        by_toolchain: set[str] = set()
        todo = list(dict.fromkeys(t for t in texts if t not in values))
        if todo:
            results = self._ask((), [(t, t, False, INTERPRET) for t in todo])
            by_toolchain.update(t for t, r in zip(todo, results) if r is None)
            values.update((t, self._values(t, r)) for t, r in zip(todo, results))
        out = [values[t] for t in texts]
        if len(set(out)) > 1 or any(printed_poison(v) for v in out):
            todo = list(dict.fromkeys(t for t in texts if t not in by_toolchain))
            if todo:
                with self._lock:
                    self.counts["jit"] += len(todo)
                results = self._ask((), [(t, t, False, 0) for t in todo])
                values.update((t, self._values(t, r)) for t, r in zip(todo, results))
            out = [values[t] for t in texts]
        return out

    def summary(self) -> str | None:
        """One line for the summary: the driver's deaths (``exec driver: 3 deaths, those outputs
        executed by the toolchain``), or None when it died on nothing."""
        with self._lock:
            deaths, primary = self.counts["deaths"], self.counts["primary_deaths"]
        parts = []
        if deaths:
            parts.append(f"{deaths} death{'s' if deaths != 1 else ''}, those outputs executed by the toolchain")
        if primary:
            parts.append(f"{primary} death{'s' if primary != 1 else ''} optimizing, those programs run by "
                         "the primary build's process")
        return "exec driver: " + "; ".join(parts) if parts else None


def in_process_note(oracle: OracleSettings) -> tuple[str | None, bool]:
    """(the one-line note, whether the values can be executed in process) for the two builds
    under ``oracle``: None where everything its runner names can run as it says."""
    if oracle.runner != "persistent":
        return None, False
    toolchain = oracle.toolchain
    if not (_same_binary(toolchain.mlir_opt, "mlir-opt-22") and _same_binary(toolchain.runner, "mlir-runner-22")):
        return (f"the two builds' values are executed by processes: the reference toolchain "
                f"({toolchain.mlir_opt}, {toolchain.runner}) is not the persistent driver's "
                "(mlir-opt-22, mlir-runner-22)"), False
    try:
        oracle.executor()
    except DriverError as error:
        return f"the two builds' values are executed by processes: {error}", False
    if not in_process_optimizer(oracle.optimizer):
        return (f"the primary build {oracle.optimizer.describe()} runs as a process (the driver is "
                "mlir-opt-22's libMLIR); the values are executed in process"), True
    return None, True


def exec_divergence_settings(reference: str, oracle: OracleSettings, compare: str = "output") -> DivergenceSettings:
    """The divergence settings of ``--oracle differential`` with the reference build
    ``reference``, executed by the judge ``oracle`` names (see the module docstring)."""
    releases = (oracle.release, major_version(reference))
    note, in_process = in_process_note(oracle)
    sides = InProcessSides(oracle, primary_in_driver=True) if in_process else None
    return DivergenceSettings(reference, compare, prepare=ExecPreparation(oracle, releases),
                              twins_of=twins_of, twins=oracle.twins if oracle.twin_plan is None else 1.0,
                              execute=partial(_execute, oracle.toolchain),
                              execute_all=sides.execute_all if sides else None,
                              run_primary=sides.run_primary if sides and sides.primary_in_driver else None,
                              note=note, execution_summary=sides.summary if sides else None)


def differential_target(oracle: OracleSettings) -> Target:
    """The primary build as the divergence runner runs it: the optimizer's command line."""
    return oracle_target(oracle.optimizer, oracle.optimizer.timeout)


def check_reference_optimizer(oracle: OracleSettings, reference: str) -> None:
    """Raise :class:`OracleError` (one line, exit 2) unless the reference build runs the
    optimizer's pipeline on a trivial module and prints valid MLIR."""
    optimizer = replace(oracle.optimizer, binary=reference)
    try:
        optimizer.check()
    except OptimizerError as error:
        raise OracleError(f"the reference build: {error}") from None
    printed = optimizer.optimize(_PROBE).stdout
    problem = oracle.toolchain.verify(printed) if printed.strip() else "it printed nothing"
    if problem is not None:
        raise OracleError(f"the reference build {optimizer.describe()} does not print MLIR for a "
                          f"trivial module: {problem}")
