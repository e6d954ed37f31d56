"""What the triage database keeps of a program: its tree and the contract it breaks.

Shared by the triage of every oracle (crash: :mod:`harness.triage.pipeline`;
wrong code and divergences: :mod:`harness.triage.oracle_runs`).
"""

from __future__ import annotations

from harness.contract import contract_checker, contract_of, describe_grammar
from harness.core.codec import encode
from harness.core.compiled import CompiledGrammar, Node
from harness.core.tree import decisions, describe

__all__ = ["contract_fields", "tree_fields"]


def tree_fields(grammar: CompiledGrammar, program: Node | None) -> dict:
    """What the database keeps of a program's tree (all None for text): its summary,
    its encoding, and (column ``sites``) the number of choices it makes."""
    if program is None:
        return {"tree": None, "data": None, "sites": None}
    return {"tree": describe(grammar, program), "data": encode(program, grammar),
            "sites": sum(1 for _ in decisions(grammar, program))}


def contract_fields(grammar: CompiledGrammar, program: Node | None, text: str) -> dict:
    """The profile an input came from and the contract it breaks (harness.contract):
    for a tree, what its grammar says (none, edge: ..., P<n>); for text outside the
    grammar, what the checker of its contract finds (none, or the violated rules;
    unknown when the contract has no checker)."""
    profile = describe_grammar(grammar)["profile"]
    if program is not None:
        return {"profile": profile, "contract": contract_of(grammar, program)}
    checker = contract_checker(grammar)
    if checker is None:
        return {"profile": profile, "contract": "unknown"}
    broken = sorted({v.rule for v in checker(text)}, key=lambda rule: int(rule[1:]))
    return {"profile": profile, "contract": ", ".join(broken) if broken else "none"}
