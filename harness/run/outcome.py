"""What one run of a target gave: its ``Outcome`` (kind, status, signal, output),
classified from the exit status and stderr, and the ``Verdict`` a judge gives it.

Classification reads stderr, not only the exit status (LLVM's
``report_fatal_error`` exits 1, like an ordinary diagnostic):

=========  ==================================================================
timeout    still running after ``timeout`` seconds (we SIGKILL its group)
oom        ``LLVM ERROR: out of memory``, ``std::bad_alloc``, a sanitizer's
           out-of-memory / allocation-size report, or killed by a SIGKILL we
           did not send (the kernel's OOM killer)
crash      death by any other signal; ``LLVM ERROR:``; ``Assertion ...
           failed``; ``UNREACHABLE executed``; ``PLEASE submit a bug report``
           or ``Stack dump:``; ``==N==ERROR: ...Sanitizer``; UBSan's
           ``runtime error:``; any exit status other than 0 and 1; exit 1
           without an ``error:`` diagnostic
rejected   exit 1 with an ``error:`` diagnostic and none of the above
accepted   exit 0 and none of the above
=========  ==================================================================
"""

from __future__ import annotations

import enum
import re
import signal as _signal
from dataclasses import dataclass
from typing import Mapping

from harness.run.failure_message import first_failure

__all__ = ["FAILURE_KINDS", "FINDING_KINDS", "Outcome", "OutcomeKind", "Verdict", "classify", "one_line"]

#: What a finding can be: a failed run, or a run the expectations contradict.
FINDING_KINDS = (
    "crash", "timeout", "oom",
    "unexpected-rejection", "unexpected-acceptance", "wrong-diagnostic", "wrong-output",
    # the differential oracle (harness.execute): values that differ after the optimizer,
    # the trusted reference toolchain failing, the optimizer's output not MLIR
    "wrong-code", "reference-failure", "target-failure",
    # two builds of one tool (harness.oracles.divergence_runner): another outcome or normalised output
    "divergence",
)

_REASON_MAX = 300


class OutcomeKind(str, enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CRASH = "crash"
    TIMEOUT = "timeout"
    OOM = "oom"

    def __str__(self) -> str:  # "crash", not "OutcomeKind.CRASH"
        return self.value


FAILURE_KINDS = frozenset({OutcomeKind.CRASH, OutcomeKind.TIMEOUT, OutcomeKind.OOM})


def _signal_name(sig: int | None) -> str | None:
    if sig is None:
        return None
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    returncode: int | None  # exit status; None when it died by a signal
    signal: int | None  # the signal it died by (SIGKILL for our timeout)
    stdout: str
    stderr: str
    duration: float  # seconds, wall clock
    reason: str  # one line: why this kind

    @property
    def signal_name(self) -> str | None:
        return _signal_name(self.signal)

    def to_json(self) -> dict:
        return {
            "kind": self.kind.value,
            "returncode": self.returncode,
            "signal": self.signal,
            "signal_name": self.signal_name,
            "reason": self.reason,
            "duration": self.duration,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }

    @classmethod
    def from_json(cls, d: Mapping) -> "Outcome":
        return cls(
            kind=OutcomeKind(d["kind"]),
            returncode=d.get("returncode"),
            signal=d.get("signal"),
            stdout=d.get("stdout", ""),
            stderr=d.get("stderr", ""),
            duration=float(d.get("duration", 0.0)),
            reason=d.get("reason", ""),
        )


@dataclass(frozen=True)
class Verdict:
    """An outcome judged against the target's expectations."""

    outcome: Outcome
    expected: str  # "accepted" | "rejected" | "either" (+ " with stderr matching /.../")
    finding: bool
    why: str  # empty when not a finding
    rule: str = ""  # name of the expectation rule that applied
    kind: str = ""  # one of FINDING_KINDS; empty when not a finding
    # A persistent driver's finding that a fresh process does not reproduce
    # (state carried between inputs; harness.run.persistent_runner).
    persistent_only: bool = False

    def to_json(self) -> dict:
        return {
            "expected": self.expected,
            "rule": self.rule,
            "finding": self.finding,
            "finding_kind": self.kind,
            "why": self.why,
            "persistent_only": self.persistent_only,
        }


# -------------------------------------------------------------- classification

_M = re.MULTILINE
_OOM_PATTERNS = (
    re.compile(r"^LLVM ERROR: out of memory.*$", _M),
    re.compile(r"^==\d+==ERROR: \w+Sanitizer: (?:out of memory|allocation-size-too-big|"
               r"requested allocation size|calloc-overflow|pvalloc-overflow|"
               r"allocator is out of memory).*$", _M),
    re.compile(r"^.*\bstd::bad_alloc\b.*$", _M),
    re.compile(r"^.*\bout of memory: allocator is trying to allocate.*$", _M),
)
_TRACE = re.compile(r"^(PLEASE submit a bug report|Stack dump:)", _M)
_ERROR_DIAG = re.compile(r"(?:^|: )error: ", _M)
_ERROR_LINE = re.compile(r"^.*\berror: .*$", _M)


def one_line(s: str) -> str:
    s = " ".join(s.split())
    return s if len(s) <= _REASON_MAX else s[: _REASON_MAX - 3] + "..."


def _crash_message(stderr: str) -> str | None:
    failure = first_failure(stderr)
    return one_line(failure.line) if failure else None


def classify(
    returncode: int | None, stderr: str, *, timed_out: bool = False, timeout: float = 0.0
) -> tuple[OutcomeKind, int | None, int | None, str]:
    """(kind, exit status or None, signal or None, reason) for a finished run.

    ``returncode`` is Popen's: negative for death by a signal.
    """
    status = returncode if returncode is not None and returncode >= 0 else None
    sig = -returncode if returncode is not None and returncode < 0 else None
    if timed_out:
        return OutcomeKind.TIMEOUT, None, sig, f"timed out after {timeout:g}s"
    for pat in _OOM_PATTERNS:
        m = pat.search(stderr)
        if m:
            return OutcomeKind.OOM, status, sig, one_line(m.group(0))
    if sig == _signal.SIGKILL:
        return (
            OutcomeKind.OOM,
            status,
            sig,
            "killed by SIGKILL not sent by the harness (likely the kernel's OOM killer)",
        )
    msg = _crash_message(stderr)
    if sig is not None:
        name = _signal_name(sig)
        return OutcomeKind.CRASH, status, sig, f"{msg} ({name})" if msg else name
    if msg:
        return OutcomeKind.CRASH, status, sig, msg
    if _TRACE.search(stderr):
        return OutcomeKind.CRASH, status, sig, f"crash trace (Stack dump) with exit status {status}"
    if status == 0:
        return OutcomeKind.ACCEPTED, 0, None, "exit status 0"
    if status == 1 and _ERROR_DIAG.search(stderr):
        m = _ERROR_LINE.search(stderr)
        return OutcomeKind.REJECTED, 1, None, one_line(m.group(0)) if m else "error diagnostic"
    return OutcomeKind.CRASH, status, sig, f"exit status {status}" + (
        " without an error: diagnostic" if status == 1 else ""
    )


