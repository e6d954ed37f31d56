"""The failure message an LLVM/MLIR tool printed before it died.

One place knows how such messages look, so that the runner (which names the
reason of a crash) and triage's signatures (which normalise the part that
names the bug) always agree on which message a stderr holds.  In priority
order, the first kind found anywhere in stderr wins:

==============  =========================================  =====================================
type            printed as                                 ``message`` (what names the bug)
==============  =========================================  =====================================
sanitizer       ``==N==ERROR: AddressSanitizer: kind ...``  ``AddressSanitizer: kind``
sanitizer       ``file:L:C: runtime error: ...`` (UBSan)   ``UndefinedBehaviorSanitizer: ...``
assert          ``Assertion `cond' failed.``               ``cond``
unreachable     ``UNREACHABLE executed at file:line!``     the text before it (same or previous line)
llvm-error      ``LLVM ERROR: reason``                     ``reason``
==============  =========================================  =====================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_M = re.MULTILINE
_SANITIZER = re.compile(r"^==\d+==ERROR: (?P<line>(?P<message>\w+Sanitizer: [\w-]+).*)$", _M)
_UBSAN = re.compile(r"^\S*:\d+:\d+: (?P<line>runtime error: (?P<message>.*))$", _M)
_ASSERT = re.compile(r"(?P<line>Assertion [`'](?P<message>.*)[`'] failed)\.?\s*$", _M)
_ASSERT_MAC = re.compile(r"^(?P<line>Assertion failed: (?:\((?P<message>.*)\),)?.*)$", _M)
_UNREACHABLE = re.compile(r"^.*?(?P<line>UNREACHABLE executed.*)$", _M)
_LLVM_ERROR = re.compile(r"^(?P<line>LLVM ERROR: (?P<message>.*))$", _M)


@dataclass(frozen=True)
class FailureMessage:
    type: str  # sanitizer | assert | unreachable | llvm-error
    line: str  # as printed, from its keyword on: a crash's reason
    message: str  # the part that names the bug: what a signature keeps


def _unreachable_message(stderr: str, start: int) -> str:
    """llvm_unreachable prints its message, then `UNREACHABLE executed at`."""
    line_start = stderr.rfind("\n", 0, start) + 1
    same_line = stderr[line_start:start].strip()
    if same_line:
        return same_line
    before = stderr[:start].rstrip("\n").rsplit("\n", 1)[-1]
    return before if before and "Stack dump" not in before else ""


def first_failure(stderr: str) -> FailureMessage | None:
    """The highest-priority failure message in ``stderr``, or None."""
    m = _SANITIZER.search(stderr)
    if m:
        return FailureMessage("sanitizer", m["line"], m["message"])
    m = _UBSAN.search(stderr)
    if m:
        return FailureMessage("sanitizer", m["line"], "UndefinedBehaviorSanitizer: " + m["message"])
    m = _ASSERT.search(stderr) or _ASSERT_MAC.search(stderr)
    if m:
        return FailureMessage("assert", m["line"], m["message"] or m["line"])
    m = _UNREACHABLE.search(stderr)
    if m:
        return FailureMessage("unreachable", m["line"], _unreachable_message(stderr, m.start("line")))
    m = _LLVM_ERROR.search(stderr)
    if m:
        return FailureMessage("llvm-error", m["line"], m["message"])
    return None
