"""What the tool under test is: its family, its release and what it accepts, found once.

A user names a build (``--target mlir-opt-19``, ``--target /opt/llvm/bin/mlir-opt``,
``--target iree-opt``, ``--target mlir-opt-head``, ``--target loom-opt``); everything that runs programs must
run exactly that build and read its output the way that build writes it.  So
before anything runs, :func:`identify` asks the binary itself, once:

* ``--version``: the LLVM release it is built from (``Debian LLVM version 19.1.7``:
  19.1.7; ``LLVM version 24.0.0git``: 24.0.0git);
* ``--help``: its family (``loom-opt`` when it registers loom's
  ``--loom-lower-for-to-graph``; ``mlir-opt`` when it takes ``--pass-pipeline``),
  whether it takes ``--allow-unregistered-dialect``, ``--split-input-file`` and
  the elements printing option, and which passes it registers.

What the release decides (from field-notes: the ``<{...}>`` properties syntax is
refused by 15 and 16, ``overflow<...>`` flags arrived in 18) is derived from the
major release.  The answer is cached per binary, keyed on its path, size and
modification time, so a rebuilt binary is asked again.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["BuildIdentity", "IdentityError", "identify", "identify_named", "pipeline_passes", "which"]

_VERSION = re.compile(r"LLVM version (\d+)\.(\d+)\.(\d+)(\w*)")
_HELP_FLAG = re.compile(r"^\s+--([a-z][\w-]*)", re.M)
#: The option that prints dense elements as literals instead of hex, whose layout
#: differs between releases (issue 33: LLVM 24's i1 hex that MLIR 22 refuses).
HEX_ELEMENTS_OPTION = "mlir-print-elementsattrs-with-hex-if-larger"
#: Releases whose parser refuses the generic ``<{...}>`` properties syntax.
RELEASES_WITHOUT_PROPERTIES = frozenset({15, 16})
#: Releases whose parser refuses ``overflow<...>`` flags (harness.execute.releases reads it).
RELEASES_WITHOUT_OVERFLOW_FLAGS = frozenset({15, 16})


class IdentityError(Exception):
    """The binary cannot be asked what it is (one line for the user)."""


@dataclass(frozen=True)
class BuildIdentity:
    """One build of a tool, as it describes itself."""

    binary: str  # absolute path, symlinks resolved
    family: str  # "loom-opt" | "mlir-opt" | "other"
    version: str | None  # "19.1.7", "24.0.0git"; None: it names no LLVM release
    version_line: str  # the line of --version that names it
    unregistered_dialects: bool
    split_input_file: bool
    hex_elements_option: bool
    passes: frozenset[str]  # the pass flags --help lists (without "--")

    @property
    def major(self) -> int | None:
        return int(self.version.split(".", 1)[0]) if self.version else None

    @property
    def properties_syntax(self) -> bool:
        """Reads generic operations' ``<{...}>`` properties (the oracle rendering)."""
        return self.major not in RELEASES_WITHOUT_PROPERTIES

    @property
    def overflow_flags(self) -> bool:
        return self.major not in RELEASES_WITHOUT_OVERFLOW_FLAGS

    def describe(self) -> str:
        """``mlir-opt-19 (LLVM 19.1.7, /usr/lib/llvm-19/bin/mlir-opt)``."""
        release = f"LLVM {self.version}" if self.version else "no LLVM version"
        return f"{os.path.basename(self.binary)} ({release}, {self.binary})"

    def to_json(self) -> dict:
        return {"binary": self.binary, "family": self.family, "version": self.version,
                "version_line": self.version_line, "unregistered_dialects": self.unregistered_dialects,
                "split_input_file": self.split_input_file, "properties_syntax": self.properties_syntax,
                "overflow_flags": self.overflow_flags}

    def missing_passes(self, pipeline: str | None) -> list[str]:
        """The passes ``pipeline`` names that this build does not register."""
        if not pipeline or not self.passes:
            return []
        return [name for name in pipeline_passes(pipeline) if name not in self.passes]


def pipeline_passes(pipeline: str) -> list[str]:
    """The pass names of a pipeline: ``builtin.module(canonicalize,func.func(cse{x=1}))`` ->
    ``[canonicalize, cse]``; flags (``--canonicalize --sccp``) -> ``[canonicalize, sccp]``.
    Operation anchors (names with a dot) and options in braces are not passes."""
    if pipeline.startswith("-"):
        return [flag.lstrip("-").split("=", 1)[0] for flag in pipeline.split() if flag.startswith("-")]
    without_options = re.sub(r"\{[^{}]*\}", "", pipeline)
    names = re.findall(r"[A-Za-z_][\w.-]*", without_options)
    return [name for name in names if "." not in name]


def which(name: str) -> str | None:
    """``name`` on PATH, else beside this Python (a tool pip installed into loom-fuzz's own
    environment, such as the ``head`` extra's ``iree-opt`` or loom-fuzz's ``mlir-opt-head``,
    when that is not on PATH)."""
    return shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))


def identify_named(name: str) -> BuildIdentity | None:
    """The identity of the binary ``name`` (a path or a name :func:`which` finds), or None
    when there is no such binary or it cannot be asked (its caller says so elsewhere)."""
    found = which(name)
    if not found:
        return None
    try:
        return identify(found)
    except IdentityError:
        return None


def identify(binary: str) -> BuildIdentity:
    """The identity of ``binary`` (a path or a name on PATH already resolved by the caller).
    Raises :class:`IdentityError` when it cannot be started."""
    real = os.path.realpath(binary)
    try:
        stat = os.stat(real)
    except OSError as error:
        raise IdentityError(f"{binary}: {error.strerror}") from None
    return _identify(real, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _identify(real: str, size: int, mtime_ns: int) -> BuildIdentity:  # size, mtime: the cache key
    version_status, version_text = _ask(real, "--version")
    help_status, help_text = _ask(real, "--help")
    match = _VERSION.search(version_text)
    if version_status and help_status and not match and not _HELP_FLAG.search(help_text):
        # it can say neither what it is nor what it takes (a head tool without its wheel:
        # its own line says how to install it)
        said = next((line.strip() for line in version_text.splitlines() if line.strip()), "")
        raise IdentityError(said or f"{real} --version exits with status {version_status}")
    version = "".join((match.group(1), ".", match.group(2), ".", match.group(3), match.group(4))) if match else None
    line = next((ln.strip() for ln in version_text.splitlines() if "version" in ln.lower()), "")
    flags = frozenset(_HELP_FLAG.findall(help_text))
    if "loom-lower-for-to-graph" in flags:
        family = "loom-opt"
    elif "pass-pipeline" in flags:
        family = "mlir-opt"
    else:
        family = "other"
    return BuildIdentity(
        binary=real, family=family, version=version, version_line=line,
        unregistered_dialects="allow-unregistered-dialect" in flags,
        split_input_file="split-input-file" in flags,
        hex_elements_option=HEX_ELEMENTS_OPTION in flags,
        passes=flags if family != "other" else frozenset(),
    )


def _ask(binary: str, flag: str) -> tuple[int, str]:
    """(exit status, what it printed) of ``binary flag``; a timeout is status 0, nothing said."""
    try:
        done = subprocess.run([binary, flag], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        return 0, ""
    except OSError as error:
        raise IdentityError(f"cannot run {binary}: {error.strerror}") from None
    return done.returncode, done.stdout + done.stderr
