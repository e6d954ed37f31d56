"""Ranking (harness/core/rank.py) and `loomfuzz enumerate`: counts, the bijection
index <-> tree, shards, and an exhaustive sweep that finds the planted bugs and
resumes after SIGKILL.

The expected trees come from a brute-force expansion written here, over the
grammar as written (the raw fuzzingbook dict), sharing no code with the core.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

import pytest

import shapes
from harness.core.grammar import compile_grammar, default_grammar, load_file
from harness.core.rank import Ranking, RankingError
from harness.core.render import render
from harness.core.walk import random_trees

ROOT = Path(__file__).resolve().parent.parent
GRAMMARS = Path(__file__).parent / "grammars"
NONTERMINAL = re.compile(r"<[^<> ]*>")
PLANTS = "--pass-args=--loom-lower-for-to-graph --plant=assert,segv,fatal,wrong-output"


def _loomfuzz(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=ROOT, **kwargs)


def _raw(path: Path):
    spec = importlib.util.spec_from_file_location(f"raw_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GRAMMAR, getattr(module, "START", "<start>")


def brute_force(grammar: dict, start: str, depth: int) -> list[tuple]:
    """Every derivation tree (symbol, expansion index, children) of depth <= ``depth``,
    alternatives in the order written, children combined as itertools.product does."""

    @lru_cache(maxsize=None)
    def trees(symbol: str, budget: int) -> tuple:
        if budget == 0:
            return ()
        out = []
        for i, expansion in enumerate(grammar[symbol]):
            text = expansion if isinstance(expansion, str) else expansion[0]
            kids = NONTERMINAL.findall(text)
            for combo in itertools.product(*(trees(k, budget - 1) for k in kids)):
                out.append((symbol, i, combo))
        return tuple(out)

    return list(trees(start, depth))


def brute_text(grammar: dict, tree: tuple) -> str:
    """The terminals of a brute-force tree (for grammars without counters or indentation)."""
    symbol, i, kids = tree
    expansion = grammar[symbol][i]
    text = expansion if isinstance(expansion, str) else expansion[0]
    pieces, kid = [], iter(kids)
    for piece in re.split(r"(<[^<> ]*>)", text):
        pieces.append(brute_text(grammar, next(kid)) if NONTERMINAL.fullmatch(piece) else piece)
    return "".join(pieces)


def named(g, node) -> tuple:
    n, a, kids = node
    return (g.names[n], a, tuple(named(g, k) for k in kids))


# ------------------------------------------------------------------ counts


def test_the_default_profile_counts_854700():
    assert Ranking(default_grammar()).count == 854_700
    proc = _loomfuzz("enumerate", "--count-only")
    assert proc.returncode == 0 and proc.stdout == "854700\n", proc.stderr


@pytest.mark.parametrize("name, depths", [("arith_recursive", (5, 6)), ("repetition", (3, 4, 6)),
                                          ("counters_indent", (4, 8, 10)), ("recursive_shape", (10,))])
def test_bounded_recursive_grammars_count_and_order_as_brute_force(name, depths):
    path = GRAMMARS / f"{name}.py"
    g, (grammar, start) = load_file(str(path)), _raw(path)
    for depth in depths:
        expected = brute_force(grammar, start, depth)
        space = Ranking(g, depth)
        assert space.count == len(expected) > 0
        got = [named(g, space.unrank(i)) for i in range(space.count)]
        assert got == expected  # each tree once, in the documented order
        if name == "repetition":  # no counters: the text is the terminals
            texts = [render(space.unrank(i), g) for i in range(space.count)]
            assert texts == [brute_text(grammar, t) for t in expected]


def test_every_index_of_a_small_finite_grammar_is_each_program_once():
    """The default grammar with one thread (924 programs): every index unranks to a
    distinct program, and together they are exactly the brute-force expansion."""
    import grammars.program_shape as shape

    grammar = copy.deepcopy(shape.GRAMMAR)
    grammar["<threads>"] = ["<thread>"]
    g = compile_grammar(grammar, shape.START, shape.RENDERINGS)
    space = Ranking(g)
    expected = brute_force(grammar, shape.START, 100)
    assert space.count == len(expected) == 924
    got = [space.unrank(i) for i in range(space.count)]
    assert [named(g, t) for t in got] == expected
    assert len({render(t, g) for t in got}) == 924
    assert [space.rank(t) for t in got] == list(range(924))


# --------------------------------------------------------------- bijection


def test_rank_and_unrank_are_inverse_on_samples():
    g = default_grammar()
    space = Ranking(g)
    for tree in random_trees(g, seed=11, count=400):
        assert space.unrank(space.rank(tree)) == tree
    rng = random.Random(5)
    for index in [0, 923, 924, space.count - 1, *(rng.randrange(space.count) for _ in range(400))]:
        assert space.rank(space.unrank(index)) == index
    # the order ignores the weights: the same grammar with other probabilities ranks alike
    import grammars.program_shape as shape

    reweighted = copy.deepcopy(shape.GRAMMAR)
    reweighted["<site>"] = [(text, {**options, "prob": p}) for (text, options), p
                            in zip(shape.GRAMMAR["<site>"], (0.1, 0.3, 0.6))]
    other = Ranking(compile_grammar(reweighted, shape.START, shape.RENDERINGS))
    for index in (0, 500, 300_000, space.count - 1):
        assert other.unrank(index) == space.unrank(index)


def test_big_counts_are_exact_on_a_recursive_grammar():
    g = load_file(str(GRAMMARS / "arith_recursive.py"))
    space = Ranking(g, 14)
    assert space.count == _arith_count(14) > 2 ** 500
    trees = [t for t in random_trees(g, seed=4, count=300) if _depth(t) <= 14]
    assert len(trees) > 200
    for tree in trees:
        assert space.unrank(space.rank(tree)) == tree
    # a uniform index is a nearly full tree (2^depth nodes): sample them at depth 10
    space = Ranking(g, 10)
    assert space.count == _arith_count(10) > 2 ** 64
    rng = random.Random(3)
    for index in [space.count - 1, *(rng.randrange(space.count) for _ in range(100))]:
        assert space.rank(space.unrank(index)) == index


def _arith_count(depth: int) -> int:
    """Trees of tests/grammars/arith_recursive.py of depth <= ``depth``, by its recurrence."""
    digit = lambda d: 10 if d >= 1 else 0  # noqa: E731

    @lru_cache(maxsize=None)
    def number(d):
        return 0 if d < 1 else digit(d - 1) + digit(d - 1) * number(d - 1)

    @lru_cache(maxsize=None)
    def term(d):
        return 0 if d < 1 else expr(d - 1) + number(d - 1)

    @lru_cache(maxsize=None)
    def expr(d):
        return 0 if d < 1 else 2 * term(d - 1) * expr(d - 1) + term(d - 1)

    return expr(depth - 1)


def test_what_cannot_be_ranked_is_one_clear_error():
    g = load_file(str(GRAMMARS / "arith_recursive.py"))
    with pytest.raises(RankingError, match=r"recursive \(<expr> derives itself\).*--max-depth"):
        Ranking(g)
    small = Ranking(g, 5)
    deep = next(t for t in random_trees(g, seed=1, count=500) if _depth(t) > 5)
    with pytest.raises(RankingError, match="deeper than the bound 5"):
        small.rank(deep)
    with pytest.raises(RankingError, match="out of range"):
        small.unrank(small.count)
    proc = _loomfuzz("enumerate", "--grammar", GRAMMARS / "arith_recursive.py", "--count", 3)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "--max-depth" in proc.stderr
    proc = _loomfuzz("enumerate", "--start", 854_699, "--count", 2)
    assert proc.returncode == 1 and "past the last index (854,699)" in proc.stderr


def _depth(node) -> int:
    return 1 + max((_depth(k) for k in node[2]), default=0)


# ------------------------------------------------------------------ shards


def test_shards_write_every_index_once(tmp_path):
    g = default_grammar()
    space = Ranking(g)
    start, count = 900, 40  # across the one-thread / two-thread boundary (924)
    for n in (1, 3, 7):
        seen: list[int] = []
        for k in range(n):
            out = tmp_path / f"{n}-{k}"
            proc = _loomfuzz("enumerate", "--start", start, "--count", count, "--shard", f"{k}/{n}",
                             "-o", out, "--no-progress")
            assert proc.returncode == 0, proc.stderr
            for path in out.iterdir():
                index = int(re.fullmatch(r"program-(\d+)\.mlir", path.name).group(1))
                assert path.read_text() == render(space.unrank(index), g)
                seen.append(index)
        assert sorted(seen) == list(range(start, start + count)) and len(seen) == len(set(seen))
    stream = _loomfuzz("enumerate", "--start", start, "--count", 5, "--render", "oracle")
    assert stream.stdout.split("// -----\n") == [render(space.unrank(i), g, "oracle")
                                                 for i in range(start, start + 5)]


# ------------------------------------------------------------------- sweep


def _planted(program: shapes.Program) -> bool:
    """What the fake loom-opt with PLANTS fails on: its first site that is a call
    is rejected cleanly; a planted site before that crashes it; otherwise an
    unwrapped freeze region goes missing from the output (wrong output)."""
    N, B = shapes.Nesting, shapes.Body
    sites = [site for thread in program.threads for site in thread.sites]
    for site in sites:
        if site.body == B.CALL:
            return False
        if (site.nesting, site.body) in {(N.FOR, B.FREEZE), (N.IF, B.MEMORY), (N.IF, B.LOOP)}:
            return True
    return any(site.nesting == N.NONE and site.body == B.FREEZE for site in sites)


def _journal(folder: Path) -> list[dict]:
    (journal,) = folder.glob("sweep-*.jsonl")
    return [json.loads(line) for line in journal.read_text().splitlines()]


def test_an_enumerate_sweep_finds_the_planted_bugs_and_resumes_after_sigkill(fake_loom_opt, tmp_path):
    count = 300
    space = Ranking(default_grammar())
    expected = {i for i in range(count) if _planted(shapes.from_tree(space.unrank(i)))}
    args = ["enumerate", "--run", "--count", str(count), "--loom-opt", fake_loom_opt, PLANTS,
            "--batch-size", "8", "--no-progress", "--artifacts", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            journals = list(tmp_path.glob("sweep-*.jsonl"))
            if journals and journals[0].read_text().count("\n") > 6:
                break
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the harness and the target under way
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL, "killed mid-sweep"
    done_before = sum(hi - lo for lo, hi in (r["done"] for r in _journal(tmp_path)[1:]))
    assert 0 < done_before < count

    resumed = _loomfuzz(*args)
    assert resumed.returncode == 1, resumed.stderr  # findings
    assert f"{count - done_before} run now, {done_before} done before" in resumed.stdout
    records = _journal(tmp_path)[1:]
    covered = sorted(i for r in records for i in range(*r["done"]))
    assert covered == list(range(count))  # every index run exactly once
    findings = {f["index"]: f for r in records for f in r["findings"]}
    assert set(findings) == expected
    assert {f["kind"] for f in findings.values()} >= {"crash", "wrong-output"}
    for index, f in findings.items():  # the finding files hold the program of that index
        text = (tmp_path / f"{f['name']}.mlir").read_text()
        assert text == render(space.unrank(index), default_grammar())
    assert "loomfuzz enumerate: summary" in resumed.stdout
