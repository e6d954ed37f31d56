"""``loomfuzz fuzz`` and the atheris fuzz targets, run for real.

Real subprocesses of the CLI, real atheris/libFuzzer, real mlir-opt-22, and
the planted-bug fake loom-opt (tests/fixtures/fake_loom_opt.c).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness.fuzzing.campaign import LOG_FILE
from harness.fuzzing.corpus import inspect_corpus, seed_corpus, seed_programs
from harness.fuzzing.findings import finding_kind
from harness.fuzzing.libfuzzer import build_command, child_env, fuzz_target_script, libfuzzer_flags
from harness.fuzzing.options import CoverageKind, FuzzOptions, target_options, write_options
from harness.fuzzing.worker_summary import WorkerSummary, read_summaries
from harness.checker import check_text
from harness.contract import fuzz_script, load_grammar
from harness.core.features import KPathFeatures
from harness.core.grammar import default_grammar
from shapes import Body, Nesting, decode_program, render_program

REPO = Path(harness.__file__).resolve().parent.parent
TARGETS = REPO / "fuzz_targets"
CRASH = re.compile(r"crash-[0-9a-f]{40}")
SIDECAR_FIELDS = {
    "name", "target", "command", "outcome", "returncode", "signal", "signal_name", "reason",
    "duration", "stderr_tail", "stdout_tail", "expected", "rule", "finding", "why",
}


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without our option variables (they would change defaults)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LOOMFUZZ_") and k not in ("LOOM_OPT", "MLIR_OPT")}
    env.update(extra)
    return env


def options_flag(folder: Path, **fields) -> str:
    """``--options=FILE`` for a hand-run fuzz target, FILE holding ``FuzzOptions(**fields)``."""
    path = folder / "hand-options.json"
    write_options(FuzzOptions(**fields), path)
    return f"--options={path}"


def loomfuzz(*args, cwd: Path, env: dict | None = None, timeout: float = 300,
             python: list[str] | None = None) -> subprocess.CompletedProcess:
    command = python or [sys.executable, "-m", "harness.cli"]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=env or clean_env(), timeout=timeout)


def fuzz_log(artifacts: Path) -> str:
    """What libFuzzer and the fuzz target printed: the campaign's log (harness.fuzzing.campaign)."""
    return (artifacts / LOG_FILE).read_text()


def crash_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if CRASH.fullmatch(p.name)) if folder.is_dir() else []


def corpus_sizes(stdout: str) -> tuple[int, int]:
    match = re.search(r"corpus:\s+(\d+) -> (\d+) files", stdout)
    assert match, stdout
    return int(match.group(1)), int(match.group(2))


def executions(stdout: str) -> int:
    match = re.search(r"executions:\s+(\d+)", stdout)
    assert match, stdout
    return int(match.group(1))


# ------------------------------------------------------------- real campaigns


def test_fake_target_crash_is_found_with_sidecars(fake_loom_opt, tmp_path):
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    corpus.mkdir()
    (corpus / "smallest").write_bytes(b"\0")  # no planted bug: the fuzzer has to get there
    result = loomfuzz(
        "fuzz", "--loom-opt", fake_loom_opt,
        "--pass-args", "--plant=assert,segv --loom-lower-for-to-graph",
        "--corpus", corpus, "--artifacts", artifacts, "--runs", 20000, "--seed", 7,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"findings:\s+1 \(crash: 1\)", result.stdout), result.stdout
    crashes = crash_files(artifacts)
    assert len(crashes) == 1, os.listdir(artifacts)
    crash = crashes[0]
    data = crash.read_bytes()
    assert crash.name == "crash-" + hashlib.sha1(data).hexdigest()  # what atheris calls it
    record = json.loads((artifacts / f"{crash.name}.json").read_text())
    assert SIDECAR_FIELDS <= set(record), set(record)
    assert record["name"] == crash.name and record["finding"] is True
    assert record["outcome"] == "crash"
    assert record["signal_name"] in ("SIGABRT", "SIGSEGV"), record
    assert record["target"]["argv"] == [fake_loom_opt, "--plant=assert,segv", "--loom-lower-for-to-graph"]
    assert record["command"].endswith(f"< {crash.name}.mlir")
    assert "Stack dump" in record["stderr_tail"]
    program_text = (artifacts / f"{crash.name}.mlir").read_text()
    assert check_text(program_text) == []
    # the planted shapes: freeze in scf.for (assert), memory in scf.if (segv)
    sites = [s for t in decode_program(data).threads for s in t.sites]
    assert any((s.nesting, s.body) in ((Nesting.FOR, Body.FREEZE), (Nesting.IF, Body.MEMORY)) for s in sites)
    # `loomfuzz decode` of the crash file prints the sidecar's program
    decoded = loomfuzz("decode", crash, cwd=tmp_path)
    assert decoded.returncode == 0, decoded.stderr
    comment, text = decoded.stdout.split("\n", 1)
    assert comment.startswith(f"// {crash}: ")
    assert text == program_text
    assert "Finding: loom-opt: crash" in fuzz_log(artifacts)  # atheris printed our exception, in the log
    assert "Finding:" not in result.stderr and "found crash-" in result.stderr  # the terminal: loomfuzz's line


def test_mlir_opt_campaign_grows_the_corpus_without_finding(mlir_opt, tmp_path):
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    result = loomfuzz("fuzz", "--target", "mlir-opt", "--runs", 250, "--seed", 2,
                      "--corpus", corpus, "--artifacts", artifacts, cwd=tmp_path,
                      env=clean_env(MLIR_OPT=mlir_opt))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "seeded" in result.stderr
    before, after = corpus_sizes(result.stdout)
    assert before >= 20 and after > before
    assert after == len([p for p in corpus.iterdir() if p.is_file()])
    assert executions(result.stdout) == 250
    assert re.search(r"\d+\.\d/s", result.stdout)
    assert "findings:    none" in result.stdout
    assert "  grammar coverage: k=1 17/17, k=2 36/36\n" in result.stdout  # the seeds cover every pair
    assert sorted(p.name for p in artifacts.iterdir()) == [  # no finding; the folder's build and command
        ".loomfuzz-folder.json", "fuzz-options.json", "fuzz-summary.jsonl", "fuzz.log", "stats-workers.csv",
        "stats.csv"]
    assert "loom-fuzz summary: 250 executions" in fuzz_log(artifacts)  # the target's line, for people
    [record] = read_summaries(artifacts / "fuzz-summary.jsonl")  # ... and its record, for loomfuzz
    assert record.executions == 250 and record.findings == {}


def test_fork_mode_collects_findings_in_one_folder(fake_loom_opt, tmp_path):
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    # a PATH whose python3 (if any) is not this one: the workers re-execute the
    # script through `#!/usr/bin/env python3`, so the campaign must put this
    # Python's folder first
    env = clean_env(PATH="/usr/bin:/bin")
    result = loomfuzz("fuzz", "--loom-opt", fake_loom_opt, "--jobs", 2, "--runs", 300, "--seed", 5,
                      "--corpus", corpus, "--artifacts", artifacts, cwd=tmp_path, env=env)
    assert "-fork=2" in fuzz_log(artifacts)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    crashes = crash_files(artifacts)
    sidecars = sorted(artifacts.glob("crash-*.json"))
    assert len(crashes) >= 1 and "exit 127" not in fuzz_log(artifacts)
    assert {c.name for c in crashes} == {s.stem for s in sidecars}  # one folder, nothing orphaned
    for crash in crashes:
        assert (artifacts / f"{crash.name}.mlir").is_file()
        record = json.loads((artifacts / f"{crash.name}.json").read_text())
        assert record["finding"] and record["outcome"] == "crash"
    match = re.search(r"findings:\s+(\d+) \(", result.stdout)
    assert match and int(match.group(1)) == len(sidecars)
    assert executions(result.stdout) >= 300


def test_self_fuzz_finds_nothing(tmp_path, samples):
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    runs = samples(3000, 8000)
    result = loomfuzz("fuzz", "--self", "--runs", runs, "--seed", 3,
                      "--corpus", corpus, "--artifacts", artifacts, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "grammar_fuzzer.py" in fuzz_log(artifacts)
    assert executions(result.stdout) == runs
    assert crash_files(artifacts) == []
    assert sorted(p.name for p in artifacts.iterdir()) == [  # no finding; the folder's build and command
        ".loomfuzz-folder.json", "fuzz-options.json", "fuzz-summary.jsonl", "fuzz.log", "stats-workers.csv",
        "stats.csv"]
    assert "findings:    none" in result.stdout
    [record] = read_summaries(artifacts / "fuzz-summary.jsonl")
    assert record.executions == runs and record.programs_checked > 0


def test_time_limit_ends_cleanly_with_a_summary(fake_loom_opt, tmp_path):
    """-max_total_time ends in libFuzzer's exit(), which skips Python's atexit:
    the fuzz target's summary comes from its C-level exit hook."""
    result = loomfuzz("fuzz", "--loom-opt", fake_loom_opt, "--pass-args=--plant=none",
                      "--time", 2, "--corpus", tmp_path / "corpus", "--artifacts", tmp_path / "artifacts",
                      cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "-max_total_time=2" in fuzz_log(tmp_path / "artifacts")
    assert re.search(r"loom-fuzz summary: \d+ executions in [\d.]+ s", fuzz_log(tmp_path / "artifacts"))
    assert executions(result.stdout) > 20


# ------------------------------------------------------------ failing early


def test_missing_loom_opt_is_one_line_before_atheris(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = clean_env(PATH=os.pathsep.join([str(empty), str(Path(sys.executable).parent)]))
    result = loomfuzz("fuzz", "--runs", 5, cwd=tmp_path, env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("loomfuzz fuzz: error: ")
    assert "--loom-opt PATH" in lines[0] and "LOOM_OPT" in lines[0]
    assert not (tmp_path / "corpus").exists() and not (tmp_path / "artifacts").exists()  # nothing started

    result = loomfuzz("fuzz", "--loom-opt", tmp_path / "nope", "--runs", 5, cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "nope" in result.stderr

    result = loomfuzz("fuzz", "--target", "mlir-opt", "--runs", 5, cwd=tmp_path,
                      env={**env, "MLIR_OPT": str(tmp_path / "no-mlir-opt")})
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "no-mlir-opt" in result.stderr


def test_fuzz_target_script_missing_binary_fails_before_libfuzzer(tmp_path):
    env = child_env(None, clean_env())
    result = subprocess.run([str(TARGETS / "loom_opt_fuzzer.py"),
                             options_flag(tmp_path, binary=str(tmp_path / "nope")),
                             "-atheris_runs=3"], capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"loom_opt_fuzzer: error: loom-opt binary '{tmp_path / 'nope'}' does not exist or is not executable"
    ]


def test_unreadable_and_garbage_corpus_files(fake_loom_opt, tmp_path):
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    corpus.mkdir()
    (corpus / "gone").symlink_to(tmp_path / "does-not-exist")
    locked = corpus / "locked"
    locked.write_bytes(b"\x80\x80")
    locked.chmod(0)
    (corpus / "garbage").write_bytes(bytes(range(256)) * 3)
    (corpus / "empty").write_bytes(b"")
    os.mkfifo(corpus / "fifo")
    result = loomfuzz("fuzz", "--loom-opt", fake_loom_opt,
                      "--pass-args", "--plant=none --loom-lower-for-to-graph",
                      "--corpus", corpus, "--artifacts", artifacts, "--runs", 200, "--seed", 1,
                      cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert re.search(r"warning: cannot read corpus file \S*gone: No such file or directory", result.stderr)
    assert re.search(r"warning: cannot read corpus file \S*fifo: not a regular file", result.stderr)
    if os.geteuid() != 0:  # root reads mode-000 files anyway
        assert re.search(r"warning: cannot read corpus file \S*locked: Permission denied", result.stderr)
    assert "not canonical program encodings" in result.stderr and "garbage" in result.stderr
    assert "empty corpus file" in result.stderr
    assert "seeded" not in result.stderr  # readable files: not an empty corpus
    assert executions(result.stdout) == 200
    assert "findings:    none" in result.stdout


def test_coverage_on_an_uninstrumented_binary_is_a_clear_error(fake_loom_opt, tmp_path):
    # The fake is built with plain cc: it writes no AFL++ map.
    result = loomfuzz("fuzz", "--loom-opt", fake_loom_opt, "--coverage", "afl", "--runs", "5", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"loomfuzz fuzz: error: --coverage afl: {fake_loom_opt} has no AFL++ coverage map "
        "(build it with afl-clang-fast/afl-clang-fast++)"
    ]
    script = TARGETS / "loom_opt_fuzzer.py"
    hand = options_flag(tmp_path, binary=fake_loom_opt, coverage=CoverageKind.AFL)
    result = subprocess.run([sys.executable, str(script), hand, "-atheris_runs=2"], capture_output=True, text=True, cwd=tmp_path,
                            env=clean_env(), timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"loom_opt_fuzzer: error: --coverage afl: {fake_loom_opt} has no AFL++ coverage map "
        "(build it with afl-clang-fast/afl-clang-fast++)")


def test_libfuzzer_flags_must_follow_double_dash(fake_loom_opt, tmp_path):
    result = loomfuzz("fuzz", "--loom-opt", fake_loom_opt, "--", "somedir", cwd=tmp_path)
    assert result.returncode == 2 and "start with '-'" in result.stderr


# --------------------------------------------------------------- the pieces


def test_fuzz_targets_are_executable_scripts():
    for name in ("loom_opt_fuzzer.py", "program_fuzzer.py", "grammar_fuzzer.py"):
        script = TARGETS / name
        assert os.access(script, os.X_OK), script
        assert script.read_text().startswith("#!/usr/bin/env python3\n")
        source = script.read_text()
        assert "import fuzzingbook" not in source and "from fuzzingbook" not in source
    assert fuzz_target_script("grammar_fuzzer.py") == TARGETS / "grammar_fuzzer.py"
    # a grammar's script: loom's entry point for MLIR programs, the generic one for another suffix
    assert fuzz_target_script(fuzz_script(load_grammar())) == TARGETS / "loom_opt_fuzzer.py"
    calc = load_grammar(str(Path(__file__).parent / "grammars" / "calc.py"))
    assert fuzz_target_script(fuzz_script(calc)) == TARGETS / "program_fuzzer.py"


def test_fuzz_target_imports_stay_light():
    code = ("import runpy, sys\n"
            "sys.argv = ['x', '--help']\n"
            f"runpy.run_path({str(TARGETS / 'loom_opt_fuzzer.py')!r}, run_name='__main__')\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('fuzzingbook', 'numpy', 'scipy', 'IPython', 'pandas', 'tqdm'))\n"
            "print('HEAVY', heavy)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


def test_libfuzzer_flags_from_options(tmp_path):
    options = FuzzOptions(corpus=tmp_path / "c", artifacts=tmp_path / "a", time=30, runs=100, seed=4)
    flags = libfuzzer_flags(options, options.artifacts)
    assert "-max_total_time=30" in flags and "-atheris_runs=100" in flags and "-seed=4" in flags
    assert f"-artifact_prefix={(tmp_path / 'a').resolve()}{os.sep}" in flags
    assert not any(f.startswith("-fork") for f in flags)

    options = dataclasses.replace(options, jobs=3)
    flags = libfuzzer_flags(options, options.artifacts)
    assert "-fork=3" in flags and "-runs=100" in flags and "-ignore_crashes=1" in flags
    assert not any(f.startswith("-atheris_runs") for f in flags)

    user = ("-ignore_crashes=0", "-max_len=8", "-dict=x.dict")
    options = dataclasses.replace(options, libfuzzer_args=user)
    flags = libfuzzer_flags(options, options.artifacts)
    assert "-ignore_crashes=1" not in flags and tuple(flags[-3:]) == user

    # the settings travel in the options file: the command line holds only its name
    options = dataclasses.replace(options, jobs=1, binary="/bin/true", pass_args=("--a", "--b"))
    command = build_command(options, TARGETS / "loom_opt_fuzzer.py", tmp_path / "o.json")
    assert command[:3] == [sys.executable, str(TARGETS / "loom_opt_fuzzer.py"),
                           f"--options={(tmp_path / 'o.json').resolve()}"]
    assert [c for c in command if c.startswith("--")] == [command[2]]
    assert command[-1] == str((tmp_path / "c").resolve())


def test_child_env_puts_this_python_first(tmp_path):
    env = child_env(None, {"PATH": "/usr/bin:/bin", "LOOMFUZZ_OPTIONS": "stale.json"})
    assert "LOOMFUZZ_OPTIONS" not in env  # an enclosing campaign's file is not ours
    assert child_env(tmp_path / "o.json", {})["LOOMFUZZ_OPTIONS"] == str(tmp_path / "o.json")
    first = env["PATH"].split(os.pathsep)[0]
    assert first == str(Path(sys.executable).parent)
    assert shutil.which("python3", path=env["PATH"]).startswith(first)


def test_target_options_reads_the_file_and_passes_libfuzzer_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("LOOMFUZZ_OPTIONS", raising=False)
    path = tmp_path / "o.json"
    write_options(FuzzOptions(target="mlir-opt", timeout=5.0), path)
    options, rest = target_options(["prog", f"--options={path}", "-runs=3", "corpus"], "prog")
    assert options == FuzzOptions(target="mlir-opt", timeout=5.0)
    assert rest == ["prog", "-runs=3", "corpus"]
    assert os.environ["LOOMFUZZ_OPTIONS"] == str(path)  # for libFuzzer's re-executed workers
    options, rest = target_options(["prog", "-runs=3"], "prog")  # such a worker
    assert options.target == "mlir-opt" and rest == ["prog", "-runs=3"]
    for argv in (["prog", "--target=mlir-opt"], ["prog", "--options"]):
        with pytest.raises(SystemExit) as exit:
            target_options(argv, "prog")
        assert exit.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


def test_seed_corpus_covers_the_grammar(tmp_path):
    from harness.core.codec import decode

    g = default_grammar()
    datas = seed_programs(g)
    assert 40 <= len(datas) <= 60 and all(datas)  # libFuzzer skips empty files
    features = KPathFeatures(g)
    assert features.union(decode(d, g) for d in datas) == set(range(len(features)))
    for data in datas:
        assert check_text(render_program(decode_program(data))) == []
    assert seed_programs(g) == datas  # reproducible
    written = seed_corpus(tmp_path, g)
    assert written == len(datas) == len(list(tmp_path.iterdir()))
    report = inspect_corpus(tmp_path, g)
    assert report.readable == written and not report.noncanonical and not report.unreadable


def test_finding_kinds_and_summary_line():
    assert finding_kind({"outcome": "crash", "finding_kind": "crash"}) == "crash"
    assert finding_kind({"outcome": "accepted", "finding_kind": "wrong-output"}) == "wrong-output"
    assert finding_kind({"outcome": "rejected", "finding_kind": "unexpected-rejection"}) == "unexpected-rejection"
    assert finding_kind({"outcome": "timeout"}) == "timeout"  # a sidecar without the field
    line = WorkerSummary("pid-1", 12, 3.5, in_target=1.0).line()
    assert line == ("loom-fuzz summary: 12 executions in 3.500 s (3.4 exec/s); findings: 0; "
                    "time in target: 1.000 s")
