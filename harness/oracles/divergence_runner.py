"""Two builds of one tool: the same programs through both, a ``divergence`` where they differ.

``--reference-loom-opt PATH`` / ``--reference-mlir-opt PATH`` name a second build
of the target (yesterday's loom-raise-opt, another LLVM release).  The target's
command line is kept; only its binary is swapped (:meth:`DivergenceSettings.
reference_target`).  Each program goes through both builds and the two outcomes
are compared (:func:`compare`), in this order:

``outcome``  the outcome kinds differ (accepted / rejected / crash / timeout / oom)
``output``   both accepted, and their printed modules differ in the normal form
             (:mod:`harness.run.normalize`)
``values``   with an ``execute`` step (``--oracle differential``: both outputs are
             lowered and run by the trusted toolchain), the printed values differ;
             a difference in the text only stays an ``output`` divergence

``compare`` (:data:`COMPARISONS`) says how far the builds must agree: ``outcome``
(kinds only), ``output`` (the default: kinds and the normal form, values too where
they are executed) or ``values`` (kinds and executed values; a text that differs
but computes the same is not a finding).  Two builds failing the same way is no
divergence: the target's own verdict (a crash is still a crash) stands.

:class:`DivergenceRunner` is a :class:`harness.run.runners.Runner`: the two builds
run side by side through two runners of their own, of the kind ``--runner`` names
(batches by default, or one process per program).  Under ``persistent`` each build
runs through the persistent driver that stands for *its own* build
(:func:`harness.run.runners.persistent_for`: ``mlir-opt-22`` through
``loomfuzz-mlir-driver``, ``mlir-opt-19`` through ``loomfuzz-mlir-driver-19``); a
build without one (another release, a wrapper that says the same release), runs in batches, and
:attr:`DivergenceRunner.notes` says so in one line (never one build's programs
through another build's driver).  Every divergence is confirmed by a run of each
build alone in a fresh process (:func:`judge_alone`) before it is a finding.

How a build's program runs alone and how outputs are executed are the settings'
(``run_primary``, ``execute``, ``execute_all``): by default a fresh process and
the trusted toolchain's processes; ``--oracle differential`` with the persistent
runner puts both in the driver (:mod:`harness.oracles.divergence_execution`), and says in
``note`` where it could not.  Where the text both builds read may carry constant twins
(``twins_of``: ``--oracle differential``), each finding records them and the summary
counts the programs that had them (the differential oracle's line).
"""

from __future__ import annotations

import collections
import functools
import itertools
import shlex
import subprocess
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from harness.run.atomic import write_atomically
from harness.run.probe import PROBE_MODULES, PipelineRefused, probe_target
from harness.run.normalize import LineDifference, first_difference, normalize
from harness.run.judge import Judge, judge
from harness.run.outcome import Outcome, OutcomeKind, Verdict
from harness.run.driver_protocol import DriverError
from harness.run.persistent_target import PersistentTarget
from harness.run.process import run_program
from harness.targets.target import explicit_binary, Target, TargetNotFound
from harness.run.runners import (BatchRunner, PersistentPool, ProcessRunner, Program, Result, Runner,
                                 persistent_for)

__all__ = ["COMPARISONS", "Divergence", "DivergenceResult", "DivergenceRunner", "DivergenceSettings",
           "DivergenceVerdict", "ReferenceBuildError", "check_reference", "compare", "failed_execution", "judge_alone",
           "reproduction_command", "resolve_reference", "side_drivers"]

COMPARISONS = ("outcome", "output", "values")
#: How each build runs (``--runner``); ``persistent``: the driver that stands for that build.
SIDE_RUNNERS = ("batch", "process", "persistent")


@dataclass(frozen=True)
class DivergenceSettings:
    """What the divergence mode compares: the reference build and how far they must agree."""

    reference: str  # the reference build's binary (an absolute path, or a name on PATH)
    compare: str = "output"
    #: the text both builds read, from the program as the target's rendering gives it
    #: (``--oracle differential``: its exec rendering); None: the program as it is
    prepare: Callable[[str], str] | None = None
    #: the printed values of a build's output (the trusted toolchain; raises on failure);
    #: None: outputs are compared as text only
    execute: Callable[[str], str] | None = None
    #: the printed values of several outputs at once, a failed execution as its
    #: ``(execution failed: ...)`` line (in process); None: ``execute`` one at a time
    execute_all: Callable[[Sequence[str]], list[str]] | None = None
    #: the primary build on one program alone, as :func:`harness.run.process.run_program`
    #: would give it (in process where the build is the driver's); None: a fresh process
    run_primary: Callable[[Target, str], Outcome] | None = None
    #: one line: where the judge named could not be used, and what runs instead
    note: str | None = None
    #: one line for the summary of what the in-process judge did (its driver's deaths), or None
    execution_summary: Callable[[], str | None] | None = None
    #: the constant twins of a text both builds read (harness.execute.twins), as their plan's
    #: text, or None; recorded in each finding (``twins``).  None: this mode has no twins
    twins_of: Callable[[str], str | None] | None = None
    #: the share of programs prepared with twins (``--twins``): above 0, the summary counts them
    twins: float = 0.0

    def __post_init__(self) -> None:
        if self.compare not in COMPARISONS:
            raise ValueError(f"compare must be one of {', '.join(COMPARISONS)}, not {self.compare!r}")
        if self.compare == "values" and self.execute is None:
            raise ValueError("compare 'values' needs an execute step (--oracle differential)")

    def reference_target(self, target: Target) -> Target:
        """``target`` with its binary swapped for the reference build's, and its identity
        (the reference's own release, not the primary's)."""
        from harness.targets.identity import identify_named

        build = identify_named(self.reference) if target.build is not None else None
        return replace(target, argv=(self.reference, *target.argv[1:]), build=build)

    def prepared(self, text: str) -> str:
        return self.prepare(text) if self.prepare is not None else text


@dataclass(frozen=True)
class Divergence:
    """How two builds differ on one program."""

    aspect: str  # outcome | output | values
    primary: Outcome
    reference: Outcome
    difference: LineDifference | None = None  # first differing normalized line (output, values)
    primary_values: str = ""
    reference_values: str = ""

    @property
    def kinds(self) -> str:
        return f"{self.primary.kind}/{self.reference.kind}"

    def describe(self) -> str:
        if self.aspect == "outcome":
            return (f"{self.primary.kind} here ({self.primary.reason}), {self.reference.kind} in the "
                    f"reference ({self.reference.reason})")
        where = self.difference.describe() if self.difference else "the outputs differ"
        if self.aspect == "values":
            return f"printed values differ ({self.values_difference().describe('printed line')}); {where}"
        return where

    def values_difference(self) -> LineDifference | None:
        """The first line of printed values that differs (a ``values`` divergence)."""
        return first_difference(self.primary_values, self.reference_values)

    def to_json(self) -> dict:
        return {
            "aspect": self.aspect, "kinds": self.kinds,
            "describe": self.describe(),
            "first_difference": None if self.difference is None else {
                "line": self.difference.line, "primary": self.difference.primary,
                "reference": self.difference.reference},
            "primary": _side_json(self.primary, self.primary_values),
            "reference": _side_json(self.reference, self.reference_values),
        }


def _side_json(outcome: Outcome, values: str) -> dict:
    return {"outcome": outcome.kind.value, "reason": outcome.reason, "stdout": outcome.stdout,
            "stderr": outcome.stderr[-8000:], "normalized": normalize(outcome.stdout)
            if outcome.kind is OutcomeKind.ACCEPTED else "", "values": values}


def _values(execute: Callable[[str], str], text: str) -> str:
    try:
        return execute(text)
    except Exception as error:  # noqa: BLE001 - a failed execution is a value to compare too
        return failed_execution(error)


def compare(primary: Outcome, reference: Outcome, settings: DivergenceSettings) -> Divergence | None:
    """How the two builds' outcomes of one program differ under ``settings``; None: they agree."""
    if primary.kind is not reference.kind:
        return Divergence("outcome", primary, reference)
    if settings.compare == "outcome" or primary.kind is not OutcomeKind.ACCEPTED:
        return None
    difference = first_difference(normalize(primary.stdout), normalize(reference.stdout))
    if difference is None:
        return None  # the same normal form computes the same values: nothing to execute
    if settings.execute_all is not None:
        mine, theirs = settings.execute_all([primary.stdout, reference.stdout])
    elif settings.execute is not None:
        mine, theirs = _values(settings.execute, primary.stdout), _values(settings.execute, reference.stdout)
    if settings.execute is not None or settings.execute_all is not None:
        if mine != theirs:
            return Divergence("values", primary, reference, difference, mine, theirs)
        if settings.compare == "values":
            return None
    return Divergence("output", primary, reference, difference)


def failed_execution(error: object) -> str:
    """The line that stands for a build's output whose execution failed (compared as values)."""
    return f"(execution failed: {' '.join(str(error).split())[:300]})"


def judge_alone(target: Target, settings: DivergenceSettings, prepared: str) -> Divergence | None:
    """Both builds on ``prepared`` (the text they read), each alone: the reference build in a
    fresh process, the primary one as ``settings.run_primary`` runs it (default: one too)."""
    mine = settings.run_primary(target, prepared) if settings.run_primary else run_program(target, prepared)
    return compare(mine, run_program(settings.reference_target(target), prepared), settings)


@dataclass(frozen=True)
class DivergenceVerdict(Verdict):
    """A verdict carrying the divergence (None: the primary build's own verdict)."""

    divergence: Divergence | None = None

    def to_json(self) -> dict:
        record = super().to_json()
        if self.divergence is not None:
            record["divergence"] = self.divergence.to_json()
        return record


def reproduction_command(target: Target, settings: DivergenceSettings, program: str) -> str:
    """A shell line that shows the divergence: both builds on ``program``, diffed."""
    mine = shlex.join(target.argv)
    theirs = shlex.join(settings.reference_target(target).argv)
    quoted = shlex.quote(program)
    return f"diff <({mine} < {quoted} 2>&1) <({theirs} < {quoted} 2>&1)"


@dataclass(frozen=True)
class DivergenceResult(Result):
    """A result whose finding also leaves the text both builds read (``NAME.exec.mlir``
    when it is not the program itself) and the divergence in ``NAME.json``."""

    prepared: str = ""
    settings: DivergenceSettings | None = None
    side_target: Target | None = None  # the primary build as it ran (its command line)

    def write_finding(self, directory, name: str, target: Target, extra=None, *, suffix: str) -> None:
        record = dict(extra or {})
        if self.settings is not None and self.side_target is not None:
            program = f"{name}{suffix}"
            if self.prepared != self.program.text:
                program = f"{name}.exec.mlir"
                Path(directory).mkdir(parents=True, exist_ok=True)
                write_atomically(Path(directory) / program, self.prepared)
            reference = self.settings.reference_target(self.side_target)
            record.update({"reference_target": reference.to_json(),
                           "compare": self.settings.compare,
                           "build_input": program,
                           "reproduce": reproduction_command(self.side_target, self.settings, program)})
            if self.settings.twins_of is not None:  # what triage reproduces and minimizes with
                record["twins"] = self.settings.twins_of(self.prepared)
        super().write_finding(directory, name, target, record, suffix=suffix)


def _never_a_finding(target: Target, text: str, outcome: Outcome) -> Verdict:
    return Verdict(outcome, "either", False, "")


def _driver_of(target: Target, restart_every: int | None) -> PersistentTarget:
    """The persistent driver that stands for ``target``'s build, sending every printed module
    back (the outputs are compared); raises ``DriverError`` (one line) where none does."""
    # the differential target is the optimizer's command line: an mlir-opt build's driver
    lookup = replace(target, name="mlir-opt") if target.name == "differential" else target
    persistent = replace(persistent_for(lookup, restart_every), process=target)
    if "--emit-output" not in persistent.driver:
        persistent = replace(persistent, driver=(*persistent.driver, "--emit-output"))
    return persistent


def side_drivers(target: Target, reference: Target, restart_every: int | None = None
                 ) -> tuple[PersistentTarget | None, PersistentTarget | None, list[str]]:
    """The persistent drivers that stand for this build and for the reference build (None: that
    build runs in batches), and one line for each build that has none.  A driver stands for one
    binary (:func:`harness.run.driver_binary.stands_for`), so a wrapper beside the build it wraps
    (both say the same release) runs in batches and the build itself through its driver."""
    found: list[PersistentTarget | None] = []
    notes: list[str] = []
    for role, side in (("this build", target), ("the reference build", reference)):
        try:
            found.append(_driver_of(side, restart_every))
        except DriverError as why:
            found.append(None)
            notes.append(f"--runner persistent: {role} {side.argv[0]} runs in batches, never through "
                         f"another build's driver: {why}")
    mine, theirs = found
    return mine, theirs, notes


def _side_runner(kind: str, target: Target, judge_with: Judge, jobs: int, batch_size: int | None,
                 persistent: PersistentTarget | None = None) -> Runner:
    if kind == "process":
        return ProcessRunner(target, judge=judge_with, jobs=jobs)
    if kind == "persistent" and persistent is not None:
        return PersistentPool(target, persistent, judge=judge_with, jobs=jobs)
    if kind in ("batch", "persistent"):  # persistent without a driver of its own: batches (said)
        return BatchRunner(target, judge=judge_with, jobs=jobs, batch_size=batch_size, fallback=None)
    raise ValueError(f"runner must be one of {', '.join(SIDE_RUNNERS)}, not {kind!r}")


class DivergenceRunner(Runner):
    """The programs through the target and its reference build; divergences are findings.

    ``runner_kind`` (default ``batch``) is how each build runs; ``persistent``: each through
    the driver that stands for it (:func:`side_drivers`), a build without one in batches, and
    :attr:`notes` say so (one line each, for the user)."""

    kind = "divergence"

    def __init__(self, target: Target, settings: DivergenceSettings, *, runner_kind: str | None = None,
                 jobs: int = 1, batch_size: int | None = None, restart_every: int | None = None) -> None:
        kind = runner_kind or "batch"
        if kind not in SIDE_RUNNERS:
            raise ValueError(f"runner must be one of {', '.join(SIDE_RUNNERS)}, not {kind!r}")
        # the two side runners run the builds with this many workers each, and as many
        # workers here compare their outcomes (executing both outputs, each worker through
        # its own driver), so that --jobs N judges N programs at once end to end
        super().__init__(target, jobs=jobs)
        if settings.execute is not None:  # a confirmation prints the same outputs: run them once
            settings = replace(settings, execute=functools.lru_cache(maxsize=64)(settings.execute))
        self.settings = settings
        self.reference_target = settings.reference_target(target)
        mine = theirs = None
        self.notes: list[str] = []
        if kind == "persistent":
            mine, theirs, self.notes = side_drivers(target, self.reference_target, restart_every)
        self.primary = _side_runner(kind, target, judge, jobs, batch_size, mine)
        self.reference = _side_runner(kind, self.reference_target, _never_a_finding, jobs, batch_size, theirs)
        self._confirmations = 0  # processes of the confirmations (two per divergence)
        self._twinned = 0  # programs both builds read with constant twins (settings.twins_of)

    def describe(self) -> str:
        """``divergence (this build: persistent, driver X; the reference: batch)``: how each ran."""
        return f"divergence (this build: {self.primary.describe()}; the reference: {self.reference.describe()})"

    def executor_summary(self) -> str | None:
        """What the in-process judge of the two builds' values did (its driver's deaths) and how
        many programs had constant twins (the differential oracle's line), or None."""
        summary = self.settings.execution_summary
        parts = [summary() if summary is not None else None]
        if self.settings.twins_of is not None and self.settings.twins > 0:
            parts.append(f"constant twins in {self._twinned} of {self.stats.programs} programs")
        return "; ".join(p for p in parts if p) or None

    def close(self) -> None:
        self.primary.close()
        self.reference.close()
        super().close()

    def _sum_sides(self) -> None:
        self.stats.processes = self.primary.stats.processes + self.reference.stats.processes + \
            self._confirmations
        self.stats.restarts = {**{f"this build {w}": c for w, c in self.primary.stats.restarts.items()},
                               **{f"the reference {w}": c for w, c in self.reference.stats.restarts.items()}}

    def run(self, programs: Iterable[Program]) -> Iterator[Result]:
        pairs = ((p, Program(p.key, self.settings.prepared(p.text))) for p in programs)
        originals, mine, theirs = itertools.tee(pairs, 3)
        window: collections.deque[Future] = collections.deque()

        def counted(result: Result) -> Result:
            with self._lock:
                self.stats.programs += 1
                self.stats.executions += result.executions
                self._sum_sides()
            return result

        for (program, prepared), a, b in zip(originals, self.primary.run(q for _, q in mine),
                                             self.reference.run(q for _, q in theirs)):
            window.append(self._pool.submit(self._paired, program, prepared.text, a, b))
            while len(window) > 2 * self.jobs:
                yield counted(window.popleft().result())
        while window:
            yield counted(window.popleft().result())

    def _one(self, program: Program) -> Result:
        prepared = Program(program.key, self.settings.prepared(program.text))
        result = self._paired(program, prepared.text, self.primary.run_one(prepared),
                              self.reference.run_one(prepared))
        self._sum_sides()
        return result

    def _paired(self, program: Program, prepared: str, mine: Result, theirs: Result) -> Result:
        executions = mine.executions + theirs.executions
        if self.settings.twins_of is not None and self.settings.twins_of(prepared) is not None:
            with self._lock:
                self._twinned += 1
        divergence = compare(mine.outcome, theirs.outcome, self.settings)
        if divergence is not None:
            divergence = judge_alone(self.target, self.settings, prepared)  # confirmed, or a flake
            with self._lock:
                self._confirmations += 2
            executions += 2
        if divergence is None:
            return DivergenceResult(program, mine.outcome, mine.verdict, executions, mine.evidence, mine.fresh,
                                    prepared=prepared, settings=self.settings, side_target=self.target)
        outcome = divergence.primary
        verdict = DivergenceVerdict(outcome, f"the reference build's outcome ({divergence.reference.kind})",
                                    True, f"divergence ({divergence.aspect}): {divergence.describe()}"[:300],
                                    "", "divergence", divergence=divergence)
        return DivergenceResult(program, outcome, verdict, executions, prepared=prepared,
                                settings=self.settings, side_target=self.target)


# ------------------------------------------------------------- the reference


class ReferenceBuildError(PipelineRefused):
    """The reference build is missing or does not run (one line; ``harness.cli`` exits 2)."""


def resolve_reference(path: str, flag: str) -> str:
    """The reference binary ``flag`` names: a path to an executable file, or a name on PATH."""
    try:
        return explicit_binary(path, flag)
    except TargetNotFound as error:
        raise ReferenceBuildError(str(error)) from None


def check_reference(target: Target, settings: DivergenceSettings, flag: str) -> None:
    """Raise :class:`ReferenceBuildError` (one line) unless the reference build runs with the
    target's arguments: the built-in targets' probe module must be accepted
    (:func:`harness.run.probe.probe_target`); a tool of the user's own must start and not die
    by a signal on an empty input."""
    reference = settings.reference_target(target)
    what = f"{flag} {settings.reference} (with the target's arguments)"
    try:
        if target.name in PROBE_MODULES:
            probe_target(reference, what)
            return
        done = subprocess.run(reference.argv, input=b"", capture_output=True, timeout=target.timeout)
    except TargetNotFound as error:
        raise ReferenceBuildError(f"{flag}: {error}") from None
    except PipelineRefused as error:
        raise ReferenceBuildError(str(error)) from None
    except OSError as error:
        raise ReferenceBuildError(f"{flag}: cannot run {settings.reference}: {error.strerror}") from None
    except subprocess.TimeoutExpired:
        raise ReferenceBuildError(f"{what}: still running after {target.timeout:g} s on an empty input") from None
    if done.returncode < 0:
        raise ReferenceBuildError(f"{what}: dies by signal {-done.returncode} on an empty input")
