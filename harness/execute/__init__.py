"""Executing programs: the exec rendering, the reference interpreter, the reference
toolchain (mlir-opt-22 + mlir-runner-22) and the differential judge of an optimizer."""
