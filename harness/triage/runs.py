"""How triage runs the target: every target run of triage goes through one
:class:`TriageRunner`, which counts them.

Two entry points, so that another way of running the target can replace this
module's body without touching the pipeline:

* :meth:`TriageRunner.first_runs` runs many *different* programs once each
  (the first run of every input).  It uses the batch runner
  (:func:`harness.run.batch.run_batch`, ``--split-input-file``) sized by a
  :class:`harness.run.batch.BatchSizer`: programs that are no finding share a
  process, every finding is re-run alone (so its outcome and stderr are those
  of a run of its own), and a target that does not batch falls back to one
  process per program by itself.  The sizer starts small (:data:`FIRST_BATCH`)
  because triage's inputs are mostly crashes, and a batch that crashes is
  bisected.
* :meth:`TriageRunner.outcomes` runs one program ``k`` times (the repeats of
  reproduction, minimization's candidates and the verification of its result);
  with ``fresh=True`` (a finding's symptom profile and the evidence runs of a
  minimized program), each run is a process of its own, whatever the runner:
  the workers a fork server makes share its address layout and heap, so a
  memory-corrupting bug shows them all the same symptom (checked with
  mlir-opt-19's remove-dead-values: a program that gave one SIGSEGV on 5 of 5
  driver runs gave ``LLVM ERROR: SmallVector unable to grow`` on 11 of 20
  runs of the tool).

``kind`` (``--runner``; None: :func:`harness.run.runners.default_runner_kind`,
the rule of ``run`` and ``fuzz``: persistent where the target's driver is
built, else batch) chooses how:

* ``persistent``: both entry points through one
  :class:`harness.run.runners.PersistentPool`, each calling thread (a triage
  job) with its own fork-server driver: a program that crashes costs a fork,
  not a process start, and every finding is confirmed as the first program
  of a fresh worker, so its outcome and stack are those of a run of its own.
  A finding that the fresh worker does not confirm (state carried over from
  the programs before it: ``persistent_only``) counts as the fresh worker's
  run, which is what a process of its own gives;
* ``batch``: first runs batched as above; :meth:`outcomes` through the
  driver too where the target has one, else one process each (a crash ends
  a process, so repeating a crashing program in one process is not possible);
* ``process``: one process per run.

``runs`` counts target runs: one per program executed alone, and one per
program in a batch whose results were used (a batch that had to be bisected
counts its programs again when they run in the halves).  ``processes`` counts
target processes started.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Sequence

from harness.run.batch import BatchSizer, run_batch
from harness.run.judge import judge
from harness.run.outcome import Outcome, Verdict
from harness.run.process import run_program
from harness.targets.target import Target
from harness.oracles.choice import OracleChoice, oracle_runner
from harness.run.runners import Program, Runner, default_runner_kind
from harness.triage.signature import Signature, signature_of

__all__ = ["FIRST_BATCH", "Run", "TriageRunner"]

#: Programs in the first batch of :meth:`TriageRunner.first_runs` (the sizer adapts from there).
FIRST_BATCH = 4


@dataclass(frozen=True)
class Run:
    """One run of a program: its outcome and its signature (None: no finding)."""

    outcome: Outcome
    signature: Signature | None
    kind: str  # the finding kind, or the outcome kind when no finding
    why: str


@dataclass
class TriageRunner:
    target: Target
    batch: bool = True  # first_runs may share processes (when the target batches)
    kind: str | None = None  # --runner (harness.run.runners); None: the target's default
    runs: int = 0
    processes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _sizer: BatchSizer | None = field(default=None, repr=False)
    _persistent: Runner | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.kind = self.kind or default_runner_kind(self.target)
        if self.kind == "process":
            self.batch = False
        elif self.kind == "persistent" or default_runner_kind(self.target) == "persistent":
            self._persistent = oracle_runner(self.target, OracleChoice(runner="persistent"))

    def close(self) -> None:
        """Stop the drivers (each triage job's)."""
        if self._persistent is not None:
            self._persistent.close()

    def _through_driver(self, text: str) -> Run:
        before = self._persistent.stats.processes
        result = self._persistent.run_one(Program("triage", text))
        self._count(result.executions, self._persistent.stats.processes - before)
        if result.verdict.persistent_only:
            # the fresh worker did not confirm it: its run is what the program does alone
            return self._run(result.fresh.outcome, result.fresh)
        return self._run(result.outcome, result.verdict)

    def _count(self, runs: int, processes: int) -> None:
        with self._lock:
            self.runs += runs
            self.processes += processes

    @staticmethod
    def _run(outcome: Outcome, verdict: Verdict) -> Run:
        return Run(outcome, signature_of(verdict), verdict.kind or outcome.kind.value, verdict.why)

    def outcomes(self, text: str, k: int = 1, *, fresh: bool = False) -> list[Run]:
        """Run ``text`` ``k`` times: through the driver where there is one (unless ``fresh``),
        else one process each (a new address layout each run: see the module docstring)."""
        if self._persistent is not None and not fresh:
            return [self._through_driver(text) for _ in range(k)]
        result = []
        for _ in range(k):
            outcome = run_program(self.target, text)
            result.append(self._run(outcome, judge(self.target, text, outcome)))
            self._count(1, 1)
        return result

    def first_runs(self, texts: Sequence[str]) -> list[Run]:
        """One run of each of ``texts`` (in their order), batched where the target allows."""
        if self.kind == "persistent":
            return [self._through_driver(text) for text in texts]
        if not self.batch or len(texts) < 2:
            return [self.outcomes(text)[0] for text in texts]
        with self._lock:  # one sizer learns from every thread's batches
            if self._sizer is None:
                self._sizer = BatchSizer(self.target.timeout)
                self._sizer.size = FIRST_BATCH
            sizer = self._sizer
        results: list[Run] = []
        position = 0
        while position < len(texts):
            with self._lock:
                size, limit = sizer.size, sizer.batch_timeout
            chunk = list(texts[position:position + size])
            report = run_batch(self.target, chunk, limit)
            with self._lock:
                sizer.record(report, len(chunk))
            # programs in a clean batch ran once each; the others ran alone
            self._count(report.clean_programs + report.alone, report.processes)
            results.extend(self._run(result.outcome, result.verdict) for result in report.results)
            position += len(chunk)
        return results
