"""Help that starts with what a first run needs (issue 46, item 5): every command's options in
groups (what to fuzz or run, where to write, how long, oracles, advanced), examples that are
valid command lines, "did you mean" for a mistyped option, and no silent abbreviation."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import harness
from harness.cli import _parser, command_parser
from harness.cli_reference import command_parsers

REPO = Path(harness.__file__).resolve().parent.parent
LOOMFUZZ = [sys.executable, "-m", "harness.cli"]


def titles(parser: argparse.ArgumentParser) -> list[str]:
    return [g.title for g in parser._action_groups if g._group_actions and g.title not in
            ("options", "positional arguments")]


def examples(parser: argparse.ArgumentParser) -> list[str]:
    """The command lines under ``examples:`` in the command's help."""
    help_text = parser.format_help()
    assert "\nexamples:\n" in help_text, help_text
    block = help_text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines() if line.startswith("  loomfuzz ")]


def test_fuzz_help_starts_with_what_a_first_campaign_needs():
    done = subprocess.run([*LOOMFUZZ, "fuzz", "--help"], capture_output=True, text=True, timeout=60,
                          env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    text = done.stdout
    headings = re.findall(r"^([a-z][a-z ]+):$", text, re.M)
    assert headings == ["options", "what to fuzz", "where to write", "how long", "oracles", "advanced",
                        "examples"], headings
    # the options of a first campaign come before the differential oracle's
    for first in ("--loom-opt", "--corpus", "--time", "--jobs"):
        assert text.index(f"  {first} ") < text.index("  --oracle "), first
    assert text.index("  --oracle ") < text.index("  --twins ") < text.index("  --runner ")
    usage = text.split("\n\n", 1)[0]
    assert usage.count("\n") <= 2 and "--corpus DIR" in usage and "--time S" in usage  # short, not 13 lines


def test_every_command_has_groups_and_two_or_three_examples_that_parse():
    for name, parser in command_parsers().items():
        assert parser.allow_abbrev is False, name
        groups = titles(parser)
        if name in ("fuzz", "run", "enumerate", "triage"):
            assert groups[0].startswith("what to ") and groups[1:] == [
                "where to write", "how long" if name == "fuzz" else "how hard" if name == "triage" else "how much",
                "oracles", "advanced"], (name, groups)
        lines = examples(parser)
        assert 2 <= len(lines) <= 3, (name, lines)
        assert any(line.startswith(f"loomfuzz {name} ") for line in lines), (name, lines)
        for line in lines:
            for part in line.split(" | "):  # each loomfuzz command of a pipe
                argv = shlex.split(part)
                if argv[0] == "loomfuzz":
                    parsed, extras = _parser(argv[1]).parse_known_args(argv[1:])
                    assert extras == [] and parsed.command == argv[1], line  # every option of it exists


def test_a_mistyped_option_names_the_closest_one_in_one_line():
    for argv, expected in ((["fuzz", "--loomopt", "/bin/true"], "--loomopt (did you mean --loom-opt?)"),
                           (["run", "--artifact", "out"], "--artifact (did you mean --artifacts?)"),
                           (["fuzz", "-rss_limit_mb=4096"], "(a libFuzzer flag? they go after --)")):
        done = subprocess.run([*LOOMFUZZ, *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stdout == "", done
        (line,) = done.stderr.splitlines()  # one line, not loomfuzz's usage
        assert line.startswith(f"loomfuzz {argv[0]}: error: unknown option: ") and expected in line, line
        assert line.endswith(f"see loomfuzz {argv[0]} --help")


def test_no_option_is_taken_for_an_abbreviation():
    parser = _parser("fuzz")
    args, extras = parser.parse_known_args(["fuzz", "--loom-op", "/bin/true"])
    assert args.loom_opt is None and extras == ["--loom-op", "/bin/true"] or extras[0] == "--loom-op"
    assert command_parser(parser, "fuzz").allow_abbrev is False and parser.allow_abbrev is False
    done = subprocess.run([*LOOMFUZZ, "generate", "-n", "1", "--see", "3"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--see (did you mean --seed?)" in done.stderr, done
    assert done.stdout == ""  # nothing generated under a guessed option


#: ``--word`` tokens in the repository that are a prefix of a loomfuzz or benchmark option but
#: belong to other tools (sbatch's --mem, lit's `not --crash`, target arguments of tests, a
#: sentence of native/README.md), or are this rule's own example (--loom-op); this file's own
#: mistyped options are left out of the scan
OTHER_TOOLS = {"--a", "--b", "--crash", "--mem", "--mlir-", "--loom-op"}


def test_nothing_in_the_repository_relies_on_an_abbreviation():
    options = {o for parser in command_parsers().values() for a in parser._actions for o in a.option_strings}
    for bench in (REPO / "benchmarks").glob("*.py"):
        options.update(re.findall(r'add_argument\(\s*"(--[\w-]+)"', bench.read_text()))
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    found = {}
    for name in files:
        if name == "tests/test_cli_help.py":
            continue
        try:
            text = (REPO / name).read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for token in set(re.findall(r"(?<![\w-])--[a-z][\w-]*", text)) - options - OTHER_TOOLS:
            if any(option.startswith(token) for option in options):
                found.setdefault(token, []).append(name)
    assert found == {}, found


def test_benchmark_parsers_take_no_abbreviation_either():
    for bench in sorted((REPO / "benchmarks").glob("*.py")):
        for call in re.findall(r"argparse\.ArgumentParser\((.*?)\)\n", bench.read_text(), re.S):
            assert "allow_abbrev=False" in call, bench.name
