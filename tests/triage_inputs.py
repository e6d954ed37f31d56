"""Helpers for tests/test_triage.py: fuzz-artifact folders with known bugs, and
a small lit runner for the regression tests triage writes.

The model of tests/fixtures/fake_loom_opt.c (its header): sites are visited
in text order and the first that triggers something decides the run; a call
region is a clean rejection; assert = freeze in scf.for; segv = memory in
scf.if; fatal = loop in scf.if; flaky = unwrapped branch in a thread with the
%icall (on about half of the runs; when it does not fire, the scan goes on);
heap = memory in scf.for (one of three crashes at random); similar = freeze in
scf.if; bare-loop = unwrapped loop; bare-branch = branch in scf.if (both a bare
SIGSEGV).  The last four are planted only when named.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from shapes import Body, Nesting, Program, Thread, make_site, random_programs
from shapes import encode_program as encode
from shapes import render_program as render

BUGS = ("assert", "segv", "fatal", "flaky")

#: The smallest program of the shape for each planted bug.
MINIMAL = {
    "assert": Program((Thread(False, (make_site(Nesting.FOR, Body.FREEZE),)),)),
    "segv": Program((Thread(False, (make_site(Nesting.IF, Body.MEMORY),)),)),
    "fatal": Program((Thread(False, (make_site(Nesting.IF, Body.LOOP),)),)),
    "flaky": Program((Thread(True, (make_site(Nesting.NONE, Body.BRANCH),)),)),
    "heap": Program((Thread(False, (make_site(Nesting.FOR, Body.MEMORY),)),)),
    "similar": Program((Thread(False, (make_site(Nesting.IF, Body.FREEZE),)),)),
    "bare-loop": Program((Thread(False, (make_site(Nesting.NONE, Body.LOOP),)),)),
    "bare-branch": Program((Thread(False, (make_site(Nesting.IF, Body.BRANCH),)),)),
}


def site_bug(thread: Thread, site) -> str | None:
    if site.body == Body.CALL:
        return "rejected"
    if site.body == Body.FREEZE and site.nesting == Nesting.FOR:
        return "assert"
    if site.body == Body.MEMORY and site.nesting == Nesting.IF:
        return "segv"
    if site.body == Body.LOOP and site.nesting == Nesting.IF:
        return "fatal"
    if site.body == Body.BRANCH and site.nesting == Nesting.NONE and thread.icall:
        return "flaky"
    if site.body == Body.MEMORY and site.nesting == Nesting.FOR:
        return "heap"
    if site.body == Body.FREEZE and site.nesting == Nesting.IF:
        return "similar"
    if site.body == Body.LOOP and site.nesting == Nesting.NONE:
        return "bare-loop"
    if site.body == Body.BRANCH and site.nesting == Nesting.IF:
        return "bare-branch"
    return None


def expected_bug(program: Program, plants=BUGS) -> str | None:
    """The planted bug a deterministic run reaches (None: accepted or rejected)."""
    for thread in program.threads:
        for site in thread.sites:
            bug = site_bug(thread, site)
            if bug == "rejected":
                return None
            if bug == "flaky" and "flaky" in plants:
                raise ValueError("flaky first: not deterministic")
            if bug is not None and bug in plants:
                return bug
    return None


def triggers(program: Program) -> list[str]:
    return [b for t in program.threads for s in t.sites if (b := site_bug(t, s))]


@dataclass
class Corpus:
    root: Path
    expected: dict[str, str | None]  # input path (as triage records it) -> bug or None
    sidecars: list[str]  # .mlir/.json sidecars written next to raw artifacts
    text_inputs: list[str]  # .mlir files that are not in the shape


def _write_artifact(directory: Path, program: Program, as_mlir: bool, name_hint: str) -> Path:
    if as_mlir:
        path = directory / f"{name_hint}.mlir"
        path.write_text(render(program), encoding="utf-8")
    else:
        data = encode(program)
        path = directory / f"crash-{hashlib.sha1(data).hexdigest()}"
        path.write_bytes(data)
    return path


def make_corpus(
    root: Path,
    *,
    seed: int,
    crashing: int,
    clean: int,
    plants=("assert", "segv", "fatal"),
) -> Corpus:
    """Two fuzz-run folders of distinct programs: ``crashing`` reach a planted bug, ``clean`` none.

    Two thirds are raw artifacts (``crash-<sha1>``), one third ``.mlir``
    files; a few raw artifacts get fuzz-style ``.mlir``/``.json`` sidecars,
    and one ``.mlir`` that is not in the shape (but crashes) is added.
    """
    runs = [root / "run-a" / "artifacts", root / "run-b"]
    for r in runs:
        r.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(root, {}, [], [])
    seen: set[Program] = set()
    want = {"crash": crashing, "clean": clean}
    per_bug: dict[str, int] = {}
    for n, program in enumerate(random_programs(seed)):
        if not want["crash"] and not want["clean"]:
            break
        if program in seen:
            continue
        if "flaky" not in plants and "flaky" in triggers(program):
            continue  # keep the fake deterministic for these tests
        bug = expected_bug(program, plants)
        bucket = "crash" if bug else "clean"
        if not want[bucket]:
            continue
        if bug and per_bug.get(bug, 0) >= crashing // len(plants) + 2:
            continue  # spread the crashes over the bugs
        seen.add(program)
        want[bucket] -= 1
        if bug:
            per_bug[bug] = per_bug.get(bug, 0) + 1
        directory = runs[n % 2]
        path = _write_artifact(directory, program, as_mlir=(n % 3 == 0), name_hint=f"finding-{n}")
        corpus.expected[str(path)] = bug
        if not path.suffix and len(corpus.sidecars) < 6:
            for suffix, content in ((".mlir", render(program)), (".json", json.dumps({"name": path.name}))):
                sidecar = path.with_name(path.name + suffix)
                sidecar.write_text(content, encoding="utf-8")
                corpus.sidecars.append(str(sidecar))
    # a crashing program that is not in the shape: extra blank line inside a thread
    odd = render(MINIMAL[plants[0]]).replace("  %lo = arith.constant", "\n  %lo = arith.constant", 1)
    odd_path = runs[1] / "hand-edited.mlir"
    odd_path.write_text(odd, encoding="utf-8")
    corpus.expected[str(odd_path)] = plants[0]
    corpus.text_inputs.append(str(odd_path))
    # files that are not fuzz artifacts: skipped
    (runs[0] / "fuzz-0.log").write_text("INFO: libFuzzer\n", encoding="utf-8")
    (runs[0] / "0123456789abcdef0123456789abcdef01234567").write_bytes(b"\x01\x02")
    return corpus


# ---------------------------------------------------------------- lit


def _filecheck_regex(pattern: str) -> re.Pattern:
    parts = re.split(r"(\{\{.*?\}\})", pattern)
    rx = "".join(p[2:-2] if p.startswith("{{") and p.endswith("}}") else re.escape(p) for p in parts)
    return re.compile(rx)


def mini_filecheck(check_file: str, output: str, prefix: str = "CHECK") -> None:
    """FileCheck's CHECK, CHECK-SAME, CHECK-DAG and CHECK-NOT, enough for triage's tests."""
    position = 0
    for line in Path(check_file).read_text(encoding="utf-8").splitlines():
        m = re.match(rf"^// {prefix}(-SAME|-DAG|-NOT)?: (.*)$", line)
        if not m:
            continue
        kind, rx = m.group(1) or "", _filecheck_regex(m.group(2).strip())
        if kind == "-NOT":
            assert not rx.search(output), f"{prefix}-NOT matched: {m.group(2)}"
            continue
        found = rx.search(output, 0 if kind == "-DAG" else position)
        assert found, f"{prefix}{kind}: {m.group(2)!r} not found in:\n{output[position:][:2000]}"
        if kind != "-DAG":
            position = found.end()


def run_lit_test(test: Path, binary: str) -> list[subprocess.CompletedProcess]:
    """Execute the RUN lines of a triage regression test for real (bash), with
    ``%s`` the test file and the binary's basename its path.  ``not --crash``
    (a lit utility) is checked here: the command must die by a signal; ``not``:
    it must exit non-zero without a signal.  ``| FileCheck`` is done by
    :func:`mini_filecheck`."""
    results = []
    name = Path(binary).name
    runs = [line[len("// RUN:"):].strip() for line in test.read_text().splitlines() if line.startswith("// RUN:")]
    assert runs, f"{test} has no RUN line"
    for run in runs:
        command, _, filecheck = run.partition(" | FileCheck ")
        expect = "success"
        if command.startswith("not --crash "):
            expect, command = "crash", command[len("not --crash "):]
        elif command.startswith("not "):
            expect, command = "failure", command[len("not "):]
        words = command.split(" ", 1)
        assert words[0] == name, f"RUN line runs {words[0]!r}, not the target {name!r}"
        command = shlex.quote(binary) + " " + words[1].replace("%s", shlex.quote(str(test)))
        proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
        status = proc.returncode
        died_by_signal = status < 0 or status > 128
        if expect == "crash":
            assert died_by_signal, f"{run}: expected death by a signal, got exit status {status}"
        elif expect == "failure":
            assert status != 0 and not died_by_signal, f"{run}: expected a non-zero exit, got {status}"
        else:
            assert status == 0, f"{run}: exit status {status}"
        if filecheck:
            output = proc.stdout + proc.stderr if "2>&1" in command else proc.stdout
            args = filecheck.split()
            prefix = "CHECK"
            for arg in args:
                if arg.startswith("--check-prefix="):
                    prefix = arg.split("=", 1)[1]
            mini_filecheck(str(test), output, prefix)
        results.append(proc)
    return results
