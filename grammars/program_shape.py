"""The program shape of ../shared/spec/program-shape.md as a probabilistic grammar.

The default profile (``conventions``): the spec's preconditions P1-P24 and its
sampling conventions C1-C23 with their weights.  The format is fuzzingbook's:
a dict of nonterminal -> list of expansions, an expansion being a string or
``(string, opts(...))``.  It needs no import of fuzzingbook (``opts`` only
builds a dict), so the fuzzing hot path never pays for it.

Everything the tool knows about the shape comes from this file; the core
(``harness.core``) reads it generically.  What a context-free grammar cannot
say is said with the core's option vocabulary (``harness.core.grammar``):

* ``counter="T"`` on ``<thread>`` and ``counter="R"`` on ``<site>``: the
  thread number (C2) and the module-wide region counter shared by ``%rN`` and
  ``graph_N`` (C4, C5), read in terminals as ``$T`` and ``$R``;
* ``indent=2`` on the wrapped sites: a region under ``scf.if``/``scf.for``
  moves two columns right (C20).

fuzzingbook reads ``<[^<> ]*>`` as a nonterminal, so MLIR's own angle
brackets (``memref<4xi32>``, ``<dense>``) are written through :func:`mlir`,
which swaps them for the guillemets ``‹`` and ``›``; compiling swaps them
back.  ``RENDERINGS["oracle"]`` gives other text for three nonterminals so
that upstream ``mlir-opt-22 --allow-unregistered-dialect`` parses and
verifies the program (the spec's last section).
"""

from __future__ import annotations

START = "<start>"
#: Every program of this grammar satisfies the spec's preconditions (the triage
#: keeps minimized programs inside them, checked by harness.checker).
CONTRACT = "P1-P24"
PROFILE = "conventions"

#: Counter placeholders, filled by the render pass.
THREAD_NUMBER = "$T"
REGION_NUMBER = "$R"

_ESCAPE = str.maketrans({"<": "\u2039", ">": "\u203a"})


def mlir(text: str) -> str:
    """MLIR text as a terminal: its angle brackets cannot read as nonterminals."""
    return text.translate(_ESCAPE)


def opts(**options: object) -> dict[str, object]:
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
        ("<thread>", opts(prob=1 / 2, label="1")),
        ("<thread><thread>", opts(prob=1 / 2, label="2")),
    ],
    "<thread>": [("<thread-open><bounds><top-call><sites><thread-close>", opts(counter="T"))],
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
        ("", opts(prob=1 / 2, label="absent")),
        ("<icall>", opts(prob=1 / 2, label="icall")),
    ],
    "<icall>": [mlir("  %icall = func.call @helper_double(%val) : (i32) -> i32\n")],
    # C3: one or two sites per thread, uniformly.
    "<sites>": [
        ("<site>", opts(prob=1 / 2, label="1")),
        ("<site><site>", opts(prob=1 / 2, label="2")),
    ],
    # P7, C20: each thread definition is followed by a blank line.
    "<thread-close>": [mlir("  dataflow.thread.yield\n}\n\n")],
    # C7: nesting none / scf.if / scf.for, 2:1:1.
    # C4, C5: the region counter advances once per site.
    "<site>": [
        ("<unwrapped>", opts(prob=2 / 4, counter="R", label="none")),
        ("<if-wrapped>", opts(prob=1 / 4, counter="R", label="if")),
        ("<for-wrapped>", opts(prob=1 / 4, counter="R", label="for")),
    ],
    "<unwrapped>": ["<region>"],
    "<if-wrapped>": [(mlir("  scf.if %flag {\n") + "<region>" + mlir("  }\n"), opts(indent=2))],
    "<for-wrapped>": [
        (mlir("  scf.for %iv = %lo to %hi step %stp {\n") + "<region>" + mlir("  }\n"), opts(indent=2))
    ],
    # C8: the six region bodies, 2:2:2:2:2:1.
    "<region>": [
        ("<arith-region>", opts(prob=2 / 11, label="arith")),
        ("<memory-region>", opts(prob=2 / 11, label="memory")),
        ("<branch-region>", opts(prob=2 / 11, label="branch")),
        ("<freeze-region>", opts(prob=2 / 11, label="freeze")),
        ("<loop-region>", opts(prob=2 / 11, label="loop")),
        ("<call-region>", opts(prob=1 / 11, label="call")),
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
        ("<func-call-region>", opts(prob=1 / 2, label="func")),
        ("<llvm-call-region>", opts(prob=1 / 2, label="llvm")),
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


#: Other renderings of the same trees.  ``oracle``: each thread and each region
#: as a generic unregistered op with a second, empty region, so that upstream
#: ``mlir-opt-22 --allow-unregistered-dialect`` parses and verifies every
#: upstream op in it (the second region keeps the op from acting as a symbol
#: table that would hide @helper_double and @extern_scale).
RENDERINGS = {
    "oracle": {
        "<thread-open>": [
            mlir(
                '"dataflow.thread"() ({\n'
                "^bb0(%mem: memref<4xi32>, %val: i32, %flag: i1, %start: none):\n"
            )
        ],
        "<thread-close>": [
            mlir(
                '  "dataflow.thread.yield"() : () -> ()\n'
                "}, {\n"
                f'}}) {{sym_name = "thread_{THREAD_NUMBER}", sym_visibility = "private", '
                "domain = #dataflow.thread_domain<dense>} : () -> ()\n\n"
            )
        ],
        "<region-end>": [mlir("  }, {\n  })")],
    }
}
