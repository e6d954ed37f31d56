"""One runner interface: programs in, one judged ``Result`` each out.

Every command that runs programs (``fuzz``, ``run``, ``enumerate --run``,
``triage``) goes through a :class:`Runner`; ``--runner`` picks the
implementation:

=============  ===============================================================
``process``    one target process per program (:func:`runner.run_program`)
``batch``      many programs per process through ``--split-input-file``
               (:mod:`harness.run.batch`); a batch that cannot be read is run
               again program by program through the persistent driver when
               there is one, else bisected
``persistent`` ``jobs`` long-lived drivers (:mod:`harness.run.persistent_runner`),
               each a fork server: a crash replaces only its own worker, by
               a fork, and is confirmed as the first program of a fresh one
=============  ===============================================================

:meth:`Runner.run` takes programs (:class:`Program`: a key, its index or
name, and its text) and yields one :class:`Result` per program, in input
order, while up to ``jobs`` workers run ahead.  Judging is one pluggable
step: every runner calls its ``judge`` (default :func:`runner.judge`, the
expectations; the wrong-code oracle plugs in a judge that also executes)
on every outcome, and a runner re-runs a finding in a fresh process only
after its judge said it is one.

:class:`RunnerStats` counts what the programs cost: executions (each time a
program went to the target, confirmations included), processes started,
and per worker the driver restarts with their reasons.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, Sequence

from harness.run import head_driver
from harness.run.batch import BatchSizer, ProgramResult, run_batch
from harness.run.driver_binary import HEAD_DRIVER_NAMES, find_driver, stands_for
from harness.run.driver_protocol import DriverError
from harness.run.persistent_evidence import PersistentEvidence
from harness.run.persistent_runner import PersistentRunner
from harness.run.persistent_target import PersistentTarget, persistent_target
from harness.targets.identity import IdentityError, identify, pipeline_passes
from harness.run.judge import Judge, judge, write_finding
from harness.run.outcome import Outcome, Verdict
from harness.run.process import run_program
from harness.targets.target import Target

__all__ = [
    "RUNNER_KINDS",
    "BatchRunner",
    "PersistentPool",
    "ProcessRunner",
    "Program",
    "Result",
    "Runner",
    "RunnerStats",
    "DriverMismatch",
    "default_runner_kind",
    "driver_mismatch",
    "make_runner",
]

RUNNER_KINDS = ("process", "batch", "persistent")

LOOM_DRIVER_MISSING = (
    "--runner persistent: the persistent driver for loom-opt must be built with loom's "
    "libraries (native/README.md, 'Inside loom's tree'; then set LOOMFUZZ_LOOM_DRIVER); "
    "native/build/loomfuzz-mlir-driver knows upstream passes only; or use --runner batch"
)


@dataclass(frozen=True)
class Program:
    key: object  # its index in a sweep, or a name
    text: str  # as the target reads it


@dataclass(frozen=True)
class Result:
    program: Program
    outcome: Outcome
    verdict: Verdict
    executions: int  # times this program went to the target (a confirmation included)
    #: a persistent-only finding's driver, position and history (its sidecar)
    evidence: Optional[PersistentEvidence] = None
    #: a persistent-only finding's fresh run, which did not fail: what the program does alone
    fresh: Optional[Verdict] = None

    def write_finding(self, directory, name: str, target: Target, extra=None, *, suffix: str) -> None:
        """``NAME<suffix>`` and ``NAME.json`` (harness.run.judge.write_finding), with the
        driver's evidence for a persistent-only finding."""
        if self.evidence is not None:
            self.evidence.write_finding(directory, name, self.program.text, self.verdict, extra, suffix=suffix)
        else:
            write_finding(directory, name, self.program.text, target, self.verdict, extra, suffix=suffix)


@dataclass
class RunnerStats:
    programs: int = 0
    executions: int = 0
    processes: int = 0  # target processes started: per program, per batch, drivers, forks
    #: worker name -> reason -> driver (worker) restarts
    restarts: dict[str, collections.Counter] = field(default_factory=dict)

    @property
    def restart_count(self) -> int:
        return sum(sum(c.values()) for c in self.restarts.values())

    def restart_reasons(self) -> collections.Counter:
        total: collections.Counter = collections.Counter()
        for counter in self.restarts.values():
            total.update(counter)
        return total

    def describe_restarts(self) -> str:
        """``N (crash: a, timeout: b; worker-0: x, worker-1: y)``."""
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(self.restart_reasons().items()))
        workers = ", ".join(f"{w}: {sum(c.values())}" for w, c in sorted(self.restarts.items()))
        return f"{self.restart_count} ({reasons or 'none'}" + (f"; {workers})" if workers else ")")


class Runner:
    """Base of the implementations: ordered results from ``jobs`` worker threads.

    A worker thread lives as long as the runner (a persistent driver gets
    its parent-death signal when the thread that started it ends) and owns
    its state (:meth:`_worker_state`).  Use as a context manager.
    """

    kind = ""
    #: one line for the user about how this runner was chosen (a fallback), or None
    note: str | None = None

    def executor_summary(self) -> str | None:
        """How programs were executed, one line for the summary (the differential oracle's
        in-process executors), or None."""
        return None

    def __init__(self, target: Target, *, judge: Judge = judge, jobs: int = 1) -> None:
        self.target = target
        self.judge = judge
        self.jobs = max(1, jobs)
        self.stats = RunnerStats()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._states: list = []
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix=f"runner-{self.kind}")

    # -- the interface ----------------------------------------------------------

    def run(self, programs: Iterable[Program]) -> Iterator[Result]:
        """One result per program, in input order."""
        window: collections.deque[Future] = collections.deque()
        ahead = 4 * self.jobs
        for program in programs:
            window.append(self._pool.submit(self._one, program))
            while len(window) > ahead:
                yield from self._collect(window.popleft())
        while window:
            yield from self._collect(window.popleft())

    def run_all(self, programs: Sequence[Program]) -> list[Result]:
        return list(self.run(programs))

    def describe(self) -> str:
        """How programs reach the target, for summaries: the runner's kind."""
        return self.kind

    def run_one(self, program: Program) -> Result:
        """One program in the calling thread (a fuzz target's loop), with that
        thread's own worker state (its driver)."""
        result = self._one(program)
        with self._lock:
            self.stats.programs += 1
            self.stats.executions += result.executions
        return result

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)  # programs not started yet: dropped
        for state in self._states:
            close = getattr(state, "close", None)
            if close:
                close()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- for the implementations ----------------------------------------------

    def _collect(self, future: Future) -> Iterator[Result]:
        result = future.result()
        with self._lock:
            self.stats.programs += 1
            self.stats.executions += result.executions
        yield result

    def _state(self):
        """This thread's worker state, made on its first call."""
        try:
            return self._local.state
        except AttributeError:
            with self._lock:
                index = len(self._states)
                state = self._worker_state(index)
                self._states.append(state)
            self._local.state = state
            return state

    def _worker_state(self, index: int):
        return None

    def _count(self, processes: int) -> None:
        with self._lock:
            self.stats.processes += processes

    def _one(self, program: Program) -> Result:
        raise NotImplementedError


class ProcessRunner(Runner):
    """One target process per program."""

    kind = "process"

    def _one(self, program: Program) -> Result:
        outcome = run_program(self.target, program.text)
        self._count(1)
        return Result(program, outcome, self.judge(self.target, program.text, outcome), 1)


class _Worker:
    """A persistent worker thread's driver and its name in the restart counts."""

    def __init__(self, runner: PersistentRunner, name: str, stats: RunnerStats) -> None:
        self.runner = runner
        self.name = name
        stats.restarts[name] = runner.stats.restarts  # live: the summary reads it at the end

    def close(self) -> None:
        self.runner.close()


class PersistentPool(Runner):
    """``jobs`` persistent drivers in parallel, one per worker thread."""

    kind = "persistent"

    def __init__(self, target: Target, persistent: PersistentTarget, *, judge: Judge = judge,
                 jobs: int = 1, env=None, settle: bool = False) -> None:
        super().__init__(target, judge=judge, jobs=jobs)
        self.persistent = persistent
        self.env = env
        self.settle = settle

    def describe(self) -> str:
        """``persistent`` and the driver that stands for the target (its release's)."""
        return f"persistent, driver {os.path.basename(self.persistent.driver[0])}"

    def _worker_state(self, index: int) -> _Worker:
        runner = PersistentRunner(self.persistent, self.env, settle=self.settle, judge=self.judge)
        return _Worker(runner, f"worker-{index}", self.stats)

    def _one(self, program: Program) -> Result:
        worker: _Worker = self._state()
        runner = worker.runner
        before = (runner.stats.programs, runner.stats.starts + runner.stats.workers,
                  runner.stats.confirmations)
        verdict = runner.run_judged(program.text)
        stats = runner.stats
        executions = stats.programs - before[0]
        if not self.persistent.fork_server:
            executions += stats.confirmations - before[2]  # fresh processes of the process target
        self._count(stats.starts + stats.workers - before[1]
                    + (0 if self.persistent.fork_server else stats.confirmations - before[2]))
        if verdict.persistent_only:
            return Result(program, verdict.outcome, verdict, executions, runner.evidence(), runner.last_fresh)
        return Result(program, verdict.outcome, verdict, executions)

    def worker_stats(self):
        """Each worker's :class:`harness.run.persistent_stats.PersistentStats`."""
        return [(state.name, state.runner.stats) for state in self._states]


class BatchRunner(Runner):  # run_one: a batch of one, i.e. one process
    """Batches through ``--split-input-file`` (:func:`harness.run.batch.run_batch`).

    Each worker thread runs one batch at a time; the batch size adapts
    (:class:`harness.run.batch.BatchSizer`).  With ``fallback`` (the
    persistent form of the target), a batch that cannot be read with
    confidence (a crash, a hang, a finding in it) is run program by program
    through that worker's driver instead of being bisected down to single
    processes: a crash-heavy run keeps its speed.
    """

    kind = "batch"

    def __init__(self, target: Target, *, judge: Judge = judge, jobs: int = 1,
                 batch_size: int | None = None, fallback: PersistentTarget | None = None) -> None:
        super().__init__(target, judge=judge, jobs=jobs)
        self.sizer = BatchSizer(target.timeout, batch_size)
        self.sizer.cap_by_findings = fallback is None
        self.fallback = fallback

    def _worker_state(self, index: int):
        if self.fallback is None:
            return None
        runner = PersistentRunner(self.fallback, judge=self.judge)
        return _Worker(runner, f"worker-{index}", self.stats)

    def run(self, programs: Iterable[Program]) -> Iterator[Result]:
        window: collections.deque[Future] = collections.deque()
        iterator = iter(programs)
        while True:
            batch = list(itertools.islice(iterator, self.sizer.size))
            if batch:
                window.append(self._pool.submit(self._batch, batch))
            while window and (len(window) > self.jobs or not batch):
                for result in window.popleft().result():
                    with self._lock:
                        self.stats.programs += 1
                        self.stats.executions += result.executions
                    yield result
            if not batch and not window:
                return

    def _one(self, program: Program) -> Result:
        return self._batch([program])[0]

    def _batch(self, batch: list[Program]) -> list[Result]:
        worker: _Worker | None = self._state()
        texts = [p.text for p in batch]
        fallback = None
        evidence: dict[int, PersistentEvidence] = {}
        if worker is not None:
            def fallback(indices: list[int]) -> list[tuple[ProgramResult, int]]:
                results = []
                for k in indices:
                    results.append(self._through_driver(worker.runner, texts[k]))
                    if results[-1][0].verdict.persistent_only:
                        evidence[k] = worker.runner.evidence()
                return results
        report = run_batch(self.target, texts, self.sizer.batch_timeout, judge=self.judge,
                           fallback=fallback)
        with self._lock:
            self.sizer.record(report, len(batch))
            self.stats.processes += report.processes
        return [Result(p, r.outcome, r.verdict, n, evidence.get(k))
                for k, (p, r, n) in enumerate(zip(batch, report.results, report.executions))]

    def _through_driver(self, runner: PersistentRunner, text: str) -> tuple[ProgramResult, int]:
        before = runner.stats.programs, runner.stats.starts + runner.stats.workers
        verdict = runner.run_judged(text)
        self._count(runner.stats.starts + runner.stats.workers - before[1])
        return ProgramResult(verdict.outcome, verdict, alone=True), runner.stats.programs - before[0]


# ------------------------------------------------------------------ choosing


class DriverMismatch(DriverError):
    """The persistent driver is another build than the target (one line: both releases)."""


def driver_mismatch(target: Target) -> str | None:
    """Why the target's persistent driver cannot stand for the build the user named, or
    None when it can (or when there is no driver: :func:`persistent_for` says so).  The
    driver must be the target's release (the persistent path of ``mlir-opt-19`` is the
    driver linked with MLIR 19, never the one linked with 22) and must honour every
    flag of the target's command line."""
    driver = find_driver(target.name, target.build)
    if driver is None or target.build is None:
        return None
    try:
        mine = identify(driver)
    except IdentityError as error:
        return f"the persistent driver cannot be asked its version ({error})"
    if mine.version != target.build.version:
        return (f"the persistent driver {driver} is LLVM {mine.version}, the target "
                f"{target.build.binary} is LLVM {target.build.version}")
    binaries = stands_for(driver)
    if binaries is not None and target.build.binary not in binaries:
        # the same --version is not the same build: a wrapper, a patched build, a test double
        own = binaries[0] if binaries else f"no installed mlir-opt-{mine.version.split('.')[0]}"
        return (f"the persistent driver {driver} stands for {own}, not the target "
                f"{target.build.binary} (which says LLVM {target.build.version} too)")
    pipelines = [arg.split("=", 1)[1] for arg in target.argv[1:] if arg.startswith("--pass-pipeline=")]
    missing = [name for pipeline in pipelines for name in pipeline_passes(pipeline) if name not in mine.passes]
    if missing:  # mlir-opt's test passes (test-loop-unrolling) are not in libMLIR
        return f"the persistent driver {driver} registers no pass named {missing[0]} (the target does)"
    if os.path.basename(driver) in HEAD_DRIVER_NAMES:
        flag = head_driver.unsupported(target.argv[1:])
        if flag:
            return f"the development head's persistent driver does not take {flag}"
    return None


def default_runner_kind(target: Target) -> str:
    """The fastest runner that runs exactly the target's build: persistent where its driver
    is built (mlir-opt: native/build; loom-opt: $LOOMFUZZ_LOOM_DRIVER) for the target's
    release, else batch."""
    if target.name not in ("mlir-opt", "loom-opt"):
        return "batch"
    try:
        return "persistent" if find_driver(target.name, target.build) and driver_mismatch(target) is None else "batch"
    except DriverError:
        return "batch"


def persistent_for(target: Target, restart_every: int | None = None) -> PersistentTarget:
    """The fork-server driver for ``target``; raises ``DriverError`` (one line), and
    :class:`DriverMismatch` when the driver is another release than the target."""
    if target.name == "loom-opt" and find_driver("loom-opt") is None:
        raise DriverError(LOOM_DRIVER_MISSING)
    mismatch = driver_mismatch(target)
    if mismatch:
        raise DriverMismatch(mismatch)
    kwargs = {"restart_every": restart_every} if restart_every else {}
    return persistent_target(target, **kwargs)


def make_runner(kind: str | None, target: Target, *, jobs: int = 1, judge: Judge = judge,
                batch_size: int | None = None, restart_every: int | None = None,
                env=None, settle: bool = False) -> Runner:
    """The runner ``kind`` (None: :func:`default_runner_kind`) for ``target``.
    Raises ``DriverError`` when ``persistent`` is asked for and there is no driver."""
    kind = kind or default_runner_kind(target)
    note = None
    if kind == "process":
        return ProcessRunner(target, judge=judge, jobs=jobs)
    if kind == "persistent":
        try:
            return PersistentPool(target, persistent_for(target, restart_every), judge=judge, jobs=jobs,
                                  env=env, settle=settle)
        except DriverMismatch as mismatch:
            # never another build in the target's place: the target itself, in batches
            kind, note = "batch", f"--runner persistent: {mismatch}; running --runner batch with the target itself"
    if kind == "batch":
        fallback = None
        if batch_size != 1 and default_runner_kind(target) == "persistent":
            fallback = persistent_for(target, restart_every)
        runner = BatchRunner(target, judge=judge, jobs=jobs, batch_size=batch_size, fallback=fallback)
        runner.note = note
        return runner
    raise ValueError(f"runner must be one of {', '.join(RUNNER_KINDS)}, not {kind!r}")
