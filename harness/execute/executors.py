"""How the differential oracle executes programs: by processes, or in process.

An :class:`Executor` turns exec modules and an :class:`~harness.execute.differential.Optimizer`
into :data:`~harness.execute.differential.Verdict` s; every caller (the oracle's runner,
wrong-code triage, the benchmark) asks ``OracleSettings.executor()`` for one
and never reaches into an implementation.  ``--runner`` picks it:

=============  ===============================================================
``process``    :class:`ProcessExecutor`: today's path, three processes a side
               per batch (the optimizer with ``--split-input-file``,
               ``mlir-opt-22`` lowering, ``mlir-runner-22``)
``persistent`` :class:`harness.execute.inprocess.InProcessExecutor`: the
               persistent driver's ``--exec`` mode parses, optimizes (when the
               optimizer is ``mlir-opt-22`` itself), lowers, JITs and runs
               both sides in one long-lived process; another optimizer binary
               still runs as a process, the reference execution stays in
               process
=============  ===============================================================

Both give the same verdicts for the same programs (tests/test_inprocess.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from harness.execute import differential
from harness.execute.differential import Optimizer, ReferenceFailed, Verdict
from harness.execute.toolchain import Toolchain

__all__ = ["EXECUTOR_KINDS", "Executor", "ProcessExecutor", "default_executor_kind", "make_executor"]

EXECUTOR_KINDS = ("persistent", "process")


class Executor(Protocol):
    """Judges exec modules before and after an optimizer (:mod:`harness.execute.differential`)."""

    kind: str

    def judge_many(self, exec_texts: Sequence[str], optimizer: Optimizer,
                   references: Sequence[str | ReferenceFailed] | None = None) -> list[Verdict]:
        """Each program's verdict; ``references``: the unoptimized outputs if known."""

    def judge(self, exec_text: str, optimizer: Optimizer, reference_output: str | None = None) -> Verdict:
        """One program's verdict, alone (a confirmation)."""

    def close(self) -> None:
        """Stop what it started (drivers)."""


@dataclass
class ProcessExecutor:
    """The process path: :func:`differential.judge_many` / :func:`differential.judge`."""

    toolchain: Toolchain
    kind: str = "process"

    def judge_many(self, exec_texts: Sequence[str], optimizer: Optimizer,
                   references: Sequence[str | ReferenceFailed] | None = None) -> list[Verdict]:
        return differential.judge_many(exec_texts, optimizer, self.toolchain, references)

    def judge(self, exec_text: str, optimizer: Optimizer, reference_output: str | None = None) -> Verdict:
        return differential.judge(exec_text, optimizer, self.toolchain, reference_output)

    def close(self) -> None:
        pass


def default_executor_kind() -> str:
    """``persistent`` where the driver is built (native/build, or ``$LOOMFUZZ_MLIR_DRIVER``),
    else ``process``."""
    from harness.run.persistent import DriverError, find_driver

    try:
        return "persistent" if find_driver("mlir-opt") else "process"
    except DriverError:
        return "process"


def make_executor(kind: str | None, toolchain: Toolchain, *, driver: str | None = None) -> Executor:
    """The executor ``kind`` (None: :func:`default_executor_kind`; ``batch`` is the process
    path, which batches anyway).  Raises ``harness.run.persistent.DriverError`` (one line)
    for ``persistent`` without a driver."""
    kind = kind or default_executor_kind()
    if kind in ("process", "batch"):
        return ProcessExecutor(toolchain)
    if kind == "persistent":
        from harness.execute.inprocess import InProcessExecutor

        return InProcessExecutor(toolchain, driver=driver)
    raise ValueError(f"the differential oracle runs with --runner persistent or process, not {kind!r}")
