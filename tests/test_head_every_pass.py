"""LLVM's development head with every upstream pass as a build under test (issue 50).

``mlir-opt-head`` is an mlir-opt over the torch-mlir wheel's MLIR bindings (LLVM 24.0.0git),
whose library registers every upstream pass; ``loomfuzz-mlir-opt-head-driver`` is its
persistent driver.  Real processes, the real wheel, real mlir-opt-22 to compare with; the
only double is a Python without the wheel (Debian's ``/usr/bin/python3``), to see the tool
refuse in one line where the head is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run.driver_binary import find_driver
from harness.run.persistent_runner import PersistentRunner
from harness.run.persistent_target import persistent_target
from harness.targets.heads import EVERY_PASS
from harness.targets.identity import identify, which
from harness.targets.target import resolve_target

ROOT = Path(__file__).resolve().parent.parent
#: The passes issue 50 is about: the iree-base-compiler head registers none of them.
FIVE = ("int-range-optimizations", "arith-int-range-narrowing", "sccp", "remove-dead-values",
        "arith-unsigned-when-equivalent")
PIPELINE = "builtin.module(canonicalize,cse,sccp)"
SPLIT = ("func.func @a() {\n  return\n}\n// -----\nfunc.func @b() {\n  %0 = arith.constant 1 : i32\n"
         "  return %0 : i32\n}\n// -----\nfunc.func @c(%x: i32) -> i32 {\n  %z = arith.constant 0 : i32\n"
         "  %r = arith.addi %x, %z : i32\n  return %r : i32\n}\n// -----\nfunc.func @d() {\n")


def _tool(name: str) -> str:
    found = which(name)
    if not found:
        pytest.fail(f"{name} is not installed (bash .ci/setup installs the test extras)")
    return found


def loomfuzz(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


# ------------------------------------------------------------ found, identified


def test_found_and_identified_from_the_bindings():
    head = identify(_tool("mlir-opt-head"))
    assert head.family == "mlir-opt" and head.version == "24.0.0git"
    assert head.unregistered_dialects and head.split_input_file
    assert re.fullmatch(r"LLVM version 24\.0\.0git \(llvm-project [0-9a-f]{40}\)", head.version_line)
    # independently: the wheel's own binary, built from the same sources, says the same version
    native = subprocess.run([str(EVERY_PASS.package_dir() / "_mlir_libs" / "torch-mlir-opt"), "--version"],
                            capture_output=True, text=True)
    assert "LLVM version 24.0.0git" in native.stdout
    assert all(name in head.passes for name in FIVE), sorted(head.passes)[:20]
    # every pass mlir-opt-22 lists that the head's PassManager takes is listed: none left out
    from torch_mlir import ir, passmanager

    listed = set(re.findall(r"^\s+--([a-z][\w-]*)", subprocess.run(["mlir-opt-22", "--help"], capture_output=True,
                                                                   text=True).stdout, re.M))
    context = ir.Context()
    taken = set()
    for name in listed:
        try:
            passmanager.PassManager.parse(f"builtin.module({name})", context)
            taken.add(name)
        except Exception as error:  # noqa: BLE001
            if "does not refer to a registered pass" not in str(error):
                taken.add(name)
    assert len(taken) > 150 and taken <= head.passes, sorted(taken - head.passes)
    assert "no-such-pass" not in head.passes and "iree-flow-outline-dispatch-regions" not in head.passes


def test_refused_in_one_line_where_the_wheel_is_not_installed(tmp_path):
    """Debian's Python has no torch-mlir: the tool says how to install it (exit 2), and a run
    naming it is that line, nothing run."""
    python = shutil.which("python3", path="/usr/bin")
    assert python and subprocess.run([python, "-c", "import torch_mlir"], capture_output=True).returncode != 0
    tool = tmp_path / "bin" / "mlir-opt-head"
    tool.parent.mkdir()
    tool.write_text(f"#!{python} -s\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                    "from harness.targets.mlir_opt_head import main\nsys.exit(main())\n")
    tool.chmod(0o755)
    for args in (["--version"], ["--help"], ["--sccp", "-"]):
        done = subprocess.run([str(tool), *args], input="", capture_output=True, text=True)
        assert done.returncode == 2 and done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert "torch-mlir" in line and "pip install --no-deps torch-mlir" in line
    env = {**os.environ, "PATH": f"{tool.parent}{os.pathsep}{os.environ['PATH']}"}
    run = loomfuzz("run", "--target", "mlir-opt-head", "-n", "5", "--artifacts", str(tmp_path / "a"),
                   "--no-progress", cwd=tmp_path, env=env)
    assert run.returncode == 1, run.stderr  # as for any build that is not there
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("loomfuzz run: error: mlir-opt-head: ") and "pip install --no-deps torch-mlir" in line
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())


def test_a_pipeline_naming_a_pass_it_lacks_is_one_line(tmp_path):
    done = loomfuzz("run", "--target", "mlir-opt-head", "--pipeline", "builtin.module(sccp,no-such-pass)",
                    "-n", "5", "--artifacts", str(tmp_path / "a"), "--no-progress", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "registers no pass named no-such-pass" in line and "mlir-opt-head (LLVM 24.0.0git" in line


# ------------------------------------------------------------ an mlir-opt


def test_it_reads_writes_and_splits_as_mlir_opt_does(tmp_path):
    """The same stdout, stderr and status as mlir-opt-22 for chunks that pass, fail to verify
    and fail to parse; -o written only when every chunk succeeded; passes as flags."""
    source = tmp_path / "split.mlir"
    source.write_text(SPLIT)
    head = subprocess.run([_tool("mlir-opt-head"), "--split-input-file", str(source)], capture_output=True,
                          text=True)
    ref = subprocess.run(["mlir-opt-22", "--split-input-file", str(source)], capture_output=True, text=True)
    assert (head.returncode, head.stdout, head.stderr) == (ref.returncode, ref.stdout, ref.stderr) and ref.returncode == 1
    good = tmp_path / "good.mlir"
    good.write_text(SPLIT.split("// -----\n")[2])
    for binary in (_tool("mlir-opt-head"), "mlir-opt-22"):
        out = tmp_path / f"{os.path.basename(binary)}.out"
        done = subprocess.run([binary, "--canonicalize", str(good), "-o", str(out)], capture_output=True, text=True)
        assert done.returncode == 0 and "arith.addi" not in out.read_text()
    assert (tmp_path / "mlir-opt-head.out").read_text() == (tmp_path / "mlir-opt-22.out").read_text()
    failed = tmp_path / "failed.out"
    subprocess.run([_tool("mlir-opt-head"), "--split-input-file", str(source), "-o", str(failed)],
                   capture_output=True)
    assert not failed.exists()
    unknown = subprocess.run([_tool("mlir-opt-head"), "--no-such-pass", str(good)], capture_output=True, text=True)
    assert unknown.returncode == 1 and "Unknown command line argument '--no-such-pass'" in unknown.stderr


def test_the_persistent_driver_answers_as_the_tool():
    """Its build (version, passes) is the tool's, and a refused program's diagnostics are the
    tool's own, line for line."""
    target = resolve_target("mlir-opt-head", pipeline="builtin.module(cse)")
    driver = find_driver("mlir-opt", target.build)
    assert os.path.basename(driver) == "loomfuzz-mlir-opt-head-driver"
    assert identify(driver).version == target.build.version and identify(driver).passes == target.build.passes
    program = "func.func @f() {\n  %0 = arith.constant 1 : i32\n  return %0 : i32\n}\n"
    alone = subprocess.run(list(target.argv), input=program, capture_output=True, text=True)
    with PersistentRunner(persistent_target(target)) as runner:
        outcome = runner.run(program)
        fine = runner.run("func.func @g() {\n  return\n}\n")
    assert alone.returncode == outcome.returncode == 1
    assert outcome.stderr == alone.stderr, (outcome.stderr, alone.stderr)
    assert fine.returncode == 0


# ------------------------------------------------------------ runs through it


def test_a_crash_only_run_has_no_false_alarm(tmp_path):
    done = loomfuzz("run", "--target", "mlir-opt-head", "--pipeline", PIPELINE, "--profile", "wide", "-n", "300",
                    "--seed", "50", "--artifacts", str(tmp_path / "a"), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "target:     mlir-opt-head (LLVM 24.0.0git" in done.stdout
    assert "runner persistent, driver loomfuzz-mlir-opt-head-driver, 1 job" in done.stdout
    assert re.search(r"accepted\s+300\s+100\.0%", done.stdout) and "findings:   none" in done.stdout


def test_a_differential_run_has_no_false_alarm(tmp_path):
    """The head runs its own output (harness/run/head_exec.py): wide programs print dense i1
    elements MLIR 22 cannot read back, and none of them is a finding."""
    done = loomfuzz("run", "--oracle", "differential", "--target", "mlir-opt-head", "--pipeline", PIPELINE,
                    "--profile", "wide", "-n", "200", "--seed", "24", "--jobs", "2", "--artifacts",
                    str(tmp_path / "a"), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "findings:   none" in done.stdout and re.search(r"accepted\s+200\s+100\.0%", done.stdout)
    # independently: what the head prints for the first of them, MLIR 22 refuses
    from harness.execute.exec_rendering import exec_module

    generated = loomfuzz("generate", "--profile", "wide", "-n", "3", "--seed", "24", "-o", str(tmp_path / "g"),
                         cwd=tmp_path)
    assert generated.returncode == 0, generated.stderr
    texts = [exec_module(p.read_text()) for p in sorted((tmp_path / "g").glob("*.mlir"))]
    printed = subprocess.run([_tool("mlir-opt-head"), f"--pass-pipeline={PIPELINE}", "--split-input-file"],
                             input="// -----\n".join(texts), capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    read = subprocess.run(["mlir-opt-22", "--split-input-file"], input=printed.stdout, capture_output=True, text=True)
    assert read.stderr.count("error: elements hex data size is invalid") == 3, read.stderr[-2000:]


def test_the_differential_judge_finds_the_heads_ceildivsi_fold():
    """The pinned bug of docs/reference/upstream-bugs.md, on the head: its own JIT prints the
    folded +715827882 where the interpreter computes -715827882."""
    from harness.execute.differential import Optimizer, WrongCode
    from harness.execute.exec_rendering import exec_module
    from harness.execute.executors import make_executor
    from harness.execute.toolchain import Toolchain
    from harness.execute.twins import TwinPlan, with_twins

    program = (ROOT / "tests" / "programs" / "upstream_ceildivsi_int_min_wide.mlir").read_text()
    text = with_twins(exec_module(program), TwinPlan.parse("8:ff,21:83"))
    executor = make_executor("persistent", Toolchain())
    try:
        head = Optimizer(binary=_tool("mlir-opt-head"), pipeline="builtin.module(int-range-optimizations)")
        verdict = executor.judge(text, head)
        assert isinstance(verdict, WrongCode), verdict
        (difference,) = [d for d in verdict.differences if d.function.name == "graph_0"]
        assert (difference.reference, difference.target) == ("-715827882", "715827882")
        assert executor.head_programs == 1  # the head ran it, not MLIR 22
        assert executor.judge(exec_module(program), head).kind == "same"
    finally:
        executor.close()
