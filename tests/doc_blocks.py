"""The runnable blocks of a documentation page, and the check of a command's
output against the text the page prints (tests/test_docs_run.py,
benchmarks/bench_docs.py).

The convention (tests/README.md, "Documentation that runs"):

* A fenced ```` ```console ```` block runs. A line starting with ``$ `` is a
  command (a line ending in ``\\`` continues it); the lines after it, up to the
  next command, are what it prints (stdout and stderr together).
* A line that is just ``...`` stands for any number of lines: each run of
  lines between them appears, in order, as consecutive lines of the output.
  ``...`` inside a line stands for any text.
* ``~N`` (``~5,600``, ``~93.0``) is a figure that varies from run to run
  (libFuzzer's timing, the machine's load): any number within a factor of 3
  of N matches (``<!-- test: approx F -->`` sets the factor).
* The build folder ``loom-opt-`` and 10 hex digits matches any build's: the
  stand-in's SHA-256 depends on the compiler and where it was built.
* An HTML comment on the line before the fence says more:
  ``<!-- test: skip REASON -->`` (never run: hardware or a service the suite
  lacks), ``<!-- test: benchmark -->`` (a long step: run by
  benchmarks/bench_docs.py only), ``<!-- test: exit N -->`` (every command of
  the block exits N; otherwise 0), ``approx F``; several joined by ``;``.
* A last output line ``[exit N]`` says that command exits N (a sweep with
  findings exits 1).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
DEFAULT_FACTOR = 3.0
# What a page's commands see of the repository, in a scratch folder of their own.
REPO_ENTRIES = (".ci", ".venv", "benchmarks", "deploy", "docs", "fuzz_targets", "grammars",
                "harness", "native", "pyproject.toml", "tests")


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)

    def exit_status(self, default: int) -> int:
        match = re.fullmatch(r"\[exit (\d+)\]", self.expected[-1].strip()) if self.expected else None
        return int(match.group(1)) if match else default

    @property
    def output(self) -> list[str]:
        return self.expected[:-1] if self.exit_status(-1) != -1 else self.expected


@dataclass
class Block:
    page: str
    line: int
    commands: list[Command]
    skip: str | None = None
    benchmark: bool = False
    exit_status: int = 0
    factor: float = DEFAULT_FACTOR

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def _options(comment: str, block: Block) -> None:
    for part in (p.strip() for p in comment.split(";")):
        word, _, rest = part.partition(" ")
        if word == "skip":
            block.skip = rest.strip() or "no reason given"
        elif word == "benchmark":
            block.benchmark = True
        elif word == "exit":
            block.exit_status = int(rest)
        elif word == "approx":
            block.factor = float(rest)
        else:
            raise ValueError(f"{block.name}: unknown test option {part!r}")


def blocks(page: Path) -> list[Block]:
    """Every ```console block of PAGE, in order."""
    lines = page.read_text().splitlines()
    name = str(page.relative_to(DOCS))
    found: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        block = Block(name, i + 1, [])
        previous = lines[i - 1].strip() if i else ""
        match = re.fullmatch(r"<!--\s*test:\s*(.*?)\s*-->", previous)
        if match:
            _options(match.group(1), block)
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            line = lines[i]
            if line.startswith("$ "):
                text = line[2:]
                while text.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    text = text[:-1] + " " + lines[i].strip()
                block.commands.append(Command(text))
            elif block.commands:
                block.commands[-1].expected.append(line)
            i += 1
        found.append(block)
        i += 1
    return found


def pages() -> list[Path]:
    return [DOCS / "tutorial.md"] + sorted((DOCS / "how-to").glob("*.md"))


_NUMBER = r"-?[0-9][0-9,]*(?:\.[0-9]+)?"


def _pattern(expected: str) -> tuple[re.Pattern, list[float]]:
    """A regular expression for one expected line, and the ~figures in it."""
    figures: list[float] = []
    out = []
    for piece in re.split(r"(\.\.\.|~" + _NUMBER + r"|loom-opt-[0-9a-f]{10})", expected.rstrip()):
        if piece == "...":
            out.append(".*")
        elif piece.startswith("~"):
            figures.append(float(piece[1:].replace(",", "")))
            out.append("(" + _NUMBER + ")")
        elif re.fullmatch(r"loom-opt-[0-9a-f]{10}", piece):
            out.append("loom-opt-[0-9a-f]{10}")
        else:
            out.append(re.escape(piece))
    return re.compile("".join(out) + r"\s*"), figures


def _line_matches(expected: str, actual: str, factor: float) -> bool:
    pattern, figures = _pattern(expected)
    match = pattern.fullmatch(actual)
    if not match:
        return False
    for want, got in zip(figures, match.groups()):
        value = float(got.replace(",", ""))
        if want == 0 or not (want / factor <= value <= want * factor):
            return False
    return True


def mismatch(expected: list[str], output: str, factor: float = DEFAULT_FACTOR) -> str | None:
    """None when OUTPUT shows EXPECTED as the convention says, else what is missing."""
    actual = output.splitlines()
    chunks: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            chunks.append([])
        else:
            chunks[-1].append(line)
    start = 0
    for chunk in (c for c in chunks if c):
        for at in range(start, len(actual) - len(chunk) + 1):
            if all(_line_matches(e, a, factor) for e, a in zip(chunk, actual[at:at + len(chunk)])):
                start = at + len(chunk)
                break
        else:
            return "these lines, in this order, are not in the output:\n" + "\n".join(chunk)
    return None


def scratch_folder(path: Path) -> Path:
    """PATH, holding links to the repository's files the pages name."""
    path.mkdir(parents=True, exist_ok=True)
    for entry in REPO_ENTRIES:
        if (REPO / entry).exists() and not (path / entry).exists():
            (path / entry).symlink_to(REPO / entry)
    return path


def run(command: Command, folder: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """COMMAND in bash in FOLDER, `loomfuzz` and `lit` the virtualenv's, this checkout's harness."""
    env = dict(os.environ)
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    env.pop("COLUMNS", None)
    return subprocess.run(["bash", "-o", "pipefail", "-c", command.text], cwd=folder, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def check_block(block: Block, folder: Path) -> list[str]:
    """Run BLOCK's commands in FOLDER; one message per command that printed or exited otherwise."""
    problems = []
    for command in block.commands:
        result = run(command, folder)
        where = f"{block.name}: $ {command.text}"
        status = command.exit_status(block.exit_status)
        if result.returncode != status:
            problems.append(f"{where}\nexit {result.returncode}, the page says {status}:\n"
                            + result.stdout[-3000:])
            continue
        missing = mismatch(command.output, result.stdout, block.factor)
        if missing:
            problems.append(f"{where}\n{missing}\n--- the output ---\n{result.stdout[-3000:]}")
    return problems
