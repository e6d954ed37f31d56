"""How the differential oracle executes programs: by processes, or in process.

An :class:`~harness.execute.process_executor.Executor` turns exec modules and an
:class:`~harness.execute.differential.Optimizer` into
:data:`~harness.execute.differential.Verdict` s; every caller (the oracle's runner,
wrong-code triage, the benchmark) asks ``OracleSettings.executor()`` for one
and never reaches into an implementation.  ``--runner`` picks it:

=============  ===============================================================
``process``    :class:`~harness.execute.process_executor.ProcessExecutor`: today's path, three processes a side
               per batch (the optimizer with ``--split-input-file``,
               ``mlir-opt-22`` lowering, ``mlir-runner-22``)
``persistent`` :class:`harness.execute.inprocess.InProcessExecutor`: the
               persistent driver's ``--exec`` mode parses, optimizes (when the
               optimizer is ``mlir-opt-22`` itself), lowers, JITs and runs
               both sides in one long-lived process; another optimizer binary
               still runs as a process, the reference execution stays in
               process
=============  ===============================================================

Both give the same verdicts for the same programs (tests/test_inprocess.py).  Either is
wrapped by :class:`harness.execute.head_executor.HeadExecutor`: an optimizer that is LLVM's
development head with an ExecutionEngine (``mlir-opt-head``) runs its own output.
"""

from __future__ import annotations

from harness.execute.head_executor import HeadExecutor
from harness.execute.process_executor import Executor, ProcessExecutor
from harness.execute.toolchain import Toolchain

__all__ = ["EXECUTOR_KINDS", "default_executor_kind", "make_executor"]

EXECUTOR_KINDS = ("persistent", "process")


def default_executor_kind() -> str:
    """``persistent`` where the driver is built (native/build, or ``$LOOMFUZZ_MLIR_DRIVER``),
    else ``process``."""
    from harness.run.driver_binary import find_driver
    from harness.run.driver_protocol import DriverError

    try:
        return "persistent" if find_driver("mlir-opt") else "process"
    except DriverError:
        return "process"


def make_executor(kind: str | None, toolchain: Toolchain, *, driver: str | None = None,
                  in_process: str = "ir", cross_check: float = 0.0) -> Executor:
    """The executor ``kind`` (None: :func:`default_executor_kind`; ``batch`` is the process
    path, which batches anyway; ``in_process``, ``cross_check``: the in-process judge's executor
    and sampled share, harness.execute.inprocess).  Raises ``harness.run.driver_protocol.DriverError`` (one line)
    for ``persistent`` without a driver."""
    kind = kind or default_executor_kind()
    if kind in ("process", "batch"):
        return HeadExecutor(ProcessExecutor(toolchain), toolchain)
    if kind == "persistent":
        # imported when asked for: the driver's modules are not every oracle's import
        from harness.execute.inprocess import InProcessExecutor

        return HeadExecutor(InProcessExecutor(toolchain, driver=driver, executor=in_process,
                                              cross_check=cross_check), toolchain)
    raise ValueError(f"the differential oracle runs with --runner persistent or process, not {kind!r}")
