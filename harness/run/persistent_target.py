"""What a persistent target is: a driver command line beside the process-per-input
``Target`` it stands for (the one findings are confirmed with), how often the
driver is replaced, and whether it runs as a fork server.

``restart_every`` defaults to 10,000 programs, the loop count of AFL++'s
persistent-mode example (``while (__AFL_LOOP(10000))`` in AFL++'s
instrumentation/README.persistent_mode.md), so that state cannot build up
without bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from harness.run.driver_binary import DRIVER_ENV, LOOM_DRIVER_ENV, default_driver_path, find_driver
from harness.run.driver_protocol import DriverError
from harness.targets.target import Target

__all__ = ["DEFAULT_RESTART_EVERY", "START_TIMEOUT", "PersistentTarget", "persistent_target"]

DEFAULT_RESTART_EVERY = 10_000
START_TIMEOUT = 60.0  # registering every dialect and pass takes well under a second


@dataclass(frozen=True)
class PersistentTarget:
    """A driver command line beside the process-per-input ``Target`` it stands for.

    ``process`` is what findings are confirmed with and what their sidecars
    name (triage reproduces with it); its limits and expectations apply to
    the driver too.
    """

    process: Target
    driver: tuple[str, ...]
    restart_every: int = DEFAULT_RESTART_EVERY
    start_timeout: float = START_TIMEOUT
    #: The driver runs with --fork-server: a crash costs a fork, and a finding
    #: is confirmed as the first program of a freshly forked worker.
    fork_server: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "driver", tuple(self.driver))
        if self.restart_every < 1:
            raise ValueError("restart_every must be at least 1")

    def to_json(self) -> dict:
        return {"driver": list(self.driver), "restart_every": self.restart_every,
                "fork_server": self.fork_server}


def _needs_output(target: Target) -> bool:
    return any(rule.checks for rule in target.expectations.rules)


def persistent_target(
    process: Target, driver: Optional[str] = None, *, restart_every: int = DEFAULT_RESTART_EVERY,
    fork_server: bool = True,
) -> PersistentTarget:
    """The persistent form of ``process``: the driver gets ``process``'s
    arguments (the same flags as ``mlir-opt``), plus ``--emit-output`` when
    the expectations check the output, and ``--fork-server`` (the default)."""
    binary = driver or find_driver(process.name, process.build)
    if not binary:
        if process.name == "mlir-opt":
            raise DriverError(
                f"no persistent MLIR driver: build it with `bash .ci/setup` (it goes to "
                f"{default_driver_path()}) or set {DRIVER_ENV}"
            )
        raise DriverError(
            f"no persistent driver for target {process.name}: set {LOOM_DRIVER_ENV} to the "
            "loomfuzz-mlir-driver built in loom's tree (README: Persistent targets)"
        )
    extra = ("--emit-output",) if _needs_output(process) else ()
    if fork_server:
        extra += ("--fork-server",)
    return PersistentTarget(process, (binary, *process.argv[1:], *extra), restart_every,
                            fork_server=fork_server)
