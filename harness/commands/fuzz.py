"""``loomfuzz fuzz``: a coverage-guided atheris campaign against loom-opt or mlir-opt."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Optional

from harness.commands import (
    TargetError,
    claim_results_folder,
    add_grammar_arguments,
    add_oracle_arguments,
    add_target_arguments,
    help_groups,
    settle_target_options,
    grammar_from_args,
    missing_rendering,
    oracle_from_args,
    positive_number,
    probe_pipeline,
    profile_from_args,
    target_for_grammar,
    whole_number,
    with_examples,
)
from harness.fuzzing.options import FuzzOptions
from harness.targets.folders import default_folder

NOTES = """\
The fuzz target is fuzz_targets/loom_opt_fuzzer.py (grammar_fuzzer.py with
--self), run by this Python.  An empty corpus folder is seeded with programs
covering every site variant.  Each finding leaves crash-<sha1> (the input:
`loomfuzz decode` prints its program) and crash-<sha1>.mlir / .json (the
program as the target read it; the command, outcome and stderr) in the
artifacts folder.  Flags after `--` go to libFuzzer (e.g. -- -timeout=60
-rss_limit_mb=4096); they win over the ones loomfuzz derives.  A single process
stops at its first finding (libFuzzer's way); with --jobs N the workers keep
going (-ignore_crashes=1) and their findings gather in the artifacts folder.
The artifacts folder also gets stats.csv (the campaign's time series, one row
every --stats-interval seconds and one at the end; `loomfuzz plot` draws it),
stats-workers.csv (each worker's own rows) and fuzz.log (what libFuzzer and the
workers print, appended to by every run).  On a terminal one status line
(elapsed, exec/s, corpus, the folder's findings by kind, time left) is
rewritten in place, with the first finding of each reason printed above it;
piped, a plain status line every few seconds.  Running the same command again
continues the campaign (the summary prints it when the campaign stops).

Exit status: 0 no finding, 1 findings (or the target cannot be found),
2 the fuzz target failed without a finding or the target refuses its pipeline
(checked once on a trivial module before the campaign), 128 + N stopped by signal N
(130 SIGINT, 143 SIGTERM, 129 SIGHUP): every process of the campaign is
stopped, findings being written are finished, the summary is printed.
"""

EXAMPLES = (
    ("loomfuzz fuzz --loom-opt ~/loom/build/bin/loom-raise-opt --corpus fuzz-corpus --time 3600 --jobs 2",
     "an hour of two workers against your loom build; run it again to continue"),
    ("loomfuzz fuzz --target mlir-opt --corpus mlir-corpus --runs 2000",
     "upstream mlir-opt-22, no loom needed: 2,000 programs"),
    ("loomfuzz fuzz --oracle differential --mlir-opt mlir-opt-19 --corpus wc-corpus --time 600",
     "wrong code: each program executed before and after mlir-opt-19's pipeline"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = ("loomfuzz fuzz [--loom-opt PATH | --target NAME] [--corpus DIR] [--artifacts DIR]\n"
                    "                     [--time S] [--jobs N] [options] [-- LIBFUZZER_FLAG ...]")
    with_examples(parser, EXAMPLES, NOTES)
    what, where, how_long, oracles, advanced = help_groups(
        parser, "what to fuzz", "where to write", "how long", "oracles", "advanced")
    add_target_arguments(what, judging=oracles, limits=advanced)
    add_grammar_arguments(what)
    what.add_argument("--self", dest="self_test", action="store_true",
                      help="fuzz loom-fuzz's own grammar code (fuzz_targets/grammar_fuzzer.py) "
                           "instead of a target")
    where.add_argument("--corpus", type=Path, default=None, metavar="DIR",
                       help="corpus folder, seeded when empty (default: artifacts/BUILD/corpus; never "
                            "the corpus/ of .mlir files `generate -o corpus` writes)")
    where.add_argument("--artifacts", type=Path, default=None, metavar="DIR",
                       help="findings folder, with the campaign's fuzz.log and stats.csv (default: "
                            "artifacts/BUILD/fuzz, e.g. artifacts/mlir-opt-22/fuzz; a folder holding "
                            "another build's or command's results is refused)")
    how_long.add_argument("--time", type=whole_number(1), metavar="S",
                          help="stop after S seconds (-max_total_time)")
    how_long.add_argument("--runs", type=whole_number(1), metavar="N",
                          help="stop after N executions (-atheris_runs; -runs with --jobs)")
    how_long.add_argument("--jobs", type=whole_number(1), default=1, metavar="N",
                          help="N worker processes (libFuzzer fork mode, -fork=N)")
    add_oracle_arguments(oracles)
    advanced.add_argument("--seed", type=int, metavar="S", help="libFuzzer's random seed (-seed)")
    advanced.add_argument("--coverage", choices=("none", "afl"), default="none",
                          help="afl: edge coverage from an AFL++-instrumented target (default none)")
    advanced.add_argument("--grammar-features", choices=("auto", "on", "off"), default="auto",
                          help="structural feedback from the program's shape and the outcome; "
                               "auto (default): on without --coverage, off with it")
    advanced.add_argument("--runner", choices=("process", "persistent"), default=None,
                          help="process: one target process per program; persistent: one long-lived "
                               "fork-server driver per worker (native/; for mlir-opt found as "
                               "$LOOMFUZZ_MLIR_DRIVER or native/build/loomfuzz-mlir-driver, for loom-opt "
                               "as $LOOMFUZZ_LOOM_DRIVER), findings confirmed in a fresh worker; "
                               "default: persistent where the target's driver is built (and no "
                               "--coverage), else process; with --oracle differential: how programs "
                               "are executed (persistent: in the driver's --exec mode)")
    advanced.add_argument("--restart-every", type=whole_number(1), metavar="N",
                          help="with --runner persistent: retire the driver's worker after N programs "
                               "(default 10000)")
    advanced.add_argument("--stats-interval", type=positive_number, default=2.0, metavar="S",
                          help="seconds between rows of ARTIFACTS/stats.csv and status updates (default 2)")
    advanced.add_argument("libfuzzer", nargs="*", metavar="-- LIBFUZZER_FLAG",
                          help="flags for libFuzzer, after --")


def _error(message: str, status: int = 1) -> int:
    print(f"loomfuzz fuzz: error: {message}", file=sys.stderr)
    return status


def _warn(message: str) -> None:
    print(f"loomfuzz fuzz: warning: {message}", file=sys.stderr)


def _note(message: str) -> None:
    print(f"loomfuzz fuzz: {message}", file=sys.stderr)


def options_from_args(args: argparse.Namespace, *, binary: Optional[str] = None,
                      build: Optional[str] = None) -> FuzzOptions:
    """The campaign's one options value: every path absolute (the fuzz target
    runs elsewhere), the summary and statistics files in the artifacts folder."""
    from harness.fuzzing.options import (
        CoverageKind,
        FeatureMode,
        OracleKind,
        RunnerKind,
        StatsOptions,
        SUMMARY_FILE,
    )
    from harness.fuzzing.series import WORKERS_FILE

    settle_target_options(args)  # idempotent: the command line already settled them (harness.cli)
    artifacts = args.artifacts.resolve()
    differential = args.oracle == "differential"
    optimizer = args.mlir_opt if differential else None
    # the target's arguments (checked by target_from_args); the differential oracle and
    # --self have none
    own_target = not differential and not args.self_test and args.pass_args is not None
    return FuzzOptions(
        grammar=Path(args.grammar).resolve() if args.grammar else None,
        profile=profile_from_args(args),
        target=args.target,
        binary=binary,
        family=getattr(args, "family", None),
        build=build,
        pass_args=tuple(shlex.split(args.pass_args)) if own_target else None,
        pipeline=args.pipeline,
        expectations=Path(args.expectations).resolve() if args.expectations else None,
        timeout=args.timeout,
        memory_mb=args.memory_mb,
        runner=RunnerKind(args.runner or "process"),
        restart_every=args.restart_every,
        coverage=CoverageKind(args.coverage),
        grammar_features=FeatureMode(args.grammar_features),
        oracle=OracleKind(args.oracle),
        optimizer=os.path.abspath(optimizer) if optimizer and "/" in optimizer else optimizer,
        reference_runner=args.reference_runner if differential else None,
        runtime_library=args.runtime_library if differential else None,
        twins=args.twins,
        artifacts=artifacts,
        summary=artifacts / SUMMARY_FILE,
        stats=StatsOptions(artifacts / WORKERS_FILE, args.stats_interval),
        corpus=args.corpus.resolve(),
        self_test=args.self_test,
        time=args.time,
        runs=args.runs,
        jobs=args.jobs,
        seed=args.seed,
        libfuzzer_args=tuple(args.libfuzzer),
    )


def _check_target(args: argparse.Namespace, grammar):
    """The target, after the checks that must stop a campaign before it starts (no
    target, a refused pipeline or a target that refuses the grammar's programs, no
    persistent driver, no coverage map); ``args.runner`` gets its default.  Returns
    (target, None) or (None, exit status)."""
    try:
        target = target_for_grammar(args, grammar)
    except TargetError as error:
        return None, _error(str(error))
    coverage_binary = target.argv[0]
    from harness.targets.target import TargetNotFound
    from harness.run.runners import default_runner_kind

    try:
        probe_pipeline(args, target, "fuzz")  # a refused pipeline: one line, exit 2
    except TargetNotFound as error:
        return None, _error(str(error))
    if args.runner is None:
        # with --coverage the map is the instrumented target's: a process per program
        # unless --runner persistent names the (instrumented) driver
        fastest = default_runner_kind(target) == "persistent" and args.coverage == "none"
        args.runner = "persistent" if fastest else "process"
    if args.runner == "persistent":
        from harness.run.driver_protocol import DriverError
        from harness.run.runners import persistent_for

        from harness.run.runners import DriverMismatch

        try:
            coverage_binary = persistent_for(target).driver[0]
        except DriverMismatch as mismatch:  # never another build in the target's place
            print(f"loomfuzz fuzz: note: --runner persistent: {mismatch}; running --runner process "
                  "with the target itself", file=sys.stderr)
            args.runner = "process"
        except DriverError as error:
            return None, _error(f"--runner persistent: {error}")
    if args.coverage != "none":
        from harness.run.afl_map import CoverageUnavailable, require_map

        try:
            require_map(coverage_binary)
        except CoverageUnavailable as error:
            return None, _error(f"--coverage {args.coverage}: {error}")
    return target, None


def _prepare_corpus(corpus: Path, grammar) -> Optional[int]:
    """Warn about unusable corpus files, seed an empty corpus; an exit status on failure."""
    from harness.fuzzing.corpus import inspect_corpus, seed_corpus

    report = inspect_corpus(corpus, grammar)
    for path, reason in report.unreadable[:10]:
        _warn(f"cannot read corpus file {path}: {reason}; skipped (libFuzzer skips or runs it as an "
              "empty input)")
    if len(report.unreadable) > 10:
        _warn(f"... and {len(report.unreadable) - 10} more unreadable corpus files")
    if report.empty:
        _note(f"{len(report.empty)} empty corpus file(s) (libFuzzer skips them), e.g. {report.empty[0]}")
    if report.noncanonical:
        _note(f"{len(report.noncanonical)} corpus file(s) are not canonical program encodings "
              f"(e.g. {report.noncanonical[0]}); they are used as they are: every byte string "
              "decodes to a program)")
    if report.readable == 0:
        try:
            written = seed_corpus(corpus, grammar)
        except OSError as error:
            return _error(f"cannot seed the corpus {corpus}: {error.strerror or error}")
        _note(f"seeded {corpus} with {written} programs (PCFG draws covering every alternative "
              "and parent/child pair of the grammar)")
    return None


def resume_command(argv) -> str:
    """The command line that runs this campaign again (and so continues it), as the user can type it."""
    import shutil

    program = sys.argv[0] if sys.argv and sys.argv[0] else "loomfuzz"
    if os.path.basename(program) == "loomfuzz":
        found = shutil.which("loomfuzz")
        if found and os.path.realpath(found) == os.path.realpath(program):
            program = "loomfuzz"  # the one on PATH
        head = [program]
    else:  # python -m harness.cli
        head = [sys.executable, "-m", "harness.cli"]
    return shlex.join([*head, *argv])


def _show_tail(result) -> None:
    """A failed campaign: the fuzz target's last lines, from its log."""
    if not result.tail:
        return
    print(f"loomfuzz fuzz: the last lines of the fuzz target's output ({result.log}):", file=sys.stderr)
    for line in result.tail:
        print(f"  | {line}", file=sys.stderr)


def _build_of(args: argparse.Namespace, target) -> tuple[str, str]:
    """(build key, binary) of the campaign: the target's, the differential oracle's optimizer,
    or loom-fuzz itself for --self."""
    if target is not None:
        return target.key, target.argv[0]
    if args.self_test:
        return "self", sys.executable
    from harness.targets.folders import build_key
    from harness.targets.identity import which

    optimizer = which(args.mlir_opt) or args.mlir_opt
    return build_key("mlir-opt", optimizer), optimizer


def run(args: argparse.Namespace) -> int:
    from harness.fuzzing.campaign import run_campaign
    from harness.fuzzing.campaign_summary import format_summary
    from harness.contract import fuzz_script
    from harness.fuzzing.libfuzzer import CampaignError, fuzz_target_script

    bad_flags = [f for f in args.libfuzzer if not f.startswith("-")]
    if bad_flags:
        return _error(f"libFuzzer flags after -- start with '-': {' '.join(bad_flags)} "
                      "(use --corpus for the corpus folder)", 2)
    target = None
    differential = args.oracle == "differential" and not args.self_test
    if differential:
        settings = oracle_from_args(args)  # unusable optimizer, toolchain or driver: one line, exit 2
        args.runner = settings.runner  # persistent (in process) where the driver is built
        if args.expectations:  # they judge the optimizer's failures (the fuzz target loads them)
            from harness.targets.expectations import ExpectationsError, load_expectations

            try:
                load_expectations(args.expectations)
            except ExpectationsError as error:
                return _error(str(error))
    grammar = grammar_from_args(args)
    if not args.self_test and not differential:
        target, status = _check_target(args, grammar)
        if status is not None:
            return status
    try:
        script = fuzz_target_script("grammar_fuzzer.py" if args.self_test else fuzz_script(grammar))
    except CampaignError as error:
        return _error(str(error))

    # the folders are the build's and the command's own (harness.targets.folders)
    key, binary = _build_of(args, target)
    if args.corpus is None:
        args.corpus = default_folder(key, "corpus")
    corpus: Path = args.corpus
    if corpus.exists() and not corpus.is_dir():
        return _error(f"--corpus {corpus} is not a folder")
    if args.artifacts is not None and args.artifacts.exists() and not args.artifacts.is_dir():
        return _error(f"--artifacts {args.artifacts} is not a folder")
    status = claim_results_folder(args, "artifacts", key, binary, "fuzz")
    if status is not None:
        return status
    try:
        corpus.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return _error(f"cannot create {error.filename}: {error.strerror}")

    # the differential oracle reads the canonical rendering, which every grammar has
    missing = missing_rendering(target, grammar) if target is not None else None
    if missing:
        return _error(missing, 2)
    status = _prepare_corpus(corpus, grammar)
    if status is not None:
        return status
    options = options_from_args(args, binary=target.argv[0] if target is not None else None,
                                build=target.describe() if target is not None else None)
    try:
        result = run_campaign(options, script)
    except OSError as error:
        return _error(f"cannot run {script}: {error.strerror or error}")
    if result.failed:
        _show_tail(result)
    sys.stderr.flush()
    argv = getattr(args, "argv", None)
    print(format_summary(options, result, resume_command(argv if argv is not None else sys.argv[1:])),
          flush=True)
    if result.interrupted:  # 128 + the signal that stopped it: 130 SIGINT, 143 SIGTERM, 129 SIGHUP
        return 128 + (result.stop_signal or 2)
    if result.finding_count:
        return 1
    # stopped at --time by loomfuzz: libFuzzer's interrupt status, not a failure
    if result.failed:
        return _error(f"the fuzz target exited with status {result.returncode} without a finding "
                      f"(its last lines above; all of its output in {result.log})", 2)
    return 0
