"""The reference toolchain: lower an exec module with mlir-opt-22 and run it with mlir-runner-22.

``mlir-opt-22 --convert-math-to-funcs --arith-expand --convert-scf-to-cf
--convert-to-llvm --reconcile-unrealized-casts`` (``math.ipowi`` has no LLVM
lowering: math-to-funcs outlines it first) then ``mlir-runner-22 -e main
-entry-point-result=void -O0 -shared-libs=libmlir_c_runner_utils.so``.  It is
trusted: a failure here is the toolchain's (:class:`ReferenceFailure`), never
an optimizer's.

Many programs are run in one process by :func:`combine`: each module's symbols
get a ``p<k>_`` prefix and one ``main`` calls every program's ``main`` in turn;
each program's share of the output is its number of printed lines.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Sequence

__all__ = ["LOWERING", "ReferenceFailure", "Toolchain", "ToolchainError", "combine", "split_output"]

LOWERING = ("--convert-math-to-funcs", "--arith-expand", "--convert-scf-to-cf", "--convert-to-llvm", "--reconcile-unrealized-casts")
DEFAULT_RUNTIME = "/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so"
_PRINTERS = ("printI64", "printComma", "printNewline")


class ToolchainError(Exception):
    """The reference toolchain cannot be used at all (one line: missing binary, library)."""


class ReferenceFailure(Exception):
    """The reference toolchain failed on one module: ``stage`` is lower or run."""

    def __init__(self, stage: str, detail: str, output: str = "") -> None:
        super().__init__(f"{stage}: {detail}")
        self.stage = stage
        self.detail = detail
        self.output = output  # what was printed before the failure


def _first_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line or "LLVM ERROR" in line or "Assertion" in line:
            return line
    return lines[0] if lines else "(no message)"


@dataclass(frozen=True)
class Toolchain:
    """The trusted lowering and runner (binaries by name on PATH or by path)."""

    mlir_opt: str = "mlir-opt-22"
    runner: str = "mlir-runner-22"
    runtime_library: str = DEFAULT_RUNTIME
    timeout: float = 120.0

    def check(self) -> None:
        """Raise :class:`ToolchainError` (one line) if a binary or the library is missing."""
        for role, binary in (("mlir-opt", self.mlir_opt), ("runner", self.runner)):
            if shutil.which(binary) is None:
                raise ToolchainError(f"the reference {role} {binary!r} is not an executable file or on PATH")
        if not os.path.isfile(self.runtime_library):
            raise ToolchainError(f"the runtime library {self.runtime_library} does not exist "
                                 "(Debian: apt-get install libmlir-22-dev)")

    def _call(self, stage: str, argv: list[str], text: str) -> str:
        try:
            done = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired as error:
            partial = error.stdout.decode(errors="replace") if isinstance(error.stdout, bytes) else ""
            raise ReferenceFailure(stage, f"timed out after {self.timeout:g} s", partial) from None
        except OSError as error:
            raise ToolchainError(f"cannot start {argv[0]}: {error.strerror or error}") from None
        if done.returncode != 0:
            status = f"exit {done.returncode}" if done.returncode > 0 else f"signal {-done.returncode}"
            raise ReferenceFailure(stage, f"{status}: {_first_error(done.stderr)}", done.stdout)
        return done.stdout

    def lower(self, text: str) -> str:
        """The module in the LLVM dialect (raises :class:`ReferenceFailure`)."""
        return self._call("lower", [self.mlir_opt, *LOWERING, "-"], text)

    def run(self, llvm_text: str) -> str:
        """What the lowered module's ``main`` prints."""
        return self._call("run", [self.runner, "-e", "main", "-entry-point-result=void", "-O0",
                                  f"-shared-libs={self.runtime_library}", "-"], llvm_text)

    def verify(self, text: str) -> str | None:
        """None if ``text`` parses and verifies as MLIR, else the first error line."""
        try:
            self._call("verify", [self.mlir_opt, "-o", "/dev/null", "-"], text)
        except ReferenceFailure as failure:
            return failure.detail
        return None

    def execute(self, text: str) -> str:
        """Lower then run one exec module: its printed output."""
        return self.run(self.lower(text))

    def execute_many(self, texts: Sequence[str], line_counts: Sequence[int]) -> list[str]:
        """Each module's output, from one lowering and one run of them all (:func:`combine`).
        Raises :class:`ReferenceFailure` if the combined module fails as a whole."""
        return split_output(self.execute(combine(texts)), line_counts)


_SYMBOL = re.compile(r'@("(?:[^"\\]|\\.)*"|[\w$.-]+)')
_MODULE_OPEN = re.compile(r"^\s*module\b[^\n]*\{\s*$", re.M)
_PRINTER_DECLARATION = re.compile(r"^\s*func\.func\s+private\s+@(?:" + "|".join(_PRINTERS) + r")\b[^\n]*\n",
                                  re.M)


def _prefixed(text: str, prefix: str) -> str:
    """One module's body with every symbol but the printers renamed ``prefix + name``."""
    opening = _MODULE_OPEN.search(text)
    closing = text.rstrip().rfind("}")
    if opening is None or closing < opening.end():
        raise ValueError("not a module")
    body = _PRINTER_DECLARATION.sub("", text[opening.end():closing])

    def rename(match: re.Match) -> str:
        name = match.group(1)
        if name in _PRINTERS:
            return match.group(0)
        if name.startswith('"'):
            return f'@"{prefix}{name[1:]}'
        return f"@{prefix}{name}"

    return _SYMBOL.sub(rename, body)


def combine(texts: Sequence[str]) -> str:
    """One module running every exec module's ``main`` in turn (symbols prefixed ``p<k>_``)."""
    parts = ["module {\n"] + [f"func.func private @{p}({'i64' if p == 'printI64' else ''})\n"
                              for p in _PRINTERS]
    for k, text in enumerate(texts):
        parts.append(_prefixed(text, f"p{k}_"))
        parts.append("\n")
    parts.append("func.func @main() {\n")
    parts += [f"  func.call @p{k}_main() : () -> ()\n" for k in range(len(texts))]
    parts.append("  return\n}\n}\n")
    return "".join(parts)


def split_output(output: str, line_counts: Sequence[int]) -> list[str]:
    """A combined run's output cut into each module's lines (by their counts)."""
    lines = output.splitlines(keepends=True)
    out, at = [], 0
    for count in line_counts:
        out.append("".join(lines[at:at + count]))
        at += count
    return out
