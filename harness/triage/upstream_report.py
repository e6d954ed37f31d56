"""A triaged bug as the report an MLIR maintainer asks for (``triage report-upstream``).

What the report holds (:class:`UpstreamReport`) and how it is written
(:func:`report_markdown`); :mod:`harness.triage.upstream_crash` and
:mod:`harness.triage.upstream_wrong_code` make one from a bucket, and
:mod:`harness.triage.report_upstream` checks it.

The shape follows MLIR's "Reporting Issues" guidance
(https://mlir.llvm.org/getting_started/ReportingIssues: the version of MLIR, the
IR and the exact options of the command-line tool, the input minimized) and the
fuzzer-found reports on llvm/llvm-project it was modelled on: #204096 and
#118450 ("[mlir] -remove-dead-values bug report": the version, "reproduce with:
`mlir-opt -remove-dead-values a.mlir`", the input, the stack trace), #131765
and #206920 (the assertion line and the trace), and for wrong code #218191 and
#89382 (the input, the pass, the value expected against the value computed).

Every command is written to run from a folder holding the program as
:data:`PROGRAM`; each :class:`Step` says what its run must show, which is what
:func:`harness.triage.report_upstream.check_report` holds it to.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from harness.targets.identity import which
from harness.triage.wrong_code import pipeline_passes

__all__ = ["PROGRAM", "ReportError", "Step", "UpstreamReport", "command_name", "pass_arguments",
           "report_markdown"]

#: The program's file name in every command of the report.
PROGRAM = "bug.mlir"
_SIMPLE_PASS = re.compile(r"[a-z][\w-]*")


class ReportError(Exception):
    """No report can be made from this bucket (one line for the user)."""


@dataclass(frozen=True)
class Step:
    """One command of the report, as written (run from the folder of :data:`PROGRAM`)."""

    command: str
    what: str  # one line: what it does
    #: what its run must show: ``prints`` (stdout, stripped, is ``expect``), ``contains``
    #: (stdout holds ``expect``) or ``fails`` (its failure's signature key is ``expect``:
    #: harness.triage.upstream_crash.failure_key)
    check: str
    expect: str


@dataclass
class UpstreamReport:
    """Everything the report says (see :func:`report_markdown`)."""

    bucket: int
    kind: str  # crash | hang | error | wrong-code | poison
    title: str
    program: str  # the text of PROGRAM
    plain: bool  # loom's shell reduced away: upstream dialects only
    build: str  # the build it was found with: "mlir-opt-22 (LLVM 22.1.8)"
    pass_name: str  # the pass (or the shortest pipeline) the commands run
    found_with: str  # the pipeline the fuzzer ran
    steps: list[Step]
    how_reduced: str  # one line: how the program was reduced
    trace: str = ""  # crash / error: the message and the stack, trimmed
    optimized: str = ""  # wrong code: the function as the pass leaves it
    expected: str = ""  # wrong code: the values printed before (the interpreter's too)
    actual: str = ""  # and after the pass
    interpreter: str = ""  # wrong code: loom-fuzz's interpreter's values of that call
    inputs: str = ""  # wrong code: which input shows it
    releases: list[dict] = field(default_factory=list)  # {"name", "version", "result", "detail"}
    timeout: float = 10.0  # a hang: how long a run must last to show it


def command_name(binary: str) -> str:
    """How a command of the report names ``binary``: its file name where that name on PATH is
    the same file (``mlir-opt-22``), else its absolute path."""
    name = os.path.basename(binary)
    here, named = which(binary), which(name)
    if here and named and os.path.realpath(here) == os.path.realpath(named):
        return name
    return os.path.abspath(here or binary)


def pass_arguments(pipeline: str) -> list[str]:
    """The command-line form of a pipeline: ``--sccp`` for ``builtin.module(sccp)`` (a flag per
    pass when every pass is a bare name), else ``--pass-pipeline=...``; flags stay flags."""
    anchor, passes = pipeline_passes(pipeline)
    if not anchor:
        return passes
    if anchor == "builtin.module" and all(_SIMPLE_PASS.fullmatch(p) for p in passes):
        return [f"--{p}" for p in passes]
    return [f"--pass-pipeline={pipeline}"]


def _fence(text: str, language: str = "") -> str:
    return f"```{language}\n{text.rstrip()}\n```\n"


def _releases_table(releases: list[dict]) -> str:
    if not releases:
        return "No other build was judged.\n"
    rows = ["| build | LLVM version | result | detail |", "|---|---|---|---|"]
    for r in releases:
        detail = (r.get("detail") or "").replace("|", "\\|")
        mark = " (the build it was found with)" if r.get("under_test") else ""
        rows.append(f"| {r['name']}{mark} | {r.get('version') or '?'} | {r['result']} | {detail} |")
    has = [r["name"] for r in releases if r["result"] == "reproduces"]
    not_ = [r["name"] for r in releases if r["result"] in ("correct", "passes")]
    lines = "\n".join(rows) + "\n"
    rejects = any(r["result"] == "rejects" for r in releases)
    summary = (f"\nIt reproduces on {', '.join(has) or 'none'}; not on {', '.join(not_) or 'any build judged'}"
               + (" (\"rejects\": the build has no such pass or cannot read the program)" if rejects else "")
               + ".\n")
    return lines + summary


def report_markdown(report: UpstreamReport) -> str:
    """The report as GitHub issue text (Markdown), ready to paste into llvm/llvm-project."""
    out = [f"# {report.title}\n\n"]
    alone = " alone" if "," not in report.pass_name.split("{")[0] else ""
    out.append(f"Found with `{report.build}`; reproduces with `{report.pass_name}`{alone} on the program "
               f"below, saved as `{PROGRAM}`.\n\n")
    out.append(f"`{PROGRAM}`:\n\n" + _fence(report.program, "mlir") + "\n")
    if report.kind in ("wrong-code", "poison"):
        out.append("## Steps to reproduce\n\n")
        for step in report.steps:
            out.append(f"{step.what}:\n\n" + _fence(step.command, "sh"))
            if step.check == "prints":
                out.append("prints\n\n" + _fence(step.expect, "text"))
            elif step.check == "contains":
                out.append("prints, among the rest,\n\n" + _fence(step.expect, "mlir"))
            out.append("\n")
        out.append("## Expected and actual\n\n")
        if report.kind == "poison":
            out.append(f"The call {report.inputs} prints `{report.expected}` before the pass (loom-fuzz's "
                       f"reference interpreter gives `{report.interpreter}` too). After the pass, the function "
                       f"computes poison for that input: loom-fuzz's IR executor, which follows the arith "
                       f"dialect's poison semantics (e.g. an `overflow<nsw>` operation that wraps), evaluates "
                       f"the call to `{report.actual}`. The JIT's code happens to print the old values, but an "
                       f"optimizer may fold the poison to anything.\n\n")
        else:
            out.append(f"The call {report.inputs} prints `{report.expected}` before the pass and "
                       f"`{report.actual}` after it. loom-fuzz's reference interpreter of the original "
                       f"program gives `{report.interpreter}` for that call.\n\n")
            if report.optimized:
                out.append("What the pass leaves of the function:\n\n" + _fence(report.optimized, "mlir") + "\n")
    else:
        out.append("## Steps to reproduce\n\n")
        for step in report.steps:
            out.append(_fence(step.command, "sh"))
        if report.kind == "hang":
            out.append(f"\nThe command does not end (killed after {report.timeout:g} s), with no "
                       "diagnostic.\n\n")
        else:
            out.append("\n" + ("Output" if report.kind == "error" else "Stack trace (trimmed)") + ":\n\n"
                       + _fence(report.trace, "text") + "\n")
    out.append("## Versions\n\n" + _releases_table(report.releases) + "\n")
    out.append(f"## How it was found\n\n{report.how_reduced}\n\n")
    out.append(f"Generated by loom-fuzz, a grammar-based fuzzer of MLIR programs, running "
               f"`{report.found_with}`; reduced by `loomfuzz triage report-upstream` (bucket "
               f"{report.bucket}).\n")
    return "".join(out)
