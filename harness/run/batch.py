"""Batched runs: many programs through one target process, each judged as if alone.

MLIR drivers (``mlir-opt``, ``loom-raise-opt``) read several modules in one
process with ``--split-input-file``: the input is cut at ``// -----`` lines,
every chunk is parsed and run on its own, the outputs of the chunks are
joined by ``// -----`` lines on stdout (a failed chunk prints nothing), the
diagnostics carry the line numbers of the whole input
(``<stdin>:LINE:COL: error: ...``), and the process exits 1 when any chunk
failed.  One process costs about 40 ms of start-up, so a batch of 100
programs is an order of magnitude cheaper than 100 processes.

:func:`run_batch` gives each program exactly the ``Outcome``/``Verdict`` it
would get alone, and gets them from a run of that program alone whenever
there is any doubt:

* The batch's own run must be clean: accepted or rejected (no crash,
  timeout, oom; the batch runs under at most the target's own ``timeout``,
  so a batch that finished also finished every program inside the time one
  program gets), stdout cut into exactly one piece per program, every stderr line
  belonging to a diagnostic located in one program's lines, and exit status 1
  exactly when some program has an ``error:``.  Otherwise the batch is
  **bisected**: each half runs as a batch again, down to single programs,
  which run alone (without ``--split-input-file``).  So a crash, a hang or an
  out-of-memory is always reproduced and recorded by a run of its program
  alone; one crasher in a batch of n costs about 2*log2(n) extra processes.
* Each program's share is then rebuilt as a run of its own: its stdout
  piece, its diagnostics with their lines renumbered from its first line
  (what the tool prints when it reads the program alone), exit 1 when it has
  an ``error:`` else 0, classified by the runner's own :func:`classify` and
  judged by :func:`judge`.  A share that does not look like a complete run
  (an error but output, no error and no output) runs alone.
* **Every finding is re-run alone** and that run is the one kept: the
  finding's outcome, stderr and ``.json`` sidecar are those of a one-program
  run, as ``fuzz`` and ``triage`` make them.

Programs that hold ``// ---`` (where MLIR cuts its input or warns about a
near miss), empty programs and programs without a final newline always run
alone.  The only thing a program's
result takes from its batch is its ``duration``, the batch's wall time
divided by its size.

:class:`BatchSizer` picks the batch size (see its docstring); ``size=1``
means one process per program, without ``--split-input-file``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from harness.run.judge import Judge, judge
from harness.run.outcome import classify, Outcome, OutcomeKind, Verdict
from harness.run.process import run_program
from harness.targets.target import Target

__all__ = [
    "SPLIT_FLAG",
    "SPLIT_MARKER",
    "BatchReport",
    "BatchSizer",
    "ProgramResult",
    "batchable",
    "join_programs",
    "run_alone",
    "run_batch",
]

SPLIT_FLAG = "--split-input-file"
SPLIT_MARKER = "// -----"
#: MLIR cuts its input at "// ---" followed by "--" and warns about other
#: near misses: a program holding it is not one chunk, so it runs alone.
_CUT_PREFIX = "// ---"

_DIAGNOSTIC = re.compile(r"^<stdin>:(\d+):(\d+): (error|warning|note|remark): ")
_LOCATION = re.compile(r"<stdin>:(\d+):(\d+)")


@dataclass(frozen=True)
class ProgramResult:
    outcome: Outcome
    verdict: Verdict
    alone: bool  # True: from a run of this program alone (always so for findings)


@dataclass
class BatchReport:
    """What one :func:`run_batch` call did: results in input order, and its cost."""

    results: list[ProgramResult] = field(default_factory=list)
    processes: int = 0  # target processes started
    clean_batches: int = 0  # runs of 2+ programs whose results were used
    clean_programs: int = 0  # programs in them
    clean_seconds: float = 0.0  # their wall time
    bisections: int = 0  # runs of 2+ programs that had to be split in two
    alone: int = 0  # runs of one program alone
    #: bisections after which no program of the batch was a finding: batching
    #: itself went wrong (a target without --split-input-file, a slow batch)
    needless_bisections: int = 0
    #: per program, in input order: the times it went to the target
    executions: list[int] = field(default_factory=list)
    fallbacks: int = 0  # unclean batches run program by program through the fallback

    @property
    def findings(self) -> int:
        return sum(1 for r in self.results if r.verdict.finding)


def batchable(text: str) -> bool:
    """Whether ``text`` can share a process: not empty, ending with a newline
    (so that its line numbers, end of file included, are the same in a batch),
    and no ``// ---`` in it."""
    return bool(text.strip()) and text.endswith("\n") and _CUT_PREFIX not in text


def join_programs(texts: Sequence[str]) -> tuple[str, list[int]]:
    """The ``--split-input-file`` input for ``texts``, and the line (1-based)
    where each one starts, plus one past the end of the last.

    Program k owns lines ``[starts[k], starts[k + 1])``: its own lines and the
    marker line after it, where MLIR places what it reports at the end of
    the chunk (the line that follows the program when it is read alone).
    """
    parts: list[str] = []
    starts: list[int] = []
    line = 1
    for k, text in enumerate(texts):
        if k:
            parts.append(SPLIT_MARKER + "\n")
        if not text.endswith("\n"):
            text += "\n"
        starts.append(line)
        parts.append(text)
        line += text.count("\n") + 1
    starts.append(line)
    return "".join(parts), starts


#: Runs the programs of the given indices one by one (e.g. through a persistent
#: driver): (result, executions) each.
Fallback = Callable[[list[int]], list[tuple[ProgramResult, int]]]


def run_alone(target: Target, text: str, judge: Judge = judge) -> ProgramResult:
    """One program, one process: exactly what ``fuzz`` and ``triage`` do."""
    outcome = run_program(target, text)
    return ProgramResult(outcome, judge(target, text, outcome), alone=True)


def _batch_target(target: Target) -> Target:
    return dataclasses.replace(target, argv=(*target.argv, SPLIT_FLAG))


_MARKER_LINE = re.compile(r"^// -----(?:\n|\Z)", re.MULTILINE)


def _split_stdout(stdout: str, n: int) -> list[str] | None:
    """The output pieces of ``n`` chunks, or None when they are not ``n``."""
    pieces = _MARKER_LINE.split(stdout)
    return pieces if len(pieces) == n else None


def _chunk_of(line: int, starts: list[int], ends: list[int]) -> int | None:
    lo, hi = 0, len(starts) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if line < starts[mid]:
            hi = mid - 1
        elif line >= ends[mid]:
            lo = mid + 1
        else:
            return mid
    return None


def _split_stderr(stderr: str, starts: list[int], ends: list[int]) -> list[list[str]] | None:
    """Each chunk's stderr lines, or None when a line belongs to no chunk.

    A line ``<stdin>:L:C: error|warning|note|remark: ...`` opens a diagnostic
    of the chunk holding line L; the lines after it (source line, caret,
    continuation) belong to the same diagnostic until the next one opens.
    """
    shares: list[list[str]] = [[] for _ in starts]
    current: int | None = None
    for line in stderr.splitlines():
        m = _DIAGNOSTIC.match(line)
        if m:
            current = _chunk_of(int(m.group(1)), starts, ends)
            if current is None:
                return None
        elif current is None:
            return None  # text before any located diagnostic: whose is it?
        shares[current].append(line)
    return shares


def _is_error(line: str) -> bool:
    m = _DIAGNOSTIC.match(line)
    return bool(m) and m.group(3) == "error"


def _renumber(lines: list[str], start: int, end: int) -> str | None:
    """The chunk's diagnostics with lines counted from its own first line."""
    bad = False

    def shift(m: re.Match) -> str:
        nonlocal bad
        line = int(m.group(1))
        if not start <= line < end:
            bad = True
            return m.group(0)
        return f"<stdin>:{line - start + 1}:{m.group(2)}"

    text = "".join(_LOCATION.sub(shift, line) + "\n" for line in lines)
    return None if bad else text


def _shares(target: Target, texts: Sequence[str], starts: list[int], outcome: Outcome,
            judge: Judge = judge) -> list[ProgramResult | None] | None:
    """Per-program results read off a batch run; None for the whole batch when it
    cannot be read with confidence, None for one program that must run alone."""
    n = len(texts)
    if outcome.kind not in (OutcomeKind.ACCEPTED, OutcomeKind.REJECTED):
        return None
    pieces = _split_stdout(outcome.stdout, n)
    if pieces is None:
        return None
    starts, ends = starts[:-1], starts[1:]
    shares = _split_stderr(outcome.stderr, starts, ends)
    if shares is None:
        return None
    errors = [any(_is_error(line) for line in share) for share in shares]
    if any(errors) != (outcome.returncode == 1):
        return None
    duration = outcome.duration / n
    results: list[ProgramResult | None] = []
    for k, text in enumerate(texts):
        stderr = _renumber(shares[k], starts[k], ends[k])
        # a share must look like a whole run: an error and no module printed,
        # or no error and a module printed
        if stderr is None or errors[k] == bool(pieces[k]):
            results.append(None)
            continue
        kind, status, sig, reason = classify(1 if errors[k] else 0, stderr)
        if kind not in (OutcomeKind.ACCEPTED, OutcomeKind.REJECTED):
            results.append(None)
            continue
        share = Outcome(kind=kind, returncode=status, signal=sig, stdout=pieces[k],
                        stderr=stderr, duration=duration, reason=reason)
        verdict = judge(target, text, share)
        results.append(None if verdict.finding else ProgramResult(share, verdict, alone=False))
    return results


def run_batch(target: Target, texts: Sequence[str],
              batch_timeout: Callable[[int], float] | None = None, *, judge: Judge = judge,
              fallback: Optional[Fallback] = None) -> BatchReport:
    """Run ``texts`` in as few processes as the results allow (see the module doc).

    One text, or texts that cannot share a process, run alone.  The results
    are in the order of ``texts``.  ``batch_timeout(n)`` is the time limit of
    a batch of n programs (capped at ``target.timeout``; default: that
    timeout): a shorter one only makes a hang cost less to find, since a
    batch that times out is bisected and single programs run alone under
    ``target.timeout``.  ``judge`` judges every share and run (default: the
    expectations).  With ``fallback``, a batch that cannot be read is not
    bisected: its programs go to ``fallback`` one by one (a persistent
    driver: a crash-heavy run does not fall apart into single processes).
    """
    report = BatchReport(results=[None] * len(texts))  # type: ignore[list-item]
    report.executions = [0] * len(texts)
    shared = [k for k, t in enumerate(texts) if batchable(t)]
    for k in sorted(set(range(len(texts))) - set(shared)):
        _alone(target, texts, k, report, judge)
    if shared:
        _run_shared(_batch_target(target), target, texts, shared, report, batch_timeout, judge,
                    fallback)
    return report


def _alone(target: Target, texts: Sequence[str], k: int, report: BatchReport, judge: Judge) -> None:
    report.results[k] = run_alone(target, texts[k], judge)
    report.processes += 1
    report.alone += 1
    report.executions[k] += 1


def _run_shared(batch_target: Target, target: Target, texts: Sequence[str],
                indices: list[int], report: BatchReport,
                batch_timeout: Callable[[int], float] | None, judge: Judge,
                fallback: Optional[Fallback]) -> None:
    if len(indices) == 1:
        _alone(target, texts, indices[0], report, judge)
        return
    chunk_texts = [texts[k] for k in indices]
    joined, starts = join_programs(chunk_texts)
    limit = min(target.timeout, batch_timeout(len(indices))) if batch_timeout else target.timeout
    outcome = run_program(dataclasses.replace(batch_target, timeout=limit), joined)
    report.processes += 1
    for k in indices:
        report.executions[k] += 1
    shares = _shares(target, chunk_texts, starts, outcome, judge)
    if shares is None and fallback is not None:
        report.fallbacks += 1
        for k, (result, runs) in zip(indices, fallback(indices)):
            report.results[k] = result
            report.executions[k] += runs
        return
    if shares is None:
        report.bisections += 1
        half = len(indices) // 2
        _run_shared(batch_target, target, texts, indices[:half], report, batch_timeout, judge, None)
        _run_shared(batch_target, target, texts, indices[half:], report, batch_timeout, judge, None)
        if not any(report.results[k].verdict.finding for k in indices):
            report.needless_bisections += 1
        return
    report.clean_batches += 1
    report.clean_programs += len(indices)
    report.clean_seconds += outcome.duration
    for k, share in zip(indices, shares):
        if share is None:
            _alone(target, texts, k, report, judge)
        else:
            report.results[k] = share


class BatchSizer:
    """The number of programs per batch, fixed or automatic, and a batch's time limit.

    Automatic size: start at 16 programs; after each batch, aim for batches
    that take ``TARGET_SECONDS`` (0.5 s, at most a quarter of the target's
    ``timeout``) at the per-program time measured on the clean batches so far
    (a moving average), at most doubling at a time, between 1 and
    ``MAX_SIZE`` (256).  Findings make bisection expensive, so the size is
    also kept to at most ``0.5 / f`` for a finding rate ``f`` per program (a
    moving average): on average one finding in every second batch.  Three
    calls in a row whose batches all had to be bisected without any finding
    mean the target does not batch (no ``--split-input-file``): the size
    drops to 1 for good and :attr:`warning` says why.

    Time limit of a batch of n (:meth:`batch_timeout`): ``SLACK`` (10) times
    its expected time (n times the measured per-program time), at least
    ``MIN_BATCH_TIMEOUT`` (1 s), at most the target's ``timeout`` (which is
    also the limit until a time has been measured).  A hang in a batch then
    costs a few short limits on the way down to the program, which runs
    alone under the full ``timeout``.  Each bisection that found nothing
    (a batch slower than expected, not a bad program) doubles the slack.
    """

    START = 16
    MAX_SIZE = 256
    TARGET_SECONDS = 0.5
    SLACK = 10.0
    MIN_BATCH_TIMEOUT = 1.0
    _ALPHA = 0.3
    _GIVE_UP = 3

    def __init__(self, timeout: float, fixed: int | None = None) -> None:
        if fixed is not None and fixed < 1:
            raise ValueError(f"batch size must be 1 or more, not {fixed}")
        self.fixed = fixed
        self.timeout = timeout
        self.size = fixed or self.START
        self.per_program: float | None = None
        self.finding_rate = 0.0
        self.slack = self.SLACK
        self.warning: str | None = None
        self._fruitless = 0
        #: False when an unclean batch goes to a persistent fallback instead of
        #: being bisected: findings then cost no bisection, the size stays up.
        self.cap_by_findings = True

    def batch_timeout(self, n: int) -> float:
        if self.per_program is None:
            return self.timeout
        return min(self.timeout, max(self.MIN_BATCH_TIMEOUT, self.slack * n * self.per_program))

    def record(self, report: BatchReport, programs: int) -> None:
        if programs == 0:
            return
        if report.clean_programs:
            per = report.clean_seconds / report.clean_programs
            self.per_program = per if self.per_program is None else (
                (1 - self._ALPHA) * self.per_program + self._ALPHA * per)
        if report.needless_bisections:
            self.slack = min(2 * self.slack, 1e6)
        if self.fixed is not None or self.warning:
            return
        self.finding_rate = (1 - self._ALPHA) * self.finding_rate + self._ALPHA * (
            report.findings / programs)
        if report.needless_bisections and not report.clean_batches:
            self._fruitless += 1
            if self._fruitless >= self._GIVE_UP:
                self.size = 1
                self.warning = ("batches of several programs never gave usable results (does the "
                                f"target take {SPLIT_FLAG}?): running one program per process")
                return
        else:
            self._fruitless = 0
        size = self.size
        if self.per_program:
            goal = min(self.TARGET_SECONDS, self.timeout / 4)
            size = min(max(1, int(goal / self.per_program)), 2 * self.size)
        if self.finding_rate > 0 and self.cap_by_findings:
            size = min(size, max(1, int(0.5 / self.finding_rate)))
        self.size = max(1, min(size, self.MAX_SIZE))
