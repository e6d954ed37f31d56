"""The upstream report of a crash, a hang or an error bucket (``triage report-upstream``).

From a crash triage bucket (oracle ``crash``; kinds ``crash``, ``timeout``,
``unexpected-rejection``) of an ``mlir-opt`` build:

1. the bucket's minimized program is run again with the arguments triage ran
   (the bucket's ``target``), as a process; its failure's key
   (:func:`failure_key`: the signature's run key of :mod:`harness.triage.signature`,
   a signal read from a shell's ``128+N`` too) is the bug from here on;
2. the pipeline is bisected to its culprit pass
   (:func:`harness.triage.wrong_code.culprit_pass`, the same bisection as wrong
   code's, with "gives that key" as the test); the report runs that pass alone
   where it alone gives the key, else the shortest prefix;
3. loom's shell is reduced away (:mod:`harness.triage.plain_module`): the exec
   rendering without ``main`` and the input table, then top-level items deleted
   while the module still verifies with the reference toolchain's ``mlir-opt``
   (which registers no loom dialect: nothing unregistered is left) and the
   pass still gives the key.  Where the plain module does not show the bug, the
   report keeps the bucket's program with ``--allow-unregistered-dialect`` and
   says so;
4. every release ``--releases auto`` finds (:func:`harness.triage.releases.releases_from_option`)
   runs the program with the same pass: ``reproduces`` (the same key),
   ``crashes`` (another failure), ``correct`` (exit 0), ``rejects`` (an error:
   no such pass, or it cannot read the program), ``not run``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.core.compiled import CompiledGrammar
from harness.execute.releases import for_release
from harness.execute.toolchain import Toolchain
from harness.targets.identity import IdentityError, identify, which
from harness.triage.plain_module import Item, module_items, module_text, plain_exec, reduce_items
from harness.triage.releases import releases_from_option
from harness.triage.signature import Signature, clean_function, crash_signature, meaningful_frames, \
    normalise_message, stack_frames
from harness.triage.upstream_report import PROGRAM, ReportError, Step, UpstreamReport, command_name, \
    pass_arguments
from harness.triage.wrong_code import culprit_pass

__all__ = ["KINDS", "Run", "crash_report", "failure_key", "run_tool", "trimmed_trace"]

#: Crash triage's bucket kinds this report takes, and what the report calls them.
KINDS = {"crash": "crash", "timeout": "hang", "unexpected-rejection": "error"}
_ALLOW = "--allow-unregistered-dialect"
_CRASH = re.compile(r"Assertion .* failed|LLVM ERROR|UNREACHABLE|Stack dump:|PLEASE submit a bug report")
_ERROR = re.compile(r"^(?:.*?: )?(error: .*)$", re.M)
_FRAME = re.compile(r"^\s*#\d+\s+0x[0-9a-fA-F]+\s+(.*?)(?:\s+\([^()]*\+0x[0-9a-fA-F]+\))?\s*$")
_SHELL_SIGNAL = 128  # a shell reports a child's death by signal N as 128 + N


@dataclass(frozen=True)
class Run:
    """One run of a tool: its status (None: timed out) and stderr."""

    returncode: int | None
    stdout: str
    stderr: str


def run_tool(argv: list[str], text: str | None, timeout: float, cwd: str | None = None,
             shell: bool = False) -> Run:
    """``argv`` (a command line with ``shell``) on ``text`` (stdin; None: nothing), killed
    after ``timeout`` seconds (with its process group: a wrapper script's child too)."""
    proc = subprocess.Popen(argv if not shell else ["bash", "-c", argv[0]], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(text or "", timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return Run(None, out, err)
    return Run(proc.returncode, out, err)


def failure_key(run: Run) -> str | None:
    """The signature run key of a failed run (None: it succeeded): ``timeout``; a crash
    (a signal, an assertion, LLVM's crash handler) as crash triage keys it; an error exit
    as ``unexpected-rejection | error: ...``."""
    if run.returncode is None:
        return "timeout"
    code = run.returncode
    died = -code if code < 0 else code - _SHELL_SIGNAL if code > _SHELL_SIGNAL and \
        code - _SHELL_SIGNAL in {s.value for s in signal.Signals} else None
    if died is not None or _CRASH.search(run.stderr):
        return crash_signature(run.stderr, signal=died, returncode=None if died else code).run_key
    if code != 0:
        match = _ERROR.search(run.stderr)
        message = match.group(1) if match else f"exit status {code}"
        return Signature("unexpected-rejection", "", normalise_message(message)).run_key
    return None


def trimmed_trace(stderr: str, limit: int = 14) -> str:
    """The useful part of a failure's stderr: the lines before ``Stack dump:`` (the
    assertion, the error), the program arguments, then the frames crash triage keeps
    (LLVM's signal handlers, libc and unsymbolised frames dropped; up to the tool's entry),
    at most ``limit``, without addresses."""
    lines = stderr.splitlines()
    head = [ln for ln in lines if not _FRAME.match(ln) and not ln.startswith("PLEASE submit")
            and not re.match(r"^\s*\d+\.\s", ln) and ln.strip() and ln.strip() != "Stack dump:"]
    arguments = [ln.strip() for ln in lines if re.match(r"^\s*0\.\s+Program arguments:", ln)]
    kept = list(meaningful_frames(stack_frames(stderr), count=limit))
    frames = []
    for line in lines:
        match = _FRAME.match(line)
        if match and kept and clean_function(match.group(1)) == kept[0]:
            frames.append(f"#{len(frames)} {match.group(1)}")
            kept.pop(0)
    out = head[:6]
    if frames:
        out += ["Stack dump:", *arguments, *frames]
    return "\n".join(out)


def _pipeline_of(args: list[str]) -> tuple[list[str], str]:
    """(the arguments that are no pass, the pipeline) of a target's arguments."""
    rest, passes = [], []
    for arg in args:
        if arg.startswith("--pass-pipeline="):
            return [a for a in args if a != arg], arg.split("=", 1)[1]
        (rest if arg == _ALLOW or arg.startswith("--mlir-") else passes).append(arg)
    return rest, " ".join(passes)


def _releases(text: str, args: list[str], key: str, pipeline: str, binary: str, timeout: float) -> list[dict]:
    """Each build's result for ``text`` under ``args`` (the build under test first, unless it
    is one of the releases ``--releases auto`` finds)."""
    found = list(releases_from_option("auto").releases)
    own = os.path.realpath(which(binary) or binary)
    builds = [(r.name, r.binary, r.version, r.missing, r.real_path == own) for r in found]
    if all(not b[4] for b in builds):
        builds.insert(0, (os.path.basename(binary), binary, None, None, True))
    results = []
    for name, path, version, missing, under_test in builds:
        def result(word: str, detail: str = "") -> dict:
            return {"name": name, "binary": path, "version": version, "result": word, "detail": detail[:200],
                    "under_test": under_test}

        if missing:
            results.append(result("not run", missing))
            continue
        try:
            identity = identify(which(path) or path)
        except IdentityError as error:
            results.append(result("not run", str(error)))
            continue
        version = version or identity.version
        run = run_tool([path, *args, "-"], for_release(text, identity.major), timeout)
        got = failure_key(run)
        if got == key:
            results.append(result("reproduces", "the same " + ("hang" if key == "timeout" else "failure")))
        elif got is None:
            results.append(result("passes", "exit 0, no failure"))
        elif got.startswith("unexpected-rejection"):
            missing_passes = identity.missing_passes(pipeline)
            results.append(result("rejects", f"it has no pass {', '.join(missing_passes)}" if missing_passes
                                  else got.split(" | ", 1)[-1]))
        else:
            results.append(result("crashes" if got != "timeout" else "times out", got))
    return results


def crash_report(bucket, grammar: CompiledGrammar, toolchain: Toolchain | None = None) -> UpstreamReport:
    """The report of a crash, hang or error bucket (see the module docstring).  Raises
    :class:`ReportError` (one line)."""
    toolchain = toolchain or Toolchain()
    target = json.loads(bucket["target"] or "{}")
    argv = list(target.get("argv") or [])
    if not argv or "loom-lower-for-to-graph" in " ".join(argv):
        raise ReportError(f"bucket {bucket['id']} is not of an mlir-opt build (its target: "
                          f"{' '.join(argv) or 'unknown'}): an upstream report needs one")
    text = bucket["minimized_text"]
    if text is None:
        raise ReportError(f"bucket {bucket['id']} is not minimized yet: run `loomfuzz triage` on its inputs")
    binary, (rest, pipeline) = argv[0], _pipeline_of(argv[1:])
    if which(binary) is None:
        raise ReportError(f"{binary} (the build bucket {bucket['id']} was found with) is not an executable file "
                          "or on PATH")
    timeout = min(float(target.get("timeout") or 10.0), 30.0)

    def key_of(program: str, pipe: str, allow: bool = True) -> str | None:
        args = ([_ALLOW] if allow else []) + pass_arguments(pipe)
        return failure_key(run_tool([binary, *args, "-"], program, timeout))

    key = failure_key(run_tool([binary, *rest, *pass_arguments(pipeline), "-"], text, timeout))
    if key is None:
        raise ReportError(f"bucket {bucket['id']}'s program no longer fails with {' '.join(argv)}")
    culprit, prefix = culprit_pass(lambda p: key_of(text, p) == key, pipeline)
    pipe = prefix
    if culprit and key_of(text, f"builtin.module({culprit})") == key:
        pipe = f"builtin.module({culprit})"

    program, plain, how = text, False, "The bucket's program as triage minimized it (loom's shell kept: "
    exec_text = plain_exec(text, grammar)
    if exec_text is not None:
        items = [i for i in module_items(exec_text) if i.symbol not in ("main", "exec_table", "exec_flags")]

        def shows_bug(candidate: list[Item]) -> bool:
            module = module_text(candidate)
            return toolchain.verify(module) is None and key_of(module, pipe, allow=False) == key

        if shows_bug(items):
            kept = reduce_items(items, shows_bug, order=lambda i: 0 if (i.symbol or "").startswith("thread") else 1)
            program, plain = module_text(kept), True
            how = (f"Triage minimized the fuzzer's program; loom's shell (its unregistered `dataflow.thread` "
                   f"and `loom.spatial_region` operations) was rendered away, regions as functions, and "
                   f"{len(items) - len(kept)} of {len(items)} top-level operations deleted while "
                   f"`{command_name(binary)} {' '.join(pass_arguments(pipe))}` still gave the same failure and "
                   f"`{toolchain.mlir_opt}` still verified the module.")
        else:
            how += "without it, the pass does not show the bug)."
    else:
        how += "it is no program of the grammar)."
    args = ([] if plain else [_ALLOW]) + pass_arguments(pipe)
    kind = KINDS[bucket["kind"]]
    command = shlex.join([command_name(binary), *args, PROGRAM])
    with tempfile.TemporaryDirectory(prefix="loomfuzz-report-") as folder:  # the trace as the command prints it
        Path(folder, PROGRAM).write_text(program)
        run = run_tool([command], None, timeout, cwd=folder, shell=True)
    what = {"crash": "crashes", "hang": "hangs", "error": "fails"}[kind]
    pass_name = pipe if not pipe.startswith("builtin.module(") else pipe[len("builtin.module("):-1]
    identity = identify(which(binary) or binary)
    parts = key.split(" | ")
    how_it_fails = parts[0].partition(":")[2]  # SIGSEGV, assert, llvm-error: the type
    where = f" in {parts[1]}" if len(parts) > 1 and how_it_fails.startswith("SIG") else (
        f": {parts[1]}" if len(parts) > 1 else "")
    title = f"[mlir] {' '.join(pass_arguments(pipe))} {what}" + (
        f" ({how_it_fails}{where})" if how_it_fails.startswith("SIG") else where if kind != "hang" else "")
    return UpstreamReport(
        bucket=bucket["id"], kind=kind, title=title[:160], program=program, plain=plain,
        build=f"{command_name(binary)} (LLVM {identity.version})", pass_name=pass_name,
        found_with=shlex.join([command_name(binary), *argv[1:]]),
        steps=[Step(command, f"the pass {what}", "fails", key)], how_reduced=how,
        trace=trimmed_trace(run.stderr) if kind != "hang" else "",
        releases=_releases(program, args, key, pipe, binary, timeout), timeout=timeout)
