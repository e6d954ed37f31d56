"""The program shape of ../shared/spec/program-shape.md as a probabilistic grammar.

The format is fuzzingbook's: a dict of nonterminal -> list of expansions, an
expansion being a string or ``(string, {"prob": p})``.  It needs no import of
fuzzingbook (``opts(prob=p)`` only builds that dict), so the fuzzing hot path
never pays for it.

This file is the single place where the sampling weights live, and its
terminals are the canonical MLIR text.  Two things the grammar cannot say are
filled in afterwards by one pass over the tree (``harness.core.render``):

* the counters: ``$T`` is the thread number (C2) and ``$R`` the module-wide
  region counter shared by ``%rN`` and ``graph_N`` (C4, C5);
* the wrapper indentation: a region under ``scf.if``/``scf.for`` moves two
  columns right (C20).

fuzzingbook reads ``<[^<> ]*>`` as a nonterminal, so MLIR's own angle
brackets (``memref<4xi32>``, ``<dense>``) are written through :func:`mlir`,
which swaps them for the guillemets ``‹`` and ``›``; the renderer swaps them
back.
"""

from __future__ import annotations

START = "<start>"

#: Placeholders that the renderer fills with counters.
THREAD_NUMBER = "$T"
REGION_NUMBER = "$R"

_ESCAPE = str.maketrans({"<": "\u2039", ">": "\u203a"})


def mlir(text: str) -> str:
    """MLIR text as a terminal: its angle brackets cannot read as nonterminals."""
    return text.translate(_ESCAPE)


def opts(**options: float) -> dict[str, float]:
    """fuzzingbook's ``opts``: expansion options as a plain dict."""
    return options


def _value_region(body: str, result: str) -> str:
    """A value-producing region (operand ``%val``, block argument ``%a: i32``)."""
    return (
        "<value-region-open>"
        + mlir(body)
        + mlir(
            f'      "loom.spatial_yield"({result}) <{{operandSegmentSizes = '
            "array<i32: 1, 0>}> : (i32) -> ()\n"
        )
        + "<region-end><value-region-close>"
    )


GRAMMAR: dict[str, list] = {
    START: ["<module>"],
    "<module>": [mlir("module {\n") + "<preamble><threads>" + mlir("}\n")],
    # P1-P4, C16, C17: a constant preamble.
    "<preamble>": ["<helper-double><extern-scale><host-container>"],
    "<helper-double>": [
        mlir(
            "func.func @helper_double(%a: i32) -> i32 {\n"
            "  %doubled = arith.addi %a, %a : i32\n"
            "  return %doubled : i32\n"
            "}\n"
        )
    ],
    "<extern-scale>": [mlir("llvm.func @extern_scale(i32) -> i32\n")],
    "<host-container>": [
        mlir(
            "func.func @host_container(%target: memref<4xi32>, %value: i32) {\n"
            "  %zero = arith.constant 0 : index\n"
            "  %four = arith.constant 4 : index\n"
            "  %one = arith.constant 1 : index\n"
            "  scf.for %hi = %zero to %four step %one {\n"
            "    memref.store %value, %target[%hi] : memref<4xi32>\n"
            "  }\n"
            "  return\n"
            "}\n"
        )
    ],
    # C1: one or two threads, uniformly.
    "<threads>": [
        ("<thread>", opts(prob=1 / 2)),
        ("<thread><thread>", opts(prob=1 / 2)),
    ],
    "<thread>": ["<thread-open><bounds><top-call><sites><thread-close>"],
    # P5, C2, C23.
    "<thread-open>": [
        mlir(
            f"dataflow.thread private @thread_{THREAD_NUMBER} "
            "domain(#dataflow.thread_domain<dense>)"
            "(%mem: memref<4xi32>, %val: i32, %flag: i1) ctrl (%start: none) {\n"
        )
    ],
    # P6.
    "<bounds>": [
        mlir(
            "  %lo = arith.constant 0 : index\n"
            "  %hi = arith.constant 2 : index\n"
            "  %stp = arith.constant 1 : index\n"
        )
    ],
    # C6: the optional top-level call, half of the time.
    "<top-call>": [
        ("", opts(prob=1 / 2)),
        ("<icall>", opts(prob=1 / 2)),
    ],
    "<icall>": [mlir("  %icall = func.call @helper_double(%val) : (i32) -> i32\n")],
    # C3: one or two sites per thread, uniformly.
    "<sites>": [
        ("<site>", opts(prob=1 / 2)),
        ("<site><site>", opts(prob=1 / 2)),
    ],
    # P7, C20: each thread definition is followed by a blank line.
    "<thread-close>": [mlir("  dataflow.thread.yield\n}\n\n")],
    # C7: nesting none / scf.if / scf.for, 2:1:1.
    "<site>": [
        ("<unwrapped>", opts(prob=2 / 4)),
        ("<if-wrapped>", opts(prob=1 / 4)),
        ("<for-wrapped>", opts(prob=1 / 4)),
    ],
    "<unwrapped>": ["<region>"],
    "<if-wrapped>": [mlir("  scf.if %flag {\n") + "<region>" + mlir("  }\n")],
    "<for-wrapped>": [
        mlir("  scf.for %iv = %lo to %hi step %stp {\n") + "<region>" + mlir("  }\n")
    ],
    # C8: the six region bodies, 2:2:2:2:2:1.
    "<region>": [
        ("<arith-region>", opts(prob=2 / 11)),
        ("<memory-region>", opts(prob=2 / 11)),
        ("<branch-region>", opts(prob=2 / 11)),
        ("<freeze-region>", opts(prob=2 / 11)),
        ("<loop-region>", opts(prob=2 / 11)),
        ("<call-region>", opts(prob=1 / 11)),
    ],
    "<value-region-open>": [
        mlir(
            f'  %r{REGION_NUMBER} = "loom.spatial_region"(%val) <{{operandSegmentSizes = '
            "array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({\n"
            "    ^bb0(%a: i32):\n"
        )
    ],
    "<value-region-close>": [
        mlir(f' {{graph_name = "graph_{REGION_NUMBER}", source_maps = []}} : (i32) -> i32\n')
    ],
    "<region-end>": [mlir("  })")],
    "<arith-region>": [
        _value_region(
            "      %s = arith.addi %a, %a : i32\n"
            "      %p = arith.muli %s, %a : i32\n",
            "%p",
        )
    ],
    "<memory-region>": [
        mlir(
            '  "loom.spatial_region"(%val, %mem) <{operandSegmentSizes = '
            "array<i32: 1, 0, 1, 0>, resultSegmentSizes = array<i32: 0, 0>}> ({\n"
            "    ^bb0(%payload: i32, %memory: memref<4xi32>):\n"
            "      %z = arith.constant 0 : index\n"
            "      memref.store %payload, %memory[%z] : memref<4xi32>\n"
            '      "loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()\n'
        )
        + "<region-end>"
        + mlir(
            f' {{graph_name = "graph_{REGION_NUMBER}", source_maps = []}} '
            ": (i32, memref<4xi32>) -> ()\n"
        )
    ],
    "<branch-region>": [
        mlir(
            f'  %r{REGION_NUMBER} = "loom.spatial_region"(%val, %flag) <{{operandSegmentSizes = '
            "array<i32: 2, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({\n"
            "    ^bb0(%a: i32, %c: i1):\n"
            "      %sel = scf.if %c -> (i32) {\n"
            "        %t = arith.addi %a, %a : i32\n"
            "        scf.yield %t : i32\n"
            "      } else {\n"
            "        %m = arith.muli %a, %a : i32\n"
            "        scf.yield %m : i32\n"
            "      }\n"
            '      "loom.spatial_yield"(%sel) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()\n'
        )
        + "<region-end>"
        + mlir(
            f' {{graph_name = "graph_{REGION_NUMBER}", source_maps = []}} : (i32, i1) -> i32\n'
        )
    ],
    "<freeze-region>": [_value_region("      %stable = llvm.freeze %a : i32\n", "%stable")],
    "<loop-region>": [
        _value_region(
            "      %c0 = arith.constant 0 : index\n"
            "      %c2 = arith.constant 2 : index\n"
            "      %c1 = arith.constant 1 : index\n"
            "      %acc = scf.for %i = %c0 to %c2 step %c1 iter_args(%carry = %a) -> (i32) {\n"
            "        %next = arith.addi %carry, %a : i32\n"
            "        scf.yield %next : i32\n"
            "      }\n",
            "%acc",
        )
    ],
    # C9: the call form's callee, uniformly.
    "<call-region>": [
        ("<func-call-region>", opts(prob=1 / 2)),
        ("<llvm-call-region>", opts(prob=1 / 2)),
    ],
    "<func-call-region>": [
        _value_region(
            "      %called = func.call @helper_double(%a) : (i32) -> i32\n", "%called"
        )
    ],
    "<llvm-call-region>": [
        _value_region(
            "      %called = llvm.call @extern_scale(%a) : (i32) -> i32\n", "%called"
        )
    ],
}
