"""The normal form of printed MLIR: what two builds of one tool are compared on.

Two builds of one tool (yesterday's and today's loom-raise-opt; MLIR 16 and
MLIR 22) print the same module with different spellings: other SSA names,
constants in another order, other spacing.  :func:`normalize` maps a printed
module to a text in which those spellings are gone, so that two outputs
compare equal exactly when they differ only in spelling.  The rules, in the
order they apply (docs/explanation/normal-form.md has examples):

1. **Locations and comments go**: ``#loc... = loc(...)`` alias lines, every
   ``loc(...)`` attribute, ``//`` comments (whole lines, and trailing ones such
   as ``// pred: ^bb0``) and blank lines.
2. **Whitespace**: leading and trailing blanks go (indentation repeats the
   braces), every run of blanks outside a string literal becomes one blank
   (MLIR 16 prints ``llvm.mul %a, %b  : i32``, MLIR 22 ``llvm.mul %a, %b : i32``),
   and no blank is kept before ``,``, ``)`` or ``]``.
3. **Scopes**: every operation directly in the module (a function, a
   dataflow graph, a global) is a scope of its own, as it is for the printer,
   whose value names restart there (told by indentation: a line indented no
   deeper than the module's operations, block labels aside, starts one);
   rules 4-5 apply per scope.
4. **Constants are inlined**: a line ``%x = arith.constant 5 : i32`` (also
   ``llvm.mlir.constant``, ``index.constant``, ``llvm.mlir.zero``,
   ``ub.poison``) goes, and every use of ``%x`` in its scope reads
   ``<arith.constant 5 : i32>``.  Where a pass puts its constants, in which
   order and whether it shares them, is spelling: the computation is the same.
5. **SSA values and blocks are renumbered**: each value name (``%arg0``,
   ``%c5_i32``, ``%0``, ``%sum``) becomes ``%N`` and each block label
   ``^bbN``, numbered from 0 in order of first appearance in the scope;
   result-group suffixes (``%0:2``, ``%0#1``) stay.  Symbols (``@name``),
   types and attributes stay as printed.

What it does not hide is behaviour: another operation, another operand order,
another type, an operation moved between blocks, a symbol removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CONSTANT_OPS", "LineDifference", "first_difference", "normalize", "operation_of"]

#: Operations whose single result is a constant: inlined at their uses (rule 4).
CONSTANT_OPS = ("arith.constant", "llvm.mlir.constant", "index.constant", "llvm.mlir.zero", "ub.poison")

_STRING = r'"(?:[^"\\]|\\.)*"'
#: A string literal, a value name, a block label, or a run of blanks.
_TOKEN = re.compile(rf'(?P<string>{_STRING})|(?P<value>%[\w$.\-]+)|(?P<block>\^[\w$.\-]+)|(?P<blank>\s+)')
_LOC_ALIAS = re.compile(r"^\s*#loc\d*\s*=\s*loc\(")
_LOC = re.compile(rf"\s*\bloc\((?:{_STRING}|[^()\"]|\((?:{_STRING}|[^()\"])*\))*\)")
_CONSTANT = re.compile(rf"^(%[\w$.\-]+) = ((?:{'|'.join(map(re.escape, CONSTANT_OPS))})\b.*)$")
_SPACE_BEFORE = re.compile(r" (?=[,)\]])")
_OPERATION = re.compile(r'(?:^|= )"?([a-z_][\w$]*\.[\w$.]+)"?')


def _strip_locations(line: str) -> str:
    previous = None
    while previous != line:  # nested loc(fused[loc(...), ...]) takes more than one pass
        previous, line = line, _LOC.sub("", line)
    return line


def _spaced(line: str) -> str:
    """Rule 2 on one line, string literals untouched."""
    out = []
    for match in re.finditer(rf"({_STRING})|([^\"]+)", line):
        if match.group(1):
            out.append(match.group(1))
        else:
            chunk, comment, _ = match.group(2).partition("//")
            chunk = re.sub(r"\s+", " ", chunk)
            out.append(_SPACE_BEFORE.sub("", chunk))
            if comment:  # a trailing comment (`// pred: ^bb0`): the rest of the line goes
                break
    return "".join(out).strip()


def _top_indent(lines: list[str]) -> int:
    """The indentation of the operations directly in the module."""
    for line in lines:
        if line.strip():
            indent = len(line) - len(line.lstrip())
            return indent + 2 if line.lstrip().startswith("module") else indent
    return 0


class _Scope:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.blocks: dict[str, str] = {}
        self.constants: dict[str, str] = {}

    def rename(self, line: str) -> str:
        def token(match: re.Match) -> str:
            if match.group("value"):
                name = match.group("value")
                if name in self.constants:
                    return self.constants[name]
                return self.values.setdefault(name, f"%{len(self.values)}")
            if match.group("block"):
                return self.blocks.setdefault(match.group("block"), f"^bb{len(self.blocks)}")
            return match.group(0)

        return _TOKEN.sub(token, line)


def normalize(text: str) -> str:
    """``text`` (a module as an MLIR tool prints it) in the normal form; see the module doc."""
    raw = [line for line in text.splitlines()
           if line.strip() and not line.lstrip().startswith("//") and not _LOC_ALIAS.match(line)]
    top = _top_indent(raw)
    scope = _Scope()
    out: list[str] = []
    for line in raw:
        indent = len(line) - len(line.lstrip())
        if indent <= top and not line.lstrip().startswith("^"):  # block labels sit outdented
            scope = _Scope()
        body = _spaced(_strip_locations(line))
        constant = _CONSTANT.match(body)
        if constant and indent > top:
            scope.constants[constant.group(1)] = f"<{scope.rename(constant.group(2))}>"
            continue
        out.append(scope.rename(body))
    return "\n".join(out) + ("\n" if out else "")


@dataclass(frozen=True)
class LineDifference:
    """The first line where two normal forms differ (1-based; "" past the end of one)."""

    line: int
    primary: str
    reference: str

    def describe(self, what: str = "normalized line") -> str:
        return (f"{what} {self.line}: {self.primary or '(end of output)'!r} here, "
                f"{self.reference or '(end of output)'!r} in the reference")


def first_difference(primary: str, reference: str) -> LineDifference | None:
    """Where two normalized texts first differ; None when they are equal."""
    a, b = primary.splitlines(), reference.splitlines()
    for k in range(max(len(a), len(b))):
        left = a[k] if k < len(a) else ""
        right = b[k] if k < len(b) else ""
        if left != right:
            return LineDifference(k + 1, left, right)
    return None


def operation_of(line: str) -> str:
    """The operation a normalized line holds (``arith.addi``), or the line's first word."""
    match = _OPERATION.search(line)
    if match:
        return match.group(1)
    words = line.split()
    return words[0] if words else "(end of output)"
