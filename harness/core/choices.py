"""The choice sequence: one walk over the grammar's decisions builds a tree.

As in Hypothesis, every way of making a program (random generation, decoding
fuzz bytes, replaying a mutation) is the same walk with a different source of
choices.  The walk asks, in this order: how many threads; then per thread
whether it has the top-level call and how many sites; then per site its
nesting, its body and, for the call form only, its callee.

Each decision also has a fixed *slot*: its place in a layout that reserves
room for the largest program of the profile (2 threads of 2 sites), whatever
was chosen before.  The byte codec reads slot ``k`` from byte ``k``, so a
changed byte changes exactly one decision, never the meaning of the bytes
after it: libFuzzer's byte mutations stay local structural changes.

A ``draw`` is any ``Callable[[Decision, int], int]`` taking the decision and
its slot and returning the alternative's index.  :func:`build` is the one
place that knows the order and the layout; the engine and the codec only
supply draws.
"""

from __future__ import annotations

from bisect import bisect_right
from random import Random
from typing import Callable, Iterator

from harness.core.grammar import BODY, CALLEE, DECISIONS, NESTING, SITES, THREADS, TOP_CALL, Decision
from harness.core.tree import SITES as SITE_TABLE
from harness.core.tree import MAX_SITES, MAX_THREADS, Body, Program, Site, Thread

Draw = Callable[[Decision, int], int]

THREADS_DECISION = DECISIONS[THREADS]
TOP_CALL_DECISION = DECISIONS[TOP_CALL]
SITES_DECISION = DECISIONS[SITES]
NESTING_DECISION = DECISIONS[NESTING]
BODY_DECISION = DECISIONS[BODY]
CALLEE_DECISION = DECISIONS[CALLEE]

_CALL = int(Body.CALL)

# The slot layout: [threads] then per thread [top-call, sites] and per site
# [nesting, body, callee].
SITE_SLOTS = 3
THREAD_SLOTS = 2 + SITE_SLOTS * MAX_SITES
SLOT_COUNT = 1 + THREAD_SLOTS * MAX_THREADS


def thread_slot(thread: int) -> int:
    return 1 + THREAD_SLOTS * thread


def site_slot(thread: int, site: int) -> int:
    return thread_slot(thread) + 2 + SITE_SLOTS * site


def build(draw: Draw) -> Program:
    """The program the choices ``draw`` makes, in the canonical order."""
    threads = []
    for t in range(1 + draw(THREADS_DECISION, 0)):
        base = thread_slot(t)
        icall = draw(TOP_CALL_DECISION, base) == 1
        sites: list[Site] = []
        for s in range(1 + draw(SITES_DECISION, base + 1)):
            slot = site_slot(t, s)
            nesting = draw(NESTING_DECISION, slot)
            body = draw(BODY_DECISION, slot + 1)
            callee = draw(CALLEE_DECISION, slot + 2) if body == _CALL else 0
            sites.append(SITE_TABLE[nesting][body][callee])
        threads.append(Thread(icall, tuple(sites)))
    return Program(tuple(threads))


def choices_of(program: Program) -> list[tuple[Decision, int, int]]:
    """(decision, slot, alternative) for every choice :func:`build` makes for ``program``."""
    sequence = [(THREADS_DECISION, 0, len(program.threads) - 1)]
    for t, thread in enumerate(program.threads):
        base = thread_slot(t)
        sequence.append((TOP_CALL_DECISION, base, int(thread.icall)))
        sequence.append((SITES_DECISION, base + 1, len(thread.sites) - 1))
        for s, site in enumerate(thread.sites):
            slot = site_slot(t, s)
            sequence.append((NESTING_DECISION, slot, int(site.nesting)))
            sequence.append((BODY_DECISION, slot + 1, int(site.body)))
            if site.body == _CALL:
                sequence.append((CALLEE_DECISION, slot + 2, int(site.callee)))
    return sequence


def random_draw(rng: Random) -> Draw:
    """Draws that follow the PCFG's probabilities exactly (up to float precision)."""
    random = rng.random
    bounds = {id(d): d.cumulative for d in DECISIONS.values()}

    def draw(decision: Decision, slot: int) -> int:
        return bisect_right(bounds[id(decision)], random())

    return draw


def random_programs(seed: int, count: int | None = None) -> Iterator[Program]:
    """``count`` programs (endless when None) drawn from the PCFG with ``seed``."""
    draw = random_draw(Random(seed))
    produced = 0
    while count is None or produced < count:
        yield build(draw)
        produced += 1
