"""The shape tree: the one representation under generation, mutation and triage.

    Program = [Thread, Thread?]            # 1..2 threads (C1)
    Thread  = (icall: bool, sites: [Site, Site?])
    Site    = (nesting, body, callee)

Names and counters (``@thread_N``, ``%rN``, ``graph_N``) are not in the tree:
the renderer derives them from emission order, so no tree can break P16, P17
or P24.  Trees are immutable named tuples: hashable (caches, deduplication)
and cheap to build on the fuzzing hot path.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Iterator, NamedTuple


class _Choice(IntEnum):
    """An alternative's index; hashed as the int it is (Enum hashes its name, slowly)."""

    __hash__ = int.__hash__


class Nesting(_Choice):
    """What wraps a site (C7); values index the grammar's ``<site>`` alternatives."""

    NONE = 0
    IF = 1
    FOR = 2


class Body(_Choice):
    """The region body form (C8); values index the grammar's ``<region>`` alternatives."""

    ARITH = 0
    MEMORY = 1
    BRANCH = 2
    FREEZE = 3
    LOOP = 4
    CALL = 5


class Callee(_Choice):
    """The call form's callee (C9); only meaningful when the body is ``CALL``."""

    FUNC = 0
    LLVM = 1


class Site(NamedTuple):
    nesting: Nesting
    body: Body
    callee: Callee = Callee.FUNC


class Thread(NamedTuple):
    icall: bool
    sites: tuple[Site, ...]


class Program(NamedTuple):
    threads: tuple[Thread, ...]


# Limits of the default profile (C1, C3).
MAX_THREADS = 2
MAX_SITES = 2


def make_site(nesting: int, body: int, callee: int = 0) -> Site:
    """The canonical site for these choices: a callee only exists for calls."""
    return SITES[nesting][body][callee if body == Body.CALL else 0]


def _sites_for(nesting: Nesting, body: Body) -> tuple[Site, Site]:
    plain = Site(nesting, body, Callee.FUNC)
    return (plain, Site(nesting, body, Callee.LLVM) if body == Body.CALL else plain)


# Every site variant, built once: SITES[nesting][body][callee].  Non-call bodies
# share one object for both callees, so equal sites are identical.
SITES: tuple[tuple[tuple[Site, Site], ...], ...] = tuple(
    tuple(_sites_for(n, b) for b in Body) for n in Nesting
)

#: The 21 distinct site variants (3 nestings x (5 bodies + 2 callees)).
ALL_SITES: tuple[Site, ...] = tuple(
    dict.fromkeys(site for per_nesting in SITES for per_body in per_nesting for site in per_body)
)

#: The smallest program of the shape: what an empty choice sequence decodes to.
MINIMAL_PROGRAM = Program((Thread(False, (ALL_SITES[0],)),))


def iter_sites(program: Program) -> Iterator[tuple[int, int, Site]]:
    """(thread index, site index, site) in emission order."""
    for t, thread in enumerate(program.threads):
        for s, site in enumerate(thread.sites):
            yield t, s, site


def site_count(program: Program) -> int:
    return sum(len(thread.sites) for thread in program.threads)


def is_in_profile(program: Program) -> bool:
    """True when the tree is inside the default profile's limits (C1, C3)."""
    return 1 <= len(program.threads) <= MAX_THREADS and all(
        1 <= len(thread.sites) <= MAX_SITES
        and all(site == make_site(*site) for site in thread.sites)
        for thread in program.threads
    )


def describe(program: Program) -> str:
    """A one-line human summary, e.g. ``t0[icall; for:freeze, arith] t1[if:call/llvm]``."""
    parts = []
    for t, thread in enumerate(program.threads):
        sites = []
        for site in thread.sites:
            text = site.body.name.lower()
            if site.body == Body.CALL:
                text += "/" + site.callee.name.lower()
            if site.nesting != Nesting.NONE:
                text = site.nesting.name.lower() + ":" + text
            sites.append(text)
        prefix = "icall; " if thread.icall else ""
        parts.append(f"t{t}[{prefix}{', '.join(sites)}]")
    return " ".join(parts)
