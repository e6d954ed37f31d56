"""The core is generic: a small non-MLIR grammar (tests/grammars/calc.py, integer
arithmetic with a rendering of its own) goes through every command, against a
test-double target (tests/fixtures/calc_target.py, a calculator that aborts on a
division by the literal 0), and nothing the commands print or write speaks of
loom: no loom, mlir, dataflow, P1-P24 or spatial.

Masked before the search: the tool's own name (``loomfuzz``, ``loom-fuzz``),
nothing else: the grammar's ``SUFFIX = ".calc"`` names its program files
(generated, enumerated, findings, triage reports) and its campaigns run the
generic fuzz target script ``fuzz_targets/program_fuzzer.py``.
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

ROOT = Path(__file__).resolve().parent.parent
GRAMMAR = ROOT / "tests" / "grammars" / "calc.py"
TARGET = ROOT / "tests" / "fixtures" / "calc_target.py"
LOOM_WORDS = re.compile(r"loom|mlir|dataflow|P1-P24|spatial", re.IGNORECASE)
#: masked: the tool's name
ALLOWED = re.compile(r"loom-?fuzz", re.IGNORECASE)
DIVISION_BY_ZERO = re.compile(r"(/|\bover) 0(?!\d)")


def loom_words(text: str) -> list[str]:
    return LOOM_WORDS.findall(ALLOWED.sub("", text))


@pytest.fixture
def calc(tmp_path):
    """Run ``loomfuzz ARGS`` in tmp_path with the calculator on PATH as ``calc``;
    every output is checked for loom words."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(TARGET, bin_dir / "calc")
    (bin_dir / "calc").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    env.pop("LOOM_OPT", None)

    def loomfuzz(*args: str, code: int = 0, own_words: bool = False) -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == code, (args, result.returncode, result.stdout[-2000:], result.stderr[-2000:])
        if not own_words:  # own_words: the command line itself names a loom tool
            assert not loom_words(result.stdout + result.stderr), (args, result.stdout, result.stderr)
        return result

    return loomfuzz


def written_files_have_no_loom_word(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file() and path.parent.name != "bin":
            assert not loom_words(str(path.relative_to(folder))), path
            if path.suffix != ".png":
                text = path.read_bytes().decode("utf-8", errors="replace")
                assert not loom_words(text), (path, loom_words(text))


def test_generate_decode_check_enumerate(calc, tmp_path):
    g = str(GRAMMAR)
    one = calc("generate", "--grammar", g, "-n", "5", "--seed", "7").stdout
    assert one == calc("generate", "--grammar", g, "-n", "5", "--seed", "7").stdout  # seeds reproduce
    words = calc("generate", "--grammar", g, "-n", "5", "--seed", "7", "--render", "words").stdout
    # the grammar's own rendering: the same programs, operators spelled out, a full stop
    spelled = {"+": "plus", "-": "minus", "*": "times", "/": "over"}
    assert [re.sub(r"[-+*/]", lambda m: spelled[m.group()], p.strip()) + "." for p in one.split("// -----")] \
        == [p.strip() for p in words.split("// -----")]
    calc("generate", "--grammar", g, "-n", "30", "--seed", "7", "-o", "programs")
    programs = sorted((tmp_path / "programs").iterdir())
    assert len(programs) == 30 and all(p.suffix == ".calc" for p in programs), programs
    for program in programs:  # every program is integer arithmetic, by a check of its own
        assert re.fullmatch(r"[\d ()+*/-]+\n", program.read_text()), program.read_text()
    # check: the grammar has no contract, so the grammar itself is the judge
    out = calc("check", "--grammar", g, *map(str, programs)).stdout
    assert "30 programs" in out and "no contract checker" in out
    (tmp_path / "bad.txt").write_text("1 +\n")
    bad = calc("check", "--grammar", g, "bad.txt", code=1)
    assert bad.stdout.startswith("bad.txt:1: not a program of the grammar")
    # decode: a byte string is a program of the grammar, in either rendering
    (tmp_path / "input").write_bytes(bytes(range(40)))
    text = calc("decode", "--grammar", g, "input").stdout
    spelled_out = calc("decode", "--grammar", g, "--render", "words", "input").stdout
    assert text.strip() and spelled_out.strip().endswith(".")
    # enumerate: count, -o (a window of the order), and --run against the calculator
    assert calc("enumerate", "--grammar", g, "--max-depth", "6", "--count-only").stdout.strip() == "4510"
    window = ("--grammar", g, "--max-depth", "6", "--start", "130", "--count", "30")
    calc("enumerate", *window, "-o", "some")
    some = sorted((tmp_path / "some").iterdir())
    assert {p.suffix for p in some} == {".calc"}
    texts = [p.read_text() for p in some]
    assert len(texts) == len(set(texts)) == 30
    crashing = sum(bool(DIVISION_BY_ZERO.search(t)) for t in texts)
    assert crashing
    run = calc("enumerate", *window, "--run", "--target", "calc", "--runner", "process",
               "--artifacts", "swept", "--no-progress", code=1)
    assert len(list((tmp_path / "swept").glob("crash-*.json"))) == crashing, run.stdout
    assert len(list((tmp_path / "swept").glob("crash-*.calc"))) == crashing
    # the programs written back in: run reads a folder's .calc files
    again = calc("run", "--grammar", g, "--target", "calc", "--runner", "process", "--artifacts", "again",
                 "--no-progress", "some", code=1)
    assert len(list((tmp_path / "again").glob("crash-*.calc"))) == crashing, again.stdout
    # what a grammar without a contract cannot do: one line, exit 2
    refused = calc("generate", "--grammar", g, "--render", "exec", code=2)
    assert len(refused.stderr.strip().splitlines()) == 1 and "not a rendering of this grammar" in refused.stderr
    written_files_have_no_loom_word(tmp_path)


def test_run_finds_the_planted_crash(calc, tmp_path):
    g = str(GRAMMAR)
    programs = calc("generate", "--grammar", g, "-n", "12", "--seed", "1").stdout.split("// -----")
    planted = [i for i, p in enumerate(programs) if DIVISION_BY_ZERO.search(p)]
    assert planted, "seed 1 has no division by the literal 0 among its first programs"
    result = calc("run", "--grammar", g, "--target", "calc", "-n", "12", "--seed", "1", "--runner", "process",
                  "--artifacts", "art", "--no-progress", code=1)
    found = sorted((tmp_path / "art").glob("crash-*.json"))
    assert len(found) == len(planted), result.stdout
    for finding in found:
        record = json.loads(finding.read_text())
        assert record["outcome"] == "crash" and "SIGABRT" in record["why"]
        assert DIVISION_BY_ZERO.search(finding.with_suffix(".calc").read_text())
    written_files_have_no_loom_word(tmp_path)


def test_fuzz_triage_coverage_plot(calc, tmp_path):
    g = str(GRAMMAR)
    fuzz = calc("fuzz", "--grammar", g, "--target", "calc", "--corpus", "corpus", "--artifacts", "found",
                "--time", "40", "--seed", "1", code=1)
    assert "program_fuzzer.py" in (tmp_path / "found" / "fuzz.log").read_text()  # the generic fuzz target script
    crashes = [p for p in (tmp_path / "found").glob("crash-*") if not p.suffix]
    assert crashes, "a 40 s campaign did not find the division by 0"
    triage = calc("triage", "--grammar", g, "--target", "calc", "--db", "t.db", "--out", "report",
                  "--repeat", "1", "--no-progress", "found")
    assert "1 bucket(s)" in triage.stderr + triage.stdout
    (bucket,) = (tmp_path / "report").glob("bucket-*")
    assert {p.name for p in bucket.iterdir()} >= {"minimized.calc", "regression.calc"}
    minimized = (bucket / "minimized.calc").read_text()
    assert DIVISION_BY_ZERO.search(minimized), minimized
    assert len(minimized) <= len(min((c.with_suffix(".calc").read_text() for c in crashes), key=len))
    coverage = calc("coverage", "--grammar", g, "corpus").stdout
    assert "k=1" in coverage
    calc("plot", "-o", "plots", "found")
    assert (tmp_path / "plots" / "index.html").is_file()
    written_files_have_no_loom_word(tmp_path)


@pytest.mark.parametrize("command", ["run", "fuzz", "triage"])
def test_a_target_reading_a_rendering_the_grammar_lacks(calc, tmp_path, command):
    (tmp_path / "found").mkdir()
    extra = {"run": ["-n", "1"], "fuzz": ["--corpus", "c", "--artifacts", "a", "--time", "5"],
             "triage": ["found"]}[command]
    refused = calc(command, "--grammar", str(GRAMMAR), "--target", "mlir-opt", *extra, code=2, own_words=True)
    # the user named that target; the message is one line and names the grammar's renderings
    assert refused.stderr.count("\n") == 1 and "its renderings: canonical, words" in refused.stderr


@pytest.mark.parametrize("suffix", ['"calc"', '".a.b"', '".json"', '"./x"', "7"])
def test_a_suffix_that_is_not_one_is_refused(calc, tmp_path, suffix):
    bad = tmp_path / "bad_suffix.py"
    bad.write_text(GRAMMAR.read_text().replace('SUFFIX = ".calc"', f"SUFFIX = {suffix}"))
    refused = calc("generate", "--grammar", str(bad), "-n", "1", code=2)
    assert refused.stderr.count("\n") == 1 and "SUFFIX" in refused.stderr and str(bad) in refused.stderr
