"""The judge protocol (:data:`Judge`: a target, a program's text and its ``Outcome`` in,
a ``Verdict`` out), its default judge (the target's expectations), and a finding written
to disk: the program as the target read it and its JSON record.

Every runner calls a :data:`Judge` on every outcome; the robustness oracle
(``harness.contract``) and the wrong-code oracle (``harness.oracles.differential_runner``) plug in
judges of their own through the same protocol."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Callable, Mapping

from harness.run.atomic import write_atomically
from harness.run.outcome import FAILURE_KINDS, Outcome, OutcomeKind, Verdict, one_line
from harness.targets.target import Target

__all__ = ["Judge", "judge", "write_finding"]

#: Judges one outcome of one program against the target (the expectations by default).
Judge = Callable[[Target, str, Outcome], Verdict]

_STDERR_TAIL_LINES = 80
_STDERR_TAIL_CHARS = 8000


def judge(target: Target, text: str, outcome: Outcome) -> Verdict:
    """Judge ``outcome`` of ``text`` against ``target``'s expectations."""
    rule = target.expectations.rule_for(text)
    expected = rule.describe()
    kind = outcome.kind

    def finding(finding_kind: str, why: str) -> Verdict:
        return Verdict(outcome, expected, True, one_line(why), rule.name, finding_kind)

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
    ``extra``'s keys (e.g. ``persistent``: harness.run.persistent_evidence).
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
