"""Tests for harness.checker and `loomfuzz check` (harness/commands/check.py).

Every mutant is the spec's canonical program (tests/programs/canonical.mlir,
verbatim from program-shape.md) or a program with one of the spec's extra
region forms as a fourth site, changed by a small edit that breaks exactly
one precondition; the checker must name exactly that precondition, at the
right line.
"""

from __future__ import annotations

import argparse
import io
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.checker import Violation, check_file, check_text
from harness.commands import check as check_command

PROGRAMS = Path(__file__).parent / "programs"
CANONICAL = (PROGRAMS / "canonical.mlir").read_text()
SITE_FORMS = ("freeze", "loop", "call_func", "call_llvm")
THREAD1_YIELD = 55  # line of thread 1's dataflow.thread.yield in the canonical program


def with_site(form: str) -> str:
    """The canonical program plus the spec's `form` as the fourth site (%r3/graph_3) of thread 1."""
    lines = CANONICAL.split("\n")
    part = (PROGRAMS / f"site_{form}.mlir.part").read_text().rstrip("\n").split("\n")
    at = THREAD1_YIELD - 1
    assert lines[at].strip() == "dataflow.thread.yield"
    return "\n".join(lines[:at] + part + lines[at:])


BASES = {"canonical": CANONICAL, **{form: with_site(form) for form in SITE_FORMS}}


def edit(text: str, *ops: tuple) -> str:
    """Apply line edits; every line number is the *original* one.

    ("sub", n, old, new)   replace `old` (must occur) by `new` in line n
    ("line", n, new)       replace line n by `new` (may hold several lines)
    ("del", n[, m])        delete line n (through m)
    ("ins", n, new)        insert `new` before line n
    ("move", n, before)    move line n to just before line `before`
    ("text", old, new)     replace the single occurrence of `old` in the whole text
    """
    for op in ops:
        if op[0] == "text":
            assert text.count(op[1]) == 1, op
            text = text.replace(op[1], op[2])
    slots = [[line] for line in text.split("\n")]
    slots.insert(0, [])  # 1-based
    for op in ops:
        kind = op[0]
        if kind == "sub":
            _, n, old, new = op
            assert old in slots[n][-1], (op, slots[n])
            slots[n][-1] = slots[n][-1].replace(old, new, 1)
        elif kind == "line":
            slots[op[1]][-1] = op[2]
        elif kind == "del":
            for n in range(op[1], (op[2] if len(op) > 2 else op[1]) + 1):
                slots[n].pop()
        elif kind == "ins":
            slots[op[1]].insert(0, op[2])
        elif kind == "move":
            line = slots[op[1]].pop()
            slots[op[2]].insert(0, line)
    return "\n".join(line for slot in slots for line in slot)


def lines_of(text: str, at: list) -> set[int]:
    """Line numbers: ints as given, strings as the one line containing them."""
    out = set()
    for item in at:
        if isinstance(item, int):
            out.add(item)
        else:
            hits = [i for i, line in enumerate(text.split("\n"), 1) if item in line]
            assert len(hits) == 1, (item, hits)
            out.add(hits[0])
    return out


@dataclass(frozen=True)
class Mutant:
    name: str
    rule: int
    ops: tuple
    at: tuple  # expected lines of every reported violation
    base: str = "canonical"

    def text(self) -> str:
        return edit(BASES[self.base], *self.ops)


M = Mutant
MUTANTS = [
    # P1: module shape and order
    M("extern-before-helper", 1, (("move", 6, 2),), (2,)),
    M("extra-func-after-host", 1, (("ins", 16, "func.func @extra() {\n  return\n}"),), (16,)),
    M(
        "unknown-top-level-op",
        1,
        (("ins", 16, 'memref.global "private" @g : memref<4xi32>'),),
        (16,),
    ),
    M("op-after-module", 1, (("ins", 59, "func.func @after() {\n  return\n}"),), (59,)),
    M(
        "module-with-attributes",
        1,
        (("sub", 1, "module {", "module attributes {test.mark} {"),),
        (1,),
    ),
    M("no-threads", 1, (("del", 16, 57),), (16,)),
    M("unclosed-module", 1, (("del", 58),), (56,)),
    # P2: the exact helper
    M("helper-muli", 2, (("sub", 3, "arith.addi", "arith.muli"),), (3,)),
    M("helper-extra-op", 2, (("ins", 4, "  %extra = arith.addi %doubled, %a : i32"),), (4,)),
    M("helper-private", 2, (("sub", 2, "func.func @", "func.func private @"),), (2,)),
    # P3: the extern declaration
    M("extern-two-params", 3, (("sub", 6, "(i32)", "(i32, i32)"),), (6,)),
    M(
        "extern-with-body",
        3,
        (("line", 6, "llvm.func @extern_scale(%x: i32) -> i32 {\n  llvm.return %x : i32\n}"),),
        (6,),
    ),
    # P4: the exact host function
    M("host-bound-3", 4, (("sub", 9, "4 : index", "3 : index"),), (9,)),
    M("host-no-return", 4, (("del", 14),), (14,)),
    M("host-store-index", 4, (("sub", 12, "%target[%hi]", "%target[%zero]"),), (12,)),
    # P5: thread header
    M("thread-not-private", 5, (("sub", 16, "private ", ""),), (16,)),
    M("thread-sparse", 5, (("sub", 38, "<dense>", "<sparse>"),), (38,)),
    M(
        "thread-args-reordered",
        5,
        (
            (
                "sub",
                16,
                "(%mem: memref<4xi32>, %val: i32, %flag: i1)",
                "(%val: i32, %mem: memref<4xi32>, %flag: i1)",
            ),
        ),
        (16,),
    ),
    M("thread-no-ctrl", 5, (("sub", 38, " ctrl (%start: none)", ""),), (38,)),
    # P6: the index constants first
    M("hi-is-3", 6, (("sub", 18, "2 : index", "3 : index"),), (18,)),
    M("lo-hi-swapped", 6, (("move", 18, 17),), (17,)),
    M("constant-before-lo", 6, (("ins", 17, "  %x = arith.constant 7 : index"),), (17,)),
    # P7: the thread yield last
    M("no-thread-yield", 7, (("del", 35),), (35,)),
    M("thread-yield-early", 7, (("move", 35, 27),), (27, 36)),
    M("thread-closes-with-paren", 7, (("line", 36, "})"),), (36,)),
    M(
        "thread-yield-operand",
        7,
        (("sub", 55, "dataflow.thread.yield", "dataflow.thread.yield %val : i32"),),
        (55,),
    ),
    # P8: a region in every thread
    M("thread-without-region", 8, (("del", 42, 54),), (38,)),
    # P9: where regions sit
    M("two-wrappers", 9, (("ins", 42, "  scf.if %flag {"), ("ins", 55, "  }")), (44,)),
    M("in-execute-region", 9, (("ins", 21, "  scf.execute_region {"), ("ins", 27, "  }")), (22,)),
    # P10: wrapper shape
    M("for-step-hi", 10, (("sub", 42, "step %stp", "step %hi"),), (42,)),
    M("if-with-else", 10, (("ins", 34, "  } else {"),), (34,)),
    M("iv-redefines-lo", 10, (("sub", 42, "%iv = %lo", "%lo = %lo"),), (42,)),
    M("wrapper-closes-with-paren", 10, (("line", 54, "  })"),), (54,)),
    M("for-from-hi", 10, (("sub", 42, "%iv = %lo", "%iv = %hi"),), (42,)),
    # P11: generic form, properties, one entry block, attribute dictionary
    M(
        "custom-region-name",
        11,
        (("sub", 21, '"loom.spatial_region"', "loom.spatial_region"),),
        (21,),
    ),
    M("extra-property", 11, (("sub", 21, "array<i32: 1, 0>}>", "array<i32: 1, 0>, foo}>"),), (21,)),
    M("second-region", 11, (("ins", 26, "  }, {"),), (26,)),
    # P12: segment sizes
    M(
        "three-operand-segments",
        12,
        (("sub", 21, "array<i32: 1, 0, 0, 0>", "array<i32: 1, 0, 0>"),),
        (21,),
    ),
    M(
        "operand-segments-sum-2",
        12,
        (("sub", 21, "array<i32: 1, 0, 0, 0>", "array<i32: 2, 0, 0, 0>"),),
        (21,),
    ),
    M(
        "result-segments-sum-2",
        12,
        (
            (
                "sub",
                21,
                "resultSegmentSizes = array<i32: 1, 0>",
                "resultSegmentSizes = array<i32: 1, 1>",
            ),
        ),
        (21,),
    ),
    M(
        "memory-segments-sum-3",
        12,
        (("sub", 28, "array<i32: 1, 0, 1, 0>", "array<i32: 1, 0, 1, 1>"),),
        (28,),
    ),
    # P13: block arguments are the only inflow
    M(
        "thread-value-in-body",
        13,
        (("sub", 23, "arith.addi %a, %a", "arith.addi %a, %val"),),
        (23,),
    ),
    M("extra-block-argument", 13, (("sub", 22, "^bb0(%a: i32)", "^bb0(%a: i32, %b: i32)"),), (22,)),
    M("use-before-definition", 13, (("move", 24, 23),), (23,)),
    # P14: the spatial yield
    M(
        "yield-nothing",
        14,
        (
            (
                "line",
                25,
                '      "loom.spatial_yield"() '
                "<{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()",
            ),
        ),
        (25,),
    ),
    M("yield-segments-sum-2", 14, (("sub", 25, "array<i32: 1, 0>", "array<i32: 1, 1>"),), (25,)),
    M("no-spatial-yield", 14, (("del", 25),), (25,)),
    M("yield-type-i1", 14, (("sub", 52, "(i32) -> ()", "(i1) -> ()"),), (52,)),
    M("custom-yield-name", 14, (("sub", 25, '"loom.spatial_yield"', "loom.spatial_yield"),), (25,)),
    # P15: region operands
    M(
        "icall-as-operand",
        15,
        (("sub", 21, '"loom.spatial_region"(%val)', '"loom.spatial_region"(%icall)'),),
        (21,),
    ),
    M("region-result-as-operand", 15, (("sub", 28, "(%val, %mem)", "(%r0, %mem)"),), (28,)),
    # P16: graph_name and source_maps
    M("source-maps-nonempty", 16, (("sub", 26, "source_maps = []", "source_maps = [1]"),), (26,)),
    M("no-source-maps", 16, (("sub", 26, ", source_maps = []", ""),), (26,)),
    M("graph-name-integer", 16, (("sub", 33, 'graph_name = "graph_1"', "graph_name = 1"),), (33,)),
    M(
        "extra-attribute",
        16,
        (("sub", 53, "source_maps = []}", "source_maps = [], extra = 1}"),),
        (53,),
    ),
    # P17: result names
    M("result-named-hi", 17, (("sub", 21, "%r0 = ", "%hi = "),), (21,)),
    M("result-unbound", 17, (("sub", 21, "%r0 = ", ""),), (21,)),
    # P18: no result for a region that yields nothing
    M(
        "memory-region-bound",
        18,
        (
            (
                "sub",
                28,
                '"loom.spatial_region"(%val, %mem)',
                '%r1 = "loom.spatial_region"(%val, %mem)',
            ),
        ),
        (28,),
    ),
    # P19: memory accesses
    M(
        "index-not-constant",
        19,
        (("sub", 30, "arith.constant 0 : index", "arith.index_cast %payload : i32 to index"),),
        (31,),
    ),
    M("index-out-of-bounds", 19, (("sub", 30, "constant 0", "constant 4"),), (31,)),
    # P20: call targets
    M(
        "call-unknown-function",
        20,
        (("text", "func.call @helper_double(%a)", "func.call @helper_triple(%a)"),),
        ("@helper_triple",),
        "call_func",
    ),
    M(
        "llvm-call-helper",
        20,
        (("text", "llvm.call @extern_scale(%a)", "llvm.call @helper_double(%a)"),),
        ("llvm.call @helper_double",),
        "call_llvm",
    ),
    M(
        "func-call-extern",
        20,
        (("text", "func.call @helper_double(%a)", "func.call @extern_scale(%a)"),),
        ("func.call @extern_scale",),
        "call_func",
    ),
    M("icall-two-results", 20, (("sub", 20, "%icall = ", "%s, %icall = "),), (20,)),
    # P21: the thread-level call
    M("icall-after-site", 21, (("move", 20, 27),), (26,)),
    M(
        "thread-level-llvm-call",
        21,
        (("sub", 20, "func.call @helper_double", "llvm.call @extern_scale"),),
        (20,),
    ),
    # P22: structured control flow in regions
    M("branch-without-else", 22, (("del", 48, 50),), (48,)),
    M("then-without-yield", 22, (("del", 47),), (47,)),
    M("addi-missing-comma", 22, (("sub", 23, "%a, %a", "%a %a"),), (23,)),
    M(
        "freeze-of-a-call",
        22,
        (("text", "llvm.freeze %a", "llvm.freeze @extern_scale(%a)"),),
        ("llvm.freeze",),
        "freeze",
    ),
    M("unknown-arith-op", 22, (("sub", 24, "arith.muli", "arith.mulf"),), (24,)),
    M("branch-closes-with-paren", 22, (("line", 51, "        })"),), (51,)),
    M("second-block", 22, (("ins", 25, "    ^bb1:"),), (25,)),
    M("loop-without-yield", 22, (("del", THREAD1_YIELD + 7),), (THREAD1_YIELD + 7,), "loop"),
    # P23: types
    M("addi-i64", 23, (("sub", 23, ": i32", ": i64"),), (23, 24)),
    M("index-typed-i32", 23, (("sub", 30, "0 : index", "0 : i32"),), (31,)),
    M(
        "loop-bound-i32",
        23,
        (("text", "%c0 = arith.constant 0 : index", "%c0 = arith.constant 0 : i32"),),
        ("scf.for %i =",),
        "loop",
    ),
    M(
        "predicate-named-d",
        23,
        (("sub", 44, "%c: i1", "%d: i1"), ("sub", 45, "scf.if %c", "scf.if %d")),
        (44,),
    ),
    # P24: unique thread symbols
    M("duplicate-thread-symbol", 24, (("sub", 38, "@thread_1", "@thread_0"),), (38,)),
]


def test_every_precondition_has_a_mutant() -> None:
    assert {m.rule for m in MUTANTS} == set(range(1, 25))


def test_canonical_program_holds() -> None:
    assert check_text(CANONICAL) == []
    assert check_text(CANONICAL, conventions=True) == []
    assert check_file(PROGRAMS / "canonical.mlir") == []


@pytest.mark.parametrize("form", SITE_FORMS)
def test_extra_region_forms_hold(form: str) -> None:
    program = with_site(form)
    assert check_text(program) == []
    assert check_text(program, conventions=True) == []


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: f"P{m.rule}-{m.name}")
def test_mutant_breaks_exactly_one_precondition(mutant: Mutant) -> None:
    text = mutant.text()
    found = check_text(text)
    shown = "\n".join(v.format("mutant") for v in found)
    assert {v.precondition for v in found} == {mutant.rule}, shown
    assert {v.line for v in found} == lines_of(text, list(mutant.at)), shown
    for v in found:
        assert v.column >= 1 and "\n" not in v.message and v.message


def test_duplicate_graph_name_is_p16_and_p24() -> None:
    text = edit(CANONICAL, ("sub", 53, '"graph_2"', '"graph_0"'))
    found = check_text(text)
    assert {(v.precondition, v.line) for v in found} == {(16, 53), (24, 53)}


def test_duplicate_result_name_is_p17_and_p24() -> None:
    text = edit(CANONICAL, ("sub", 43, "%r2 = ", "%r0 = "))
    found = check_text(text)
    assert {(v.precondition, v.line) for v in found} == {(17, 43), (24, 43)}


def test_columns_point_at_the_offending_text() -> None:
    text = edit(
        CANONICAL, ("sub", 21, '"loom.spatial_region"(%val)', '"loom.spatial_region"(%icall)')
    )
    (v,) = check_text(text)
    assert text.split("\n")[v.line - 1][v.column - 1 :].startswith("%icall")
    text = edit(CANONICAL, ("sub", 38, "<dense>", "<sparse>"))
    (v,) = check_text(text)
    assert v.column == text.split("\n")[37].index("sparse") + 1


# ---- the Violation type -------------------------------------------------------


def test_violation_format_and_tags() -> None:
    p = Violation("P7", 3, 5, "the thread body must end with `dataflow.thread.yield`")
    assert (
        p.format("x.mlir")
        == "x.mlir:3:5: P7: the thread body must end with `dataflow.thread.yield`"
    )
    assert (p.precondition, p.convention) == (7, None)
    c = Violation("C20", 1, 1, "trailing whitespace")
    assert c.format("-") == "-:1:1: C20: trailing whitespace"
    assert (c.precondition, c.convention) == (None, "C20")


def test_violations_are_sorted() -> None:
    text = edit(
        CANONICAL,
        ("sub", 38, "@thread_1", "@thread_0"),
        ("sub", 18, "2 : index", "3 : index"),
        ("sub", 3, "addi", "muli"),
    )
    found = check_text(text)
    assert [v.precondition for v in found] == [2, 6, 24]
    assert found == sorted(found, key=lambda v: (v.line, v.column))


# ---- robustness -----------------------------------------------------------------


def assert_sane(found: list[Violation]) -> None:
    for v in found:
        assert isinstance(v, Violation)
        assert v.line >= 1 and v.column >= 1
        assert v.precondition in range(1, 25) or v.convention
        assert "\n" not in v.message and "internal checker error" not in v.message


@pytest.mark.parametrize(
    "text",
    ["", "\n", "   \n\n", "// only a comment\n", "}", "{", "module", "module {}", "module {\n}"],
)
def test_degenerate_texts(text: str) -> None:
    found = check_text(text, conventions=True)
    assert found and {v.precondition for v in found} <= {1}
    assert_sane(found)


def test_truncated_at_every_line() -> None:
    lines = CANONICAL.split("\n")
    complete = len(CANONICAL.rstrip("\n").split("\n"))
    for k in range(len(lines) + 1):
        found = check_text("\n".join(lines[:k]), conventions=True)
        assert_sane(found)
        assert bool(found) == (k < complete), k


def test_truncated_at_every_character() -> None:
    for k in range(0, len(CANONICAL), 5):
        found = check_text(CANONICAL[:k])
        assert_sane(found)
        assert found, k


def test_random_garbage_and_binary_junk() -> None:
    rng = random.Random(1234)
    alphabet = '{}()<>[]%@^"=:,. \n\tabcxyz019-' + "loom.spatial_region dataflow.thread scf.if "
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        assert_sane(check_text(text, conventions=True))
    for _ in range(200):
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(0, 600)))
        for text in (junk.decode("utf-8", errors="replace"), junk.decode("latin-1")):
            found = check_text(text, conventions=True)
            assert_sane(found)
            assert found


def test_random_line_edits_of_valid_programs() -> None:
    rng = random.Random(99)
    for _ in range(250):
        lines = rng.choice(list(BASES.values())).split("\n")
        for _ in range(rng.randint(1, 3)):
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            action = rng.randrange(4)
            if action == 0:
                del lines[i]
            elif action == 1:
                lines.insert(i, lines[j])
            elif action == 2:
                lines[i], lines[j] = lines[j], lines[i]
            else:
                line = lines[i]
                k = rng.randrange(len(line) + 1)
                lines[i] = (
                    line[:k] + rng.choice(["{", "}", "(", "%", '"', "", " ", "x"]) + line[k + 1 :]
                )
        assert_sane(check_text("\n".join(lines), conventions=True))


def test_deep_nesting_does_not_recurse_forever() -> None:
    found = check_text("module {\n" + "scf.if %flag {\n" * 5000 + "}\n" * 5000 + "}\n")
    assert_sane(found)
    assert found


# ---- conventions ----------------------------------------------------------------

# Thread 1 again, as a third thread (@thread_2, %r3/graph_3), followed by its blank line.
THIRD_THREAD = (
    "\n".join(CANONICAL.split("\n")[37:57])
    .replace("@thread_1", "@thread_2")
    .replace("%r2", "%r3")
    .replace('"graph_2"', '"graph_3"')
)

CONVENTION_MUTANTS = [
    ("C1", edit(CANONICAL, ("ins", 58, THIRD_THREAD))),
    ("C2", edit(CANONICAL, ("sub", 38, "@thread_1", "@thread_7"))),
    (
        "C3",
        edit(
            with_site("freeze"),
            (
                "ins",
                THREAD1_YIELD + 5,
                (PROGRAMS / "site_loop.mlir.part")
                .read_text()
                .replace("%r3", "%r4")
                .replace("graph_3", "graph_4")
                .rstrip("\n"),
            ),
        ),
    ),
    ("C4", edit(CANONICAL, ("sub", 33, '"graph_1"', '"graph_7"'))),
    ("C5", edit(CANONICAL, ("sub", 43, "%r2 = ", "%r1 = "))),
    ("C6", edit(CANONICAL, ("sub", 20, "%icall = ", "%call = "))),
    ("C7", edit(CANONICAL, ("ins", 54, "    scf.yield"))),
    ("C8", edit(CANONICAL, ("sub", 24, "arith.muli", "arith.subi"))),
    ("C14", edit(CANONICAL, ("sub", 21, "array<i32: 1, 0, 0, 0>", "array<i32: 0, 1, 0, 0>"))),
    ("C19", edit(CANONICAL, ("sub", 42, "%iv", "%k"))),
    ("C20", edit(CANONICAL, ("sub", 23, "      %s", "        %s"))),
    ("C20", edit(CANONICAL, ("del", 37))),
    ("C20", edit(CANONICAL, ("ins", 2, ""))),
    ("C20", edit(CANONICAL, ("sub", 35, "yield", "yield  "))),
    ("C20", edit(CANONICAL, ("sub", 17, "  %lo", "\t%lo"))),
]


@pytest.mark.parametrize(
    "rule, text",
    CONVENTION_MUTANTS,
    ids=[f"{r}-{i}" for i, (r, _) in enumerate(CONVENTION_MUTANTS)],
)
def test_convention_mutants(rule: str, text: str) -> None:
    assert check_text(text) == [], "\n".join(v.format("m") for v in check_text(text))
    found = check_text(text, conventions=True)
    assert {v.rule for v in found} == {rule}, "\n".join(v.format("m") for v in found)
    assert all(v.convention == rule and v.precondition is None for v in found)


# ---- the CLI --------------------------------------------------------------------

LINE_RE = re.compile(r"^(?P<path>.+):(?P<line>\d+):(?P<col>\d+): (?P<rule>[PC]\d+): \S.*$")


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="loomfuzz check")
    check_command.configure(parser)
    return check_command.run(parser.parse_args(argv))


def test_cli_valid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ok.mlir"
    path.write_text(CANONICAL)
    assert run_cli([str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == "checked 1 program in 1 file: all 24 preconditions hold\n"
    assert err == ""


def test_cli_reports_violations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(edit(CANONICAL, ("del", 35)))
    assert run_cli([str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{path}:35:1: P7: the thread body must end with `dataflow.thread.yield`"]
    assert all(LINE_RE.match(line) for line in out)


def test_cli_split_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = edit(CANONICAL, ("sub", 18, "2 : index", "3 : index"))
    text = CANONICAL + "// -----\n" + bad + "// -----\n" + CANONICAL
    path = tmp_path / "many.mlir"
    path.write_text(text)
    assert run_cli([str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    offset = len(CANONICAL.split("\n"))  # lines before the second program's first line
    (line,) = out
    m = LINE_RE.match(line)
    assert m and m["rule"] == "P6" and int(m["line"]) == offset + 18
    assert text.split("\n")[int(m["line"]) - 1].strip() == "%hi = arith.constant 3 : index"


def test_cli_counts_programs_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.mlir", tmp_path / "b.mlir"
    a.write_text(CANONICAL + "// -----\n" + with_site("loop"))
    b.write_text(with_site("freeze"))
    assert run_cli([str(a), str(b), "--conventions"]) == 0
    assert (
        capsys.readouterr().out
        == "checked 3 programs in 2 files: all 24 preconditions and the sampling conventions hold\n"
    )


def test_split_programs_offsets_and_trailing_marker() -> None:
    text = "a\nb\n// -----\nc\n// -----\n"
    assert check_command.split_programs(text) == [(0, "a\nb"), (3, "c")]
    assert check_command.split_programs("") == [(0, "")]
    assert check_command.split_programs("// -----\nx") == [(0, ""), (1, "x")]


def test_cli_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok = tmp_path / "ok.mlir"
    ok.write_text(CANONICAL)
    missing = tmp_path / "missing.mlir"
    assert run_cli([str(missing), str(ok)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"loomfuzz check: error: {missing}: ") and err.count("\n") == 1
    assert out == "checked 1 program in 1 file: all 24 preconditions hold\n"


def test_cli_missing_file_and_violations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(edit(CANONICAL, ("del", 35)))
    assert run_cli([str(tmp_path / "nope.mlir"), str(bad)]) != 0
    out = capsys.readouterr().out
    assert ": P7: " in out


def test_cli_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bad = edit(CANONICAL, ("sub", 38, "@thread_1", "@thread_0"))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bad.encode())))
    assert run_cli(["-"]) == 1
    assert capsys.readouterr().out.startswith("<stdin>:38:")


def test_cli_conventions_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "layout.mlir"
    path.write_text(edit(CANONICAL, ("del", 37)))
    assert run_cli([str(path)]) == 0
    capsys.readouterr()
    assert run_cli([str(path), "--conventions"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out and all(LINE_RE.match(line)["rule"] == "C20" for line in out)


def test_cli_binary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "junk.bin"
    path.write_bytes(bytes(range(256)) * 3)
    assert run_cli([str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out and all(LINE_RE.match(line) for line in out)


# ---- programs composed from the spec's own fragments: no false positives ----------

_CANON = CANONICAL.split("\n")


def _dedent(lines: list[str], n: int) -> list[str]:
    return [line[n:] for line in lines]


# Each region form at thread level (indent 2), numbered 0 for now.
FORM_TEXTS = {
    "arith": _CANON[20:26],
    "memory": _dedent(_CANON[27:33], 2),
    "branch": _dedent(_CANON[42:53], 2),
    **{
        form: (PROGRAMS / f"site_{form}.mlir.part").read_text().rstrip("\n").split("\n")
        for form in SITE_FORMS
    },
}


def compose(threads: list[tuple[bool, list[tuple[str, str]]]]) -> str:
    """A default-profile program: per thread (icall?, [(nesting, form), ...])."""
    out = _CANON[:15]
    counter = 0
    header = _CANON[15]
    for t, (icall, sites) in enumerate(threads):
        out.append(header.replace("@thread_0", f"@thread_{t}"))
        out += _CANON[16:19]
        if icall:
            out.append(_CANON[19])
        for nesting, form in sites:
            region = [re.sub(r"%r\d+ =", f"%r{counter} =", line) for line in FORM_TEXTS[form]]
            region = [re.sub(r'"graph_\d+"', f'"graph_{counter}"', line) for line in region]
            counter += 1
            if nesting == "none":
                out += region
            else:
                out.append(
                    "  scf.if %flag {"
                    if nesting == "if"
                    else "  scf.for %iv = %lo to %hi step %stp {"
                )
                out += ["  " + line for line in region]
                out.append("  }")
        out += ["  dataflow.thread.yield", "}", ""]
    return "\n".join(out + ["}", ""])


NESTINGS = ("none", "if", "for")
FORMS = tuple(FORM_TEXTS)


def test_composer_reproduces_the_canonical_program() -> None:
    assert (
        compose([(True, [("none", "arith"), ("if", "memory")]), (False, [("for", "branch")])])
        == CANONICAL
    )


@pytest.mark.parametrize("nesting", NESTINGS)
@pytest.mark.parametrize("form", FORMS)
def test_every_site_variant_holds(nesting: str, form: str) -> None:
    for icall in (False, True):
        program = compose([(icall, [(nesting, form)])])
        assert check_text(program, conventions=True) == [], program


def test_random_default_profile_programs_hold() -> None:
    rng = random.Random(7)
    for _ in range(200):
        threads = [
            (
                rng.random() < 0.5,
                [(rng.choice(NESTINGS), rng.choice(FORMS)) for _ in range(rng.randint(1, 2))],
            )
            for _ in range(rng.randint(1, 2))
        ]
        program = compose(threads)
        assert check_text(program, conventions=True) == [], program
