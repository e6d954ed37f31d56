"""Which contract a program keeps or breaks, and what that means for judging it.

A grammar file says what its programs promise (``CONTRACT``): ``P1-P24``
(the default profile: every precondition holds), ``edge`` (valid MLIR that
steps outside P1-P24 where loom's pass trusts its input, ``grammars/edge.py``)
or ``break-one`` (exactly one precondition broken, ``grammars/breaks.py``,
whose first decision is labelled with that precondition).  This module turns
that into:

* :func:`load_grammar`: ``--grammar``/``--profile`` as the core loads them,
  plus ``break:P<n>`` (``--profile break --break P<n>``): the break grammar of
  one precondition;
* :func:`contract_of`: for one tree, ``none`` (in contract), ``edge: ...``
  (the edge constructs it uses) or ``P<n>``;
* :func:`left_preconditions`: what a contract that leaves some preconditions on
  purpose leaves (``grammars.CONTRACT_LEAVES``: the ``widths`` profile leaves P22
  and P23); its checker reports the others only;
* :func:`robust_expectations`: off the contract, a pass owes no particular
  result, only a clean one (``harness/targets/expectations_data/robustness.json``:
  accepted, or rejected with an ``error:`` diagnostic; any crash, timeout or
  oom is a finding, and so is a rejection without a diagnostic).
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from typing import Callable

from harness.core.compiled import CompiledGrammar, GrammarError
from harness.core.grammar import compile_grammar, load
from harness.core.tree import Node

__all__ = ["BODY_PRECONDITIONS", "IN_CONTRACT", "break_precondition", "contract_checker", "contract_of",
           "describe_grammar", "exec_renderable", "fuzz_script", "in_contract", "left_preconditions",
           "load_grammar", "program_suffix", "robust_expectations", "with_robust_expectations"]

#: A contract's checker: a program's text -> its violations (objects with a ``rule``,
#: e.g. ``P7``, and ``format(file)``); an empty list when the program keeps the contract.
Checker = Callable[[str], list]

IN_CONTRACT = "P1-P24"
#: Preconditions about what a region body computes, not about the program's structure: a
#: contract leaving only these keeps threads, sites, regions and their operands as P1-P24
#: say (so the exec rendering, which copies bodies verbatim, applies).
BODY_PRECONDITIONS = frozenset({"P22", "P23"})
BREAK_PREFIX = "break:"
_PRECONDITION = re.compile(r"P([1-9]|1\d|2[0-4])")


#: Program files' suffix for a grammar that declares none: loom's grammars are MLIR.
DEFAULT_SUFFIX = ".mlir"


def program_suffix(grammar: CompiledGrammar | None) -> str:
    """The suffix of the grammar's program files (generated programs, findings,
    triage reports): its ``SUFFIX``, else ``.mlir``."""
    return (grammar.meta.get("SUFFIX") if grammar is not None else None) or DEFAULT_SUFFIX


def fuzz_script(grammar: CompiledGrammar | None) -> str:
    """The fuzz target script (in ``fuzz_targets/``) of the grammar's campaigns: the
    documented loom entry point ``loom_opt_fuzzer.py`` for MLIR programs (the one
    ClusterFuzzLite builds), ``program_fuzzer.py`` for any other language; both run
    :mod:`harness.fuzzing.program_target`."""
    return "loom_opt_fuzzer.py" if program_suffix(grammar) == DEFAULT_SUFFIX else "program_fuzzer.py"


def in_contract(grammar: CompiledGrammar) -> bool:
    """Do the grammar's programs promise P1-P24 (the checker's contract)?"""
    return grammar.meta.get("CONTRACT") == IN_CONTRACT


def left_preconditions(grammar: CompiledGrammar | None) -> tuple[str, ...]:
    """The preconditions the grammar's contract leaves on purpose (``grammars.CONTRACT_LEAVES``);
    () for every other contract."""
    import grammars

    contract = grammar.meta.get("CONTRACT") if grammar is not None else None
    return grammars.CONTRACT_LEAVES.get(contract, ()) if contract else ()


def exec_renderable(grammar: CompiledGrammar) -> bool:
    """Does the grammar keep the program structure the exec rendering transforms: P1-P24,
    or a contract leaving only preconditions on region bodies (:data:`BODY_PRECONDITIONS`)?"""
    left = left_preconditions(grammar)
    return in_contract(grammar) or bool(left) and set(left) <= BODY_PRECONDITIONS


def contract_checker(grammar: CompiledGrammar | None) -> Checker | None:
    """The checker the ``grammars`` registry attaches to the grammar's contract
    (``grammars.CONTRACT_CHECKERS``), or None: a grammar without a contract, or whose
    contract has no checker, is held to nothing but itself.  A contract that leaves
    preconditions on purpose gets the checker without them."""
    import grammars

    contract = grammar.meta.get("CONTRACT") if grammar is not None else None
    path = grammars.CONTRACT_CHECKERS.get(contract) if contract else None
    return _checker_at(path, left_preconditions(grammar)) if path else None


@lru_cache(maxsize=None)
def _checker_at(path: str, leaving: tuple[str, ...] = ()) -> Checker:
    module, _, name = path.partition(":")
    check = getattr(importlib.import_module(module), name)
    if not leaving:
        return check
    return lambda text: [v for v in check(text) if v.rule not in leaving]


@lru_cache(maxsize=None)
def _break_grammar(precondition: str) -> CompiledGrammar:
    import grammars.breaks as breaks

    try:
        grammar, renderings = breaks.grammar_for(precondition)
    except ValueError as error:
        raise GrammarError(f"--break {precondition}: {error}") from None
    return compile_grammar(grammar, breaks.START, renderings, source=f"{breaks.__file__}[{precondition}]",
                           meta={"CONTRACT": breaks.CONTRACT, "PROFILE": breaks.PROFILE,
                                 "BREAKS": precondition})


def load_grammar(grammar_file: str | None = None, profile: str | None = None) -> CompiledGrammar:
    """The core's ``load``, plus ``profile="break:P<n>"``: programs breaking P<n> alone."""
    if not grammar_file and profile and profile.startswith(BREAK_PREFIX):
        precondition = profile[len(BREAK_PREFIX):].upper()
        if not _PRECONDITION.fullmatch(precondition):
            raise GrammarError(f"--break takes P1 ... P24, not {precondition!r}")
        return _break_grammar(precondition)
    return load(grammar_file, profile)


def break_precondition(grammar: CompiledGrammar, tree: Node) -> str | None:
    """The precondition a break program breaks: the label of its first choice (the
    ``break`` profile) or the one the grammar was made for (``--break P<n>``)."""
    if grammar.meta.get("CONTRACT") != "break-one":
        return None
    if "BREAKS" in grammar.meta:
        return grammar.meta["BREAKS"]
    label = grammar.label(tree[0], tree[1])
    return label if _PRECONDITION.fullmatch(label) else None


def _edge_constructs(grammar: CompiledGrammar, tree: Node) -> list[str]:
    """The labels of the edge alternatives the tree takes (``grammars.edge.NORMAL`` says
    which alternatives are the default profile's own)."""
    from grammars.edge import NORMAL

    found: list[str] = []
    stack = [tree]
    while stack:
        n, a, kids = stack.pop()
        normal = NORMAL.get(grammar.names[n])
        if normal is not None:
            label = grammar.label(n, a)
            if label not in normal and label not in found:
                found.append(label)
        stack.extend(reversed(kids))
    return found


def contract_of(grammar: CompiledGrammar | None, tree: Node | None) -> str:
    """``none`` (the contract holds), ``P<n>`` (the broken precondition), ``edge: a, b``
    (the edge constructs used), ``edge`` when none is named, or ``unknown``."""
    if grammar is None or tree is None:
        return "unknown"
    contract = grammar.meta.get("CONTRACT")
    if contract == IN_CONTRACT:
        return "none"
    if contract == "break-one":
        return break_precondition(grammar, tree) or "unknown"
    if contract == "edge":
        constructs = _edge_constructs(grammar, tree)
        return "edge: " + ", ".join(constructs) if constructs else "edge"
    if left_preconditions(grammar):
        return _left_by(grammar, tree)
    return "unknown"


def _left_by(grammar: CompiledGrammar, tree: Node) -> str:
    """``leaves P22, P23``: the left preconditions this program leaves (its canonical text
    checked), ``none`` when it keeps them all."""
    import grammars
    from harness.core.render import render

    path = grammars.CONTRACT_CHECKERS.get(grammar.meta.get("CONTRACT"))
    left = left_preconditions(grammar)
    if path is None:
        return "leaves " + ", ".join(left)
    found = sorted({v.rule for v in _checker_at(path)(render(tree, grammar)) if v.rule in left},
                   key=lambda rule: int(rule[1:]))
    return "leaves " + ", ".join(found) if found else "none"


def describe_grammar(grammar: CompiledGrammar, tree: Node | None = None) -> dict[str, str]:
    """What a finding records of its grammar: ``profile`` and ``contract``."""
    profile = grammar.meta.get("PROFILE") or grammar.source
    if grammar.meta.get("BREAKS"):
        profile = f"{BREAK_PREFIX}{grammar.meta['BREAKS']}"
    return {"profile": profile, "contract": contract_of(grammar, tree)}


def robust_expectations():
    """The robustness oracle (``expectations_data/robustness.json``)."""
    from harness.targets.expectations import builtin_expectations

    return builtin_expectations("robustness")


def with_robust_expectations(target, grammar: CompiledGrammar, expectations_given: bool):
    """``target`` judged by the robustness oracle when the grammar leaves P1-P24 and the
    user gave no expectations of their own."""
    import dataclasses

    if expectations_given or in_contract(grammar) or grammar.meta.get("CONTRACT") is None:
        return target
    return dataclasses.replace(target, expectations=robust_expectations())
