"""The summary ``loomfuzz fuzz`` prints at the end, and the figures behind it.

:class:`CampaignResult` gathers what the campaign measured: libFuzzer's
exit status, the corpus before and after, the findings
(:mod:`harness.fuzzing.findings`), and the workers' totals, which come from
their summary records (:mod:`harness.fuzzing.worker_summary`) summed by
:func:`worker_totals`.  :func:`format_summary` is the text.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from harness.fuzzing.findings import finding_kind, finding_reason, reason_key
from harness.fuzzing.options import FuzzOptions, OracleKind, RunnerKind
from harness.fuzzing.worker_summary import WorkerSummary

__all__ = ["CampaignResult", "WorkerTotals", "corpus_grammar_coverage", "format_summary",
           "worker_totals"]


@dataclass(frozen=True)
class WorkerTotals:
    """The workers' summary records, summed (None: no worker reported the figure)."""

    executions: Optional[int]
    seconds: Optional[float]  # the one worker's own time (None with several)
    edges: Optional[int]  # the most any worker saw
    in_target: Optional[float]
    restarts: Optional[int]
    restart_reasons: str  # "crash: 3, timeout: 1"


def worker_totals(records: Sequence[WorkerSummary]) -> WorkerTotals:
    def known(values):
        return [v for v in values if v is not None]

    edges = known(r.edges for r in records)
    in_target = known(r.in_target for r in records)
    restarts = known(r.restarts for r in records)
    reasons: dict[str, int] = {}
    for record in records:
        for reason, count in record.restart_reasons.items():
            reasons[reason] = reasons.get(reason, 0) + count
    return WorkerTotals(
        executions=sum(r.executions for r in records) if records else None,
        seconds=records[0].seconds if len(records) == 1 else None,
        edges=max(edges) if edges else None,
        in_target=sum(in_target) if in_target else None,
        restarts=sum(restarts) if restarts else None,
        restart_reasons=", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())),
    )


@dataclass
class CampaignResult:
    returncode: int  # of the fuzz target process
    executions: Optional[int]
    seconds: float  # wall clock of the whole run
    rate_seconds: Optional[float]  # the time the executions took, when known
    corpus_before: int
    corpus_after: int
    findings: dict[str, list[dict]]  # kind -> sidecar records
    orphans: list[str]  # crash files without a sidecar (errors of the harness itself)
    interrupted: bool = False
    edges: Optional[int] = None  # distinct AFL++ edges seen, with --coverage afl
    in_target: Optional[float] = None  # seconds inside the runs (summed over workers)
    restarts: Optional[int] = None  # persistent drivers restarted (summed over workers)
    restart_reasons: str = ""
    grammar_coverage: Optional[str] = None  # "grammar coverage: k=1 a/b, k=2 c/d" of the corpus after
    stop_signal: Optional[int] = None  # the signal that stopped the campaign, if one did
    deadline: bool = False  # loomfuzz stopped it at --time (libFuzzer had not)
    workers: tuple[WorkerSummary, ...] = ()  # the workers' summary records
    folder: dict[str, dict] = field(default_factory=dict)  # every finding the folder holds at the end
    earlier: frozenset[str] = frozenset()  # the sidecars of findings the folder held before this run
    log: Optional[Path] = None  # where the fuzz target's output went
    tail: tuple[str, ...] = ()  # its last lines (libFuzzer's progress lines left out)

    @property
    def finding_count(self) -> int:
        """This run's findings (found again included)."""
        return sum(len(v) for v in self.findings.values())

    @property
    def new_count(self) -> int:
        """The findings of this run that the folder did not hold before."""
        return sum(1 for name in self.folder if name not in self.earlier)

    @property
    def failed(self) -> bool:
        """The fuzz target failed without a finding, or the harness itself raised."""
        return bool(self.orphans) or (self.returncode != 0 and not self.deadline and not self.interrupted
                                      and not self.finding_count)

    @property
    def exec_per_second(self) -> Optional[float]:
        if self.executions is None:
            return None
        seconds = self.rate_seconds or self.seconds
        return self.executions / seconds if seconds > 0 else None


def corpus_grammar_coverage(options: FuzzOptions) -> Optional[str]:
    """The k-path coverage of the corpus folder (``loomfuzz coverage``'s figure);
    None for ``--self``, whose inputs are not programs of the grammar."""
    if options.self_test or not options.corpus.is_dir():
        return None
    from harness.contract import load_grammar  # the campaign's grammar: break:P<n> too
    from harness.core.compiled import GrammarError
    from harness.fuzzing.grammar_coverage import fuzz_corpus_coverage

    grammar = str(options.grammar) if options.grammar else None
    try:
        return fuzz_corpus_coverage(options.corpus, load_grammar(grammar, options.profile)).summary()
    except GrammarError:
        return None


def _throughput_lines(options: FuzzOptions, result: CampaignResult) -> list[str]:
    """Where the time went: inside the target runs, outside them, restarts."""
    lines = []
    over = result.rate_seconds or result.seconds
    if result.in_target is not None and options.jobs == 1 and over > 0:
        outside = max(0.0, over - result.in_target)
        lines.append(f"  time:        {result.in_target:.1f} s in the target, {outside:.1f} s outside "
                     f"({100 * outside / over:.0f}%: mutation, decoding, rendering, judging, libFuzzer)")
    persistent = options.runner is RunnerKind.PERSISTENT
    if persistent and options.oracle is OracleKind.DIFFERENTIAL:
        lines.append("  executed:    in process (the driver's --exec mode)")
        for worker in result.workers:
            if worker.executors:
                lines.append(f"  executors:   {worker.executors}" +
                             (f" ({worker.worker})" if len(result.workers) > 1 else ""))
    elif persistent and result.restarts is None:
        lines.append("  persistent:  on (driver restarts not reported: no worker summary seen)")
    elif persistent:
        reasons = f" ({result.restart_reasons})" if result.restart_reasons else ""
        lines.append(f"  persistent:  {result.restarts} driver restarts{reasons}")
    return lines


#: Reasons listed under the findings line; the rest are counted in one line.
SHOWN_REASONS = 8


def _finding_lines(options: FuzzOptions, result: CampaignResult) -> list[str]:
    """The folder's findings (what triage will read), by kind and by reason, and how many this run added."""
    folder = result.folder
    if not folder:
        return ["  findings:    none"]
    kinds: dict[str, int] = {}
    reasons: dict[str, list] = {}  # reason key -> [count, the first record's reason]
    for record in folder.values():
        kind = finding_kind(record)
        kinds[kind] = kinds.get(kind, 0) + 1
        entry = reasons.setdefault(reason_key(record), [0, finding_reason(record)])
        entry[0] += 1
    by_kind = ", ".join(f"{kind}: {n}" for kind, n in sorted(kinds.items()))
    earlier = len(folder) - result.new_count
    found = f"{result.new_count} new in this run" if result.new_count else "none new in this run"
    if earlier:
        found += f", {earlier} from earlier runs"
    again = sum(1 for records in result.findings.values() for r in records if f"{r.get('name')}.json" in result.earlier)
    if again:
        found += f" ({again} of them found again)"
    lines = [f"  findings:    {len(folder)} ({by_kind}) in {options.artifacts}: {found}"]
    ordered = sorted(reasons.values(), key=lambda entry: (-entry[0], entry[1]))
    for count, reason in ordered[:SHOWN_REASONS]:
        lines.append(f"               {count:>4} x {reason}")
    if len(ordered) > SHOWN_REASONS:
        rest = sum(count for count, _ in ordered[SHOWN_REASONS:])
        lines.append(f"               {rest:>4} x {len(ordered) - SHOWN_REASONS} other reasons")
    return lines


def _stop_lines(options: FuzzOptions, result: CampaignResult, resume: Optional[str]) -> list[str]:
    """Why the campaign ended, and the command that continues it."""
    if result.interrupted:
        name = signal.Signals(result.stop_signal).name if result.stop_signal else "an interrupt"
        how = f"by {name}" + (" (Ctrl-C)" if name == "SIGINT" else "") + f" after {result.seconds:.0f} s"
    elif result.deadline:
        how = (f"at --time {options.time} by loomfuzz (libFuzzer reads its limit only between rounds "
               "of mutations)")
    elif options.time is not None and result.seconds >= options.time - 1:
        how = f"at --time {options.time}"  # libFuzzer's own end (in fork mode its status is a job's)
    elif options.runs is not None and (result.executions or 0) >= options.runs:
        how = f"after --runs {options.runs}"
    elif result.finding_count and options.jobs == 1:
        how = "at its first finding (one process stops there, libFuzzer's way; --jobs N keeps going)"
    else:
        return []
    lines = [f"  stopped:     {how}"]
    if resume and not result.failed:
        lines.append(f"  resume:      the same command continues it (in {os.getcwd()}): {resume}")
    return lines


def format_summary(options: FuzzOptions, result: CampaignResult, resume: Optional[str] = None) -> str:
    """The summary printed at the end of ``loomfuzz fuzz``; ``resume`` is the command that
    continues the campaign (named when it stopped before its end: a signal, --time, --runs)."""
    lines = ["loomfuzz fuzz: summary"]
    if options.build:  # the build, and the family it was judged as and why
        lines.append(f"  target:      {options.build}")
    if result.executions is None:
        lines.append(f"  executions:  unknown (the run took {result.seconds:.1f} s)")
    else:
        rate = result.exec_per_second
        over = result.rate_seconds or result.seconds
        # with several workers the time in the target is all workers' sum: one figure, on this line
        # (a campaign's screen stays short: issue 46)
        in_target = (f"; {result.in_target:.1f} s in the target, all workers"
                     if result.in_target is not None and options.jobs > 1 else "")
        lines.append(f"  executions:  {result.executions} ({rate:.1f}/s over {over:.1f} s{in_target})"
                     if rate is not None else f"  executions:  {result.executions}")
    lines.extend(_throughput_lines(options, result))
    lines.append(f"  corpus:      {result.corpus_before} -> {result.corpus_after} files in {options.corpus}")
    if result.grammar_coverage is not None:
        lines.append(f"  {result.grammar_coverage}")
    if result.edges is not None:
        per_worker = " (the most any worker saw)" if options.jobs > 1 else ""
        lines.append(f"  coverage:    {result.edges} distinct AFL++ edges seen{per_worker}")
    lines.extend(_finding_lines(options, result))
    if result.orphans:
        lines.append(
            f"  harness errors: {len(result.orphans)} crash file(s) without a sidecar "
            f"(an exception in loom-fuzz itself? see {result.log or 'the output'}): "
            f"{', '.join(result.orphans[:5])}"
        )
    lines.extend(_stop_lines(options, result, resume))
    return "\n".join(lines)
