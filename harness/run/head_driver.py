"""The persistent driver of LLVM's development head: the native driver's protocol over a
head wheel's MLIR Python bindings (:mod:`harness.targets.heads`).

Each head wheel is one build: its bindings and the tool that stands for it (the
``iree-base-compiler`` wheel's ``iree-opt``, one library with its ``iree.compiler``
bindings; ``mlir-opt-head`` over the ``torch-mlir`` wheel's bindings, with every upstream
pass).  A process per program costs about 50 ms (220 ms through a Python launcher); parse +
passes + print through the bindings costs about 3 ms.  So this driver stands for the head's
tool the way ``native/build/loomfuzz-mlir-driver`` stands for ``mlir-opt-22``: the same frames
(``LFD1``/``LFR1``; ``--fork-server``: ``LFZ1``/``LFC1``/``LFX1``, native/README.md), the same
flags for what it supports, its diagnostics as the tool prints them, and ``--version``/
``--help`` answered by the tool itself, so :func:`harness.targets.identity.identify` sees the
build it stands for.  One console script per wheel: ``loomfuzz-head-driver`` (iree-opt's,
:func:`main`) and ``loomfuzz-mlir-opt-head-driver`` (mlir-opt-head's, :func:`main_every_pass`).

It knows the flags in :data:`FLAGS`; :func:`unsupported` names the first other
one, and the harness then runs the target itself instead (never a guess at what a
flag would have done).  Only the standard library and the bindings are imported: it
is a start-up path.
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import sys
from dataclasses import dataclass, field

from harness.targets.head_bindings import HeadBindings, HeadNotInstalled, format_error
from harness.targets.heads import EVERY_PASS, IREE

__all__ = ["FLAGS", "HeadDriverOptions", "main", "main_every_pass", "parse_flags", "serve", "unsupported"]

#: What this driver takes: mlir-opt's spelling, the native driver's own flags; ``--exec=RUNTIME``:
#: the head judges its own output (harness.run.head_exec; RUNTIME defines printI64).
FLAGS = ("--pass-pipeline=", "--allow-unregistered-dialect", "--emit-output", "--fork-server", "--exec=")
_U32 = struct.Struct("<I")
_RETIRE = 0xFFFFFFFF
_WORKER_SAW_EOF = 75
_MAX_PROGRAM = 256 << 20


@dataclass
class HeadDriverOptions:
    """The driver's command line, read by :func:`parse_flags`."""

    pipeline: str = "builtin.module()"
    allow_unregistered: bool = False
    emit_output: bool = False
    fork_server: bool = False
    exec_runtime: str | None = None  # --exec=RUNTIME: answer with harness.run.head_exec
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
        elif arg.startswith("--exec="):
            options.exec_runtime = arg.split("=", 1)[1]
        else:
            options.rest.append(arg)
    return options


def unsupported(argv: list[str]) -> str | None:
    """The first flag of a target's arguments this driver cannot honour, or None."""
    rest = parse_flags(list(argv)).rest
    return rest[0] if rest else None


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


# ------------------------------------------------------------------ serving


def _serve(bindings: HeadBindings, options: HeadDriverOptions, protocol: _Protocol) -> None:
    ir, passmanager = bindings.load()
    context = ir.Context()
    context.allow_unregistered_dialects = options.allow_unregistered
    context.enable_multithreading(False)  # a fork-server worker must not inherit a pool
    try:
        pm = passmanager.PassManager.parse(options.pipeline, context)
    except Exception as error:  # noqa: BLE001 - MLIR's one exception type for every parse error
        sys.stderr.write(f"{bindings.driver}: invalid pass pipeline: {error}\n")
        sys.exit(1)
    executor = None
    if options.exec_runtime:
        from harness.run.head_exec import HeadExec

        executor = HeadExec(ir, passmanager, bindings.load_engine(), context, pm, options.exec_runtime,
                            format_error)

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
            sys.stderr.write(f"{bindings.driver}: protocol error: a program of {length} bytes "
                             f"(limit {_MAX_PROGRAM})\n")
            sys.exit(2)
        data = protocol.read(length) if length else b""
        if data is None:
            os._exit(_WORKER_SAW_EOF if options.fork_server else 0)
        sequence += 1
        text = data.decode("utf-8", errors="replace")
        status, diagnostics, output = 1, "", ""
        if executor is not None:
            body = b"", executor.answer(text)
            protocol.write(b"LFR1" + _U32.pack(sequence) + _U32.pack(0)
                           + _U32.pack(0) + _U32.pack(len(body[1])) + body[1])
            continue
        try:
            module = ir.Module.parse(text, context)
            pm.run(module.operation)
            status = 0
            if options.emit_output:
                output = str(module) + "\n"
            del module
        except ir.MLIRError as error:
            diagnostics = format_error(error, text.splitlines())
        sys.stderr.flush()
        body = diagnostics.encode(), output.encode()
        protocol.write(b"LFR1" + _U32.pack(sequence) + _U32.pack(status)
                       + _U32.pack(len(body[0])) + body[0] + _U32.pack(len(body[1])) + body[1])


def serve(bindings: HeadBindings, argv: list[str] | None = None) -> int:
    """``DRIVER [FLAGS]``: serve programs framed on stdin through ``bindings``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name = bindings.driver
    if any(arg == "--version" or arg.startswith("--help") for arg in argv):
        # the tool answers for its build: identify() sees that build
        if bindings.native_tool is None:
            from harness.targets.mlir_opt_head import main as tool

            return tool(argv)
        try:
            native = str(bindings.native_tool_path())
        except HeadNotInstalled as error:
            sys.stderr.write(f"{error}\n")
            return 2
        os.execv(native, [native, *argv])
    options = parse_flags(argv)
    if options.rest:
        sys.stderr.write(f"{name}: unsupported flag {options.rest[0]} (it takes {', '.join(FLAGS)})\n")
        return 2
    _follow_parent()
    try:
        _serve(bindings, options, _Protocol())
    except HeadNotInstalled as error:
        sys.stderr.write(f"{error}\n")
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """``loomfuzz-head-driver``: the ``iree-base-compiler`` wheel's head (``iree-opt``)."""
    return serve(IREE, argv)


def main_every_pass(argv: list[str] | None = None) -> int:
    """``loomfuzz-mlir-opt-head-driver``: the head with every pass (``mlir-opt-head``)."""
    return serve(EVERY_PASS, argv)


if __name__ == "__main__":
    sys.exit(main())
