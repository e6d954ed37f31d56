"""The pipeline probe: the target runs once on a trivial module before any program.

A pass pipeline or argument the target refuses would otherwise make every
program a finding (``unexpected-rejection``, each a copy of the same error).
:func:`probe_target` runs the target's own command line once on a probe
module and raises :class:`PipelineRefused` (one line: what the target said,
and the fix where it is known, e.g. the missing ``builtin.module(...)``
anchor) when it does not accept it.

An exit status is not enough: MLIR 15 accepts an anchored
``builtin.module(...)`` pipeline and silently runs nothing.  So for a target
reading the oracle rendering (``mlir-opt``) the probe module holds ``1 + 1``,
which ``canonicalize`` and ``sccp`` fold: a pipeline naming one of them that
leaves the ``arith.addi`` in place did not run (refused too); any other
pipeline that leaves the module's operations as they were gets a one-line
note saying what the grammar's first program did in it (a crash there: the
pipeline runs; rewritten: no note; unchanged too: it may have nothing to do,
or not run).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass

from harness.run.judge import judge
from harness.run.outcome import classify, Outcome, OutcomeKind
from harness.targets.target import Target, TargetNotFound

__all__ = ["PROBE_MODULES", "PipelineRefused", "ProbeResult", "probe_target"]

#: Target name -> its probe module.  The built-in targets only: loom-fuzz knows what a
#: trivial program is for them; a tool of the user's own (any grammar) is not probed.
PROBE_MODULES = {
    "mlir-opt": (
        "func.func @loomfuzz_probe() -> i32 {\n"
        "  %a = arith.constant 1 : i32\n"
        "  %b = arith.addi %a, %a : i32\n"
        "  return %b : i32\n"
        "}\n"
    ),
    "loom-opt": "module {\n}\n",
}
#: Passes known to fold the oracle probe's ``arith.addi``.
FOLDING_PASSES = ("canonicalize", "sccp")
_ANCHOR = "wrapped with the anchor operation type"
_FAILED = {OutcomeKind.CRASH: "crashes", OutcomeKind.TIMEOUT: "times out", OutcomeKind.OOM: "runs out of memory"}
#: Terminators a custom printer leaves out (an ``scf.yield`` without operands, ``return``).
_ELIDED = frozenset({"scf.yield", "func.return"})
_OP = re.compile(r"^\s*(?:%[\w.#:]+(?:, %[\w.#:]+)*\s*=\s*)?\"?([a-z_][\w$]*\.[\w$.]+)", re.MULTILINE)


class PipelineRefused(Exception):
    """The target refuses its pass pipeline or arguments (one line for the user; exit 2)."""


@dataclass(frozen=True)
class ProbeResult:
    note: str | None  # one line to show (a pipeline that changed nothing), or None
    #: target processes the probe cost: its runs, and the identity's two questions
    #: (--version, --help) where the target has a build
    processes: int = 0


def _ops(text: str) -> list[str]:
    return [m.group(1) for m in _OP.finditer(text) if m.group(1) != "builtin.module"]


def probe_target(target: Target, what: str) -> ProbeResult:
    """Run ``target`` once on its probe module (none for a tool of the user's own).

    ``what`` names the user's setting in the messages (e.g. ``--pipeline
    canonicalize,cse``).  Raises :class:`PipelineRefused`; the runner's
    ``TargetNotFound`` when the binary cannot run.
    """
    module = PROBE_MODULES.get(target.name)
    if module is None:
        return ProbeResult(None)
    binary = target.argv[0].rsplit("/", 1)[-1]
    _check_build(target, what, binary)
    outcome = _run(target, module)
    if outcome.kind is not OutcomeKind.ACCEPTED:
        errors = [line.strip() for line in outcome.stderr.splitlines() if "error" in line.lower()]
        said = (errors[0] if errors else outcome.reason).removeprefix("<unknown>:0: ")
        fix = ""
        pipeline = _pipeline_of(target)
        if _ANCHOR in outcome.stderr and pipeline is not None and not pipeline.startswith("builtin.module("):
            fix = f"; write --pipeline 'builtin.module({pipeline})'"
        raise PipelineRefused(f"{what}: {binary} refuses it on a trivial module ({said}){fix}")
    program = _probe_program(target, what, binary)
    processes = 1 + (target.probe_program is not None) + (2 if target.build is not None else 0)
    if target.render != "oracle":
        return ProbeResult(None, processes)
    before, after = _ops(module), _ops(outcome.stdout)
    if after != before:
        return ProbeResult(None, processes)
    pipeline = _pipeline_of(target) or " ".join(target.argv[1:])
    folding = [p for p in FOLDING_PASSES if p in pipeline]
    if folding:
        raise PipelineRefused(
            f"{what}: {binary} accepts it but it changed nothing in a probe module that "
            f"{folding[0]} folds (1 + 1): the pipeline does not run (an anchor this MLIR "
            "version ignores?)")
    return ProbeResult(_unchanged_note(what, before, program), processes)


def _unchanged_note(what: str, before: list[str], program: tuple[str, Outcome] | None) -> str | None:
    """What the probe saw of a pipeline that left the trivial module as it was, said as it
    happened: the grammar's first program decides whether the pipeline runs (issue 46: a
    pipeline that crashed on half the programs was said to be "not running")."""
    unchanged = f"{what}: the pipeline changed nothing in the probe module ({', '.join(before)})"
    if program is None:
        return unchanged + "; if it should, it may not be running"
    text, outcome = program
    if outcome.kind in _FAILED:
        return (f"{unchanged}, but the grammar's first program of seed 0 {_FAILED[outcome.kind]} in it "
                f"({outcome.reason[:160]}): the pipeline runs")
    if outcome.kind is OutcomeKind.ACCEPTED and _program_ops(outcome.stdout) != _program_ops(text):
        return None  # it rewrote the grammar's program: it runs, there is nothing to say
    return (f"{unchanged} nor in the grammar's first program of seed 0: it has nothing to do on "
            "them, or it is not running")


def _program_ops(text: str) -> Counter:
    """The operations of a program, without the terminators a custom printer may leave out."""
    return Counter(op for op in _ops(text) if op not in _ELIDED)


def _check_build(target: Target, what: str, binary: str) -> None:
    """What the build says of itself, before anything runs: the passes it registers, the
    syntax its release reads (harness.targets.identity)."""
    build = target.build
    if build is None:
        return
    missing = build.missing_passes(_pipeline_of(target))
    if missing:
        raise PipelineRefused(f"{what}: {build.describe()} registers no pass named "
                              f"{', '.join(missing)}")
    if target.render == "oracle" and not build.properties_syntax:
        raise PipelineRefused(
            f"{build.describe()} cannot read the oracle rendering: MLIR {build.major} refuses the "
            "generic <{...}> properties syntax (MLIR 17 and later read it); --oracle differential "
            "gives it the exec rendering, which it reads")


def _probe_program(target: Target, what: str, binary: str) -> tuple[str, Outcome] | None:
    """The target must read a program of the grammar's own shape: a rejection its
    expectations do not allow there would make every program a finding.  A rejection they
    expect (loom rejects a region holding a call) is no refusal, nor is a crash: that may
    be the bug."""
    if target.probe_program is None:
        return None
    outcome = _run(target, target.probe_program)
    if judge(target, target.probe_program, outcome).kind == "unexpected-rejection":
        said = outcome.reason.removeprefix("<stdin>:").strip()
        raise PipelineRefused(f"{binary} ({what}) refuses the grammar's programs, its first program "
                              f"of seed 0 already: {said}")
    return target.probe_program, outcome


def _run(target: Target, text: str) -> Outcome:
    """One short run of the target's command line, classified as the runner does.
    Not through :func:`harness.run.process.run_program`: the probe runs in the
    command's own process (``fuzz``'s supervisor), which starts no run reaper."""
    try:
        proc = subprocess.run(target.argv, input=text.encode(), capture_output=True,
                              timeout=target.timeout, env={**os.environ, **target.env},
                              start_new_session=True)
    except subprocess.TimeoutExpired as expired:
        stderr = (expired.stderr or b"").decode("utf-8", errors="replace")
        kind, code, sig, reason = classify(None, stderr, timed_out=True, timeout=target.timeout)
        return Outcome(kind, code, sig, "", stderr, target.timeout, reason)
    except OSError as error:
        raise TargetNotFound(f"cannot run {target.argv[0]}: {error.strerror}") from None
    stderr = proc.stderr.decode("utf-8", errors="replace")
    kind, code, sig, reason = classify(proc.returncode, stderr)
    return Outcome(kind, code, sig, proc.stdout.decode("utf-8", errors="replace"), stderr, 0.0, reason)


def _pipeline_of(target: Target) -> str | None:
    for arg in target.argv[1:]:
        if arg.startswith("--pass-pipeline="):
            return arg.split("=", 1)[1]
    return None
