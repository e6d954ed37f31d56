"""``loomfuzz triage``: reproduce, bucket, minimize and report findings.

    loomfuzz triage [run] [OPTIONS] INPUT...     triage fuzz artifacts (files or folders)
    loomfuzz triage list [--db PATH]             the buckets in the database
    loomfuzz triage show BUCKET [--db PATH]      one bucket: signature, minimized program, inputs
    loomfuzz triage mark BUCKET STATUS           set a bucket's status (new, known, fixed, regressed)
    loomfuzz triage mark BUCKET duplicate-of OTHER   fold a bucket under another bucket's bug
    loomfuzz triage mark BUCKET distinct         undo a merge: the bucket is a bug of its own
    loomfuzz triage report [--db PATH] [--out DIR]   rewrite the reports from the database
    loomfuzz triage report-upstream BUCKET [-o FILE]   a bucket as a report for MLIR's maintainers, checked

``run`` is implied when the first word is not one of the actions; to triage
a file or folder literally named ``list``, ``show``, ``mark``, ``report``,
``report-upstream`` or ``run``, spell it ``triage run list`` or ``triage ./list``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands import (
    TargetError,
    claim_results_folder,
    add_divergence_arguments,
    add_grammar_arguments,
    add_oracle_arguments,
    add_runner_argument,
    add_target_arguments,
    grammar_from_args,
    help_groups,
    probe_pipeline,
    target_for_grammar,
    target_from_args,
    whole_number,
    with_examples,
)
from harness.commands.triage_database import ACTIONS, DB_NAME, PROG, database_action, fail
from harness.targets.folders import ARTIFACTS_ROOT

EXAMPLES = (
    ("loomfuzz triage --loom-opt ~/loom/build/bin/loom-raise-opt --jobs 2 artifacts/loom-opt-*/fuzz/",
     "reproduce, bucket and minimize a campaign's findings; artifacts/BUILD/triage/report.md and a "
     "lit test per bucket"),
    ("loomfuzz triage list", "the buckets in the database, with their status"),
    ("loomfuzz triage show 2", "one bucket: its signature, members, minimized program"),
)

NOTES = (
    "Inputs: files named here are always triaged (raw fuzz bytes, or .mlir text); folders are "
    "scanned recursively for libFuzzer artifacts (crash-*, timeout-*, oom-*, leak-*, ...) and "
    ".mlir files, skipping the .mlir/.json sidecars fuzz writes next to an artifact.  Inputs "
    "already in the database are not run again; a run that was killed is resumed."
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "loomfuzz triage [run] [OPTIONS] INPUT...\n"
        "       loomfuzz triage list|show BUCKET|mark BUCKET STATUS|report [--db PATH] [--out DIR]\n"
        "       loomfuzz triage report-upstream BUCKET [--db PATH] [--out DIR] [-o FILE]"
    )
    parser.description = "Reproduce, bucket, minimize and report fuzz findings."
    with_examples(parser, EXAMPLES, NOTES)
    what, where, how_hard, oracles, advanced = help_groups(
        parser, "what to triage", "where to write", "how hard", "oracles", "advanced")
    what.add_argument("words", nargs="*", metavar="INPUT",
                      help="fuzz artifacts, program files (.mlir, or the grammar's SUFFIX) or folders (or an action and its arguments)")
    add_target_arguments(what, judging=oracles, limits=advanced)
    add_grammar_arguments(what)
    add_runner_argument(advanced)
    add_oracle_arguments(oracles)
    add_divergence_arguments(oracles)
    where.add_argument("--db", metavar="PATH",
                        help="the triage database (default: triage.db beside the report, in --out)")
    where.add_argument("--out", default=None, metavar="DIR",
                       help="where the reports go (default: artifacts/BUILD/triage, e.g. "
                            "artifacts/mlir-opt-19/triage; list, show, mark and report: the one "
                            "artifacts/*/triage there is)")
    how_hard.add_argument("--jobs", "-j", type=whole_number(1), default=1, metavar="N",
                        help="target runs in parallel (default 1)")
    how_hard.add_argument("--repeat", type=whole_number(1), default=3, metavar="N",
                        help="runs per input to tell always from flaky (default 3)")
    from harness.triage.reproduce import SYMPTOM_RUNS

    how_hard.add_argument("--symptom-runs", type=whole_number(1), default=SYMPTOM_RUNS, metavar="N",
                          help="runs of an input at most to learn its symptoms, when its first --repeat "
                               f"runs disagree or show only bare crashes (default {SYMPTOM_RUNS})")
    how_hard.add_argument("--text-reduce", action="store_true",
                        help="also reduce each bucket's minimized text line by line (may leave the shape)")
    how_hard.add_argument("--max-candidates", type=whole_number(1), default=400, metavar="N",
                        help="minimization budget: candidates tested per bucket (default 400)")
    oracles.add_argument("--releases", default="auto", metavar="auto|none|PATH[,PATH...]",
                        help="with --oracle differential: the builds each wrong-code bucket's minimized "
                             "program is judged on too, under the pipeline it was found with (auto, the "
                             "default: every mlir-opt-N on PATH and the development head's mlir-opt-head and "
                             "iree-opt where found; none: no other "
                             "build); the report says which it reproduces on")
    where.add_argument("-o", "--output", metavar="FILE",
                       help="report-upstream: where the report goes (default: standard output)")
    advanced.add_argument("--no-progress", action="store_true",
                        help="no progress (default: a bar on a terminal, else a line every 2 s)")
    advanced.add_argument("--no-batch", action="store_true",
                        help="with --runner batch: first runs one process each too (default: they share "
                             "processes where the target takes --split-input-file)")


def run(args: argparse.Namespace) -> int:
    words = list(args.words)
    action = "run"
    if words and words[0] in ACTIONS:
        action = words.pop(0)
    try:
        if action == "run":
            return _run(args, words)
        return database_action(args, action, words)
    except Exception as error:  # one line for the user, whatever failed
        from harness.triage.crashdb import DatabaseError
        from harness.triage.inputs import InputError

        if isinstance(error, (DatabaseError, InputError)):
            return fail(str(error))
        raise


# ---------------------------------------------------------------------- run


def _claim_out(args: argparse.Namespace, key: str, binary: str) -> int | None:
    """``--out`` (default ``artifacts/<build>/triage``) claimed for this build's triage, and
    ``--db`` beside it by default; an exit status when another build's or command's holds it."""
    status = claim_results_folder(args, "out", key, binary, "triage")
    if status is None:
        args.out = str(args.out)
        if args.db is None:
            args.db = str(Path(args.out) / DB_NAME)
    return status


def _oracle_config(args: argparse.Namespace, findings, grammar):
    from harness.triage.oracle_runs import OracleRunConfig

    return OracleRunConfig(findings=findings, grammar=grammar, db_path=args.db, out_dir=args.out, jobs=args.jobs,
                           max_evaluations=args.max_candidates, progress=not args.no_progress)


def _oracle_run(args: argparse.Namespace, triage, describe, more=None) -> int:
    """Run an oracle's triage (harness.triage.oracle_runs), then its summary: a line on the
    findings, a line per bucket (``describe(row)``; ``more(row)``: a line under it, or None),
    where the report is."""
    try:
        s = triage()
    except KeyboardInterrupt as error:  # a stop signal: the database keeps what was committed
        _stopped_summary(args, error)
        raise
    print(f"triage: run {s.run_id}{' (resumed)' if s.resumed else ''}: {s.findings} finding(s): {s.judged} "
          f"judged now ({s.not_reproduced} not reproduced), {s.already_known} already in {args.db}; "
          f"{s.minimized} group(s) minimized in {s.seconds:.1f} s", file=sys.stderr)
    for b in s.buckets:
        print(f"bucket {b['id']}: {b['kind']}, " + describe(b) + f", {b['count']} finding(s): {b['signature']}")
        line = more(b) if more else None
        if line:
            print(f"  {line}")
    if s.report_dir:
        print(f"report: {s.report_dir}/report.md", file=sys.stderr)
    return 0


def _run_wrong_code(args: argparse.Namespace, settings, findings, grammar) -> int:
    """``--oracle differential``: the differential findings (harness.triage.wrong_code_triage)."""
    import json

    from harness.triage.releases import releases_from_option
    from harness.triage.report_markdown import release_summary
    from harness.triage.wrong_code_triage import run_wrong_code_triage

    try:
        releases = releases_from_option(args.releases)
    except ValueError as error:
        return fail(str(error))
    from harness.targets.folders import build_key
    from harness.targets.identity import which

    optimizer = which(settings.optimizer.binary) or settings.optimizer.binary
    status = _claim_out(args, build_key("mlir-opt", optimizer), optimizer)
    if status is not None:
        return status
    config = _oracle_config(args, findings, grammar)

    def describe(b) -> str:
        lit = f"; {args.out}/bucket-{b['id']}/regression.mlir" if b["lit_test"] and args.out else ""
        return f"culprit {b['culprit'] or '(whole pipeline)'}{lit}"

    def reproduces_on(b) -> str | None:
        found = json.loads(b["details"] or "{}").get("releases")
        return f"releases: {release_summary(found)}" if found else None

    return _oracle_run(args, lambda: run_wrong_code_triage(config, settings, releases=releases), describe,
                       reproduces_on)


def _run_divergence(args: argparse.Namespace, findings, grammar, inputs: list[str]) -> int:
    """The divergence findings, through this build and the reference build: the one
    ``--reference-loom-opt`` / ``--reference-mlir-opt`` names, else the one their sidecars
    record (harness.triage.divergence_triage)."""
    from harness.commands import divergence_from_args, oracle_from_args
    from harness.targets.target import TargetNotFound
    from harness.triage.divergence_triage import recorded_reference, run_divergence_triage

    if not (args.reference_loom_opt or args.reference_mlir_opt):
        recorded = recorded_reference(findings)  # gone: one line naming it, exit 2, nothing opened
        try:  # the family of the build named (mlir-opt-19 is an mlir-opt build)
            mlir = args.oracle == "differential" or target_from_args(args).name == "mlir-opt"
        except TargetError as error:
            return fail(str(error))
        setattr(args, "reference_mlir_opt" if mlir else "reference_loom_opt", recorded.binary)
        if args.compare == "output":  # the default: the comparison the findings were made with
            args.compare = recorded.compare
        print(f"{PROG}: the reference build {recorded.binary} (compare {args.compare}), as "
              f"{recorded.sidecar} records it", file=sys.stderr)
    settings = oracle_from_args(args)  # unusable: one line, exit 2 (harness.cli)
    try:
        target = None if settings is not None else target_for_grammar(args, grammar)
        if target is not None:
            probe_pipeline(args, target, "triage")
    except (TargetError, TargetNotFound) as error:
        return fail(str(error))
    target, divergence = divergence_from_args(args, target, settings)  # unusable: exit 2
    if not findings:
        return fail("no divergence finding in " + ", ".join(inputs))
    status = _claim_out(args, target.key, target.argv[0])
    if status is not None:
        return status
    config = _oracle_config(args, findings, grammar)
    return _oracle_run(args, lambda: run_divergence_triage(config, target, divergence),
                       lambda b: f"{args.out}/bucket-{b['id']}/reproduce.sh" if args.out else "")


def _run(args: argparse.Namespace, inputs: list[str]) -> int:
    from harness.run.outcome import FINDING_KINDS
    from harness.targets.target import TargetNotFound
    from harness.triage.divergence_triage import divergence_findings
    from harness.triage.oracle_runs import findings_in
    from harness.triage.pipeline import TriageConfig, run_triage
    from harness.triage.wrong_code import KINDS

    if not inputs:
        return fail("no INPUT: name fuzz artifacts, program files or folders to triage")
    grammar = grammar_from_args(args)  # a bad grammar: one line, exit 2 (harness.cli)

    if args.reference_loom_opt or args.reference_mlir_opt:
        return _run_divergence(args, divergence_findings(inputs, unrecorded=True), grammar, inputs)
    divergences = divergence_findings(inputs)
    wrong_code = findings_in(inputs, KINDS, unrecorded=True) if args.oracle == "differential" else []
    if divergences and not wrong_code:  # the reference build the findings record
        others = findings_in(inputs, [k for k in FINDING_KINDS if k != "divergence"])
        if others:
            print(f"{PROG}: note: {len(others)} other finding(s) in the inputs (e.g. {others[0]}) are no "
                  "divergence: triage them apart, naming their files", file=sys.stderr)
        return _run_divergence(args, divergences, grammar, inputs)
    if args.oracle == "differential":
        from harness.commands import oracle_from_args

        settings = oracle_from_args(args)  # unusable, even with nothing to triage: one line, exit 2
        if not wrong_code:
            return fail("no wrong-code finding in " + ", ".join(inputs))
        return _run_wrong_code(args, settings, wrong_code, grammar)
    try:
        target = target_for_grammar(args, grammar)
        probe = probe_pipeline(args, target, "triage")  # a refused pipeline: one line, exit 2
    except (TargetError, TargetNotFound) as error:
        return fail(str(error))
    status = _refuse_other_builds(args, inputs, target)
    if status is None:
        status = _claim_out(args, target.key, target.argv[0])
    if status is not None:
        return status
    config = TriageConfig(
        inputs=inputs,
        target=target,
        db_path=args.db,
        out_dir=args.out,
        jobs=args.jobs,
        repeat=args.repeat,
        symptom_runs=args.symptom_runs,
        text_reduce=args.text_reduce,
        max_minimize_evaluations=args.max_candidates,
        progress=not args.no_progress,
        grammar=grammar,
        batch=not args.no_batch,
        runner=args.runner,
    )
    try:
        s = run_triage(config)
    except TargetNotFound as error:
        return fail(str(error))
    except KeyboardInterrupt as error:  # a stop signal: its runs are killed, the database is whole
        _stopped_summary(args, error)
        raise
    print(
        f"triage: run {s.run_id}{' (resumed)' if s.resumed else ''}: {s.inputs} input(s), "
        f"{s.unique} distinct program(s): {s.reproduced} run now, {s.already_known} already in {args.db}"
        + (f"; {s.text_inputs} not programs of the grammar (triaged as text)" if s.text_inputs else "")
        + (f"; {len(s.skipped)} file(s) skipped" if s.skipped else ""),
        file=sys.stderr,
    )
    print(
        f"triage: {s.buckets} bucket(s) ({s.new_buckets} new), {s.flaky} flaky input(s), "
        f"{s.not_reproducing} input(s) not reproducing; {s.bugs} bug(s) "
        f"({s.buckets - s.bugs} bucket(s) folded as duplicates); {s.target_runs} target runs in "
        f"{s.processes + probe.processes} processes, the pipeline probe's included "
        f"({s.runs_reproduce} runs to reproduce {s.reproduced} input(s))"
        + (f"; report: {s.report_dir}/report.md" if s.report_dir else ""),
        file=sys.stderr,
    )
    return 0


def _refuse_other_builds(args: argparse.Namespace, inputs: list[str], target) -> int | None:
    """Exit status 2 and one line when the inputs hold findings another build made (their
    records say which): triage never puts them into this build's buckets."""
    from harness.triage.inputs import findings_of_other_builds
    from harness.triage.wrong_code import KINDS

    exclude = [p for p in (args.out, args.db) if p]
    other = findings_of_other_builds(inputs, target.key, target.argv[0], exclude=exclude,
                                     others=(*KINDS, "divergence"))  # other triages' findings
    if other is None:
        return None
    count, example, build = other
    print(f"{PROG}: error: {count} finding(s) in the inputs were made by {build} (e.g. {example}), not by "
          f"{target.key}, the build under test: triage them with that build, or name only this build's "
          f"findings (its folder: {ARTIFACTS_ROOT / target.key}/)", file=sys.stderr)
    return 2


def _stopped_summary(args: argparse.Namespace, error: KeyboardInterrupt) -> None:
    """What an interrupted run leaves: every input recorded so far is kept."""
    from harness.triage.crashdb import TriageDB

    why = str(error) or "SIGINT"
    try:
        with TriageDB(args.db, create=False) as db:
            counts = db.counts()
    except Exception:  # noqa: BLE001 - a summary, not a failure
        print(f"triage: stopped ({why})", file=sys.stderr)
        return
    print(
        f"triage: stopped ({why}): {args.db} holds {counts['members']} input program(s) in "
        f"{counts['buckets']} bucket(s); the same command continues where this run stopped",
        file=sys.stderr,
    )
