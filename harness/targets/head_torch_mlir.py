"""The ``torch-mlir`` wheel as LLVM's development head with every upstream pass.

Its MLIR Python bindings (``torch_mlir.ir``, ``torch_mlir.passmanager``; no torch needed)
are built from LLVM's head, and their library (``libTorchMLIRAggregateCAPI.so``) registers
every upstream pass: ``PassManager.parse`` accepts sccp, int-range-optimizations,
arith-int-range-narrowing, remove-dead-values, arith-unsigned-when-equivalent.  The
wheel's own ``torch-mlir-opt`` binary registers only a handful, so it is not the build:
``mlir-opt-head`` (:mod:`harness.targets.mlir_opt_head`) is the tool over the bindings,
and it answers ``--version`` and ``--help`` from them."""

from __future__ import annotations

from harness.targets.head_bindings import HeadBindings

__all__ = ["EVERY_PASS"]

EVERY_PASS = HeadBindings(tool="mlir-opt-head", driver="loomfuzz-mlir-opt-head-driver", wheel="torch-mlir",
                          package="torch_mlir", library="libTorchMLIRAggregateCAPI.so",
                          engine="torch_mlir.execution_engine")
