"""The wire protocol between the harness and a persistent driver (native/): its
magic words, frames and the one error that says a driver cannot start or broke it.

native/README.md has the full text; integers are unsigned 32-bit little-endian:

* driver -> harness once, when it is ready: ``LFD1`` (with ``--fork-server``:
  ``LFZ1``, then ``LFC1`` + pid for each fresh worker, and ``LFX1`` + wait
  status when a worker ends);
* harness -> driver per program: length, bytes (the length ``RETIRE`` retires
  a fork server's worker);
* driver -> harness per program: ``LFR1``, sequence number (1 for the first
  program since the driver started), status (0 or 1: the exit status
  ``mlir-opt`` would have had), diagnostics (length, bytes: what ``mlir-opt``
  prints on stderr), output module (length, bytes; empty unless the driver
  runs with ``--emit-output``);
* EOF on its stdin: the driver exits.  A crash is not answered: the driver
  dies, with LLVM's stack dump on its stderr.
"""

from __future__ import annotations

import struct

from harness.targets.target import TargetNotFound

__all__ = ["ENDED", "HELLO", "RESULT", "RESULT_REST", "RETIRE", "U32", "WORKER", "ZYGOTE", "DriverError"]

HELLO = b"LFD1"
RESULT = b"LFR1"
ZYGOTE = b"LFZ1"  # --fork-server: the initialised process is ready to fork workers
WORKER = b"LFC1"  # + pid: a fresh worker is ready
ENDED = b"LFX1"  # + wait status: the worker ended
RETIRE = 0xFFFFFFFF  # a program length that retires the worker
U32 = struct.Struct("<I")
RESULT_REST = struct.Struct("<III")  # after the magic: sequence, status, diagnostics length


class DriverError(TargetNotFound):
    """The driver cannot be started or broke the protocol; one line for the user."""
