"""A crash bucket's regression test: the lit test ``bucket-N/regression.mlir`` holds.

Written by :func:`harness.triage.report.write_reports` for every minimized crash
bucket (the oracles' buckets carry the lit test their own triage stored).

``BIN`` is the basename of the target's binary and ``ARGS`` its pass
arguments, as triage ran them:

* a crash that died by a signal: ``// RUN: not --crash BIN ARGS %s 2>&1 |
  FileCheck %s`` with ``// CHECK:`` the assertion / ``LLVM ERROR`` /
  ``UNREACHABLE`` / sanitizer message (or ``Stack dump:`` and the top
  frame); the test passes while the bug is there;
* a crash that exited (``LLVM ERROR:`` with exit status 1):
  ``// RUN: not BIN ARGS %s 2>&1 | FileCheck %s`` with the message;
* an unexpected rejection, a wrong output, a timeout or an out-of-memory:
  the test of the expected behaviour, which fails until the bug is fixed:
  ``// RUN: BIN ARGS %s | FileCheck %s`` with one ``// CHECK-DAG:
  dataflow.graph private @graph_N`` per region and a second RUN line whose
  ``NOREGION-NOT: loom.spatial_region`` checks the whole output (when the
  target's expectations have those output checks), else ``// CHECK:
  module``;
* an unexpected acceptance or a wrong diagnostic: ``// RUN: not BIN ARGS %s
  2>&1 | FileCheck %s`` with ``// CHECK: error:``.

The signature is in a comment at the top.  The ``lit.cfg.py`` beside it
(:func:`harness.triage.report.lit_config`) lets the virtualenv's ``lit`` run it as
written: the binary's folder (:func:`regression_tool_dirs`) and LLVM's ``not`` and
``FileCheck`` are found without a PATH change.
"""

from __future__ import annotations

import json
import os
import re
import shlex

from harness.triage.signature import filecheck_pattern, raw_message

__all__ = ["regression_test", "regression_tool_dirs"]

_GRAPH_NAME = re.compile(r'graph_name = "([\w$.\-]+)"')


def _target(bucket) -> dict:
    try:
        return json.loads(bucket["target"]) if bucket["target"] else {}
    except ValueError:
        return {}


def _rule(target: dict, text: str):
    """The expectation rule the target applied to ``text`` (None when unknown)."""
    from harness.targets.expectations import ExpectationsError, builtin_expectations, load_expectations

    source = target.get("expectations") or ""
    try:
        if source.startswith("builtin:"):
            expectations = builtin_expectations(source.split(":", 1)[1])
        elif source:
            expectations = load_expectations(source)
        else:
            expectations = None
    except (ExpectationsError, OSError):
        expectations = None
    return expectations.rule_for(text) if expectations else None


def regression_tool_dirs(bucket) -> list[str]:
    """The folder of the binary the RUN lines name by its basename (for the bucket's
    ``lit.cfg.py``, so lit finds that very build), or none when triage recorded no path."""
    argv = _target(bucket).get("argv") or []
    return [os.path.dirname(argv[0])] if argv and os.path.isabs(argv[0]) else []


def _command(target: dict) -> str:
    argv = target.get("argv") or ["loom-opt", "--loom-lower-for-to-graph"]
    return shlex.join([os.path.basename(argv[0]), *argv[1:]])


def _expected_output_checks(target: dict, text: str) -> tuple[list[str], list[str]]:
    """(extra RUN lines, CHECK lines) of the test of a correct, accepted output."""
    rule = _rule(target, text)
    checks = set(rule.checks) if rule is not None else set()
    runs, lines = [], []
    if "one-graph-per-region" in checks:
        lines += [f"// CHECK-DAG: dataflow.graph private @{name}" for name in _GRAPH_NAME.findall(text)]
    if "no-spatial-region" in checks:
        runs.append(f"// RUN: {_command(target)} %s | FileCheck %s --check-prefix=NOREGION")
        lines.append("// NOREGION-NOT: loom.spatial_region")
    if not any(line.startswith("// CHECK") for line in lines):
        lines.insert(0, "// CHECK: module")
    return runs, lines


def regression_test(bucket) -> str:
    """The lit test of one minimized bucket (a row of the buckets table)."""
    target = _target(bucket)
    text = bucket["minimized_text"] or ""
    kind = bucket["kind"]
    command = _command(target)
    stderr = bucket["minimized_stderr"] or ""
    header = [
        f"// Regression test for loom-fuzz triage bucket {bucket['id']} ({kind}).",
        f"// Signature: {bucket['signature']}",
    ]
    if bucket["reproduction"] != "always":
        header.append("// NOTE: flaky: this input fails on only some runs.")
    runs: list[str] = []
    checks: list[str] = []
    if kind == "crash":
        died_by_signal = bucket["minimized_signal"] is not None
        _, message = raw_message(stderr)
        if not message and bucket["type"] == "llvm-error":
            message = bucket["message"]
        pattern = filecheck_pattern(message) if message else ""
        frames = json.loads(bucket["frames"] or "[]")
        if pattern:
            # the whole line as printed, from its failure keyword on
            line = next((ln for ln in stderr.splitlines() if message in ln), message)
            for keyword in ("Assertion", "LLVM ERROR:", "UNREACHABLE", "==ERROR:", "runtime error:"):
                if keyword in line:
                    line = line[line.index(keyword):]
                    break
            else:
                line = message
            checks.append(f"// CHECK: {filecheck_pattern(line)}")
        elif died_by_signal and frames and "Stack dump:" in stderr:
            checks.append("// CHECK: Stack dump:")
            checks.append(f"// CHECK: {filecheck_pattern(frames[0])}")
        prefix = "not --crash" if died_by_signal else "not"
        if checks:
            runs.append(f"// RUN: {prefix} {command} %s 2>&1 | FileCheck %s")
        else:
            runs.append(f"// RUN: {prefix} {command} %s")
        header.append(
            "// This test passes while the bug is there; once it is fixed, replace the RUN line "
            "with a check of the expected output."
        )
    elif kind in ("unexpected-acceptance", "wrong-diagnostic"):
        rule = _rule(target, text)
        runs.append(f"// RUN: not {command} %s 2>&1 | FileCheck %s")
        checks.append("// CHECK: error:")
        if rule is not None and rule.stderr is not None and re.fullmatch(r"[\w .,'\-]+", rule.stderr.pattern):
            checks.append(f"// CHECK-SAME: {rule.stderr.pattern}")
        header.append("// This test checks the expected diagnostic: it fails until the bug is fixed.")
    else:  # unexpected-rejection, wrong-output, timeout, oom: the expected output
        extra, checks = _expected_output_checks(target, text)
        runs.append(f"// RUN: {command} %s | FileCheck %s")
        runs.extend(extra)
        what = {"timeout": "hangs", "oom": "runs out of memory"}.get(kind, "misbehaves")
        header.append(
            f"// The target {what} on this program today: this test checks the expected "
            "output and fails until the bug is fixed."
        )
    return "\n".join(header + runs + checks) + "\n\n" + text
