"""The runner: one program text in, one ``Outcome`` out.

A ``Target`` is a command line (binary plus pass arguments; the program goes
to its stdin), the rendering it reads (``canonical`` for loom, ``oracle`` for
upstream ``mlir-opt``), limits, and the expectations it is judged against.

Each run starts the target in its own session (so its whole process group can
be killed on timeout), applies ``RLIMIT_AS`` (``memory_mb``) and
``RLIMIT_CORE=0`` with ``prlimit`` right after the exec and before the program
is written to stdin, and reads both pipes with ``communicate``: no shell, no
temporary files.  Every run is registered with :mod:`harness.run.lifetime`:
a stop request kills it at once (``run_program`` then raises
``lifetime.Stopped`` instead of judging a killed run), and if this process
dies without a word its reaper kills it.

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
import json
import os
import re
import resource
import shlex
import shutil
import signal as _signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Sequence

from harness.run import lifetime
from harness.run.atomic import write_atomically
from harness.run.expectations import (
    DEFAULT_RULE,
    Expectations,
    builtin_expectations,
    load_expectations,
)
from harness.run.failure_message import first_failure
from harness.run.identity import BuildIdentity, IdentityError, identify, which

__all__ = [
    "DEFAULT_MLIR_PIPELINE",
    "DEFAULT_LOOM_PASS_ARGS",
    "FINDING_KINDS",
    "Outcome",
    "OutcomeKind",
    "Target",
    "TargetNotFound",
    "Verdict",
    "classify",
    "explicit_binary",
    "judge",
    "resolve_target",
    "run_program",
    "write_finding",
]

DEFAULT_LOOM_PASS_ARGS: tuple[str, ...] = ("--loom-lower-for-to-graph",)
MLIR_OPT_BASE_ARGS: tuple[str, ...] = ("--allow-unregistered-dialect",)
DEFAULT_MLIR_PIPELINE = "builtin.module(canonicalize,cse,sccp,symbol-dce)"
# Kept out of the way of stack traces: symbolization stays on (signatures need
# function names); this only turns off crash-reporter side channels.
DEFAULT_ENV: Mapping[str, str] = MappingProxyType({"LLVM_DISABLE_CRASH_REPORT": "1"})

#: What a finding can be: a failed run, or a run the expectations contradict.
FINDING_KINDS = (
    "crash", "timeout", "oom",
    "unexpected-rejection", "unexpected-acceptance", "wrong-diagnostic", "wrong-output",
    # the differential oracle (harness.execute): values that differ after the optimizer,
    # the trusted reference toolchain failing, the optimizer's output not MLIR
    "wrong-code", "reference-failure", "target-failure",
    # two builds of one tool (harness.run.divergence): another outcome or normalised output
    "divergence",
)

_REASON_MAX = 300
_STDERR_TAIL_LINES = 80
_STDERR_TAIL_CHARS = 8000


class OutcomeKind(str, enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CRASH = "crash"
    TIMEOUT = "timeout"
    OOM = "oom"

    def __str__(self) -> str:  # "crash", not "OutcomeKind.CRASH"
        return self.value


FAILURE_KINDS = frozenset({OutcomeKind.CRASH, OutcomeKind.TIMEOUT, OutcomeKind.OOM})


class TargetNotFound(Exception):
    """No usable binary for the target; the message is one line for the user."""


@dataclass(frozen=True)
class Target:
    name: str  # "loom-opt" | "mlir-opt" | a user's name
    argv: tuple[str, ...]  # binary + pass args; the program goes to stdin
    render: str = "canonical"  # the grammar's rendering it reads (the grammar names them)
    timeout: float = 10.0
    memory_mb: int | None = 4096  # RLIMIT_AS; None: no limit (sanitizer builds)
    expectations: Expectations | None = None  # None: built-in for `name`, else accept-all
    env: Mapping[str, str] = field(default_factory=lambda: DEFAULT_ENV, hash=False)  # added to os.environ
    #: the binary's family, release and capabilities, asked once (harness.run.identity);
    #: None for a target built by hand (tests, the differential oracle's optimizer)
    build: BuildIdentity | None = field(default=None, compare=False)
    #: a program of the grammar's own shape in the target's rendering: the probe runs it
    #: before a campaign, so a target that refuses the grammar's programs is one line
    probe_program: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(self.argv))
        if not self.render:
            raise ValueError("render: the name of one of the grammar's renderings")
        if self.expectations is None:
            exp = builtin_expectations(self.name) or Expectations(
                source="builtin:accept-all", rules=(DEFAULT_RULE,)
            )
            object.__setattr__(self, "expectations", exp)
        if not isinstance(self.env, MappingProxyType):
            object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    @property
    def command(self) -> str:
        """The command line as a shell would take it, program on stdin."""
        return shlex.join(self.argv)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "argv": list(self.argv),
            "render": self.render,
            "timeout": self.timeout,
            "memory_mb": self.memory_mb,
            "env": dict(self.env),
            "expectations": self.expectations.source if self.expectations else None,
            "build": self.build.to_json() if self.build else None,
        }

    def describe(self) -> str:
        """One line for a summary: the build and its release."""
        return self.build.describe() if self.build else self.argv[0]


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
    # (state carried between inputs; harness.run.persistent).
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


def _one_line(s: str) -> str:
    s = " ".join(s.split())
    return s if len(s) <= _REASON_MAX else s[: _REASON_MAX - 3] + "..."


def _crash_message(stderr: str) -> str | None:
    failure = first_failure(stderr)
    return _one_line(failure.line) if failure else None


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
            return OutcomeKind.OOM, status, sig, _one_line(m.group(0))
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
        return OutcomeKind.REJECTED, 1, None, _one_line(m.group(0)) if m else "error diagnostic"
    return OutcomeKind.CRASH, status, sig, f"exit status {status}" + (
        " without an error: diagnostic" if status == 1 else ""
    )


# ------------------------------------------------------------------- running


def _set_limits(pid: int, memory_mb: int | None) -> None:
    try:
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
        if memory_mb is not None:
            n = int(memory_mb) << 20
            resource.prlimit(pid, resource.RLIMIT_AS, (n, n))
    except ProcessLookupError:
        pass  # already gone: it died before reading its input


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, _signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_program(target: Target, text: str) -> Outcome:
    """Run ``target`` on one program ``text`` (given on stdin) and classify."""
    data = text.encode("utf-8")
    env = {**os.environ, **target.env} if target.env else None
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            target.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as e:
        raise TargetNotFound(f"cannot run {target.argv[0]}: {e.strerror}") from None
    lifetime.run_started(proc.pid)  # a stop kills it; a reaper kills it if we die
    _set_limits(proc.pid, target.memory_mb)
    timed_out = False
    try:
        out, err = proc.communicate(data, timeout=target.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        try:
            out, err = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            # something left the group and holds our pipes: stop waiting
            proc.kill()
            for pipe in (proc.stdout, proc.stderr):
                if pipe:
                    pipe.close()
            proc.wait()
            out, err = b"", b""
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        lifetime.child_ended(proc.pid)
        raise
    duration = time.monotonic() - start
    if timed_out:
        # reap anything still alive in the group (the leader is gone already)
        _kill_group(proc.pid)
    lifetime.run_ended(proc.pid)  # raises lifetime.Stopped if a stop cut the run short
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    kind, status, sig, reason = classify(
        proc.returncode, stderr, timed_out=timed_out, timeout=target.timeout
    )
    return Outcome(
        kind=kind,
        returncode=status,
        signal=sig,
        stdout=stdout,
        stderr=stderr,
        duration=duration,
        reason=reason,
    )


# ------------------------------------------------------------------- judging


def judge(target: Target, text: str, outcome: Outcome) -> Verdict:
    """Judge ``outcome`` of ``text`` against ``target``'s expectations."""
    rule = target.expectations.rule_for(text)
    expected = rule.describe()
    kind = outcome.kind

    def finding(finding_kind: str, why: str) -> Verdict:
        return Verdict(outcome, expected, True, _one_line(why), rule.name, finding_kind)

    if kind in FAILURE_KINDS:
        return finding(kind.value, f"{kind.value}: {outcome.reason}")
    if rule.expect != "either" and kind.value != rule.expect:
        unexpected = "unexpected-rejection" if kind is OutcomeKind.REJECTED else "unexpected-acceptance"
        return finding(unexpected, f"expected {rule.expect} (rule {rule.name}), got {kind.value}: {outcome.reason}")
    # with "either", the diagnostic a rule names is owed by a rejection only
    owes_diagnostic = rule.expect != "either" or kind is OutcomeKind.REJECTED
    if rule.stderr is not None and owes_diagnostic and not rule.stderr.search(outcome.stderr):
        first = outcome.reason if kind is OutcomeKind.REJECTED else "no diagnostic"
        return finding(
            "wrong-diagnostic",
            f"{kind.value} as expected (rule {rule.name}), but stderr does not match "
            f"/{rule.stderr.pattern}/: {first}",
        )
    if kind is OutcomeKind.ACCEPTED and rule.checks:
        failures = rule.check_output(text, outcome.stdout)
        if failures:
            return finding("wrong-output", "output check failed: " + "; ".join(failures))
    return Verdict(outcome, expected, False, "", rule.name)


# ------------------------------------------------------------------ targets


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def explicit_binary(path: str, what: str) -> str:
    """``path`` (a path to an executable file, or a name on PATH) as an absolute path; raises
    ``TargetNotFound`` (one line naming ``what``)."""
    if os.sep in path or os.path.exists(path):
        if _executable(path):
            return os.path.abspath(path)
        raise TargetNotFound(f"{what} binary {path!r} does not exist or is not executable")
    found = which(path)
    if not found:
        raise TargetNotFound(f"{what} binary {path!r} is not on PATH")
    return found


def _pipeline_args(pipeline: str) -> tuple[str, ...]:
    """A pipeline given as a flag (``--loom-lower-scf-to-dfg``) stays a flag;
    anything else is a textual pipeline for ``--pass-pipeline=``."""
    if pipeline.startswith("-"):
        return tuple(shlex.split(pipeline))
    return (f"--pass-pipeline={pipeline}",)


LOOM_NOT_FOUND = (
    "no loom-opt binary: pass --loom-opt PATH or set LOOM_OPT (loom's driver is also "
    "found as loom-raise-opt on PATH); --target mlir-opt works without loom"
)
MLIR_NOT_FOUND = (
    "no mlir-opt binary: set MLIR_OPT or put mlir-opt-22 on PATH "
    "(Debian: apt-get install mlir-22-tools)"
)


def _find_loom_opt(loom_opt: str | None) -> str:
    if loom_opt:
        return explicit_binary(loom_opt, "loom-opt")
    env = os.environ.get("LOOM_OPT")
    if env:
        return explicit_binary(env, "LOOM_OPT")
    for name in ("loom-opt", "loom-raise-opt"):
        found = shutil.which(name)
        if found:
            return found
    raise TargetNotFound(LOOM_NOT_FOUND)


def _find_mlir_opt(mlir_opt: str | None = None) -> str:
    if mlir_opt:
        return explicit_binary(mlir_opt, "mlir-opt")
    env = os.environ.get("MLIR_OPT")
    if env:
        return explicit_binary(env, "MLIR_OPT")
    for name in ("mlir-opt-22", "mlir-opt"):
        found = shutil.which(name)
        if found:
            return found
    for path in ("/usr/lib/llvm-22/bin/mlir-opt",):
        if _executable(path):
            return path
    raise TargetNotFound(MLIR_NOT_FOUND)


def resolve_target(
    name: str = "loom-opt",
    *,
    loom_opt: str | None = None,
    mlir_opt: str | None = None,
    pass_args: Sequence[str] | None = None,
    pipeline: str | None = None,
    timeout: float = 10.0,
    memory_mb: int | None = 4096,
    expectations_path: str | None = None,
) -> Target:
    """Build a ``Target`` by name.

    ``loom-opt``: binary from ``loom_opt``, else ``$LOOM_OPT``, else
    ``loom-opt`` or ``loom-raise-opt`` on PATH; arguments ``pass_args``
    (default ``--loom-lower-for-to-graph``), replaced by ``pipeline`` when
    only that is given; canonical rendering.

    ``mlir-opt``: binary from ``mlir_opt``, else ``$MLIR_OPT``, else ``mlir-opt-22`` or ``mlir-opt`` on PATH;
    arguments ``pass_args`` (default ``--allow-unregistered-dialect``) plus
    ``pipeline`` (default ``DEFAULT_MLIR_PIPELINE``); oracle rendering.

    Any other name, or a path: a build of its own (``mlir-opt-19``, ``iree-opt``,
    ``/opt/llvm/bin/mlir-opt``), binary ``loom_opt`` / ``mlir_opt`` or ``name``,
    asked once what it is (:func:`harness.run.identity.identify`): a tool that
    takes mlir-opt's flags is the ``mlir-opt`` target with that binary, one that
    registers loom's pass the ``loom-opt`` target; anything else is a user's tool:
    arguments ``pass_args`` plus ``pipeline``, canonical rendering, and (unless
    ``expectations_path`` is given) accept-all expectations: any clean exit is
    fine, a crash, timeout or oom is a finding.

    A ``pipeline`` starting with ``-`` is passed as flags; otherwise as
    ``--pass-pipeline=PIPELINE``.
    """
    build = None
    if name == "loom-opt":
        family, binary = "loom-opt", _find_loom_opt(loom_opt)
    elif name == "mlir-opt":
        family, binary = "mlir-opt", _find_mlir_opt(mlir_opt)
    else:
        # a build named by name or path (mlir-opt-19, /opt/llvm/bin/mlir-opt, iree-opt,
        # a loom-raise-opt elsewhere): its family is what it says of itself
        binary = explicit_binary(loom_opt or mlir_opt or name, name)
        build = _identity(binary)
        family = build.family
    if family != "other" and build is None:
        build = _identity(binary)
    if family == "loom-opt":
        if pass_args is not None:
            args = tuple(pass_args)
        elif pipeline is not None:
            args = ()
        else:
            args = DEFAULT_LOOM_PASS_ARGS
        render = "canonical"
        builtin = "loom-opt"
    elif family == "mlir-opt":
        args = tuple(pass_args) if pass_args is not None else MLIR_OPT_BASE_ARGS
        if pipeline is None:
            pipeline = DEFAULT_MLIR_PIPELINE
        render = "oracle"
        builtin = "mlir-opt"
    else:
        args = tuple(pass_args) if pass_args is not None else ()
        render = "canonical"
        builtin = name  # a tool of its own: no built-in expectations, so accept-all
    if family in ("loom-opt", "mlir-opt"):
        name = family  # probes, expectations and drivers are the family's; the build says which
    if pipeline:
        args = args + _pipeline_args(pipeline)
    expectations = (
        load_expectations(expectations_path)
        if expectations_path
        else builtin_expectations(builtin)
    )
    return Target(
        name=name,
        argv=(binary, *args),
        render=render,
        timeout=timeout,
        memory_mb=memory_mb,
        expectations=expectations,
        build=build,
    )


def _identity(binary: str) -> BuildIdentity:
    try:
        return identify(binary)
    except IdentityError as error:
        raise TargetNotFound(str(error)) from None


# ------------------------------------------------------------------ findings


def _tail(s: str) -> str:
    lines = s.splitlines()[-_STDERR_TAIL_LINES:]
    t = "\n".join(lines)
    return t[-_STDERR_TAIL_CHARS:]


def write_finding(
    directory, name: str, text: str, target: Target, verdict: Verdict, extra: Mapping | None = None, *,
    suffix: str,
) -> None:
    """Write ``NAME<suffix>`` (the program as the target read it; the grammar's
    suffix, :func:`harness.contract.program_suffix`) and ``NAME.json``.

    ``NAME.json`` holds: ``name``, ``target`` (name, argv, render, limits,
    expectations source), ``command`` (a shell line that reproduces the run),
    ``outcome`` (kind), ``returncode``, ``signal``, ``signal_name``,
    ``reason``, ``duration``, ``stderr_tail``, ``stdout_tail``, ``expected``,
    ``rule``, ``finding``, ``finding_kind`` (one of FINDING_KINDS), ``why`` and
    ``persistent_only`` (true: only a persistent driver failed, a fresh
    process did not; ``why`` then starts with ``persistent-only:``), plus
    ``extra``'s keys (e.g. ``persistent``: harness.run.persistent).
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    program = d / f"{name}{suffix}"
    # Each file appears whole (write then rename), the .json last: a sidecar
    # never exists half-written, and crash-<sha1> (libFuzzer's, written after
    # this returns) never exists without both.
    write_atomically(program, text)
    o = verdict.outcome
    record = {
        "name": name,
        "target": target.to_json(),
        "command": f"{target.command} < {shlex.quote(program.name)}",
        "outcome": o.kind.value,
        "returncode": o.returncode,
        "signal": o.signal,
        "signal_name": o.signal_name,
        "reason": o.reason,
        "duration": round(o.duration, 6),
        "stderr_tail": _tail(o.stderr),
        "stdout_tail": _tail(o.stdout),
        **verdict.to_json(),
        **(extra or {}),
    }
    write_atomically(d / f"{name}.json", json.dumps(record, indent=2) + "\n")
