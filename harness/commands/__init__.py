"""One module per ``loomfuzz`` subcommand: ``configure(parser)`` and ``run(args)``.

What several commands share lives here: argument types, the grammar options
(``--grammar FILE`` / ``--profile NAME``) and the target options of ``fuzz``
and ``triage`` (the same target, the same way).
"""

from __future__ import annotations

import argparse
import shlex
import textwrap
from dataclasses import replace
from typing import Callable, Sequence

DEFAULT_TIMEOUT = 10.0
DEFAULT_MEMORY_MB = 4096


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {value}")
        return value

    return parse


def share(text: str) -> float:
    """An argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, not {value}")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def help_groups(parser: argparse.ArgumentParser, *titles: str) -> list:
    """Argument groups in the order ``--help`` shows them (what a first run needs first)."""
    return [parser.add_argument_group(title) for title in titles]


def with_examples(parser: argparse.ArgumentParser, examples: Sequence[tuple[str, str]],
                  notes: str = "") -> None:
    """End the command's help with ``examples`` (command line, what it does), then ``notes``
    (paragraphs; a paragraph indented or of one line is kept as written, the others wrapped)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    lines = ["examples:"]
    for command, what in examples:
        lines += [f"  {command}", textwrap.fill(what, 88, initial_indent="      ", subsequent_indent="      ",
                                                     break_on_hyphens=False, break_long_words=False)]
    paragraphs = []
    for paragraph in notes.strip("\n").split("\n\n") if notes.strip() else []:
        kept = paragraph.startswith(" ") or "\n  " in paragraph
        paragraphs.append(paragraph if kept else textwrap.fill(" ".join(paragraph.split()), 88,
                                                               break_on_hyphens=False, break_long_words=False))
    parser.epilog = "\n\n".join(["\n".join(lines), *paragraphs]) + "\n"


def add_target_arguments(parser, targets: Sequence[str] | None = None, *, judging=None, limits=None) -> None:
    """The target options: which tool, its binary and arguments, its limits (in ``limits``, when
    given: an argument group of their own), its expectations (in ``judging``, when given)."""
    parser.add_argument("--target", choices=targets, default=None,
                        help="the build under test: loom-opt (canonical programs; the default), "
                             "mlir-opt (upstream: $MLIR_OPT, else mlir-opt-22; oracle rendering)"
                             + ("" if targets else
                                ", or any build by name or path (mlir-opt-19; LLVM's development head: "
                                "mlir-opt-head, with every upstream pass, or iree-opt; "
                                "/opt/llvm/bin/mlir-opt, a loom-raise-opt): its family, release and "
                                "capabilities are asked of it once, shown in the summary and stored "
                                "in every finding; with --oracle differential the optimizer (default "
                                "mlir-opt-22)"))
    parser.add_argument("--loom-opt", metavar="PATH",
                        help="the loom-opt binary (default: $LOOM_OPT, else loom-opt or "
                             "loom-raise-opt on PATH)")
    from harness.targets.target import FAMILIES

    parser.add_argument("--family", choices=FAMILIES, default=None,
                        help="with --target NAME|PATH: judge the build as loom-opt (loom's pass and "
                             "expectations), mlir-opt (upstream's) or other (a tool of your own: any "
                             "clean exit is fine); default: what its --help says (it lists "
                             "--loom-lower-for-to-graph or --pass-pipeline), else you are asked")
    parser.add_argument("--pass-args", metavar='"ARGS"',
                        help="the target's arguments, one shell-quoted string; write "
                             "--pass-args='--flag ...' with '=' (default: --loom-lower-for-to-graph; "
                             "for mlir-opt --allow-unregistered-dialect)")
    parser.add_argument("--pipeline", help="a pass pipeline: flags (-x) or a textual pipeline for "
                                           "--pass-pipeline=")
    (judging or parser).add_argument("--expectations", metavar="PATH",
                                     help="expectations JSON (default: the built-in ones of the target)")
    limits = limits or parser
    limits.add_argument("--timeout", type=positive_number, default=DEFAULT_TIMEOUT, metavar="S",
                        help=f"time limit of one target run, seconds (default {DEFAULT_TIMEOUT:g})")
    limits.add_argument("--memory-mb", type=whole_number(0), default=DEFAULT_MEMORY_MB, metavar="MB",
                        help=f"address-space limit of one target run (default {DEFAULT_MEMORY_MB}; 0: none)")


class TargetOptionsConflict(Exception):
    """Two options name two different builds under test (one line; exit 2)."""


def settle_target_options(args: argparse.Namespace) -> None:
    """Make ``--target``, ``--mlir-opt`` and ``$MLIR_OPT`` name one build, once, before any
    command looks at them (no option is silently ignored):

    * without ``--oracle differential``: ``--mlir-opt PATH`` is a spelling of ``--target PATH``
      (refused beside a ``--target`` that names another build); no ``--target`` is loom-opt;
    * with it: the optimizer under test is ``--mlir-opt`` or ``--target`` (one of them, or
      both naming the same build), else ``$MLIR_OPT``, else ``mlir-opt-22``; ``args.target``
      and ``args.mlir_opt`` both name it.
    Raises :class:`TargetOptionsConflict`."""
    if not hasattr(args, "target"):
        return
    import os

    mlir, target = getattr(args, "mlir_opt", None), args.target
    if getattr(args, "oracle", "crash") != "differential":
        if mlir is not None:
            if target not in (None, "mlir-opt", mlir):
                raise TargetOptionsConflict(
                    f"--mlir-opt {mlir} and --target {target} name two builds under test: give one "
                    "(--mlir-opt PATH is another spelling of --target PATH)")
            args.target = mlir
        elif target is None:
            args.target = "loom-opt"
        return
    if target == "loom-opt":
        raise TargetOptionsConflict(
            "--oracle differential optimizes exec modules with an mlir-opt build: --target loom-opt "
            "names none (give --target PATH to the loom-raise-opt binary to use it as the optimizer)")
    named = target if target not in (None, "mlir-opt") else None
    if mlir is not None and named is not None and mlir != named:
        raise TargetOptionsConflict(f"--mlir-opt {mlir} and --target {target} name two optimizers "
                                    "under test: give one")
    from harness.targets.identity import which

    optimizer = mlir or named or os.environ.get("MLIR_OPT") or "mlir-opt-22"
    args.target = args.mlir_opt = which(optimizer) or optimizer


def add_grammar_arguments(parser) -> None:
    """``--grammar FILE`` and ``--profile NAME``: which grammar the programs come from."""
    from harness.core.grammar import default_profile, profile_names

    group = parser.add_mutually_exclusive_group()
    group.add_argument("--grammar", metavar="FILE",
                       help="a grammar file: Python defining GRAMMAR (and START, RENDERINGS, "
                            "MAX_DEPTH) or JSON of the grammar dict (default: the profile's)")
    group.add_argument("--profile", choices=sorted(profile_names()), default=None,
                       help=f"a built-in grammar (default: {default_profile()}); edge and break "
                            "leave P1-P24 on purpose and are judged by the robustness oracle")
    parser.add_argument("--break", dest="break_precondition", metavar="P<n>", default=None,
                        help="programs that break precondition P<n> alone (the break profile's "
                             "grammar for one precondition; implies --profile break)")


def profile_from_args(args: argparse.Namespace) -> str | None:
    """``--profile``, or ``break:P<n>`` for ``--break P<n>`` (harness.contract.load_grammar)."""
    precondition = getattr(args, "break_precondition", None)
    if precondition:
        return f"break:{precondition}"
    return getattr(args, "profile", None)


def grammar_from_args(args: argparse.Namespace):
    """The compiled grammar the options name; raises ``GrammarError`` (one line)."""
    from harness.contract import load_grammar
    from harness.core.compiled import GrammarError

    if getattr(args, "break_precondition", None) and getattr(args, "profile", None) not in (None, "break"):
        raise GrammarError(f"--break goes with --profile break, not --profile {args.profile}")
    if getattr(args, "break_precondition", None) and getattr(args, "grammar", None):
        raise GrammarError("--break goes with the break profile, not --grammar")
    return load_grammar(getattr(args, "grammar", None), profile_from_args(args))


def target_for_grammar(args: argparse.Namespace, grammar):
    """The target of the options, judged as ``grammar``'s programs deserve: off P1-P24
    (edge, break) only a clean outcome is owed, the robustness oracle (unless
    ``--expectations`` names a file).  Raises ``TargetError``, and ``GrammarError``
    (one line, exit 2) when the target reads a rendering the grammar does not have."""
    from harness.contract import with_robust_expectations
    from harness.core.compiled import GrammarError

    target = target_from_args(args)
    if target.family_unknown and grammar.meta.get("CONTRACT") is not None:
        # loom's programs through a build whose family nothing told: never guess (issue 46:
        # a loom build run without its pass and its expectations, 51 false findings in 300)
        raise TargetError(
            f"--target {args.target}: cannot tell which family {target.argv[0]} is ({target.family_reason}): "
            f"pass --loom-opt {args.target} for a loom build, or --family loom-opt|mlir-opt|other")
    if target.family_unknown:  # a grammar of one's own (no contract): its tool is one's own too
        target = replace(target, family_reason="a tool of its own: the grammar has no contract")
    missing = missing_rendering(target, grammar)
    if missing:
        raise GrammarError(missing)
    return replace(with_robust_expectations(target, grammar, args.expectations is not None),
                   probe_program=probe_program(grammar, target.render))


def probe_program(grammar, style: str) -> str:
    """The program the probe runs: the grammar's first program of seed 0, as ``style`` renders it."""
    from harness.core.engine import generate
    from harness.core.render import renderer

    tree = next(iter(generate(grammar, "fast", 0, 1)))
    return renderer(grammar, style).render(tree)


def missing_rendering(target, grammar) -> str | None:
    """One line when ``target`` reads a rendering ``grammar`` does not have, else None."""
    if target.render in grammar.renderings:
        return None
    return (f"--target {target.name} reads the {target.render!r} rendering, which the grammar "
            f"does not have (its renderings: {', '.join(grammar.renderings)})")


def probe_pipeline(args: argparse.Namespace, target, command: str):
    """Run the target once on a trivial module (harness.run.probe) before any
    program: raises ``PipelineRefused`` (one line; ``harness.cli`` exits 2) and
    prints a one-line note for a pipeline that changed nothing."""
    import sys

    from harness.run.probe import probe_target

    if getattr(args, "pipeline", None) is not None:
        what = f"--pipeline {args.pipeline}"
    elif getattr(args, "pass_args", None) is not None:
        what = f"--pass-args {args.pass_args}"
    else:
        what = f"the {target.name} arguments {shlex.join(target.argv[1:])}"
    result = probe_target(target, what)
    if result.note:
        print(f"loomfuzz {command}: note: {result.note}", file=sys.stderr)
    return result


def oracle_runner_from_args(args: argparse.Namespace, target, choice):
    """The runner of ``choice`` (harness.oracles.choice) with the options' ``--runner``, jobs,
    batch size and driver restarts, after the pass pipeline passed its probe where the target
    runs it as given (:func:`probe_pipeline`; the differential oracle probes its optimizer
    itself); each note on stderr in one line.  Raises ``TargetError`` (one line; exit 1),
    ``PipelineRefused`` and ``ReferenceBuildError`` (one line; exit 2)."""
    import dataclasses
    import sys

    from harness.oracles.choice import oracle_runner
    from harness.oracles.divergence_runner import ReferenceBuildError
    from harness.run.driver_protocol import DriverError
    from harness.targets.target import TargetNotFound

    if choice.differential is None:
        try:
            probe_pipeline(args, target, args.command)
        except TargetNotFound as error:
            raise TargetError(str(error)) from None
    choice = dataclasses.replace(choice, runner=getattr(args, "runner", None),
                                 jobs=getattr(args, "jobs", 1),
                                 batch_size=getattr(args, "batch_size", None),
                                 restart_every=getattr(args, "restart_every", None))
    try:
        runner = oracle_runner(target, choice)
    except DriverError as error:
        raise TargetError(str(error)) from None
    except ValueError as error:
        if choice.divergence is None:
            raise
        # a runner the two-builds oracle cannot use: one line, exit 2
        raise ReferenceBuildError(f"--runner: {error}") from None
    for note in getattr(runner, "notes", None) or ([runner.note] if runner.note else []):
        print(f"loomfuzz {args.command}: note: {note}", file=sys.stderr)
    return runner


class TargetError(Exception):
    """The target options do not name a usable target (one line for the user)."""


def claim_results_folder(args: argparse.Namespace, option: str, key: str, binary: str,
                         command: str, *, write: bool = True) -> int | None:
    """``args.<option>`` (``artifacts``, ``out``) defaults to ``artifacts/<build>/<command>``
    (harness.targets.folders) and is claimed for that build and command: a folder holding
    another build's or another command's results is one line, exit status 2 (returned).
    ``write=False``: the check alone, nothing created (before the target's probe)."""
    import sys
    from pathlib import Path

    from harness.targets.folders import FolderConflict, claim_folder, default_folder

    given = getattr(args, option, None)
    folder = Path(given) if given is not None else default_folder(key, command)
    try:
        claim_folder(folder, f"--{option}", key, binary, command, write=write)
    except FolderConflict as conflict:
        print(f"loomfuzz {command}: error: {conflict}", file=sys.stderr)
        return 2
    except OSError as failure:
        print(f"loomfuzz {command}: error: cannot create {folder}: {failure.strerror or failure}",
              file=sys.stderr)
        return 1
    if given is None:
        setattr(args, option, folder)
    return None


def target_from_args(args: argparse.Namespace):
    """The runner's Target for the options of :func:`add_target_arguments`."""
    from harness.targets.expectations import ExpectationsError
    from harness.targets.target import resolve_target, TargetNotFound

    settle_target_options(args)  # idempotent (harness.cli settled them already)
    family = getattr(args, "family", None)
    if family is not None and args.target in ("loom-opt", "mlir-opt") and family != args.target:
        raise TargetError(f"--family {family} goes with --target NAME|PATH (a build named by name or "
                          f"path), not --target {args.target}")
    try:
        pass_args = shlex.split(args.pass_args) if args.pass_args is not None else None
    except ValueError as error:
        raise TargetError(f"--pass-args: {error}") from None
    try:
        return resolve_target(
            args.target,
            loom_opt=args.loom_opt,
            pass_args=pass_args,
            pipeline=args.pipeline,
            timeout=args.timeout,
            memory_mb=args.memory_mb or None,
            expectations_path=args.expectations,
            family=family if args.target not in ("loom-opt", "mlir-opt") else None,
        )
    except (TargetNotFound, ExpectationsError) as error:
        raise TargetError(str(error)) from None


RUNNER_HELP = ("how programs run: process (one target process each), batch (many per process "
               "through --split-input-file) or persistent (long-lived fork-server drivers, native/); "
               "default: persistent where the target's driver is built, else batch; with --oracle "
               "differential, persistent executes in the driver (its --exec mode: parse, optimize, "
               "lower, JIT, run) and process or batch through mlir-opt-22 and mlir-runner-22 processes; "
               "with a reference build (default batch), persistent runs each build through the driver "
               "of its own build (mlir-opt-19: loomfuzz-mlir-driver-19), a build without one in "
               "batches, said in one line")


def add_runner_argument(parser) -> None:
    """``--runner process|batch|persistent`` (harness.run.runners), common to every command."""
    from harness.run.runners import RUNNER_KINDS

    parser.add_argument("--runner", choices=RUNNER_KINDS, default=None, help=RUNNER_HELP)


def add_sweep_arguments(parser, *, where=None, how=None, oracles=None, advanced=None) -> None:
    """How a sweep runs (``run``, ``enumerate --run``): findings folder (in ``where``), workers
    and shards (``how``), oracles (``oracles``), runner (``advanced``), each group when given."""
    (where or parser).add_argument("--artifacts", default=None, metavar="DIR",
                                   help="findings (crash-<sha1 of the program>.mlir/.json) and the sweep's "
                                        "journal (default: artifacts/BUILD/COMMAND, e.g. "
                                        "artifacts/mlir-opt-19/run; a folder holding another build's or "
                                        "command's results is refused)")
    how = how or parser
    how.add_argument("--jobs", type=whole_number(1), default=1, metavar="N",
                     help="workers at once: drivers, batches or processes (default 1)")
    how.add_argument("--shard", metavar="K/N",
                     help="run only the K-th of N equal, disjoint parts (K from 0); auto/N takes K "
                          "from JOB_COMPLETION_INDEX (Kubernetes) or SLURM_ARRAY_TASK_ID (Slurm)")
    advanced = advanced or parser
    add_runner_argument(advanced)
    advanced.add_argument("--batch-size", type=whole_number(1), metavar="N",
                          help="with --runner batch: programs per target process (--split-input-file); "
                               "default: automatic; 1: one process per program")
    advanced.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_oracle_arguments(oracles or parser)
    add_divergence_arguments(oracles or parser)


def add_divergence_arguments(parser) -> None:
    """``--reference-loom-opt`` / ``--reference-mlir-opt`` and ``--compare``: two builds
    of one tool (harness.oracles.divergence_runner)."""
    from harness.oracles.divergence_runner import COMPARISONS

    parser.add_argument("--reference-loom-opt", metavar="PATH",
                        help="a second build of loom-opt (e.g. yesterday's loom-raise-opt): every "
                             "program also goes through it with the same arguments, and another "
                             "outcome or normalised output is a divergence finding")
    parser.add_argument("--reference-mlir-opt", metavar="PATH",
                        help="a second build of mlir-opt (--target mlir-opt), or of the --mlir-opt "
                             "optimizer with --oracle differential (e.g. mlir-opt-16): as "
                             "--reference-loom-opt")
    parser.add_argument("--compare", choices=COMPARISONS, default="output",
                        help="with a reference build, what must agree: outcome (the outcome kinds), "
                             "output (default: kinds and the normalised output; with --oracle "
                             "differential a text that differs is also executed) or values (kinds "
                             "and executed values; --oracle differential)")


def divergence_from_args(args: argparse.Namespace, target, oracle=None):
    """``(target, DivergenceSettings)`` of the two-builds mode, or None without a reference
    build.  With ``oracle`` (``--oracle differential``'s settings) both builds read the exec
    rendering and their outputs are executed.  Raises ``ReferenceBuildError`` / ``OracleError``
    (one line; exit 2) when the reference is missing, does not run, or does not fit."""
    from harness.oracles.divergence_runner import (
        DivergenceSettings,
        ReferenceBuildError,
        check_reference,
        resolve_reference,
    )

    loom, mlir = getattr(args, "reference_loom_opt", None), getattr(args, "reference_mlir_opt", None)
    if not (loom or mlir):
        return None
    if loom and mlir:
        raise ReferenceBuildError("give --reference-loom-opt or --reference-mlir-opt, not both")
    flag = "--reference-loom-opt" if loom else "--reference-mlir-opt"
    compare = getattr(args, "compare", "output")
    if oracle is not None:
        from harness.oracles.divergence_execution import (
            check_reference_optimizer,
            differential_target,
            exec_divergence_settings,
        )

        if loom:
            raise ReferenceBuildError("--oracle differential compares two builds of the --mlir-opt "
                                      "optimizer: give --reference-mlir-opt")
        reference = resolve_reference(mlir, flag)
        check_reference_optimizer(oracle, reference)
        return differential_target(oracle), exec_divergence_settings(reference, oracle, compare)
    if compare == "values":
        raise ReferenceBuildError("--compare values executes both outputs: it needs --oracle differential")
    if mlir and target.name != "mlir-opt":
        raise ReferenceBuildError(f"--reference-mlir-opt goes with --target mlir-opt (or --oracle "
                                  f"differential), not --target {target.name}")
    if loom and target.name == "mlir-opt":
        raise ReferenceBuildError("--reference-loom-opt goes with --target loom-opt; for --target "
                                  "mlir-opt give --reference-mlir-opt")
    settings = DivergenceSettings(resolve_reference(loom or mlir, flag), compare)
    check_reference(target, settings, flag)
    return target, settings


def add_oracle_arguments(parser) -> None:
    """``--oracle crash|differential`` and the differential oracle's optimizer and toolchain."""
    from harness.oracles.differential_runner import DEFAULT_TWINS, ORACLES

    parser.add_argument("--oracle", choices=ORACLES, default="crash",
                        help="crash (default): judge the target's outcome by the expectations; "
                             "differential: optimize each program's exec rendering with --mlir-opt "
                             "(and --pipeline), run it and the unoptimized module with the reference "
                             "toolchain (mlir-opt-22 + mlir-runner-22) and report different printed "
                             "values as wrong-code")
    parser.add_argument("--mlir-opt", metavar="PATH", default=None,
                        help="another spelling of --target PATH for an mlir-opt build (with "
                             "--oracle differential: the optimizer under test, default "
                             "mlir-opt-22); giving both names two builds and is refused")
    parser.add_argument("--twins", type=share, metavar="SHARE", default=DEFAULT_TWINS,
                        help=f"with --oracle differential: the share of programs also judged with "
                             f"constant twins, every function run once more with one row's inputs as "
                             f"compile-time constants so the folders see them (default {DEFAULT_TWINS}; "
                             f"0: none, 1: every program); with a reference build, both builds read them")
    parser.add_argument("--reference-runner", metavar="PATH", default="mlir-runner-22",
                        help="with --oracle differential: the reference runner (default mlir-runner-22)")
    parser.add_argument("--runtime-library", metavar="PATH", default=None,
                        help="with --oracle differential: the runner's runtime library (default "
                             "/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so)")


def sweep_target(args: argparse.Namespace, grammar):
    """The target of ``run`` / ``enumerate --run``: with ``--oracle differential`` the
    programs are read in the canonical rendering (the oracle renders them for execution),
    else :func:`target_for_grammar`.  Raises ``TargetError``."""
    if getattr(args, "oracle", "crash") == "differential":
        from harness.targets.target import Target

        return Target(name="differential", argv=(args.mlir_opt,), render="canonical")
    return target_for_grammar(args, grammar)


def oracle_from_args(args: argparse.Namespace):
    """The differential oracle's settings, or None for ``--oracle crash``.  Raises
    ``OracleError`` (one line; exit 2) when the optimizer or the toolchain is unusable."""
    if getattr(args, "oracle", "crash") != "differential":
        return None
    from harness.execute.differential import Optimizer
    from harness.oracles.differential_runner import check_oracle, oracle_settings
    from harness.execute.toolchain import DEFAULT_RUNTIME, Toolchain
    from harness.targets.target import DEFAULT_MLIR_PIPELINE

    optimizer = Optimizer(args.mlir_opt or "mlir-opt-22", args.pipeline or DEFAULT_MLIR_PIPELINE,
                          timeout=getattr(args, "timeout", DEFAULT_TIMEOUT))
    toolchain = Toolchain(runner=args.reference_runner,
                          runtime_library=args.runtime_library or DEFAULT_RUNTIME)
    settings = oracle_settings(optimizer, toolchain, batch_size=getattr(args, "batch_size", None) or 24,
                               runner=getattr(args, "runner", None), twins=args.twins)
    check_oracle(settings)
    return settings


def sweep_command(args: argparse.Namespace, target, count: int, program_at, *, source: str,
                  suffix: str, origin_of, start: int = 0, shard=None) -> int:
    """The rest of ``run`` and ``enumerate --run``: the runner of the options (after the
    pipeline probe), the sweep, its summary; returns the exit status (0 no finding, 1
    findings or an error, 130 interrupted)."""
    import sys

    from harness.fuzzing.journal import JournalError
    from harness.fuzzing.sweep import format_summary, run_sweep
    from harness.targets.expectations import ExpectationsError
    from harness.targets.target import TargetNotFound

    command = args.command

    def error(message: str) -> int:
        print(f"loomfuzz {command}: error: {message}", file=sys.stderr)
        return 1

    try:
        from harness.oracles.choice import OracleChoice
        from harness.targets.expectations import load_expectations

        settings = oracle_from_args(args)
        divergence = divergence_from_args(args, target, settings)  # unusable: one line, exit 2
        # --expectations judge a differential optimizer's failures (a known upstream one: no finding)
        expectations = (load_expectations(args.expectations)
                        if settings is not None and divergence is None and args.expectations else None)
        if divergence is not None:
            target = divergence[0]
            source += f" reference={divergence[1].reference} compare={divergence[1].compare}"
        choice = OracleChoice(differential=settings, divergence=divergence[1] if divergence else None,
                              expectations=expectations)
        # the results folder before anything runs: another build's or command's is refused
        key, binary = target.key, target.argv[0]
        status = claim_results_folder(args, "artifacts", key, binary, command, write=False)
        if status is not None:
            return status
        runner = oracle_runner_from_args(args, target, choice)
        target = runner.target
    except (TargetError, TargetNotFound, ExpectationsError) as failure:
        return error(str(failure))
    try:
        with runner:
            status = claim_results_folder(args, "artifacts", key, binary, command)  # probed: stamp it
            if status is not None:
                return status
            result = run_sweep(count, program_at, runner, args.artifacts, source=source, suffix=suffix,
                               start=start, shard=shard, progress=not args.no_progress, origin_of=origin_of,
                               label=command)
    except (JournalError, TargetNotFound) as failure:
        return error(str(failure))
    except OSError as failure:
        return error(f"{failure.filename or args.artifacts}: {failure.strerror or failure}")
    sys.stderr.flush()
    print(format_summary(result, command), flush=True)
    if result.interrupted:
        return 130
    return 1 if result.findings else 0
