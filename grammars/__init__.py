"""The PCFGs loom-fuzz expands (fuzzingbook's format, plain dicts), one file per profile,
and the registry the generic core reads them through, by name.

The core (``harness.core``, ``harness.commands``, ``harness.triage``,
``harness.fuzzing``, ``harness.run``) never imports a grammar module by its
path and knows no profile, contract or rendering by name: it asks this
registry.  Each profile module declares, as module-level data, its ``PROFILE``
(name), ``CONTRACT`` (what its programs promise), ``GRAMMAR``, ``START``,
``RENDERINGS`` (other terminal texts, named by the grammar) and optionally
``MAX_DEPTH``; :data:`CONTRACT_CHECKERS` attaches to a contract the checker
that holds its programs to it.
"""

from __future__ import annotations

#: Profile name -> module of this package (imported, so bundles carry them).
PROFILES: dict[str, str] = {
    "conventions": "grammars.program_shape",
    "wide": "grammars.wide",
    "edge": "grammars.edge",
    "break": "grammars.breaks",
    "widths": "grammars.widths",
}

#: The profile of a command line that names no grammar.
DEFAULT_PROFILE = "conventions"

#: Contract -> the checker of its programs, ``"module:function"`` taking a program's
#: text (the grammar's canonical rendering) and returning its violations (an empty
#: list: it holds).  A contract not listed here (and a grammar without one) has no
#: checker: nothing but the grammar itself says what its programs are.
CONTRACT_CHECKERS: dict[str, str] = {"P1-P24": "harness.checker:check_text",
                                     "widths": "harness.checker:check_text"}

#: Contract -> the preconditions its programs leave on purpose (the profile's ``LEAVES``
#: says why); its checker's violations of these are not violations of the contract, and
#: every other precondition holds.
CONTRACT_LEAVES: dict[str, tuple[str, ...]] = {"widths": ("P22", "P23")}

#: What a contract's programs are said to keep, in reports (``none`` when nothing breaks).
CONTRACT_HOLDS: dict[str, str] = {"P1-P24": "P1-P24 hold", "widths": "P1-P24 but P22, P23 hold"}
