"""The differential judge of LLVM's development head: the head executes its own output.

An optimizer that is a head build with an ExecutionEngine in its bindings
(``mlir-opt-head``: :mod:`harness.targets.heads`) is judged without reading its printed
text back with MLIR 22 (whose parser refuses some of what LLVM 24 prints): the head's
persistent driver in ``--exec`` mode (:mod:`harness.run.head_exec`) parses each exec module,
runs the pipeline, prints and re-parses the result, lowers it with the reference lowering
and runs ``main`` in the head's own JIT.  The reference side is what it is for every other
optimizer: the original module executed by the wrapped executor (the in-process IR executor
and JIT of MLIR 22, or the process path), or the interpreter's values where the caller
gives them (triage).

A program the head's driver dies or hangs on (a crash of the pass under test) is a
``TargetFailed`` at the ``optimize`` stage: the oracle's runner then runs it alone through
the head's own tool and judges what it does (:mod:`harness.oracles.differential_runner`).
Every other optimizer goes to the wrapped executor unchanged.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from typing import Sequence

from harness.execute.differential import Optimizer, ReferenceFailed, Same, TargetFailed, Verdict, WrongCode, \
    differences
from harness.execute.exec_layout import layout_of
from harness.execute.process_executor import Executor
from harness.execute.toolchain import Toolchain
from harness.run.driver_protocol import DriverError
from harness.run.outcome import OutcomeKind
from harness.run.persistent_runner import PersistentRunner
from harness.run.persistent_target import PersistentTarget
from harness.targets.head_bindings import HeadBindings
from harness.targets.heads import HEADS
from harness.targets.identity import which
from harness.targets.target import Target

__all__ = ["HeadExecutor", "engine_head"]

#: Programs a head driver answers before it is replaced (its context keeps what it parsed).
RESTART_EVERY = 2000
#: The identity pipeline: the wrapped executor runs the original alone through it.
_UNCHANGED = "builtin.module()"


def engine_head(optimizer: Optimizer) -> HeadBindings | None:
    """The head whose tool ``optimizer`` runs, if its bindings execute, else None."""
    found = which(optimizer.binary)
    if found is None or optimizer.extra_args:
        return None
    real = os.path.realpath(found)
    return next((head for head in HEADS if head.engine and real in head.stands_for()), None)


def _driver_target(head: HeadBindings, optimizer: Optimizer, runtime: str, timeout: float) -> PersistentTarget:
    args = tuple(optimizer.argv()[1:])
    process = Target(name="mlir-opt", argv=(optimizer.binary, *args), timeout=timeout, memory_mb=None)
    binary = which(head.driver)
    if binary is None:  # its output would go to MLIR 22, which cannot read all of it: never that
        raise DriverError(f"{head.tool} is judged by its own ExecutionEngine through {head.driver}, which is "
                          f"not installed: pip install -e . (the package's console scripts)")
    driver = (binary, "--allow-unregistered-dialect", *args, f"--exec={runtime}", "--fork-server")
    return PersistentTarget(process, driver, RESTART_EVERY, fork_server=True)


@dataclass
class HeadExecutor:
    """``base`` for every optimizer but a head build's, whose output its own JIT runs."""

    base: Executor
    toolchain: Toolchain
    head_programs: int = 0  # programs whose optimized side the head executed
    _local: threading.local = field(default_factory=threading.local, repr=False)
    _all: list = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def kind(self) -> str:
        return self.base.kind

    def __getattr__(self, name: str):  # counts, fallbacks, driver(): the wrapped executor's
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def _runner(self, head: HeadBindings, optimizer: Optimizer) -> PersistentRunner:
        runners = getattr(self._local, "runners", None)
        if runners is None:
            runners = self._local.runners = {}
        key = (head.tool, tuple(optimizer.argv()[1:]))
        if key not in runners:
            runner = PersistentRunner(_driver_target(head, optimizer, self.toolchain.runtime_library,
                                                     max(optimizer.timeout, self.toolchain.timeout)))
            runners[key] = runner
            with self._lock:
                self._all.append(runner)
        return runners[key]

    def _references(self, texts: list[str]) -> list[str | ReferenceFailed]:
        """The original modules' outputs, by the wrapped executor (an unchanged pipeline)."""
        same = Optimizer(binary=self.toolchain.mlir_opt, pipeline=_UNCHANGED)
        found: list[str | ReferenceFailed] = []
        for verdict in self.base.judge_many(texts, same):
            if isinstance(verdict, Same):
                found.append(verdict.output)
            elif isinstance(verdict, ReferenceFailed):
                found.append(verdict)
            else:
                found.append(ReferenceFailed("run", f"the reference executors disagree on the original "
                                                    f"({verdict.kind})"))
        return found

    def _one(self, runner: PersistentRunner, text: str, reference: str | ReferenceFailed) -> Verdict:
        if isinstance(reference, ReferenceFailed):
            return reference
        outcome = runner.run(text)
        if outcome.kind is not OutcomeKind.ACCEPTED:  # died or hung: the pass under test, alone next
            return TargetFailed("optimize", outcome.reason, outcome.stderr)
        try:
            answer = json.loads(runner.last_output)
        except ValueError:
            raise DriverError(f"{runner.target.driver[0]} answered no JSON") from None
        stage, detail = answer["stage"], answer["detail"]
        first = next((line for line in detail.splitlines() if "error" in line), detail.splitlines()[0]
                     if detail else "(no message)")
        if stage in ("parse", "optimize"):
            return TargetFailed("optimize", f"exit 1: {first}", detail)
        if stage == "reparse":
            return TargetFailed("output", f"the optimized output is not valid MLIR: {first}")
        if stage == "lower-optimized":
            return ReferenceFailed("lower (optimized)", f"exit 1: {first}")
        layout = layout_of(text)
        if stage != "ok":  # it does not compile or run in the head's own JIT
            note = f"the optimized module does not compile or run: {first}"
            return WrongCode(reference, "", differences(layout, reference, ""), answer["optimized"], note)
        if answer["output"] == reference:
            return Same(reference)
        return WrongCode(reference, answer["output"], differences(layout, reference, answer["output"]),
                         answer["optimized"])

    def judge_many(self, exec_texts: Sequence[str], optimizer: Optimizer,
                   references: Sequence[str | ReferenceFailed] | None = None) -> list[Verdict]:
        head = engine_head(optimizer)
        if head is None:
            return self.base.judge_many(exec_texts, optimizer, references)
        texts = list(exec_texts)
        refs = list(references) if references is not None else self._references(texts)
        runner = self._runner(head, optimizer)
        verdicts = [self._one(runner, text, ref) for text, ref in zip(texts, refs)]
        with self._lock:
            self.head_programs += len(texts)
        return verdicts

    def judge(self, exec_text: str, optimizer: Optimizer, reference_output: str | None = None) -> Verdict:
        return self.judge_many([exec_text], optimizer, None if reference_output is None else [reference_output])[0]

    def close(self) -> None:
        with self._lock:
            runners, self._all = self._all, []
        for runner in runners:
            runner.close()
        self.base.close()
