"""The persistent driver of LLVM's development head: the native driver's protocol
over the MLIR Python bindings of the ``iree-base-compiler`` wheel.

The wheel's ``iree-opt`` (LLVM 24.0.0git) and its bindings (``iree.compiler.ir``,
``iree.compiler.passmanager``) are the same build: both are ``libIREECompiler.so``
of one wheel.  A process per program costs about 50 ms (220 ms through the wheel's
Python launcher); parse + passes + print through the bindings costs about 3 ms.
So this driver stands for the wheel's ``iree-opt`` the way
``native/build/loomfuzz-mlir-driver`` stands for ``mlir-opt-22``: the same frames
(``LFD1``/``LFR1``; ``--fork-server``: ``LFZ1``/``LFC1``/``LFX1``, native/README.md),
the same flags for what it supports, and ``--version``/``--help`` answered by the
wheel's ``iree-opt`` itself, so :func:`harness.targets.identity.identify` sees the
build it stands for.

It knows the flags in :data:`FLAGS`; :func:`unsupported` names the first other
one, and the harness then runs the target itself instead (never a guess at what a
flag would have done).  Only the standard library and ``iree.compiler`` are
imported: it is a start-up path.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FLAGS", "HeadDriverOptions", "main", "parse_flags", "tool_beside_bindings", "unsupported"]

#: What this driver takes: mlir-opt's spelling, the native driver's own flags.
FLAGS = ("--pass-pipeline=", "--allow-unregistered-dialect", "--emit-output", "--fork-server")
_U32 = struct.Struct("<I")
_RETIRE = 0xFFFFFFFF
_WORKER_SAW_EOF = 75
_MAX_PROGRAM = 256 << 20
_LOCATION = re.compile(r'^loc\("-":(\d+):(\d+)\)$')


@dataclass
class HeadDriverOptions:
    """The driver's command line, read by :func:`parse_flags`."""

    pipeline: str = "builtin.module()"
    allow_unregistered: bool = False
    emit_output: bool = False
    fork_server: bool = False
    rest: list[str] = field(default_factory=list)  # flags this driver does not know


def parse_flags(argv: list[str]) -> HeadDriverOptions:
    """The options of ``argv`` (without the program name); unknown ones go to ``rest``."""
    options = HeadDriverOptions()
    for arg in argv:
        if arg.startswith("--pass-pipeline="):
            options.pipeline = arg.split("=", 1)[1]
        elif arg == "--allow-unregistered-dialect":
            options.allow_unregistered = True
        elif arg == "--emit-output":
            options.emit_output = True
        elif arg == "--fork-server":
            options.fork_server = True
        else:
            options.rest.append(arg)
    return options


def unsupported(argv: list[str]) -> str | None:
    """The first flag of a target's arguments this driver cannot honour, or None."""
    rest = parse_flags(list(argv)).rest
    return rest[0] if rest else None


def tool_beside_bindings() -> Path:
    """The wheel's own ``iree-opt`` binary: the tool built from the same library."""
    import iree.compiler

    return Path(iree.compiler.__file__).resolve().parent / "_mlir_libs" / "iree-opt"


# ------------------------------------------------------------------ frames


class _Protocol:
    """Private copies of fds 0 and 1; fd 1 then points at fd 2, so that anything a
    pass prints on stdout lands on stderr instead of in a frame."""

    def __init__(self) -> None:
        self.inp = os.dup(0)
        self.out = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        os.close(devnull)

    def read(self, n: int) -> bytes | None:
        chunks, left = [], n
        while left:
            chunk = os.read(self.inp, left)
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.out, view)
            except (BrokenPipeError, OSError):
                os._exit(0)  # the harness is gone
            view = view[written:]


def _follow_parent() -> None:
    """Die with the harness (as the native driver's followParent)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    expected = int(os.environ.get("LOOMFUZZ_PARENT_PID", "1") or 1)
    parent = os.getppid()
    if parent == 1 or (expected > 1 and parent != expected):
        os._exit(0)


def _serve_forks(protocol: _Protocol) -> None:
    """The zygote's loop: returns in each fresh worker, never in the zygote."""
    protocol.write(b"LFZ1")
    while True:
        child = os.fork()
        if child == 0:
            _follow_parent_of_worker()
            os.setpgid(0, 0)  # its own group: a timeout kills the worker only
            return
        _, status = os.waitpid(child, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _WORKER_SAW_EOF:
            os._exit(0)
        protocol.write(b"LFX1" + _U32.pack(status & 0xFFFFFFFF))


def _follow_parent_of_worker() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        os._exit(0)


# ------------------------------------------------------------ diagnostics


def _format(diagnostic, lines: list[str], out: list[str]) -> None:
    """One diagnostic as mlir-opt prints it (buffer ``<stdin>``, source line, caret)."""
    severity = str(diagnostic.severity).rsplit(".", 1)[-1].lower()
    kind = {"error": "error", "warning": "warning", "note": "note", "remark": "remark"}.get(severity, severity)
    match = _LOCATION.match(str(diagnostic.location))
    if match:
        line, column = int(match[1]), int(match[2])
        out.append(f"<stdin>:{line}:{column}: {kind}: {diagnostic.message}")
        if 0 < line <= len(lines):
            out.append(lines[line - 1])
            out.append(" " * max(column - 1, 0) + "^")
    else:
        out.append(f"{diagnostic.location}: {kind}: {diagnostic.message}")
    for note in diagnostic.notes:
        _format(note, lines, out)


def _diagnostics(error, text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    for diagnostic in getattr(error, "error_diagnostics", None) or []:
        _format(diagnostic, lines, out)
    if not out:
        out.append(f"<stdin>: error: {error}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ serving


def _serve(options: HeadDriverOptions, protocol: _Protocol) -> None:
    from iree.compiler import ir, passmanager

    context = ir.Context()
    context.allow_unregistered_dialects = options.allow_unregistered
    context.enable_multithreading(False)  # a fork-server worker must not inherit a pool
    try:
        pm = passmanager.PassManager.parse(options.pipeline, context)
    except Exception as error:  # noqa: BLE001 - MLIR's one exception type for every parse error
        sys.stderr.write(f"loomfuzz-head-driver: invalid pass pipeline: {error}\n")
        sys.exit(1)

    if options.fork_server:
        _serve_forks(protocol)
        protocol.write(b"LFC1" + _U32.pack(os.getpid()))
    else:
        protocol.write(b"LFD1")
    sequence = 0
    while True:
        header = protocol.read(4)
        if header is None:
            os._exit(_WORKER_SAW_EOF if options.fork_server else 0)
        (length,) = _U32.unpack(header)
        if options.fork_server and length == _RETIRE:
            os._exit(0)
        if length > _MAX_PROGRAM:
            sys.stderr.write(f"loomfuzz-head-driver: protocol error: a program of {length} bytes "
                             f"(limit {_MAX_PROGRAM})\n")
            sys.exit(2)
        data = protocol.read(length) if length else b""
        if data is None:
            os._exit(_WORKER_SAW_EOF if options.fork_server else 0)
        sequence += 1
        text = data.decode("utf-8", errors="replace")
        status, diagnostics, output = 1, "", ""
        try:
            module = ir.Module.parse(text, context)
            pm.run(module.operation)
            status = 0
            if options.emit_output:
                output = str(module) + "\n"
            del module
        except ir.MLIRError as error:
            diagnostics = _diagnostics(error, text)
        sys.stderr.flush()
        body = diagnostics.encode(), output.encode()
        protocol.write(b"LFR1" + _U32.pack(sequence) + _U32.pack(status)
                       + _U32.pack(len(body[0])) + body[0] + _U32.pack(len(body[1])) + body[1])


def main(argv: list[str] | None = None) -> int:
    """``loomfuzz-head-driver [FLAGS]``: serve programs framed on stdin."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(arg == "--version" or arg.startswith("--help") for arg in argv):
        # the wheel's own tool answers for its library: identify() sees that build
        tool = tool_beside_bindings()
        os.execv(str(tool), [str(tool), *argv])
    options = parse_flags(argv)
    if options.rest:
        sys.stderr.write(f"loomfuzz-head-driver: unsupported flag {options.rest[0]} "
                         f"(it takes {', '.join(FLAGS)})\n")
        return 2
    _follow_parent()
    _serve(options, _Protocol())
    return 0


if __name__ == "__main__":
    sys.exit(main())
