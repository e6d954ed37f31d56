"""Which buckets are one bug: duplicates found after minimization.

A signature is what one run of the target shows of a bug.  A memory-corrupting
bug shows different ones from run to run (an ``LLVM ERROR``, a segmentation
fault in some walk, a bare ``SIGSEGV``), so its inputs land in several
buckets.  Once every bucket has a minimized program that has been run several
times (the *evidence*: how many of those runs gave each signature), four
kinds of links join buckets:

0. **One program, several symptoms.**  Bucket X is linked to bucket Y when an
   input of X gave Y's signature on some of its runs (X's *symptoms*, the
   runs of its members per signature, hold Y's signature): the same program
   failing in two ways is one bug.  A bare crash's symptom links nothing
   (every bug can die by a bare SIGSEGV).
1. **Evidence.**  Bucket X is linked to bucket Y when X's minimized program gave
   Y's signature most often (its most frequent signature is Y's), or at all
   when it gave X's own signature on only some runs (X is flaky).
2. **Same minimized program.**  Two buckets whose minimized programs are the
   same text, comment lines, blank lines and spacing aside: how bare crashes, kept apart by
   input until then, are grouped.  (A bare crash of an input outside the
   grammar is not minimized: it joins a bug only when its text is that bug's
   minimized program, or through its evidence.)
3. **Stack similarity.**  Same kind, crash type and message, the same crash
   point (first meaningful frame), and stacks (up to :data:`STACK_DEPTH`
   meaningful frames) whose similarity is at least :data:`SIMILARITY`: frames
   that differ only below the crash point.  The measure is CASR's
   (``casr-cluster``; the Position Dependent Model of ReBucket, Dang et al.,
   ICSE 2012), see :func:`stack_similarity`.  The crash-point condition is
   ours: two bugs whose stacks share every caller but differ where they crash
   are two bugs, and the measure alone would call them close.

Linked buckets form one bug (connected components).  Its *primary* bucket is,
in order: one whose signature is not a bare crash; one with a message; with
the most members; the oldest.  The others are its duplicates, and their
signatures the bug's aliases.  The links and the primary are functions of
the recorded runs (symptom sets, evidence, programs), not of which run or
which input came first, so the same inputs give the same bugs.  A bucket the
user merged or split by hand (``triage mark``) keeps what the user said and
takes no part in the links.

Everything here is a pure function of the buckets' rows: triage recomputes it
after every run, so a resumed run ends with the same answer.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from harness.triage.signature import meaningful_frames, run_key_of, stack_frames

__all__ = ["SIMILARITY", "STACK_DEPTH", "BucketFacts", "Duplicate", "facts_of", "find_duplicates",
           "stack_similarity"]

#: CASR's coefficients of the Position Dependent Model: distance from the top (``r``) and
#: position offset between the two stacks (``a``).
_POSITION = 0.13
_OFFSET = 0.04
#: Similarity from which two stacks with the same crash point are one bug (CASR clusters at a
#: distance of 0.3, i.e. a similarity of 0.7).
SIMILARITY = 0.7
#: Meaningful frames compared.
STACK_DEPTH = 16


def stack_similarity(first: Sequence[str], second: Sequence[str]) -> float:
    """CASR's stack similarity, in [0, 1] (1: the same stack).

    A longest-common-subsequence alignment of the two frame lists (innermost
    first) in which a frame matched at positions i and j (from 0, the crash point) adds
    ``exp(-r * max(i, j)) * exp(-a * |i - j|)``, normalised by the sum for a
    perfect match of the shorter stack, ``sum(exp(-r * k), k = 0 .. min - 1)``:
    frames near the crash point weigh most, and a frame matched at another depth
    weighs less.  Empty stacks are similar only to each other.
    """
    if not first or not second:
        return 1.0 if not first and not second else 0.0
    rows, cols = len(first), len(second)
    previous = [0.0] * (cols + 1)
    for i in range(1, rows + 1):
        current = [0.0] * (cols + 1)
        for j in range(1, cols + 1):
            if first[i - 1] == second[j - 1]:
                current[j] = previous[j - 1] + math.exp(-_POSITION * max(i - 1, j - 1)) * math.exp(-_OFFSET * abs(i - j))
            else:
                current[j] = max(current[j - 1], previous[j])
        previous = current
    perfect = sum(math.exp(-_POSITION * k) for k in range(min(rows, cols)))
    return min(1.0, previous[cols] / perfect)


@dataclass(frozen=True)
class BucketFacts:
    """What deduplication reads of one bucket."""

    id: int
    signature: str  # the bucket's key
    kind: str
    type: str
    message: str
    stack: tuple[str, ...]  # up to STACK_DEPTH meaningful frames
    evidence: Mapping[str, int]  # run key -> runs of the minimized program that gave it ("" = none)
    minimized_text: str | None
    members: int
    bare: bool
    by_user: bool  # merged or split by hand: left as it is
    #: run key -> {"runs": n, "inputs": m}: the runs of its members per signature ("" = none)
    symptoms: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def run_key(self) -> str:
        return run_key_of(self.signature)

    @property
    def evidence_runs(self) -> int:
        return sum(self.evidence.values())


@dataclass(frozen=True)
class Duplicate:
    bucket: int
    primary: int
    reasons: tuple[str, ...]  # the links that joined it, one line each


def facts_of(row: Mapping, stderr: str | None) -> BucketFacts:
    """A bucket's facts from its database row and the stderr of one of its runs."""
    evidence = json.loads(row["verify_counts"]) if row["verify_counts"] else {}
    frames = json.loads(row["frames"] or "[]")
    stack = meaningful_frames(stack_frames(stderr or ""), STACK_DEPTH) or tuple(frames)
    return BucketFacts(
        id=row["id"], signature=row["signature"], kind=row["kind"], type=row["type"],
        message=row["message"], stack=tuple(stack), evidence=evidence,
        minimized_text=row["minimized_text"], members=row["count"],
        bare=row["kind"] == "crash" and not row["message"] and not frames,
        by_user=row["duplicate_by"] == "user",
        symptoms=json.loads(row["symptoms"]) if row["symptoms"] else {},
    )


def _program_key(text: str) -> str:
    """A program's text without comment lines, blank lines and differences in spacing."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//"))


def _links(buckets: Sequence[BucketFacts]) -> list[tuple[int, int, str]]:
    by_run_key = {b.run_key: b for b in buckets if not b.bare}
    links = []
    for x in buckets:
        for key, seen in sorted(x.symptoms.items()):
            y = by_run_key.get(key)
            if y is not None and y.id != x.id and seen.get("runs"):
                links.append((x.id, y.id, f"{seen['inputs']} input(s) of bucket {x.id} gave bucket {y.id}'s "
                                          f"signature in {seen['runs']} of their runs (one program, several "
                                          f"symptoms)"))
    for x in buckets:
        runs = x.evidence_runs
        if runs:
            own = x.evidence.get(x.run_key, 0)
            most = max(x.evidence.values())
            for key, count in x.evidence.items():
                y = by_run_key.get(key)
                if y is None or y.id == x.id or not count:
                    continue
                if count == most or own < runs:
                    why = "most often" if count == most else f"while its own signature came {own} times"
                    links.append((x.id, y.id, f"bucket {x.id}'s minimized program gave bucket {y.id}'s "
                                              f"signature in {count} of {runs} runs ({why})"))
    by_text: dict[str, int] = {}
    for b in buckets:
        if b.minimized_text is None:
            continue
        first = by_text.setdefault(_program_key(b.minimized_text), b.id)
        if first != b.id:
            links.append((b.id, first, f"buckets {first} and {b.id} have the same minimized program"))
    for k, x in enumerate(buckets):
        for y in buckets[k + 1:]:
            if x.bare or y.bare or not x.stack or not y.stack:
                continue
            if (x.kind, x.type, x.message, x.stack[0]) != (y.kind, y.type, y.message, y.stack[0]):
                continue
            similarity = stack_similarity(x.stack, y.stack)
            if similarity >= SIMILARITY:
                links.append((x.id, y.id, f"buckets {x.id} and {y.id} crash at {x.stack[0]} with stacks "
                                          f"{similarity:.2f} similar"))
    return links


def find_duplicates(rows: Iterable[BucketFacts]) -> list[Duplicate]:
    """The duplicates among buckets (user-set ones excluded: they stay as the user set them)."""
    buckets = sorted((b for b in rows if not b.by_user), key=lambda b: b.id)
    parent = {b.id: b.id for b in buckets}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    links = _links(buckets)
    for x, y, _ in links:
        parent[root(x)] = root(y)
    groups: dict[int, list[BucketFacts]] = {}
    for b in buckets:
        groups.setdefault(root(b.id), []).append(b)
    reasons: dict[int, list[str]] = {}
    for x, y, why in links:
        reasons.setdefault(x, []).append(why)
        reasons.setdefault(y, []).append(why)
    out = []
    for group in groups.values():
        if len(group) == 1:
            continue
        primary = min(group, key=lambda b: (b.bare, not b.message, -b.members, b.id))
        for b in group:
            if b.id != primary.id:
                out.append(Duplicate(b.id, primary.id, tuple(dict.fromkeys(reasons.get(b.id, ())))))
    return sorted(out, key=lambda d: d.bucket)
