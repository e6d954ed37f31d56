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
                      are (not encoded again: see
                      :meth:`harness.core.fitting.Fitting.fit_bytes`)
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

The parts, one idea each: the tree operators (:mod:`harness.core.tree_ops`, functions
of a :class:`~harness.core.tree_ops.Context` and the tree), the pool of earlier
subtrees (:mod:`harness.core.pool`), the byte side: decoded inputs and an edit's
output bytes (:mod:`harness.core.fitting`), the random generator and the pure-Python
byte mutation (:mod:`harness.core.byte_mutate`).  :class:`Mutator` ties them together
for atheris' hooks; everything it needs is made in its constructor, and each call
carries its own edit to its output (no state passes between its methods).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Optional
from zlib import crc32

from harness.core.byte_mutate import FastRandom, python_byte_mutate
from harness.core.codec import nonempty
from harness.core.compiled import CompiledGrammar, Node
from harness.core.fitting import Fitting, Output
from harness.core.pool import SubtreePool
from harness.core.tree_index import TreeIndex
from harness.core.tree_ops import TREE_OPERATORS, Context, Edit, Repetitions, splice, switches
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
    """Mutation and crossover for one grammar (atheris' custom_mutator / custom_crossover).

    ``byte_mutate(data, max_size) -> bytes`` is the ``bytes`` operator's mutation (None:
    :func:`python_byte_mutate`, deterministic per seed)."""

    def __init__(self, grammar: CompiledGrammar, weights: dict[str, int] | None = None,
                 byte_mutate: Optional[Callable[[bytes, int], bytes]] = None) -> None:
        self.grammar = grammar
        weights = dict(WEIGHTS if weights is None else weights)
        self.table = tuple(name for name, w in weights.items() for _ in range(w))
        self.byte_mutate = byte_mutate
        self.counts: Counter = Counter()
        self.rng = FastRandom()
        self.index = TreeIndex(grammar)
        self.pool = SubtreePool()
        # regenerated parts follow the grammar's weights, drawn from the mutator's generator
        regenerate = walker(grammar, RandomModel(grammar, self.rng))
        self.context = Context(grammar, self.index, self.pool, self.rng, regenerate)
        self.fitting = Fitting(grammar, self.index, self.pool)

    @property
    def repetitions(self) -> Repetitions:
        return self.context.repetitions

    def use_libfuzzer(self, mutate: Optional[Callable[[bytes, int], bytes]]) -> None:
        """Make ``bytes`` call libFuzzer's ``atheris.Mutate`` (None: the pure-Python one).
        Call it right before ``atheris.Fuzz()``: Mutate only works inside a running Fuzz()."""
        self.byte_mutate = mutate

    def decode(self, data: bytes) -> Node:
        """The tree of ``data`` (memoised)."""
        return self.fitting.decoded(data)[0]

    def mutate(self, data: bytes, max_size: int, seed: int) -> bytes:
        """atheris' custom_mutator: ``data`` changed by one operator (never empty)."""
        rng, table, fitting = self.rng, self.table, self.fitting
        rng.seed(seed ^ crc32(data))
        tree, original = fitting.decoded(data)
        for _ in range(MAX_ATTEMPTS):
            name = table[rng.below(len(table))]
            if name == "bytes":
                mutate = self.byte_mutate
                raw = (mutate(data, max_size) if mutate is not None
                       else python_byte_mutate(data, max_size, rng))
                out = fitting.fit_bytes(tree, raw[:max_size], original, max_size)
            else:
                out = fitting.fit(TREE_OPERATORS[name](self.context, tree), original, max_size)
            if out is not None:
                return self._output(out, name)
        for edit in switches(self.context, tree):
            out = fitting.fit(edit, original, max_size)
            if out is not None:
                return self._output(out, "fallback_switch")
        self.counts["unchanged"] += 1
        return data[:max_size] or nonempty(b"", tree, self.grammar)[:max_size]

    def crossover(self, data1: bytes, data2: bytes, max_out_size: int, seed: int) -> bytes:
        """atheris' custom_crossover: ``data1`` with something of ``data2``."""
        rng, fitting = self.rng, self.fitting
        rng.seed(seed ^ crc32(data1) ^ (crc32(data2) << 1))
        a, original = fitting.decoded(data1)
        b = fitting.decoded(data2)[0]
        for _ in range(MAX_ATTEMPTS):
            if rng.below(4):
                name, edit = "splice", splice(self.context, a, b)
            else:
                name, edit = "splice_bytes", Edit(a, self._splice_bytes(data1, data2, max_out_size))
            out = fitting.fit(edit, original, max_out_size)
            if out is not None:
                return self._output(out, name)
        # nothing to take from the other parent (identical, or nothing fits): a mutation
        return self.mutate(data1, max_out_size, seed)

    def _splice_bytes(self, data1: bytes, data2: bytes, max_size: int) -> Node:
        """The tree of the two encodings mixed byte by byte (with the fixed-width layout, a
        structural crossover on finite grammars)."""
        n = min(max(len(data1), len(data2)), max_size)
        mixed = b"".join((data1 if self.rng.below(2) else data2)[i:i + 1] or b"\0" for i in range(n))
        return self.decode(mixed)

    def _output(self, out: Output, name: str) -> bytes:
        """Count the operator; remember the output's tree when a tree operator made it."""
        self.counts[name] += 1
        self.fitting.remember(out)
        return out.data
