"""Programs for MLIR 15 and 16: the overflow flags left out where the target's release
does not parse them (harness/execute/releases.py), checked on a real mlir-opt-16
(Debian's mlir-16-tools, installed by .ci/setup) and, for safety, on mlir-runner-22."""

from __future__ import annotations

import re
import subprocess

import pytest

from harness.contract import load_grammar
from harness.core.engine import generate
from harness.core.render import renderer
from harness.execute.differential import reference_outputs
from harness.execute.releases import for_release, major_version, without_overflow_flags
from harness.execute.exec_rendering import exec_module
from harness.execute.toolchain import Toolchain

FLAG_FORMS = [(op, flag) for op in ("addi", "subi", "muli") for flag in ("nsw", "nuw", "nsw, nuw")]


@pytest.fixture(scope="module")
def flagged() -> dict[tuple[str, str], str]:
    """An exec module of a wide program for each (op, flag form) the wide profile writes."""
    grammar = load_grammar(None, "wide")
    render = renderer(grammar, "canonical").render
    found: dict[tuple[str, str], str] = {}
    for tree in generate(grammar, "fast", 16, 2000):
        program = render(tree)
        for op, flag in FLAG_FORMS:
            if (op, flag) not in found and re.search(rf"= arith\.{op} [^\n]* overflow<{flag}> :", program):
                found[(op, flag)] = exec_module(program)
        if len(found) == len(FLAG_FORMS):
            break
    assert sorted(found) == sorted(FLAG_FORMS)
    return found


def _mlir_opt_16(texts: list[str]) -> list[str]:
    """mlir-opt-16's first error line for each module ("" when it parses and verifies)."""
    errors = []
    for text in texts:
        done = subprocess.run(["mlir-opt-16", "-"], input=text, capture_output=True, text=True, timeout=60)
        errors.append("" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[0])
    return errors


def test_versions_are_read_from_the_binaries():
    assert major_version("mlir-opt-16") == 16
    assert major_version("mlir-opt-22") == 22
    assert major_version("/bin/true") is None
    assert major_version("/no/such/binary") is None


def test_flagless_programs_of_every_flag_form_pass_mlir_opt_16(flagged):
    texts = [flagged[form] for form in FLAG_FORMS]
    # the flags are what MLIR 16 refuses ...
    assert all("expected ':'" in error for error in _mlir_opt_16(texts)), _mlir_opt_16(texts)
    # ... and for release 16 (or 15) they are left out, every other byte kept
    flagless = [for_release(text, 16) for text in texts]
    assert [for_release(text, 15) for text in texts] == flagless
    assert all("overflow<" not in text for text in flagless)
    for text, bare in zip(texts, flagless):
        assert [l for l in text.splitlines() if "overflow<" not in l] == [
            l for l in bare.splitlines() if l in text.splitlines()]
    assert _mlir_opt_16(flagless) == [""] * len(flagless)
    # a current release gets the program as it is
    assert [for_release(text, 22) for text in texts] == texts
    assert [for_release(text, None) for text in texts] == texts


def test_leaving_the_flags_out_keeps_every_value(flagged):
    """Safe: the flags only add assumptions the wide profile's guards make true, so the
    flagless program prints what the flagged one prints."""
    texts = [flagged[form] for form in FLAG_FORMS]
    toolchain = Toolchain()
    flagged = reference_outputs(texts, toolchain)
    assert all(isinstance(o, str) for o in flagged)
    assert reference_outputs([without_overflow_flags(t) for t in texts], toolchain) == flagged


def test_only_the_flag_syntax_is_touched():
    line = "%v3 = arith.muli %v1, %v2 overflow<nsw, nuw> : i32\n"
    assert without_overflow_flags(line) == "%v3 = arith.muli %v1, %v2 : i32\n"
    assert without_overflow_flags("%v = arith.addi %a, %b overflow<nuw> : i32") == "%v = arith.addi %a, %b : i32"
    kept = '%v = arith.addi %a, %b : i32 {graph_name = "overflow<nsw>"}\n'
    assert without_overflow_flags(kept) == kept


def test_run_with_the_differential_oracle_against_mlir_opt_16(tmp_path):
    """``run --oracle differential --mlir-opt mlir-opt-16``: the optimizer's release is read
    once and every program it is given leaves the flags out, so flagged programs are judged
    (not target failures: MLIR 16 would refuse their text), and no value differs."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    grammar = load_grammar(None, "wide")
    render = renderer(grammar, "canonical").render
    programs = [render(tree) for tree in generate(grammar, "fast", 5, 40)]
    assert sum(" overflow<" in p for p in programs) >= 5  # the sample has flagged programs
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--profile", "wide", "-n", "40",
                           "--seed", "5", "--oracle", "differential", "--mlir-opt", "mlir-opt-16",
                           "--pipeline", "builtin.module(canonicalize,cse)", "--artifacts",
                           str(tmp_path / "a"), "--no-progress"], cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "accepted            40" in done.stdout, done.stdout
    assert not [json.loads(p.read_text()) for p in (tmp_path / "a").glob("crash-*.json")]
