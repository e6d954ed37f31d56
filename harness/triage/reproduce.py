"""Crash triage, stage 3: reproduce each input (see :mod:`harness.triage.pipeline`).

Every input runs once (in parallel shares, batched where the target allows);
then as many more times as it needs (:func:`extra_runs`, :func:`reproduce_input`);
:func:`majority` names the signature it reproduces with.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence

from harness.triage.crashdb import TriageDB
from harness.triage.runs import Run, TriageRunner
from harness.triage.signature import Signature

__all__ = ["BARE_RUNS", "WINDOW", "Reproduction", "extra_runs", "first_runs", "majority", "reproduce_input"]

#: Runs of an input at most while it crashes with neither a message nor a frame.
BARE_RUNS = 5
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
    (ties: the first seen), a bare crash only when no run gave anything better."""
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
    key = max(informative, key=lambda k: (counts[k], -found.index(k)))
    run = first[key]
    hits = counts[key]
    return Reproduction("always" if hits == len(runs) else "sometimes", hits, len(runs), run.signature,
                        run.kind, run.why, run.outcome.stderr, counts)


def extra_runs(first: Run, db: TriageDB, repeat: int) -> int:
    """Runs an input needs after its first: none when it gave the signature of a bucket
    that always reproduced; ``repeat - 1`` when it is new, flaky or gave no finding.
    (A bare crash is re-run apart: see :func:`reproduce_input`; the runs of inputs without a
    finding are made together, batched where the target allows.)"""
    if first.signature is not None:
        bucket = db.bucket_by_signature(first.signature.key)
        if bucket is not None and bucket["reproduction"] == "always":
            return 0
    return repeat - 1


def first_runs(runner: TriageRunner, pool: ThreadPoolExecutor, texts: list[str], jobs: int) -> list[Run]:
    """One run of each text, in ``jobs`` parallel shares (each batched where the target allows)."""
    if not texts:
        return []
    share = math.ceil(len(texts) / jobs)
    slices = [texts[k:k + share] for k in range(0, len(texts), share)]
    return [run for runs in pool.map(runner.first_runs, slices) for run in runs]


def reproduce_input(text: str, first: Run, runner: TriageRunner, pool: ThreadPoolExecutor,
               db: TriageDB, repeat: int) -> Reproduction:
    """A finding's reproduction from its first run and the runs it needs after it."""
    runs = [first]
    if first.signature is not None and first.signature.bare:
        # a bare crash tells nothing: run again until a run shows a message or frames
        while len(runs) < max(BARE_RUNS, repeat) and all(
                r.signature is None or r.signature.bare for r in runs):
            runs += runner.outcomes(text)
        return majority(runs)
    more = extra_runs(first, db, repeat)
    runs += [run for batch in pool.map(lambda _: runner.outcomes(text), range(more)) for run in batch]
    return majority(runs)
