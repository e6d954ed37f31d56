"""Crash triage: fuzz artifacts in, one entry per distinct bug out.

The pipeline, for ``loomfuzz triage INPUT...``:

1. **Collect** (:func:`collect_inputs`).  Files named on the command line are
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
   in the database are not run again: they are only recorded as seen.

3. **Reproduce** (:func:`reproduce`) each new program ``repeat`` times on
   the target (the runner's ``run_program`` + ``judge``, the same target as
   ``fuzz``), in ``jobs`` threads.  Each run that is a finding gets a
   signature (:mod:`harness.triage.signature`); the most frequent one names the
   input's bucket; ``always`` / ``sometimes`` (flaky) / ``never`` (no
   finding: not reproducing, kept in the database without a bucket).
   Results are committed one input per transaction, in input order, from
   the main thread.

4. **Minimize** (:mod:`harness.core.reduce`) every bucket that has no
   minimized program yet, from its simplest member, over its derivation tree,
   under the predicate "same signature" (and, for a grammar whose ``CONTRACT``
   is ``P1-P24``, "the independent checker passes"); a flaky bucket's predicate
   retries a candidate until it is confident it does not reproduce.  With
   ``text_reduce``, the minimized text is then reduced line by line (ddmin)
   under "same signature" as an extra.

5. **Report** (:mod:`harness.triage.report`): ``OUT/bucket-N/`` files,
   ``report.md`` and ``report.json``.

Killed at any point, the next triage on the same database resumes the
unfinished run (same run id): recorded inputs are skipped, unminimized
buckets are minimized, and the result is the database an uninterrupted run
would have produced.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from harness.checker import check_text
from harness.contract import contract_of, describe_grammar
from harness.core.codec import decode, encode
from harness.core.grammar import CompiledGrammar, Node, default_grammar
from harness.core.parse import parse, split_programs
from harness.core.reduce import minimize, reduce_lines, sort_key
from harness.core.render import render
from harness.core.tree import decisions, describe
from harness.run.runner import Outcome, Target, Verdict, judge, run_program
from harness.run.runners import Program, Runner, make_runner
from harness.triage.crashdb import MemberRecord, TriageDB
from harness.triage.signature import Signature, signature_of

__all__ = [
    "ARTIFACT_PREFIXES",
    "Collection",
    "Input",
    "InputError",
    "Interesting",
    "Reproduction",
    "TriageConfig",
    "TriageSummary",
    "collect_inputs",
    "load_input_file",
    "reproduce",
    "run_once",
    "run_triage",
]

ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-", "minimized-from-")
_NOT_ARTIFACT_SUFFIXES = (".mlir", ".json", ".txt", ".log", ".md", ".partial")  # .partial: half-written
_SIDECAR_SUFFIXES = (".mlir", ".json")

#: A flaky bucket's predicate retries a candidate until a miss this unlikely.
FLAKY_MISS_PROBABILITY = 1e-4
MAX_ATTEMPTS = 30
#: Characters of a member's stderr kept in the database (the end: the stack dump).
STDERR_KEEP = 64 * 1024
#: Runs of a minimized program that decide always/sometimes when its bucket looked flaky.
VERIFY_FLAKY = 10


class InputError(Exception):
    """An input cannot be read; the message is one line naming the file."""


def _sha(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Input:
    path: str  # the file, or FILE#k for the k-th program of a stream
    file_sha: str  # SHA-256 of the file's bytes (of the chunk's text for a chunk)
    source: str  # "bytes" | "mlir"
    program: Node | None  # the derivation tree; None: not in the grammar, triaged as text
    text: str  # canonical rendering (program) or the text as given
    not_in_shape: str | None = None
    grammar: CompiledGrammar | None = None

    @property
    def sha(self) -> str:
        return _sha(self.text)

    @property
    def form(self) -> str:
        return "tree" if self.program is not None else "text"

    def target_text(self, target: Target) -> str:
        """The text the target reads: its rendering of the tree, or the text as given."""
        if self.program is None:
            return self.text
        return self.text if target.render == "canonical" else render(self.program, self.grammar,
                                                                       target.render)


@dataclass
class Collection:
    inputs: list[Input] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)


def _is_artifact(name: str) -> bool:
    return name.startswith(ARTIFACT_PREFIXES) and not name.endswith(_NOT_ARTIFACT_SUFFIXES)


def load_input_file(path: Path, display: str | None = None,
                    grammar: CompiledGrammar | None = None) -> list[Input]:
    """The inputs one file holds (one, or one per program of a ``// -----`` stream)."""
    display = display or str(path)
    grammar = grammar or default_grammar()
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"{display}: cannot read: {e.strerror or e}") from None
    if path.suffix != ".mlir":
        program = decode(data, grammar)
        return [Input(display, _sha(data), "bytes", program, render(program, grammar), None, grammar)]
    text = data.decode("utf-8", errors="replace")
    chunks = split_programs(text)
    if len(chunks) > 1:
        chunks = [c for c in chunks if c.strip()]
    inputs = []
    for k, chunk in enumerate(chunks, 1):
        name = display if len(chunks) == 1 else f"{display}#{k}"
        file_sha = _sha(data) if len(chunks) == 1 else _sha(chunk)
        parsed = parse(chunk, grammar)
        if parsed.tree is not None:
            inputs.append(Input(name, file_sha, "mlir", parsed.tree, render(parsed.tree, grammar),
                                None, grammar))
        else:
            inputs.append(Input(name, file_sha, "mlir", None, chunk, parsed.reason, grammar))
    return inputs


def collect_inputs(paths: Sequence[str], *, exclude: Iterable[str] = (),
                   grammar: CompiledGrammar | None = None) -> Collection:
    """Every input under ``paths`` (files as given, folders scanned); raises InputError."""
    excluded = {os.path.realpath(p) for p in exclude}
    out = Collection()
    seen_files: set[str] = set()
    for given in paths:
        p = Path(given)
        if not p.exists():
            raise InputError(f"{given}: no such file or folder")
        if p.is_file():
            real = os.path.realpath(p)
            if real not in seen_files:
                seen_files.add(real)
                out.inputs.extend(load_input_file(p, given, grammar))
            continue
        if not p.is_dir():
            raise InputError(f"{given}: not a file or a folder")
        if not os.access(p, os.R_OK | os.X_OK):
            raise InputError(f"{given}: cannot read the folder")

        def walk_error(error: OSError) -> None:
            raise InputError(f"{error.filename}: cannot read the folder: {error.strerror}")

        for root, dirs, files in os.walk(p, onerror=walk_error):
            dirs[:] = sorted(
                d for d in dirs
                if not d.startswith(".") and os.path.realpath(os.path.join(root, d)) not in excluded
            )
            names = set(files)
            for name in sorted(files):
                full = Path(root) / name
                real = os.path.realpath(full)
                if name.startswith(".") or real in excluded or real in seen_files:
                    continue
                if any(real == e or real.startswith(e + "-") for e in excluded):
                    continue  # the database's -wal/-shm files
                stem, suffix = os.path.splitext(name)
                if suffix in _SIDECAR_SUFFIXES and stem in names and _is_artifact(stem):
                    out.skipped.append((str(full), f"sidecar of {stem}"))
                    continue
                if _is_artifact(name) or suffix == ".mlir":
                    seen_files.add(real)
                    out.inputs.extend(load_input_file(full, grammar=grammar))
                else:
                    out.skipped.append((str(full), "not a fuzz artifact or .mlir file"))
    return out


# ------------------------------------------------------------ reproduction


def run_once(target: Target, text: str, runner: Runner | None = None
             ) -> tuple[Outcome, Verdict, Signature | None]:
    """One judged run: through ``runner`` (harness.run.runners) when given, else a process."""
    if runner is not None:
        result = runner.run_one(Program("triage", text))
        outcome, verdict = result.outcome, result.verdict
    else:
        outcome = run_program(target, text)
        verdict = judge(target, text, outcome)
    return outcome, verdict, signature_of(verdict)


@dataclass
class Reproduction:
    reproduction: str  # always | sometimes | never
    hits: int
    attempts: int
    signature: Signature | None
    outcome: str  # finding kind, or the outcome kind of the last run when never
    reason: str
    stderr: str | None


def reproduce(target: Target, text: str, repeat: int, runner: Runner | None = None) -> Reproduction:
    """Run ``text`` ``repeat`` times; the most frequent signature decides."""
    counts: dict[str, int] = {}
    first: dict[str, tuple[Signature, Outcome, Verdict]] = {}
    last: tuple[Outcome, Verdict] | None = None
    for _ in range(repeat):
        outcome, verdict, sig = run_once(target, text, runner)
        last = (outcome, verdict)
        if sig is not None:
            counts[sig.key] = counts.get(sig.key, 0) + 1
            first.setdefault(sig.key, (sig, outcome, verdict))
    if not counts:
        assert last is not None
        outcome, _ = last
        return Reproduction("never", 0, repeat, None, outcome.kind.value, outcome.reason, None)
    key = max(counts, key=lambda k: (counts[k], -list(first).index(k)))
    sig, outcome, verdict = first[key]
    hits = counts[key]
    return Reproduction(
        "always" if hits == repeat else "sometimes",
        hits,
        repeat,
        sig,
        verdict.kind or outcome.kind.value,
        verdict.why,
        outcome.stderr,
    )


class Interesting:
    """The minimization predicate: the candidate gives ``signature`` (within
    ``attempts`` runs) and, for trees of a grammar whose contract is P1-P24, its
    canonical rendering passes the independent checker."""

    def __init__(self, target: Target, signature: str, attempts: int = 1,
                 grammar: CompiledGrammar | None = None, runner: Runner | None = None) -> None:
        self.runner = runner
        self.grammar = grammar or default_grammar()
        self.check_contract = self.grammar.meta.get("CONTRACT") == "P1-P24"
        self.target = target
        self.signature = signature
        self.attempts = max(1, attempts)
        self.runs = 0  # target runs spent
        self.rejected_by_checker = 0
        self.last_outcome: Outcome | None = None  # the last interesting run
        self.last_hit: str | None = None  # the text of the last interesting run

    def text(self, text: str) -> bool:
        for _ in range(self.attempts):
            self.runs += 1
            outcome, _, sig = run_once(self.target, text, self.runner)
            if sig is not None and sig.key == self.signature:
                self.last_outcome, self.last_hit = outcome, text
                return True
        return False

    def program(self, program: Node) -> bool:
        canonical = render(program, self.grammar)
        if self.check_contract and check_text(canonical):
            self.rejected_by_checker += 1
            return False
        if self.target.render == "canonical":
            return self.text(canonical)
        return self.text(render(program, self.grammar, self.target.render))


def attempts_for(hits: int, attempts: int) -> int:
    """Runs a flaky bucket's predicate allows a candidate before calling it a miss."""
    if attempts <= 0 or hits >= attempts:
        return 1
    rate = max(hits / attempts, 0.05)
    return max(2, min(MAX_ATTEMPTS, math.ceil(math.log(FLAKY_MISS_PROBABILITY) / math.log(1 - rate))))


# ------------------------------------------------------------------ config


@dataclass
class TriageConfig:
    inputs: Sequence[str]
    target: Target
    db_path: str = "triage.db"
    out_dir: str | None = "triage"
    jobs: int = 1
    repeat: int = 3
    text_reduce: bool = False
    max_minimize_evaluations: int = 400
    max_text_evaluations: int = 1000
    progress: bool = True
    grammar: CompiledGrammar | None = None  # None: the default profile
    runner: str | None = None  # process | batch | persistent; None: the fastest that works


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
def _phase(pool: ThreadPoolExecutor, total: int, desc: str, enabled: bool):
    """A phase's progress bar; on any error (Ctrl-C too) the queued target runs are cancelled."""
    bar = _progress(total, desc, enabled)
    try:
        yield bar
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        bar.close()


def _tree_fields(grammar: CompiledGrammar, program: Node | None) -> dict:
    """What the database keeps of a program's tree (all None for text): its summary,
    its encoding, and (column ``sites``) the number of choices it makes."""
    if program is None:
        return {"tree": None, "data": None, "sites": None}
    return {"tree": describe(grammar, program), "data": encode(program, grammar),
            "sites": sum(1 for _ in decisions(grammar, program))}


def _contract_fields(grammar: CompiledGrammar, program: Node | None, text: str) -> dict:
    """The profile an input came from and the contract it breaks (harness.contract):
    for a tree, what its grammar says (none, edge: ..., P<n>); for text outside the
    grammar, what the independent checker finds (none, or the violated P<n>s)."""
    profile = describe_grammar(grammar)["profile"]
    if program is not None:
        return {"profile": profile, "contract": contract_of(grammar, program)}
    broken = sorted({v.rule for v in check_text(text)}, key=lambda rule: int(rule[1:]))
    return {"profile": profile, "contract": ", ".join(broken) if broken else "none"}


def _progress(total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit="input" if desc == "reproduce" else "bucket",
        file=sys.stderr,
        disable=None if enabled else True,
        leave=False,
        dynamic_ncols=True,
    )


# ---------------------------------------------------------------- minimize


@dataclass
class _MinimizeJob:
    bucket_id: int
    signature: str
    attempts: int  # runs the predicate allows a candidate (1 unless flaky)
    verify: int  # runs of the result that decide the bucket's always/sometimes
    representative: int
    program: Node | None
    text: str
    stderr: str | None


@dataclass
class _MinimizeResult:
    job: _MinimizeJob
    text: str
    program: Node | None
    runs: int
    evaluations: int
    seconds: float
    steps: list[str]
    outcome: Outcome | None  # a run of the result that gives the signature
    hits: int  # of job.verify runs of the result
    note: str | None


def _representative(db: TriageDB, bucket_id: int,
                    grammar: CompiledGrammar) -> tuple[int, Node | None, str, str | None]:
    """The simplest member: (member id, tree or None, text, stderr)."""
    best = None
    for row in db.members(bucket_id):
        if row["form"] == "tree":
            program = decode(row["data"], grammar)
            key = (0, sort_key(grammar, program), row["lines"], row["id"])
        else:
            program = None
            key = (1, (), row["lines"], row["id"])
        if best is None or key < best[0]:
            best = (key, row["id"], program, row["text"], row["stderr"])
    assert best is not None, f"bucket {bucket_id} has no member"
    return best[1], best[2], best[3], best[4]


def _verify(target: Target, text: str, signature: str, runs: int,
            runner: Runner | None = None) -> tuple[int, Outcome | None]:
    """(hits, first hit) of ``runs`` runs of ``text``."""
    hits, first = 0, None
    for _ in range(runs):
        outcome, _, sig = run_once(target, text, runner)
        if sig is not None and sig.key == signature:
            hits += 1
            first = first or outcome
    return hits, first


def _minimize_job(job: _MinimizeJob, target: Target, max_evaluations: int,
                  grammar: CompiledGrammar, runner: Runner | None = None) -> _MinimizeResult:
    """Minimize one bucket's representative, then run the result ``job.verify`` times."""
    if job.program is None:
        hits, outcome = _verify(target, job.text, job.signature, job.verify, runner)
        return _MinimizeResult(
            job, job.text, None, 0, 0, 0.0, [], outcome, hits,
            "no member is in the shape: the smallest member is kept as text "
            "(use --text-reduce to reduce it line by line)",
        )
    predicate = Interesting(target, job.signature, job.attempts, grammar, runner)
    result = minimize(job.program, grammar, predicate.program, max_evaluations=max_evaluations)
    text = render(result.tree, grammar, target.render)
    note = f"minimization stopped after {max_evaluations} candidates" if result.exhausted else None
    hits, outcome = _verify(target, text, job.signature, job.verify, runner)
    if outcome is None and predicate.last_hit == text:
        outcome = predicate.last_outcome
    return _MinimizeResult(
        job, text, result.tree, predicate.runs, result.evaluations, result.seconds,
        result.steps, outcome, hits, note,
    )


# --------------------------------------------------------------------- run


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
    db = TriageDB(config.db_path)
    try:
        run_id, resumed = db.begin_run(_target_json(target, grammar), config.repeat)
        if resumed:
            log(f"triage: resuming unfinished run {run_id} on {config.db_path}")

        # group the inputs by program, in input order
        groups: dict[str, list[Input]] = {}
        for inp in collection.inputs:
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

        target_json = _target_json(target, grammar)
        jobs = max(1, config.jobs)

        # each pool thread runs through its own worker of the runner (its own driver)
        runner = make_runner(config.runner, target, jobs=jobs)

        def reproduce_one(inp: Input) -> Reproduction:
            return reproduce(target, inp.target_text(target), config.repeat, runner)

        started = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="triage")
        with _phase(pool, len(todo), "reproduce", config.progress) as bar:
            for inp, rep in zip(todo, pool.map(reproduce_one, todo)):
                record = MemberRecord(
                    sha256=inp.sha,
                    form=inp.form,
                    **_tree_fields(grammar, inp.program),
                    text=inp.text,
                    not_in_shape=inp.not_in_shape,
                    reproduction=rep.reproduction,
                    hits=rep.hits,
                    attempts=rep.attempts,
                    outcome=rep.outcome,
                    reason=rep.reason,
                    stderr=rep.stderr[-STDERR_KEEP:] if rep.stderr else rep.stderr,
                    first_path=inp.path,
                    **_contract_fields(grammar, inp.program, inp.text),
                )
                files = [(m.path, m.file_sha) for m in groups[inp.sha]]
                db.record_member(run_id, record, files, rep.signature, target_json)
                bar.update(1)

        seconds_reproduce = time.monotonic() - started
        started = time.monotonic()

        # minimize every bucket that has no minimized program yet
        pending = []
        for bucket in db.unminimized():
            member_id, program, text, stderr = _representative(db, bucket["id"], grammar)
            rows = db.members(bucket["id"])
            hits = sum(r["hits"] for r in rows)
            attempts = sum(r["attempts"] for r in rows)
            flaky = hits < attempts
            pending.append(
                _MinimizeJob(
                    bucket["id"], bucket["signature"],
                    attempts_for(hits, attempts) if flaky else 1,
                    max(config.repeat, VERIFY_FLAKY) if flaky else config.repeat,
                    member_id, program, text, stderr,
                )
            )
        with _phase(pool, len(pending), "minimize", config.progress) as bar:
            futures = [
                pool.submit(_minimize_job, job, target, config.max_minimize_evaluations, grammar,
                            runner)
                for job in pending
            ]
            for future in futures:
                r = future.result()
                db.save_minimization(
                    r.job.bucket_id,
                    representative=r.job.representative,
                    text=r.text,
                    **_tree_fields(grammar, r.program),
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
                    contract=_contract_fields(grammar, r.program, r.text)["contract"],
                )
                bar.update(1)

        if config.text_reduce:
            reduce_jobs = []
            for bucket in db.without_text_reduction():
                rows = db.members(bucket["id"])
                hits = sum(r["hits"] for r in rows)
                attempts = sum(r["attempts"] for r in rows)
                n = 1 if bucket["reproduction"] == "always" else attempts_for(hits, attempts)
                reduce_jobs.append((bucket["id"], bucket["signature"], bucket["minimized_text"], n))

            def reduce_one(job):
                bucket_id, signature, text, n = job
                predicate = Interesting(target, signature, n, runner=runner)
                result = reduce_lines(text, predicate.text, max_evaluations=config.max_text_evaluations)
                return bucket_id, result, predicate.runs

            with _phase(pool, len(reduce_jobs), "text-reduce", config.progress) as bar:
                for bucket_id, result, runs in pool.map(reduce_one, reduce_jobs):
                    db.save_text_reduction(bucket_id, result.text, result.lines, runs)
                    bar.update(1)
        pool.shutdown(wait=True)
        runner.close()
        seconds_minimize = time.monotonic() - started

        db.finish_run(run_id)
        report_dir = None
        if config.out_dir:
            write_reports(db, config.out_dir, run_id=run_id)
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
            not_reproducing=counts["not_reproducing"],
            flaky=counts["flaky"],
            minimized=len(pending),
            report_dir=report_dir,
            seconds_reproduce=seconds_reproduce,
            seconds_minimize=seconds_minimize,
        )
    finally:
        db.close()

