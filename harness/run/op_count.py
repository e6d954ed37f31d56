"""Operations of a module as an MLIR tool prints it: names, locations, results, operands.

A small reader of printed MLIR (``mlir-opt``'s output, custom or generic form,
one operation per line), enough to count operations by name and to follow a
value from the operation that defines it to the operations that use it
(:mod:`harness.run.pass_effect` compares a module before and after a pass).
It is not a parser of MLIR: it trusts the printer's layout.

* An operation is a line ``[%results =] name ...``; one that ends with ``{`` opens
  regions, and its location is on the line of its closing ``}``; ``} else {``,
  ``} do {`` and ``}, {`` separate regions.  (Not read: operations whose regions
  start on lines of their own, such as ``scf.index_switch``'s ``case N {``; no
  rendering of loom-fuzz's grammars has them.)
* The terminator a region's printer leaves out (``scf.yield`` of a ``scf.for`` without
  results: :data:`IMPLICIT_TERMINATORS`) is counted as the parser builds it, without
  a location.
* Names are full names: an unqualified name (what a ``func.func`` prints for its
  own dialect's operations: ``return``, ``call``) is ``func.<name>``, ``module`` is
  ``builtin.module``, a generic ``"dialect.op"(...)`` its quoted name.
* With ``--mlir-print-debuginfo --mlir-print-local-scope`` each operation ends with
  its location, ``loc(...)``, which stays with it through passes that keep it: the
  identity :mod:`harness.run.pass_effect` matches operations by.
* Value names are scoped per operation directly inside the module (a function):
  the printer numbers ``%0, %1 ...`` again in each.
"""

from __future__ import annotations

import re
from collections import Counter
from fnmatch import fnmatchcase
from dataclasses import dataclass

__all__ = ["Op", "PrintedModule", "count_ops", "read_module", "strip_locations"]

_VALUE = r"%[\w$.-]+(?:#\d+)?"
_RESULTS = re.compile(r"^(%[\w$.-]+(?::\d+)?(?:\s*,\s*%[\w$.-]+(?::\d+)?)*)\s*=\s*")
_NAME = re.compile(r'"([\w$.]+)"|([A-Za-z_][\w$.]*)')
_USE = re.compile(_VALUE)
_DEFINED_HERE = re.compile(rf"({_VALUE})(?:\s*=(?!=)|:(?=\s))")  # %i = %lb (scf.for), %arg0: i32
#: operations whose regions end in a terminator the printer leaves out when it has no operands
IMPLICIT_TERMINATORS = {"scf.for": "scf.yield", "scf.if": "scf.yield", "scf.parallel": "scf.reduce",
                        "scf.forall": "scf.forall.in_parallel", "affine.for": "affine.yield",
                        "affine.if": "affine.yield", "affine.parallel": "affine.yield"}


@dataclass(frozen=True)
class Op:
    name: str  # full name: arith.addi, func.return, builtin.module
    loc: str  # the location as printed, inside loc(...): '"<stdin>":4:8', 'unknown'; "" when none is
    results: tuple[str, ...]  # the values it defines (%0, %1#0, %1#1)
    operands: tuple[str, ...]  # the values it uses, in the order printed
    scope: int  # the operation directly inside the module it belongs to (value names are per scope)
    depth: int  # 0: the module; 1: a function; 2: inside a function ...
    function: str = ""  # the symbol of that operation (a function's name), "" for none
    text: str = ""  # its line as printed, without locations

    @property
    def constant(self) -> bool:
        """A constant: ``arith.constant``, ``llvm.mlir.constant``, any ``*.constant``."""
        return self.name.rpartition(".")[2].lower() == "constant"


@dataclass(frozen=True)
class PrintedModule:
    ops: tuple[Op, ...]  # in the order their lines start

    def counts(self) -> Counter:
        """Operations by name."""
        return Counter(op.name for op in self.ops)

    def without(self, functions: frozenset[str] | tuple[str, ...]) -> "PrintedModule":
        """The module without the operations of the named functions (the functions too); a
        name may be a shell pattern (``exec_line_*``: an exec module's line printers)."""
        if not functions:
            return self
        return PrintedModule(tuple(op for op in self.ops
                                   if not any(fnmatchcase(op.function, name) for name in functions)))

    def definers(self) -> dict[tuple[int, str], int]:
        """(scope, value) -> the index of the operation that defines it."""
        return {(op.scope, value): k for k, op in enumerate(self.ops) for value in op.results}


def _split_location(line: str) -> tuple[str, str]:
    """(the line without its trailing ``loc(...)``, the location inside), or (line, "")."""
    if not line.endswith(")"):
        return line, ""
    depth, k = 0, len(line) - 1
    while k >= 0:
        c = line[k]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                break
        elif c == '"':  # a quoted file name: skip to its opening quote
            k = line.rfind('"', 0, k)
        k -= 1
    if k >= 3 and line[k - 3:k] == "loc":
        return line[:k - 3].rstrip(), line[k + 1:-1]
    return line, ""


def strip_locations(text: str) -> str:
    """``text`` without any ``loc(...)`` (trailing, and inside argument lists)."""
    out, k = [], 0
    while True:
        at = text.find("loc(", k)
        if at < 0:
            out.append(text[k:])
            return "".join(out)
        if at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_.#"):
            out.append(text[k:at + 4])
            k = at + 4
            continue
        depth, j = 0, at + 3
        while j < len(text):
            c = text[j]
            if c == '"':
                j = text.find('"', j + 1)
                if j < 0:
                    j = len(text)
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        start = at - 1 if at > 0 and text[at - 1] == " " else at
        out.append(text[k:start])
        k = j + 1


def _full_name(name: str) -> str:
    if "." in name:
        return name
    return "builtin.module" if name == "module" else f"func.{name}"


def _results(text: str) -> tuple[str, ...]:
    values = []
    for part in text.split(","):
        name, _, count = part.strip().partition(":")
        values += [f"{name}#{k}" for k in range(int(count))] if count else [name]
    return tuple(values)


def read_module(text: str) -> PrintedModule:
    """The operations of the printed module(s) ``text`` (a ``// -----`` stream reads as one)."""
    ops: list[dict] = []
    stack: list[int] = []  # the ops whose regions are open (indices into ops)
    last: list[str | None] = []  # per open op: the name of the last operation directly in its region
    generic: list[bool] = []  # per open op: printed in the generic form
    scope, function = -1, ""

    def end_region() -> None:
        owner = ops[stack[-1]]
        implicit = IMPLICIT_TERMINATORS.get(owner["name"])
        if implicit and last[-1] != implicit and not generic[-1]:  # the generic form prints them all
            ops.append({"name": implicit, "loc": "", "results": (), "operands": (), "scope": owner["scope"],
                        "depth": len(stack), "function": owner["function"]})
        last[-1] = None

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", "#", "!", "^")):
            continue  # comments, attribute and type aliases, block labels
        if line.startswith("}"):
            body, loc = _split_location(line)
            if stack:
                end_region()
            if body.endswith("{"):
                continue  # } else {   }, {   another region of the same op
            if stack:
                ops[stack.pop()]["loc"] = loc
                last.pop()
                generic.pop()
            continue
        results: tuple[str, ...] = ()
        match = _RESULTS.match(line)
        if match:
            results, line = _results(match.group(1)), line[match.end():]
        name_match = _NAME.match(line)
        if name_match is None:
            continue
        name = name_match.group(1) or name_match.group(2)
        rest, loc = _split_location(line[name_match.end():])
        rest = re.sub(r"\sloc\((?:[^()]|\([^()]*\))*\)", "", rest)  # block arguments' locations
        defined = {m.group(1) for m in _DEFINED_HERE.finditer(rest)}
        operands = tuple(v for v in _USE.findall(rest) if v not in defined)
        depth = len(stack)
        if depth == 1:
            scope += 1
            symbol = re.search(r"@([\w$.-]+)", rest)
            function = symbol.group(1) if symbol else ""
        elif depth == 0:
            function = ""
        full = _full_name(name) if not name_match.group(1) else name
        ops.append({"name": full, "loc": loc, "results": results, "operands": operands,
                    "scope": max(scope, 0), "depth": depth, "function": function,
                    "text": strip_locations(raw.strip())})
        if last:
            last[-1] = full
        if rest.endswith("{") or rest.endswith("({"):
            stack.append(len(ops) - 1)
            last.append(None)
            generic.append(bool(name_match.group(1)))
    return PrintedModule(tuple(Op(**op) for op in ops))


def count_ops(text: str) -> Counter:
    """Operations by full name in the printed module ``text``."""
    return read_module(text).counts()
