"""LLVM's development head from PyPI: a wheel's MLIR Python bindings as a build under test.

Two wheels ship MLIR built from LLVM's head (``LLVM version 24.0.0git``; field notes):

* ``iree-base-compiler`` (:mod:`harness.targets.head_iree`): its ``iree-opt`` and its
  bindings are one library; it registers the upstream passes that apply to our dialects,
  not sccp or the integer-range passes;
* ``torch-mlir`` (:mod:`harness.targets.head_torch_mlir`): its bindings' library registers
  every upstream pass (its own binary registers few), so the build is the bindings, and
  ``mlir-opt-head`` (:mod:`harness.targets.mlir_opt_head`) is the tool over them.

Each is a :class:`HeadBindings`; :mod:`harness.targets.heads` lists them.  This module is
what they share: how a wheel's build is named, found and loaded, and MLIR's diagnostics
printed as ``mlir-opt`` prints them (the tool and the persistent driver answer alike).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.targets.identity import which

__all__ = ["HeadBindings", "HeadNotInstalled", "format_error"]

_LOCATION = re.compile(r'^loc\("[^"]*":(\d+):(\d+)\)$')


class HeadNotInstalled(Exception):
    """The wheel's bindings cannot be imported (one line: how to install them)."""


@dataclass(frozen=True)
class HeadBindings:
    """One wheel's MLIR bindings: the build, its tool and its persistent driver."""

    tool: str  # what the build is called (``--target NAME``): the tool over the bindings
    driver: str  # the console script of its persistent driver (harness.run.head_driver)
    wheel: str  # the PyPI distribution
    package: str  # the Python package holding ``ir`` and ``passmanager``
    library: str  # the bindings' shared library, in PACKAGE/_mlir_libs/
    #: a binary beside the bindings built from the same library that answers ``--version`` and
    #: ``--help`` for the build (iree-opt); None: mlir_opt_head answers from the bindings
    native_tool: str | None = None
    #: the module of its MLIR ExecutionEngine (the head judges its own output: harness.run.head_exec)
    engine: str | None = None

    def install_hint(self) -> str:
        return f"pip install --no-deps {self.wheel}, or pip install -e '.[head]'"

    def not_installed(self) -> str:
        """One line: the build is missing, and how to install it."""
        return (f"{self.tool}: LLVM's development head needs the {self.wheel} wheel's MLIR bindings, "
                f"which this Python ({sys.executable}) cannot import: {self.install_hint()}")

    def package_dir(self) -> Path:
        """Where the bindings are; raises :class:`HeadNotInstalled`."""
        top = self.package.split(".")[0]
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise HeadNotInstalled(self.not_installed())
        return Path(list(spec.submodule_search_locations)[0]).joinpath(*self.package.split(".")[1:])

    def library_path(self) -> Path:
        """The bindings' shared library (what the build is: its version, its passes)."""
        return self.package_dir() / "_mlir_libs" / self.library

    def load(self):
        """The bindings' ``ir`` and ``passmanager`` modules; raises :class:`HeadNotInstalled`."""
        try:
            return (importlib.import_module(f"{self.package}.ir"),
                    importlib.import_module(f"{self.package}.passmanager"))
        except ImportError as error:
            raise HeadNotInstalled(f"{self.not_installed()} ({error})") from None

    def load_engine(self):
        """The bindings' ``execution_engine`` module; raises :class:`HeadNotInstalled`."""
        if self.engine is None:
            raise HeadNotInstalled(f"{self.tool}: the {self.wheel} wheel's bindings have no ExecutionEngine")
        try:
            return importlib.import_module(self.engine)
        except ImportError as error:
            raise HeadNotInstalled(f"{self.not_installed()} ({error})") from None

    def native_tool_path(self) -> Path | None:
        """The binary beside the bindings that answers for the build, if the wheel has one."""
        return self.package_dir() / "_mlir_libs" / self.native_tool if self.native_tool else None

    def stands_for(self) -> tuple[str, ...]:
        """The real paths of the binaries that are this build: the tool on PATH or beside this
        Python, and the native tool beside the bindings (empty where not installed)."""
        found = [which(self.tool)]
        try:
            native = self.native_tool_path()
        except HeadNotInstalled:
            native = None
        found.append(str(native) if native and native.exists() else None)
        return tuple(dict.fromkeys(os.path.realpath(p) for p in found if p))


# ------------------------------------------------------------ diagnostics


def _format(diagnostic, lines: list[str], buffer: str, offset: int, out: list[str],
            parent: str | None = None) -> None:
    """One diagnostic as mlir-opt prints it (buffer, line, column, source line, caret; a note
    at its parent's location without the source line again)."""
    kind = str(diagnostic.severity).rsplit(".", 1)[-1].lower()
    location = str(diagnostic.location)
    match = _LOCATION.match(location)
    if match:
        line, column = int(match[1]) + offset, int(match[2])
        out.append(f"{buffer}:{line}:{column}: {kind}: {diagnostic.message}")
        if 0 < line <= len(lines) and location != parent:
            out.append(lines[line - 1])
            out.append(" " * max(column - 1, 0) + "^")
    else:
        out.append(f"{diagnostic.location}: {kind}: {diagnostic.message}")
    for note in diagnostic.notes:
        _format(note, lines, buffer, offset, out, location)


def format_error(error, lines: list[str], buffer: str = "<stdin>", offset: int = 0) -> str:
    """An ``MLIRError``'s diagnostics as ``mlir-opt`` prints them; ``lines``: the whole input
    (a chunk of ``--split-input-file`` reports its lines in the whole input: ``offset``)."""
    out: list[str] = []
    for diagnostic in getattr(error, "error_diagnostics", None) or []:
        _format(diagnostic, lines, buffer, offset, out)
    if not out:
        out.append(f"{buffer}: error: {error}")
    return "\n".join(out) + "\n"
