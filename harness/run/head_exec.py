"""A head build judged by its own ExecutionEngine: the ``--exec`` mode of the head's
persistent driver (:mod:`harness.run.head_driver`).

The head's printer writes what MLIR 22 cannot always read back (dense ``i1`` elements as
hex in LLVM 24's layout, and the bindings have no option to print them as literals), so
the head's output is never read by the reference toolchain: for each exec module the
driver parses it with the head's parser, runs the pipeline under test, prints the result
and parses that again (what runs is what the head's tool would have printed), lowers it
in the same bindings with the reference lowering (``arith-expand, convert-scf-to-cf,
convert-to-llvm, reconcile-unrealized-casts``: :data:`harness.execute.toolchain.LOWERING`),
compiles it with the head's ExecutionEngine (no optimisation) against the runtime library
that defines ``printI64``/``printNewline`` (the wheel ships none: Debian's
``libmlir_c_runner_utils.so``; its ABI is C) and captures what ``main`` prints.  The
answer is one JSON object per program: the stage that failed (``ok``, ``parse``,
``optimize``, ``reparse``, ``lower-optimized``, ``jit-optimized``, ``run-optimized``:
the names of native/loomfuzz-exec.h), its diagnostics, the output and the optimized text.

Only the standard library and the bindings are imported: it runs in the driver.
"""

from __future__ import annotations

import ctypes
import json
import os

__all__ = ["HEAD_LOWERING", "HeadExec"]

#: The reference lowering (harness.execute.toolchain.LOWERING) as one pipeline.
HEAD_LOWERING = "builtin.module(arith-expand,convert-scf-to-cf,convert-to-llvm,reconcile-unrealized-casts)"


class HeadExec:
    """Executes exec modules through a head's bindings (see the module docstring)."""

    def __init__(self, ir, passmanager, engine_module, context, optimize, runtime: str,
                 format_error) -> None:
        self.ir = ir
        self.engine = engine_module.ExecutionEngine
        self.context = context
        self.optimize = optimize
        self.lowering = passmanager.PassManager.parse(HEAD_LOWERING, context)
        self.runtime = runtime
        self.format_error = format_error
        self.libc = ctypes.CDLL(None)

    def _captured(self, function) -> str:
        """What ``function()`` prints on C's stdout (fd 1 points at a memory file meanwhile)."""
        self.libc.fflush(None)
        sink = os.memfd_create("head-exec-output")
        saved = os.dup(1)
        try:
            os.dup2(sink, 1)
            function()
            self.libc.fflush(None)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        try:
            os.lseek(sink, 0, os.SEEK_SET)
            chunks = []
            while chunk := os.read(sink, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(sink)
        return b"".join(chunks).decode("utf-8", errors="replace")

    def answer(self, text: str) -> bytes:
        """One exec module's answer (JSON, see the module docstring)."""
        ir, lines = self.ir, text.splitlines()
        stage, optimized = "parse", ""
        try:
            module = ir.Module.parse(text, self.context)
            stage = "optimize"
            self.optimize.run(module.operation)
            optimized = f"{module}\n"
            stage = "reparse"
            printed = ir.Module.parse(optimized, self.context)
            stage = "lower-optimized"
            self.lowering.run(printed.operation)
            stage = "jit-optimized"
            engine = self.engine(printed, opt_level=0, shared_libs=[self.runtime])
            main = engine.raw_lookup("main")
            if not main:
                raise RuntimeError("no function main in the lowered module")
            stage = "run-optimized"
            output = self._captured(ctypes.CFUNCTYPE(None)(main))
            del engine
            return json.dumps({"stage": "ok", "detail": "", "output": output, "optimized": optimized}).encode()
        except ir.MLIRError as error:
            detail = self.format_error(error, lines if stage in ("parse", "optimize") else optimized.splitlines())
        except Exception as error:  # noqa: BLE001 - the engine's errors are RuntimeError or ValueError
            detail = f"error: {error}"
        return json.dumps({"stage": stage, "detail": detail, "output": "", "optimized": optimized}).encode()
