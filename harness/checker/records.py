"""What the precondition pass records as it walks, for uniqueness (P16, P17, P24)
and the conventions, which judge the program after the walk."""

from __future__ import annotations

from dataclasses import dataclass, field

from .text import Token
from .tree import Node


@dataclass(eq=False)
class Region:
    """A region checked in place, with the names it binds (P16, P17)."""

    node: Node
    result: Token | None = None
    graph: Token | None = None  # the string literal, quotes included


@dataclass(eq=False)
class Site:
    """A region site: a region alone (no wrapper) or an scf.if/scf.for wrapper."""

    wrapper: Node | None
    regions: list[Region] = field(default_factory=list)
    iv: Token | None = None  # scf.for induction variable


@dataclass(eq=False)
class Thread:
    """A dataflow.thread: its symbol, sites and thread-level calls."""

    node: Node
    sym: Token | None = None
    sites: list[Site] = field(default_factory=list)
    calls: list[tuple[int, Node]] = field(default_factory=list)  # (body index, op)


@dataclass
class RegionHeader:
    """What a region's opening line declares."""

    result: Token | None = None
    operands: list[Token] | None = None
    op_segs: list[int] | None = None
    res_segs: list[int] | None = None


@dataclass
class RegionTail:
    """What a region's closing line declares."""

    attrs: list[tuple[Token, Token | None]] | None = None
    attrs_col: int = 1
    ins: list[Token] | None = None
    outs: list[Token] | None = None
