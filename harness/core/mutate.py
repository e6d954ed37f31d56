"""Structure-aware mutation and crossover over derivation trees, for any grammar.

The input bytes are decoded (:func:`harness.core.codec.decode`, total), one
operator changes the tree, the result is encoded again.  Every operator
builds a derivation tree of the grammar (children always match the chosen
alternative), so every output is a program of the grammar's language.

Operators (Grammarinator's verbs; :data:`MUTATION_OPERATORS`, weights in
:data:`WEIGHTS`):

===================== ======================================================
regenerate_node       the subtree under a random node redrawn from the PCFG
switch_alternative    a node switched to another alternative; children of
                      the same nonterminal are kept, in order, the rest drawn
replace_from_pool     a subtree replaced by one of the same nonterminal seen
                      in earlier inputs (a bounded pool per nonterminal)
delete_repeated       one element of a repetition removed
replicate_repeated    one element of a repetition duplicated
swap_repeated         two elements of a repetition exchanged
bytes                 a byte-level mutation of the encoding: libFuzzer's own
                      (``atheris.Mutate``) inside a running ``Fuzz()``, a
                      pure-Python one elsewhere (:meth:`Mutator.use_libfuzzer`);
                      in a recursive grammar its bytes are the output as they
                      are (not encoded again: see :meth:`Mutator._fit_bytes`)
===================== ======================================================

Repetitions are found in the grammar, not named: a nonterminal whose
alternatives are 0..k copies of one nonterminal (``<thread>`` |
``<thread><thread>``), or a right-recursive list (``<x><list>`` | ``<x>``).

Crossover (:data:`CROSSOVER_OPERATORS`): ``splice`` (a subtree of the first
parent replaced by a subtree of the same nonterminal from the second) and
``splice_bytes`` (the encodings mixed byte by byte: with the fixed-width
layout this is a structural crossover on finite grammars).

An operator that does not apply, or whose output equals the input or does not
fit ``max_size``, is replaced by another, up to :data:`MAX_ATTEMPTS` times;
then every node is tried with every other alternative (``fallback_switch``),
so the output differs whenever any program within ``max_size`` does; only
then is the input returned truncated to ``max_size`` (any prefix decodes;
counted ``unchanged``).  A crossover with nothing to take from the second
parent is a mutation of the first.  An output is never empty (libFuzzer
reads that as a failed mutation): the program whose encoding is empty is
spelt with one byte (:func:`harness.core.codec.nonempty`).

Determinism: all choices come from one small 64-bit generator keyed by the
seed and the input bytes; the same ``(data, max_size, seed)`` gives the same
output (with the pure-Python byte mutation) from mutators that have seen the
same inputs before (``replace_from_pool`` draws from the subtrees of earlier
inputs; every other operator depends on the call alone).  Regenerated parts follow the
grammar's weights (:class:`harness.core.walk.RandomModel`).  :attr:`Mutator.counts`
counts every applied operator.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Callable, Optional
from zlib import crc32

from harness.core.codec import decode, encode, nonempty
from harness.core.grammar import CompiledGrammar, Node
from harness.core.tree import Path, depth, intern, node_at, refill, replace_at, smallest_tree
from harness.core.tree_index import TreeIndex
from harness.core.walk import RandomModel, walker

__all__ = [
    "CROSSOVER_OPERATORS",
    "FastRandom",
    "MAX_ATTEMPTS",
    "MUTATION_OPERATORS",
    "Mutator",
    "Repetitions",
    "WEIGHTS",
    "python_byte_mutate",
]

MAX_ATTEMPTS = 12
POOL_PER_SYMBOL = 32
POOL_SAMPLE = 4  # one input in POOL_SAMPLE (by the crc of its bytes) adds subtrees to the pool
POOL_PER_INPUT = 16  # that many of its subtrees, spread over its pre-order
_MASK64 = (1 << 64) - 1
_INV53 = 1.0 / (1 << 53)


class FastRandom:
    """A 64-bit LCG (Knuth's MMIX constants): cheap to reseed, deterministic."""

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


# --------------------------------------------------------------- repetitions


@dataclass(frozen=True)
class Repetitions:
    """Where a grammar repeats: list-like nonterminals and right-recursive chains."""

    #: n -> (element symbol, {copies: alternative})
    lists: dict[int, tuple[int, dict[int, int]]]
    #: n -> (element symbol, recursive alternative)
    chains: dict[int, tuple[int, int]]

    @classmethod
    def of(cls, grammar: CompiledGrammar) -> "Repetitions":
        lists, chains = {}, {}
        for n, alt_list in enumerate(grammar.alts):
            if len(alt_list) < 2:
                continue
            symbols = {k for alt in alt_list for k in alt.kids}
            lengths = {len(alt.kids): a for a, alt in enumerate(alt_list)}
            if len(symbols) == 1 and len(lengths) == len(alt_list) and len(lengths) > 1:
                lists[n] = (next(iter(symbols)), lengths)
                continue
            for a, alt in enumerate(alt_list):
                if len(alt.kids) == 2 and alt.kids[1] == n and alt.kids[0] != n:
                    chains[n] = (alt.kids[0], a)
                    break
        return cls(lists, chains)


def _chain_links(tree: Node, path: Path, n: int, recursive: int) -> list[Path]:
    """Paths of the links of the chain starting at ``path`` (each a node of ``n``
    with the recursive alternative)."""
    links = []
    node = tree
    for i in path:
        node = node[2][i]
    while node[0] == n and node[1] == recursive:
        links.append(path)
        path = path + (1,)
        node = node[2][1]
    return links


def _depth_at_most(node: Node, budget: int, deepest: list[float]) -> bool:
    """``depth(node) <= budget``, looking only as deep as the grammar leaves in doubt."""
    if deepest[node[0]] <= budget:
        return True
    if budget <= 1:
        return budget == 1 and not node[2]
    return all(_depth_at_most(kid, budget - 1, deepest) for kid in node[2])


# ------------------------------------------------------------- byte mutation


def python_byte_mutate(data: bytes, max_size: int, rng: FastRandom) -> bytes:
    """libFuzzer-like byte mutations, in pure Python (deterministic per ``rng``)."""
    limit = max_size
    if limit <= 0:
        return b""
    buf = bytearray(data[:limit])
    kind = rng.below(7)
    if not buf or kind == 0:  # set one byte to a random value (growing with zeros)
        at = rng.below(min(limit, len(buf) + 8))
        if len(buf) <= at:
            buf.extend(bytes(at + 1 - len(buf)))
        buf[at] = rng.below(256)
    elif kind == 1:  # flip one bit
        at = rng.below(len(buf))
        buf[at] ^= 1 << rng.below(8)
    elif kind == 2:  # add or subtract a small delta
        at = rng.below(len(buf))
        buf[at] = (buf[at] + (rng.below(70) - 35)) & 0xFF
    elif kind == 3:  # insert a random byte
        buf.insert(rng.below(len(buf) + 1), rng.below(256))
    elif kind == 4:  # erase a byte
        del buf[rng.below(len(buf))]
    elif kind == 5:  # swap two bytes
        i, j = rng.below(len(buf)), rng.below(len(buf))
        buf[i], buf[j] = buf[j], buf[i]
    else:  # copy a run of bytes over another place
        n = 1 + rng.below(3)
        src, dst = rng.below(len(buf)), rng.below(min(limit, len(buf) + 1))
        chunk = buf[src:src + n]
        end = min(dst + len(chunk), limit)
        if len(buf) < end:
            buf.extend(bytes(end - len(buf)))
        buf[dst:end] = chunk[: end - dst]
    return bytes(buf[:limit])


# ------------------------------------------------------------------ mutator

WEIGHTS: dict[str, int] = {
    "regenerate_node": 4,
    "switch_alternative": 4,
    "replace_from_pool": 2,
    "delete_repeated": 2,
    "replicate_repeated": 2,
    "swap_repeated": 1,
    "bytes": 3,
}
MUTATION_OPERATORS = tuple(WEIGHTS)
CROSSOVER_OPERATORS = ("splice", "splice_bytes")


class Mutator:
    """Mutation and crossover for one grammar (atheris' custom_mutator / custom_crossover)."""

    def __init__(self, grammar: CompiledGrammar, weights: dict[str, int] | None = None,
                 byte_mutate: Optional[Callable[[bytes, int], bytes]] = None) -> None:
        self.grammar = grammar
        weights = dict(WEIGHTS if weights is None else weights)
        self.table = tuple(name for name, w in weights.items() for _ in range(w))
        self.rng = FastRandom()
        self.model = RandomModel(grammar, self.rng)
        self.expand = walker(grammar, self.model)
        self.repetitions = Repetitions.of(grammar)
        self.byte_mutate = byte_mutate
        self.counts: Counter = Counter()
        # nonterminal -> {subtree: [its depth, once measured]}, oldest first.  Plain
        # dicts: an OrderedDict hashes each key again when its items are read, and a
        # subtree's hash costs its size.
        self.pool: dict[int, dict[Node, list]] = {}
        self._pooled: set[int] = set()  # nonterminals with two or more pooled subtrees (only grows)
        self._decoded: OrderedDict[bytes, tuple[Node, bytes]] = OrderedDict()
        # The last outputs and their trees: libFuzzer mutates its own output again
        # (-mutate_depth), and they are kept apart so as not to push the corpus out.
        self._recent: OrderedDict[bytes, tuple[Node, bytes]] = OrderedDict()
        # the tree, encoding and edit (tree, path, subtree, result) behind _fit's last output
        self._made: Optional[tuple[Node, bytes, Optional[tuple]]] = None
        self.index = TreeIndex(grammar)
        self._edit: Optional[tuple[Node, Path, Node, Node]] = None  # the last single replacement
        self.bounded = grammar.max_bytes is None
        # per nonterminal, its deepest tree's depth (infinite when recursive)
        self._deepest = [math.inf if d is None else d for d in grammar.deepest]

    def use_libfuzzer(self, mutate: Optional[Callable[[bytes, int], bytes]]) -> None:
        """Make ``bytes`` call libFuzzer's ``atheris.Mutate`` (None: the pure-Python one).
        Call it right before ``atheris.Fuzz()``: Mutate only works inside a running Fuzz()."""
        self.byte_mutate = mutate

    # -- helpers ------------------------------------------------------------

    def decode(self, data: bytes) -> Node:
        return self._decode(data)[0]

    def _decode(self, data: bytes) -> tuple[Node, bytes]:
        """(tree, canonical encoding) of ``data``, memoised."""
        hit = self._decoded.get(data)
        if hit is None:
            hit = self._recent.get(data)
            if hit is not None:
                return hit
            tree = decode(data, self.grammar)
            hit = self._decoded[data] = (tree, encode(tree, self.grammar))
            if len(self._decoded) > 4096:
                self._decoded.popitem(last=False)
            crc = crc32(data)
            if crc % POOL_SAMPLE == 0:  # a sample of the inputs feeds the pool
                self._remember(tree, crc // POOL_SAMPLE)
        return hit

    def _remember(self, tree: Node, salt: int = 0) -> None:
        """Add some of the tree's subtrees (:data:`POOL_PER_INPUT`, evenly spread from an
        offset given by ``salt``) to the pool of their nonterminal (bounded, newest kept),
        each with a slot for its depth (measured when it is first placed: what the depth
        budget of a recursive grammar asks of it there).  Not all of them: keying the pool
        hashes each subtree whole."""
        nodes = self.index(tree).nodes
        stride = max(1, len(nodes) // POOL_PER_INPUT)
        for _, node in nodes[salt % stride::stride]:
            bucket = self.pool.setdefault(node[0], {})
            if node in bucket:
                continue
            bucket[node] = [None]
            if len(bucket) > POOL_PER_SYMBOL:
                del bucket[next(iter(bucket))]
            elif len(bucket) == 2:
                self._pooled.add(node[0])

    def _replace(self, tree: Node, path: Path, new: Node) -> Node:
        """``tree`` with ``new`` at ``path``; remembered, so that :meth:`_fit` encodes
        only ``new`` and splices it into the encoding of ``tree``."""
        out = replace_at(tree, path, new)
        self._edit = (tree, path, new, out)
        return out

    def _fits_depth(self, tree: Node, path: Path, new: Node) -> bool:
        """Whether ``new`` at ``path`` keeps the tree within the walk's depth budget (a
        tree of depth at most ``max_depth``: exactly the trees its encoding decodes back
        to)."""
        if not self.bounded:
            return True
        return _depth_at_most(new, self.grammar.max_depth - len(path), self._deepest)

    def _regenerate(self, n: int, depth: int) -> Node:
        return self.expand(n, depth)

    # -- operators (tree, rng) -> tree or None (not applicable) ---------------

    def regenerate_node(self, tree: Node) -> Optional[Node]:
        nodes = self.index(tree).nodes
        if not nodes:
            return None
        path, node = nodes[self.rng.below(len(nodes))]
        return self._replace(tree, path, self._regenerate(node[0], len(path)))

    def switch_alternative(self, tree: Node) -> Optional[Node]:
        g = self.grammar
        nodes = self.index(tree).choices
        if not nodes:
            return None
        path, (n, a, kids) = nodes[self.rng.below(len(nodes))]
        b = self.rng.below(len(g.alts[n]) - 1)
        b += b >= a
        depth_below = len(path) + 1
        # The walk's own depth rule (walk.py): the kids kept sat at this depth already and
        # the new ones come from the walk, so this is the whole depth check.
        if self.bounded and len(path) + g.alt_min_depth[n][b] > g.max_depth:
            return None
        new = intern(g, (n, b, refill(kids, g.alts[n][b].kids, lambda k: self._regenerate(k, depth_below))))
        return self._replace(tree, path, new)

    def replace_from_pool(self, tree: Node) -> Optional[Node]:
        pooled = self._pooled
        derived = self.index(tree).derived
        key = ("pooled", len(pooled))  # the set only grows: its size says when to look again
        nodes = derived.get(key)
        if nodes is None:
            nodes = derived[key] = [(p, node) for p, node in self.index(tree).nodes if node[0] in pooled]
        if not nodes:
            return None
        path, node = nodes[self.rng.below(len(nodes))]
        # (subtree, [its depth]) pairs, distinct subtrees: at most one equals node.  Read
        # as pairs: looking a subtree up would hash all of it.
        candidates = tuple(self.pool[node[0]].items())
        i = self.rng.below(len(candidates))
        new, slot = candidates[i]
        if new == node:
            j = self.rng.below(len(candidates) - 1)
            new, slot = candidates[j + (j >= i)]
        if self.bounded:
            if slot[0] is None:
                slot[0] = depth(new)
            if slot[0] > self.grammar.max_depth - len(path):
                return None
        return self._replace(tree, path, new)

    def _repeated(self, tree: Node, grow: int) -> list[tuple[Path, Node]]:
        """Repetition nodes that can change their number of elements by ``grow`` (cached
        per tree)."""
        derived = self.index(tree).derived
        out = derived.get(("repeated", grow))
        if out is not None:
            return out
        reps = self.repetitions
        out = derived[("repeated", grow)] = []
        for p, node in self.index(tree).nodes:
            n = node[0]
            if n in reps.lists:
                if len(node[2]) + grow in reps.lists[n][1] and (grow or len(node[2]) > 1):
                    out.append((p, node))
            elif n in reps.chains and node[1] == reps.chains[n][1]:
                out.append((p, node))
        return out

    def delete_repeated(self, tree: Node) -> Optional[Node]:
        candidates = self._repeated(tree, -1)
        if not candidates:
            return None
        path, (n, a, kids) = candidates[self.rng.below(len(candidates))]
        if n in self.repetitions.lists:
            lengths = self.repetitions.lists[n][1]
            i = self.rng.below(len(kids))
            return self._replace(tree, path, intern(self.grammar, (n, lengths[len(kids) - 1], kids[:i] + kids[i + 1:])))
        return self._replace(tree, path, kids[1])  # a chain link replaced by its tail

    def replicate_repeated(self, tree: Node) -> Optional[Node]:
        candidates = self._repeated(tree, +1)
        if not candidates:
            return None
        path, node = candidates[self.rng.below(len(candidates))]
        n, a, kids = node
        if n in self.repetitions.lists:
            element, lengths = self.repetitions.lists[n]
            if kids:
                i = self.rng.below(len(kids))
                grown = kids[:i + 1] + kids[i:]
            else:  # nothing to copy yet: a new element from the PCFG
                grown = (self._regenerate(element, len(path) + 1),)
            new = intern(self.grammar, (n, lengths[len(kids) + 1], grown))
        else:
            new = (n, a, (kids[0], node))  # the link's element once more in front
        return self._replace(tree, path, new) if self._fits_depth(tree, path, new) else None

    def swap_repeated(self, tree: Node) -> Optional[Node]:
        reps = self.repetitions
        derived = self.index(tree).derived
        options = derived.get("swaps")
        if options is None:
            options = derived["swaps"] = []
            for p, node in self.index(tree).nodes:
                n = node[0]
                if n in reps.lists and len(node[2]) > 1 and len(set(node[2])) > 1:
                    options.append(("list", p, node))
                elif n in reps.chains and node[1] == reps.chains[n][1]:
                    # a chain of two or more links, each with its own element
                    if node[2][1][0] == n and node[2][1][1] == reps.chains[n][1]:
                        options.append(("chain", p, node))
        if not options:
            return None
        kind, path, node = options[self.rng.below(len(options))]
        if kind == "list":
            n, a, kids = node
            i, j = self.rng.below(len(kids)), self.rng.below(len(kids) - 1)
            j += j >= i
            swapped = list(kids)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            return self._replace(tree, path, intern(self.grammar, (n, a, tuple(swapped))))
        n = node[0]
        links = _chain_links(tree, path, n, reps.chains[n][1])
        i, j = self.rng.below(len(links)), self.rng.below(len(links) - 1)
        j += j >= i
        first, second = node_at(tree, links[i] + (0,)), node_at(tree, links[j] + (0,))
        fits = self._fits_depth
        if not (fits(tree, links[i] + (0,), second) and fits(tree, links[j] + (0,), first)):
            return None
        tree = replace_at(tree, links[i] + (0,), second)
        return replace_at(tree, links[j] + (0,), first)

    # -- the atheris hooks ----------------------------------------------------

    def _fit(self, tree: Node, new: Optional[Node], original: bytes, max_size: int) -> Optional[bytes]:
        edit, self._edit = self._edit, None
        if new is None or new is tree:
            return None
        out = None
        if edit is not None and (edit[3] is not new or edit[0] is not tree):
            edit = None
        if edit is not None and self.bounded:  # a finite grammar's encodings are short: encode
            layout = self.index.layout(tree)
            if layout is not None:
                out = layout.replaced(edit[1], edit[2], self.grammar)
        if out is None:
            out = encode(new, self.grammar)
        if out == original:
            return None
        spelled = nonempty(out, new, self.grammar)
        if len(spelled) > max_size:
            return None
        self._made = (new, out, edit)
        return spelled

    def _output(self, out: bytes, name: str) -> bytes:
        """Count the operator; remember the output's tree when a tree operator made it."""
        self.counts[name] += 1
        made, self._made = self._made, None
        if made is not None:
            self._recent[out] = made[:2]
            if len(self._recent) > 16:
                self._recent.popitem(last=False)
            if made[2] is not None:  # index the output from its parent, for its next mutation
                self.index.edited(*made[2])
        return out

    def _fit_bytes(self, tree: Node, raw: bytes, original: bytes, max_size: int) -> Optional[bytes]:
        """The byte operator's output: on a finite grammar the canonical encoding of what
        ``raw`` decodes to (short, and the corpus stays free of spellings of one program);
        on a recursive one ``raw`` itself when it means another program, as libFuzzer's
        own mutations are (encoding a whole tree again would cost more than the rest of
        the mutation)."""
        new = decode(raw, self.grammar)
        if not self.bounded:
            return self._fit(tree, new, original, max_size)
        self._made = None  # its canonical encoding is not known
        return raw if raw and new != tree else None

    def mutate(self, data: bytes, max_size: int, seed: int) -> bytes:
        self.rng.seed(seed ^ crc32(data))
        self._made = None
        tree, original = self._decode(data)
        rng, table = self.rng, self.table
        for _ in range(MAX_ATTEMPTS):
            name = table[rng.below(len(table))]
            if name == "bytes":
                mutate = self.byte_mutate
                raw = (mutate(data, max_size) if mutate is not None
                       else python_byte_mutate(data, max_size, rng))
                out = self._fit_bytes(tree, raw[:max_size], original, max_size)
            else:
                out = self._fit(tree, getattr(self, name)(tree), original, max_size)
            if out is not None:
                return self._output(out, name)
        out = self._any_change(tree, original, max_size)
        if out is not None:
            return self._output(out, "fallback_switch")
        self.counts["unchanged"] += 1
        return data[:max_size] or nonempty(b"", tree, self.grammar)[:max_size]

    def _any_change(self, tree: Node, original: bytes, max_size: int) -> Optional[bytes]:
        """The last resort when the drawn operators all failed: some node switched to
        another alternative (children kept, the rest drawn, else their smallest
        derivations, which encode shortest), tried in random order."""
        g = self.grammar
        nodes = self.index(tree).choices
        start = self.rng.below(len(nodes)) if nodes else 0
        for k in range(len(nodes)):
            path, (n, a, kids) = nodes[(start + k) % len(nodes)]
            for b in range(len(g.alts[n])):
                if b == a:
                    continue
                below = len(path) + 1
                for fill in (lambda k: self._regenerate(k, below), lambda k: smallest_tree(g, k)):
                    new = (n, b, refill(kids, g.alts[n][b].kids, fill))
                    if not self._fits_depth(tree, path, new):
                        continue
                    out = self._fit(tree, self._replace(tree, path, new), original, max_size)
                    if out is not None:
                        return out
        return None

    def crossover(self, data1: bytes, data2: bytes, max_out_size: int, seed: int) -> bytes:
        self.rng.seed(seed ^ crc32(data1) ^ (crc32(data2) << 1))
        a, original = self._decode(data1)
        b = self.decode(data2)
        for _ in range(MAX_ATTEMPTS):
            if self.rng.below(4):
                name, new = "splice", self.splice(a, b)
            else:
                name, new = "splice_bytes", self._splice_bytes(data1, data2, max_out_size)
            out = self._fit(a, new, original, max_out_size)
            if out is not None:
                return self._output(out, name)
        # nothing to take from the other parent (identical, or nothing fits): a mutation
        return self.mutate(data1, max_out_size, seed)

    def splice(self, a: Node, b: Node) -> Optional[Node]:
        """A subtree of ``a`` replaced by a subtree of the same nonterminal from ``b``
        (a site drawn uniformly among those with a donor that differs from it: drawn
        among the sites of a nonterminal ``b`` has, a site without one set aside)."""
        derived = self.index(b).derived
        donors = derived.get("donors")
        if donors is None:
            donors = derived["donors"] = {}
            for _, node in self.index(b).nodes:
                donors.setdefault(node[0], []).append(node)
        sites = [(p, node) for p, node in self.index(a).nodes if node[0] in donors]
        while sites:
            k = self.rng.below(len(sites))
            path, node = sites[k]
            options = [d for d in donors[node[0]] if d != node]
            if options:
                new = options[self.rng.below(len(options))]
                return self._replace(a, path, new) if self._fits_depth(a, path, new) else None
            sites[k] = sites[-1]
            sites.pop()
        return None

    def _splice_bytes(self, data1: bytes, data2: bytes, max_size: int) -> Node:
        n = min(max(len(data1), len(data2)), max_size)
        mixed = b"".join((data1 if self.rng.below(2) else data2)[i:i + 1] or b"\0" for i in range(n))
        return self.decode(mixed)
