"""The values a program prints when judged with constant twins, from the reference interpreter.

The interpreter (harness/execute/interpret.py) reads the canonical program and knows
nothing of twins; a twin prints its original's line for its row under its own number
(harness/execute/twins.py), which tests/test_twins.py checks against real execution."""

from __future__ import annotations

from harness.execute.interpret import interpret_program
from harness.execute.exec_layout import layout_of
from harness.execute.exec_rendering import exec_module
from harness.execute.twins import TwinPlan, expected_output, with_twins


def interpreted(program: str, twins: str | None = None) -> str:
    """The interpreter's output of ``program``, with the twins of the plan text ``twins``."""
    output = interpret_program(program)
    if not twins:
        return output
    return expected_output(layout_of(with_twins(exec_module(program), TwinPlan.parse(twins))), output)
