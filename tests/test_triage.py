"""Crash triage (issue 4): parser, signatures, minimizer, database, pipeline, reports, CLI.

Everything runs for real: the fake loom-opt (tests/fixtures/fake_loom_opt.c)
is a real process with planted bugs, ``loomfuzz triage`` a real subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.triage import crashdb
from harness.checker import check_text
from harness.core.grammar import default_grammar
from harness.core.tree import decisions
from harness.core.tree import describe as describe_tree
from harness.triage.crashdb import TriageDB
from harness.core.parse import normalise, split_programs
from harness.core.parse import parse as parse_text
from harness.core.reduce import minimize, reduce_lines, sort_key
from harness.core.render import SPLIT_MARKER
from harness.run.judge import judge
from harness.run.process import run_program
from harness.targets.target import resolve_target
from harness.triage.signature import (
    Signature,
    clean_function,
    crash_signature,
    filecheck_pattern,
    normalise_message,
    signature_of,
    stack_frames,
)
from shapes import Body, Nesting, Program, Thread, decode_program, from_shape, from_tree, make_site
from shapes import random_programs, to_tree
from shapes import render_program as render

G = default_grammar()


def describe(program: Program) -> str:
    """What triage records of a program: the core's summary of its tree."""
    return describe_tree(G, to_tree(program))


def parse(text: str):
    """(program or None, the parser's answer)."""
    parsed = parse_text(text, G)
    return (from_tree(parsed.tree) if parsed.ok else None), parsed


def first_differing_line(a: str, b: str) -> int:
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if x != y:
            return number
    return min(len(a.splitlines()), len(b.splitlines())) + 1

from tests.triage_inputs import MINIMAL, expected_bug, make_corpus, run_lit_test, triggers

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]
DETERMINISTIC = "--plant=assert,segv,fatal --loom-lower-for-to-graph"


def loomfuzz(*args, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*LOOMFUZZ, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def triage_args(fake, db, out, *inputs, pass_args=DETERMINISTIC, extra=()):
    return [
        "triage", "--loom-opt", fake, f"--pass-args={pass_args}", "--db", db, "--out", out,
        "--jobs", "2", "--no-progress", *extra, *inputs,
    ]


# ================================================================== parser


def test_parser_round_trips_both_renderings():
    for program in random_programs(11, 400):
        for style in ("canonical", "oracle"):
            found, parsed = parse(render(program, style))
            assert parsed.ok and found == program and parsed.style == style, describe(program)


def test_parser_accepts_the_spec_example_and_comment_and_whitespace_noise():
    text = (Path(__file__).parent / "programs" / "canonical.mlir").read_text()
    found, parsed = parse(text)
    assert parsed.ok and found == from_shape("t0[icall; arith, if:memory] t1[for:branch]")
    noisy = "// crash-123: t0[...]\n\n" + "\r\n".join(line + "  " for line in text.split("\n")) + "\n\n\n"
    assert parse(noisy)[0] == found
    assert normalise(noisy) == normalise(text)


@pytest.mark.parametrize(
    "edit, reason",
    [
        (lambda t: t.replace("%hi = arith.constant 2", "%hi = arith.constant 3", 1), "line"),
        (lambda t: t.replace("llvm.freeze %a", "llvm.thaw %a"), "line"),
        (lambda t: t.replace("  %lo = arith.constant", "\n  %lo = arith.constant", 1), "line"),
        (lambda t: t + "func.func @extra() {\n}\n", "line"),
        (lambda t: "", "empty"),
        (lambda t: t + SPLIT_MARKER + t, "several programs"),
    ],
)
def test_parser_rejects_texts_out_of_the_grammar_with_a_reason(edit, reason):
    program = Program((Thread(True, (make_site(Nesting.FOR, Body.FREEZE), make_site(Nesting.IF, Body.CALL, 1))),))
    original = render(program)
    edited = edit(original)
    found, parsed = parse(edited)
    assert found is None and reason in parsed.reason, parsed.reason
    if reason == "line":  # the line where the text leaves every program of the grammar
        assert parsed.reason.startswith(f"line {first_differing_line(original, edited)}: not a program of"), \
            parsed.reason


def test_parser_rejects_programs_outside_the_profile():
    three = Program(tuple(Thread(False, (make_site(0, 0),)) for _ in range(3)))
    text = render(three)
    found, parsed = parse(text)
    third = next(n for n, line in enumerate(text.splitlines(), 1) if "@thread_2" in line)
    assert found is None and parsed.reason.startswith(f"line {third}:"), parsed.reason


def test_split_programs():
    a, b = MINIMAL["assert"], MINIMAL["segv"]
    chunks = split_programs("".join(render_stream_pair(a, b)))
    assert [parse(c)[0] for c in chunks] == [a, b]


def render_stream_pair(a, b):
    from harness.core.render import render_stream

    return render_stream([to_tree(a), to_tree(b)], G)


# =============================================================== signatures

ASSERT_STDERR = """\
{tool}: lib/Conversion/LowerForToGraph.cpp:412: mlir::LogicalResult loom::FreezeLowering::matchAndRewrite(mlir::LLVM::FreezeOp, mlir::PatternRewriter&) const: Assertion `!isa<scf::ForOp>(parent) && "freeze under loop"' failed.
PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/ and include the crash backtrace.
Stack dump:
0.\tProgram arguments: {tool} --loom-lower-for-to-graph {input}
 #0 0x{a0} llvm::sys::PrintStackTrace(llvm::raw_ostream&, int) ({tool}+0x47a5a0)
 #1 0x{a1} llvm::sys::RunSignalHandlers() ({tool}+0x42f130)
 #2 0x{a2} SignalHandler(int) ({tool}+0x2b8c50)
 #3 0x00007f18f273c050 (/lib/x86_64-linux-gnu/libc.so.6+0x3c050)
 #4 0x00007f18f278aebc __pthread_kill_implementation ./nptl/pthread_kill.c:44:76
 #5 0x00007f18f273bfb2 raise ./signal/../sysdeps/posix/raise.c:27:6
 #6 0x00007f18f2726472 abort ./stdlib/abort.c:81:7
 #7 0x00007f18f2735d92 __assert_fail ./assert/assert.c:105:3
 #8 0x{a3} loom::FreezeLowering::matchAndRewrite(mlir::LLVM::FreezeOp, mlir::PatternRewriter&) const ({tool}+0x{o})
 #9 0x{a4} mlir::PatternApplicator::matchAndRewrite(mlir::Operation*, mlir::PatternRewriter&, llvm::function_ref<bool (mlir::Pattern const&)>) ({tool}+0x20cb60)
 #10 0x{a5} loom::LowerForToGraphPass::lowerLoopBody(mlir::scf::ForOp) /src/loom/lib/Conversion/LowerForToGraph.cpp:{line}:7
 #11 0x{a6} loom::LowerForToGraphPass::runOnOperation() ({tool}+0x21cbb0)
 #12 0x{a7} main ({tool}+0x41bb50)
 #13 0x00007f18f272724a __libc_start_call_main ./csu/../sysdeps/nptl/libc_start_call_main.h:74:3
"""


def _assert_sample(seed: int, tool: str, input_: str, line: int) -> str:
    import random

    rng = random.Random(seed)
    addresses = {f"a{k}": f"{rng.getrandbits(48):016x}" for k in range(8)}
    return ASSERT_STDERR.format(tool=tool, input=input_, o=f"{rng.getrandbits(20):x}", line=line, **addresses)


def test_signature_ignores_addresses_offsets_paths_and_input_names():
    a = crash_signature(_assert_sample(1, "/opt/loom/bin/loom-opt", "<stdin>", 120), signal=6)
    b = crash_signature(_assert_sample(2, "/home/ci/build/loom-raise-opt", "/tmp/crash-abc.mlir", 131), signal=6)
    assert a == b
    assert a.key == (
        'crash:assert | !isa<scf::ForOp>(parent) && "freeze under loop" | '
        "loom::FreezeLowering::matchAndRewrite | mlir::PatternApplicator::matchAndRewrite | "
        "loom::LowerForToGraphPass::lowerLoopBody"
    )
    assert "0x" not in a.key and "+" not in a.key and "stdin" not in a.key


def test_signature_of_segv_llvm_error_unreachable_and_sanitizer():
    segv = """PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/
Stack dump:
0.\tProgram arguments: loom-opt
 #0 0x000055865a4865a0 llvm::sys::PrintStackTrace(llvm::raw_ostream&, int) (/x/loom-opt+0x47a5a0)
 #1 0x000055865a43b130 llvm::sys::RunSignalHandlers() (/x/loom-opt+0x42f130)
 #2 0x000055865a2c4c50 SignalHandler(int) (/x/loom-opt+0x2b8c50)
 #3 0x00007fb30993c050 (/lib/x86_64-linux-gnu/libc.so.6+0x3c050)
 #4 0x000055865a4243e0 loom::MemoryLowering::rewriteStore(mlir::memref::StoreOp, loom::GraphBuilder&) (/x/loom-opt+0x4183e0)
 #5 0x000055865a177820 (/x/loom-opt+0x16b820)
 #6 0x000055865a33f740 void std::__invoke_impl<void, (anonymous namespace)::Walker&>(std::__invoke_other, (anonymous namespace)::Walker&) (/x/loom-opt+0x333740)
 #7 0x000055865a228bb0 (anonymous namespace)::Lowering::operator()(mlir::Operation*) const (/x/loom-opt+0x21cbb0)
"""
    s = crash_signature(segv, signal=11)
    assert s.key == (
        "crash:SIGSEGV | loom::MemoryLowering::rewriteStore | "
        "std::__invoke_impl<void, (anonymous namespace)::Walker&> | (anonymous namespace)::Lowering::operator()"
    )
    fatal = crash_signature("LLVM ERROR: iter_args in a conditional region are not supported\n", returncode=1)
    assert fatal.key == "crash:llvm-error | iter_args in a conditional region are not supported"
    unreachable = crash_signature(
        "unknown graph kind 7\nUNREACHABLE executed at /src/loom/lib/Graph.cpp:88!\n", signal=6
    )
    assert unreachable.key == "crash:unreachable | unknown graph kind N"
    asan = """=================================================================
==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010 at pc 0x55d3 bp 0x7ffc sp 0x7ffc
READ of size 4 at 0x602000000010 thread T0
    #0 0x55d3f1 in loom::GraphBuilder::lookup(mlir::Value) /src/loom/lib/GraphBuilder.cpp:55:10
    #1 0x55d3f2 in loom::BranchLowering::rewrite(mlir::scf::IfOp) const /src/loom/lib/Branch.cpp:12:3
    #2 0x55d3f3 in main /src/loom/tools/loom-opt.cpp:20:3
freed by thread T0 here:
    #0 0x4f00 in operator delete(void*) (/x/loom-opt+0x4f00)
    #1 0x55d3f9 in loom::GraphBuilder::erase(mlir::Value) /src/loom/lib/GraphBuilder.cpp:80:3
"""
    s = crash_signature(asan, returncode=1)
    assert s.key == (
        "crash:sanitizer | AddressSanitizer: heap-use-after-free | "
        "loom::GraphBuilder::lookup | loom::BranchLowering::rewrite"
    )


def test_signature_message_normalisation():
    a = normalise_message("<stdin>:20:3: error: 'loom.spatial_region' op value %r12 of @graph_3 at 0x7ffe12")
    b = normalise_message("/tmp/t/crash-9.mlir:61:5: error: 'loom.spatial_region' op value %r0 of @graph_0 at 0x5a")
    assert a == b == "error: 'loom.spatial_region' op value %rN of @graph_N at 0xN"
    assert normalise_message("no dataflow.graph for @graph_0, @graph_2") == "no dataflow.graph for @graph_N"
    assert "memref<4xi32>" in normalise_message("type memref<4xi32> vs i32")
    assert filecheck_pattern("<stdin>:3:4: error: bad {{x}}") == "{{.*}}error: bad {{[{][{]}}x}}"


def test_frame_cleaning():
    assert clean_function("in mlir::foo(int) /src/x.cpp:12:3") == "mlir::foo"
    assert clean_function("void llvm::function_ref<void (mlir::Operation*)>::callback_fn<X>(long) (/b+0x1)") == (
        "llvm::function_ref<void (mlir::Operation*)>::callback_fn<X>"
    )
    assert clean_function("bool llvm::operator<<(llvm::raw_ostream&, int)") == "llvm::operator<<"
    assert clean_function("(/lib/x86_64-linux-gnu/libc.so.6+0x3c050)") == ""
    assert stack_frames(" #0 0x1 a() (/b+0x1)\n #1 0x2 b() (/b+0x2)\n #0 0x3 c() (/b+0x3)\n") == ["a", "b"]


def _run_signature(target, program):
    text = render(program)
    outcome = run_program(target, text)
    return signature_of(judge(target, text, outcome))


def test_same_bug_through_different_programs_same_signature_and_bugs_differ(fake_loom_opt):
    target = resolve_target("loom-opt", loom_opt=fake_loom_opt, pass_args=["--plant=assert,segv,fatal"])
    by_bug: dict[str, set[str]] = {}
    count: dict[str, int] = {}
    for program in random_programs(5, 3000):
        if "flaky" in triggers(program):
            continue
        bug = expected_bug(program, ("assert", "segv", "fatal"))
        if bug is None or count.get(bug, 0) >= 4:
            continue
        count[bug] = count.get(bug, 0) + 1
        by_bug.setdefault(bug, set()).add(_run_signature(target, program).key)
    assert sorted(by_bug) == ["assert", "fatal", "segv"]
    assert all(len(keys) == 1 for keys in by_bug.values()), by_bug
    assert len({next(iter(keys)) for keys in by_bug.values()}) == 3
    clean = Program((Thread(False, (make_site(0, 0),)),))
    assert _run_signature(target, clean) is None


# ================================================================ minimizer


def _model(bug):
    def interesting(tree):
        try:
            return expected_bug(from_tree(tree), ("assert", "segv", "fatal")) == bug
        except ValueError:
            return False

    return interesting


def test_minimize_reaches_the_smallest_program_and_never_tests_twice():
    seen = []
    for program in random_programs(3, 4000):
        bug = expected_bug(program, ("assert", "segv", "fatal")) if "flaky" not in triggers(program) else None
        if bug is None:
            continue
        asked = []
        model = _model(bug)

        def predicate(p):
            asked.append(p)
            return model(p)

        result = minimize(to_tree(program), G, predicate)
        assert from_tree(result.tree) == MINIMAL[bug], (describe(program), describe_tree(G, result.tree))
        assert len(asked) == len(set(asked)) == result.evaluations
        assert to_tree(program) not in asked
        seen.append(result.evaluations)
    assert len(seen) > 100
    assert sorted(seen)[len(seen) // 2] <= 10


def test_minimize_respects_the_budget_and_every_candidate_is_checker_valid():
    from harness.core.render import render as render_tree

    program = Program((Thread(True, (make_site(2, 2), make_site(1, 5, 1))), Thread(True, (make_site(2, 3), make_site(1, 4)))))
    tree = to_tree(program)
    asked = []

    def predicate(candidate):
        asked.append(candidate)
        return _model("assert")(candidate)

    result = minimize(tree, G, predicate)
    assert from_tree(result.tree) == MINIMAL["assert"]
    for candidate in asked:
        assert check_text(render_tree(candidate, G)) == []
        assert sort_key(G, candidate) < sort_key(G, tree)
    result = minimize(tree, G, _model("assert"), max_evaluations=2)
    assert result.exhausted and result.evaluations == 2


def test_reduce_lines_ddmin():
    text = "".join(f"line {k}\n" for k in range(40))
    result = reduce_lines(text, lambda t: "line 7\n" in t and "line 31\n" in t)
    assert result.text == "line 7\nline 31\n" and result.lines == 2
    assert result.evaluations < 120


# ================================================================= database


def test_database_refuses_files_that_are_not_ours(tmp_path):
    text = tmp_path / "notes.db"
    text.write_text("hello, not a database\n")
    with pytest.raises(crashdb.DatabaseError, match="notes.db"):
        TriageDB(text)
    assert text.read_text() == "hello, not a database\n"
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(crashdb.DatabaseError, match="not a loom-fuzz triage database"):
        TriageDB(other)
    with pytest.raises(crashdb.DatabaseError, match="no triage database"):
        TriageDB(tmp_path / "missing.db", create=False)


def test_database_records_are_idempotent(tmp_path):
    db = TriageDB(tmp_path / "t.db")
    run, resumed = db.begin_run({"argv": ["x"]}, 3)
    assert not resumed
    record = crashdb.MemberRecord(
        "ab" * 32, "tree", "t0[arith]", b"", "text\n", 1, None, "always", 3, 3, "crash", "why", "err", "p"
    )
    sig = Signature("crash", "SIGSEGV", "", ("f",))
    m1, b1, new1 = db.record_member(run, record, [("p", "x")], sig)
    m2, b2, new2 = db.record_member(run, record, [("p", "x"), ("q", "x")], sig)
    assert new1 and not new2 and (m1, b1) == (m2, b2)
    assert db.counts()["members"] == 1 and db.counts()["files"] == 2 and db.bucket(b1)["count"] == 1
    # an unfinished run (its process is gone) is resumed, not duplicated
    db.conn.execute("UPDATE runs SET pid = 999999999 WHERE id = ?", (run,))
    assert db.begin_run({"argv": ["x"]}, 3) == (run, True)
    db.finish_run(run)
    run2, resumed = db.begin_run({"argv": ["x"]}, 3)
    assert run2 != run and not resumed
    db.record_sighting(run2, m1, [("p", "x")])
    assert db.bucket(b1)["status"] == "new"  # seen again is no mark: only a user sets known
    db.mark(b1, "fixed")
    assert db.bucket(b1)["status"] == "fixed"
    db.close()


# ================================================================= pipeline


@pytest.fixture(scope="module")
def triaged(tmp_path_factory, fake_loom_opt):
    """One uninterrupted triage of ~40 crashing among ~260 clean inputs."""
    root = tmp_path_factory.mktemp("triage")
    corpus = make_corpus(root / "fuzz", seed=2024, crashing=40, clean=260)
    db, out = root / "triage.db", root / "out"
    started = time.monotonic()
    proc = loomfuzz(*triage_args(fake_loom_opt, db, out, root / "fuzz"))
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    with TriageDB(db, create=False) as handle:
        snapshot = handle.snapshot()
    report = json.loads((out / "report.json").read_text())
    return {"root": root, "corpus": corpus, "db": db, "out": out, "proc": proc, "report": report,
            "snapshot": snapshot, "elapsed": elapsed}


def _bug_of_bucket(bucket) -> str:
    if bucket["type"] == "assert":
        return "assert"
    if bucket["type"] == "SIGSEGV":
        return "segv"
    if bucket["type"] == "llvm-error":
        return "fatal"
    raise AssertionError(bucket["signature"])


def test_one_bucket_per_bug_and_every_input_in_the_right_place(triaged):
    report, corpus = triaged["report"], triaged["corpus"]
    buckets = report["buckets"]
    assert sorted(_bug_of_bucket(b) for b in buckets) == ["assert", "fatal", "segv"]
    where: dict[str, str | None] = {}
    for b in buckets:
        assert b["kind"] == "crash" and b["status"] == "new" and b["reproduction"] == "always"
        for member in b["inputs"]:
            for path in member["paths"]:
                assert path not in where, f"{path} counted twice"
                where[path] = _bug_of_bucket(b)
    for member in report["not_reproducing"]:
        assert member["reproduction"] == "never" and member["outcome"] in ("accepted", "rejected")
        for path in member["paths"]:
            assert path not in where, f"{path} counted twice"
            where[path] = None
    assert where == corpus.expected  # nothing lost, nothing extra (sidecars and logs skipped)
    crashing = sum(1 for bug in corpus.expected.values() if bug)
    assert 30 <= crashing <= 50 and len(corpus.expected) > 250
    assert sum(b["members"] for b in buckets) == report["totals"]["reproducing"] == crashing
    assert "file(s) skipped" in triaged["proc"].stderr


def test_inputs_out_of_the_shape_are_triaged_as_text(triaged):
    report, corpus = triaged["report"], triaged["corpus"]
    members = {p: m for b in report["buckets"] for m in b["inputs"] for p in m["paths"]}
    (odd,) = corpus.text_inputs
    assert members[odd]["form"] == "text" and "line" in members[odd]["not_in_shape"]
    assert all(m["form"] == "tree" for p, m in members.items() if p != odd)


def test_minimized_programs_are_the_smallest_and_pass_the_checker(triaged):
    out = triaged["out"]
    for b in triaged["report"]["buckets"]:
        bug = _bug_of_bucket(b)
        m = b["minimized"]
        assert m["in_shape"] and m["tree"] == describe(MINIMAL[bug])
        assert m["sites"] == sum(1 for _ in decisions(G, to_tree(MINIMAL[bug])))  # choices made
        assert decode_program(bytes.fromhex(m["bytes"])) == MINIMAL[bug]
        text = (out / m["path"]).read_text()
        assert text == render(MINIMAL[bug])
        assert check_text(text) == []
        assert m["target_runs"] <= 25, m
        assert (out / b["stderr"]).read_text().strip()


def test_regression_tests_reproduce_the_crash_for_real(triaged, fake_loom_opt, tmp_path):
    out = triaged["out"]
    # the fake reads its plants from argv: the RUN line carries the same pass args
    for b in triaged["report"]["buckets"]:
        test = out / b["regression_test"]
        content = test.read_text()
        assert f"// Signature: {b['signature']}" in content
        run_lines = [line for line in content.splitlines() if line.startswith("// RUN:")]
        if b["type"] == "llvm-error":
            assert run_lines == [f"// RUN: not fake-loom-opt {DETERMINISTIC} %s 2>&1 | FileCheck %s"]
        else:
            assert run_lines == [f"// RUN: not --crash fake-loom-opt {DETERMINISTIC} %s 2>&1 | FileCheck %s"]
        copy = tmp_path / f"bucket-{b['id']}.mlir"  # lit runs tests from anywhere
        copy.write_text(content)
        run_lit_test(copy, fake_loom_opt)
        # and the check is real: a fixed target makes it fail
        fixed = content.replace("--plant=assert,segv,fatal", "--plant=none")
        copy.write_text(fixed)
        with pytest.raises(AssertionError):
            run_lit_test(copy, fake_loom_opt)


def test_each_crash_bucket_runs_as_written_under_the_virtualenvs_lit(triaged, fake_loom_opt, tmp_path):
    """Issue 46, item 7: `lit bucket-N` with the venv's lit, no PATH change (neither the stand-in's
    folder nor LLVM's `not`/`FileCheck` on it): passes while the bug is there, fails once fixed."""
    import shutil

    lit = shutil.which("lit", path=str(Path(sys.executable).parent))
    assert lit, "lit is installed in the virtualenv (pyproject's test extra)"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    assert shutil.which("FileCheck", path=env["PATH"]) is None and shutil.which("not", path=env["PATH"]) is None
    assert shutil.which("fake-loom-opt", path=env["PATH"]) is None
    for b in triaged["report"]["buckets"]:
        folder = triaged["out"] / f"bucket-{b['id']}"
        assert (folder / "lit.cfg.py").is_file()
        copy = tmp_path / folder.name  # as it is: lit writes its Output/ beside the test
        shutil.copytree(folder, copy)
        passing = subprocess.run([lit, "-v", str(copy)], capture_output=True, text=True, env=env, timeout=120)
        assert passing.returncode == 0 and "PASS: loomfuzz bucket" in passing.stdout, passing.stdout + passing.stderr
        assert "Total Discovered Tests: 1" in passing.stdout  # regression.mlir, not minimized.mlir
        test = copy / "regression.mlir"
        test.write_text(test.read_text().replace("--plant=assert,segv,fatal", "--plant=none"))
        failing = subprocess.run([lit, "-v", str(copy)], capture_output=True, text=True, env=env, timeout=120)
        assert failing.returncode == 1 and "FAIL: loomfuzz bucket" in failing.stdout, failing.stdout


def test_reports(triaged):
    out, report = triaged["out"], triaged["report"]
    assert report["schema"] == "loom-fuzz-triage-report/1"
    assert report["run"]["status"] == "complete" and report["run"]["repeat"] == 3
    md = (out / "report.md").read_text()
    assert "| bucket | status | kind | signature | members | reproduction | minimized (lines / sites) |" in md
    for b in report["buckets"]:
        assert f"| [{b['id']}](bucket-{b['id']}/) | new | crash |" in md
        for name in ("minimized.mlir", "regression.mlir", "stderr.txt"):
            assert (out / f"bucket-{b['id']}" / name).is_file()
    assert triaged["elapsed"] < 60
    # how often the inputs ran, as the members' runs say (issue 46: "each input run 3 times" above
    # members showing 1/1): counted here from report.json's members, not from the report's own table
    spread: dict[int, int] = {}
    for member in [m for b in report["buckets"] for m in b["inputs"]] + report["not_reproducing"]:
        spread[member["attempts"]] = spread.get(member["attempts"], 0) + 1
    assert spread.get(1, 0) > 0 and report["run"]["runs_per_input"] == {str(k): v for k, v in spread.items()}
    said = ", ".join(f"{v} input(s) {k} time{'s' if k != 1 else ''}" for k, v in sorted(spread.items()))
    assert f"Inputs run once, again (up to 3 times, --repeat) only when the first run leaves doubt" in md
    assert said in md and "each input run 3 times" not in md


def test_triage_twice_adds_no_bucket_and_no_member(triaged, fake_loom_opt):
    root = triaged["root"]
    before = triaged["snapshot"]
    # the parent folder holds the inputs, the database and the reports: only the inputs count
    assert (root / "fuzz").is_dir() and triaged["db"].parent == triaged["out"].parent == root
    proc = loomfuzz(*triage_args(fake_loom_opt, triaged["db"], triaged["out"], root))
    assert proc.returncode == 0, proc.stderr
    assert "0 run now" in proc.stderr
    with TriageDB(triaged["db"], create=False) as db:
        after = db.snapshot()
        assert db.counts()["runs"] == 2
    assert after["members"] == before["members"] and after["files"] == before["files"]
    assert set(after["buckets"]) == set(before["buckets"])
    assert after["buckets"] == before["buckets"]  # statuses included: triage marks nothing known
    report = json.loads((triaged["out"] / "report.json").read_text())
    assert all(b["status"] == "new" for b in report["buckets"])


def _members(db_path: Path) -> tuple[int, str | None]:
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1)
        try:
            count = conn.execute("SELECT COUNT(*) FROM members").fetchone()[0]
            status = conn.execute("SELECT status FROM runs ORDER BY id DESC LIMIT 1").fetchone()
            return count, status[0] if status else None
        finally:
            conn.close()
    except sqlite3.Error:
        return 0, None


def test_killed_midway_and_resumed_gives_the_uninterrupted_database(triaged, fake_loom_opt, tmp_path):
    root = triaged["root"]
    db, out = tmp_path / "killed.db", tmp_path / "out"
    total = len(triaged["snapshot"]["members"])
    proc = subprocess.Popen(
        [*LOOMFUZZ, *triage_args(fake_loom_opt, db, out, root / "fuzz")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    count = 0
    while time.monotonic() < deadline and proc.poll() is None:
        count, _ = _members(db)
        if count >= 20:
            break
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    count, status = _members(db)
    assert status == "running" and 0 < count < total, (count, status, total)
    # resume: same run, completes with the same database as the uninterrupted run
    resumed = loomfuzz(*triage_args(fake_loom_opt, db, out, root / "fuzz"))
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming unfinished run 1" in resumed.stderr
    with TriageDB(db, create=False) as handle:
        assert handle.snapshot() == triaged["snapshot"]
        assert handle.counts()["runs"] == 1


def test_resume_after_a_crash_during_minimization(triaged, fake_loom_opt, tmp_path, monkeypatch):
    from harness.triage import minimize
    from harness.triage import pipeline as triage

    target = resolve_target("loom-opt", loom_opt=fake_loom_opt, pass_args=DETERMINISTIC.split())
    config = triage.TriageConfig(
        inputs=[str(triaged["root"] / "fuzz")], target=target, db_path=str(tmp_path / "m.db"),
        out_dir=str(tmp_path / "out"), jobs=2, progress=False,
    )
    real = minimize.minimize_job
    calls = []

    def dying(job, *args):
        calls.append(job.bucket_id)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process dies while minimizing the second bucket
        return real(job, *args)

    monkeypatch.setattr(minimize, "minimize_job", dying)
    with pytest.raises(KeyboardInterrupt):
        triage.run_triage(config, log=lambda m: None)
    with TriageDB(config.db_path, create=False) as db:
        assert len(db.unminimized()) >= 2 and db.last_run()["status"] == "running"
        db.conn.execute("UPDATE runs SET pid = 999999999")  # as after a real kill
    monkeypatch.setattr(minimize, "minimize_job", real)
    summary = triage.run_triage(config, log=lambda m: None)
    assert summary.resumed and summary.reproduced == 0
    with TriageDB(config.db_path, create=False) as db:
        assert db.snapshot() == triaged["snapshot"]


def test_flaky_inputs_are_reported_as_flaky(tmp_path, fake_loom_opt):
    fuzz = tmp_path / "fuzz"
    fuzz.mkdir()
    flaky = []
    for program in random_programs(8, 5000):
        found = triggers(program)
        if found and found[0] == "flaky" and "rejected" not in found and program not in flaky:
            flaky.append(program)
        if len(flaky) == 5:
            break
    from shapes import encode_program as encode

    for k, program in enumerate(flaky):
        (fuzz / f"crash-flaky{k}").write_bytes(encode(program))
    (fuzz / "crash-clean").write_bytes(encode(MINIMAL["segv"]))  # segv is not planted here
    db, out = tmp_path / "t.db", tmp_path / "out"
    proc = loomfuzz(*triage_args(fake_loom_opt, db, out, fuzz, pass_args="--plant=flaky", extra=["--repeat", "20"]))
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    (bucket,) = report["buckets"]
    assert bucket["reproduction"] == "sometimes" and bucket["members"] == 5
    assert all(m["reproduction"] == "sometimes" and 0 < m["hits"] < 20 for m in bucket["inputs"])
    assert bucket["minimized"]["tree"] == describe(MINIMAL["flaky"])
    assert "| flaky |" in (out / "report.md").read_text()
    assert "flaky" in (out / bucket["regression_test"]).read_text()
    (clean,) = report["not_reproducing"]
    assert clean["paths"] == [str(fuzz / "crash-clean")]


def test_text_reduce(tmp_path, fake_loom_opt):
    fuzz = tmp_path / "fuzz"
    fuzz.mkdir()
    (fuzz / "crash-a.mlir").write_text(render(Program((Thread(True, (make_site(0, 1), make_site(2, 3))),))))
    db, out = tmp_path / "t.db", tmp_path / "out"
    proc = loomfuzz(*triage_args(fake_loom_opt, db, out, fuzz, extra=["--text-reduce"]))
    assert proc.returncode == 0, proc.stderr
    (bucket,) = json.loads((out / "report.json").read_text())["buckets"]
    assert bucket["minimized"]["tree"] == describe(from_shape("t0[for:freeze]"))
    reduced = (out / bucket["text_reduced"]["path"]).read_text()
    assert bucket["text_reduced"]["lines"] == len(reduced.splitlines()) < bucket["minimized"]["lines"]
    target = resolve_target("loom-opt", loom_opt=fake_loom_opt, pass_args=DETERMINISTIC.split())
    outcome = run_program(target, reduced)
    assert signature_of(judge(target, reduced, outcome)).key == bucket["signature"]
    assert parse(reduced)[0] is None  # the grammar cannot express it


# ====================================================================== CLI


def test_cli_list_show_mark_report(triaged, tmp_path):
    db = tmp_path / "copy.db"
    with sqlite3.connect(triaged["db"]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    listed = loomfuzz("triage", "list", "--db", db)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "KIND", "CULPRIT", "MEMBERS", "REPRO", "SYMPTOMS", "MINIMIZED", "SIGNATURE"]
    assert len(lines) == 1 + 3 + 1 and describe(from_shape("t0[for:freeze]")) in listed.stdout
    assert "3 bucket(s)" in lines[-1]
    bucket = next(b for b in triaged["report"]["buckets"] if b["type"] == "SIGSEGV")
    shown = loomfuzz("triage", "show", bucket["id"], "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert f"signature:    {bucket['signature']}" in shown.stdout
    assert describe(from_shape("t0[if:memory]")) in shown.stdout and "memref.store %payload" in shown.stdout
    assert len([line for line in shown.stdout.splitlines() if line.startswith(tuple("0123456789"))]) == bucket["members"]
    marked = loomfuzz("triage", "mark", f"bucket-{bucket['id']}", "fixed", "--db", db)
    assert marked.returncode == 0 and "fixed" in loomfuzz("triage", "show", bucket["id"], "--db", db).stdout
    rep = loomfuzz("triage", "report", "--db", db, "--out", tmp_path / "rep")
    assert rep.returncode == 0 and (tmp_path / "rep" / "report.md").is_file()


def test_cli_errors_are_one_line_and_lose_nothing(triaged, fake_loom_opt, tmp_path):
    db = tmp_path / "copy.db"
    with sqlite3.connect(triaged["db"]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    with TriageDB(db, create=False) as handle:
        before = handle.snapshot()

    def one_line_error(proc, *names):
        assert proc.returncode != 0
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("loomfuzz triage: error: "), proc.stderr
        for name in names:
            assert str(name) in lines[0]

    missing = tmp_path / "no-such-folder"
    one_line_error(loomfuzz(*triage_args(fake_loom_opt, db, tmp_path / "o", missing)), missing)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "crash-dangling").symlink_to(tmp_path / "gone")
    one_line_error(loomfuzz(*triage_args(fake_loom_opt, db, tmp_path / "o", broken)), "crash-dangling")
    not_ours = tmp_path / "notes.txt"
    not_ours.write_text("my notes\n")
    one_line_error(loomfuzz(*triage_args(fake_loom_opt, not_ours, tmp_path / "o", triaged["root"] / "fuzz")), not_ours)
    assert not_ours.read_text() == "my notes\n"
    other_target = triage_args(fake_loom_opt, db, tmp_path / "o", triaged["root"] / "fuzz", pass_args="--plant=all")
    one_line_error(loomfuzz(*other_target), db, "--plant=all")
    one_line_error(loomfuzz("triage", "list", "--db", tmp_path / "none.db"), "none.db")
    assert not (tmp_path / "none.db").exists()
    one_line_error(loomfuzz("triage", "show", "99", "--db", db), "99")
    one_line_error(loomfuzz("triage", "mark", "1", "closed", "--db", db))
    one_line_error(loomfuzz("triage", "--loom-opt", tmp_path / "nope", "--db", db, triaged["root"]), "nope")
    one_line_error(loomfuzz("triage", "--db", db))
    with TriageDB(db, create=False) as handle:
        assert handle.snapshot() == before


def test_cli_run_word_triages_a_folder_named_list(tmp_path, fake_loom_opt):
    folder = tmp_path / "list"
    folder.mkdir()
    from shapes import encode_program as encode

    (folder / "crash-1").write_bytes(encode(MINIMAL["fatal"]))
    proc = loomfuzz(*triage_args(fake_loom_opt, "t.db", "out", "run", "list"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [b["minimized"]["tree"] for b in report["buckets"]] == [describe(from_shape("t0[if:loop]"))]


def test_database_defaults_to_beside_the_report(tmp_path, fake_loom_opt):
    from shapes import encode_program as encode

    (tmp_path / "crash-1").write_bytes(encode(MINIMAL["segv"]))
    proc = loomfuzz("triage", "--loom-opt", fake_loom_opt, "--out", "reports", "--no-progress", "crash-1",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "reports" / "triage.db").is_file() and not (tmp_path / "triage.db").exists()
    listed = loomfuzz("triage", "list", "--out", "reports", cwd=tmp_path)
    assert listed.returncode == 0 and describe(from_shape("t0[if:memory]")) in listed.stdout


def test_a_second_triage_on_a_database_in_use_is_refused(tmp_path, fake_loom_opt):
    from shapes import encode_program as encode

    fuzz = tmp_path / "fuzz"
    fuzz.mkdir()
    hang = Program((Thread(False, (make_site(Nesting.FOR, Body.BRANCH),)),))  # the fake's `hang` plant
    (fuzz / "timeout-1").write_bytes(encode(hang))
    # more hanging programs, so the first triage is still at work when the second comes and when
    # Ctrl-C does (one input's runs and minimization can end before either)
    for k, other in enumerate((Body.ARITH, Body.MEMORY, Body.FREEZE, Body.LOOP), 2):
        more = Program((Thread(False, (make_site(Nesting.FOR, Body.BRANCH), make_site(Nesting.NONE, other))),))
        (fuzz / f"timeout-{k}").write_bytes(encode(more))
    db = tmp_path / "t.db"
    first = subprocess.Popen(
        [*LOOMFUZZ, *triage_args(fake_loom_opt, db, tmp_path / "out", fuzz, pass_args="--plant=hang",
                                 extra=["--timeout", "2", "--repeat", "1"])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while _members(db)[1] != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        second = loomfuzz(*triage_args(fake_loom_opt, db, tmp_path / "out", fuzz, pass_args="--plant=hang"))
        assert second.returncode == 1
        assert second.stderr.startswith(f"loomfuzz triage: error: {db}: in use by triage run 1 (pid {first.pid})")
    finally:
        # Ctrl-C: triage stops, and the runner kills the hanging target's process group
        first.send_signal(signal.SIGINT)
        try:
            first.wait(timeout=30)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()
    assert first.returncode == 130
    assert not _processes_running(fake_loom_opt), "the hanging target outlived triage"
    with TriageDB(db, create=False) as handle:  # left for the next triage to resume
        assert handle.last_run()["status"] == "running"


def _processes_running(binary: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if binary.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_collect_inputs_streams_sidecars_and_skips(tmp_path):
    from shapes import encode_program as encode
    from harness.triage.inputs import collect_inputs

    folder = tmp_path / "artifacts"
    folder.mkdir()
    (folder / "stream.mlir").write_text("".join(render_stream_pair(MINIMAL["assert"], MINIMAL["segv"])))
    (folder / "crash-abc").write_bytes(encode(MINIMAL["fatal"]))
    (folder / "crash-abc.mlir").write_text(render(MINIMAL["fatal"], "oracle"))  # fuzz's sidecar
    (folder / "crash-abc.json").write_text("{}")
    (folder / "corpus-entry").write_bytes(b"\x00")
    (folder / ".hidden.mlir").write_text("x")
    collection = collect_inputs([str(folder)])
    got = {Path(i.path).name: from_tree(i.program) for i in collection.inputs}
    assert got == {"stream.mlir#1": MINIMAL["assert"], "stream.mlir#2": MINIMAL["segv"], "crash-abc": MINIMAL["fatal"]}
    assert sorted(Path(p).name for p, _ in collection.skipped) == ["corpus-entry", "crash-abc.json", "crash-abc.mlir"]
    # named explicitly, the oracle-rendered sidecar is an input: the same program, so the same member
    (sidecar,) = collect_inputs([str(folder / "crash-abc.mlir")]).inputs
    raw = next(i for i in collection.inputs if i.path.endswith("crash-abc"))
    assert from_tree(sidecar.program) == MINIMAL["fatal"] and sidecar.sha == raw.sha
