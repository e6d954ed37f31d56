"""Symptom profiles: the signatures a program shows over its runs (issue 49).

A memory-corrupting bug fails differently from run to run.  Triage runs each
finding until its runs agree or a bound (:mod:`harness.triage.reproduce`) and
records its *symptom profile*, ``{run key: runs}`` ("" = a run without a
finding), as the member's ``signatures``.  A bucket's *symptoms* are the sum of
its members' profiles, ``{run key: {"runs": n, "inputs": m}}`` (n runs of m of
its members gave that signature), kept in the database (``buckets.symptoms``,
:mod:`harness.triage.schema`); a bug's are the sum over the buckets folded
together (:func:`merge_symptoms`), which the reports and ``triage show`` print
(:func:`symptom_lines`).
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

from harness.triage.signature import run_key_of

__all__ = ["add_symptoms", "member_symptoms", "merge_symptoms", "symptom_lines"]


def member_symptoms(row: Mapping) -> dict[str, int]:
    """A member's runs per signature (run key; "" = no finding): its ``signatures``, or for a
    member recorded before schema 3, its hits under its bucket's key (``bucket_signature``)
    and the rest as no finding."""
    if row["signatures"]:
        return json.loads(row["signatures"])
    counts = {"": row["attempts"] - row["hits"]} if row["attempts"] > row["hits"] else {}
    if row["hits"] and row["bucket_signature"]:
        counts[run_key_of(row["bucket_signature"])] = row["hits"]
    return counts


def add_symptoms(symptoms: dict, counts: Mapping[str, int]) -> dict:
    """``symptoms`` (a bucket's {run key: {"runs", "inputs"}}) with one more member's runs."""
    for key, runs in counts.items():
        entry = symptoms.setdefault(key, {"runs": 0, "inputs": 0})
        entry["runs"] += runs
        entry["inputs"] += 1
    return symptoms


def merge_symptoms(sets: Iterable[Mapping[str, Mapping[str, int]] | None]) -> dict[str, dict[str, int]]:
    """The symptoms of several buckets (of one bug) together; keys sorted."""
    merged: dict[str, dict[str, int]] = {}
    for symptoms in sets:
        for key, entry in (symptoms or {}).items():
            total = merged.setdefault(key, {"runs": 0, "inputs": 0})
            total["runs"] += entry["runs"]
            total["inputs"] += entry["inputs"]
    return dict(sorted(merged.items()))


def symptom_lines(symptoms: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One line per symptom, most runs first: ``41% of 600 runs, 180 input(s): KEY``
    ("no finding" for ""; a bare crash said so)."""
    total = sum(entry["runs"] for entry in symptoms.values())
    lines = []
    for key, entry in sorted(symptoms.items(), key=lambda kv: (-kv[1]["runs"], kv[0])):
        what = key or "no finding"
        if key and " | " not in key and key.startswith("crash:"):
            what += " (bare: neither a message nor a stack)"
        share = 100 * entry["runs"] / total if total else 0
        lines.append(f"{share:.0f}% of {total} runs, {entry['inputs']} input(s): {what}")
    return lines
