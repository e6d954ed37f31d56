"""Crash signatures: one stable key per bug, in the manner of ClusterFuzz's crash state.

A signature is the finding's *kind*, a *type* (how it failed), a normalised
*message* and the top three *meaningful frames* of the first stack trace in
stderr.  Two programs reaching the same bug get the same signature; two bugs
get different ones, as long as their messages or their top frames differ.

Format (one line; empty parts are left out with their separator)::

    KIND[:TYPE][ | MESSAGE][ | FRAME1 | FRAME2 | FRAME3]

Examples::

    crash:assert | !isa<scf::ForOp>(parent) && "freeze under loop" | loom::FreezeLowering::matchAndRewrite | mlir::PatternApplicator::matchAndRewrite | loom::LowerForToGraphPass::lowerLoopBody
    crash:SIGSEGV | loom::MemoryLowering::rewriteStore | loom::MemoryLowering::lowerRegion | loom::LowerForToGraphPass::lowerConditionalRegion
    crash:llvm-error | iter_args in a conditional region are not supported
    timeout
    unexpected-rejection | error: 'loom.spatial_region' op operation 'llvm.call' is not a registered canonical Dataflow actor or a supported graph-lowering operation
    wrong-output | one-graph-per-region: no dataflow.graph for @graph_N

A *bare* crash (neither a message nor a frame: a signal or exit status alone)
says nothing of the bug; triage re-runs it, and when it stays bare its
bucket's key ends in ``| input SHA12`` (its program's SHA-256, 12 digits), so
bare crashes of different programs stay apart until their minimized programs
are compared (:mod:`harness.triage.dedup`).

Kinds: ``crash``, ``timeout``, ``oom`` (the runner's failure kinds) and, for
outcomes the target's expectations did not allow, ``unexpected-rejection``,
``unexpected-acceptance``, ``wrong-diagnostic`` (expected rejection, other
stderr) and ``wrong-output`` (an output check failed).

Types, first match wins: ``sanitizer`` (``==N==ERROR: XSanitizer: TYPE``,
message = the sanitizer's bug type), ``assert`` (``Assertion `COND'
failed``, message = COND), ``unreachable`` (``UNREACHABLE executed``,
message = the line before it, if any), ``llvm-error`` (``LLVM ERROR: MSG``),
else the signal name (``SIGSEGV``), else ``exit-N``.

Messages are normalised: ``FILE:LINE:COL:`` prefixes (``<stdin>:12:3:``) and
``at FILE:LINE`` go; paths become ``<path>``; hex numbers ``0xN``; decimal
numbers ``N``; numbered names (``%r12``, ``@graph_3``, ``^bb0``) keep their
stem (``%rN``, ``@graph_N``, ``^bbN``); whitespace collapses; an item
repeated in a comma-separated list is kept once.

Frames come from LLVM's ``Stack dump:`` format (`` #N 0xADDR name
(binary+0xOFF)``), with or without a source location, ASan's (``#N 0xADDR in
name file:line``) and unsymbolised frames (dropped).  Each name keeps its
namespace and template arguments and loses the address, the
``(binary+0xOFF)``, the source location, the parameter list, trailing
``const``/``&`` qualifiers and a leading return type: parameter lists are
dropped, consistently, so a changed parameter type does not split a bucket.
Frames of the crash machinery are skipped: LLVM's signal handlers
(``llvm::sys::PrintStackTrace``, ``RunSignalHandlers``, ``SignalHandler``),
libc (``abort``, ``raise``, ``__pthread_kill_implementation``,
``__assert_fail``...), ``llvm::report_fatal_error`` and friends, sanitizer
runtimes, allocation functions, ``main``, ``__libc_start_main`` and
``_start``.  The frames stop at the tool's own entry: ``mlir-opt``'s and
``loom-opt``'s ``MlirOptMain`` machinery (``performActions``,
``processBuffer``, ``mlir::MlirOptMain``, ``mlir::splitAndProcessBuffer``
and the callbacks they pass) and ``main``: the persistent driver calls the
parser and the pass manager from its own loop, so a crash close to the pass
manager keeps the same frames whether it ran in the tool or in the driver.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from harness.run.failure_message import first_failure

if TYPE_CHECKING:  # pragma: no cover
    from harness.run.outcome import Verdict

__all__ = [
    "FRAME_COUNT",
    "run_key_of",
    "KINDS",
    "Signature",
    "clean_function",
    "crash_signature",
    "filecheck_pattern",
    "meaningful_frames",
    "normalise_message",
    "raw_message",
    "signature_of",
    "stack_frames",
]

FRAME_COUNT = 3

KINDS = (
    "crash",
    "timeout",
    "oom",
    "unexpected-rejection",
    "unexpected-acceptance",
    "wrong-diagnostic",
    "wrong-output",
)

_SEP = " | "


@dataclass(frozen=True)
class Signature:
    kind: str
    type: str = ""
    message: str = ""
    frames: tuple[str, ...] = ()
    #: A bare crash's input (the first 12 hex digits of its SHA-256), which
    #: keeps bare crashes of different inputs apart until their minimized
    #: programs are compared (see :attr:`bare`); empty for everything else.
    input: str = ""

    @property
    def bare(self) -> bool:
        """A crash with neither a message nor a frame (a bare signal or exit status):
        it tells nothing about which bug it is."""
        return self.kind == "crash" and not self.message and not self.frames

    @property
    def run_key(self) -> str:
        """The key as one run of the target gives it (without ``input``)."""
        head = f"{self.kind}:{self.type}" if self.type else self.kind
        parts = [head]
        if self.message:
            parts.append(self.message)
        parts.extend(self.frames)
        return _SEP.join(parts)

    @property
    def key(self) -> str:
        return self.run_key + (f"{_SEP}input {self.input}" if self.input else "")

    def __str__(self) -> str:
        return self.key

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "kind": self.kind,
            "type": self.type,
            "message": self.message,
            "frames": list(self.frames),
        }

    def for_input(self, sha256: str) -> "Signature":
        """A bare crash's signature kept to its input (others are returned unchanged)."""
        return Signature(self.kind, self.type, self.message, self.frames, sha256[:12]) if self.bare else self

    @classmethod
    def from_json(cls, d: dict | str) -> "Signature":
        if isinstance(d, str):
            d = json.loads(d)
        return cls(d["kind"], d.get("type", ""), d.get("message", ""), tuple(d.get("frames", ())))


_INPUT_SUFFIX = re.compile(r" \| input [0-9a-f]{12}$")


def run_key_of(key: str) -> str:
    """The run key of a bucket's signature key (a bare crash's ``| input SHA`` dropped)."""
    return _INPUT_SUFFIX.sub("", key)


# ------------------------------------------------------------------ messages

_M = re.MULTILINE
_ERROR_LINE = re.compile(r"^(?:.*?: )?(error: .*)$", _M)

_LOCATION_PREFIX = re.compile(r"^(?:\S+?:\d+(?::\d+)?:\s*)+")
_AT_LOCATION = re.compile(r"\s+at\s+\S+:\d+!?")
_PATH = re.compile(r"(?<![\w.])(?:\.{0,2}/)?(?:[\w.+-]+/)+[\w.+-]+\.\w+(?::\d+){0,2}")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_SIGIL_NUMBER = re.compile(r"([%@^#][A-Za-z_$.\-]*?)\d+\b")
_NAME_NUMBER = re.compile(r"\b((?:graph|thread)_)\d+\b")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\b")
_REPEAT = re.compile(r"(?<!\S)(\S+?)(?:, \1)+(?=,|$|\s)")


def normalise_message(message: str) -> str:
    """A message with what varies between programs and runs taken out."""
    m = " ".join(message.split())
    m = _LOCATION_PREFIX.sub("", m)
    m = _AT_LOCATION.sub("", m)
    m = _PATH.sub("<path>", m)
    m = _HEX.sub("0xN", m)
    m = _NAME_NUMBER.sub(r"\1N", m)
    m = _SIGIL_NUMBER.sub(r"\1N", m)
    m = _NUMBER.sub("N", m)
    m = _REPEAT.sub(r"\1", m)
    return m.strip()


def raw_message(stderr: str) -> tuple[str, str]:
    """(type, message as printed) of the first failure message in stderr, or ("", "")."""
    failure = first_failure(stderr)
    return (failure.type, failure.message) if failure else ("", "")


# -------------------------------------------------------------------- frames

_FRAME = re.compile(r"^\s*#(\d+)\s+0x[0-9a-fA-F]+\s*(.*)$")
_MODULE_OFFSET = re.compile(r"\s*\((?:[^()]*?)\+0x[0-9a-fA-F]+\)\s*$")
_SOURCE_LOCATION = re.compile(r"\s+\(?\S+?:\d+(?::\d+)?\)?\s*$")
_PLUS_OFFSET = re.compile(r"\s*\+\s*(?:0x[0-9a-fA-F]+|\d+)\s*$")
_CLONE = re.compile(r"\s*\[clone [^\]]*\]|\.(?:cold|part|isra|constprop)(?:\.\d+)*$")
_QUALIFIER = re.compile(r"\s*(?:\bconst\b|\bvolatile\b|&&|&|\bnoexcept\b)\s*$")
_OPERATORS = (
    ("operator<<=", "\x00a"),
    ("operator>>=", "\x00b"),
    ("operator<<", "\x00c"),
    ("operator>>", "\x00d"),
    ("operator<=>", "\x00e"),
    ("operator<=", "\x00f"),
    ("operator>=", "\x00g"),
    ("operator->*", "\x00h"),
    ("operator->", "\x00i"),
    ("operator<", "\x00j"),
    ("operator>", "\x00k"),
    ("operator()", "\x00l"),
)

_SKIP = re.compile(
    r"^(?:"
    r"llvm::sys::PrintStackTrace|llvm::sys::RunSignalHandlers|llvm::sys::CleanupOnSignal"
    r"|llvm::sys::RunInterruptHandlers|llvm::sys::Process::|PrintStackTraceSignalHandler"
    r"|SignalHandler|(?:\(anonymous namespace\)::)?SignalHandler|SignalHandlerTerminate"
    r"|llvm::report_fatal_error|llvm::report_bad_alloc_error|llvm::llvm_unreachable_internal"
    r"|llvm::CrashRecoveryContext::\w.*|llvm::SmallVectorBase<[^>]*>::report_\w+"
    r"|__restore_rt|_sigtramp|__kernel_rt_sigreturn"
    r"|abort|raise|gsignal|__pthread_kill_implementation|__pthread_kill_internal|pthread_kill"
    r"|__GI_\w+|__assert_fail|__assert_fail_base|__assert_perror_fail|__assert_rtn|_assert"
    r"|__libc_message|__libc_fatal|__fortify_fail|__stack_chk_fail"
    r"|__libc_start_main|__libc_start_call_main|__libc_start_main_impl|_start|main"
    r"|__sanitizer::\w.*|__asan::\w.*|__lsan::\w.*|__msan::\w.*|__tsan::\w.*|__ubsan::\w.*"
    r"|__asan_\w+|__ubsan_\w+|__sanitizer_\w+|__interceptor_\w+|___interceptor_\w+|__interception::\w.*"
    r"|operator new(?:\[\])?|operator delete(?:\[\])?|malloc|calloc|realloc|free|posix_memalign"
    r"|std::terminate|std::__terminate|__cxa_throw|__cxa_rethrow|__gxx_personality_v0"
    r"|__gnu_cxx::__verbose_terminate_handler|std::__throw_\w+"
    r")$"
)


def _protect_operators(name: str) -> str:
    for op, token in _OPERATORS:
        name = name.replace(op, token)
    return name


def _restore_operators(name: str) -> str:
    for op, token in _OPERATORS:
        name = name.replace(token, op)
    return name


def _strip_parameters(name: str) -> str:
    """Drop the final top-level ``(...)`` group (the parameter list)."""
    if not name.endswith(")"):
        return name
    depth = 0
    for k in range(len(name) - 1, -1, -1):
        ch = name[k]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                head = name[:k].rstrip()
                # `(anonymous namespace)` alone is a name, not a parameter list
                return head if head else name
    return name


def _strip_return_type(name: str) -> str:
    """The last top-level space-separated word: ``void foo<int>`` -> ``foo<int>``."""
    depth = 0
    cut = -1
    for k, ch in enumerate(name):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth = max(0, depth - 1)
        elif ch == " " and depth == 0:
            cut = k
    return name[cut + 1 :] if cut >= 0 else name


def clean_function(text: str) -> str:
    """The function name of one frame's text (after the address), '' when none."""
    s = text.strip()
    if s.startswith("in "):
        s = s[3:].strip()
    s = _MODULE_OFFSET.sub("", s)
    if not s or s.startswith("("):
        if not s.startswith("(anonymous namespace)"):
            return ""
    s = _SOURCE_LOCATION.sub("", s) if re.search(r":\d+(?::\d+)?\)?\s*$", s) else s
    s = _PLUS_OFFSET.sub("", s)
    s = _protect_operators(s)
    s = _CLONE.sub("", s)
    while True:
        t = _QUALIFIER.sub("", s)
        if t == s:
            break
        s = t
    s = _strip_parameters(s)
    s = _strip_return_type(s)
    s = _restore_operators(s).strip()
    if s in ("??", "<unknown>", "<null>"):
        return ""
    return s


def stack_frames(stderr: str) -> list[str]:
    """The cleaned function names of the first stack trace, innermost first ('' for no symbol)."""
    frames: list[str] = []
    last = -1
    for line in stderr.splitlines():
        m = _FRAME.match(line)
        if not m:
            continue
        index = int(m.group(1))
        if frames and index <= last:
            break  # a second stack (allocation site, thread creation): keep the first
        last = index
        frames.append(clean_function(m.group(2)))
    return frames


#: The tool's entry (mlir-opt's MlirOptMain.cpp, the driver's loop in main): where frames stop.
_TOOL_ENTRY = re.compile(r"^(?:performActions|processBuffer|main)$|MlirOptMain|splitAndProcessBuffer")


def meaningful_frames(frames: Iterable[str], count: int = FRAME_COUNT) -> tuple[str, ...]:
    out = []
    for name in frames:
        if name and _TOOL_ENTRY.search(name):
            break
        if not name or _SKIP.match(name):
            continue
        out.append(name)
        if len(out) == count:
            break
    return tuple(out)


# ---------------------------------------------------------------- signatures


def _signal_name(sig: int | None) -> str:
    if sig is None:
        return ""
    import signal as _signal

    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal-{sig}"


def crash_signature(
    stderr: str,
    *,
    kind: str = "crash",
    signal: int | None = None,
    returncode: int | None = None,
) -> Signature:
    """The signature of a failed run (crash, timeout or oom) from its stderr and status."""
    frames = meaningful_frames(stack_frames(stderr))
    if kind == "timeout":
        return Signature("timeout", "", "", frames)
    type_, message = raw_message(stderr)
    if not type_:
        if kind == "oom":
            type_ = ""
            message = "killed by SIGKILL" if signal == 9 else "out of memory"
        elif signal is not None:
            type_ = _signal_name(signal)
        elif returncode is not None:
            type_ = f"exit-{returncode}"
    return Signature(kind, type_, normalise_message(message), frames)


def signature_of(verdict: "Verdict") -> Signature | None:
    """The signature of a judged run, or None when it is no finding."""
    kind = verdict.kind
    if not verdict.finding:
        return None
    o = verdict.outcome
    if kind in ("crash", "timeout", "oom"):
        return crash_signature(o.stderr, kind=kind, signal=o.signal, returncode=o.returncode)
    if kind in ("unexpected-rejection", "wrong-diagnostic"):
        m = _ERROR_LINE.search(o.stderr)
        message = m.group(1) if m else o.reason
        return Signature(kind, "", normalise_message(message))
    if kind == "wrong-output":
        why = verdict.why.removeprefix("output check failed:").strip()
        return Signature(kind, "", normalise_message(why))
    return Signature(kind, "", normalise_message(f"expected {verdict.expected.split()[0]}"))


# ---------------------------------------------------------------- FileCheck


def filecheck_pattern(message: str) -> str:
    """A FileCheck pattern for ``message`` as one run printed it: literal, except
    that a leading ``FILE:LINE:COL:``, paths (``<stdin>`` or the test file) and
    hex addresses are matched by ``{{.*}}``; the rest of the message comes from
    the same program and is reproduced verbatim."""
    message = " ".join(message.split())
    holes = re.compile(r"^(?:\S+?:\d+(?::\d+)?:\s*)+|<stdin>|" + _PATH.pattern + "|" + _HEX.pattern)
    out = []
    pos = 0
    for m in holes.finditer(message):
        out.append(_literal(message[pos : m.start()]))
        out.append("{{.*}}")
        pos = m.end()
    out.append(_literal(message[pos:]))
    pattern = "".join(out)
    while "{{.*}}{{.*}}" in pattern:
        pattern = pattern.replace("{{.*}}{{.*}}", "{{.*}}")
    return pattern.strip()


def _literal(text: str) -> str:
    # FileCheck reads `{{` as a regex and `[[` as a variable; anything else is literal.
    return text.replace("{{", "{{[{][{]}}").replace("[[", "{{[[][[]}}")
