"""The documentation: the site builds with ``mkdocs build --strict`` (a broken
link, a missing anchor or a page left out of the navigation fails it), the
command-line reference is the parsers' own, the README stays a front page whose
set-up commands are the ones CI runs, and the how-to's example grammar is the
file it shows and makes programs upstream MLIR verifies; tests/README.md lists
every test file."""

from __future__ import annotations

import argparse
import difflib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli_reference

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = REPO / "README.md"
MAIN_JOB = "bash .ci/setup && .venv/bin/loomfuzz generate -n 1000 -o corpus --stats"


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=300)


def test_site_builds_strict(tmp_path):
    result = mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()


@pytest.mark.parametrize("damage", [
    ("index.md", "[gone](no-such-page.md)"),
    ("index.md", "[gone](tutorial.md#no-such-section)"),
    ("stray-page.md", "# Not in the navigation"),
])
def test_strict_build_fails_on_broken_docs(tmp_path, damage):
    """The configuration really catches each kind of breakage (a copy of the docs, damaged once)."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page, text = damage
    with open(tmp_path / "docs" / page, "a") as out:
        out.write("\n" + text + "\n")
    result = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and "WARNING" in result.stderr, result.stderr


def test_cli_reference_is_up_to_date():
    page = (DOCS / "reference" / "cli.md").read_text()
    fresh = cli_reference.reference()
    if page != fresh:
        diff = "".join(list(difflib.unified_diff(page.splitlines(True), fresh.splitlines(True),
                                                 "docs/reference/cli.md", "the parsers"))[:40])
        pytest.fail(f"docs/reference/cli.md is out of date; regenerate it with\n    {cli_reference.REGENERATE}\n{diff}",
                    pytrace=False)


def test_cli_reference_has_every_option():
    """Every option string argparse's own help prints for a command is in that command's section."""
    page = (DOCS / "reference" / "cli.md").read_text()
    sections = dict(re.findall(r"^## `loomfuzz (\w+)`\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    parsers = cli_reference.command_parsers()
    assert set(sections) == set(parsers)
    for name, parser in parsers.items():
        invocations = [m.group(1) for line in parser.format_help().splitlines()
                       if (m := re.match(r"^ {2}(-\S.*?)(?: {2,}|$)", line))]  # "  -n COUNT, --count COUNT"
        shown = {o for text in invocations for o in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text)}
        shown -= {"-h", "--help"}
        assert shown, name
        missing = {o for o in shown if f"`{o}" not in sections[name]}
        assert not missing, f"loomfuzz {name}: {sorted(missing)} not in docs/reference/cli.md"
        for action in parser._actions:
            if not action.option_strings and not isinstance(action, argparse._HelpAction):
                assert f"`{action.metavar or action.dest}`" in sections[name]


def test_readme_is_a_front_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_readme_set_up_commands_are_the_ones_ci_runs():
    ci_command = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
                  if line.startswith("bash .ci/setup")]
    assert ci_command == ["bash .ci/setup && .venv/bin/python -m pytest"]
    readme = README.read_text()
    blocks = re.findall(r"^```sh\n(.*?)^```", readme, re.M | re.S)
    set_up = [line for block in blocks for line in block.splitlines() if line.startswith("bash .ci/setup")]
    assert set_up == [MAIN_JOB, ci_command[0]]


def test_readme_links_resolve():
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert targets
    for target in targets:
        assert "://" not in target and not target.startswith("/"), f"README links relatively: {target}"
        assert (REPO / target).exists(), f"README.md links to {target}, which does not exist"


def test_write_a_grammar_example_is_the_file_and_verifies(tmp_path, mlir_opt):
    grammar = DOCS / "how-to" / "arith_funcs.py"
    page = (DOCS / "how-to" / "write-a-grammar.md").read_text()
    shown = re.search(r"^```python\n(.*?)^```", page, re.M | re.S).group(1)
    assert shown == grammar.read_text(), "docs/how-to/write-a-grammar.md shows another text than arith_funcs.py"
    programs = subprocess.run([sys.executable, "-m", "harness.cli", "generate", "--grammar", str(grammar),
                               "-n", "300", "--seed", "3"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert programs.returncode == 0, programs.stderr
    assert programs.stdout.count("\n// -----\n") == 299
    verified = subprocess.run([mlir_opt, "--split-input-file", "-o", str(tmp_path / "out.mlir")],
                              input=programs.stdout, capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stderr
    assert (tmp_path / "out.mlir").read_text().count("func.func @f0(") == 300


def test_tests_readme_lists_every_test_file():
    rows = set(re.findall(r"^\| `(test_\w+\.py)` \|", (REPO / "tests" / "README.md").read_text(), re.M))
    files = {path.name for path in (REPO / "tests").glob("test_*.py")}
    assert rows == files, f"tests/README.md: add {sorted(files - rows)}, remove {sorted(rows - files)}"
