#!/usr/bin/env python3
"""atheris fuzz target: loom-fuzz programs through loom-opt (or upstream mlir-opt).

Usage::

    loom_opt_fuzzer.py [OPTIONS] [libFuzzer flags] [CORPUS_DIR ...]

Every input is a choice sequence (``harness.core.codec``): it decodes to a program
of the grammar (the default profile, or ``--grammar FILE``), rendered for the target (canonical for loom-opt,
oracle for mlir-opt), run through the runner interface (``harness.run.runners``) and judged
against the target's expectations.  A finding (crash, timeout, oom, an
outcome the expectations contradict, a failed output check) writes
``crash-<sha1 of input>.mlir`` and ``.json`` beside the place where libFuzzer
writes ``crash-<sha1>`` (its ``-artifact_prefix``), then raises, so that
atheris writes ``crash-<sha1>`` itself and stops (or, in fork mode with
``-ignore_crashes=1``, the worker stops and another starts).

Options (two dashes; everything with one dash goes to libFuzzer).  Each one
also reads an environment variable, and is exported to it, because
libFuzzer's ``-fork``/``-jobs`` workers re-execute this script with
libFuzzer's flags only:

  --target NAME          loom-opt (default) or mlir-opt        LOOMFUZZ_TARGET
  --loom-opt PATH        the loom-opt binary (else $LOOM_OPT,   LOOMFUZZ_LOOM_OPT
                         loom-opt or loom-raise-opt on PATH)
  --pass-args "ARGS"     the target's arguments                LOOMFUZZ_PASS_ARGS
  --pipeline PIPELINE    a pass pipeline                       LOOMFUZZ_PIPELINE
  --expectations PATH    expectations JSON                     LOOMFUZZ_EXPECTATIONS
  --timeout S            per-run time limit (default 10)       LOOMFUZZ_TIMEOUT
  --memory-mb MB         per-run address-space limit (4096;    LOOMFUZZ_MEMORY_MB
                         0: none)
  --artifacts DIR        findings folder; sets -artifact_prefix=DIR/
                         unless given                          LOOMFUZZ_ARTIFACTS
  --coverage none|afl    afl: edge coverage of an AFL++-instrumented target
                         through harness.run.coverage              LOOMFUZZ_COVERAGE
  --grammar-features auto|on|off
                         structural feedback (below); auto: on
                         without --coverage, off with it       LOOMFUZZ_GRAMMAR_FEATURES
  --grammar FILE         the grammar (Python or JSON file)     LOOMFUZZ_GRAMMAR
  --profile NAME         a built-in grammar (default           LOOMFUZZ_PROFILE
                         conventions)
  --runner process|persistent
                         persistent: programs go to one long-lived LOOMFUZZ_RUNNER
                         fork-server driver (harness.run.runners);
                         findings are confirmed in a fresh worker;
                         --coverage then reads the driver's map
                         (default process)
  --restart-every N      restart the driver after N programs   LOOMFUZZ_RESTART_EVERY
                         (default 10000, as AFL++'s __AFL_LOOP)

libFuzzer defaults changed here (pass the flag to override): ``-max_len`` the
grammar's whole choice sequence (17 bytes for the default grammar; 4096 for
a recursive one), ``-len_control=0``, and ``-timeout`` at least twice
``--timeout`` plus a minute (libFuzzer's own limit on one input must not fire
before the runner's).  Every finding is named ``crash-<sha1>``, whatever its
kind (the ``.json`` says: crash, timeout, oom, ...); a ``timeout-<sha1>``
from libFuzzer itself would mean the harness hung.

Feedback.  With ``--coverage afl`` libFuzzer sees the target's edges.
Without it (an uninstrumented loom-opt, upstream mlir-opt) each run reports
grammar features as libFuzzer counters instead: the program's k-path features
(``harness.core.features``: every alternative chosen, every parent/child pair
of choices, each counted as often as the program has it) and the outcome (kind and expectation rule), so the corpus keeps
structurally different programs.  With real coverage
they are off by default (``--grammar-features on`` adds them): they would
fill the corpus with programs the target does not tell apart and dilute the
energy libFuzzer gives to inputs that reached new code.

Statistics.  With ``$LOOMFUZZ_STATS`` set (``loomfuzz fuzz`` sets it to
``ARTIFACTS/stats-workers.csv``) the target appends a row of its counters
every ``$LOOMFUZZ_STATS_INTERVAL`` seconds and at exit
(``harness.fuzzing.series``).

At exit it prints one line: ``loom-fuzz summary: N executions in S s (R
exec/s); findings: ...; time in target: T s`` (T: inside the runs,
including driver restarts and fresh-process confirmations), then, when
persistent, ``; persistent: K restarts (reason: count, ...), ...``
(``loomfuzz fuzz`` reads it).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
import re
import shlex
import sys
import time
from collections import Counter
from typing import NoReturn

try:
    import harness  # noqa: F401  (installed: pip install -e .)
except ImportError:  # run from a source tree without the install
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import atheris

from harness.fuzzing import stopping
from harness.fuzzing.campaign import (
    SUMMARY_PREFIX,
    ensure_flag,
    flag_value,
    has_flag,
    options_with_env,
    register_exit_hooks,
    split_options,
)
from harness.core.codec import decode, max_input_length
from harness.core.features import KPathFeatures
from harness.contract import describe_grammar, load_grammar, with_robust_expectations
from harness.core.grammar import GrammarError
from harness.core.mutate import Mutator
from harness.core.render import renderer
from harness.fuzzing.series import WorkerSeries
from harness.run.expectations import DEFAULT_RULE, ExpectationsError, load_expectations
from harness.run.lifetime import Stopped, enter_critical, stopping as stop_requested
from harness.run.runner import OutcomeKind, TargetNotFound, resolve_target
from harness.run.runners import Program

PROG = "loom_opt_fuzzer"
OPTIONS = ("target", "loom-opt", "pass-args", "pipeline", "expectations", "timeout",
           "memory-mb", "artifacts", "coverage", "grammar-features", "grammar", "profile",
           "runner", "restart-every", "oracle", "mlir-opt")


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


class LoomOptFuzzer:
    def __init__(self, grammar, target, directory: str, prefix: str, features=None,
                 bridge=None, runner=None, series=None) -> None:
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
        # harness.fuzzing.series.WorkerSeries: this process's rows of stats-workers.csv.
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
            result.write_finding(self.directory, name, target, describe_grammar(self.grammar, program))
            # the differential oracle's kinds are its own: its outcome is the optimizer's exit 0
            differential = verdict.kind in ("wrong-code", "reference-failure", "target-failure")
            kind = verdict.kind if differential else outcome.kind.value
            self.findings[kind] += 1
            self.finding_files.append(os.path.join(self.directory, name + ".json"))
            raise Finding(f"{target.name}: {verdict.why} "
                          f"(program: {os.path.join(self.directory, name)}.mlir)")

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

    def summary(self) -> None:
        """Print the summary line once (called from every exit path)."""
        if self.summarised:
            return
        self.summarised = True
        if self.executions == 0 and self.first is None and is_fork_parent:
            return  # libFuzzer's fork-mode parent runs nothing itself
        seconds = (self.last - self.first) if self.executions else 0.0  # none finished: 0
        rate = self.executions / seconds if seconds > 0 else 0.0
        total = sum(self.findings.values())
        line = (f"{SUMMARY_PREFIX} {self.executions} executions in {seconds:.3f} s "
                f"({rate:.1f} exec/s); findings: {total}")
        if total:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(self.findings.items()))
            line += f" ({kinds}) -> {', '.join(self.finding_files)}"
        line += f"; time in target: {self.in_target:.3f} s"
        if self.runner is not None:
            for _, stats in getattr(self.runner, "worker_stats", list)():
                line += f"; persistent: {stats.describe()}"
            self.runner.close()
        if self.series is not None:
            self._restart_gauges()
            self.series.set("grammar_coverage", round(len(self.kpath_seen) / (len(self.kpath) or 1), 4))
            self.series.close(self.executions, self.bridge.edges_seen if self.bridge is not None else None)
        if self.bridge is not None:
            line += f"; coverage: {self.bridge.edges_seen} edges seen"
            try:
                self.bridge.close()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
        try:
            print(line, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass


is_fork_parent = False


def _open_coverage(kind: str, binary: str):
    """The AFL++ bridge, imported only when --coverage asks for it."""
    from harness.run.coverage import CoverageUnavailable, open_bridge

    try:
        return open_bridge(kind, binary)
    except CoverageUnavailable as error:
        fail(f"--coverage {kind}: {error}")


def _persistent_target(target, restart_every: str | None):
    """The fork-server driver for ``target`` (harness.run.runners.persistent_for)."""
    from harness.run.persistent import DEFAULT_RESTART_EVERY, DriverError
    from harness.run.runners import persistent_for

    try:
        every = int(restart_every) if restart_every else DEFAULT_RESTART_EVERY
    except ValueError:
        fail(f"--restart-every takes a whole number, not {restart_every!r}")
    if every < 1:
        fail("--restart-every must be at least 1")
    try:
        return persistent_for(target, every)
    except DriverError as error:
        fail(f"--runner persistent: {error}", 1)


def _differential_runner(opts: dict, timeout: float):
    """``--oracle differential``: the optimizer ``--mlir-opt`` (default mlir-opt-22) with
    ``--pipeline``, judged by execution (harness.execute.oracle); unusable: exit 2."""
    from harness.execute.differential import Optimizer
    from harness.execute.oracle import DifferentialRunner, OracleError, check_oracle, oracle_settings
    from harness.run.runner import DEFAULT_MLIR_PIPELINE

    optimizer = Optimizer(opts.get("mlir-opt") or "mlir-opt-22",
                          opts.get("pipeline") or DEFAULT_MLIR_PIPELINE, timeout=timeout)
    settings = oracle_settings(optimizer)
    try:
        check_oracle(settings)
    except OracleError as error:
        fail(str(error))
    # --expectations judge the optimizer's failures (e.g. a known upstream one: no finding)
    path = opts.get("expectations")
    return DifferentialRunner(settings, expectations=load_expectations(path) if path else None)


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


def main(argv: list[str]) -> None:
    global is_fork_parent
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__)
        return
    values, flags = split_options(argv, OPTIONS, prog=PROG)
    opts = options_with_env(values, OPTIONS)

    try:
        grammar = load_grammar(opts.get("grammar") or None, opts.get("profile") or None)
    except GrammarError as error:
        fail(str(error))
    name = opts.get("target") or "loom-opt"
    try:
        timeout = float(opts.get("timeout", "10"))
        memory_mb = int(opts.get("memory-mb", "4096"))
    except ValueError:
        fail("--timeout and --memory-mb take numbers")
    if timeout <= 0:
        fail("--timeout must be positive")
    pass_args = shlex.split(opts["pass-args"]) if "pass-args" in opts else None
    oracle = (opts.get("oracle") or "crash").lower()
    if oracle not in ("crash", "differential"):
        fail(f"--oracle takes crash or differential, not {oracle!r}")
    try:
        if oracle == "differential":  # the optimizer runs the exec rendering (harness.execute.oracle)
            differential = _differential_runner(opts, timeout)
            target = differential.target
        else:
            target = resolve_target(
                name,
                loom_opt=opts.get("loom-opt") or None,
                pass_args=pass_args,
                pipeline=opts.get("pipeline") or None,
                timeout=timeout,
                memory_mb=memory_mb if memory_mb > 0 else None,
                expectations_path=opts.get("expectations") or None,
            )
    except (TargetNotFound, ExpectationsError) as error:
        fail(str(error), 1)
    if oracle == "differential" and (opts.get("runner") or "process") != "process":
        fail("--oracle differential runs programs through its own runner: no --runner")
    if oracle != "differential":
        # off P1-P24 (edge, break) only a clean outcome is owed: the robustness oracle
        target = with_robust_expectations(target, grammar, bool(opts.get("expectations")))

    artifacts = opts.get("artifacts")
    if artifacts and not has_flag(flags, "artifact_prefix"):
        flags.append(f"-artifact_prefix={os.path.abspath(artifacts)}{os.sep}")
    prefix = flag_value(flags, "artifact_prefix") or ""
    directory, base = os.path.split(prefix)
    directory = directory or "."
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        fail(f"cannot create the artifacts folder {directory}: {error.strerror or error}")
    # libFuzzer's own per-input limit (default 1200 s) must not fire before the runner's
    ensure_flag(flags, "timeout", str(max(1200, int(timeout * 2 + 60))))
    ensure_flag(flags, "max_len", str(max_input_length(grammar)))
    ensure_flag(flags, "len_control", "0")
    is_fork_parent = any(has_flag(flags, f) and flag_value(flags, f) not in ("0", "")
                         for f in ("fork", "jobs"))

    runner_kind = (opts.get("runner") or "process").lower()
    if runner_kind not in ("process", "persistent"):
        fail(f"--runner takes process or persistent, not {runner_kind!r} (a fuzzer runs one "
             "program at a time)")
    persistent = None
    if runner_kind == "persistent":
        persistent = _persistent_target(target, opts.get("restart-every"))

    bridge = None
    coverage = (opts.get("coverage") or "none").lower()
    if coverage not in ("none", "afl"):
        fail(f"--coverage takes none or afl, not {coverage!r}")
    if coverage != "none" and not is_fork_parent:  # the fork-mode parent runs no input itself
        # with --runner persistent the map is the driver's: it is what runs the programs
        bridge = _open_coverage(coverage, persistent.driver[0] if persistent else target.argv[0])
        if persistent is None:
            target = dataclasses.replace(target, env={**target.env, **bridge.env})
    runner = None
    if oracle == "differential":
        runner = None if is_fork_parent else differential
    elif not is_fork_parent:
        from harness.run.runners import PersistentPool, ProcessRunner

        if persistent is not None:
            runner = PersistentPool(target, persistent, env=bridge.env if bridge else None,
                                    settle=bridge is not None)
        else:
            runner = ProcessRunner(target)

    structural = (opts.get("grammar-features") or "auto").lower()
    if structural not in ("auto", "on", "off"):
        fail(f"--grammar-features takes auto, on or off, not {structural!r}")
    features = None
    if structural == "on" or (structural == "auto" and coverage == "none"):
        rules = ["", DEFAULT_RULE.name, *(rule.name for rule in target.expectations.rules)]
        features = GrammarFeatures(grammar, atheris._reserve_counter, rules)
    if target.render not in grammar.renderings:
        fail(f"target {target.name} reads the {target.render!r} rendering, which the grammar "
             f"{grammar.source} does not define (it has: {', '.join(grammar.renderings)})")
    series = None if is_fork_parent else WorkerSeries.from_environment(_worker_name(flags))
    fuzzer = LoomOptFuzzer(grammar, target, directory, base, features, bridge, runner, series)
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


if __name__ == "__main__":
    main(sys.argv)
