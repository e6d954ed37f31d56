"""Leaving the contract on purpose: the edge and break profiles, the robustness oracle,
and the planted bugs only they reach (issue 10).

Real mlir-opt-22 for validity, the independent checker (harness.checker) for the broken
preconditions, real atheris campaigns and triage against the fake loom-opt.  The generic
core properties (codec, mutator, minimizer) run on both profiles in tests/test_core.py,
which takes every grammar of grammars.PROFILES.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from grammars.breaks import BREAKABLE, UNBREAKABLE
from harness.checker import check_text
from harness.contract import contract_of, describe_grammar, load_grammar, robust_expectations
from harness.core.compiled import GrammarError
from harness.core.engine import generate
from harness.core.render import render, render_stream
from harness.core.tree import decisions
from harness.core.walk import random_trees
from harness.run.judge import judge
from harness.run.outcome import OutcomeKind
from harness.run.process import run_program
from harness.targets.target import Target

REPO = Path(__file__).resolve().parent.parent


def loomfuzz(*args, cwd: Path, stdin: str | None = None, timeout: float = 300):
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith("LOOMFUZZ_") and k not in ("LOOM_OPT", "MLIR_OPT")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], input=stdin,
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


# ------------------------------------------------------------- break programs


def test_every_precondition_is_breakable_or_explained():
    assert set(BREAKABLE) | set(UNBREAKABLE) == {f"P{n}" for n in range(1, 25)}
    assert not set(BREAKABLE) & set(UNBREAKABLE)


@pytest.mark.parametrize("precondition", BREAKABLE)
def test_break_programs_break_exactly_their_precondition(precondition):
    grammar = load_grammar(None, f"break:{precondition}")
    seen = Counter()
    for tree in generate(grammar, "fast", 10, 200):
        text = render(tree, grammar)
        rules = {v.rule for v in check_text(text)}
        assert rules == {precondition}, (rules, text)
        assert contract_of(grammar, tree) == precondition
        seen.update(grammar.label(n, a) for n, a in decisions(grammar, tree))
    # every variant of the broken rule was drawn (labels of the transformation's own choices)
    assert seen


def test_break_profile_labels_each_program_with_its_precondition():
    grammar = load_grammar(None, "break")
    assert grammar.meta["PROFILE"] == "break"
    firsts = Counter()
    for tree in random_trees(grammar, 3, 600):
        precondition = contract_of(grammar, tree)
        firsts[precondition] += 1
        assert {v.rule for v in check_text(render(tree, grammar))} == {precondition}
    assert set(firsts) == set(BREAKABLE)  # every precondition drawn (600 draws, 24 branches)


def test_loomfuzz_check_names_the_broken_precondition(tmp_path):
    generated = loomfuzz("generate", "--break", "P21", "-n", "6", "--seed", "2", cwd=tmp_path)
    assert generated.returncode == 0, generated.stderr
    checked = loomfuzz("check", "-", cwd=tmp_path, stdin=generated.stdout)
    assert checked.returncode == 1
    rules = re.findall(r"^<stdin>:\d+:\d+: (P\d+|C\d+):", checked.stdout, re.M)
    assert rules and set(rules) == {"P21"}, checked.stdout
    bad = loomfuzz("generate", "--break", "P25", cwd=tmp_path)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "P25" in bad.stderr
    mixed = loomfuzz("generate", "--profile", "edge", "--break", "P3", cwd=tmp_path)
    assert mixed.returncode != 0 and "--break goes with --profile break" in mixed.stderr


def test_generate_stats_on_both_profiles(tmp_path):
    for profile in ("edge", "break"):
        result = loomfuzz("generate", "--profile", profile, "-n", "3000", "--stats", "-o", "-", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "while" in result.stderr if profile == "edge" else "P24" in result.stderr


# --------------------------------------------------------------- edge programs


def test_edge_programs_are_valid_mlir(mlir_opt, tmp_path):
    grammar = load_grammar(None, "edge")
    stream = tmp_path / "edge.mlir"
    stream.write_text("".join(render_stream(generate(grammar, "fast", 1, 2000), grammar, "oracle")))
    result = subprocess.run([mlir_opt, "--allow-unregistered-dialect", "--split-input-file", str(stream),
                             "-o", "/dev/null"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_edge_programs_leave_the_contract(tmp_path):
    grammar = load_grammar(None, "edge")
    outside = 0
    for tree in generate(grammar, "fast", 4, 300):
        contract = contract_of(grammar, tree)
        broken = check_text(render(tree, grammar), conventions=True)
        # a construct named: the checker sees a precondition or a default-profile convention
        # broken (a quoted graph name is a string, P16 allows it; "graph_0" on region 0 itself
        # is the one clash that may not clash)
        if contract not in ("edge", "edge: name-clash-region"):
            assert broken, contract
            outside += 1
    assert outside > 200


def test_edge_reach_covers_every_alternative():
    grammar = load_grammar(None, "edge")
    reached = Counter()
    for tree in generate(grammar, "fast", 5, 10_000):
        reached.update(decisions(grammar, tree))
    missing = [(grammar.names[n], grammar.label(n, a)) for n in grammar.decisions()
               for a in range(len(grammar.alts[n])) if not reached[(n, a)]]
    assert not missing


# ------------------------------------------------------------ robustness oracle


def test_robustness_oracle_accepts_either_clean_outcome(tmp_path):
    expectations = robust_expectations()
    program = render(next(iter(random_trees(load_grammar(None, "edge"), 1, 1))), load_grammar(None, "edge"))
    verdicts = {}
    for name, script in {
        "accepted": "cat >/dev/null; echo ok",
        "rejected": "cat >/dev/null; echo '<stdin>:1:1: error: no' >&2; exit 1",
        "silent-exit-1": "cat >/dev/null; exit 1",
        "crash": "cat >/dev/null; kill -SEGV $$",
    }.items():
        target = Target("sh", ("/bin/sh", "-c", script), expectations=expectations, timeout=10)
        verdicts[name] = judge(target, program, run_program(target, program))
    assert not verdicts["accepted"].finding and not verdicts["rejected"].finding
    assert verdicts["silent-exit-1"].finding and verdicts["crash"].finding
    assert verdicts["crash"].outcome.kind is OutcomeKind.CRASH


# ----------------------------------------------------- planted off-contract bugs


def _first(profile: str, wanted) -> str:
    grammar = load_grammar(None, profile)
    for tree in random_trees(grammar, 8, 5000):
        text = render(tree, grammar)
        if wanted(text, contract_of(grammar, tree)):
            return text
    raise AssertionError(f"no {profile} program of that kind in 5000 draws")


def test_planted_bugs_outside_the_contract(fake_loom_opt):
    def run(plant: str, text: str, timeout: float = 10):
        target = Target("loom-opt", (fake_loom_opt, f"--plant={plant}"), timeout=timeout,
                        expectations=robust_expectations())
        return run_program(target, text)

    forall = _first("edge", lambda t, c: "scf.forall" in t and "thread_0\"" not in t)
    assert run("forall", forall).signal_name == "SIGABRT"
    assert run("none", forall).kind is not OutcomeKind.CRASH
    quoted = _first("edge", lambda t, c: 'graph_name = "graph ' in t)
    assert run("quoted-name", quoted).signal_name == "SIGSEGV"
    nested = _first("edge", lambda t, c: c.startswith("edge") and "two-levels" in c)
    assert run("two-levels", nested, timeout=1).kind is OutcomeKind.TIMEOUT
    no_yield = _first("break", lambda t, c: c == "P7")
    assert run("no-yield", no_yield).signal_name == "SIGABRT"
    # the default profile reaches none of them
    grammar = load_grammar()
    stream = "".join(render_stream(generate(grammar, "fast", 3, 400), grammar, "canonical"))
    result = subprocess.run([fake_loom_opt, "--plant=off-contract", "--split-input-file"], input=stream,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode in (0, 1) and "Stack dump" not in result.stderr


def _campaign(fake: str, tmp: Path, plants: str, *profile_args: str, runs: int = 300):
    corpus, artifacts = tmp / "corpus", tmp / "artifacts"
    return loomfuzz("fuzz", "--loom-opt", fake, "--pass-args", f"--plant={plants} --loom-lower-for-to-graph",
                    *profile_args, "--corpus", corpus, "--artifacts", artifacts,
                    "--runs", runs, "--seed", 3, "--timeout", 5, cwd=tmp), artifacts


def _triage(fake: str, tmp: Path, plants: str, artifacts: Path, *profile_args: str) -> dict:
    out = tmp / "triage"
    result = loomfuzz("triage", "--loom-opt", fake, "--pass-args", f"--plant={plants} --loom-lower-for-to-graph",
                      *profile_args, "--out", out, "--repeat", 1, artifacts, cwd=tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


@pytest.mark.parametrize("profile_args, plants, contract", [
    (("--profile", "edge"), "forall,quoted-name", r"^edge: .*(forall|name-)"),
    (("--profile", "break"), "no-yield", r"^P7$"),
])
def test_off_contract_campaign_finds_and_triages_its_bug(fake_loom_opt, tmp_path, profile_args, plants,
                                                         contract):
    result, artifacts = _campaign(fake_loom_opt, tmp_path, plants, *profile_args)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in artifacts.glob("crash-*.json")]
    assert records
    for record in records:
        assert record["profile"] == profile_args[1]
        assert re.search(contract, record["contract"]), record["contract"]
        assert record["expected"].startswith("either"), record["expected"]
    report, markdown = _triage(fake_loom_opt, tmp_path, plants, artifacts, *profile_args)
    assert report["buckets"]
    for bucket in report["buckets"]:
        assert bucket["kind"] == "crash" and bucket["profile"] == profile_args[1]
        assert re.search(contract, bucket["minimized"]["contract"]), bucket["minimized"]
        assert all(m["profile"] == profile_args[1] for m in bucket["inputs"])
    assert "contract the minimized program breaks: " in markdown
    assert f"- profile: {profile_args[1]}" in markdown


def test_default_profile_finds_none_of_them(fake_loom_opt, tmp_path):
    result, artifacts = _campaign(fake_loom_opt, tmp_path, "off-contract")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    executions = re.search(r"executions:\s+(\d+)", result.stdout)
    assert executions and int(executions.group(1)) >= 300, result.stdout  # the whole budget ran
    assert not list(artifacts.glob("crash-*"))


def test_break_campaign_of_one_precondition(fake_loom_opt, tmp_path):
    result, artifacts = _campaign(fake_loom_opt, tmp_path, "no-yield", "--break", "P7", runs=100)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    (record,) = [json.loads(p.read_text()) for p in artifacts.glob("crash-*.json")]
    assert record["profile"] == "break:P7" and record["contract"] == "P7"


def test_unknown_break_is_one_line():
    with pytest.raises(GrammarError, match="P1 ... P24"):
        load_grammar(None, "break:P0")
    assert describe_grammar(load_grammar(None, "break:P9"))["profile"] == "break:P9"
