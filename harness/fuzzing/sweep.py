"""Sweeps: run every program of an indexed source once, resumably.

:func:`run_sweep` takes ``count`` programs from ``program_at(index)`` (indices
``start .. start + count - 1``, or one shard of them), runs them through a
runner (:mod:`harness.run.runners`: each program gets the outcome it would
get alone), writes every finding into the artifacts folder the way
``fuzz`` does (``crash-<sha1 of the program text>.mlir`` and ``.json``, for
every kind of finding), and keeps a journal there
(:mod:`harness.fuzzing.journal`) so that a sweep killed at any point, even by
SIGKILL, and started again with the same arguments runs each remaining
program once and reports the whole range.

Shards: ``K/N`` is the K-th of N contiguous, disjoint parts of the range
(together exactly the range); ``auto/N`` takes K from ``JOB_COMPLETION_INDEX``
(Kubernetes Indexed Job) or ``SLURM_ARRAY_TASK_ID`` (Slurm job array, 0-based:
``--array=0-(N-1)``).  ``program_at`` is called from one thread, with
increasing indices.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from harness.fuzzing.journal import SweepJournal
from harness.run.runners import Program, Result, Runner

__all__ = [
    "SHARD_ENVIRONMENT",
    "Shard",
    "ShardError",
    "SweepResult",
    "finding_name",
    "format_summary",
    "parse_shard",
    "run_sweep",
]

#: Programs per journal line.
JOURNAL_EVERY = 256
#: ... and at least this often (seconds).
JOURNAL_SECONDS = 2.0

#: Where ``--shard auto/N`` finds K, first set wins.
SHARD_ENVIRONMENT = ("JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID")


class ShardError(ValueError):
    """A ``--shard`` value that cannot be used (one line for the user)."""


@dataclass(frozen=True)
class Shard:
    index: int  # K, 0-based
    count: int  # N

    def part(self, start: int, count: int) -> range:
        """This shard's indices of ``start .. start + count - 1``."""
        lo = start + self.index * count // self.count
        hi = start + (self.index + 1) * count // self.count
        return range(lo, hi)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, environ: Mapping[str, str] | None = None) -> Shard:
    """``K/N`` (0 <= K < N) or ``auto/N`` (K from the environment, see module doc)."""
    environ = os.environ if environ is None else environ
    k_text, slash, n_text = text.partition("/")
    if not slash:
        raise ShardError(f"--shard {text}: expected K/N or auto/N, e.g. 0/8")
    try:
        n = int(n_text)
    except ValueError:
        raise ShardError(f"--shard {text}: N must be a whole number, not {n_text!r}") from None
    if n < 1:
        raise ShardError(f"--shard {text}: N must be 1 or more")
    if k_text == "auto":
        name = next((v for v in SHARD_ENVIRONMENT if environ.get(v, "").strip()), None)
        if name is None:
            raise ShardError(f"--shard {text}: neither JOB_COMPLETION_INDEX (Kubernetes Indexed Job) "
                             "nor SLURM_ARRAY_TASK_ID (Slurm job array) is set")
        k_text, where = environ[name].strip(), f" (from {name})"
    else:
        where = ""
    try:
        k = int(k_text)
    except ValueError:
        raise ShardError(f"--shard {text}: K{where} must be a whole number, not {k_text!r}") from None
    if not 0 <= k < n:
        raise ShardError(f"--shard {text}: K{where} is {k}, must be from 0 to {n - 1}")
    return Shard(k, n)


def finding_name(text: str) -> str:
    """``crash-<sha1 of the program text>``, whatever the finding's kind (as ``fuzz``)."""
    return "crash-" + hashlib.sha1(text.encode("utf-8")).hexdigest()


@dataclass
class SweepResult:
    first: int  # the range swept: first .. end - 1
    end: int
    journal: Path
    artifacts: Path
    shard: Shard | None
    suffix: str  # the findings' program files' (harness.contract.program_suffix)
    run_now: int = 0  # programs run by this call
    resumed: int = 0  # programs already done before it
    outcomes: Counter = field(default_factory=Counter)  # the whole range: outcome kind -> programs
    findings: list[dict] = field(default_factory=list)  # the whole range, by index
    processes: int = 0  # target processes this call started
    seconds: float = 0.0  # this call's wall time
    runner: str = "batch"
    jobs: int = 1
    executions: int = 0  # programs sent to the target by this call, confirmations included
    restarts: str | None = None  # driver restarts: total (reasons; per worker)
    executors: str | None = None  # the differential judge's executors (Runner.executor_summary)
    batch_size: int = 0  # the last batch size used (batch runner)
    automatic: bool = True
    interrupted: bool = False
    warning: str | None = None
    target: str = ""  # the build under test, one line (Target.describe)

    @property
    def programs(self) -> int:
        return self.end - self.first

    @property
    def complete(self) -> bool:
        return sum(self.outcomes.values()) == self.programs

    @property
    def programs_per_second(self) -> float:
        return self.run_now / self.seconds if self.seconds > 0 else 0.0


def run_sweep(
    count: int,
    program_at: Callable[[int], str],
    runner: Runner,
    artifacts: Path | str,
    *,
    source: str,
    suffix: str,
    start: int = 0,
    shard: Shard | None = None,
    progress: bool = True,
    origin_of: Callable[[int], str] | None = None,
    label: str = "sweep",
    journal_every: int = JOURNAL_EVERY,
) -> SweepResult:
    """Run programs ``start .. start + count - 1`` (or ``shard``'s part of them)
    through ``runner`` (:mod:`harness.run.runners`: process, batch or persistent,
    its own ``jobs``).

    ``source`` names the program source for the journal (the same source,
    range and target resume the same journal: pass everything that changes
    which text an index stands for, e.g. ``"enumerate profile=default
    render=canonical"``).  Results are journaled every ``journal_every``
    programs (batch by batch for a batch runner), and at least every
    ``JOURNAL_SECONDS``.  Findings' programs are written as ``NAME<suffix>``.
    ``origin_of(index)`` is recorded with each finding (e.g. the
    file it came from).  Raises ``JournalError`` and the runner's
    ``TargetNotFound``; Ctrl-C stops after the results under way are
    journaled (``interrupted``).
    """
    target = runner.target
    artifacts = Path(artifacts)
    artifacts.mkdir(parents=True, exist_ok=True)
    part = shard.part(start, count) if shard else range(start, start + count)
    identity = {"source": source, "range": [part.start, part.stop], "target": target.to_json()}
    journal = SweepJournal.open(artifacts, identity)
    result = SweepResult(part.start, part.stop, journal.path, artifacts, shard, suffix, runner=runner.describe(),
                         jobs=runner.jobs, target=target.describe())
    result.resumed = journal.done_count
    began = time.monotonic()

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(part), initial=result.resumed, unit="prog", desc=label,
                   file=sys.stderr, dynamic_ncols=True, smoothing=0.1)

    sizer = getattr(runner, "sizer", None)
    pending: list[Result] = []
    marks = {"processes": 0, "time": time.monotonic()}

    def flush() -> None:
        if not pending:
            return
        # The batch leaves `pending` before it is journaled: a stop signal raised anywhere
        # in here (Interrupted, between any two statements) makes the handler's flush() find
        # nothing, so a batch is journaled at most once (at worst not at all, and run again
        # on resuming).  Taken after journal.record, a second flush wrote the same range
        # twice, and the journal refused to resume.
        batch = pending.copy()
        pending.clear()
        lo, hi = batch[0].program.key, batch[-1].program.key + 1
        outcomes: Counter = Counter()
        findings = []
        for r in batch:
            index, text = r.program.key, r.program.text
            outcomes[r.outcome.kind.value] += 1
            if r.verdict.finding:
                name = finding_name(text)
                r.write_finding(artifacts, name, target, suffix=suffix)
                record = {"index": index, "name": name, "kind": r.verdict.kind,
                          "outcome": r.outcome.kind.value, "why": r.verdict.why}
                if origin_of is not None:
                    record["origin"] = origin_of(index)
                findings.append(record)
        now = time.monotonic()
        processes = runner.stats.processes
        journal.record(lo, hi, outcomes, findings, processes - marks["processes"], now - marks["time"])
        marks.update(processes=processes, time=now)
        result.run_now += hi - lo
        if bar is not None:
            bar.update(hi - lo)
            bar.set_postfix(findings=len(journal.findings), refresh=False)

    def programs():
        for lo, hi in journal.remaining(part.start, part.stop):
            for index in range(lo, hi):
                yield Program(index, program_at(index))

    try:
        for r in runner.run(programs()):
            if pending and r.program.key != pending[-1].program.key + 1:
                flush()  # a gap: journal ranges are contiguous
            pending.append(r)
            # a batch runner journals batch by batch, as it runs them
            unit = sizer.size if sizer is not None else journal_every
            if len(pending) >= unit or time.monotonic() - marks["time"] > JOURNAL_SECONDS:
                flush()
        flush()
    except KeyboardInterrupt:
        result.interrupted = True
        flush()
    finally:
        if bar is not None:
            bar.close()
    result.seconds = time.monotonic() - began
    result.outcomes = Counter(journal.outcomes)
    result.findings = sorted(journal.findings, key=lambda f: f["index"])
    result.processes = runner.stats.processes
    result.executions = runner.stats.executions
    result.restarts = runner.stats.describe_restarts() if runner.kind != "process" else None
    result.executors = runner.executor_summary()
    if sizer is not None:
        result.batch_size = sizer.size
        result.automatic = sizer.fixed is None
        result.warning = sizer.warning
    return result


# ------------------------------------------------------------------ summary


def format_summary(result: SweepResult, command: str = "sweep", shown: int = 20) -> str:
    """The table printed at the end of a sweep: outcomes and findings of the whole range."""
    lines = [f"loomfuzz {command}: summary"]
    if result.target:
        lines.append(f"  target:     {result.target}")
    where = f"indices {result.first}-{result.end - 1}" if result.programs else "no indices"
    if result.shard:
        where += f", shard {result.shard}"
    lines.append(f"  programs:   {result.programs:,} ({where}); {result.run_now:,} run now, "
                 f"{result.resumed:,} done before (journal {result.journal})")
    how = f"runner {result.runner}, {result.jobs} job{'s' if result.jobs != 1 else ''}"
    if result.runner.startswith("batch"):
        how += f", batch size {result.batch_size}" + (", automatic" if result.automatic else "")
    lines.append(f"  runs:       {result.executions:,} executions in {result.processes:,} processes for "
                 f"{result.run_now:,} programs ({how}); "
                 f"{result.programs_per_second:,.1f} programs/s over {result.seconds:.1f} s")
    if result.restarts is not None:
        lines.append(f"  restarts:   {result.restarts}")
    if result.executors:
        lines.append(f"  executors:  {result.executors}")
    if result.interrupted:
        lines.append(f"  interrupted: {result.programs - sum(result.outcomes.values()):,} programs "
                     "not run yet; the same command resumes")
    if result.warning:
        lines.append(f"  warning:    {result.warning}")
    total = sum(result.outcomes.values()) or 1
    lines.append(f"  {'outcome':<10}  {'programs':>10}  {'share':>6}")
    for kind in ("accepted", "rejected", "crash", "timeout", "oom"):
        n = result.outcomes.get(kind, 0)
        if n or kind in ("accepted", "rejected"):
            lines.append(f"  {kind:<10}  {n:>10,}  {100 * n / total:>5.1f}%")
    if not result.findings:
        lines.append("  findings:   none")
        return "\n".join(lines)
    kinds = Counter(f["kind"] for f in result.findings)
    lines.append(f"  findings:   {len(result.findings):,} in {result.artifacts} ("
                 + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")")
    lines.append(f"  {'index':>10}  {'finding':<21}  {'file':<46}  why")
    for f in result.findings[:shown]:
        lines.append(f"  {f['index']:>10}  {f['kind']:<21}  {f['name'] + result.suffix:<46}  {f['why'][:100]}")
    if len(result.findings) > shown:
        lines.append(f"  ... and {len(result.findings) - shown:,} more (the journal lists them all)")
    return "\n".join(lines)
