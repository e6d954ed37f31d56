"""`loomfuzz coverage` and the fuzz summary's grammar coverage: a corpus built to miss
two known alternatives reports exactly those two (k=1) and exactly the pairs
that hold them (k=2), whether its programs are fuzz inputs or .mlir files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.core.codec import encode
from harness.core.grammar import default_grammar
from harness.core.render import render
from harness.core.walk import random_trees
from harness.fuzzing.grammar_coverage import fuzz_corpus_coverage

ROOT = Path(__file__).resolve().parent.parent
G = default_grammar()
MISSING = {"<region>=loop", "<call-region>=llvm"}  # the two alternatives the corpus leaves out
MISSING_PAIRS = {  # every parent/child pair that holds one of them (the parents looked through
    "<site>=none > <region>=loop",  # <unwrapped>, <if-wrapped>, <for-wrapped>: no choice)
    "<site>=if > <region>=loop",
    "<site>=for > <region>=loop",
    "<region>=call > <call-region>=llvm",
}


def _has(tree, symbol: str, label: str) -> bool:
    n, a, kids = tree
    if G.names[n] == symbol and G.alts[n][a].label == label:
        return True
    return any(_has(kid, symbol, label) for kid in kids)


def _corpus(folder: Path) -> None:
    """400 PCFG programs without the two alternatives: a third as fuzz inputs, a third
    as .mlir files (canonical and oracle), a third in one '// -----' stream; plus a
    text that is no program and a sidecar that is no input."""
    trees = [t for t in random_trees(G, seed=21, count=3000)
             if not any(_has(t, *m.split("=")) for m in MISSING)][:400]
    assert len(trees) == 400
    folder.mkdir()
    (folder / "inputs").mkdir()
    for i, tree in enumerate(trees[:133]):
        (folder / "inputs" / f"{i:040x}").write_bytes(encode(tree, G))
    for i, tree in enumerate(trees[133:266]):
        (folder / f"p{i}.mlir").write_text(render(tree, G, ("canonical", "oracle")[i % 2]))
    (folder / "stream.mlir").write_text("// -----\n".join(render(t, G) for t in trees[266:]))
    (folder / "notes.mlir").write_text("module {\n  this is not a program\n}\n")
    (folder / "crash-0.json").write_text("{}")


def test_a_corpus_missing_two_alternatives_reports_them(tmp_path):
    corpus = tmp_path / "corpus"
    _corpus(corpus)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "harness.cli", "coverage", *a],  # noqa: E731
                                    capture_output=True, text=True, env=env, cwd=ROOT)
    proc = run(str(corpus), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["fuzz_inputs"], report["programs"]) == (133, 267)
    assert [s["file"] for s in report["skipped"]] == [str(corpus / "notes.mlir")]
    assert "line 2: not a program" in report["skipped"][0]["reason"]
    assert set(report["k1"]["uncovered"]) == MISSING
    assert report["k1"]["covered"] == report["k1"]["total"] - 2
    assert set(report["k2"]["uncovered"]) == MISSING_PAIRS
    assert report["k2"]["covered"] == report["k2"]["total"] - len(MISSING_PAIRS)

    table = run(str(corpus / "inputs"), str(corpus / "p0.mlir"), str(corpus / "stream.mlir"))
    lines = table.stdout.splitlines()
    assert lines[1] == (f"grammar coverage: k=1 {report['k1']['total'] - 2}/{report['k1']['total']}, "
                        f"k=2 {report['k2']['covered']}/{report['k2']['total']}")
    assert {line.removeprefix("uncovered k=1: ") for line in lines if line.startswith("uncovered k=1")} == MISSING
    missing = run(str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "nowhere" in missing.stderr


def test_the_fuzz_summary_figure_decodes_every_corpus_file(tmp_path):
    """The figure `loomfuzz fuzz` prints at the end: every file of the corpus folder is a
    fuzz input, whatever its name (libFuzzer's view)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    trees = [t for t in random_trees(G, seed=21, count=3000)
             if not any(_has(t, *m.split("=")) for m in MISSING)][:200]
    for i, tree in enumerate(trees):
        (corpus / f"input{i}.bin").write_bytes(encode(tree, G))
    report = fuzz_corpus_coverage(corpus, G)
    assert set(report.uncovered_k1) == MISSING and set(report.uncovered_k2) == MISSING_PAIRS
    assert report.summary() == (f"grammar coverage: k=1 {report.k1_total - 2}/{report.k1_total}, "
                                f"k=2 {report.k2_total - 4}/{report.k2_total}")
