"""Two builds under ``--oracle differential``: both read the exec rendering, both outputs run.

:func:`exec_divergence_settings` makes the :class:`harness.run.divergence.DivergenceSettings`
of a differential run with a reference build: each canonical program is rendered
for execution as *both* releases parse it (flagless when either is MLIR 15/16,
:mod:`harness.execute.releases`: the two builds read the same bytes), and an
output is executed by the trusted toolchain (lowered with ``mlir-opt-22``, run
with ``mlir-runner-22``) when the two normal forms differ.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from harness.execute.differential import _PROBE, OptimizerError
from harness.execute.oracle import OracleError, OracleSettings, oracle_target
from harness.execute.releases import for_release, major_version
from harness.execute.render_exec import exec_module
from harness.execute.toolchain import Toolchain
from harness.run.divergence import DivergenceSettings
from harness.run.target import Target

__all__ = ["check_reference_optimizer", "differential_target", "exec_divergence_settings", "exec_for_releases"]


def exec_for_releases(releases: tuple[int | None, ...], canonical: str) -> str:
    """The exec rendering of ``canonical`` as every one of ``releases`` parses it."""
    text = exec_module(canonical)
    for release in releases:
        text = for_release(text, release)
    return text


def _execute(toolchain: Toolchain, text: str) -> str:
    return toolchain.execute(text)


def exec_divergence_settings(reference: str, oracle: OracleSettings, compare: str = "output") -> DivergenceSettings:
    """The divergence settings of ``--oracle differential`` with the reference build ``reference``."""
    releases = (oracle.release, major_version(reference))
    return DivergenceSettings(reference, compare, prepare=partial(exec_for_releases, releases),
                              execute=partial(_execute, oracle.toolchain))


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
