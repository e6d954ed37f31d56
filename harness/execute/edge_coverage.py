"""Operand coverage of edge values: which (operation, operand position, edge value) an exec module reaches.

Most wrong folds need an edge value (:mod:`harness.execute.edge_values`: ``0``,
``1``, ``-1``, ``2``, ``2^k``, ``INT_MIN``, ``INT_MIN+1``, ``INT_MAX``,
``INT_MAX-1``; ``true``/``false`` for ``i1``) known at compile time in the
operand where the fold goes wrong.  For a sample of exec modules
(:mod:`harness.execute.exec_rendering`, with or without constant twins:
:mod:`harness.execute.twins`) this measures, per triple ``(op, position, class)``,
whether some module reaches it

* as a **constant**: the operand is known to be one value by a walk of the
  function's text alone (constants through every arith operation, ``select`` /
  ``scf.if`` of a known condition, a ``scf.for`` that never runs);
* as a **narrow range**: the operand is known to lie in an interval of 2 to 16
  values holding the edge value (``andi`` with a small mask, ``minsi``/``maxsi``
  with a constant, ``select``/``scf.if`` of two constants, ``extui`` of an ``i1``,
  ``remui`` by a constant, a loop's induction variable, ...); an ``i1`` has no
  narrow range (two values are its whole type);
* at **run time**: the operand has that value when ``main`` runs the function on
  some row of the input table (:mod:`harness.execute.inputs`), computed here by
  running the same parsed functions on the rows (a row stops at undefined
  behaviour, at an operation this module does not know, or after 100,000 steps:
  nothing is guessed).

The compile-time walk is per function (no inlining: a call's results, loads and
loop-carried values are unknown); it is this module's own, as is the run-time one
(it shares no code with the reference interpreter).  The operations measured are
those that compute (``arith``, ``llvm.add``/``mul``/``freeze``, ``memref.store``'s
value, ``scf.if``'s condition), each operand of an integer type (``i32`` and
``i1`` with their classes, every other width and ``index`` with its own, named
by the width: ``i8:MIN``; :func:`harness.execute.edge_values.edge_classes`); calls,
yields, returns and loop bounds pass values on and are not measured.  Dead
operations count as well (a canonicalizer erases them before folding).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Iterable, NamedTuple

from harness.execute import inputs
from harness.execute.exec_main import HARNESS_FUNCTIONS
from harness.execute.edge_values import (Undefined, classes_in, concrete, edge_class, edge_classes, full, interval,
                                         narrow)
from harness.execute.exec_layout import layout_of

__all__ = ["EdgeCoverage", "EdgeRow", "Triple", "edge_coverage", "module_coverage"]

Triple = tuple[str, int, str]  # (operation, operand position, edge class)
_STEPS = 100_000
_NAME = r"%[\w$.#-]+"
_UNMEASURED = {"func.call", "llvm.call", "return", "func.return", "llvm.return", "scf.yield", "scf.for",
               "memref.load", "arith.constant", "llvm.mlir.constant"}
_TERMINATORS = {"return", "func.return", "llvm.return", "scf.yield"}


class _Op:
    __slots__ = ("name", "short", "results", "operands", "types", "attr", "regions", "measured", "result_types")

    def __init__(self, name: str, results: list[str], operands: list[str], types: tuple[str, str],
                 result_types: list[str], attr: object = ()) -> None:
        self.name, self.results, self.operands, self.types = name, results, operands, types
        self.short = name.rpartition(".")[2]
        self.result_types, self.attr = result_types, attr
        self.regions: list[list[_Op]] = []
        self.measured: list[tuple[int, str]] = []


@dataclass
class _Function:
    params: list[tuple[str, str]]
    body: list[_Op]


# ------------------------------------------------------------------ reading the module


def _types(text: str) -> list[str]:
    text = text.strip()
    if text.startswith("("):
        text = text[1:-1]
    return [t.strip() for t in text.split(",") if t.strip()]


def _results(text: str) -> list[str]:
    text = text.strip()
    if ":" in text:  # %x:2
        name, _, count = text.partition(":")
        return [f"{name}#{k}" for k in range(int(count))]
    return [r.strip() for r in text.split(",")]


def _element(memref: str) -> str:
    match = re.search(r"x(\w+)>", memref)
    return match.group(1) if match else "?"


def _op(line: str, types: dict[str, str]) -> _Op:
    """One line's operation; one this reader cannot read is an unknown operation (its
    results unknown at compile time, its row stopped at run time)."""
    try:
        return _read_op(line, types)
    except (AttributeError, ValueError, IndexError):
        head, sep, _ = line.partition(" = ")
        results = _results(head) if sep and line.startswith("%") else []
        return _Op("?", results, re.findall(_NAME, line), ("?", "?"), ["?"] * len(results))


def _read_op(line: str, types: dict[str, str]) -> _Op:
    results: list[str] = []
    if line.startswith("%") and " = " in line:
        head, _, line = line.partition(" = ")
        results = _results(head)
    name = re.match(r"[\w.]+", line).group(0)
    rest = line[len(name):].strip()
    body, _, type_text = rest.rpartition(" : ") if " : " in rest else (rest, "", "")
    operands = re.findall(_NAME, body)
    attr: object = ()
    if name in ("arith.constant", "llvm.mlir.constant"):
        m = re.match(r"\(?\s*(-?\d+|true|false)", rest)
        value = {"true": 1, "false": 0}.get(m.group(1)) if m else None
        type_ = type_text.strip() or ("i1" if value is not None else "?")  # true/false: no type written
        attr = int(m.group(1)) if value is None and m else value
        op = _Op(name, results, [], (type_, type_), [type_], attr)
    elif name == "scf.if":
        m = re.match(rf"({_NAME})(?:\s*->\s*\((.*)\))?\s*\{{", rest)
        op = _Op(name, results, [m.group(1)], ("i1", "i1"), _types(m.group(2) or ""))
    elif name == "scf.for":
        m = re.match(rf"({_NAME}) = ({_NAME}) to ({_NAME}) step ({_NAME})(?:\s+iter_args\((.*?)\))?"
                     r"(?:\s*->\s*\((.*)\))?\s*\{", rest)
        pairs = [p.split(" = ") for p in (m.group(5) or "").split(", ") if p]
        result_types = _types(m.group(6) or "")
        op = _Op(name, results, [m.group(2), m.group(3), m.group(4)] + [p[1].strip() for p in pairs],
                 ("index", "index"), result_types, (m.group(1), [p[0].strip() for p in pairs]))
        types[m.group(1)] = "index"
        types.update(zip(op.attr[1], result_types))
    elif name in ("func.call", "llvm.call"):
        m = re.match(r"@([\w$.-]+)\((.*?)\)\s*:\s*\((.*?)\)\s*->\s*(.*)$", rest)
        op = _Op(name, results, re.findall(_NAME, m.group(2)), ("?", "?"), _types(m.group(4)), m.group(1))
    elif name in ("memref.load", "memref.store"):
        element = _element(type_text)
        op = _Op(name, results, operands, (element, element), [element] if results else [])
        if name == "memref.store":
            types.setdefault(operands[0], element)
    elif name == "arith.cmpi":
        predicate = rest.split(",")[0].strip()
        t = type_text.strip()
        op = _Op(name, results, operands, (t, "i1"), ["i1"], predicate)
    else:
        source, _, target = type_text.partition(" to ")
        source, target = source.strip(), (target or source).strip()
        flags = re.search(r"overflow<([\w, ]+)>", body)
        attr = tuple(f.strip() for f in flags.group(1).split(",")) if flags else ()
        op = _Op(name, results, operands, (source, target), [target] * len(results), attr)
        if name == "arith.select" and operands:
            op.types = (target, target)
    types.update(zip(op.results, op.result_types))
    return op


def _measure(op: _Op, types: dict[str, str]) -> None:
    if op.name in _UNMEASURED:
        return
    for pos, value in enumerate(op.operands):
        type_ = types.get(value, "i1" if op.name == "scf.if" else op.types[0])
        if op.name == "arith.select" and pos == 0:
            type_ = "i1"
        if edge_classes(type_):
            op.measured.append((pos, type_))


_HEADER = re.compile(r"^(?:func\.func|llvm\.func)\s+(?:private\s+)?@([\w$.-]+)\((.*?)\)(.*)$")


def _module(text: str) -> dict[str, _Function]:
    """Every function with a body: name -> params and ops (nested regions in ``op.regions``)."""
    functions: dict[str, _Function] = {}
    lines = text.splitlines()
    k = 0
    while k < len(lines):
        header = _HEADER.match(lines[k])
        k += 1
        if header is None or not header.group(3).rstrip().endswith("{"):
            continue
        if any(fnmatchcase(header.group(1), name) for name in HARNESS_FUNCTIONS):
            # the harness's loop over the table and its line printers: not measured
            while k < len(lines) and lines[k] != "}":
                k += 1
            k += 1
            continue
        params = [(p.partition(":")[0].strip(), p.partition(":")[2].strip())
                  for p in header.group(2).split(",") if ":" in p]
        types = dict(params)
        stack: list[list[_Op]] = [[]]
        owners: list[_Op] = []
        while k < len(lines) and lines[k] != "}":
            line = lines[k].strip()
            k += 1
            if not line or line.startswith("//"):
                continue
            if line.startswith("}"):
                region = stack.pop()
                owners[-1].regions.append(region)
                if line.endswith("{"):  # } else {
                    stack.append([])
                else:
                    owners.pop()
                continue
            op = _op(line, types)
            stack[-1].append(op)
            if line.endswith("{"):
                owners.append(op)
                stack.append([])
        k += 1
        body = stack[0]
        _walk_ops(body, lambda op: _measure(op, types))
        functions[header.group(1)] = _Function(params, body)
    return functions


def _walk_ops(ops: list[_Op], visit) -> None:
    for op in ops:
        visit(op)
        for region in op.regions:
            _walk_ops(region, visit)


# ------------------------------------------------------------------ compile time: what the text says


def _known_block(ops: list[_Op], env: dict, seen: "EdgeCoverage", trace: dict | None = None
                 ) -> list[tuple[int, int]]:
    """Walk ops with what ``env`` knows; the terminator's operands' intervals.  ``trace``
    (tests): id(op) -> its operands' intervals."""
    for op in ops:
        known = [env.get(v) or full("?") for v in op.operands]
        if trace is not None:
            trace[id(op)] = known
        for pos, type_ in op.measured:
            lo, hi = known[pos]
            if lo == hi:
                seen.constant.add((op.name, pos, edge_class(lo, type_)))
            elif narrow((lo, hi), type_):
                seen.narrow.update((op.name, pos, c) for c in classes_in((lo, hi), type_))
        if op.name in _TERMINATORS:
            return known
        if op.name in ("arith.constant", "llvm.mlir.constant"):
            values = [(op.attr, op.attr)] if isinstance(op.attr, int) else [full(op.types[1])]
        elif op.name == "scf.if":
            yields = [_known_block(region, env, seen, trace) for region in op.regions]
            if known[0][0] == known[0][1] and len(yields) == 2:
                values = yields[0] if known[0][0] else yields[1]
            elif len(yields) == 2 and op.result_types:
                values = [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(*yields)]
            else:
                values = []
        elif op.name == "scf.for":
            (lb, _), (_, ub_hi) = known[0], known[1]
            env[op.attr[0]] = (lb, max(lb, ub_hi - 1))
            env.update((name, full(t)) for name, t in zip(op.attr[1], op.result_types))
            _known_block(op.regions[0], env, seen, trace)
            never = lb >= ub_hi
            values = known[3:] if never else [full(t) for t in op.result_types]
        elif op.name in ("func.call", "llvm.call", "memref.load") or not op.results:
            values = [full(t) for t in op.result_types]
        else:
            values = [interval(op.short, known, op.types, op.attr)]
        env.update(zip(op.results, values))
    return []


# ------------------------------------------------------------------ run time: the rows of the input table


class _Stop(Exception):
    """A row ends here: undefined behaviour, an unknown operation, the step budget."""


class _Runner:
    def __init__(self, functions: dict[str, _Function], seen: set[Triple]) -> None:
        self.functions, self.seen, self.steps = functions, seen, 0
        self.trace: list | None = None  # tests: (id(op), operand values) of every step

    def call(self, name: str, args: list) -> list:
        function = self.functions.get(name)
        if function is None:
            raise _Stop(f"no body for @{name}")
        return self.block(function.body, {p: a for (p, _), a in zip(function.params, args)})

    def block(self, ops: list[_Op], env: dict) -> list:
        seen = self.seen
        for op in ops:
            self.steps += 1
            if self.steps > _STEPS:
                raise _Stop("step budget")
            args = [env[v] for v in op.operands]
            if self.trace is not None:
                self.trace.append((id(op), args))
            for pos, type_ in op.measured:
                seen.add((op.name, pos, edge_class(args[pos], type_)))
            name = op.name
            if name in _TERMINATORS:
                return args
            if name in ("arith.constant", "llvm.mlir.constant"):
                if not isinstance(op.attr, int):
                    raise _Stop(f"constant {op.attr!r}")
                values = [op.attr]
            elif name == "scf.if":
                taken = op.regions[0] if args[0] else (op.regions[1] if len(op.regions) > 1 else [])
                values = self.block(taken, env)
            elif name == "scf.for":
                low, high, step, carried = args[0], args[1], args[2], args[3:]
                if step <= 0:
                    raise _Stop("non-positive step")
                iv, names = op.attr
                for i in range(low, high, step):
                    env[iv] = i
                    env.update(zip(names, carried))
                    carried = self.block(op.regions[0], env)
                values = carried
            elif name in ("func.call", "llvm.call"):
                values = self.call(op.attr, args)
            elif name in ("memref.load", "memref.store"):
                memory, index = (args[0], args[1:]) if name == "memref.load" else (args[1], args[2:])
                if len(index) != 1 or not 0 <= index[0] < len(memory):
                    raise _Stop("access outside the buffer")
                if name == "memref.store":
                    memory[index[0]] = args[0]
                    continue
                values = [memory[index[0]]]
            else:
                try:
                    values = [concrete(op.short, args, op.types, op.attr)]
                except (Undefined, KeyError, TypeError) as error:
                    raise _Stop(str(error)) from None
            env.update(zip(op.results, values))
        return []


def _arguments(types: tuple[str, ...], row: int, buffer: list[int]) -> list:
    args, i32s, flags = [], 0, 0
    for type_ in types:
        if type_ == "i1":
            args.append(inputs.FLAGS[row][flags % inputs.COLUMNS])
            flags += 1
        elif type_ == "i32":
            args.append(inputs.I32[row][i32s % inputs.COLUMNS])
            i32s += 1
        else:
            args.append(buffer)
    return args


def _calls(text: str, functions: dict[str, _Function]) -> list[tuple[str, tuple[str, ...], tuple[int, ...], range]]:
    """What ``main`` calls: (symbol, argument kinds, constant arguments left out, rows)."""
    if "// loomfuzz-exec " in text:
        layout = layout_of(text).functions
        return [(f.symbol, f.arg_types, f.constant_args, f.rows or range(inputs.ROWS)) for f in layout]
    kinds = {"i32": "i32", "i1": "i1", "memref<4xi32>": "memref"}  # a module without a layout: every function
    return [(name, tuple(kinds[t] for _, t in f.params), (), range(inputs.ROWS)) for name, f in functions.items()
            if not any(fnmatchcase(name, h) for h in HARNESS_FUNCTIONS) and all(t in kinds for _, t in f.params)]


# ------------------------------------------------------------------ the measurement


class EdgeRow(NamedTuple):
    op: str
    position: int
    constant: int  # edge classes reached as a compile-time constant
    narrow: int  # ... inside a narrow known range
    run_time: int  # ... as a value in execution
    total: int  # edge classes of the operand's type(s)


@dataclass
class EdgeCoverage:
    """The triples a sample reaches, per kind; ``possible``: every triple of the operand
    positions the sample has (each position's classes of its type)."""

    possible: set[Triple] = field(default_factory=set)
    constant: set[Triple] = field(default_factory=set)
    narrow: set[Triple] = field(default_factory=set)
    run_time: set[Triple] = field(default_factory=set)
    programs: int = 0
    operations: int = 0  # measured operations, counted in every program
    stopped_rows: int = 0  # (function, row) runs that stopped early (undefined behaviour, ...)

    def merge(self, other: "EdgeCoverage") -> "EdgeCoverage":
        """Add ``other`` into this one (returns self)."""
        for name in ("possible", "constant", "narrow", "run_time"):
            getattr(self, name).update(getattr(other, name))
        self.programs += other.programs
        self.operations += other.operations
        self.stopped_rows += other.stopped_rows
        return self

    def table(self) -> list[EdgeRow]:
        """One row per (operation, operand position), sorted."""
        counts: dict[tuple[str, int], list[int]] = {}
        for kind, triples in enumerate((self.constant, self.narrow, self.run_time, self.possible)):
            for op, pos, _ in triples:
                counts.setdefault((op, pos), [0, 0, 0, 0])[kind] += 1
        return [EdgeRow(op, pos, *values) for (op, pos), values in sorted(counts.items())]

    def summary(self) -> str:
        total = len(self.possible)
        share = lambda s: f"{len(s)} ({100 * len(s) / total:.1f}%)" if total else "0"  # noqa: E731
        return (f"edge values: {self.programs} programs, {self.operations} operations, "
                f"{len({t[:2] for t in self.possible})} operand positions, {total} (op, operand, edge value) triples: "
                f"constant {share(self.constant)}, narrow range {share(self.narrow)}, "
                f"compile time {share(self.constant | self.narrow)}, run time {share(self.run_time)}")

    def as_json(self) -> dict:
        return {"programs": self.programs, "operations": self.operations, "stopped_rows": self.stopped_rows,
                "triples": len(self.possible),
                **{kind: sorted(list(t) for t in getattr(self, kind)) for kind in ("constant", "narrow", "run_time")},
                "table": [row._asdict() for row in self.table()]}


def module_coverage(exec_text: str) -> EdgeCoverage:
    """The triples one exec module reaches (see the module docstring)."""
    functions = _module(exec_text)
    seen = EdgeCoverage(programs=1)
    for function in functions.values():
        def count(op: _Op) -> None:
            seen.operations += bool(op.measured)
            for pos, type_ in op.measured:
                seen.possible.update((op.name, pos, c) for c in edge_classes(type_))

        _walk_ops(function.body, count)
        _known_block(function.body, {p: full(t) for p, t in function.params}, seen)
    runner = _Runner(functions, seen.run_time)
    for symbol, kinds, constant, rows in _calls(exec_text, functions):
        for row in rows:
            args = _arguments(kinds, row, list(inputs.MEMORY[row]))
            runner.steps = 0
            try:
                runner.call(symbol, [a for k, a in enumerate(args) if k not in constant])
            except (_Stop, KeyError, IndexError, TypeError, RecursionError):  # (a text this reader misread)
                seen.stopped_rows += 1
    for kind in (seen.constant, seen.narrow, seen.run_time):
        kind.difference_update([t for t in kind if t[2] is None])
        kind.intersection_update(seen.possible)
    return seen


def edge_coverage(exec_texts: Iterable[str]) -> EdgeCoverage:
    """The triples a sample of exec modules reaches, merged."""
    total = EdgeCoverage()
    for text in exec_texts:
        total.merge(module_coverage(text))
    return total
