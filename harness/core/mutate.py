"""Structure-aware mutation and crossover for libFuzzer/atheris.

Every operator works on the shape tree: the input bytes are decoded
(:func:`harness.core.codec.decode`, total), one operator changes the tree, and the
result is encoded again (:func:`harness.core.codec.encode`, at most
``SLOT_COUNT`` = 17 bytes, truncated further when libFuzzer's ``max_size`` is
smaller: any prefix still decodes to a program of the profile).  So every
output is a valid program, whatever the input bytes were.

Mutation operators (:data:`MUTATION_OPERATORS`; weights in :data:`WEIGHTS`):

=================== =======================================================
regen_program       a whole new program drawn from the PCFG (choices.build)
regen_thread        one thread redrawn from the PCFG
regen_site          one site redrawn from the PCFG (nesting, body, callee)
set_nesting         one site's wrapper changed (none / scf.if / scf.for)
set_body            one site's body form changed (callee drawn for calls)
flip_callee         a call site's callee flipped (func.call <-> llvm.call)
toggle_icall        a thread's optional top-level ``%icall`` added/removed
add_site            a PCFG site inserted into a thread that has room
remove_site         a site removed from a thread that has two
duplicate_site      a copy of a site inserted into a thread that has room
add_thread          a PCFG thread added to a one-thread program
remove_thread       one thread of two removed
duplicate_thread    the only thread duplicated
swap_sites_within   the two sites of a thread exchanged
swap_sites_between  a site of thread 0 exchanged with a site of thread 1
swap_threads        the two threads exchanged
set_choice          one decision of the choice sequence changed (any kind:
                    thread or site count, optional call, nesting, body,
                    callee); also the last resort when the drawn operators
                    all failed, so the output differs whenever it can
bytes               a byte-level mutation of the encoding: libFuzzer's own
                    (``atheris.Mutate``) inside a running ``Fuzz()``, a
                    pure-Python one elsewhere (see :func:`use_libfuzzer`)
=================== =======================================================

Crossover operators (:data:`CROSSOVER_OPERATORS`): ``cross_site`` (a site of
the second parent replaces or joins one of the first's), ``cross_thread`` (a
thread of the second replaces or joins one of the first's), ``cross_splice``
(threads taken from both parents in order), ``cross_slots`` (each decision
slot of the encoding taken from either parent: the fixed slot layout makes a
uniform byte crossover a structural one).

An operator that does not apply (no call site to flip, no room to add) or
that yields the same program (after truncation to ``max_size``) is replaced
by another one, up to :data:`MAX_ATTEMPTS` times, then ``set_choice`` on a
decision inside ``max_size``.  An output is never empty (libFuzzer reads an
empty result as a failed mutation): the smallest program, whose encoding is
empty, is spelt ``b"\\0"``.

Determinism: all choices come from one small 64-bit LCG keyed by ``seed``
and the input bytes; the same ``(data, max_size, seed)`` gives the same
output (with the pure-Python byte mutation; libFuzzer's ``Mutate`` follows
libFuzzer's own random state).  The PCFG draws go through
:func:`harness.core.choices.random_draw`, so regenerated parts follow the
grammar's weights exactly.

:data:`COUNTS` (a ``collections.Counter``) counts every applied operator,
plus ``unchanged`` when no operator could change the program.

Speed: decoding and encoding are memoised (bounded maps), since libFuzzer
mutates the same corpus entries over and over; see
``benchmarks/bench_mutator.py``.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Optional
from zlib import crc32

from harness.core.choices import (
    BODY_DECISION,
    CALLEE_DECISION,
    NESTING_DECISION,
    SITES_DECISION,
    SLOT_COUNT,
    TOP_CALL_DECISION,
    build,
    choices_of,
    random_draw,
    site_slot,
    thread_slot,
)
from harness.core.codec import decode, encode
from harness.core.grammar import DECISIONS
from harness.core.tree import SITES as SITE_TABLE
from harness.core.tree import MAX_SITES, MAX_THREADS, Body, Program, Site, Thread

__all__ = [
    "COUNTS",
    "CROSSOVER_OPERATORS",
    "MAX_ATTEMPTS",
    "MUTATION_OPERATORS",
    "Mutator",
    "WEIGHTS",
    "custom_crossover",
    "custom_mutator",
    "python_byte_mutate",
    "use_libfuzzer",
]

MAX_ATTEMPTS = 12

_MASK64 = (1 << 64) - 1
_INV53 = 1.0 / (1 << 53)
_CALL = int(Body.CALL)
_NESTINGS = len(SITE_TABLE)
_BODIES = len(SITE_TABLE[0])


class FastRandom:
    """A 64-bit LCG (Knuth's MMIX constants): cheap to reseed, deterministic.

    Only ``random()`` is needed by :func:`harness.core.choices.random_draw`.
    """

    __slots__ = ("state",)

    def __init__(self, seed: int = 0) -> None:
        self.state = 0
        self.seed(seed)

    def seed(self, seed: int) -> None:
        # splitmix64 finaliser: nearby seeds give unrelated streams.
        z = (seed + 0x9E3779B97F4A7C15) & _MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        self.state = z ^ (z >> 31)

    def random(self) -> float:
        s = self.state = (self.state * 6364136223846793005 + 1442695040888963407) & _MASK64
        return (s >> 11) * _INV53

    def below(self, n: int) -> int:
        """An int in ``[0, n)``."""
        s = self.state = (self.state * 6364136223846793005 + 1442695040888963407) & _MASK64
        return ((s >> 32) * n) >> 32


Draw = Callable  # (Decision, slot) -> alternative index


# ------------------------------------------------------------ PCFG sub-trees


def random_site(draw: Draw, slot: int = 0) -> Site:
    """A site with the grammar's weights for nesting, body and callee."""
    nesting = draw(NESTING_DECISION, slot)
    body = draw(BODY_DECISION, slot + 1)
    callee = draw(CALLEE_DECISION, slot + 2) if body == _CALL else 0
    return SITE_TABLE[nesting][body][callee]


def random_thread(draw: Draw, index: int = 0) -> Thread:
    """A thread with the grammar's weights for the top-level call and sites."""
    base = thread_slot(index)
    icall = draw(TOP_CALL_DECISION, base) == 1
    count = 1 + draw(SITES_DECISION, base + 1)
    return Thread(icall, tuple(random_site(draw, site_slot(index, s)) for s in range(count)))


# -------------------------------------------------------------------- caches
# libFuzzer mutates the same corpus entries over and over: memoising the codec
# saves most of a mutation's time.  Both maps are bounded (cleared when full).

_CACHE_LIMIT = 1 << 14  # small: the GC scans every cached tree (named tuples stay tracked)
_decoded: dict[bytes, Program] = {}
_encoded: dict[Program, bytes] = {}


def _decode(data: bytes) -> Program:
    key = data[:SLOT_COUNT]
    if type(key) is not bytes:  # bytearray, memoryview: not hashable
        key = bytes(key)
    tree = _decoded.get(key)
    if tree is None:
        if len(_decoded) >= _CACHE_LIMIT:
            _decoded.clear()
        tree = _decoded[key] = decode(key)
    return tree


def _encode(tree: Program) -> bytes:
    data = _encoded.get(tree)
    if data is None:
        if len(_encoded) >= _CACHE_LIMIT:
            _encoded.clear()
        data = _encoded[tree] = encode(tree)
    return data


# ------------------------------------------------------------------- helpers


def _with_thread(program: Program, t: int, thread: Thread) -> Program:
    threads = list(program.threads)
    threads[t] = thread
    return Program(tuple(threads))


def _with_site(program: Program, t: int, s: int, site: Site) -> Program:
    thread = program.threads[t]
    sites = list(thread.sites)
    sites[s] = site
    return _with_thread(program, t, Thread(thread.icall, tuple(sites)))


def _pick_site(program: Program, rng: FastRandom) -> tuple[int, int]:
    """(thread, site) of a site chosen uniformly among all the program's sites."""
    threads = program.threads
    first = len(threads[0].sites)
    k = rng.below(first + (len(threads[1].sites) if len(threads) > 1 else 0))
    return (0, k) if k < first else (1, k - first)


def _other(current: int, n: int, rng: FastRandom) -> int:
    """A value in ``[0, n)`` other than ``current``, uniformly."""
    return (current + 1 + rng.below(n - 1)) % n


# ----------------------------------------------------------------- operators
# Each takes (program, rng, draw) and returns a Program or None (not applicable).


def op_regen_program(p: Program, rng: FastRandom, draw: Draw) -> Program:
    return build(draw)


def op_regen_thread(p: Program, rng: FastRandom, draw: Draw) -> Program:
    t = rng.below(len(p.threads))
    return _with_thread(p, t, random_thread(draw, t))


def op_regen_site(p: Program, rng: FastRandom, draw: Draw) -> Program:
    t, s = _pick_site(p, rng)
    return _with_site(p, t, s, random_site(draw, site_slot(t, s)))


def op_set_nesting(p: Program, rng: FastRandom, draw: Draw) -> Program:
    t, s = _pick_site(p, rng)
    site = p.threads[t].sites[s]
    return _with_site(p, t, s, SITE_TABLE[_other(site.nesting, _NESTINGS, rng)][site.body][site.callee])


def op_set_body(p: Program, rng: FastRandom, draw: Draw) -> Program:
    t, s = _pick_site(p, rng)
    site = p.threads[t].sites[s]
    body = _other(site.body, _BODIES, rng)
    callee = draw(CALLEE_DECISION, site_slot(t, s) + 2) if body == _CALL else 0
    return _with_site(p, t, s, SITE_TABLE[site.nesting][body][callee])


def op_flip_callee(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    calls = [(t, s) for t, thread in enumerate(p.threads)
             for s, site in enumerate(thread.sites) if site.body == _CALL]
    if not calls:
        return None
    t, s = calls[rng.below(len(calls))]
    site = p.threads[t].sites[s]
    return _with_site(p, t, s, SITE_TABLE[site.nesting][_CALL][1 - site.callee])


def op_toggle_icall(p: Program, rng: FastRandom, draw: Draw) -> Program:
    t = rng.below(len(p.threads))
    thread = p.threads[t]
    return _with_thread(p, t, Thread(not thread.icall, thread.sites))


def _roomy(p: Program) -> list[int]:
    return [t for t, thread in enumerate(p.threads) if len(thread.sites) < MAX_SITES]


def _insert_site(p: Program, rng: FastRandom, site_for: Callable[[int, int], Site]) -> Optional[Program]:
    roomy = _roomy(p)
    if not roomy:
        return None
    t = roomy[rng.below(len(roomy))]
    thread = p.threads[t]
    at = rng.below(len(thread.sites) + 1)
    sites = list(thread.sites)
    sites.insert(at, site_for(t, at))
    return _with_thread(p, t, Thread(thread.icall, tuple(sites)))


def op_add_site(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    return _insert_site(p, rng, lambda t, s: random_site(draw, site_slot(t, s)))


def op_duplicate_site(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    t0, s0 = _pick_site(p, rng)
    site = p.threads[t0].sites[s0]
    return _insert_site(p, rng, lambda t, s: site)


def op_remove_site(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    full = [t for t, thread in enumerate(p.threads) if len(thread.sites) > 1]
    if not full:
        return None
    t = full[rng.below(len(full))]
    thread = p.threads[t]
    s = rng.below(len(thread.sites))
    sites = thread.sites[:s] + thread.sites[s + 1:]
    return _with_thread(p, t, Thread(thread.icall, sites))


def op_add_thread(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    if len(p.threads) >= MAX_THREADS:
        return None
    at = rng.below(len(p.threads) + 1)
    threads = list(p.threads)
    threads.insert(at, random_thread(draw, at))
    return Program(tuple(threads))


def op_remove_thread(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    if len(p.threads) < 2:
        return None
    t = rng.below(len(p.threads))
    return Program(p.threads[:t] + p.threads[t + 1:])


def op_duplicate_thread(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    if len(p.threads) >= MAX_THREADS:
        return None
    return Program(p.threads + p.threads[-1:])


def op_swap_sites_within(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    pairs = [t for t, thread in enumerate(p.threads)
             if len(thread.sites) == 2 and thread.sites[0] is not thread.sites[1]]
    if not pairs:
        return None
    t = pairs[rng.below(len(pairs))]
    thread = p.threads[t]
    return _with_thread(p, t, Thread(thread.icall, thread.sites[::-1]))


def op_swap_sites_between(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    if len(p.threads) < 2:
        return None
    a, b = p.threads
    s = rng.below(len(a.sites))
    u = rng.below(len(b.sites))
    if a.sites[s] is b.sites[u]:
        return None
    sa, sb = list(a.sites), list(b.sites)
    sa[s], sb[u] = sb[u], sa[s]
    return Program((Thread(a.icall, tuple(sa)), Thread(b.icall, tuple(sb))))


def op_swap_threads(p: Program, rng: FastRandom, draw: Draw) -> Optional[Program]:
    if len(p.threads) < 2 or p.threads[0] == p.threads[1]:
        return None
    return Program(p.threads[::-1])


BYTES = "bytes"
SET_CHOICE = "set_choice"

#: name -> (operator or None for the byte mutation, weight)
WEIGHTS: dict[str, int] = {
    "regen_program": 3,
    "regen_thread": 6,
    "regen_site": 12,
    "set_nesting": 10,
    "set_body": 12,
    "flip_callee": 5,
    "toggle_icall": 6,
    "add_site": 6,
    "remove_site": 6,
    "duplicate_site": 4,
    "add_thread": 4,
    "remove_thread": 4,
    "duplicate_thread": 3,
    "swap_sites_within": 4,
    "swap_sites_between": 4,
    "swap_threads": 2,
    SET_CHOICE: 4,
    BYTES: 14,  # applied about 1 in 10 (a byte change is often a no-op)
}

_OPERATORS: dict[str, Callable] = {
    name: globals()[f"op_{name}"] for name in WEIGHTS if name not in (BYTES, SET_CHOICE)
}
_CANONICAL = {id(d): d.canonical_bytes for d in DECISIONS.values()}

MUTATION_OPERATORS: tuple[str, ...] = tuple(WEIGHTS)
CROSSOVER_OPERATORS: tuple[str, ...] = ("cross_site", "cross_thread", "cross_splice", "cross_slots")

#: Applied operators, by name (mutation and crossover), plus "unchanged".
COUNTS: Counter = Counter()


# ------------------------------------------------------------ byte mutation


def python_byte_mutate(data: bytes, max_size: int, rng: FastRandom) -> bytes:
    """libFuzzer-like byte mutations, in pure Python (deterministic per ``rng``)."""
    limit = min(max_size, SLOT_COUNT)
    if limit <= 0:
        return b""
    buf = bytearray(data[:limit])
    kind = rng.below(7)
    if not buf or kind == 0:  # set one byte to a random value (growing with zeros)
        at = rng.below(limit)
        if len(buf) <= at:
            buf.extend(bytes(at + 1 - len(buf)))
        buf[at] = rng.below(256)
    elif kind == 1:  # flip one bit
        at = rng.below(len(buf))
        buf[at] ^= 1 << rng.below(8)
    elif kind == 2:  # add or subtract a small delta
        at = rng.below(len(buf))
        buf[at] = (buf[at] + (rng.below(70) - 35)) & 0xFF
    elif kind == 3:  # insert a random byte (shifts the later slots)
        buf.insert(rng.below(len(buf) + 1), rng.below(256))
    elif kind == 4:  # erase a byte (shifts the later slots back)
        del buf[rng.below(len(buf))]
    elif kind == 5:  # swap two bytes
        i, j = rng.below(len(buf)), rng.below(len(buf))
        buf[i], buf[j] = buf[j], buf[i]
    else:  # copy a run of bytes over another place
        n = 1 + rng.below(3)
        src, dst = rng.below(len(buf)), rng.below(limit)
        chunk = buf[src:src + n]
        end = min(dst + len(chunk), limit)
        if len(buf) < end:
            buf.extend(bytes(end - len(buf)))
        buf[dst:end] = chunk[: end - dst]
    return bytes(buf[:limit])


# ------------------------------------------------------------------ mutator


def _build_table(weights: dict[str, int]) -> tuple[str, ...]:
    return tuple(name for name, weight in weights.items() for _ in range(weight))


class Mutator:
    """Mutation and crossover with their own random source and counters."""

    def __init__(
        self,
        byte_mutate: Optional[Callable[[bytes, int], bytes]] = None,
        counts: Optional[Counter] = None,
        weights: Optional[dict[str, int]] = None,
    ) -> None:
        #: libFuzzer's byte mutation (``atheris.Mutate``) or None for the pure-Python one
        self.byte_mutate = byte_mutate
        self.counts = COUNTS if counts is None else counts
        self.rng = FastRandom()
        self.draw = random_draw(self.rng)  # type: ignore[arg-type]  # only .random() is used
        self._table = _build_table(weights or WEIGHTS)

    # -- helpers

    def _seed(self, seed: int, data: bytes) -> None:
        self.rng.seed(((seed & 0xFFFFFFFF) << 32) | crc32(data))

    def _bytes(self, tree: Program, max_size: int) -> Program:
        start = _encode(tree)[:max_size]
        if self.byte_mutate is not None:
            out = self.byte_mutate(start, max_size)
        else:
            out = python_byte_mutate(start, max_size, self.rng)
        return _decode(out)

    def _set_choice(self, tree: Program, max_size: int) -> Program:
        """One decision of the choice sequence (within the first ``max_size``
        slots) changed to another alternative: always a different program."""
        rng = self.rng
        sequence = choices_of(tree)
        usable = [c for c in sequence if c[1] < max_size] or sequence[:1]
        decision, slot, choice = usable[rng.below(len(usable))]
        buf = bytearray(_encode(tree).ljust(SLOT_COUNT, b"\0"))
        buf[slot] = _CANONICAL[id(decision)][_other(choice, len(decision.alternatives), rng)]
        return _decode(bytes(buf))

    @staticmethod
    def _fit(tree: Program, new: Program, max_size: int) -> Optional[bytes]:
        """The encoding of ``new`` within ``max_size``, or None if that is ``tree`` again."""
        if new == tree:
            return None
        out = _encode(new)
        if len(out) > max_size:
            out = out[:max_size]
            if _decode(out) == tree:
                return None
        # libFuzzer takes an empty result for a failed mutation: the
        # smallest program (empty encoding) is spelt b"\0" instead.
        return out or b"\0"

    # -- the two libFuzzer hooks

    def mutate(self, data: bytes, max_size: int, seed: int) -> bytes:
        """A mutant of ``data``: at most ``max_size`` bytes, a different program when possible."""
        if max_size <= 0:
            return b""
        self._seed(seed, data)
        rng, draw, table, operators = self.rng, self.draw, self._table, _OPERATORS
        tree = _decode(data)
        for _ in range(MAX_ATTEMPTS):
            name = table[rng.below(len(table))]
            if name == BYTES:
                new = self._bytes(tree, max_size)
            elif name == SET_CHOICE:
                new = self._set_choice(tree, max_size)
            else:
                new = operators[name](tree, rng, draw)
                if new is None:
                    continue
            out = self._fit(tree, new, max_size)
            if out is not None:
                self.counts[name] += 1
                return out
        # Every operator drawn failed (e.g. a tiny max_size truncated its
        # change away): change one decision that fits, if any does.
        out = self._fit(tree, self._set_choice(tree, max_size), max_size)
        if out is not None:
            self.counts[SET_CHOICE] += 1
            return out
        self.counts["unchanged"] += 1
        return _encode(tree)[:max_size] or b"\0"

    def crossover(self, data1: bytes, data2: bytes, max_out_size: int, seed: int) -> bytes:
        """A child of both parents: at most ``max_out_size`` bytes."""
        if max_out_size <= 0:
            return b""
        self._seed(seed ^ 0x5BD1E995, data1 + data2[:SLOT_COUNT])
        rng = self.rng
        a, b = _decode(data1), _decode(data2)
        if a == b:
            return self.mutate(data1, max_out_size, seed)
        for _ in range(MAX_ATTEMPTS):
            kind = rng.below(8)
            if kind < 3:
                name, new = "cross_site", self._cross_site(a, b)
            elif kind < 5:
                name, new = "cross_thread", self._cross_thread(a, b)
            elif kind < 7:
                name, new = "cross_splice", self._cross_splice(a, b)
            else:
                name, new = "cross_slots", self._cross_slots(data1, data2)
            if new is None or new == b:
                continue
            out = self._fit(a, new, max_out_size)
            if out is not None:
                self.counts[name] += 1
                return out
        return self.mutate(data1, max_out_size, seed)

    # -- crossover operators

    def _cross_site(self, a: Program, b: Program) -> Program:
        rng = self.rng
        tb, sb = _pick_site(b, rng)
        donor = b.threads[tb].sites[sb]
        t, s = _pick_site(a, rng)
        thread = a.threads[t]
        if len(thread.sites) < MAX_SITES and rng.below(2):
            sites = list(thread.sites)
            sites.insert(rng.below(len(sites) + 1), donor)
            return _with_thread(a, t, Thread(thread.icall, tuple(sites)))
        return _with_site(a, t, s, donor)

    def _cross_thread(self, a: Program, b: Program) -> Program:
        rng = self.rng
        donor = b.threads[rng.below(len(b.threads))]
        if len(a.threads) < MAX_THREADS and rng.below(2):
            threads = list(a.threads)
            threads.insert(rng.below(len(threads) + 1), donor)
            return Program(tuple(threads))
        return _with_thread(a, rng.below(len(a.threads)), donor)

    def _cross_splice(self, a: Program, b: Program) -> Program:
        # first thread from one parent, last thread from the other
        if self.rng.below(2):
            a, b = b, a
        return Program((a.threads[0], b.threads[-1]))

    def _cross_slots(self, data1: bytes, data2: bytes) -> Program:
        rng = self.rng
        x = _encode(_decode(data1)).ljust(SLOT_COUNT, b"\0")
        y = _encode(_decode(data2)).ljust(SLOT_COUNT, b"\0")
        mask = rng.below(1 << SLOT_COUNT)
        return _decode(bytes(y[i] if mask >> i & 1 else x[i] for i in range(SLOT_COUNT)))


#: The mutator the atheris hooks use.
DEFAULT = Mutator()


def use_libfuzzer(mutate: Optional[Callable[[bytes, int], bytes]]) -> None:
    """Make the ``bytes`` operator call libFuzzer's ``atheris.Mutate`` (or, with
    None, the pure-Python fallback).  Call it right before ``atheris.Fuzz()``:
    ``atheris.Mutate`` only works inside a running ``Fuzz()``."""
    DEFAULT.byte_mutate = mutate


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    """atheris' ``custom_mutator`` hook."""
    return DEFAULT.mutate(data, max_size, seed)


def custom_crossover(data1: bytes, data2: bytes, max_out_size: int, seed: int) -> bytes:
    """atheris' ``custom_crossover`` hook."""
    return DEFAULT.crossover(data1, data2, max_out_size, seed)
