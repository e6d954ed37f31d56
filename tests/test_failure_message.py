"""The one recogniser of LLVM failure messages that runner and triage share."""

from __future__ import annotations

import pytest

from harness.run.failure_message import first_failure


@pytest.mark.parametrize(
    "stderr, type_, line, message",
    [
        ("tool: a.cpp:12: void f(): Assertion `x && \"y\"' failed.\nPLEASE submit a bug report\n",
         "assert", "Assertion `x && \"y\"' failed", 'x && "y"'),
        ("Assertion failed: (ptr != nullptr), function f, file a.cpp, line 3.\n",
         "assert", "Assertion failed: (ptr != nullptr), function f, file a.cpp, line 3.", "ptr != nullptr"),
        ("LLVM ERROR: iter_args in a conditional region are not supported\n",
         "llvm-error", "LLVM ERROR: iter_args in a conditional region are not supported",
         "iter_args in a conditional region are not supported"),
        ("unknown op kind\nUNREACHABLE executed at lib/X.cpp:40!\nStack dump:\n",
         "unreachable", "UNREACHABLE executed at lib/X.cpp:40!", "unknown op kind"),
        ("bad state UNREACHABLE executed at lib/X.cpp:41!\n",
         "unreachable", "UNREACHABLE executed at lib/X.cpp:41!", "bad state"),
        ("==42==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020\n",
         "sanitizer", "AddressSanitizer: heap-use-after-free on address 0x6020",
         "AddressSanitizer: heap-use-after-free"),
        ("a.cpp:3:7: runtime error: signed integer overflow\n",
         "sanitizer", "runtime error: signed integer overflow",
         "UndefinedBehaviorSanitizer: signed integer overflow"),
    ],
)
def test_each_kind(stderr, type_, line, message):
    failure = first_failure(stderr)
    assert (failure.type, failure.line, failure.message) == (type_, line, message)


def test_priority_and_absence():
    # An assertion that fires while reporting a fatal error is the bug.
    both = "LLVM ERROR: broken\ntool: a.cpp:1: f: Assertion `ok' failed.\n"
    assert first_failure(both).type == "assert"
    assert first_failure("<stdin>:3:1: error: unknown op\n") is None
    assert first_failure("") is None
