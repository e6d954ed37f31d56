"""The renderer against the spec's own text, and the oracle against mlir-opt-22."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness.core.engine import generate
from harness.core.grammar import default_grammar
from harness.core.render import SPLIT_MARKER, render_stream
from harness.core.render import render as render_tree
from shapes import Body, Callee, Nesting, Program, Thread, make_site, to_tree

G = default_grammar()


def render(program, style: str = "canonical") -> str:
    tree = to_tree(program) if isinstance(program, Program) else program
    return render_tree(tree, G, style)

# Copied verbatim from ../shared/spec/program-shape.md: the canonical program,
# and the four other value-producing forms as the fourth site (%r3, graph_3).
PROGRAMS = Path(__file__).parent / "programs"
CANONICAL = PROGRAMS / "canonical.mlir"

# The canonical program of the spec, as a tree.
SPEC_TREE = Program(
    (
        Thread(True, (make_site(Nesting.NONE, Body.ARITH), make_site(Nesting.IF, Body.MEMORY))),
        Thread(False, (make_site(Nesting.FOR, Body.BRANCH),)),
    )
)


def test_canonical_program_is_the_spec_text():
    assert render(SPEC_TREE) == CANONICAL.read_text()


@pytest.mark.parametrize(
    "site, name",
    [
        (make_site(Nesting.NONE, Body.FREEZE), "site_freeze"),
        (make_site(Nesting.NONE, Body.LOOP), "site_loop"),
        (make_site(Nesting.NONE, Body.CALL, Callee.FUNC), "site_call_func"),
        (make_site(Nesting.NONE, Body.CALL, Callee.LLVM), "site_call_llvm"),
    ],
)
def test_other_forms_as_the_fourth_site_are_the_spec_text(site, name):
    snippet = (PROGRAMS / f"{name}.mlir.part").read_text()
    program = Program((SPEC_TREE.threads[0], Thread(False, (SPEC_TREE.threads[1].sites[0], site))))
    text = render(program)
    assert snippet.strip("\n") + "\n" in text


def test_wrapped_region_moves_two_columns_right():
    plain = render(Program((Thread(False, (make_site(Nesting.NONE, Body.FREEZE),)),)))
    wrapped = render(Program((Thread(False, (make_site(Nesting.FOR, Body.FREEZE),)),)))
    region = [l for l in plain.splitlines() if "llvm.freeze" in l or "spatial_region" in l]
    for line in region:
        assert "  " + line in wrapped.splitlines()


def test_counters_follow_emission_order_across_threads():
    memory = make_site(Nesting.NONE, Body.MEMORY)
    arith = make_site(Nesting.IF, Body.ARITH)
    text = render(Program((Thread(False, (memory, arith)), Thread(True, (arith,)))))
    assert re.findall(r'graph_name = "(graph_\d+)"', text) == ["graph_0", "graph_1", "graph_2"]
    # C5: the memory form binds no %r, so %r0 is skipped.
    assert re.findall(r"(%r\d+) = ", text) == ["%r1", "%r2"]
    assert re.findall(r"@(thread_\d+)", text) == ["thread_0", "thread_1"]


def test_stream_separates_programs_for_split_input_file():
    programs = list(generate(G, "fast", 3, 5))
    stream = "".join(render_stream(programs, G))
    assert stream.split(SPLIT_MARKER) == [render(p) for p in programs]


def test_oracle_rendering_is_accepted_by_mlir_opt(mlir_opt):
    programs = list(generate(G, "fast", 11, 600))
    stream = "".join(render_stream(programs, G, "oracle"))
    result = subprocess.run(
        [mlir_opt, "--allow-unregistered-dialect", "--split-input-file", "-o", "/dev/null"],
        input=stream, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[:2000]


def test_mlir_opt_catches_a_broken_oracle_program(mlir_opt):
    # The oracle test above can fail: a type error in one program is reported.
    good = render(SPEC_TREE, "oracle")
    bad = good.replace("arith.muli %s, %a : i32", "arith.muli %s, %a : i64", 1)
    result = subprocess.run(
        [mlir_opt, "--allow-unregistered-dialect", "--split-input-file", "-o", "/dev/null"],
        input=good + SPLIT_MARKER + bad, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1 and "error" in result.stderr
