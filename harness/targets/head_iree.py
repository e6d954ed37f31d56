"""The ``iree-base-compiler`` wheel as LLVM's development head: ``iree-opt`` and the
``iree.compiler`` bindings are one library (``libIREECompiler.so``), registering the
upstream passes that apply to our dialects (canonicalize, cse, inline,
loop-invariant-code-motion, symbol-dce, the affine passes), not sccp or the
integer-range passes.  The wheel's ``iree-opt`` answers ``--version`` and ``--help``."""

from __future__ import annotations

from harness.targets.head_bindings import HeadBindings

__all__ = ["IREE"]

IREE = HeadBindings(tool="iree-opt", driver="loomfuzz-head-driver", wheel="iree-base-compiler",
                    package="iree.compiler", library="libIREECompiler.so", native_tool="iree-opt")
