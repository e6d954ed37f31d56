"""The default profile's shape, as the tests name programs: threads of sites.

The product has no such model (its structure comes from the grammar alone);
the tests keep one so that they can name exact programs the spec talks about
(``t0[icall; for:freeze] t1[if:call/llvm]``) and build their trees through the
public walk with recorded choices (:class:`harness.core.walk.ReplayModel`).
The spec fixes the order of the choices: threads (C1); per thread the
top-level call (C6) and the number of sites (C3); per site its nesting (C7),
body (C8) and, for the call form, callee (C9).
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import NamedTuple

from harness.core.grammar import default_grammar
from harness.core.tree import decisions
from harness.core.walk import ReplayModel, walk

G = default_grammar()


def _roomy_grammar():
    """The default grammar edited to allow up to 4 threads of up to 4 sites (the
    tests' programs outside the default profile); same terminals, same texts."""
    import copy

    import grammars.program_shape as shape
    from harness.core.grammar import compile_grammar

    grammar = copy.deepcopy(shape.GRAMMAR)
    grammar["<threads>"] = ["<thread>" * k for k in range(1, 5)]
    grammar["<sites>"] = ["<site>" * k for k in range(1, 5)]
    return compile_grammar(grammar, shape.START, shape.RENDERINGS)


ROOMY = _roomy_grammar()


class Nesting(IntEnum):
    NONE = 0
    IF = 1
    FOR = 2


class Body(IntEnum):
    ARITH = 0
    MEMORY = 1
    BRANCH = 2
    FREEZE = 3
    LOOP = 4
    CALL = 5


class Callee(IntEnum):
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


def make_site(nesting: int, body: int, callee: int = 0) -> Site:
    return Site(Nesting(nesting), Body(body), Callee(callee if body == Body.CALL else 0))


ALL_SITES = tuple(dict.fromkeys(make_site(n, b, c) for n in Nesting for b in Body for c in Callee))
MINIMAL_PROGRAM = Program((Thread(False, (ALL_SITES[0],)),))


def choices(program: Program) -> list[int]:
    out = [len(program.threads) - 1]
    for thread in program.threads:
        out += [int(thread.icall), len(thread.sites) - 1]
        for site in thread.sites:
            out += [int(site.nesting), int(site.body)]
            if site.body == Body.CALL:
                out.append(int(site.callee))
    return out


def to_tree(program: Program, grammar=G):
    """The derivation tree of the default grammar (or ``grammar``) for ``program``."""
    return walk(grammar, ReplayModel(choices(program)))


def from_tree(tree) -> Program:
    """The program a default-grammar tree stands for (read off its choices)."""
    made = [(G.names[n], a) for n, a in decisions(G, tree)]
    it = iter(made)
    threads = []
    _, t = next(it)
    for _ in range(t + 1):
        (_, icall), (_, s) = next(it), next(it)
        sites = []
        for _ in range(s + 1):
            (_, nesting), (_, body) = next(it), next(it)
            callee = next(it)[1] if body == Body.CALL else 0
            sites.append(make_site(nesting, body, callee))
        threads.append(Thread(bool(icall), tuple(sites)))
    return Program(tuple(threads))


def shape(program: Program) -> str:
    """``t0[icall; for:freeze, arith] t1[if:call/llvm]``."""
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
        parts.append(f"t{t}[{'icall; ' if thread.icall else ''}{', '.join(sites)}]")
    return " ".join(parts)


def from_shape(text: str) -> Program:
    threads = []
    for match in re.finditer(r"t\d+\[(icall; )?([^\]]*)\]", text):
        sites = []
        for item in match.group(2).split(", "):
            nesting, _, rest = item.rpartition(":")
            body, _, callee = rest.partition("/")
            sites.append(make_site(Nesting[nesting.upper()] if nesting else Nesting.NONE,
                                   Body[body.upper()], Callee[callee.upper()] if callee else 0))
        threads.append(Thread(bool(match.group(1)), tuple(sites)))
    return Program(tuple(threads))


def site_count(program: Program) -> int:
    return sum(len(t.sites) for t in program.threads)


def render_program(program: Program, style: str = "canonical") -> str:
    """The program's text in the default grammar's rendering ``style``."""
    from harness.core.render import render

    return render(to_tree(program, ROOMY), ROOMY, style)


def encode_program(program: Program) -> bytes:
    from harness.core.codec import encode

    return encode(to_tree(program), G)


def decode_program(data: bytes) -> Program:
    from harness.core.codec import decode

    return from_tree(decode(data, G))


def random_programs(seed: int, count: int | None = None):
    from harness.core.walk import random_trees

    for tree in random_trees(G, seed, count):
        yield from_tree(tree)
