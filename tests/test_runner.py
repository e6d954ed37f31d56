"""Tests of harness.run.outcome, target, process, judge and harness.targets.expectations, with real subprocesses.

The planted-bug double (tests/fixtures/fake_loom_opt.c) stands in for
loom-opt where a crash, hang or oom must happen on purpose; upstream
mlir-opt-22 is the real tool for the oracle rendering.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from harness.targets.expectations import CHECKS, ExpectationsError, load_expectations
from harness.run.judge import judge, write_finding
from harness.run.outcome import classify, Outcome, OutcomeKind
from harness.run.process import run_program
from harness.targets.target import DEFAULT_MLIR_PIPELINE, LOOM_NOT_FOUND, resolve_target, Target, TargetNotFound
from shapes import Body, Callee, Nesting, Program, Thread, make_site, render_program

# ------------------------------------------------------ program text builders


def program(threads, render: str = "canonical") -> str:
    """threads: [(icall, [(nesting, body) or (nesting, "call", callee), ...]), ...]"""
    return render_program(
        Program(
            tuple(
                Thread(icall, tuple(make_site(Nesting[s[0].upper()], Body[s[1].upper()],
                                              Callee[(s[2] if len(s) > 2 else "func").upper()])
                                    for s in sites))
                for icall, sites in threads
            )
        ),
        render,
    )


def one_site(nesting: str, body: str, callee: str = "func", icall: bool = False) -> str:
    return program([(icall, [(nesting, body, callee)])])


# every form at a position no planted bug uses
BENIGN = program(
    [
        (True, [("none", "arith"), ("if", "branch")]),
        (False, [("none", "memory"), ("if", "freeze")]),
        (False, [("none", "loop"), ("for", "memory")]),
        (True, [("for", "arith"), ("none", "freeze")]),
    ]
)


def fake_target(binary: str, *plants: str, timeout: float = 10.0, memory_mb=4096, **kw) -> Target:
    args = ["--loom-lower-for-to-graph"]
    if plants:
        args.append("--plant=" + ",".join(plants))
    return resolve_target(
        "loom-opt",
        loom_opt=binary,
        pass_args=args,
        timeout=timeout,
        memory_mb=memory_mb,
        **kw,
    )


# ------------------------------------------------------------ classification


def test_plain_program_accepted_and_checks_pass(fake_loom_opt):
    target = fake_target(fake_loom_opt)
    out = run_program(target, BENIGN)
    assert out.kind is OutcomeKind.ACCEPTED, out.stderr
    assert (out.returncode, out.signal) == (0, None)
    assert "dataflow.graph private @graph_7" in out.stdout
    v = judge(target, BENIGN, out)
    # it holds llvm.freeze regions: loom versions differ on them, so either outcome is expected,
    # and the accepted one still passes the output checks
    assert not v.finding and v.why == "" and v.rule == "freeze-in-region" and v.kind == ""
    assert v.expected == "either with stderr matching /is not a registered canonical Dataflow actor/"
    no_freeze = BENIGN.replace("llvm.freeze %a : i32", "arith.addi %a, %a : i32")
    v = judge(target, no_freeze, run_program(target, no_freeze))
    assert not v.finding and v.expected == "accepted" and v.rule == "published"


def test_assert_is_crash_with_assertion_reason(fake_loom_opt):
    target = fake_target(fake_loom_opt)
    text = one_site("for", "freeze")
    out = run_program(target, text)
    assert out.kind is OutcomeKind.CRASH
    assert out.signal == 6 and out.returncode is None
    assert "Assertion `!isa<scf::ForOp>(parent)" in out.reason and "failed" in out.reason
    assert "Stack dump:" in out.stderr and "loom::FreezeLowering::matchAndRewrite" in out.stderr
    v = judge(target, text, out)
    assert v.finding and v.why.startswith("crash: Assertion") and v.kind == "crash"
    # same bug from another program: same frames, different addresses
    other = program([(True, [("none", "arith"), ("for", "freeze")])])
    out2 = run_program(target, other)
    frames = lambda s: [l.split(" ", 3)[3] for l in s.splitlines() if l.startswith(" #")]  # noqa: E731
    addrs = lambda s: [l.split()[1] for l in s.splitlines() if l.startswith(" #")]  # noqa: E731
    assert frames(out.stderr) == frames(out2.stderr)
    assert addrs(out.stderr) != addrs(out2.stderr)


def test_segv_is_crash_signal_11(fake_loom_opt):
    out = run_program(fake_target(fake_loom_opt), one_site("if", "memory"))
    assert out.kind is OutcomeKind.CRASH and out.signal == 11, out.stderr
    assert out.reason == "SIGSEGV"
    assert "loom::MemoryLowering::rewriteStore" in out.stderr


def test_fatal_error_with_exit_1_is_crash(fake_loom_opt):
    out = run_program(fake_target(fake_loom_opt), one_site("if", "loop"))
    assert out.kind is OutcomeKind.CRASH
    assert (out.returncode, out.signal) == (1, None)
    assert out.reason == "LLVM ERROR: iter_args in a conditional region are not supported"


@pytest.mark.parametrize("callee", ["func", "llvm"])
@pytest.mark.parametrize("nesting", ["none", "if", "for"])
def test_call_in_region_is_rejected_as_expected(fake_loom_opt, nesting, callee):
    target = fake_target(fake_loom_opt)
    text = one_site(nesting, "call", callee, icall=True)
    out = run_program(target, text)
    assert out.kind is OutcomeKind.REJECTED and out.returncode == 1
    assert f"operation '{callee}.call' is not a registered canonical Dataflow actor" in out.reason
    v = judge(target, text, out)
    assert v.rule == "call-in-region" and not v.finding, v.why


def test_thread_level_icall_alone_is_not_a_call_in_region(fake_loom_opt):
    target = fake_target(fake_loom_opt)
    text = one_site("none", "arith", icall=True)
    assert target.expectations.rule_for(text).name == "published"
    out = run_program(target, text)
    assert out.kind is OutcomeKind.ACCEPTED and not judge(target, text, out).finding


def _group_members(binary: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/exe") == binary:
                    found.append(int(pid))
            except OSError:
                pass
    return found


def test_hang_times_out_and_leaves_no_process(fake_loom_opt):
    target = fake_target(fake_loom_opt, "default", "hang", timeout=1.0)
    t0 = time.monotonic()
    out = run_program(target, one_site("for", "branch"))
    elapsed = time.monotonic() - t0
    assert out.kind is OutcomeKind.TIMEOUT
    assert out.reason == "timed out after 1s" and out.signal == 9
    assert 1.0 <= elapsed < 2.5
    # the fake forked a helper into its group: both must be gone
    deadline = time.monotonic() + 2.0
    while _group_members(os.path.realpath(fake_loom_opt)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group_members(os.path.realpath(fake_loom_opt)) == []


def test_oom_under_memory_limit(fake_loom_opt):
    target = fake_target(fake_loom_opt, "oom", memory_mb=256)
    out = run_program(target, one_site("for", "loop"))
    assert out.kind is OutcomeKind.OOM, (out.reason, out.stderr[:500])
    assert out.reason == "LLVM ERROR: out of memory"
    assert judge(target, "", out).finding


def test_flaky_crashes_on_some_runs_only(fake_loom_opt):
    target = fake_target(fake_loom_opt)
    text = program([(True, [("none", "branch")])])
    kinds = [run_program(target, text) for _ in range(24)]
    crashes = [o for o in kinds if o.kind is OutcomeKind.CRASH]
    accepted = [o for o in kinds if o.kind is OutcomeKind.ACCEPTED]
    assert crashes and accepted and len(crashes) + len(accepted) == 24
    assert all("stale call result" in o.reason for o in crashes)
    assert "loom::GraphLaunchBuilder::bindResults" in crashes[0].stderr
    # without the top-level call the same region is fine
    assert run_program(target, program([(False, [("none", "branch")])])).kind is OutcomeKind.ACCEPTED


def test_plants_can_be_switched_off(fake_loom_opt):
    target = fake_target(fake_loom_opt, "none")
    for text in (one_site("for", "freeze"), one_site("if", "memory"), one_site("if", "loop")):
        assert run_program(target, text).kind is OutcomeKind.ACCEPTED


# ------------------------------------------------------------------- judging


def test_output_check_catches_missing_graph(fake_loom_opt):
    target = fake_target(fake_loom_opt, "default", "wrong-output")
    text = program([(False, [("none", "arith"), ("none", "freeze")])])
    out = run_program(target, text)
    assert out.kind is OutcomeKind.ACCEPTED
    v = judge(target, text, out)
    assert v.finding and "one-graph-per-region" in v.why and "@graph_1" in v.why and v.kind == "wrong-output"


def test_plain_program_rejected_is_a_finding():
    target = Target(name="loom-opt", argv=("/bin/false",))
    text = one_site("none", "arith")
    out = Outcome(OutcomeKind.REJECTED, 1, None, "", "<stdin>:1:1: error: nope", 0.01, "<stdin>:1:1: error: nope")
    v = judge(target, text, out)
    assert v.finding and v.expected == "accepted" and "expected accepted (rule published), got rejected" in v.why
    assert v.kind == "unexpected-rejection"


def test_custom_expectations_file(fake_loom_opt, tmp_path):
    path = tmp_path / "exp.json"
    path.write_text(
        json.dumps(
            {
                "rules": [
                    {"name": "calls-wrong-msg", "match": "%called = llvm", "expect": "rejected",
                     "stderr": "some other diagnostic"},
                    {"name": "freeze-rejected", "match": ["llvm\\.freeze"], "expect": "rejected"},
                    {"name": "anything", "expect": "either"},
                ]
            }
        )
    )
    target = fake_target(fake_loom_opt, "none", expectations_path=str(path))
    # accepted where the file expects rejected
    text = one_site("none", "freeze")
    v = judge(target, text, run_program(target, text))
    assert v.finding and v.rule == "freeze-rejected"
    # the right kind but the wrong diagnostic
    text = one_site("none", "call", "llvm")
    v = judge(target, text, run_program(target, text))
    assert v.finding and "does not match /some other diagnostic/" in v.why and v.kind == "wrong-diagnostic"
    # "either": a rejected call program is fine, so is an accepted program
    for text in (one_site("none", "call", "func"), one_site("none", "arith")):
        v = judge(target, text, run_program(target, text))
        assert not v.finding and v.rule == "anything"


def test_bad_json_names_file_and_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "rules": [\n    {"name": "x", "expect": "accepted",}\n  ]\n}\n')
    with pytest.raises(ExpectationsError) as e:
        load_expectations(str(path))
    msg = str(e.value)
    assert msg.startswith(f"{path}:3:") and "invalid JSON" in msg and "\n" not in msg
    with pytest.raises(ExpectationsError):
        resolve_target("mlir-opt", expectations_path=str(path))


@pytest.mark.parametrize(
    "rules, where",
    [
        ([{"name": "x", "expect": "maybe"}], "rules[0].expect"),
        ([{"name": "x", "expect": "accepted", "checks": ["nope"]}], "rules[0].checks"),
        ([{"name": "x", "expect": "accepted", "match": "("}], "rules[0].match"),
        ([{"name": "x", "expect": "accepted", "colour": 1}], "rules[0]"),
        ([], "rules"),
    ],
)
def test_bad_schema_names_file_and_field(tmp_path, rules, where):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"rules": rules}))
    with pytest.raises(ExpectationsError) as e:
        load_expectations(str(path))
    assert str(e.value).startswith(f"{path}: {where}: ")


def test_host_container_check_ignores_ssa_names_but_not_changes():
    check = CHECKS["host-container-unchanged"]
    text = one_site("none", "arith")
    printed = """module {
  func.func @host_container(%arg0: memref<4xi32>, %arg1: i32) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    scf.for %arg2 = %c0 to %c4 step %c1 {
      memref.store %arg1, %arg0[%arg2] : memref<4xi32>
    }
    return
  }
}
"""
    assert check(text, printed) is None
    assert "changed" in check(text, printed.replace("%arg1, %arg0[%arg2]", "%arg1, %arg0[%c0]"))
    assert "missing" in check(text, "module {\n}\n")


@pytest.mark.parametrize(
    "rc, stderr, kind, reason",
    [
        (1, "x.cpp:3:4: runtime error: signed integer overflow\n", OutcomeKind.CRASH,
         "runtime error: signed integer overflow"),
        (1, "==12==ERROR: AddressSanitizer: heap-use-after-free on address 0x1\n", OutcomeKind.CRASH,
         "AddressSanitizer: heap-use-after-free on address 0x1"),
        (-6, "UNREACHABLE executed at lib/X.cpp:9!\n", OutcomeKind.CRASH,
         "UNREACHABLE executed at lib/X.cpp:9! (SIGABRT)"),
        (-6, "terminate called after throwing an instance of 'std::bad_alloc'\n", OutcomeKind.OOM, None),
        (-9, "", OutcomeKind.OOM, None),
        (2, "", OutcomeKind.CRASH, "exit status 2"),
        (1, "no diagnostic here\n", OutcomeKind.CRASH, "exit status 1 without an error: diagnostic"),
        (0, "PLEASE submit a bug report to x\nStack dump:\n", OutcomeKind.CRASH, None),
        (1, "<stdin>:2:3: error: bad thing\n  x\n  ^\n", OutcomeKind.REJECTED, "<stdin>:2:3: error: bad thing"),
        (0, "<stdin>:2:3: warning: odd\n", OutcomeKind.ACCEPTED, "exit status 0"),
    ],
)
def test_classify(rc, stderr, kind, reason):
    got = classify(rc, stderr)
    assert got[0] is kind
    if reason is not None:
        assert got[3] == reason


# ------------------------------------------------------------------ targets


def test_resolve_explicit_path(fake_loom_opt, monkeypatch):
    monkeypatch.delenv("LOOM_OPT", raising=False)
    t = resolve_target(loom_opt=fake_loom_opt)
    assert t.argv == (fake_loom_opt, "--loom-lower-for-to-graph") and t.render == "canonical"
    assert t.expectations.source == "builtin:loom-opt"
    t = resolve_target(loom_opt=fake_loom_opt, pipeline="--loom-lower-scf-to-dfg")
    assert t.argv == (fake_loom_opt, "--loom-lower-scf-to-dfg")
    with pytest.raises(TargetNotFound, match="does not exist or is not executable"):
        resolve_target(loom_opt="/nonexistent/loom-opt")


def test_resolve_from_env(fake_loom_opt, monkeypatch):
    monkeypatch.setenv("LOOM_OPT", fake_loom_opt)
    assert resolve_target().argv[0] == fake_loom_opt


def test_resolve_loom_raise_opt_on_path(fake_loom_opt, monkeypatch, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "loom-raise-opt").symlink_to(fake_loom_opt)
    monkeypatch.delenv("LOOM_OPT", raising=False)
    monkeypatch.setenv("PATH", str(bindir))
    t = resolve_target()
    assert t.argv == (str(bindir / "loom-raise-opt"), "--loom-lower-for-to-graph")
    assert run_program(t, one_site("none", "arith")).kind is OutcomeKind.ACCEPTED


def test_resolve_not_found(monkeypatch, tmp_path):
    monkeypatch.delenv("LOOM_OPT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TargetNotFound) as e:
        resolve_target("loom-opt")
    assert str(e.value) == LOOM_NOT_FOUND and "\n" not in LOOM_NOT_FOUND
    assert "--loom-opt" in LOOM_NOT_FOUND and "LOOM_OPT" in LOOM_NOT_FOUND


@pytest.fixture
def mlir_target(mlir_opt, monkeypatch):
    monkeypatch.setenv("MLIR_OPT", mlir_opt)
    t = resolve_target("mlir-opt")
    assert t.argv == (mlir_opt, "--allow-unregistered-dialect", f"--pass-pipeline={DEFAULT_MLIR_PIPELINE}")
    assert t.render == "oracle"
    return t


def test_mlir_opt_accepts_oracle_program(mlir_target):
    text = program(
        [
            (True, [("none", "arith"), ("if", "memory")]),
            (False, [("for", "branch"), ("none", "freeze")]),
            (True, [("for", "loop"), ("if", "call", "llvm")]),
            (False, [("none", "call", "func")]),
        ],
        render="oracle",
    )
    out = run_program(mlir_target, text)
    assert out.kind is OutcomeKind.ACCEPTED, out.stderr
    assert out.stdout.count('"loom.spatial_region"') == 7
    assert not judge(mlir_target, text, out).finding


def test_mlir_opt_rejects_broken_program(mlir_target):
    good = program([(False, [("none", "arith")])], render="oracle")
    broken = good.replace("%p = arith.muli %s, %a : i32", "%p = arith.muli %s, %a : i64")
    assert broken != good
    out = run_program(mlir_target, broken)
    assert out.kind is OutcomeKind.REJECTED and "error:" in out.reason
    v = judge(mlir_target, broken, out)
    assert v.finding and "expected accepted" in v.why
    # the canonical rendering is not upstream MLIR either
    assert run_program(mlir_target, program([(False, [("none", "arith")])])).kind is OutcomeKind.REJECTED


# ------------------------------------------------------------------ findings


def test_write_finding(fake_loom_opt, tmp_path):
    target = fake_target(fake_loom_opt)
    text = one_site("for", "freeze")
    v = judge(target, text, run_program(target, text))
    write_finding(tmp_path / "findings", "crash-0001", text, target, v, suffix=".mlir")
    assert (tmp_path / "findings" / "crash-0001.mlir").read_text() == text
    rec = json.loads((tmp_path / "findings" / "crash-0001.json").read_text())
    for key in ("target", "command", "outcome", "returncode", "signal", "reason", "stderr_tail",
                "expected", "why"):
        assert key in rec
    assert rec["outcome"] == "crash" and rec["signal"] == 6 and rec["signal_name"] == "SIGABRT"
    assert rec["target"]["argv"] == list(target.argv)
    assert rec["command"].endswith("< crash-0001.mlir") and fake_loom_opt in rec["command"]
    assert "Stack dump:" in rec["stderr_tail"] and rec["expected"].startswith("either")
    assert rec["why"].startswith("crash: Assertion") and rec["finding_kind"] == "crash"
    assert Outcome.from_json(v.outcome.to_json()) == v.outcome
