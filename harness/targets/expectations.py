"""Expectations as data: which outcome each program should get from a target.

A target's expectations are a JSON file.  The built-in ones ship in the
package as ``harness/targets/expectations_data/loom-opt.json`` and
``harness/targets/expectations_data/mlir-opt.json``; a user's own file replaces them
(``--expectations PATH``).

Schema::

    {
      "target": "loom-opt",            // optional, informational
      "description": "...",            // optional, informational
      "rules": [                       // required, non-empty; first match wins
        {
          "name": "call-in-region",    // required, unique: shown in findings
          "match": "REGEX" | [REGEX...],   // optional: every one must be found
          "unless": "REGEX" | [REGEX...],  // optional: none may be found
          "expect": "rejected",        // required: "accepted" | "rejected" | "either"
          "stderr": "REGEX",           // optional: stderr must match it when the
                                       //   outcome is the expected one (with
                                       //   "either": when it is a rejection)
          "checks": ["NAME", ...],     // optional: output checks, run on
                                       //   accepted outcomes only
          "note": "..."                // optional, informational
        }
      ]
    }

Regular expressions are Python ``re`` syntax, searched (``re.search``) in the
program text as the target reads it (``match``/``unless``) or in the target's
stderr (``stderr``), with ``re.MULTILINE`` so ``^``/``$`` anchor at lines.
A program no rule matches is expected ``accepted`` with no checks.

What counts as a finding (see ``harness.run.judge.judge``): every crash, timeout
or oom, whatever the rules say; an outcome other than the expected one
(``either`` accepts both accepted and rejected); an expected outcome whose
stderr does not match the rule's ``stderr``; an accepted outcome that fails
one of the rule's output checks.

Output checks, by name (each gets the input text and the target's stdout):

``no-spatial-region``
    stdout holds no ``loom.spatial_region``.
``one-graph-per-region``
    stdout defines exactly one ``dataflow.graph ... @NAME`` (a definition,
    not a ``dataflow.graph.launch``) for each ``graph_name = "NAME"`` in the
    input, and no other graph.
``host-container-unchanged``
    the ``func.func @host_container`` definition in stdout equals the one in
    the input, up to indentation and the spelling of SSA value names (the
    MLIR printer renames ``%zero`` to ``%c0`` and ``%target`` to ``%arg0``).
``nonempty-output``
    stdout holds a module (non-blank, mentions ``module``).

A file that is not valid JSON or breaks this schema is refused with one line
naming the file (and, for JSON syntax, the line and column) and what is wrong:
``ExpectationsError``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Callable

__all__ = [
    "CHECKS",
    "EXPECTS",
    "Expectations",
    "ExpectationsError",
    "Rule",
    "builtin_expectations",
    "load_expectations",
    "parse_expectations",
]

EXPECTS = ("accepted", "rejected", "either")

_FLAGS = re.MULTILINE


class ExpectationsError(ValueError):
    """A bad expectations file; the message is one line for the user."""


# --------------------------------------------------------------- output checks

_SPATIAL = "loom.spatial_region"
_GRAPH_NAME = re.compile(r'graph_name\s*=\s*"([^"]*)"')
# a graph definition: `dataflow.graph` followed by blank (not `.launch`), then
# anything up to the symbol on the same line
_GRAPH_DEF = re.compile(r"^\s*dataflow\.graph\s[^\n]*?@([\w$.\-]+)", _FLAGS)
_SSA = re.compile(r"%[\w$.\-]+")


def _check_no_spatial_region(text: str, stdout: str) -> str | None:
    if _SPATIAL in stdout:
        line = stdout.count("\n", 0, stdout.index(_SPATIAL)) + 1
        return f"output still holds a loom.spatial_region (output line {line})"
    return None


def _check_one_graph_per_region(text: str, stdout: str) -> str | None:
    wanted = _GRAPH_NAME.findall(text)
    defined: dict[str, int] = {}
    for name in _GRAPH_DEF.findall(stdout):
        defined[name] = defined.get(name, 0) + 1
    missing = [n for n in wanted if n not in defined]
    if missing:
        return "no dataflow.graph for " + ", ".join("@" + n for n in missing)
    twice = [n for n, c in defined.items() if c > 1]
    if twice:
        return "more than one dataflow.graph for " + ", ".join("@" + n for n in twice)
    extra = sorted(set(defined) - set(wanted))
    if extra:
        return "dataflow.graph with no region in the input: " + ", ".join("@" + n for n in extra)
    return None


def _function_block(text: str, symbol: str) -> list[str] | None:
    """The lines of `func.func @symbol(...) {...}` up to its closing brace."""
    lines = text.splitlines()
    head = re.compile(r"^(\s*)func\.func\s+(?:\w+\s+)?@" + re.escape(symbol) + r"\b")
    for i, line in enumerate(lines):
        m = head.match(line)
        if not m:
            continue
        indent = m.group(1)
        if not line.rstrip().endswith("{"):
            return [line]
        for j in range(i + 1, len(lines)):
            if lines[j].rstrip() == indent + "}":
                return lines[i : j + 1]
        return lines[i:]
    return None


def _normalise(lines: list[str]) -> list[str]:
    names: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        return names.setdefault(m.group(0), f"%v{len(names)}")

    out = []
    for line in lines:
        line = line.strip()
        if line:
            out.append(_SSA.sub(rename, line))
    return out


def _check_host_container_unchanged(text: str, stdout: str) -> str | None:
    before = _function_block(text, "host_container")
    if before is None:
        return None  # nothing to preserve
    after = _function_block(stdout, "host_container")
    if after is None:
        return "@host_container is missing from the output"
    a, b = _normalise(before), _normalise(after)
    if a == b:
        return None
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"@host_container changed at its line {k + 1}: {after[k].strip()!r}"
    return f"@host_container changed: {len(b)} lines instead of {len(a)}"


def _check_nonempty_output(text: str, stdout: str) -> str | None:
    if not stdout.strip():
        return "empty output"
    if "module" not in stdout:
        return "output holds no module"
    return None


CHECKS: dict[str, Callable[[str, str], str | None]] = {
    "no-spatial-region": _check_no_spatial_region,
    "one-graph-per-region": _check_one_graph_per_region,
    "host-container-unchanged": _check_host_container_unchanged,
    "nonempty-output": _check_nonempty_output,
}


# ----------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    name: str
    expect: str  # "accepted" | "rejected" | "either"
    match: tuple[re.Pattern[str], ...] = ()
    unless: tuple[re.Pattern[str], ...] = ()
    stderr: re.Pattern[str] | None = None
    checks: tuple[str, ...] = ()
    note: str = ""

    def applies(self, text: str) -> bool:
        return all(p.search(text) for p in self.match) and not any(
            p.search(text) for p in self.unless
        )

    def check_output(self, text: str, stdout: str) -> list[str]:
        """The failures (``"NAME: message"``) of this rule's output checks."""
        failures = []
        for name in self.checks:
            msg = CHECKS[name](text, stdout)
            if msg:
                failures.append(f"{name}: {msg}")
        return failures

    def describe(self) -> str:
        s = self.expect
        if self.stderr is not None:
            s += f" with stderr matching /{self.stderr.pattern}/"
        return s


DEFAULT_RULE = Rule(name="default", expect="accepted")


@dataclass(frozen=True)
class Expectations:
    source: str  # file path or "builtin:NAME"
    rules: tuple[Rule, ...]
    target: str = ""
    description: str = ""

    def rule_for(self, text: str) -> Rule:
        """The first rule that applies to the program text (first match wins)."""
        for rule in self.rules:
            if rule.applies(text):
                return rule
        return DEFAULT_RULE


def _fail(source: str, where: str, what: str) -> ExpectationsError:
    return ExpectationsError(f"{source}: {where}: {what}")


def _patterns(source: str, where: str, value: object) -> tuple[re.Pattern[str], ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(source, where, "must be a regular expression or a list of them")
    out = []
    for v in value:
        try:
            out.append(re.compile(v, _FLAGS))
        except re.error as e:
            raise _fail(source, where, f"bad regular expression {v!r}: {e}") from None
    return tuple(out)


_RULE_KEYS = {"name", "match", "unless", "expect", "stderr", "checks", "note"}


def parse_expectations(data: object, source: str) -> Expectations:
    """Validate decoded JSON ``data``; errors name ``source``."""
    if not isinstance(data, dict):
        raise _fail(source, "top level", "must be a JSON object with a \"rules\" list")
    unknown = set(data) - {"target", "description", "rules"}
    if unknown:
        raise _fail(source, "top level", f"unknown key {sorted(unknown)[0]!r}")
    rules_data = data.get("rules")
    if not isinstance(rules_data, list) or not rules_data:
        raise _fail(source, "rules", "must be a non-empty list of rule objects")
    rules = []
    seen = set()
    for i, r in enumerate(rules_data):
        where = f"rules[{i}]"
        if not isinstance(r, dict):
            raise _fail(source, where, "must be an object")
        unknown = set(r) - _RULE_KEYS
        if unknown:
            raise _fail(source, where, f"unknown key {sorted(unknown)[0]!r}")
        name = r.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(source, where + ".name", "must be a non-empty string")
        if name in seen:
            raise _fail(source, where + ".name", f"duplicate rule name {name!r}")
        seen.add(name)
        expect = r.get("expect")
        if expect not in EXPECTS:
            raise _fail(
                source, where + ".expect", f"must be one of {', '.join(EXPECTS)} (got {expect!r})"
            )
        stderr = None
        if "stderr" in r:
            if not isinstance(r["stderr"], str):
                raise _fail(source, where + ".stderr", "must be a regular expression (a string)")
            (stderr,) = _patterns(source, where + ".stderr", r["stderr"])
        checks = r.get("checks", [])
        if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
            raise _fail(source, where + ".checks", "must be a list of check names")
        for c in checks:
            if c not in CHECKS:
                raise _fail(
                    source, where + ".checks", f"unknown check {c!r} (known: {', '.join(CHECKS)})"
                )
        note = r.get("note", "")
        if not isinstance(note, str):
            raise _fail(source, where + ".note", "must be a string")
        rules.append(
            Rule(
                name=name,
                expect=expect,
                match=_patterns(source, where + ".match", r.get("match", [])),
                unless=_patterns(source, where + ".unless", r.get("unless", [])),
                stderr=stderr,
                checks=tuple(checks),
                note=note,
            )
        )
    target = data.get("target", "")
    description = data.get("description", "")
    if not isinstance(target, str) or not isinstance(description, str):
        raise _fail(source, "top level", "\"target\" and \"description\" must be strings")
    return Expectations(source=source, rules=tuple(rules), target=target, description=description)


def _loads(raw: str, source: str) -> Expectations:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ExpectationsError(
            f"{source}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}"
        ) from None
    return parse_expectations(data, source)


def load_expectations(path: str) -> Expectations:
    """Read and validate a user's expectations file."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = f.read()
    except OSError as e:
        raise ExpectationsError(f"{path}: cannot read expectations: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ExpectationsError(f"{path}: not UTF-8 text: {e.reason}") from None
    return _loads(raw, path)


_BUILTIN_CACHE: dict[str, Expectations] = {}


def builtin_expectations(name: str) -> Expectations | None:
    """The expectations shipped for target ``name``, or None if there are none."""
    if name in _BUILTIN_CACHE:
        return _BUILTIN_CACHE[name]
    res = resources.files("harness.targets").joinpath("expectations_data").joinpath(f"{name}.json")
    if not res.is_file():
        return None
    exp = _loads(res.read_text(encoding="utf-8"), f"builtin:{name}")
    _BUILTIN_CACHE[name] = exp
    return exp
