"""Programs for older MLIR releases: the text a target of a given release can parse.

MLIR 15 and 16 do not parse the ``overflow<...>`` syntax of ``arith.addi`` /
``subi`` / ``muli`` / ``shli`` (it arrived in LLVM 18).  Where the target is such
a release (its ``--version``), the rendered program is passed through
:func:`for_release`, which leaves the flags out.  That is always safe: a flag only
adds an assumption (poison where it fails), so the flagless program is defined
wherever the flagged one is and computes the same values.

This is a transformation of the rendered text, not a rendering of the grammar:
a rendering that blanks ``<flags-any>`` would break the render-then-parse round
trip (the flagless text parses back ambiguously: no flag and "no flag chosen"
look the same).  Only the exec rendering (custom forms only) is read by MLIR 16;
the oracle rendering's ``<{...}>`` properties need MLIR 17 whatever the flags.
"""

from __future__ import annotations

import re
import subprocess
from typing import Sequence

from harness.execute.exec_rendering import exec_module
from harness.execute.twins import TwinPlan, with_twins
from harness.targets.identity import RELEASES_WITHOUT_OVERFLOW_FLAGS  # what a release parses: one place

__all__ = ["RELEASES_WITHOUT_OVERFLOW_FLAGS", "for_release", "major_version", "without_overflow_flags"]

_FLAG = r"(?:nsw|nuw|none)"
#: The custom form: `` overflow<nsw, nuw>`` just before the `` : type``.  (The generic form's
#: ``<{overflowFlags = ...}>`` is a property, which no release before 17 parses at all.)
_FLAGS = re.compile(rf" overflow<{_FLAG}(?:, ?{_FLAG})*>(?= :)")
_VERSION = re.compile(r"LLVM version (\d+)\.")


def without_overflow_flags(text: str) -> str:
    """``text`` with every integer overflow flag left out."""
    return _FLAGS.sub("", text)


def major_version(binary: str) -> int | None:
    """The LLVM major release ``binary --version`` names (``Debian LLVM version 16.0.6``:
    16); None when it names none (not an LLVM tool, or it cannot run).  One process:
    callers read it once per optimizer (harness.oracles.differential_runner.oracle_settings)."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(done.stdout + done.stderr)
    return int(match.group(1)) if match else None


def for_release(text: str, major: int | None) -> str:
    """The program as a target of LLVM release ``major`` reads it: flagless for 15 and 16,
    unchanged otherwise (None: unknown, assumed current)."""
    return without_overflow_flags(text) if major in RELEASES_WITHOUT_OVERFLOW_FLAGS else text


def exec_for_releases(releases: Sequence[int | None], canonical: str, plan: TwinPlan | None = None) -> str:
    """The exec rendering of ``canonical``, with the constant twins of ``plan`` (None: none), as
    every one of ``releases`` parses it: what the differential oracle executes (one release) and
    what two builds both read (two).  Raises ``ExecRenderError``."""
    text = exec_module(canonical)
    if plan is not None:  # before the adaptation: the twins copy the bodies, flags and all
        text = with_twins(text, plan)
    for release in releases:
        text = for_release(text, release)
    return text
