"""What every executor of the differential oracle is, and the process path.

An :class:`Executor` turns exec modules and an :class:`~harness.execute.differential.Optimizer`
into :data:`~harness.execute.differential.Verdict` s.  :class:`ProcessExecutor`
runs three processes a side per batch (the optimizer with ``--split-input-file``,
``mlir-opt-22`` lowering, ``mlir-runner-22``); the in-process executor
(:mod:`harness.execute.inprocess`) falls back to it for a program its driver
could not answer.  Which one runs is :func:`harness.execute.executors.make_executor`'s
choice, above both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from harness.execute import differential
from harness.execute.differential import Optimizer, ReferenceFailed, Verdict
from harness.execute.toolchain import Toolchain

__all__ = ["Executor", "ProcessExecutor"]


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
