"""Batched runs (harness/run/batch.py) against the planted-bug fake loom-opt:
batched and one-by-one runs give the same outcomes and the same findings.

Programs come from the generator and are sorted by what a run alone does
(accepted, rejected, crash, hang), so the tests do not depend on how the
fake reads a program.
"""

from __future__ import annotations

import json

import pytest

from harness.core.engine import generate as generate_trees
from harness.core.grammar import default_grammar
from harness.core.render import render as render_tree
from harness.run.batch import BatchSizer, batchable, join_programs, run_alone, run_batch
from harness.run.judge import write_finding
from harness.targets.target import Target

G = default_grammar()


def generate(engine: str, seed: int, count: int):
    return generate_trees(G, engine, seed, count)


def render(tree, style: str = "canonical") -> str:
    return render_tree(tree, G, style)


PLANTS = "--plant=assert,segv,fatal,wrong-output"  # the deterministic ones


def _target(binary: str, plants: str = PLANTS, timeout: float = 10.0) -> Target:
    return Target("loom-opt", (binary, "--loom-lower-for-to-graph", plants), timeout=timeout)


def _key(result, *, with_stderr: bool = True):
    """Everything of a result that must not depend on batching (not the duration,
    nor a crash's stack addresses, which change from run to run)."""
    o, v = result.outcome, result.verdict
    finding = v.finding
    return (o.kind, o.returncode, o.signal, o.reason, o.stdout,
            o.stderr if with_stderr and not finding else None,
            v.finding, v.kind, v.rule, v.expected, v.why)


@pytest.fixture(scope="module")
def pools(fake_loom_opt):
    """Generated canonical programs by what they do alone: accepted, rejected, crash."""
    target = _target(fake_loom_opt)
    pools: dict[str, list[str]] = {"accepted": [], "rejected": [], "crash": [], "finding": []}
    for program in generate("fast", 11, 150):
        text = render(program, "canonical")
        r = run_alone(target, text)
        if r.verdict.finding:
            pools["finding"].append(text)
        if r.outcome.kind.value in pools and (r.outcome.kind.value != "accepted" or not r.verdict.finding):
            pools[r.outcome.kind.value].append(text)
    assert len(pools["accepted"]) >= 10 and len(pools["rejected"]) >= 5 and len(pools["crash"]) >= 3
    return pools


@pytest.fixture(scope="module")
def hanging(fake_loom_opt):
    """A generated program that hangs the fake with --plant=hang."""
    target = _target(fake_loom_opt, "--plant=hang", timeout=1.0)
    for program in generate("fast", 12, 300):
        text = render(program, "canonical")
        if "scf.for" in text and "%sel = scf.if" in text and run_alone(target, text).outcome.kind.value == "timeout":
            return text
    pytest.fail("no generated program hangs the fake loom-opt")


def _alone_all(target, texts):
    return [run_alone(target, t) for t in texts]


def test_batched_equals_alone_on_a_mixed_sample(fake_loom_opt, pools, tmp_path):
    target = _target(fake_loom_opt)
    texts = [render(p, "canonical") for p in generate("fast", 5, 60)]
    alone = _alone_all(target, texts)
    assert any(r.verdict.finding for r in alone) and any(r.outcome.kind.value == "rejected" for r in alone)
    for size in (60, 7):
        batched = []
        for i in range(0, len(texts), size):
            batched.extend(run_batch(target, texts[i:i + size]).results)
        assert [_key(r) for r in batched] == [_key(r) for r in alone], f"batch size {size}"
        assert all(r.alone for r in batched if r.verdict.finding)
    # the finding files are the same: names, programs and what the sidecars say
    for name, results in (("alone", alone), ("batched", batched)):
        for k, (text, r) in enumerate(zip(texts, results)):
            if r.verdict.finding:
                write_finding(tmp_path / name, f"crash-{k}", text, target, r.verdict, suffix=".mlir")
    files = {name: sorted(p.name for p in (tmp_path / name).iterdir()) for name in ("alone", "batched")}
    assert files["alone"] == files["batched"] and files["alone"]
    for f in files["alone"]:
        a, b = (tmp_path / "alone" / f).read_text(), (tmp_path / "batched" / f).read_text()
        if f.endswith(".mlir"):
            assert a == b
        else:
            ja, jb = json.loads(a), json.loads(b)
            for field in ("outcome", "returncode", "signal", "reason", "finding_kind", "why", "rule", "command"):
                assert ja[field] == jb[field], (f, field)


def test_rejections_are_read_off_one_process(fake_loom_opt, pools):
    """Rejected programs do not make a batch fail: their diagnostics are attributed
    by line and renumbered to what the program prints alone."""
    target = _target(fake_loom_opt)
    texts = pools["accepted"][:4] + pools["rejected"][:3] + pools["accepted"][4:6]
    report = run_batch(target, texts)
    assert report.processes == 1 and report.bisections == 0
    assert [_key(r) for r in report.results] == [_key(r) for r in _alone_all(target, texts)]
    first_rejected = report.results[4].outcome.stderr
    assert first_rejected.startswith("<stdin>:") and "is not a registered canonical Dataflow actor" in first_rejected


def test_crash_in_the_last_program(fake_loom_opt, pools):
    target = _target(fake_loom_opt)
    texts = pools["accepted"][:7] + [pools["crash"][0]]
    report = run_batch(target, texts)
    assert report.bisections >= 1
    assert [_key(r) for r in report.results] == [_key(r) for r in _alone_all(target, texts)]
    assert [r.verdict.finding for r in report.results] == [False] * 7 + [True]
    assert report.results[-1].alone and report.results[-1].outcome.kind.value == "crash"


def test_two_crashing_programs(fake_loom_opt, pools):
    target = _target(fake_loom_opt)
    acc, crash = pools["accepted"], pools["crash"]
    texts = [acc[0], crash[0], acc[1], pools["rejected"][0], acc[2], crash[1], acc[3], acc[4], acc[5]]
    report = run_batch(target, texts)
    assert [_key(r) for r in report.results] == [_key(r) for r in _alone_all(target, texts)]
    assert [k for k, r in enumerate(report.results) if r.verdict.finding] == [1, 5]
    assert report.processes < 2 * len(texts)


def test_a_hang_inside_a_batch_is_isolated(fake_loom_opt, pools, hanging):
    target = _target(fake_loom_opt, "--plant=hang", timeout=1.0)
    # programs that do the same under this target (a branch in scf.for would hang it too)
    def alone(kind: str) -> list[str]:
        return [t for t in pools[kind][:12] if run_alone(target, t).outcome.kind.value == kind]

    calm, rejected = alone("accepted")[:5], alone("rejected")[:1]
    texts = calm[:3] + [hanging] + rejected + calm[3:5]
    report = run_batch(target, texts)
    kinds = [r.outcome.kind.value for r in report.results]
    assert kinds == ["accepted"] * 3 + ["timeout", "rejected"] + ["accepted"] * 2
    assert report.results[3].alone and report.results[3].verdict.kind == "timeout"
    assert [_key(r) for r in report.results] == [_key(r) for r in _alone_all(target, texts)]


def test_a_hang_under_a_short_batch_limit_still_gets_the_full_timeout_alone(fake_loom_opt, pools, hanging):
    """Batches under a limit shorter than --timeout: the hang is found by halving
    under the short limit, then runs alone under the full one."""
    target = _target(fake_loom_opt, "--plant=hang", timeout=1.0)
    texts = pools["accepted"][:3] + [hanging] + pools["accepted"][3:4]
    report = run_batch(target, texts, batch_timeout=lambda n: 0.25)
    hang = report.results[3]
    assert hang.alone and hang.outcome.kind.value == "timeout" and hang.outcome.reason == "timed out after 1s"
    assert [_key(r) for r in report.results] == [_key(r) for r in _alone_all(target, texts)]


def test_a_program_holding_the_marker_runs_alone(fake_loom_opt, pools):
    target = _target(fake_loom_opt)
    odd = pools["accepted"][0].replace("module {", "// ----- not a split here\nmodule {", 1)
    assert not batchable(odd) and not batchable("  \n") and batchable(pools["accepted"][1])
    assert not batchable(pools["accepted"][1].rstrip("\n"))
    report = run_batch(target, [pools["accepted"][1], odd, pools["accepted"][2]])
    assert report.results[1].alone and report.alone == 1 and report.processes == 2
    assert [_key(r) for r in report.results] == [_key(r) for r in _alone_all(target, [pools["accepted"][1], odd, pools["accepted"][2]])]


def test_join_programs_numbers_lines():
    joined, starts = join_programs(["a\nb\n", "c", "d\ne\nf\n"])
    assert joined == "a\nb\n// -----\nc\n// -----\nd\ne\nf\n"
    assert starts == [1, 4, 6, 10]


def test_a_target_without_split_input_file_falls_back_to_one_process_each(fake_loom_opt, pools, tmp_path):
    """A tool that rejects --split-input-file: results stay right (bisected down to
    single runs) and the sizer gives up batching after three such batches."""
    wrapper = tmp_path / "no-split"
    wrapper.write_text(f"""#!/bin/sh
for a in "$@"; do
  if [ "$a" = --split-input-file ]; then echo "no-split: Unknown command line argument '$a'." >&2; exit 1; fi
done
exec {fake_loom_opt} "$@"
""")
    wrapper.chmod(0o755)
    target = Target("loom-opt", (str(wrapper), PLANTS))
    texts = pools["accepted"][:4] + pools["rejected"][:2]
    sizer = BatchSizer(target.timeout)
    for _ in range(3):
        report = run_batch(target, texts)
        assert [_key(r) for r in report.results] == [_key(r) for r in _alone_all(target, texts)]
        sizer.record(report, len(texts))
    assert sizer.size == 1 and "--split-input-file" in sizer.warning


def test_sizer_follows_the_cost_of_a_program():
    from harness.run.batch import BatchReport

    sizer = BatchSizer(timeout=10.0)
    assert sizer.size == BatchSizer.START
    for _ in range(10):  # 2 ms a program: 0.5 s / 2 ms = 250, reached by doubling
        sizer.record(BatchReport(clean_batches=1, clean_programs=sizer.size,
                                 clean_seconds=0.002 * sizer.size), sizer.size)
    assert sizer.size == 250
    assert BatchSizer(timeout=10.0, fixed=1).size == 1
    # a batch's time limit: 10x its expected time, at least 1 s, at most the timeout
    assert BatchSizer(timeout=10.0).batch_timeout(100) == 10.0  # nothing measured yet
    assert sizer.batch_timeout(100) == pytest.approx(2.0)
    assert sizer.batch_timeout(2) == 1.0 and sizer.batch_timeout(10_000) == 10.0
