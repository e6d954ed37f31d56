"""Shape tree -> MLIR text.  Nothing else in loom-fuzz formats MLIR.

Two renderings:

* ``canonical``: the exact text of the spec, indentation included; what
  loom-opt reads.
* ``oracle``: each thread and each region as a generic unregistered op with a
  second, empty region, so that upstream ``mlir-opt-22
  --allow-unregistered-dialect`` parses and verifies every upstream op in it
  (the spec's last section).

Every fragment comes from the grammar's terminals and is expanded once; the
one pass over the tree only fills the counters (``$T``, ``$R``) and moves
wrapped regions two columns right.  A thread's text depends only on the
thread, its number and the region counter it starts at, so whole threads are
cached too: rendering a program is a few dictionary look-ups and one join.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from grammars import REGION_NUMBER, THREAD_NUMBER
from harness.core.grammar import BODY, CALLEE, NESTING, expand
from harness.core.tree import Nesting, Program, Site, Thread

STYLES = ("canonical", "oracle")

#: Separates programs in one stream, as ``mlir-opt --split-input-file`` expects.
SPLIT_MARKER = "// -----\n"

_ORACLE_OVERRIDES = {
    "<thread-open>": (
        '"dataflow.thread"() ({\n'
        "^bb0(%mem: memref<4xi32>, %val: i32, %flag: i1, %start: none):\n"
    ),
    "<thread-close>": (
        '  "dataflow.thread.yield"() : () -> ()\n'
        "}, {\n"
        f'}}) {{sym_name = "thread_{THREAD_NUMBER}", sym_visibility = "private", '
        "domain = #dataflow.thread_domain<dense>} : () -> ()\n\n"
    ),
    # A second, empty region keeps the unregistered op from acting as a
    # symbol table that would hide @helper_double and @extern_scale.
    "<region-end>": "  }, {\n  })",
}

_KEEP = frozenset({"<preamble>", "<threads>", "<top-call>", "<sites>", "<region>"})


class _Style:
    """The fragments of one rendering, expanded once from the grammar."""

    def __init__(self, name: str) -> None:
        override = self.override = _ORACLE_OVERRIDES if name == "oracle" else {}
        module = expand("<module>", keep=_KEEP, override=override)
        head, tail = module.split("<preamble><threads>")
        self.module_head = head + expand("<preamble>", override=override)
        self.module_tail = tail
        thread = expand("<thread>", keep=_KEEP, override=override)
        open_, rest = thread.split("<top-call><sites>")
        self.thread_open = open_.split(THREAD_NUMBER)
        self.thread_close = rest.split(THREAD_NUMBER)
        self.icall = expand("<icall>", override=override)
        self._sites: dict[Site, list[str]] = {}
        self._threads: dict[tuple[Thread, int, int], str] = {}

    def site_pieces(self, site: Site) -> list[str]:
        """The site's text split where the region counter goes."""
        pieces = self._sites.get(site)
        if pieces is None:
            choices = {NESTING: site.nesting, BODY: site.body, CALLEE: site.callee}
            wrapper = expand("<site>", choices.__getitem__, keep=_KEEP, override=self.override)
            region = expand("<region>", choices.__getitem__, override=self.override)
            if site.nesting != Nesting.NONE:
                region = "".join("  " + line for line in region.splitlines(keepends=True))
            pieces = self._sites[site] = wrapper.replace("<region>", region).split(REGION_NUMBER)
        return pieces

    def thread_text(self, thread: Thread, number: int, first_region: int) -> str:
        key = (thread, number, first_region)
        text = self._threads.get(key)
        if text is None:
            t = str(number)
            parts = [t.join(self.thread_open)]
            if thread.icall:
                parts.append(self.icall)
            for offset, site in enumerate(thread.sites):
                parts.append(str(first_region + offset).join(self.site_pieces(site)))
            parts.append(t.join(self.thread_close))
            text = self._threads[key] = "".join(parts)
        return text


_STYLES = {name: _Style(name) for name in STYLES}


def _style(name: str) -> _Style:
    try:
        return _STYLES[name]
    except KeyError:
        raise ValueError(f"unknown rendering {name!r}: choose one of {', '.join(STYLES)}") from None


def render(program: Program, style: str = "canonical") -> str:
    """The program's text in the given rendering."""
    fragments = _style(style)
    parts = [fragments.module_head]
    region = 0
    for number, thread in enumerate(program.threads):
        parts.append(fragments.thread_text(thread, number, region))
        region += len(thread.sites)
    parts.append(fragments.module_tail)
    return "".join(parts)


def render_stream(programs: Iterable[Program], style: str = "canonical") -> Iterator[str]:
    """Texts separated by ``// -----`` lines, for ``--split-input-file``."""
    fragments = _style(style)
    head, tail, thread_text = fragments.module_head, fragments.module_tail, fragments.thread_text
    first = True
    for program in programs:
        parts = [head] if first else [SPLIT_MARKER, head]
        first = False
        region = 0
        for number, thread in enumerate(program.threads):
            parts.append(thread_text(thread, number, region))
            region += len(thread.sites)
        parts.append(tail)
        yield "".join(parts)
