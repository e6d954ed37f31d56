"""Bytes <-> trees for the mutator: the decoded inputs it has seen, and an edit's output
bytes (encoded, spliced into its input's encoding where it replaced one subtree, checked
against the size libFuzzer allows)."""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple, Optional
from zlib import crc32

from harness.core.codec import decode, encode, nonempty
from harness.core.compiled import CompiledGrammar, Node
from harness.core.pool import SubtreePool
from harness.core.tree_index import TreeIndex
from harness.core.tree_ops import Edit

DECODED_LIMIT = 4096  # inputs whose tree is remembered
RECENT_LIMIT = 16  # outputs whose tree is remembered (libFuzzer mutates them again)
POOL_SAMPLE = 4  # one input in POOL_SAMPLE (by the crc of its bytes) adds subtrees to the pool


class Output(NamedTuple):
    """A mutation's output: the bytes handed to libFuzzer, and (when known) the tree and
    canonical encoding they stand for and the edit that made them."""

    data: bytes
    tree: Optional[Node] = None
    encoding: Optional[bytes] = None
    edit: Optional[Edit] = None


class Fitting:
    """The byte side of one grammar's mutator."""

    def __init__(self, grammar: CompiledGrammar, index: TreeIndex, pool: SubtreePool) -> None:
        self.grammar = grammar
        self.index = index
        self.pool = pool
        self.recursive = grammar.max_bytes is None
        self._decoded: OrderedDict[bytes, tuple[Node, bytes]] = OrderedDict()
        # The last outputs and their trees: libFuzzer mutates its own output again
        # (-mutate_depth), and they are kept apart so as not to push the corpus out.
        self._recent: OrderedDict[bytes, tuple[Node, bytes]] = OrderedDict()

    def decoded(self, data: bytes) -> tuple[Node, bytes]:
        """(tree, canonical encoding) of ``data``, memoised; a sample of the inputs
        (by the crc of their bytes) adds some of its subtrees to the pool."""
        hit = self._decoded.get(data)
        if hit is None:
            hit = self._recent.get(data)
            if hit is not None:
                return hit
            tree = decode(data, self.grammar)
            hit = self._decoded[data] = (tree, encode(tree, self.grammar))
            if len(self._decoded) > DECODED_LIMIT:
                self._decoded.popitem(last=False)
            crc = crc32(data)
            if crc % POOL_SAMPLE == 0:
                self.pool.add(self.index(tree).nodes, crc // POOL_SAMPLE)
        return hit

    def fit(self, edit: Optional[Edit], original: bytes, max_size: int) -> Optional[Output]:
        """The output of ``edit`` (None: it made nothing new, or nothing that fits)."""
        if edit is None or edit.result is edit.tree:
            return None
        new = edit.result
        out = None
        single = edit if edit.path is not None else None
        if single is not None and self.recursive:  # a finite grammar's encodings are short: encode
            layout = self.index.layout(edit.tree)
            if layout is not None:
                out = layout.replaced(edit.path, edit.new, self.grammar)
        if out is None:
            out = encode(new, self.grammar)
        if out == original:
            return None
        spelled = nonempty(out, new, self.grammar)
        if len(spelled) > max_size:
            return None
        return Output(spelled, new, out, single)

    def fit_bytes(self, tree: Node, raw: bytes, original: bytes, max_size: int) -> Optional[Output]:
        """The byte operator's output: on a finite grammar the canonical encoding of what
        ``raw`` decodes to (short, and the corpus stays free of spellings of one program);
        on a recursive one ``raw`` itself when it means another program, as libFuzzer's
        own mutations are (encoding a whole tree again would cost more than the rest of
        the mutation)."""
        new = decode(raw, self.grammar)
        if not self.recursive:
            return self.fit(Edit(tree, new), original, max_size)
        return Output(raw) if raw and new != tree else None  # its canonical encoding is not known

    def remember(self, output: Output) -> None:
        """Keep an output's tree for when it comes back as an input, and index it from its
        parent's entry (:meth:`harness.core.tree_index.TreeIndex.edited`)."""
        if output.tree is None:
            return
        self._recent[output.data] = (output.tree, output.encoding)
        if len(self._recent) > RECENT_LIMIT:
            self._recent.popitem(last=False)
        if output.edit is not None:
            edit = output.edit
            self.index.edited(edit.tree, edit.path, edit.new, edit.result)
