"""The PCFGs loom-fuzz expands (fuzzingbook's format, plain dicts)."""

from grammars.program_shape import GRAMMAR, REGION_NUMBER, START, THREAD_NUMBER, mlir

__all__ = ["GRAMMAR", "REGION_NUMBER", "START", "THREAD_NUMBER", "mlir"]
