"""One oracle choice -> one runner: the entry every judging command calls.

:class:`OracleChoice` is the one typed value that says which oracle judges a run
(``crash`` by the target's expectations, ``differential``, ``divergence``) and how
its programs reach the target (``--runner``, jobs, batch size, driver restarts);
:func:`oracle_runner` makes its :class:`harness.run.runners.Runner`, whose results
carry each program's verdict.  ``run`` and ``enumerate --run`` (through
:func:`harness.commands.sweep_command`), ``fuzz`` (its fuzz target,
:mod:`harness.fuzzing.program_target`) and crash triage (:mod:`harness.triage.runs`)
all get their runner here, so an oracle or runner added here reaches every one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from harness.run.runners import Runner, make_runner
from harness.targets.target import Target

if TYPE_CHECKING:  # the other oracles' modules are imported when chosen: a crash fuzz target starts light
    from harness.oracles.differential_runner import OracleSettings
    from harness.oracles.divergence_runner import DivergenceSettings
    from harness.targets.expectations import Expectations

__all__ = ["OracleChoice", "oracle_runner"]


@dataclass(frozen=True)
class OracleChoice:
    """Which oracle judges the programs, and how they reach the target.

    ``differential`` (``--oracle differential``'s settings) and ``divergence`` (a
    reference build's settings) name the oracle; neither is the crash oracle.
    With both, the two builds' outputs are executed (the divergence settings were
    made for the differential oracle: :func:`harness.oracles.divergence_execution.
    exec_divergence_settings`).  ``expectations`` judge a differential optimizer's own
    failures (a known upstream crash is no finding); ``env`` and ``settle`` are the
    coverage bridge's (``fuzz --coverage``: the map's environment for the target)."""

    differential: OracleSettings | None = None
    divergence: DivergenceSettings | None = None
    runner: str | None = None
    jobs: int = 1
    batch_size: int | None = None
    restart_every: int | None = None
    expectations: Expectations | None = None
    env: Mapping[str, str] | None = None
    settle: bool = False

    @property
    def name(self) -> str:
        """``divergence``, ``differential`` or ``crash``: the oracle whose findings these are."""
        if self.divergence is not None:
            return "divergence"
        return "differential" if self.differential is not None else "crash"


def oracle_runner(target: Target | None, choice: OracleChoice) -> Runner:
    """The runner that judges ``choice``'s way.  ``target`` is the build under test (for
    the differential oracle, which may be given None, the runner's own target, the optimizer
    reading the exec rendering, replaces it: read ``runner.target``).  Raises ``DriverError`` (a persistent
    runner without a driver) and ``ValueError`` (a runner kind the oracle cannot use),
    each one line; the runner's ``note`` / ``notes`` say where another way had to be taken."""
    if (choice.divergence is not None or choice.differential is None) and target is None:
        raise ValueError(f"the {choice.name} oracle judges a build under test: none given")
    if choice.divergence is not None:
        from harness.oracles.divergence_runner import DivergenceRunner

        return DivergenceRunner(target, choice.divergence, runner_kind=choice.runner, jobs=choice.jobs,
                                batch_size=choice.batch_size, restart_every=choice.restart_every)
    if choice.differential is not None:
        from harness.oracles.differential_runner import DifferentialRunner

        return DifferentialRunner(choice.differential, jobs=choice.jobs, expectations=choice.expectations)
    return make_runner(choice.runner, target, jobs=choice.jobs, batch_size=choice.batch_size,
                       restart_every=choice.restart_every, env=choice.env, settle=choice.settle)
