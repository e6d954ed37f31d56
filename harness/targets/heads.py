"""The wheels that ship LLVM's development head (:mod:`harness.targets.head_bindings`), and
which of them a tool, a driver or a target name means."""

from __future__ import annotations

import os

from harness.targets.head_bindings import HeadBindings
from harness.targets.head_iree import IREE
from harness.targets.head_torch_mlir import EVERY_PASS

__all__ = ["EVERY_PASS", "HEADS", "IREE", "head_of_driver", "head_of_tool"]

#: Every head build, the one with every pass first.  (No shorter name such as ``head``:
#: a name is also looked up on PATH, where ``head`` is coreutils'.)
HEADS: tuple[HeadBindings, ...] = (EVERY_PASS, IREE)


def head_of_driver(driver: str) -> HeadBindings | None:
    """The head whose persistent driver ``driver`` (a path or a name) is, or None."""
    name = os.path.basename(driver)
    return next((head for head in HEADS if head.driver == name), None)


def head_of_tool(name: str) -> HeadBindings | None:
    """The head a tool's name (or path to the tool) means, or None."""
    name = os.path.basename(name)
    return next((head for head in HEADS if head.tool == name), None)
