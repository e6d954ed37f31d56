"""``loomfuzz fuzz``'s one options value: built once, written once, read by the fuzz target.

The round trip of :class:`FuzzOptions` through :mod:`harness.core.typed_json`;
a real short campaign (real atheris/libFuzzer, the planted-bug fake loom-opt)
whose ``fuzz-options.json`` is exactly what the command built, whose target
reads it and reports back as JSON records, and whose printed totals are those
records; no per-setting environment variable left in the code; a bad options
file is one line and exit 2.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

import harness
from harness.cli import _parser
from harness.commands.fuzz import options_from_args
from harness.core import typed_json
from harness.fuzzing.campaign import LOG_FILE
from harness.fuzzing.libfuzzer import child_env
from harness.fuzzing.options import (
    OPTIONS_ENV,
    CoverageKind,
    FeatureMode,
    FuzzOptions,
    OracleKind,
    RunnerKind,
    StatsOptions,
    read_options,
)
from harness.fuzzing.worker_summary import WorkerSummary, read_summaries

ROOT = Path(harness.__file__).resolve().parent.parent
SCRIPT = ROOT / "fuzz_targets" / "loom_opt_fuzzer.py"

#: LOOMFUZZ_ variables that are not settings relayed from the command to the
#: fuzz target, each with its reason; every other one is gone for good.
NOT_RELAYS = {
    "LOOMFUZZ_OPTIONS": "the one relay: the options file's path, for libFuzzer's re-executed workers",
    "LOOMFUZZ_MLIR_DRIVER": "the user's: where the persistent driver is (like LOOM_OPT, MLIR_OPT)",
    "LOOMFUZZ_LOOM_DRIVER": "the user's: the driver built in loom's tree",
    "LOOMFUZZ_COVERAGE_LOG": "the tests': a log of coverage bridges, set around a run",
    "LOOMFUZZ_LIFELINE": "process lifetime: inherited pipe fds, extended by each fork-mode parent",
    "LOOMFUZZ_PARENT_PID": "process lifetime: read by the persistent driver (C) to die with its parent",
}
#: The per-setting variables this replaced (and the statistics' two).
OLD_RELAYS = ("TARGET", "LOOM_OPT", "PASS_ARGS", "PIPELINE", "EXPECTATIONS", "TIMEOUT", "MEMORY_MB",
              "ARTIFACTS", "COVERAGE", "GRAMMAR_FEATURES", "GRAMMAR", "PROFILE", "RUNNER",
              "RESTART_EVERY", "ORACLE", "ORACLE_MLIR_OPT", "STATS", "STATS_INTERVAL")


def everything_set(tmp_path: Path) -> FuzzOptions:
    """Options with every field away from its default."""
    return FuzzOptions(
        grammar=tmp_path / "g.py", profile="break:P3", target="mlir-opt", binary="/usr/bin/true",
        family="mlir-opt", build="true (no LLVM version, /usr/bin/true) as mlir-opt (--family mlir-opt)",
        pass_args=("--a", "--b=c d"), pipeline="builtin.module(cse)", expectations=tmp_path / "e.json",
        timeout=2.5, memory_mb=0, runner=RunnerKind.PERSISTENT, restart_every=7,
        coverage=CoverageKind.AFL, grammar_features=FeatureMode.ON, oracle=OracleKind.DIFFERENTIAL,
        optimizer="opt", reference_runner="run", runtime_library="/lib/x.so", twins=0.5,
        artifacts=tmp_path / "a", summary=tmp_path / "a" / "s.jsonl",
        stats=StatsOptions(tmp_path / "a" / "w.csv", 0.5), corpus=tmp_path / "c", self_test=True,
        time=9, runs=11, jobs=3, seed=-4, libfuzzer_args=("-max_len=8",),
    )


# ---------------------------------------------------------------- typed_json


def test_fuzz_options_round_trip_through_json(tmp_path):
    defaults, full = FuzzOptions(), everything_set(tmp_path)
    same = [f.name for f in dataclasses.fields(FuzzOptions)
            if getattr(full, f.name) == getattr(defaults, f.name)]
    assert same == []
    crash = dataclasses.replace(full, oracle=OracleKind.CRASH)
    for options in (defaults, full, crash):
        data = json.loads(json.dumps(typed_json.to_json(options)))
        assert typed_json.from_json(FuzzOptions, data) == options
        typed_json.dump(options, tmp_path / "o.json")
        assert read_options(tmp_path / "o.json") == options
    data = typed_json.to_json(crash)
    assert data["runner"] == "persistent" and data["stats"] == {"path": str(tmp_path / "a" / "w.csv"),
                                                                "interval": 0.5}
    assert data["pass_args"] == ["--a", "--b=c d"]


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Inner:
    pair: tuple[int, str]
    colour: Colour = Colour.RED


@dataclasses.dataclass(frozen=True)
class Outer:
    inner: Inner
    items: list[Optional[float]]
    table: dict[str, Inner]
    name: str = "x"


def test_typed_json_generic_types_and_errors():
    value = Outer(Inner((1, "a")), [1.5, None, 2.0], {"k": Inner((2, "b"))})
    assert typed_json.from_json(Outer, json.loads(json.dumps(typed_json.to_json(value)))) == value
    assert typed_json.from_json(Outer, {"inner": {"pair": [1, "a"]}, "items": [], "table": {}}).name == "x"
    cases = {
        "Outer.inner.pair[0]: expected a whole number, got 'x'":
            {"inner": {"pair": ["x", "a"]}, "items": [], "table": {}},
        "Outer.inner.colour: expected 'red', got 'blue'":
            {"inner": {"pair": [1, "a"], "colour": "blue"}, "items": [], "table": {}},
        "Outer.items[1]: expected a number, got true": {"inner": {"pair": [1, "a"]}, "items": [1, True],
                                                        "table": {}},
        "Outer: unknown field 'nme' (known: inner, items, table, name)":
            {"inner": {"pair": [1, "a"]}, "items": [], "table": {}, "nme": "y"},
        "Outer: missing field 'items'": {"inner": {"pair": [1, "a"]}, "table": {}},
    }
    for message, data in cases.items():
        with pytest.raises(typed_json.TypedJsonError) as error:
            typed_json.from_json(Outer, data, "Outer")
        assert str(error.value) == message
    with pytest.raises(typed_json.TypedJsonError, match=r"FuzzOptions: timeout must be positive"):
        typed_json.from_json(FuzzOptions, {"timeout": 0}, "FuzzOptions")


# ------------------------------------------------------------ a real campaign


def test_a_campaign_writes_its_options_once_and_reads_the_workers_records(fake_loom_opt, tmp_path):
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    argv = ["fuzz", "--loom-opt", fake_loom_opt, "--pass-args=--plant=none --loom-lower-for-to-graph",
            "--runner", "process", "--timeout", "7", "--grammar-features", "off", "--runs", "300",
            "--seed", "3", "--stats-interval", "0.05", "--corpus", str(corpus), "--artifacts", str(artifacts)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOMFUZZ_") and k != "LOOM_OPT"}
    result = subprocess.run([sys.executable, "-m", "harness.cli", *argv], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]

    # the file is the value the command builds from these arguments
    written = read_options(artifacts / "fuzz-options.json")
    built = options_from_args(_parser("fuzz").parse_args(argv), binary=fake_loom_opt,
                              build=f"fake-loom-opt (no LLVM version, {fake_loom_opt}) as loom-opt (--loom-opt)")
    assert written == built
    assert written.summary == artifacts / "fuzz-summary.jsonl" and written.stats.interval == 0.05
    # the target's command line names the file and nothing else of ours
    log = (artifacts / LOG_FILE).read_text()  # what the fuzz target printed, after its command line
    command = next(line for line in log.splitlines() if line.startswith("==== loomfuzz fuzz "))
    assert re.findall(r" --\S+", command) == [f" --options={artifacts / 'fuzz-options.json'}"]

    # the target read it: its record went where only the file says, its rows too
    [record] = read_summaries(written.summary)
    assert isinstance(record, WorkerSummary) and record.worker.startswith("pid-")
    assert record.executions == 300 and record.findings == {} and record.in_target > 0
    assert written.stats.path.read_text().count(record.worker) >= 2  # rows every 0.05 s and at exit (300 runs take about half a second)

    # the command's printed totals are the record's
    assert re.search(rf"executions:\s+300 \([\d.]+/s over {record.seconds:.1f} s\)", result.stdout), \
        result.stdout
    assert f"{record.in_target:.1f} s in the target" in result.stdout
    assert "findings:    none" in result.stdout
    assert record.line() in log  # the target's line, for people


def test_the_one_relay_variable():
    """Settings reach the fuzz target in the options file; the environment carries
    its path alone (libFuzzer's fork-mode workers get no argument of ours)."""
    env = child_env(Path("o.json"), {"PATH": "/bin"})
    assert set(env) == {"PATH", "PYTHONUNBUFFERED", OPTIONS_ENV}
    found: dict[str, set[str]] = {}
    folders = [ROOT / name for name in ("harness", "fuzz_targets", "benchmarks", "deploy", "native",
                                        ".clusterfuzzlite", "docs/how-to", "docs/explanation")]
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and path.suffix in (".py", ".c", ".cpp", ".sh", ".sbatch", ".yaml", ".md", ""):
                for name in re.findall(r"LOOMFUZZ_[A-Z_]+", path.read_text(errors="replace")):
                    found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    unexpected = {name: sorted(paths) for name, paths in found.items()
                  if name not in NOT_RELAYS and name != "LOOMFUZZ_WITH_LOOM"}  # a CMake option
    assert unexpected == {}
    assert not set(found) & {f"LOOMFUZZ_{name}" for name in OLD_RELAYS}


# ------------------------------------------------------------ bad options files


@pytest.mark.parametrize("content, expected", [
    ('{"timeout": 5,\n  "target": }\n', r"options file \S+/bad\.json:2: not JSON: "),
    ('{"timeout": "soon"}', r"options file \S+/bad\.json: FuzzOptions\.timeout: expected a number, "
                            r"got 'soon'"),
    ('{"runner": "batch"}', r"options file \S+/bad\.json: FuzzOptions\.runner: expected 'process' or "
                            r"'persistent', got 'batch'"),
    (None, r"options file \S+/bad\.json: cannot read: No such file or directory"),
])
def test_a_bad_options_file_is_one_line_and_exit_2(tmp_path, content, expected):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOMFUZZ_")}
    ways = [([f"--options={path}"], {})]
    if content is None:  # named by the variable (a re-executed worker), the same line
        ways.append(([], {OPTIONS_ENV: str(path)}))
    for argv, extra in ways:
        result = subprocess.run([sys.executable, str(SCRIPT), *argv, "-atheris_runs=1"], capture_output=True,
                                text=True, cwd=tmp_path, env={**env, **extra}, timeout=60)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert re.fullmatch(r"loom_opt_fuzzer: error: " + expected + r".*", lines[0]), lines[0]


def test_an_old_style_option_is_one_line_and_exit_2(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--target=mlir-opt", "-atheris_runs=1"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "loom_opt_fuzzer: error: unknown option --target: the settings come in a file, --options=FILE "
        "(loomfuzz fuzz writes ARTIFACTS/fuzz-options.json); libFuzzer's flags take one dash"]
