"""Bucket statuses (issue 46, item 2): ``triage mark``, re-triage and ``triage list`` do
exactly what docs/how-to/triage.md ("Statuses") says, one transition per test step.

Real subprocesses of ``loomfuzz triage`` on the stand-in (tests/fixtures/fake_loom_opt.c):
its planted assert, segv and fatal bugs make three buckets.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from shapes import random_programs
from shapes import render_program as render
from tests.triage_inputs import MINIMAL, expected_bug

LOOMFUZZ = [sys.executable, "-m", "harness.cli"]
PLANTS = ("assert", "segv", "fatal")


def loomfuzz(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*LOOMFUZZ, *map(str, args)], capture_output=True, text=True, timeout=300)


def other_program(bug: str, avoid: set[str]) -> str:
    """A program that reaches ``bug`` and is none of the texts in ``avoid``."""
    for program in random_programs(46):
        text = render(program)
        if expected_bug(program, PLANTS) == bug and text not in avoid and "%icall" not in text:
            return text
    raise AssertionError(f"no other program reaches {bug}")


def statuses(db: Path) -> dict[str, str]:
    """``triage list``'s STATUS column by planted bug (read off the SIGNATURE column)."""
    done = loomfuzz("triage", "list", "--db", db)
    assert done.returncode == 0, done.stderr
    found = {}
    for line in done.stdout.splitlines()[1:-1]:
        words = line.split()
        bug = "assert" if "crash:assert" in line else "segv" if "SIGSEGV" in line else "fatal"
        found[bug] = words[1]
    return found


def bucket_ids(db: Path) -> dict[str, int]:
    done = loomfuzz("triage", "list", "--db", db)
    ids = {}
    for line in done.stdout.splitlines()[1:-1]:
        bug = "assert" if "crash:assert" in line else "segv" if "SIGSEGV" in line else "fatal"
        ids[bug] = int(line.split()[0])
    return ids


def test_statuses_are_what_the_user_set_and_only_a_new_input_regresses_a_fixed_bug(tmp_path, fake_loom_opt):
    first = tmp_path / "first"
    first.mkdir()
    texts = {bug: render(MINIMAL[bug]) for bug in PLANTS}
    for bug, text in texts.items():
        (first / f"{bug}.mlir").write_text(text)
    db, out = tmp_path / "t" / "triage.db", tmp_path / "t"

    def triage(*folders) -> None:
        done = loomfuzz("triage", "--loom-opt", fake_loom_opt, "--pass-args=--plant=assert,segv,fatal",
                        "--db", db, "--out", out, "--max-candidates", "20", "--no-progress", *folders)
        assert done.returncode == 0, done.stderr

    def mark(bug: str, status: str) -> None:
        done = loomfuzz("triage", "mark", ids[bug], status, "--db", db)
        assert done.returncode == 0 and done.stdout.strip() == f"bucket {ids[bug]}: {status}", done

    # triage makes every bucket new
    triage(first)
    ids = bucket_ids(db)
    assert statuses(db) == {"assert": "new", "segv": "new", "fatal": "new"}
    # mark one known: that one, and no other
    mark("assert", "known")
    assert statuses(db) == {"assert": "known", "segv": "new", "fatal": "new"}
    # triage again (the same inputs): every status stays (issue 46: all four became known)
    triage(first)
    assert statuses(db) == {"assert": "known", "segv": "new", "fatal": "new"}
    # mark one fixed; the same inputs again are not run again, so they say nothing: it stays fixed
    mark("segv", "fixed")
    mark("fatal", "fixed")
    triage(first)
    assert statuses(db) == {"assert": "known", "segv": "fixed", "fatal": "fixed"}
    # a new input that reproduces a fixed bug: regressed; a fixed bug no new input reached stays fixed
    second = tmp_path / "second"
    second.mkdir()
    (second / "segv-again.mlir").write_text(other_program("segv", set(texts.values())))
    (second / "assert-again.mlir").write_text(other_program("assert", set(texts.values())))
    triage(second)
    assert statuses(db) == {"assert": "known", "segv": "regressed", "fatal": "fixed"}
    # and the report says what list says
    report = (out / "report.md").read_text()
    assert f"| [{ids['segv']}](bucket-{ids['segv']}/) | regressed |" in report
    assert f"| [{ids['assert']}](bucket-{ids['assert']}/) | known |" in report
    # every status can be set back by hand, new included
    mark("segv", "new")
    mark("assert", "new")
    assert statuses(db) == {"assert": "new", "segv": "new", "fatal": "fixed"}


def test_mark_refuses_a_wrong_status_or_bucket_in_one_line(tmp_path, fake_loom_opt):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "assert.mlir").write_text(render(MINIMAL["assert"]))
    db = tmp_path / "t" / "triage.db"
    done = loomfuzz("triage", "--loom-opt", fake_loom_opt, "--db", db, "--out", tmp_path / "t",
                    "--max-candidates", "10", "--no-progress", folder)
    assert done.returncode == 0, done.stderr
    bad = loomfuzz("triage", "mark", "1", "filed", "--db", db)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert "new, known, fixed, regressed" in bad.stderr
    missing = loomfuzz("triage", "mark", "9", "known", "--db", db)
    assert missing.returncode == 1 and "no bucket 9" in missing.stderr
    assert statuses(db) == {"assert": "new"}
