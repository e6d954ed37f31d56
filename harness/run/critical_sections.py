"""Critical sections: work that must finish once started (writing a finding:
``crash-<sha1>`` with both sidecars, or nothing), so a forced exit waits for
the section to end.

This module imports only the standard library (fuzz targets import it at
start-up).
"""

from __future__ import annotations

import threading

__all__ = ["begin_forced_exit", "enter_critical"]

_critical = 0
_exiting = False
_gate = threading.Lock()  # orders critical sections against a forced exit (threads only)


def enter_critical() -> bool:
    """Enter a critical section that lasts until the process exits (a fuzz
    target writing a finding: libFuzzer writes ``crash-<sha1>`` and exits).
    False when a forced exit has begun: do not start the work."""
    global _critical
    with _gate:
        if _exiting:
            return False
        _critical += 1
        return True


def begin_forced_exit() -> bool:
    """Claim the right to end the process now; False while a critical section
    is open (the work in it ends the process or leaves it soon)."""
    global _exiting
    with _gate:
        if _critical:
            return False
        _exiting = True
        return True
