"""Crash triage, stage 4: minimize a bucket's simplest member (see :mod:`harness.triage.pipeline`).

:class:`Interesting` is the predicate (same signature; for a flaky bucket,
retried until a miss is unlikely: :func:`attempts_for`); :func:`minimize_job`
minimizes one bucket's representative (:func:`representative_of`) and
:func:`verify` runs the result to get the bucket's evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.contract import contract_checker
from harness.core.codec import decode
from harness.core.compiled import CompiledGrammar, Node
from harness.core.reduce import minimize, sort_key
from harness.core.render import render
from harness.run.outcome import Outcome
from harness.triage.crashdb import TriageDB
from harness.triage.runs import TriageRunner
from harness.triage.signature import run_key_of

__all__ = ["FLAKY_MISS_PROBABILITY", "MAX_ATTEMPTS", "VERIFY_FLAKY", "VERIFY_RUNS", "Interesting",
           "MinimizeJob", "MinimizeResult", "attempts_for", "minimize_job", "representative_of", "verify"]

#: A flaky bucket's predicate retries a candidate until a miss this unlikely.
FLAKY_MISS_PROBABILITY = 1e-4
MAX_ATTEMPTS = 30
#: Runs of a minimized program that decide always/sometimes when its bucket looked flaky.
VERIFY_FLAKY = 10
#: Runs of a minimized program at least (the evidence that finds duplicates).
VERIFY_RUNS = 5


class Interesting:
    """The minimization predicate: the candidate gives ``signature`` (a run key, within
    ``attempts`` runs) and, for trees of a grammar whose contract has a checker
    (harness.contract.contract_checker), its canonical rendering passes that
    independent checker."""

    def __init__(self, runner: TriageRunner, signature: str, attempts: int,
                 grammar: CompiledGrammar) -> None:
        self.grammar = grammar
        self.check_contract = contract_checker(grammar)
        self.runner = runner
        self.target = runner.target
        self.signature = run_key_of(signature)
        self.attempts = max(1, attempts)
        self.runs = 0  # target runs spent
        self.rejected_by_checker = 0
        self.last_outcome: Outcome | None = None  # the last interesting run
        self.last_hit: str | None = None  # the text of the last interesting run

    def text(self, text: str) -> bool:
        for _ in range(self.attempts):
            self.runs += 1
            (run,) = self.runner.outcomes(text)
            if run.signature is not None and run.signature.run_key == self.signature:
                self.last_outcome, self.last_hit = run.outcome, text
                return True
        return False

    def program(self, program: Node) -> bool:
        canonical = render(program, self.grammar)
        if self.check_contract is not None and self.check_contract(canonical):
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


@dataclass
class MinimizeJob:
    bucket_id: int
    signature: str
    attempts: int  # runs the predicate allows a candidate (1 unless flaky)
    verify: int  # runs of the result that decide the bucket's always/sometimes
    representative: int
    program: Node | None
    text: str
    stderr: str | None


@dataclass
class MinimizeResult:
    job: MinimizeJob
    text: str
    program: Node | None
    runs: int
    evaluations: int
    seconds: float
    steps: list[str]
    outcome: Outcome | None  # a run of the result that gives the signature
    hits: int  # of job.verify runs of the result
    counts: dict[str, int]  # run key -> runs of the result that gave it ("" -> no finding)
    note: str | None


def representative_of(db: TriageDB, bucket_id: int,
                    grammar: CompiledGrammar) -> tuple[int, Node | None, str, str | None]:
    """The simplest member: (member id, tree or None, text, stderr); ties go to the smaller
    SHA-256, not to the member recorded first."""
    best = None
    for row in db.members(bucket_id):
        if row["form"] == "tree":
            program = decode(row["data"], grammar)
            key = (0, sort_key(grammar, program), row["lines"], row["sha256"])
        else:
            program = None
            key = (1, (), row["lines"], row["sha256"])
        if best is None or key < best[0]:
            best = (key, row["id"], program, row["text"], row["stderr"])
    assert best is not None, f"bucket {bucket_id} has no member"
    return best[1], best[2], best[3], best[4]


def verify(runner: TriageRunner, text: str, signature: str,
            runs: int) -> tuple[int, Outcome | None, dict[str, int]]:
    """(hits, first hit, runs per signature) of ``runs`` runs of ``text``, each a process of
    its own (the evidence of deduplication: harness.triage.runs)."""
    hits, first, counts = 0, None, {}
    wanted = run_key_of(signature)
    for run in runner.outcomes(text, runs, fresh=True):
        key = run.signature.run_key if run.signature is not None else ""
        counts[key] = counts.get(key, 0) + 1
        if key == wanted:
            hits += 1
            first = first or run.outcome
    return hits, first, counts


def minimize_job(job: MinimizeJob, runner: TriageRunner, max_evaluations: int,
                  grammar: CompiledGrammar) -> MinimizeResult:
    """Minimize one bucket's representative, then run the result ``job.verify`` times."""
    if job.program is None:
        hits, outcome, counts = verify(runner, job.text, job.signature, job.verify)
        return MinimizeResult(
            job, job.text, None, 0, 0, 0.0, [], outcome, hits, counts,
            "no member is in the shape: the smallest member is kept as text "
            "(use --text-reduce to reduce it line by line)",
        )
    predicate = Interesting(runner, job.signature, job.attempts, grammar)
    result = minimize(job.program, grammar, predicate.program, max_evaluations=max_evaluations)
    text = render(result.tree, grammar, runner.target.render)
    note = f"minimization stopped after {max_evaluations} candidates" if result.exhausted else None
    hits, outcome, counts = verify(runner, text, job.signature, job.verify)
    if outcome is None and predicate.last_hit == text:
        outcome = predicate.last_outcome
    return MinimizeResult(
        job, text, result.tree, predicate.runs, result.evaluations, result.seconds,
        result.steps, outcome, hits, counts, note,
    )
