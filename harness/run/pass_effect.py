"""What each pass of a pipeline does to the programs: how often it changes them, and how.

For a sample of a campaign's programs, the target's pipeline runs one pass at a
time through the target itself (the same binary and arguments, the same runner
interface, :mod:`harness.run.runners`), each pass reading what the one before
printed: first the pipeline ``builtin.module()`` (parse and print, the baseline),
then every step of :func:`pipeline_steps`.  Every step prints with
``--mlir-print-debuginfo --mlir-print-local-scope``, so each operation carries the
location it was parsed at through the passes that keep it
(:mod:`harness.run.op_count` reads them).

Per pass and program (:func:`compare`, before and after the pass):

* **changed**: the printed module is another text (locations left out);
* **folds**: it folded at least one operation into a constant (below);
* **rewritten**: some operation other than a constant was folded, replaced, removed
  or added (a pass that only rematerializes, merges or moves constants, as ``sccp``
  does with every constant it sees, changes the text but rewrites nothing);
* an operation before the pass that is still there after it (the same name and
  location) is **kept**; every other one left, and is counted by its name as
* **folded**: now a constant (the same location, a constant's name), or, where it
  is gone, an operation that used it (still there) now reads a constant instead
  (at the same operand, or, where a commutative user's operands were swapped, it
  has more constant operands than before);
* **replaced**: gone, and an operation that used it now reads another value (CSE,
  a constant merged into an equal one, ``addi %x, 0`` -> ``%x``), or the same
  location is now another operation (a rewrite pattern);
* **removed**: gone, and nothing that used it is left (dead code, or folded away
  together with all its users);
* **added**: an operation after the pass that is not a kept one (a new constant, a
  rewritten operation).

So per name ``after = before - folded - replaced - removed + added``.  Functions
named in :attr:`PassEffectSettings.skip` (an exec module's ``main``: the harness's
driver, whose calls and prints the passes also fold) are left out of every count;
then "changed" compares the measured operations' lines instead of the whole text.  A program
the pass fails on (any outcome but ``accepted``) is counted as **failed** and
measured no further.  Before any program each step runs once on an empty module: a
step the target refuses (a pass it does not register) is one line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from harness.brackets import split_top_level
from harness.targets.identity import pipeline_passes
from harness.run.op_count import PrintedModule, read_module, strip_locations
from harness.run.outcome import Outcome, OutcomeKind, Verdict
from harness.run.process import run_program
from harness.run.runners import BatchRunner, ProcessRunner, Program, Runner
from harness.targets.target import Target

__all__ = ["PRINT_FLAGS", "KINDS", "PassEffect", "PassEffectError", "PassEffectSettings", "PassTally",
           "ProgramEffect", "compare", "is_constant", "measure", "pipeline_steps", "sampled", "step_target",
           "target_steps"]

#: How every step prints: each operation with its location, inline.
PRINT_FLAGS = ("--mlir-print-debuginfo", "--mlir-print-local-scope")
#: What became of an operation, in the table's order.
KINDS = ("folded", "replaced", "removed", "added")


class PassEffectError(ValueError):
    """The target's passes cannot be measured one by one (one line for the user)."""


@dataclass(frozen=True)
class PassEffectSettings:
    """``--pass-effect``: the share of programs measured (0: none), and how they run."""

    share: float = 0.0
    runner: str = "batch"  # process | batch (the steps need each program's printed output)
    jobs: int = 1
    batch_size: int | None = None
    #: functions not measured: an exec module's ``main`` (the harness's driver, not the program)
    skip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1:
            raise PassEffectError(f"--pass-effect is a share from 0 to 1, not {self.share}")
        if self.runner not in ("process", "batch"):
            raise PassEffectError(f"--pass-effect runs its steps with --runner process or batch, not {self.runner}")


def sampled(text: str, share: float) -> bool:
    """Whether the program is one of the ``share`` measured (a function of its text)."""
    if share <= 0:
        return False
    digest = hashlib.blake2b(text.encode(), digest_size=8, person=b"pass-effect").digest()
    return int.from_bytes(digest, "big") / 2 ** 64 < share


# ------------------------------------------------------------------ the steps


def _steps(element: str) -> list[str]:
    """One pipeline element as steps of one pass each: ``func.func(cse,sccp)`` ->
    ``[func.func(cse), func.func(sccp)]``; a pass with options stays whole."""
    match = re.match(r"^([\w.-]+)\((.*)\)$", element, re.S)
    if match is None or "{" in element.split("(", 1)[0]:
        return [element]
    anchor, inner = match.groups()
    return [f"{anchor}({step})" for part in split_top_level(inner) for step in _steps(part)]


def pipeline_steps(pipeline: str) -> tuple[str, ...]:
    """The steps of a textual pipeline, one pass each, as elements of ``builtin.module(...)``:
    ``builtin.module(canonicalize,func.func(cse))`` -> ``(canonicalize, func.func(cse))``."""
    text = pipeline.strip()
    match = re.match(r"^builtin\.module\((.*)\)$", text, re.S)
    if match:
        text = match.group(1)
    steps = tuple(step for part in split_top_level(text) for step in _steps(part))
    if not steps:
        raise PassEffectError(f"the pipeline {pipeline!r} names no pass")
    return steps


def target_steps(target: Target) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the target's arguments that are not its passes, its steps as pipeline elements).
    A ``--pass-pipeline=`` gives its steps; without one, the flags the build registers as
    passes (``--canonicalize --cse``: its :class:`~harness.targets.identity.BuildIdentity`)."""
    args = target.argv[1:]
    pipelines = [a for a in args if a.startswith("--pass-pipeline=")]
    if pipelines:
        return (tuple(a for a in args if not a.startswith("--pass-pipeline=")),
                tuple(s for p in pipelines for s in pipeline_steps(p.split("=", 1)[1])))
    if target.build is None or not target.build.passes:
        raise PassEffectError(f"--pass-effect: {target.argv[0]} names its passes neither in a --pass-pipeline "
                              "nor as flags its build registers")
    flags = [a for a in args if a.startswith("-") and pipeline_passes(a) and pipeline_passes(a)[0] in
             target.build.passes and not _tool_option(pipeline_passes(a)[0])]
    if not flags:
        raise PassEffectError(f"--pass-effect: the target {target.command} runs no pass")
    steps = []
    for flag in flags:
        name, _, options = flag.lstrip("-").partition("=")
        steps.append(f"{name}{{{options}}}" if options else name)
    return tuple(a for a in args if a not in flags), tuple(steps)


#: mlir-opt's own options (its --help lists them beside the passes)
_TOOL_OPTIONS = frozenset({"allow-unregistered-dialect", "split-input-file", "verify-diagnostics", "verify-each",
                           "emit-bytecode", "no-implicit-module", "show-dialects", "disable-i2p-p2i-opt",
                           "load-dialect-plugin", "load-pass-plugin", "dump-pass-pipeline", "log-actions-to",
                           "profile-actions-to", "run-reproducer", "show-pass-names", "pass-pipeline"})


def _tool_option(name: str) -> bool:
    return name in _TOOL_OPTIONS or name == "o" or name.startswith(("mlir-", "debug"))


def step_target(target: Target, others: Sequence[str], step: str) -> Target:
    """The target running only ``step`` (``""``: no pass, the baseline) and printing locations."""
    return dataclasses.replace(target, argv=(target.argv[0], *others, *PRINT_FLAGS,
                                             f"--pass-pipeline=builtin.module({step})"))


# ------------------------------------------------------------------ one pass, one program


@dataclass
class ProgramEffect:
    """What one pass did to one program."""

    changed: bool
    before: Counter
    after: Counter
    folded: Counter = field(default_factory=Counter)
    replaced: Counter = field(default_factory=Counter)
    removed: Counter = field(default_factory=Counter)
    added: Counter = field(default_factory=Counter)

    @property
    def rewritten(self) -> bool:
        """Some operation other than a constant was folded, replaced, removed or added."""
        return any(not is_constant(name) for kind in KINDS for name in getattr(self, kind))


def is_constant(name: str) -> bool:
    """A constant's operation name (``arith.constant``, ``llvm.mlir.constant``)."""
    return name.rpartition(".")[2].lower() == "constant"


def _keyed(module: PrintedModule) -> tuple[list, dict]:
    """Each operation's key (name, location, its rank among the operations with both) and
    key -> index, for the operations with a location of their own (not ``unknown``)."""
    seen: Counter = Counter()
    keys = []
    for op in module.ops:
        keys.append((op.name, op.loc, seen[(op.name, op.loc)]))
        seen[(op.name, op.loc)] += 1
    return keys, {key: k for k, key in enumerate(keys) if key[1] and key[1] != "unknown"}


def _unique(module: PrintedModule) -> dict[str, int]:
    """location -> the index of the one operation with it (locations printed once only)."""
    seen: Counter = Counter(op.loc for op in module.ops if op.loc and op.loc != "unknown")
    return {op.loc: k for k, op in enumerate(module.ops) if seen[op.loc] == 1}


def compare(before_text: str, after_text: str, skip: tuple[str, ...] = ()) -> ProgramEffect:
    """What a pass did, from the module it read and the one it printed (see the module doc),
    leaving out the functions named in ``skip`` (an exec module's ``main``)."""
    a, b = read_module(before_text).without(skip), read_module(after_text).without(skip)
    if skip:
        changed = [op.text for op in a.ops] != [op.text for op in b.ops]
    else:
        changed = strip_locations(before_text) != strip_locations(after_text)
    effect = ProgramEffect(changed, a.counts(), b.counts())
    # kept: the same (name, location) on both sides, as many times as both have it
    pool = Counter((op.name, op.loc) for op in b.ops)
    kept_a, kept_b = set(), set()
    for k, op in enumerate(a.ops):
        if pool[(op.name, op.loc)] > 0:
            pool[(op.name, op.loc)] -= 1
            kept_a.add(k)
    left = Counter((a.ops[k].name, a.ops[k].loc) for k in kept_a)
    for k, op in enumerate(b.ops):
        if left[(op.name, op.loc)] > 0:
            left[(op.name, op.loc)] -= 1
            kept_b.add(k)
        else:
            effect.added[op.name] += 1
    b_at, a_at = _unique(b), _unique(a)
    a_keys, _ = _keyed(a)
    _, b_keyed = _keyed(b)
    b_def = b.definers()
    users: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for k, op in enumerate(a.ops):
        for position, value in enumerate(op.operands):
            users.setdefault((op.scope, value), []).append((k, position))

    def constant_operands(module: PrintedModule, defs: dict, k: int) -> int:
        op = module.ops[k]
        return sum(1 for v in op.operands
                   if (op.scope, v) in defs and module.ops[defs[(op.scope, v)]].constant)

    a_def = a.definers()
    for k, op in enumerate(a.ops):
        if k in kept_a:
            continue
        there = b_at.get(op.loc) if op.loc in a_at else None
        if there is not None:  # the same location, another operation
            kind = "folded" if b.ops[there].constant and not op.constant else "replaced"
        else:
            kind = "removed"
            for user, position in (u for value in op.results for u in users.get((op.scope, value), ())):
                now = b_keyed.get(a_keys[user])
                if now is None:
                    continue
                new = b.ops[now]
                at = new.operands[position] if position < len(new.operands) else None
                reads_constant = (at is not None and (new.scope, at) in b_def
                                  and b.ops[b_def[(new.scope, at)]].constant)
                # a commutative user's operands swapped (canonicalize puts constants last)
                more = constant_operands(b, b_def, now) > constant_operands(a, a_def, user)
                kind = "folded" if not op.constant and (reads_constant or more) else "replaced"
                if kind == "folded":
                    break
        getattr(effect, kind)[op.name] += 1
    return effect


# ------------------------------------------------------------------ a pipeline, many programs


@dataclass
class PassTally:
    """One pass over the programs measured."""

    step: str
    programs: int = 0  # programs it read
    changed: int = 0
    rewritten: int = 0
    folding: int = 0  # programs in which it folded an operation into a constant
    failed: int = 0  # programs it did not accept (measured no further)
    before: Counter = field(default_factory=Counter)
    after: Counter = field(default_factory=Counter)
    folded: Counter = field(default_factory=Counter)
    replaced: Counter = field(default_factory=Counter)
    removed: Counter = field(default_factory=Counter)
    added: Counter = field(default_factory=Counter)

    def add(self, effect: ProgramEffect) -> None:
        self.programs += 1
        self.changed += effect.changed
        self.rewritten += effect.rewritten
        self.folding += bool(effect.folded)
        for name in ("before", "after", *KINDS):
            getattr(self, name).update(getattr(effect, name))

    @property
    def share(self) -> float:
        """The share of the programs it read whose text it changed."""
        return self.changed / self.programs if self.programs else 0.0

    @property
    def folding_share(self) -> float:
        """The share of the programs it read in which it folded an operation into a constant."""
        return self.folding / self.programs if self.programs else 0.0

    @property
    def rewritten_share(self) -> float:
        """The share of the programs it read in which it rewrote an operation other than a constant."""
        return self.rewritten / self.programs if self.programs else 0.0

    def to_json(self) -> dict:
        return {"pass": self.step, "programs": self.programs, "changed": self.changed,
                "rewritten": self.rewritten, "folding": self.folding, "failed": self.failed,
                "share_changed": round(self.share, 6), "share_rewritten": round(self.rewritten_share, 6),
                "share_folding": round(self.folding_share, 6), "ops_before": sum(self.before.values()),
                "ops_after": sum(self.after.values()),
                **{kind: dict(sorted(getattr(self, kind).items())) for kind in KINDS}}


@dataclass
class PassEffect:
    """Every pass of the pipeline over the programs measured."""

    target: str  # the build, one line
    steps: tuple[str, ...]
    programs: int = 0  # programs sampled
    unreadable: int = 0  # programs the target did not print without passes (not measured)
    passes: list[PassTally] = field(default_factory=list)
    skip: tuple[str, ...] = ()  # functions not measured

    def to_json(self) -> dict:
        return {"target": self.target, "programs": self.programs, "unreadable": self.unreadable,
                "functions_not_measured": list(self.skip),
                "passes": [p.to_json() for p in self.passes]}

    def table(self) -> list[str]:
        """The per-pass table: programs, changed, operations before/after and what became of them."""
        head = (f"  {'pass':<34} {'programs':>8} {'changed':>8} {'rewritten':>9} {'folds':>7} {'ops in':>8} "
                f"{'ops out':>8} "
                f"{'folded':>7} {'replaced':>8} {'removed':>8} {'added':>7} {'failed':>6}")
        lines = [head]
        for p in self.passes:
            lines.append(f"  {p.step[:34]:<34} {p.programs:>8,} {100 * p.share:>7.1f}% "
                         f"{100 * p.rewritten_share:>8.1f}% "
                         f"{100 * p.folding_share:>6.1f}% "
                         f"{sum(p.before.values()):>8,} {sum(p.after.values()):>8,} "
                         f"{sum(p.folded.values()):>7,} {sum(p.replaced.values()):>8,} "
                         f"{sum(p.removed.values()):>8,} {sum(p.added.values()):>7,} {p.failed:>6,}")
        return lines

    def top_operations(self, shown: int = 4) -> list[str]:
        """Per pass, the operations it changed most (folded + replaced + removed)."""
        lines = []
        for p in self.passes:
            gone = p.folded + p.replaced + p.removed
            if not gone and not p.added:
                continue
            parts = [f"{name} {n} (" + ", ".join(f"{kind} {getattr(p, kind)[name]}" for kind in KINDS[:3]
                                                  if getattr(p, kind)[name]) + ")"
                     for name, n in gone.most_common(shown)]
            if p.added:
                parts.append("added " + ", ".join(f"{name} {n}" for name, n in p.added.most_common(2)))
            lines.append(f"  {p.step}: " + "; ".join(parts))
        return lines

    def describe(self, heading: str) -> str:
        measured = self.programs - self.unreadable
        skipped = "; " + ", ".join(f"@{name}" for name in self.skip) + " not measured" if self.skip else ""
        lines = [f"{heading}: {measured:,} programs measured, each pass alone in order through {self.target}"
                 + (f" ({self.unreadable:,} the target did not read)" if self.unreadable else "") + skipped]
        lines += self.table()
        top = self.top_operations()
        if top:
            lines.append("  operations changed most (folded, replaced, removed; added):")
            lines += top
        return "\n".join(lines)


def _no_finding(target: Target, text: str, outcome: Outcome) -> Verdict:
    """The steps judge nothing: a failed step is counted, not a finding (the campaign judges)."""
    return Verdict(outcome, "either", False, "")


def _runner(target: Target, settings: PassEffectSettings) -> Runner:
    if settings.runner == "process" or settings.batch_size == 1:
        return ProcessRunner(target, judge=_no_finding, jobs=settings.jobs)
    return BatchRunner(target, judge=_no_finding, jobs=settings.jobs, batch_size=settings.batch_size)


def _run_step(target: Target, texts: Sequence[str], settings: PassEffectSettings) -> list[str | None]:
    """Each text's printed output after the step, None where the step did not accept it."""
    with _runner(target, settings) as runner:
        results = runner.run_all([Program(k, text) for k, text in enumerate(texts)])
    return [r.outcome.stdout if r.outcome.kind is OutcomeKind.ACCEPTED else None for r in results]


def _probe(target: Target, step: str) -> None:
    """Raise :class:`PassEffectError` (one line) when the step's target refuses a trivial module."""
    outcome = run_program(target, "module {\n}\n")
    if outcome.kind is not OutcomeKind.ACCEPTED:
        why = next((line.strip() for line in outcome.stderr.splitlines() if line.strip()), outcome.reason)
        raise PassEffectError(f"--pass-effect: {target.command} ({step or 'no pass'}) refuses a trivial "
                              f"module: {why[:200]}")


def measure(target: Target, texts: Iterable[str], settings: PassEffectSettings = PassEffectSettings()) -> PassEffect:
    """Run ``texts`` through the target's passes one at a time (module doc).  Raises
    :class:`PassEffectError` (one line) when the target's passes cannot be told apart."""
    others, steps = target_steps(target)
    for step in ("", *steps):
        _probe(step_target(target, others, step), step)
    texts = list(texts)
    effect = PassEffect(target.describe(), steps, programs=len(texts), skip=settings.skip)
    current = [t for t in _run_step(step_target(target, others, ""), texts, settings) if t is not None]
    effect.unreadable = len(texts) - len(current)
    for step in steps:
        tally = PassTally(step)
        outputs = _run_step(step_target(target, others, step), current, settings) if current else []
        kept = []
        for before, after in zip(current, outputs):
            if after is None:
                tally.failed += 1
                continue
            tally.add(compare(before, after, settings.skip))
            kept.append(after)
        effect.passes.append(tally)
        current = kept
    return effect
