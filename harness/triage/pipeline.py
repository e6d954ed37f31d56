"""Crash triage: fuzz artifacts in, one entry per distinct bug out.

(The findings of ``--oracle differential``, wrong code, and of two builds of
one tool, divergences, are triaged into the same database by
:mod:`harness.triage.wrong_code_triage` and :mod:`harness.triage.divergence_triage`.)

The pipeline, for ``loomfuzz triage INPUT...``:

1. **Collect** (:func:`harness.triage.inputs.collect_inputs`).  Files named on the command line are
   always inputs.  Folders are scanned recursively (hidden entries, the
   output folder and the database skipped) for

   * fuzz artifacts: files named ``crash-*``, ``timeout-*``, ``oom-*``,
     ``leak-*``, ``slow-unit-*``, ``minimized-from-*`` without a ``.mlir``/
     ``.json``/``.txt``/``.log`` extension: raw bytes, decoded with
     :func:`harness.core.codec.decode` (every byte string is a program);
   * ``.mlir`` files: parsed with :func:`harness.core.parse.parse`; a text that
     is not in the shape is still triaged as the raw text (and said so: the
     member's form is ``text`` and it keeps the parser's reason).  A file of
     several ``// -----``-separated programs gives one input per program
     (``FILE#1``, ``FILE#2``...).

   Sidecars: a ``NAME.mlir`` or ``NAME.json`` next to a raw artifact
   ``NAME`` (what ``fuzz`` writes beside libFuzzer's file) is the same
   finding, not a second input: it is skipped.  Anything else in a scanned
   folder (corpus files, logs) is skipped and counted.

2. **Identify.**  An input's identity is the SHA-256 of its program: the
   canonical rendering when it is in the shape (so bytes, their sidecar and
   any copy are one member), the text as given otherwise.  Inputs already
   in the database are not run again: they are only recorded as seen.  The
   new ones are processed in the order of their SHA-256 (a program's files in
   the order of their paths), whatever the order they were named or found
   in: the same inputs make the same decisions (issue 49).

3. **Reproduce** each new program on the target (the runner's
   ``run_program`` + ``judge``, the same target as ``fuzz``) through one
   :class:`harness.triage.runs.TriageRunner` (which counts every target run;
   ``--runner``, by default persistent where the target's driver is built,
   else batch), window by window (:data:`harness.triage.reproduce.WINDOW` inputs;
   the stage's code: :mod:`harness.triage.reproduce`):

   * every input runs once, in ``jobs`` threads, through each thread's
     driver, or batched where the target takes ``--split-input-file``
     (findings always re-run alone, or confirmed in a fresh worker);
   * an input without a finding runs ``repeat - 1`` more times (batched too):
     a flaky finding shows on some runs only;
   * then, in canonical order, each finding gets its *symptom profile*: an
     input whose signature is a stable bucket's (every run of its members
     gave that one signature: :func:`~harness.triage.reproduce.stable_bucket`)
     is done; any other runs ``repeat`` times in all, and when those runs do
     not agree (another signature, no finding, or bare crashes only) up to
     ``symptom_runs`` (``--symptom-runs``, default
     :data:`~harness.triage.reproduce.SYMPTOM_RUNS`).  An input whose runs
     were all bare keeps its bare signature tied to its own program
     (:meth:`Signature.for_input`).

   Each run that is a finding gets a signature (:mod:`harness.triage.signature`);
   the most frequent one (a bare one only when nothing else came; ties to
   the smaller key: :func:`~harness.triage.reproduce.majority`) names the
   input's bucket; ``always`` / ``sometimes`` (flaky) / ``never`` (no
   finding: not reproducing, kept in the database without a bucket); the
   runs per signature are kept with the input, and a bucket keeps the sum of
   its members' (its *symptoms*).  Results are committed one input per
   transaction, in canonical order, from the main thread; what an input
   needs depends only on the inputs before it, so a resumed run (which keeps
   the run's ``repeat`` and ``symptom_runs``) makes the same decisions.

4. **Minimize** (:mod:`harness.triage.minimize`, with :mod:`harness.core.reduce`) every crash bucket that has no
   minimized program yet, from its simplest member, over its derivation tree,
   under the predicate "same signature" (and, for a grammar whose contract
   has a checker, ``grammars.CONTRACT_CHECKERS``, "that checker passes"); a flaky bucket's predicate
   retries a candidate until it is confident it does not reproduce.  Every
   candidate runs through the same runner (each triage job's driver where
   there is one: a crashing candidate costs a fork, not a process start).  The
   minimized program then runs ``max(repeat, VERIFY_RUNS)`` times
   (``VERIFY_FLAKY`` for a flaky bucket): how often each signature came is the
   bucket's *evidence*.  With ``text_reduce``, the minimized text is then
   reduced line by line (ddmin) under "same signature" as an extra.

5. **Deduplicate** (:mod:`harness.triage.dedup`): buckets that are one bug
   (one program that showed both signatures, their evidence, the same
   minimized program, or similar stacks with the same crash point) are
   folded under one of them, chosen by what the buckets show, not by age
   alone; the folded buckets' signatures stay as the bug's aliases, so later
   findings with one of them join it.

6. **Report** (:mod:`harness.triage.report`): ``OUT/bucket-N/`` files,
   ``report.md``, ``report.json`` and ``report.html``.

Progress (:mod:`harness.triage.progress`): a bar on a terminal, else a line
every few seconds (inputs done, buckets, target runs, time left).

Killed at any point, the next triage on the same database resumes the
unfinished run (same run id): recorded inputs are skipped, unminimized
buckets are minimized, and the result is the database an uninterrupted run
would have produced.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from harness.contract import program_suffix
from harness.core.compiled import CompiledGrammar
from harness.core.grammar import default_grammar
from harness.core.reduce import reduce_lines
from harness.targets.target import Target
from harness.triage import minimize
from harness.triage.crashdb import MemberRecord, TriageDB
from harness.triage.dedup import facts_of, find_duplicates
from harness.triage.inputs import Input, collect_inputs
from harness.triage.minimize import (VERIFY_FLAKY, VERIFY_RUNS, Interesting, MinimizeJob, attempts_for,
                                     representative_of, verify)
from harness.triage.progress import Progress
from harness.triage.records import contract_fields, tree_fields
from harness.triage.reproduce import SYMPTOM_RUNS, WINDOW, first_runs, majority, reproduce_input
from harness.triage.runs import TriageRunner

__all__ = ["STDERR_KEEP", "TriageConfig", "TriageSummary", "run_triage"]

#: Characters of a member's stderr kept in the database (the end: the stack dump).
STDERR_KEEP = 64 * 1024


# ------------------------------------------------------------------ config


@dataclass
class TriageConfig:
    inputs: Sequence[str]
    target: Target
    db_path: str = "triage.db"
    out_dir: str | None = "triage"
    jobs: int = 1
    repeat: int = 3
    symptom_runs: int = SYMPTOM_RUNS  # --symptom-runs: runs of an input at most to learn its symptoms
    text_reduce: bool = False
    max_minimize_evaluations: int = 400
    max_text_evaluations: int = 1000
    progress: bool = True
    grammar: CompiledGrammar | None = None  # None: the default profile
    batch: bool = True  # first runs share processes where the target allows (harness.run.batch)
    runner: str | None = None  # --runner: process | batch | persistent; None: the target's default (harness.triage.runs)


@dataclass
class TriageSummary:
    run_id: int
    resumed: bool
    inputs: int  # inputs collected (files and stream chunks)
    unique: int  # distinct programs among them
    reproduced: int  # programs run this time (not in the database before)
    already_known: int  # programs the database already held
    text_inputs: int  # inputs not in the shape, triaged as text
    skipped: list[tuple[str, str]]
    new_buckets: int
    buckets: int
    not_reproducing: int
    flaky: int
    minimized: int
    report_dir: str | None
    seconds_reproduce: float = 0.0  # wall time of the reproduction phase
    seconds_minimize: float = 0.0  # wall time of minimization (and text reduction)
    bugs: int = 0  # buckets that are no duplicate of another
    runs_reproduce: int = 0  # target runs of the reproduction phase
    target_runs: int = 0  # target runs in all (a program in a batch counts once)
    processes: int = 0  # target processes started


def _target_json(target: Target, grammar: CompiledGrammar) -> dict:
    return {
        "grammar": grammar.source,
        "name": target.name,
        "argv": list(target.argv),
        "render": target.render,
        "timeout": target.timeout,
        "memory_mb": target.memory_mb,
        "expectations": target.expectations.source if target.expectations else None,
    }


@contextmanager
def _phase(pool: ThreadPoolExecutor, progress: Progress):
    """A phase's progress; on any error (Ctrl-C too) the queued target runs are cancelled."""
    try:
        with progress:
            yield progress
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise


def _deduplicate(db: TriageDB) -> None:
    """Mark the duplicates among the buckets (harness.triage.dedup), all in one transaction."""
    facts = []
    for row in db.buckets("crash"):  # an oracle's buckets are told apart by their own signature
        stderr = row["minimized_stderr"]
        if not stderr:
            stderr = next((m["stderr"] for m in db.members(row["id"]) if m["stderr"]), "")
        facts.append(facts_of(row, stderr))
    db.save_duplicates({d.bucket: (d.primary, "; ".join(d.reasons)) for d in find_duplicates(facts)})


def _reproduce_phase(config: TriageConfig, db: TriageDB, run_id: int, runner: TriageRunner,
                     pool: ThreadPoolExecutor, todo: list[Input], groups: dict[str, list[Input]],
                     grammar: CompiledGrammar) -> None:
    """Stage 3: reproduce the new inputs, window by window, and record each (in input order)."""
    target = config.target
    target_json = _target_json(target, grammar)
    jobs = max(1, config.jobs)
    bucket_keys = {row["signature"] for row in db.buckets()}

    def reproduce_status() -> str:
        return f"{len(bucket_keys)} bucket(s), {runner.runs} target runs"

    progress = Progress("reproduce", len(todo), "inputs", reproduce_status, enabled=config.progress)
    with _phase(pool, progress):
        for window_start in range(0, len(todo), WINDOW):
            window = todo[window_start:window_start + WINDOW]
            texts = [inp.target_text(target) for inp in window]
            firsts = first_runs(runner, pool, texts, jobs)
            # an input without a finding is run again whatever came before it: all at once
            quiet = [k for k, run in enumerate(firsts) if run.signature is None]
            again = first_runs(runner, pool, [texts[k] for k in quiet for _ in range(config.repeat - 1)],
                               jobs)
            more = {k: again[n * (config.repeat - 1):(n + 1) * (config.repeat - 1)]
                    for n, k in enumerate(quiet)}
            # in input order: what an input needs depends on the inputs recorded before it
            for k, (inp, text, first) in enumerate(zip(window, texts, firsts)):
                if k in more:
                    rep = majority([first, *more[k]])
                else:
                    rep = reproduce_input(text, first, runner, pool, db, config.repeat, config.symptom_runs)
                signature = rep.signature.for_input(inp.sha) if rep.signature is not None else None
                record = MemberRecord(
                    sha256=inp.sha,
                    form=inp.form,
                    **tree_fields(grammar, inp.program),
                    text=inp.text,
                    not_in_shape=inp.not_in_shape,
                    reproduction=rep.reproduction,
                    hits=rep.hits,
                    attempts=rep.attempts,
                    outcome=rep.outcome,
                    reason=rep.reason,
                    stderr=rep.stderr[-STDERR_KEEP:] if rep.stderr else rep.stderr,
                    first_path=inp.path,
                    **contract_fields(grammar, inp.program, inp.text),
                    signatures=json.dumps(rep.counts, sort_keys=True),
                )
                files = [(m.path, m.file_sha) for m in groups[inp.sha]]
                db.record_member(run_id, record, files, signature, target_json)
                if signature is not None:
                    bucket_keys.add(signature.key)
                progress.update()


def _minimize_phase(config: TriageConfig, db: TriageDB, runner: TriageRunner, pool: ThreadPoolExecutor,
                    grammar: CompiledGrammar) -> int:
    """Stage 4: minimize every crash bucket without a minimized program; how many there were."""
    pending = []
    for bucket in db.unminimized():
        member_id, program, text, stderr = representative_of(db, bucket["id"], grammar)
        rows = db.members(bucket["id"])
        hits = sum(r["hits"] for r in rows)
        attempts = sum(r["attempts"] for r in rows)
        flaky = hits < attempts
        pending.append(
            MinimizeJob(
                bucket["id"], bucket["signature"],
                attempts_for(hits, attempts) if flaky else 1,
                max(config.repeat, VERIFY_FLAKY if flaky else VERIFY_RUNS),
                member_id, program, text, stderr,
            )
        )

    def minimize_status() -> str:
        return f"{runner.runs} target runs"

    progress = Progress("minimize", len(pending), "buckets", minimize_status, enabled=config.progress)
    with _phase(pool, progress):
        futures = [
            pool.submit(minimize.minimize_job, job, runner, config.max_minimize_evaluations, grammar)
            for job in pending
        ]
        for future in futures:
            r = future.result()
            db.save_minimization(
                r.job.bucket_id,
                representative=r.job.representative,
                text=r.text,
                **tree_fields(grammar, r.program),
                in_shape=r.program is not None,
                stderr=r.outcome.stderr if r.outcome else r.job.stderr,
                signal=r.outcome.signal if r.outcome else None,
                returncode=r.outcome.returncode if r.outcome else None,
                hits=r.hits,
                attempts=r.job.verify,
                runs=r.runs,
                evaluations=r.evaluations,
                seconds=r.seconds,
                steps=r.steps,
                note=r.note,
                contract=contract_fields(grammar, r.program, r.text)["contract"],
                verify_counts=r.counts,
            )
            progress.update()
    return len(pending)


def _text_reduce_phase(config: TriageConfig, db: TriageDB, runner: TriageRunner, pool: ThreadPoolExecutor,
                       grammar: CompiledGrammar) -> None:
    """``--text-reduce``: each minimized text reduced line by line, under the same signature."""
    reduce_jobs = []
    for bucket in db.without_text_reduction():
        rows = db.members(bucket["id"])
        hits = sum(r["hits"] for r in rows)
        attempts = sum(r["attempts"] for r in rows)
        n = 1 if bucket["reproduction"] == "always" else attempts_for(hits, attempts)
        reduce_jobs.append((bucket["id"], bucket["signature"], bucket["minimized_text"], n))

    def reduce_one(job):
        bucket_id, signature, text, n = job
        predicate = Interesting(runner, signature, n, grammar)
        result = reduce_lines(text, predicate.text, max_evaluations=config.max_text_evaluations)
        return bucket_id, result, predicate.runs

    progress = Progress("text-reduce", len(reduce_jobs), "buckets", lambda: f"{runner.runs} target runs",
                        enabled=config.progress)
    with _phase(pool, progress):
        for bucket_id, result, runs in pool.map(reduce_one, reduce_jobs):
            db.save_text_reduction(bucket_id, result.text, result.lines, runs)
            progress.update()


# --------------------------------------------------------------------- run


def _as_begun(config: TriageConfig, run, log: Callable[[str], None]) -> TriageConfig:
    """A resumed run's config with the run's own ``repeat`` and ``symptom_runs`` (what
    decided its recorded inputs decides the rest)."""
    repeat = run["repeat"] or config.repeat
    symptom_runs = run["symptom_runs"] or max(SYMPTOM_RUNS, repeat)  # a run begun before schema 5
    if (repeat, symptom_runs) != (config.repeat, config.symptom_runs):
        log(f"triage: the resumed run keeps its --repeat {repeat} --symptom-runs {symptom_runs}")
    return replace(config, repeat=repeat, symptom_runs=symptom_runs)


def run_triage(config: TriageConfig, *, log: Callable[[str], None] | None = None) -> TriageSummary:
    """The whole pipeline (see the module docstring).  Raises InputError and
    harness.triage.crashdb.DatabaseError with one-line messages."""
    from harness.triage.report import write_reports

    log = log or (lambda message: print(message, file=sys.stderr))
    target = config.target
    exclude = [config.db_path]
    if config.out_dir:
        exclude.append(config.out_dir)
    grammar = config.grammar or default_grammar()
    collection = collect_inputs(config.inputs, exclude=exclude, grammar=grammar)
    runner = TriageRunner(target, batch=config.batch, kind=config.runner)
    db = TriageDB(config.db_path)
    try:
        run_id, resumed = db.begin_run(_target_json(target, grammar), config.repeat,
                                       symptom_runs=config.symptom_runs)
        if resumed:
            log(f"triage: resuming unfinished run {run_id} on {config.db_path}")
            config = _as_begun(config, db.run(run_id), log)

        # group the inputs by program; programs by SHA-256, a program's files by path: the
        # order the inputs were named or found in decides nothing
        groups: dict[str, list[Input]] = {}
        for inp in sorted(collection.inputs, key=lambda i: (i.sha, i.path)):
            groups.setdefault(inp.sha, []).append(inp)
        todo: list[Input] = []
        known = 0
        for sha, members in groups.items():
            files = [(m.path, m.file_sha) for m in members]
            member_id = db.member_id(sha)
            if member_id is None:
                todo.append(members[0])
            else:
                known += 1
                db.record_sighting(run_id, member_id, files)

        started = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=max(1, config.jobs), thread_name_prefix="triage")
        _reproduce_phase(config, db, run_id, runner, pool, todo, groups, grammar)
        runs_reproduce = runner.runs

        seconds_reproduce = time.monotonic() - started
        started = time.monotonic()

        minimized = _minimize_phase(config, db, runner, pool, grammar)

        # buckets minimized by an older loom-fuzz: their minimized programs' evidence
        for bucket in db.unverified():
            runs = max(config.repeat, VERIFY_FLAKY if bucket["reproduction"] != "always" else VERIFY_RUNS)
            _, _, counts = verify(runner, bucket["minimized_text"], bucket["signature"], runs)
            db.save_evidence(bucket["id"], counts)
        if config.progress:
            log("triage: looking for duplicates among the buckets")
        _deduplicate(db)

        if config.text_reduce:
            _text_reduce_phase(config, db, runner, pool, grammar)
        pool.shutdown(wait=True)
        seconds_minimize = time.monotonic() - started

        db.finish_run(run_id)
        report_dir = None
        if config.out_dir:
            if config.progress:
                log(f"triage: writing the reports to {config.out_dir}")
            write_reports(db, config.out_dir, suffix=program_suffix(grammar), run_id=run_id)
            report_dir = config.out_dir
        counts = db.counts()
        run = db.run(run_id)
        return TriageSummary(
            run_id=run_id,
            resumed=resumed,
            inputs=len(collection.inputs),
            unique=len(groups),
            reproduced=len(todo),
            already_known=known,
            text_inputs=sum(1 for i in collection.inputs if i.program is None),
            skipped=collection.skipped,
            new_buckets=run["new_buckets"],
            buckets=counts["buckets"],
            bugs=counts["bugs"],
            not_reproducing=counts["not_reproducing"],
            flaky=counts["flaky"],
            minimized=minimized,
            report_dir=report_dir,
            seconds_reproduce=seconds_reproduce,
            seconds_minimize=seconds_minimize,
            runs_reproduce=runs_reproduce,
            target_runs=runner.runs,
            processes=runner.processes,
        )
    finally:
        runner.close()
        db.close()

