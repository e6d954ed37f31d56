#!/usr/bin/env python3
"""atheris fuzz target: loom-fuzz programs through loom-opt (or upstream mlir-opt).

Usage::

    loom_opt_fuzzer.py [OPTIONS] [libFuzzer flags] [CORPUS_DIR ...]

Every input is a choice sequence (``harness.core.codec``): it decodes to a program
of the default profile, rendered for the target (canonical for loom-opt,
oracle for mlir-opt), run by ``harness.run.runner.run_program`` and judged
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

libFuzzer defaults changed here (pass the flag to override): ``-max_len=17``
(inputs never need more), ``-len_control=0``, and ``-timeout`` at least twice
``--timeout`` plus a minute (libFuzzer's own limit on one input must not fire
before the runner's).  Every finding is named ``crash-<sha1>``, whatever its
kind (the ``.json`` says: crash, timeout, oom, ...); a ``timeout-<sha1>``
from libFuzzer itself would mean the harness hung.

Feedback.  With ``--coverage afl`` libFuzzer sees the target's edges.
Without it (an uninstrumented loom-opt, upstream mlir-opt) each run reports
grammar features as libFuzzer counters instead: every site variant at each
position, each pair of neighbouring sites, each thread shape, the number of
sites per body form and wrapper, and the outcome (kind and expectation rule),
so the corpus keeps structurally different programs.  With real coverage
they are off by default (``--grammar-features on`` adds them): they would
fill the corpus with programs the target does not tell apart and dilute the
energy libFuzzer gives to inputs that reached new code.

At exit it prints one line: ``loom-fuzz summary: N executions in S s (R
exec/s); findings: ...`` (``loomfuzz fuzz`` reads it).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
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
from harness.core.choices import SLOT_COUNT
from harness.core.codec import decode
from harness.run.expectations import DEFAULT_RULE, ExpectationsError
from harness.core.mutate import custom_crossover, custom_mutator, use_libfuzzer
from harness.core.render import render
from harness.run.lifetime import Stopped, enter_critical, stopping as stop_requested
from harness.run.runner import (
    OutcomeKind,
    TargetNotFound,
    judge,
    resolve_target,
    run_program,
    write_finding,
)
from harness.core.tree import ALL_SITES, MAX_SITES, MAX_THREADS, Body, Nesting

PROG = "loom_opt_fuzzer"
OPTIONS = ("target", "loom-opt", "pass-args", "pipeline", "expectations", "timeout",
           "memory-mb", "artifacts", "coverage", "grammar-features")


class Finding(Exception):
    """Raised for a finding so that atheris writes crash-<sha1>."""


def fail(message: str, status: int = 2) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(status)


# ------------------------------------------------------------ grammar features


class GrammarFeatures:
    """libFuzzer counters for the program's structure and the run's outcome."""

    def __init__(self, reserve, rules) -> None:
        n = len(ALL_SITES)
        self.index = {site: i for i, site in enumerate(ALL_SITES)}
        positions = MAX_THREADS * MAX_SITES
        self.site_at = [reserve() for _ in range(positions * n)]
        self.pair = [reserve() for _ in range(n * n)]
        self.shape = [reserve() for _ in range(MAX_THREADS * 2 * MAX_SITES)]
        self.body = [reserve() for _ in Body]
        self.nesting = [reserve() for _ in Nesting]
        self.outcome = {(kind, rule): reserve() for kind in OutcomeKind for rule in rules}

    def program(self, program) -> None:
        # Looked up per call: atheris swaps in the working _trace_branch when
        # Fuzz() starts; a reference taken before would keep the no-op.
        trace, index, n = atheris._trace_branch, self.index, len(ALL_SITES)
        for t, thread in enumerate(program.threads):
            trace(self.shape[(t * 2 + thread.icall) * MAX_SITES + len(thread.sites) - 1])
            previous = None
            for s, site in enumerate(thread.sites):
                i = index[site]
                trace(self.site_at[(t * MAX_SITES + s) * n + i])
                trace(self.body[site.body])
                trace(self.nesting[site.nesting])
                if previous is not None:
                    trace(self.pair[previous * n + i])
                previous = i

    def verdict(self, verdict) -> None:
        counter = self.outcome.get((verdict.outcome.kind, verdict.rule))
        if counter is not None:
            atheris._trace_branch(counter)


# ------------------------------------------------------------------ the target


class LoomOptFuzzer:
    def __init__(self, target, directory: str, prefix: str, features=None, bridge=None) -> None:
        self.target = target
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

    def test_one_input(self, data: bytes) -> None:
        if stop_requested():  # a safe point: nothing of ours is being written
            stopping.exit_stopped()
        started = time.monotonic()
        if self.first is None:
            self.first = started
        program = decode(data)
        target = self.target
        text = render(program, target.render)
        if self.features is not None:
            self.features.program(program)
        bridge = self.bridge
        try:
            if bridge is not None:
                bridge.start_run()
            outcome = run_program(target, text)
            if bridge is not None:
                bridge.finish_run()
        except TargetNotFound as error:
            self.summary()
            print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
            os._exit(2)
        except Stopped:  # the run was killed by a stop request: its outcome means nothing
            stopping.exit_stopped()
        verdict = judge(target, text, outcome)
        if self.features is not None:
            self.features.verdict(verdict)
        self.executions += 1
        self.last = time.monotonic()
        if verdict.finding:
            if not enter_critical():  # being forced out: write nothing rather than half
                stopping.exit_stopped()
            # From here the process ends through libFuzzer writing crash-<sha1>.
            name = f"{self.prefix}crash-{hashlib.sha1(data).hexdigest()}"
            write_finding(self.directory, name, text, target, verdict)
            kind = outcome.kind.value
            self.findings[kind] += 1
            self.finding_files.append(os.path.join(self.directory, name + ".json"))
            raise Finding(f"{target.name}: {verdict.why} "
                          f"(program: {os.path.join(self.directory, name)}.mlir)")

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


def main(argv: list[str]) -> None:
    global is_fork_parent
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__)
        return
    values, flags = split_options(argv, OPTIONS, prog=PROG)
    opts = options_with_env(values, OPTIONS)

    name = opts.get("target") or "loom-opt"
    try:
        timeout = float(opts.get("timeout", "10"))
        memory_mb = int(opts.get("memory-mb", "4096"))
    except ValueError:
        fail("--timeout and --memory-mb take numbers")
    if timeout <= 0:
        fail("--timeout must be positive")
    pass_args = shlex.split(opts["pass-args"]) if "pass-args" in opts else None
    try:
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
    ensure_flag(flags, "max_len", str(SLOT_COUNT))
    ensure_flag(flags, "len_control", "0")
    is_fork_parent = any(has_flag(flags, f) and flag_value(flags, f) not in ("0", "")
                         for f in ("fork", "jobs"))

    bridge = None
    coverage = (opts.get("coverage") or "none").lower()
    if coverage not in ("none", "afl"):
        fail(f"--coverage takes none or afl, not {coverage!r}")
    if coverage != "none" and not is_fork_parent:  # the fork-mode parent runs no input itself
        bridge = _open_coverage(coverage, target.argv[0])
        target = dataclasses.replace(target, env={**target.env, **bridge.env})

    grammar = (opts.get("grammar-features") or "auto").lower()
    if grammar not in ("auto", "on", "off"):
        fail(f"--grammar-features takes auto, on or off, not {grammar!r}")
    features = None
    if grammar == "on" or (grammar == "auto" and coverage == "none"):
        rules = ["", DEFAULT_RULE.name, *(rule.name for rule in target.expectations.rules)]
        features = GrammarFeatures(atheris._reserve_counter, rules)
    fuzzer = LoomOptFuzzer(target, directory, base, features, bridge)
    register_exit_hooks(fuzzer.summary)
    stopping.guard(flags, fuzzer.summary)  # signals and the campaign's end stop us whole

    atheris.Setup(flags, fuzzer.test_one_input,
                  custom_mutator=custom_mutator, custom_crossover=custom_crossover)
    # Looked up per call, like _trace_branch: the Mutate bound before Fuzz()
    # starts refuses to run.
    use_libfuzzer(lambda data, max_size: atheris.Mutate(data, max_size))
    gc.freeze()  # start-up objects out of the collector's way: cheaper full collections
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
