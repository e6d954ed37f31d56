"""``loomfuzz fuzz``: an atheris/libFuzzer campaign around a fuzz target script.

The campaign runs ``fuzz_targets/loom_opt_fuzzer.py`` (or, for ``--self``,
``fuzz_targets/grammar_fuzzer.py``) as a subprocess of the current Python.
Everything the fuzz target and libFuzzer print (progress lines, INFO and
WARNING lines, in fork mode an ``ERROR: libFuzzer: fuzz target exited`` and
the lines with ``ERROR:`` of the job's log for every finding, atheris'
tracebacks) goes to the log file ``ARTIFACTS/fuzz.log`` (:data:`LOG_FILE`,
appended to, one header line per run), named when the campaign starts; only
the fuzz target's own ``error:``/``warning:`` lines also reach the terminal,
and its last lines (:data:`TAIL_LINES`) are kept for a failure's message.  The
terminal gets a status line, the first finding of each reason (once), and the
summary.  The flow is :func:`run_campaign`; each step has a module of its own:

* the options, one :class:`~harness.fuzzing.options.FuzzOptions` written to
  ``ARTIFACTS/fuzz-options.json`` and named on the target's command line
  (:mod:`harness.fuzzing.options`);
* the corpus: seeded when empty, inspected otherwise, counted
  (:mod:`harness.fuzzing.corpus`, called by the command before the campaign);
* libFuzzer's flags, the command line, its status lines
  (:mod:`harness.fuzzing.libfuzzer`);
* the findings: the sidecars the target wrote during this run, by kind
  (:mod:`harness.fuzzing.findings`);
* the time series ``stats.csv`` (:mod:`harness.fuzzing.series`) shown as a
  live status line (:mod:`harness.fuzzing.status`);
* the workers' summary records, ``ARTIFACTS/fuzz-summary.jsonl``
  (:mod:`harness.fuzzing.worker_summary`), and the final summary
  (:mod:`harness.fuzzing.campaign_summary`);
* stopping the whole campaign on SIGINT/SIGTERM/SIGHUP, with nothing of it
  outliving ``loomfuzz`` (:mod:`harness.fuzzing.supervisor`);
* stopping it itself :data:`DEADLINE_SLACK` seconds after ``--time`` when
  libFuzzer has not: libFuzzer reads ``-max_total_time`` only in its main
  loop, after it has run every seed, and then between rounds of up to five
  mutations; a slow oracle (``--oracle differential``, a few programs per
  second) takes minutes over a seeded corpus and seconds over a round.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Optional, TextIO

from harness.fuzzing.campaign_summary import CampaignResult, corpus_grammar_coverage, worker_totals
from harness.fuzzing.corpus import count_files
from harness.fuzzing.findings import (
    FindingCounter,
    collect_findings,
    crash_files,
    finding_reason,
    folder_findings,
    reason_key,
    sidecars,
)
from harness.fuzzing.libfuzzer import LIBFUZZER_INTERRUPTED, LibFuzzerProgress, build_command, child_env
from harness.fuzzing.options import OPTIONS_FILE, FuzzOptions, write_options
from harness.fuzzing.supervisor import Supervisor
from harness.fuzzing.worker_summary import read_summaries
from harness.run.atomic import remove_partials

__all__ = ["DEADLINE_SLACK", "LOG_FILE", "TAIL_LINES", "run_campaign"]

#: The campaign's log in its artifacts folder: what libFuzzer and the workers print.
LOG_FILE = "fuzz.log"
#: Lines of the fuzz target's output kept for the message of a failed campaign.
TAIL_LINES = 20
#: The fuzz target's own one-line messages (``loom_opt_fuzzer: error: ...``): shown on the terminal too.
_TARGET_MESSAGE = re.compile(r"^[\w.-]+_fuzzer: (?:error|warning): ")

#: Seconds past ``--time`` before the campaign stops a fuzz target that has not
#: ended by itself (the run in progress is dropped).
DEADLINE_SLACK = 2.0


def run_campaign(options: FuzzOptions, script: Path, out: TextIO = sys.stderr) -> CampaignResult:
    """Run the fuzz target to its end; its output goes to ``ARTIFACTS/fuzz.log``, the status
    and loomfuzz's own lines to ``out``.  ``options`` are written as they are for the target:
    absolute paths (the target may run elsewhere), with ``summary`` and ``stats`` set where the
    campaign reads them (``harness.commands.fuzz.options_from_args`` builds them so)."""
    from harness.fuzzing.campaign_series import CampaignSeries
    from harness.fuzzing.status import StatusDisplay, is_progress_line

    if options.artifacts is None or options.summary is None or options.stats is None:
        raise ValueError("a campaign's options name its artifacts, summary and stats files")
    artifacts = options.artifacts
    options.corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    remove_partials(artifacts)  # temporaries of writers killed in an earlier run
    corpus_before = count_files(options.corpus)
    sidecars_before = sidecars(artifacts)
    crashes_before = crash_files(artifacts)
    earlier = folder_findings(artifacts)  # a resumed campaign's: counted, not announced again
    counter = FindingCounter(artifacts, sidecars_before, earlier)
    reasons_seen = {reason_key(record) for record in earlier.values()}
    progress = LibFuzzerProgress()
    start = time.monotonic()
    display = StatusDisplay(out)

    def on_sample(snapshot) -> None:
        # the sampler just read the new sidecars (counter.counts): each finding is looked at
        # once, and the first of each reason printed
        for name, record in counter.take_new():
            key = reason_key(record)
            if key not in reasons_seen:
                reasons_seen.add(key)
                display.message(f"loomfuzz fuzz: found {name[:-len('.json')]}: {finding_reason(record)}")
        left = None if options.time is None else options.time - snapshot.elapsed_s
        display.update(snapshot, counter.folder_counts(), left)

    series = CampaignSeries(
        artifacts, corpus_size=lambda: count_files(options.corpus),
        findings=counter.counts, libfuzzer_executions=progress.executions,
        interval=options.stats.interval, on_sample=on_sample, started=start,
    )
    options_file = artifacts / OPTIONS_FILE
    write_options(options, options_file)
    options.summary.unlink(missing_ok=True)  # this run's records only
    command = build_command(options, script, options_file)
    log_path = artifacts / LOG_FILE
    log = open(log_path, "a", encoding="utf-8", errors="replace")
    log.write(f"==== loomfuzz fuzz {time.strftime('%Y-%m-%d %H:%M:%S')}: {shlex.join(command)}\n")
    log.flush()
    earlier_note = f", {len(earlier)} of them from earlier runs" if earlier else ""
    display.message(f"loomfuzz fuzz: corpus {options.corpus} ({corpus_before} files), findings in "
                    f"{artifacts}{earlier_note}; libFuzzer's and the workers' output: {log_path}")
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    # The supervisor turns SIGINT/SIGTERM/SIGHUP into a stop of the whole
    # campaign (see harness/fuzzing/supervisor.py); the output is read to its
    # end either way, so the summary counts everything done until then.
    with log, Supervisor() as supervisor:
        try:
            proc = supervisor.start(command, child_env(options_file),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError:
            series.finish()
            raise
        series.start()
        deadline = _Deadline(supervisor, options.time)
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", errors="replace")
            text = line.rstrip("\n")
            if log is not None:
                try:
                    log.write(line)
                    log.flush()
                except OSError as error:  # a full disk: the campaign goes on, unlogged
                    display.message(f"loomfuzz fuzz: warning: cannot write {log_path}: "
                                    f"{error.strerror or error}; the rest of the output is not kept")
                    log = None
            progress.feed(text)
            if not is_progress_line(text):
                tail.append(text)
            if _TARGET_MESSAGE.match(text):
                display.message(text)
        deadline.cancel()
    interrupted = supervisor.signum is not None
    series.stop()  # before the end time is taken: no periodic row may come after the last one
    seconds = time.monotonic() - start
    if proc.returncode in (LIBFUZZER_INTERRUPTED, -signal.SIGINT, 130) and not deadline.fired:
        interrupted = True
    records = read_summaries(options.summary)
    totals = worker_totals(records)
    executions, rate_seconds = totals.executions, totals.seconds
    if options.fork or executions is None:
        # fork mode: libFuzzer's parent counts the jobs; no record at all: the target died
        executions, rate_seconds = progress.executions(), None
        if totals.executions is not None and (executions is None or totals.executions > executions):
            executions = totals.executions
    counted = series.worker_executions()
    if counted is not None and (executions is None or counted > executions):
        # workers killed before their record: their statistics rows still count
        executions, rate_seconds = counted, None
    restarts, restart_reasons = totals.restarts, totals.restart_reasons
    if restarts is None:  # no record: the workers' last statistics rows
        restarts, reasons = series.worker_restarts()
        restart_reasons = ", ".join(f"{reason}: {n}" for reason, n in
                                    (part.rsplit(":", 1) for part in reasons.split()))
    findings, orphans = collect_findings(artifacts, sidecars_before, crashes_before)
    result = CampaignResult(
        returncode=proc.returncode,
        executions=executions,
        seconds=seconds,
        rate_seconds=rate_seconds,
        corpus_before=corpus_before,
        corpus_after=count_files(options.corpus),
        findings=findings,
        orphans=orphans,
        edges=totals.edges,
        in_target=totals.in_target,
        restarts=restarts,
        restart_reasons=restart_reasons,
        interrupted=interrupted,
        grammar_coverage=corpus_grammar_coverage(options),
        stop_signal=supervisor.signum,
        deadline=deadline.fired and supervisor.signum is None,
        workers=tuple(records),
        folder=folder_findings(artifacts),
        earlier=frozenset(earlier),
        log=log_path,
        tail=tuple(tail),
    )
    counter.counts()  # the last sidecars: the final status shows what the folder holds
    series.finish(
        executions=result.executions, corpus=result.corpus_after, edges=result.edges,
        findings={kind: len(records) for kind, records in findings.items()}, elapsed=seconds,
    )
    display.close()
    return result


class _Deadline:
    """Stops the campaign through its supervisor (as a stop signal would, but
    not counted as one) :data:`DEADLINE_SLACK` seconds after ``seconds``."""

    def __init__(self, supervisor: Supervisor, seconds: Optional[float]) -> None:
        self.fired = False
        self._supervisor = supervisor
        self._timer: Optional[threading.Timer] = None
        if seconds is not None:
            self._timer = threading.Timer(seconds + DEADLINE_SLACK, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._supervisor.stop()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
