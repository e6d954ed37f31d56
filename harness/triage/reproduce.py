"""Crash triage, stage 3: reproduce each input (see :mod:`harness.triage.pipeline`).

Every input runs once (in parallel shares, batched where the target allows);
then as many more times as it needs to know its symptoms (:func:`reproduce_input`):
its *symptom profile*, how many of its runs gave each signature, is recorded
whole; :func:`majority` names the signature it reproduces with (the bucket it
goes to).  What an input needs depends on its own runs and on the buckets the
inputs before it (in canonical order) made, never on timing.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence

from harness.triage.crashdb import TriageDB
from harness.triage.runs import Run, TriageRunner
from harness.triage.signature import Signature

__all__ = ["SYMPTOM_RUNS", "WINDOW", "Reproduction", "first_runs", "majority", "reproduce_input", "settled",
           "stable_bucket"]

#: Runs of an input at most while its runs disagree or show neither a message nor a frame
#: (``--symptom-runs``): what it takes to see each of three equally likely symptoms with
#: a probability of about 0.6, and to give a bare crash a few chances to say more.
SYMPTOM_RUNS = 5
#: Inputs whose first runs are made together (the rest of the input waits for them).
WINDOW = 64


@dataclass
class Reproduction:
    reproduction: str  # always | sometimes | never
    hits: int
    attempts: int
    signature: Signature | None
    outcome: str  # finding kind, or the outcome kind of the last run when never
    reason: str
    stderr: str | None
    counts: dict[str, int] = field(default_factory=dict)  # run key -> runs; "" -> runs without finding


def majority(runs: Sequence[Run]) -> Reproduction:
    """The signature an input reproduces with: the most frequent over its runs
    (ties: the smallest key, whichever run came first), a bare crash only when no run
    gave anything better."""
    counts: dict[str, int] = {}
    first: dict[str, Run] = {}
    for run in runs:
        key = run.signature.run_key if run.signature is not None else ""
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, run)
    found = [k for k in counts if k]
    if not found:
        last = runs[-1]
        return Reproduction("never", 0, len(runs), None, last.kind, last.outcome.reason, None, counts)
    informative = [k for k in found if not first[k].signature.bare] or found
    key = min(informative, key=lambda k: (-counts[k], k))
    run = first[key]
    hits = counts[key]
    return Reproduction("always" if hits == len(runs) else "sometimes", hits, len(runs), run.signature,
                        run.kind, run.why, run.outcome.stderr, counts)


def stable_bucket(first: Run, db: TriageDB) -> bool:
    """Whether the first run's signature is a bucket's that always reproduced with that one
    symptom (every run of its members gave it): its inputs need no more runs."""
    if first.signature is None:
        return False
    bucket = db.bucket_by_signature(first.signature.key)
    if bucket is None or bucket["reproduction"] != "always":
        return False
    symptoms = json.loads(bucket["symptoms"]) if bucket["symptoms"] else {}
    return set(symptoms) <= {first.signature.run_key}


def settled(runs: Sequence[Run]) -> bool:
    """Runs that agree: each gave the same signature, and it is no bare crash."""
    keys = {r.signature.run_key if r.signature is not None else "" for r in runs}
    return len(keys) == 1 and runs[0].signature is not None and not runs[0].signature.bare


def first_runs(runner: TriageRunner, pool: ThreadPoolExecutor, texts: list[str], jobs: int) -> list[Run]:
    """One run of each text, in ``jobs`` parallel shares (each batched where the target allows)."""
    if not texts:
        return []
    share = math.ceil(len(texts) / jobs)
    slices = [texts[k:k + share] for k in range(0, len(texts), share)]
    return [run for runs in pool.map(runner.first_runs, slices) for run in runs]


def reproduce_input(text: str, first: Run, runner: TriageRunner, pool: ThreadPoolExecutor,
                    db: TriageDB, repeat: int, symptom_runs: int = SYMPTOM_RUNS) -> Reproduction:
    """A finding's symptom profile from its first run and the runs it needs after it:
    none when its signature is a stable bucket's (:func:`stable_bucket`); else ``repeat``
    runs in all, stopping there when they agree (:func:`settled`), and when they do not
    (another symptom, no finding, or bare crashes only) up to ``symptom_runs``."""
    runs = [first]
    if stable_bucket(first, db):
        return majority(runs)

    def more(goal: int) -> list[Run]:
        # each a process of its own: a fork server's workers share one address layout
        return [run for batch in pool.map(lambda _: runner.outcomes(text, fresh=True), range(goal - len(runs)))
                for run in batch]

    runs += more(repeat)
    if not settled(runs):
        runs += more(max(repeat, symptom_runs))
    return majority(runs)
