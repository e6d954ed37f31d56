"""The render pass compiled to Python source, once per grammar and style.

:class:`harness.core.render.Renderer` interprets each node's step list
(:class:`harness.core.render_steps.RenderSteps`; the parser drives that
interpreter part by part, and it is the reference).  Rendering
a whole tree runs this compiled form instead: one function per (nonterminal,
alternative) in which the terminals (padded per indentation, looked up once per
call), counters, binder operations and the line-start state are constants or
straight-line code.  So nothing is dispatched per part:

* runs of terminals and words (names, uses, counter values) become one f-string;
* whether a part starts a line is tracked at compile time where the code before
  it fixes it (after any terminal or word), at run time only after a child;
* a use nonterminal (every alternative one ``$^K`` of one type set) is read in
  its parent, without a call;
* the binder's lists are one list per type set the grammar's uses ask for
  (:class:`harness.core.scope.Scope`'s ``lists``): a define appends to the lists
  of its type (known statically), a scope truncates the lists its inside can
  grow, a pick is one index;
* a tabulated subtree outside the binder is cached as text, keyed by only the
  counters it reads or takes.

It gives the interpreter's text for every tree (tests compare them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from harness.core.codegen import Module
from harness.core.compiled import CompiledGrammar, Node
from harness.core.render_steps import RenderSteps, pad
from harness.core.scope import NameRef, UseRef

_CACHE_LIMIT = 50_000  # per nonterminal


class _Pads(dict):
    """indent -> the alternative's terminals padded twice (mid-line, at a line start),
    flattened, then the indentation itself: ``pads[i][2 * j + line_start]`` is
    terminal j's text, ``pads[i][-1]`` the spaces before a word at a line start."""

    def __init__(self, terminals: tuple[str, ...]) -> None:
        super().__init__()
        self.terminals = terminals

    def __missing__(self, indent: int) -> tuple[str, ...]:
        out: list[str] = []
        for text in self.terminals:
            out.extend(pad(text, indent)[:2] if indent else (text, text))
        out.append(" " * indent)
        value = self[indent] = tuple(out)
        return value


class _Names(dict):
    """number -> PREFIX + number, each made once."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def __missing__(self, number: int) -> str:
        value = self[number] = f"{self.prefix}{number}"
        return value


def _closure(grammar: CompiledGrammar, own: list[frozenset]) -> list[frozenset]:
    """Per nonterminal: the union of ``own`` over every subtree it can derive (fixpoint)."""
    out = list(own)
    changed = True
    while changed:
        changed = False
        for n, alt_list in enumerate(grammar.alts):
            new = out[n].union(*(out[k] for alt in alt_list for k in alt.kids))
            if new != out[n]:
                out[n], changed = new, True
    return out


def compile_pass(r: RenderSteps) -> tuple[Callable[[Node], str], Callable[[Iterable[Node], str], str], list]:
    """``render(tree) -> text`` and ``render_batch(trees, separator) -> text`` (the texts
    joined by ``separator``, in one join: what a stream of programs is written as): the
    pass of ``r`` as specialised Python source (:func:`render_pass_module`); and the
    one-item list where ``render_batch`` keeps the tree it is at (for the error of a
    tree that fails)."""
    ns = render_pass_module(r).load()
    return ns["render"], ns["render_batch"], ns["CURRENT"]


@dataclass
class _Plan:
    """What the pass's source is made from, besides the renderer's steps."""

    prefixes: list[str]  # the name prefixes defines and binds make names with
    pid: dict[str, int]  # prefix -> its index in NUM
    routes: dict[str, list[int]]  # type -> the group lists a value of it goes into
    defined: list[frozenset]  # per nonterminal, the types its subtree can define or bind
    takes: list[frozenset]  # per nonterminal, the counters its subtree takes (a cached text's key)
    reads: list[frozenset]  # per nonterminal, the counters its subtree reads ($NAME)


def _plan(r: RenderSteps) -> _Plan:
    g = r.grammar
    prefixes = sorted({p for alt_list in g.alts for alt in alt_list if alt.binding
                       for p, _ in alt.binding.defines + alt.binding.binds})
    routes: dict[str, list[int]] = {}
    for i, group in enumerate(r.use_groups):
        for t in group:
            routes.setdefault(t, []).append(i)
    defined = _closure(g, [frozenset(t for alt in alt_list if alt.binding
                                     for _, t in alt.binding.defines + alt.binding.binds)
                           for alt_list in g.alts])
    takes = _closure(g, [frozenset(r.counter_index[alt.counter] for alt in alt_list if alt.counter)
                         for alt_list in g.alts])
    reads = _closure(g, [frozenset(r.counter_index[p] for parts in r.parts[n] for p in parts
                                   if type(p) not in (str, int, NameRef, UseRef))
                         for n in range(len(g.alts))])
    return _Plan(prefixes, {p: i for i, p in enumerate(prefixes)}, routes, defined, takes, reads)


def render_pass_module(r: RenderSteps) -> Module:
    """The render pass of ``r`` as Python source: its state (the output list ``OUT``,
    the counters ``NXT``/``TOP``, the name numbers ``NUM``, the binder's lists ``G*``),
    a function per alternative (:func:`_alternatives_source`), the cached tabulated
    subtrees (:func:`_cached`) and the drivers (:func:`_drivers_source`)."""
    g = r.grammar
    plan = _plan(r)
    out: list[str] = []
    module = Module(f"<render pass of {g.source} ({r.style})>", constants={
        "OUT": out, "ap": out.append, "NXT": [0] * len(g.counters), "TOP": [-1] * len(g.counters),
        "NUM": [0] * len(plan.prefixes), "LIMIT": _CACHE_LIMIT})
    ns = module.constants
    for i, p in enumerate(plan.prefixes):
        ns[f"NAME{i}"] = _Names(p)
    for i in range(len(r.use_groups)):
        ns[f"G{i}"] = []
    module.lines += _alternatives_source(r, plan, ns)
    module.lines += _drivers_source(r, len(plan.prefixes))
    ns["FORWARD"] = r.forward
    ns["CURRENT"] = [None]
    return module


def _alternatives_source(r: RenderSteps, plan: _Plan, ns: dict) -> list[str]:
    """``R{n}[a]``, the function of alternative a of n, and ``c{n}`` for a cacheable n.

    The functions of alternatives that differ only in their terminals and in which
    nonterminals they call are made by one factory (given the pads and the callees):
    a third of the source to compile, which is start-up time.  The lists exist before
    any function does, so recursion needs no order."""
    g = r.grammar
    groups = r.use_groups

    def use_group(k: int) -> int | None:
        """The type set of a use nonterminal (every alternative one ``$^K`` of it)."""
        first = g.alts[k][0].binding
        if r.cacheable[k] or first is None or not first.uses:
            return None
        for a, alt in enumerate(g.alts[k]):
            if (len(r.parts[k][a]) != 1 or type(r.parts[k][a][0]) is not UseRef or alt.counter
                    or alt.binding is None or alt.binding.uses != first.uses):
                return None
        ns[f"RANK{k}"] = tuple(int(r.parts[k][a][0]) for a in range(len(g.alts[k])))
        return groups.index(first.uses)

    source: list[str] = []
    calls: list[str] = []
    bodies: dict[tuple[str, ...], int] = {}
    for n, alt_list in enumerate(g.alts):
        ns[f"R{n}"] = [None] * len(alt_list)
        for a, alt in enumerate(alt_list):
            refs: list[str] = []
            body = tuple(_AlternativeBody(r, n, a, ns, plan, use_group, refs).build())
            factory = bodies.get(body)
            if factory is None:
                factory = bodies[body] = len(bodies)
                params = "".join(f", K{j}" for j in range(len(refs)))
                source += [f"def f{factory}(PD{params}):", "    def r(kids, ind, ls):",
                           *("    " + line for line in body), "    return r"]
            pads = f"PD{n}_{a}" if f"PD{n}_{a}" in ns else "None"
            calls.append(f"R{n}[{a}] = f{factory}({pads}{''.join(', ' + ref for ref in refs)})")
        if r.cacheable[n]:
            source += _cached(g, n, plan.takes[n], plan.reads[n], ns)
    return source + calls


def _drivers_source(r: RenderSteps, prefixes: int) -> list[str]:
    """``miss`` (a cacheable subtree rendered and kept), the tables ``R`` and ``C``, and
    ``render``/``render_batch``, each program from a fresh state."""
    g = r.grammar
    counters = len(g.counters)
    source = [
        "def miss(k, node, ind, ls, cache, key, takes):",
        "    before = [NXT[i] for i in takes]",
        "    mark = len(OUT)",
        "    ls = R[k][node[1]](node[2], ind, ls)",
        "    text = ''.join(OUT[mark:])",
        "    del OUT[mark:]",
        "    ap(text)",
        "    if len(cache) >= LIMIT: cache.clear()",
        "    cache[key] = (text, tuple([NXT[i] - b for i, b in zip(takes, before)]), ls)",
        "    return ls",
        "R = (" + "".join(f"R{n}, " for n in range(len(g.alts))) + ")",
        "C = (" + "".join(f"c{n}, " if r.cacheable[n] else "None, " for n in range(len(g.alts))) + ")",
    ]
    one = [  # one program into OUT, from a fresh state
        *(f"NXT[{i}] = 0; TOP[{i}] = -1" for i in range(counters)),
        *(f"NUM[{i}] = 0" for i in range(prefixes)),
        *(f"G{i}.clear()" for i in range(len(r.use_groups))),
        "k, x = tree[0], tree",
        "while FORWARD[k]: x = x[2][0]; k = x[0]",
        "if C[k] is not None: C[k](x, 0, True)",
        "else: R[k][x[1]](x[2], 0, True)",
    ]
    return source + [
        "def render(tree):",
        "    OUT.clear()",
        *(f"    {line}" for line in one),
        "    text = ''.join(OUT)",
        "    OUT.clear()",
        "    return text",
        "def render_batch(trees, separator):",
        "    OUT.clear()",
        "    first = True",
        "    for tree in trees:",
        "        CURRENT[0] = tree",
        "        if first: first = False",
        "        else:",  # the separator starts a line even after a text without a final newline
        "            k = len(OUT) - 1",
        "            while k >= start and not OUT[k]: k -= 1",
        "            ap(separator if k < start or OUT[k][-1] == '\\n' else '\\n' + separator)",
        "        start = len(OUT)",
        *(f"        {line}" for line in one),
        "    text = ''.join(OUT)",
        "    OUT.clear()",
        "    CURRENT[0] = None",
        "    return text",
    ]


def _cached(g: CompiledGrammar, k: int, takes: frozenset, reads: frozenset, ns: dict) -> list[str]:
    """``c{k}(node, ind, ls)``: a tabulated subtree outside the binder, whose text
    depends only on the tree, the indentation, the line start and the counters it
    reads or takes; rendered once per such key, then copied."""
    table = g.tables[k]
    ns[f"CK{k}"], ns[f"TK{k}"], ns[f"BYID{k}"], ns[f"INDEX{k}"] = {}, tuple(sorted(takes)), table.by_id, table.index
    key = ["e", "ind", "ls", *(f"NXT[{i}]" for i in sorted(takes)), *(f"TOP[{i}]" for i in sorted(reads))]
    lines = [f"def c{k}(node, ind, ls):"]
    if len(table.trees) == 1:
        key.remove("e")
    else:
        lines += [f"    e = BYID{k}.get(id(node))", f"    if e is None: e = INDEX{k}.get(node)"]
    lines += [f"    key = ({', '.join(key)},)", f"    hit = CK{k}.get(key)",
              f"    if hit is None: return miss({k}, node, ind, ls, CK{k}, key, TK{k})",
              "    ap(hit[0])"]
    lines += [f"    NXT[{i}] += hit[1][{j}]" for j, i in enumerate(sorted(takes))]
    lines.append("    return hit[2]")
    return lines


class _AlternativeBody:
    """The body of ``r(kids, ind, ls) -> ls``, one alternative's part of the pass (its
    terminals are ``PD[ind]``, what it calls ``K0``, ``K1``... naming ``refs``), built part
    by part: runs of terminals and words are joined into one f-string (``pending``), and
    the line-start state is a constant (``known``) wherever the code so far fixes it."""

    def __init__(self, r: RenderSteps, n: int, a: int, ns: dict, plan: _Plan, use_group,
                 refs: list[str]) -> None:
        self.r, self.n, self.a, self.ns, self.plan, self.use_group, self.refs = r, n, a, ns, plan, use_group, refs
        self.alt = r.grammar.alts[n][a]
        self.parts, self.ci, self.shift, self.binding, self.bind_at, self.opens = r.steps[n][a]
        self.terminals = tuple(p for p in self.parts if type(p) is str)
        self.spaces = 2 * len(self.terminals)  # P[spaces]: the indentation before a word
        self.body: list[str] = []
        self.pending: list[str] = []  # pieces of one f-string, emitted together
        self.known: object = None  # the line-start state where the code so far fixes it
        self.names: list[str] = []  # the variables holding the names this alternative makes
        self.marks: list[int] = []  # the binder lists its scope truncates on the way out
        self.ind = "ind"  # the indentation a word is written at

    def build(self) -> list[str]:
        self._prologue()
        t = 0
        for part in self.parts:
            kind = type(part)
            if kind is str:
                self._terminal(part, t)
                t += 1
            elif kind is int:
                self._kid(part)
            elif kind is NameRef:
                self._word(self.names[int(part)])
            elif kind is UseRef:
                group = self.r.use_groups.index(self.binding.uses)
                rank = int(part)
                self._word(f"G{group}[-1]" if rank == 0 else f"G{group}[-1 - {rank} % len(G{group})]")
            else:
                self._counter(part)
        self._flush()
        self._epilogue()
        return self.body

    # -- emitting

    def _flush(self) -> None:
        pending = self.pending
        if len(pending) == 1:
            self.body.append(f"    ap({pending[0]})")
        elif pending:
            self.body.append('    ap(f"' + "".join("{" + p + "}" for p in pending) + '")')
        pending.clear()

    def _ref(self, name: str) -> str:
        if name not in self.refs:
            self.refs.append(name)
        return f"K{self.refs.index(name)}"

    def _materialise(self) -> None:  # ls must hold the state: code that branches reads it
        if self.known is not None:
            self.body.append(f"    ls = {self.known}")

    def _word(self, expr: str) -> None:
        if self.known is None:
            self._flush()
            self.body.append(f"    if {self.ind} and ls: ap(P[{self.spaces}])")
        elif self.known:
            self.pending.append(f"P[{self.spaces}]")
        self.pending.append(expr)
        self.known = False

    # -- the parts

    def _prologue(self) -> None:
        """The pads, the counter's next value, the names made and the scope's marks."""
        body, binding = self.body, self.binding
        if self.parts:
            self.ns[f"PD{self.n}_{self.a}"] = _Pads(self.terminals)
            body.append("    P = PD[ind]")
        ci = self.ci
        if ci >= 0:  # the next value of the counter, the innermost one for the subtree
            body += [f"    old = TOP[{ci}]", f"    TOP[{ci}] = v = NXT[{ci}]", f"    NXT[{ci}] = v + 1"]
        if self.opens:
            for j, (prefix, _) in enumerate(binding.defines + binding.binds):
                if j == len(binding.defines) and binding.local:
                    body.append("    saved = NUM[:]")  # the defined names stay outside
                p = self.plan.pid[prefix]
                body += [f"    c = NUM[{p}]", f"    NUM[{p}] = c + 1", f"    n{j} = NAME{p}[c]"]
                self.names.append(f"n{j}")
            if binding.local and not binding.binds:
                body.append("    saved = NUM[:]")
            if binding.scope:  # only the lists its inside can grow need a mark
                inside = (frozenset().union(*(self.plan.defined[k] for k in self.alt.kids))
                          | {t for _, t in binding.binds})
                self.marks = sorted({i for t in inside for i in self.plan.routes.get(t, ())})
                body += [f"    m{i} = len(G{i})" for i in self.marks]
        if self.shift and self.alt.kids:
            body.append(f"    inner = ind + {self.shift}")

    def _terminal(self, text: str, t: int) -> None:
        known = self.known
        self.pending.append(f"P[{2 * t} + ls]" if known is None else f"P[{2 * t + known}]")
        self.known = text[-1] == "\n"

    def _kid(self, part: int) -> None:
        r, g, body = self.r, self.r.grammar, self.body
        if part == self.bind_at:  # the bound values, visible inside the last child only
            self._flush()
            first = len(self.binding.defines)
            for j, (_, ty) in enumerate(self.binding.binds):
                body += [f"    G{i}.append(n{first + j})" for i in self.plan.routes.get(ty, ())]
        k, expr = self.alt.kids[part], f"kids[{part}]"
        while r.forward[k]:  # a nonterminal that only passes its child through
            expr, k = f"{expr}[2][0]", g.alts[k][0].kids[0]
        group = self.use_group(k)
        inner = "inner" if self.shift else "ind"
        if group is not None:  # a use: read here, no call
            self.ind = inner
            self._word(f"G{group}[-1 - {self._ref(f'RANK{k}')}[{expr}[1]] % len(G{group})]")
            self.ind = "ind"
            return
        self._flush()
        self._materialise()
        if r.cacheable[k]:
            body.append(f"    ls = {self._ref(f'c{k}')}({expr}, {inner}, ls)")
        elif len(g.alts[k]) == 1:
            body.append(f"    ls = {self._ref(f'R{k}')}[0]({expr}[2], {inner}, ls)")
        else:
            body += [f"    x = {expr}", f"    ls = {self._ref(f'R{k}')}[x[1]](x[2], {inner}, ls)"]
        self.known = None

    def _counter(self, name: str) -> None:
        """A counter's value: this alternative's own, or the innermost one's (perhaps none)."""
        c = self.r.counter_index[name]
        if c == self.ci:
            self._word("v")
            return
        if self.known is False:  # mid-line: an empty word changes nothing
            self.pending.append(f"TOP[{c}] if TOP[{c}] >= 0 else ''")
            return
        self._flush()
        self._materialise()
        self.body += [f"    w = TOP[{c}]", "    if w >= 0:", f"        if ind and ls: ap(P[{self.spaces}])",
                      "        ap(str(w))", "        ls = False"]
        self.known = None

    def _epilogue(self) -> None:
        """The scope closed, the defined names made visible, the counter restored."""
        body, binding = self.body, self.binding
        if self.opens:
            body += [f"    del G{i}[m{i}:]" for i in self.marks]
            if binding.local:
                body.append("    NUM[:] = saved")
            for j, (_, ty) in enumerate(binding.defines):  # visible after the alternative
                body += [f"    G{i}.append(n{j})" for i in self.plan.routes.get(ty, ())]
        if self.ci >= 0:
            body.append(f"    TOP[{self.ci}] = old")
        body.append(f"    return {self.known if self.known is not None else 'ls'}")
