"""The wheels that ship LLVM's development head (:mod:`harness.targets.head_bindings`), and
which of them a tool, a driver or a target name means."""

from __future__ import annotations

import os

from harness.targets.head_bindings import HeadBindings
from harness.targets.head_iree import IREE
from harness.targets.head_torch_mlir import EVERY_PASS

__all__ = ["ALIASES", "EVERY_PASS", "HEADS", "IREE", "head_of_driver", "head_of_tool"]

#: Every head build, the one with every pass first (the one ``head`` names).
HEADS: tuple[HeadBindings, ...] = (EVERY_PASS, IREE)
#: Short names of a head build for ``--target``.
ALIASES = {"head": EVERY_PASS.tool}


def head_of_driver(driver: str) -> HeadBindings | None:
    """The head whose persistent driver ``driver`` (a path or a name) is, or None."""
    name = os.path.basename(driver)
    return next((head for head in HEADS if head.driver == name), None)


def head_of_tool(name: str) -> HeadBindings | None:
    """The head a tool's name (or alias, or path to the tool) means, or None."""
    name = ALIASES.get(name, os.path.basename(name))
    return next((head for head in HEADS if head.tool == name), None)
