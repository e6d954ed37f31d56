"""The atheris fuzz target: programs of the grammar through loom-opt (or upstream mlir-opt).

Usage (``fuzz_targets/loom_opt_fuzzer.py`` runs :func:`main`, and for a grammar
with a ``SUFFIX`` of its own ``fuzz_targets/program_fuzzer.py``)::

    loom_opt_fuzzer.py [--options=FILE] [libFuzzer flags] [CORPUS_DIR ...]

Every input is a choice sequence (``harness.core.codec``): it decodes to a
program of the grammar (the default profile, or the options' grammar),
rendered for the target (canonical for loom-opt, oracle for mlir-opt), run
through the runner interface (``harness.run.runners``) and judged against the
target's expectations.  A finding (crash, timeout, oom, an outcome the
expectations contradict, a failed output check) writes ``crash-<sha1 of
input>.mlir`` (the grammar's suffix) and ``.json`` beside the place where libFuzzer writes
``crash-<sha1>`` (its ``-artifact_prefix``), then raises, so that atheris
writes ``crash-<sha1>`` itself and stops (or, in fork mode with
``-ignore_crashes=1``, the worker stops and another starts).

Options.  Every setting is one field of ``harness.fuzzing.options.FuzzOptions``,
read from the JSON file ``--options=FILE`` names (``loomfuzz fuzz`` writes
``ARTIFACTS/fuzz-options.json`` and passes it), else from the file
``$LOOMFUZZ_OPTIONS`` names (how libFuzzer's ``-fork``/``-jobs`` workers,
which get libFuzzer's flags only, find it), else the defaults: target
loom-opt (``$LOOM_OPT``, else loom-opt or loom-raise-opt on PATH), the
default grammar, a process per program, findings where ``-artifact_prefix``
says.  A missing or corrupt file is one line and exit 2.  Everything with
one dash goes to libFuzzer.

libFuzzer defaults changed here (pass the flag to override): ``-max_len`` the
grammar's whole choice sequence (17 bytes for the default grammar; 4096 for
a recursive one), ``-len_control=0``, and ``-timeout`` at least twice the
options' timeout plus a minute (libFuzzer's own limit on one input must not
fire before the runner's).  Every finding is named ``crash-<sha1>``, whatever
its kind (the ``.json`` says: crash, timeout, oom, ...); a ``timeout-<sha1>``
from libFuzzer itself would mean the harness hung.

Feedback.  With coverage ``afl`` libFuzzer sees the target's edges.  Without
it (an uninstrumented loom-opt, upstream mlir-opt) each run reports grammar
features as libFuzzer counters instead: the program's k-path features
(``harness.core.features``: every alternative chosen, every parent/child
pair of choices, each counted as often as the program has it) and the
outcome (kind and expectation rule), so the corpus keeps structurally
different programs.  With real coverage they are off by default
(``grammar_features`` ``on`` adds them): they would fill the corpus with
programs the target does not tell apart and dilute the energy libFuzzer
gives to inputs that reached new code.

Statistics.  With ``stats`` in the options (``loomfuzz fuzz`` sets it to
``ARTIFACTS/stats-workers.csv``) the target appends a row of its counters
every ``stats.interval`` seconds and at exit (``harness.fuzzing.series``).

At exit it appends its :class:`~harness.fuzzing.worker_summary.WorkerSummary`
to the options' ``summary`` file (``loomfuzz fuzz`` reads those records) and
prints the same figures as one line: ``loom-fuzz summary: N executions in S s
(R exec/s); findings: ...; time in target: T s`` (T: inside the runs,
including driver restarts and fresh-process confirmations), then, when
persistent, ``; persistent: K restarts (reason: count, ...), ...``.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
import re
import sys
import time
from collections import Counter
from typing import NoReturn, Optional

import atheris

from harness.contract import describe_grammar, load_grammar, program_suffix, with_robust_expectations
from harness.core.codec import decode, max_input_length
from harness.core.compiled import GrammarError
from harness.core.features import KPathFeatures
from harness.core.mutate import Mutator
from harness.core.render import renderer
from harness.fuzzing import stopping
from harness.fuzzing.libfuzzer import ensure_flag, flag_value, has_flag
from harness.fuzzing.options import (
    CoverageKind,
    FeatureMode,
    FuzzOptions,
    OracleKind,
    RunnerKind,
    target_options,
)
from harness.fuzzing.worker_series import WorkerSeries
from harness.fuzzing.worker_summary import WorkerSummary, append_summary, register_exit_hooks
from harness.targets.expectations import DEFAULT_RULE, ExpectationsError, load_expectations
from harness.run.critical_sections import enter_critical
from harness.run.stop_requests import Stopped, stopping as stop_requested
from harness.run.outcome import OutcomeKind
from harness.targets.target import resolve_target, TargetNotFound
from harness.run.runners import Program

__all__ = ["Finding", "GrammarFeatures", "ProgramFuzzer", "main"]

#: the script's name in messages: loom_opt_fuzzer (MLIR grammars, the ClusterFuzzLite
#: build's wrapper too) or program_fuzzer (harness.contract.fuzz_script)
PROG = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else ""))[0] or "program_fuzzer"


class Finding(Exception):
    """Raised for a finding so that atheris writes crash-<sha1>."""


def fail(message: str, status: int = 2) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(status)


# ------------------------------------------------------------ grammar features


class GrammarFeatures:
    """libFuzzer counters for the program's k-path features and the run's outcome."""

    def __init__(self, grammar, reserve, rules) -> None:
        self.kpath = KPathFeatures(grammar)
        self.counters = [reserve() for _ in range(len(self.kpath))]
        self.outcome = {(kind, rule): reserve() for kind in OutcomeKind for rule in rules}

    def program(self, tree) -> None:
        # Looked up per call: atheris swaps in the working _trace_branch when
        # Fuzz() starts; a reference taken before would keep the no-op.
        trace, counters = atheris._trace_branch, self.counters
        for feature, hits in self.kpath.counts(tree).items():
            counter = counters[feature]
            for _ in range(hits):
                trace(counter)

    def verdict(self, verdict) -> None:
        counter = self.outcome.get((verdict.outcome.kind, verdict.rule))
        if counter is not None:
            atheris._trace_branch(counter)


# ------------------------------------------------------------------ the target


class ProgramFuzzer:
    """The atheris test function (:meth:`test_one_input`) and the process's figures."""

    def __init__(self, grammar, target, directory: str, prefix: str, features=None,
                 bridge=None, runner=None, series=None, *, worker: str = "",
                 summary_path=None, fork_parent: bool = False) -> None:
        self.grammar = grammar
        self.render = renderer(grammar, target.render).render
        self.target = target
        self.runner = runner  # a harness.run.runners.Runner (run_one in this thread)
        self.in_target = 0.0  # seconds inside the runs
        self.directory = directory  # where sidecars go (the -artifact_prefix folder)
        self.prefix = prefix  # file-name part of -artifact_prefix
        self.features = features
        self.bridge = bridge
        self.executions = 0
        self.first: float | None = None
        self.last = 0.0
        self.findings: Counter = Counter()
        self.finding_files: list[str] = []
        self.summarised = False
        self.worker = worker or f"pid-{os.getpid()}"
        self.summary_path = summary_path  # where the WorkerSummary record goes (None: nowhere)
        self.fork_parent = fork_parent
        # harness.fuzzing.worker_series.WorkerSeries: this process's rows of stats-workers.csv.
        # A test loop that computes grammar coverage calls series.set("grammar_coverage", value).
        self.series = series
        # Its grammar_coverage gauge: the share of the grammar's k-path features (k = 1 and 2
        # together, harness.core.features) that the inputs run so far have.
        self.kpath = None if series is None else features.kpath if features is not None \
            else KPathFeatures(grammar)
        self.kpath_seen: set[int] = set()

    def test_one_input(self, data: bytes) -> None:
        if stop_requested():  # a safe point: nothing of ours is being written
            stopping.exit_stopped()
        started = time.monotonic()
        if self.first is None:
            self.first = started
        program = decode(data, self.grammar)
        target = self.target
        text = self.render(program)
        if self.features is not None:
            self.features.program(program)
        bridge = self.bridge
        run_started = time.monotonic()
        try:
            if bridge is not None:
                bridge.start_run()
            result = self.runner.run_one(Program(self.executions, text))
            verdict, outcome = result.verdict, result.outcome
            if bridge is not None:
                bridge.finish_run()
        except TargetNotFound as error:
            self.summary()
            print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
            os._exit(2)
        except Stopped:  # the run was killed by a stop request: its outcome means nothing
            stopping.exit_stopped()
        self.in_target += time.monotonic() - run_started
        if self.features is not None:
            self.features.verdict(verdict)
        self.executions += 1
        self.last = time.monotonic()
        series = self.series
        if series is not None:
            if verdict.finding:
                series.finding(verdict.kind)
            self.kpath_seen |= self.kpath.of(program)
            if self.last >= series.next_row:
                self._restart_gauges()
                series.set("grammar_coverage", round(len(self.kpath_seen) / (len(self.kpath) or 1), 4))
                series.record(self.executions, bridge.edges_seen if bridge is not None else None)
        if verdict.finding:
            if not enter_critical():  # being forced out: write nothing rather than half
                stopping.exit_stopped()
            # From here the process ends through libFuzzer writing crash-<sha1>.
            name = f"{self.prefix}crash-{hashlib.sha1(data).hexdigest()}"
            suffix = program_suffix(self.grammar)
            result.write_finding(self.directory, name, target, describe_grammar(self.grammar, program),
                                 suffix=suffix)
            # the differential oracle's kinds are its own: its outcome is the optimizer's exit 0
            differential = verdict.kind in ("wrong-code", "reference-failure", "target-failure",
                                            "executor-disagreement")
            kind = verdict.kind if differential else outcome.kind.value
            self.findings[kind] += 1
            self.finding_files.append(os.path.join(self.directory, name + ".json"))
            raise Finding(f"{target.name}: {verdict.why} "
                          f"(program: {os.path.join(self.directory, name)}{suffix})")

    def _restart_gauges(self) -> None:
        """This worker's driver restarts and their reasons, for stats-workers.csv."""
        workers = getattr(self.runner, "worker_stats", list)()
        if workers:
            reasons: Counter = Counter()
            for _, stats in workers:
                reasons.update(stats.restarts)
            self.series.set("restarts", sum(reasons.values()))
            self.series.set("restart_reasons", " ".join(
                f"{k.replace(' ', '-')}:{v}" for k, v in sorted(reasons.items())))

    def record(self) -> WorkerSummary:
        """This process's figures so far."""
        seconds = (self.last - self.first) if self.executions and self.first is not None else 0.0
        workers = getattr(self.runner, "worker_stats", list)() if self.runner is not None else []
        reasons: Counter = Counter()
        for _, stats in workers:
            reasons.update(stats.restarts)
        return WorkerSummary(
            worker=self.worker,
            executions=self.executions,
            seconds=seconds,  # none finished: 0
            findings=dict(sorted(self.findings.items())),
            finding_files=tuple(self.finding_files),
            in_target=self.in_target,
            restarts=sum(stats.restart_count for _, stats in workers) if workers else None,
            restart_reasons=dict(sorted(reasons.items())),
            persistent=tuple(stats.describe() for _, stats in workers),
            edges=self.bridge.edges_seen if self.bridge is not None else None,
            executors=self.runner.executor_summary() if self.runner is not None else None,
        )

    def summary(self) -> None:
        """Report once, however the process ends: the record to the summary
        file, the line to stderr."""
        if self.summarised:
            return
        self.summarised = True
        if self.executions == 0 and self.first is None and self.fork_parent:
            return  # libFuzzer's fork-mode parent runs nothing itself
        record = self.record()
        if self.runner is not None:
            self.runner.close()
        if self.series is not None:
            self._restart_gauges()
            self.series.set("grammar_coverage", round(len(self.kpath_seen) / (len(self.kpath) or 1), 4))
            self.series.close(self.executions, record.edges)
        if self.bridge is not None:
            try:
                self.bridge.close()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
        if self.summary_path is not None:
            try:
                append_summary(self.summary_path, record)
            except OSError as error:  # the campaign then counts libFuzzer's lines
                print(f"{PROG}: warning: cannot write {self.summary_path}: {error.strerror or error}",
                      file=sys.stderr, flush=True)
        try:
            print(record.line(), file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass


def _open_coverage(kind: str, binary: str):
    """The AFL++ bridge, imported only when coverage asks for it."""
    from harness.run.afl_map import CoverageUnavailable
    from harness.run.coverage import open_bridge

    try:
        return open_bridge(kind, binary)
    except CoverageUnavailable as error:
        fail(f"--coverage {kind}: {error}")


def _persistent_target(target, restart_every: Optional[int]):
    """The fork-server driver for ``target`` (harness.run.runners.persistent_for)."""
    from harness.run.driver_protocol import DriverError
    from harness.run.persistent_target import DEFAULT_RESTART_EVERY
    from harness.run.runners import persistent_for

    try:
        return persistent_for(target, restart_every or DEFAULT_RESTART_EVERY)
    except DriverError as error:
        fail(f"--runner persistent: {error}", 1)


def _differential_runner(options: FuzzOptions):
    """The differential oracle: the options' optimizer (default mlir-opt-22) with
    the pipeline, judged by execution (harness.oracles.differential_runner); unusable: exit 2."""
    from harness.execute.differential import Optimizer
    from harness.oracles.choice import OracleChoice, oracle_runner
    from harness.oracles.differential_runner import OracleError, check_oracle, oracle_settings
    from harness.execute.toolchain import DEFAULT_RUNTIME, Toolchain
    from harness.targets.target import DEFAULT_MLIR_PIPELINE

    optimizer = Optimizer(options.optimizer or "mlir-opt-22", options.pipeline or DEFAULT_MLIR_PIPELINE,
                          timeout=options.timeout)
    toolchain = Toolchain(runner=options.reference_runner or Toolchain.runner,
                          runtime_library=options.runtime_library or DEFAULT_RUNTIME)
    settings = oracle_settings(optimizer, toolchain, runner=options.runner.value,  # persistent: in process
                               twins=options.twins)
    try:
        check_oracle(settings)
    except OracleError as error:
        fail(str(error))
    # --expectations judge the optimizer's failures (e.g. a known upstream one: no finding)
    try:
        expectations = load_expectations(str(options.expectations)) if options.expectations else None
    except ExpectationsError as error:
        fail(str(error))
    return oracle_runner(None, OracleChoice(differential=settings, expectations=expectations))


def _worker_name(flags: list[str]) -> str:
    """``job-N`` for libFuzzer's fork-mode job N (its corpus is .../C<N>), ``merge-P``
    for a process libFuzzer runs to merge a corpus, else ``pid-P``."""
    if has_flag(flags, "merge_control_file") or has_flag(flags, "merge_inner"):
        return f"merge-{os.getpid()}"
    for arg in reversed(flags):
        match = re.search(r"FuzzWithFork\d+\.dir/C(\d+)/?$", arg)
        if match:
            return f"job-{match.group(1)}"
    return f"pid-{os.getpid()}"


def _target(options: FuzzOptions, grammar):
    """The target the options name, judged as the grammar's programs deserve."""
    binary = options.binary
    try:
        target = resolve_target(
            options.target,
            loom_opt=binary if options.target != "mlir-opt" else None,
            mlir_opt=binary if options.target == "mlir-opt" else None,
            pass_args=options.pass_args,
            pipeline=options.pipeline,
            timeout=options.timeout,
            memory_mb=options.memory_mb or None,
            expectations_path=str(options.expectations) if options.expectations else None,
            family=options.family,
        )
    except (TargetNotFound, ExpectationsError) as error:
        fail(str(error), 1)
    # off P1-P24 (edge, break) only a clean outcome is owed: the robustness oracle
    return with_robust_expectations(target, grammar, options.expectations is not None)


def _artifact_prefix(options: FuzzOptions, flags: list[str]) -> tuple[str, str]:
    """(the findings folder, the file-name prefix) of ``-artifact_prefix``, which
    the options' artifacts folder sets unless given."""
    if options.artifacts and not has_flag(flags, "artifact_prefix"):
        flags.append(f"-artifact_prefix={os.path.abspath(options.artifacts)}{os.sep}")
    directory, base = os.path.split(flag_value(flags, "artifact_prefix") or "")
    directory = directory or "."
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        fail(f"cannot create the artifacts folder {directory}: {error.strerror or error}")
    return directory, base


def main(argv: list[str]) -> None:
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__)
        return
    options, flags = target_options(argv, PROG)
    try:
        grammar = load_grammar(str(options.grammar) if options.grammar else None, options.profile)
    except GrammarError as error:
        fail(str(error))
    differential = options.oracle is OracleKind.DIFFERENTIAL
    if differential:  # the optimizer runs the exec rendering (harness.oracles.differential_runner)
        differential_runner = _differential_runner(options)
        target = differential_runner.target
    else:
        target = _target(options, grammar)
    directory, base = _artifact_prefix(options, flags)
    # libFuzzer's own per-input limit (default 1200 s) must not fire before the runner's
    ensure_flag(flags, "timeout", str(max(1200, int(options.timeout * 2 + 60))))
    ensure_flag(flags, "max_len", str(max_input_length(grammar)))
    ensure_flag(flags, "len_control", "0")
    fork_parent = stopping.is_fork_parent(flags)

    persistent = None
    if options.runner is RunnerKind.PERSISTENT and not differential:  # differential: its executor
        persistent = _persistent_target(target, options.restart_every)
    bridge = None
    if options.coverage is not CoverageKind.NONE and not fork_parent:  # the parent runs no input
        # with a persistent runner the map is the driver's: it is what runs the programs
        bridge = _open_coverage(options.coverage.value,
                                persistent.driver[0] if persistent else target.argv[0])
        if persistent is None:
            target = dataclasses.replace(target, env={**target.env, **bridge.env})
    runner = None
    if differential:
        runner = None if fork_parent else differential_runner
    elif not fork_parent:
        from harness.oracles.choice import OracleChoice, oracle_runner

        # one input at a time: the persistent driver, else a fresh process each (never batches);
        # with the coverage bridge the driver's runs carry the map's environment
        through_driver = persistent is not None
        runner = oracle_runner(target, OracleChoice(
            runner="persistent" if through_driver else "process", restart_every=options.restart_every,
            env=bridge.env if bridge and through_driver else None, settle=bridge is not None and through_driver))

    features = None
    mode = options.grammar_features
    if mode is FeatureMode.ON or (mode is FeatureMode.AUTO and options.coverage is CoverageKind.NONE):
        rules = ["", DEFAULT_RULE.name, *(rule.name for rule in target.expectations.rules)]
        features = GrammarFeatures(grammar, atheris._reserve_counter, rules)
    if target.render not in grammar.renderings:
        fail(f"target {target.name} reads the {target.render!r} rendering, which the grammar "
             f"{grammar.source} does not define (it has: {', '.join(grammar.renderings)})")
    worker = _worker_name(flags)
    series = None
    if not fork_parent and options.stats is not None:
        series = WorkerSeries.open(options.stats.path, worker, options.stats.interval)
    fuzzer = ProgramFuzzer(grammar, target, directory, base, features, bridge, runner, series,
                           worker=worker, summary_path=options.summary, fork_parent=fork_parent)
    register_exit_hooks(fuzzer.summary)
    stopping.guard(flags, fuzzer.summary)  # signals and the campaign's end stop us whole

    mutator = Mutator(grammar)
    atheris.Setup(flags, fuzzer.test_one_input,
                  custom_mutator=mutator.mutate, custom_crossover=mutator.crossover)
    # Looked up per call, like _trace_branch: the Mutate bound before Fuzz()
    # starts refuses to run.
    mutator.use_libfuzzer(lambda data, max_size: atheris.Mutate(data, max_size))
    gc.freeze()  # start-up objects out of the collector's way: cheaper full collections
    atheris.Fuzz()
