"""Minimization: the smallest program that is still interesting.

:func:`minimize` works on shape trees, so every candidate is a program of the
shape (it renders, it passes the checker, it can be encoded as fuzz bytes).
One step is one of these reductions, tried in this order, biggest first:

1. drop a thread (a program keeps at least one);
2. drop a site (a thread keeps at least one);
3. drop a thread's top-level ``%icall``;
4. unwrap a site (its ``scf.if``/``scf.for`` goes);
5. give a site a simpler body (:data:`BODY_ORDER`: arith < freeze < memory
   < call < loop < branch, simplest first; ``llvm.call`` -> ``func.call``).

The search is greedy: the first interesting candidate becomes the current
program and the candidates are generated anew from it, until no candidate
of the current program is interesting (a fixpoint: the result is 1-minimal
with respect to these reductions).  Every predicate answer is cached by the
tree, so no program is ever tested twice; ``evaluations`` counts the calls
that reached the predicate.

:func:`reduce_lines` is the fallback for what the grammar cannot express:
line-level delta debugging (Zeller's ddmin) on the text, also cached, with a
budget.  Its result usually leaves the shape.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from harness.core.tree import Body, Callee, Nesting, Program, Thread, make_site

__all__ = [
    "BODY_ORDER",
    "LineReduction",
    "Minimization",
    "complexity",
    "minimize",
    "reduce_lines",
    "reductions",
]

#: Body forms from the simplest to the most complex.
BODY_ORDER: tuple[Body, ...] = (
    Body.ARITH,
    Body.FREEZE,
    Body.MEMORY,
    Body.CALL,
    Body.LOOP,
    Body.BRANCH,
)
_RANK = {body: rank for rank, body in enumerate(BODY_ORDER)}


def complexity(program: Program) -> tuple:
    """A sort key: smaller is simpler (threads, sites, top-level calls, wrappers, bodies)."""
    sites = [site for thread in program.threads for site in thread.sites]
    return (
        len(program.threads),
        len(sites),
        sum(thread.icall for thread in program.threads),
        sum(site.nesting != Nesting.NONE for site in sites),
        sum(_RANK[site.body] for site in sites),
        sum(int(site.callee) for site in sites),
    )


def _replace_thread(program: Program, t: int, thread: Thread) -> Program:
    threads = list(program.threads)
    threads[t] = thread
    return Program(tuple(threads))


def _replace_site(program: Program, t: int, s: int, site) -> Program:
    thread = program.threads[t]
    sites = list(thread.sites)
    sites[s] = site
    return _replace_thread(program, t, Thread(thread.icall, tuple(sites)))


def reductions(program: Program) -> Iterator[tuple[str, Program]]:
    """(description, candidate) for every one-step reduction, biggest first."""
    threads = program.threads
    if len(threads) > 1:
        for t in range(len(threads)):
            yield f"drop thread {t}", Program(threads[:t] + threads[t + 1 :])
    for t, thread in enumerate(threads):
        if len(thread.sites) > 1:
            for s in range(len(thread.sites)):
                sites = thread.sites[:s] + thread.sites[s + 1 :]
                yield f"drop site {t}.{s}", _replace_thread(program, t, Thread(thread.icall, sites))
    for t, thread in enumerate(threads):
        if thread.icall:
            yield f"drop %icall of thread {t}", _replace_thread(program, t, Thread(False, thread.sites))
    for t, thread in enumerate(threads):
        for s, site in enumerate(thread.sites):
            if site.nesting != Nesting.NONE:
                yield f"unwrap site {t}.{s}", _replace_site(
                    program, t, s, make_site(Nesting.NONE, site.body, site.callee)
                )
    for t, thread in enumerate(threads):
        for s, site in enumerate(thread.sites):
            for body in BODY_ORDER[: _RANK[site.body]]:
                yield f"site {t}.{s}: {site.body.name.lower()} -> {body.name.lower()}", _replace_site(
                    program, t, s, make_site(site.nesting, body)
                )
            if site.body == Body.CALL and site.callee != Callee.FUNC:
                yield f"site {t}.{s}: llvm.call -> func.call", _replace_site(
                    program, t, s, make_site(site.nesting, Body.CALL, Callee.FUNC)
                )


@dataclass
class Minimization:
    """The result of :func:`minimize`."""

    program: Program
    original: Program
    evaluations: int = 0  # predicate calls (cache misses)
    candidates: int = 0  # candidates considered, cached ones included
    steps: list[str] = field(default_factory=list)  # accepted reductions, in order
    seconds: float = 0.0
    exhausted: bool = False  # stopped by max_evaluations before the fixpoint


def minimize(
    program: Program,
    still_interesting: Callable[[Program], bool],
    *,
    max_evaluations: int | None = None,
    cache: dict[Program, bool] | None = None,
) -> Minimization:
    """The greedy fixpoint of :func:`reductions` under ``still_interesting``.

    ``program`` itself is assumed interesting and never tested.  ``cache``
    (program -> answer) may be shared between calls.
    """
    start = time.monotonic()
    known = {} if cache is None else cache
    known[program] = True
    result = Minimization(program=program, original=program)
    current = program
    progress = True
    while progress:
        progress = False
        for description, candidate in reductions(current):
            result.candidates += 1
            answer = known.get(candidate)
            if answer is None:
                if max_evaluations is not None and result.evaluations >= max_evaluations:
                    result.exhausted = True
                    break
                answer = bool(still_interesting(candidate))
                known[candidate] = answer
                result.evaluations += 1
            if answer:
                current = candidate
                result.steps.append(description)
                progress = True
                break
    result.program = current
    result.seconds = time.monotonic() - start
    return result


# ------------------------------------------------------------- text (ddmin)


@dataclass
class LineReduction:
    """The result of :func:`reduce_lines`."""

    text: str
    original_lines: int
    lines: int
    evaluations: int = 0
    seconds: float = 0.0
    exhausted: bool = False


def reduce_lines(
    text: str,
    still_interesting: Callable[[str], bool],
    *,
    max_evaluations: int = 1000,
) -> LineReduction:
    """ddmin over the lines of ``text`` (assumed interesting), then single-line removal to a fixpoint."""
    start = time.monotonic()
    lines = text.splitlines(keepends=True)
    cache: dict[tuple[int, ...], bool] = {}
    state = {"evaluations": 0, "exhausted": False}

    def test(keep: tuple[int, ...]) -> bool:
        if keep in cache:
            return cache[keep]
        if state["evaluations"] >= max_evaluations:
            state["exhausted"] = True
            return False
        state["evaluations"] += 1
        answer = bool(still_interesting("".join(lines[k] for k in keep)))
        cache[keep] = answer
        return answer

    current = tuple(range(len(lines)))
    cache[current] = True
    n = 2
    while len(current) >= 2 and not state["exhausted"]:
        size = len(current)
        chunk = -(-size // n)
        subsets = [current[k : k + chunk] for k in range(0, size, chunk)]
        reduced = False
        for subset in subsets:  # reduce to a subset
            if len(subset) < size and test(subset):
                current, n, reduced = subset, 2, True
                break
        if not reduced:
            for k in range(len(subsets)):  # reduce to a complement
                complement = tuple(i for j, sub in enumerate(subsets) if j != k for i in sub)
                if len(complement) < size and test(complement):
                    current, n, reduced = complement, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= size:
                break
            n = min(size, 2 * n)
    # one-line removals to a fixpoint (ddmin's 1-minimality, cheaply re-checked)
    progress = True
    while progress and not state["exhausted"]:
        progress = False
        for k in range(len(current)):
            candidate = current[:k] + current[k + 1 :]
            if candidate and test(candidate):
                current, progress = candidate, True
                break
    reduced_text = "".join(lines[k] for k in current)
    return LineReduction(
        text=reduced_text,
        original_lines=len(lines),
        lines=len(current),
        evaluations=state["evaluations"],
        seconds=time.monotonic() - start,
        exhausted=state["exhausted"],
    )
