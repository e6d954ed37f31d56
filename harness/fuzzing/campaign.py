"""``loomfuzz fuzz``: an atheris/libFuzzer campaign around a fuzz target script.

The campaign runs ``fuzz_targets/loom_opt_fuzzer.py`` (or, for ``--self``,
``fuzz_targets/grammar_fuzzer.py``) as a subprocess of the current Python,
streams libFuzzer's output, and prints a summary at the end.  It

* seeds an empty corpus folder with encoded programs that together cover
  every alternative of the grammar and every parent/child pair of choices
  (k-path coverage, :func:`seed_corpus`), and warns about corpus entries it
  cannot read or that are not canonical encodings (:func:`inspect_corpus`);
* translates its options into libFuzzer flags (:func:`libfuzzer_flags`):
  ``--time S`` -> ``-max_total_time=S``; ``--runs N`` -> ``-atheris_runs=N``
  (``-runs=N`` in fork mode, where the parent counts the workers' runs);
  ``--seed S`` -> ``-seed=S``; ``--jobs N`` -> ``-fork=N`` with
  ``-ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1`` so that one finding
  does not stop the other workers (flags given after ``--`` win);
* makes libFuzzer's fork-mode workers find this Python: they re-execute the
  script through its ``#!/usr/bin/env python3`` shebang, so the folder of
  ``sys.executable`` goes first on the child's ``PATH``;
* counts, at the end, the executions, the corpus files before and after, and
  the findings: the ``.json`` sidecars the fuzz target wrote into the
  artifacts folder during this run, by kind;
* records the campaign's time series, ``stats.csv`` in the artifacts folder
  (``harness.fuzzing.series``), and shows it as a live status line
  (``harness.fuzzing.status``).
* stops the whole campaign on SIGINT/SIGTERM/SIGHUP, and lets none of it
  outlive ``loomfuzz`` (:mod:`harness.fuzzing.supervisor`);
* stops it itself :data:`DEADLINE_SLACK` seconds after ``--time`` when
  libFuzzer has not: libFuzzer reads ``-max_total_time`` only in its main
  loop, after it has run every seed, and then between rounds of up to five
  mutations; a slow oracle (``--oracle differential``, a few programs per
  second) takes minutes over a seeded corpus and seconds over a round.

The helpers the fuzz target scripts share (splitting our ``--options`` from
libFuzzer's ``-flags``, defaults for libFuzzer flags) live here too; this
module imports only the standard library at start-up.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence, TextIO

from harness.fuzzing.supervisor import Supervisor
from harness.run.atomic import remove_partials

__all__ = [
    "CampaignConfig",
    "CampaignError",
    "CampaignResult",
    "OPTION_ENV",
    "build_command",
    "child_env",
    "ensure_flag",
    "finding_kind",
    "fuzz_target_script",
    "has_flag",
    "inspect_corpus",
    "libfuzzer_flags",
    "parse_summary",
    "register_exit_hooks",
    "run_campaign",
    "seed_corpus",
    "seed_programs",
    "split_options",
]

#: Our options of the fuzz target scripts and the environment variables that
#: carry them to libFuzzer's fork-mode workers (which get libFuzzer's argv only).
OPTION_ENV: dict[str, str] = {
    "target": "LOOMFUZZ_TARGET",
    "loom-opt": "LOOMFUZZ_LOOM_OPT",
    "pass-args": "LOOMFUZZ_PASS_ARGS",
    "pipeline": "LOOMFUZZ_PIPELINE",
    "expectations": "LOOMFUZZ_EXPECTATIONS",
    "timeout": "LOOMFUZZ_TIMEOUT",
    "memory-mb": "LOOMFUZZ_MEMORY_MB",
    "artifacts": "LOOMFUZZ_ARTIFACTS",
    "coverage": "LOOMFUZZ_COVERAGE",
    "grammar-features": "LOOMFUZZ_GRAMMAR_FEATURES",
    "grammar": "LOOMFUZZ_GRAMMAR",
    "profile": "LOOMFUZZ_PROFILE",
    "runner": "LOOMFUZZ_RUNNER",
    "restart-every": "LOOMFUZZ_RESTART_EVERY",
    "oracle": "LOOMFUZZ_ORACLE",
    "mlir-opt": "LOOMFUZZ_ORACLE_MLIR_OPT",
}

#: The line the fuzz target scripts print at exit (parsed by the campaign).
SUMMARY_PREFIX = "loom-fuzz summary:"
_SUMMARY = re.compile(
    re.escape(SUMMARY_PREFIX) + r" (\d+) executions? in ([\d.]+) s"
)
_EDGES = re.compile(r"; coverage: (\d+) edges seen")
_IN_TARGET = re.compile(r"; time in target: ([\d.]+) s")
_PERSISTENT = re.compile(r"; persistent: (\d+) restarts \(([^)]*)\)")
_FORK_STATUS = re.compile(r"^#(\d+): cov: ")
_STATUS = re.compile(r"^#(\d+)\s+(?:INITED|NEW|REDUCE|pulse|RELOAD|DONE)\b")
_DONE = re.compile(r"^Done (\d+) (?:runs )?in (\d+) second")
_STAT_RUNS = re.compile(r"^stat::number_of_executed_units: (\d+)")

LIBFUZZER_INTERRUPTED = 72  # libFuzzer's -interrupt_exitcode default
#: Seconds past ``--time`` before the campaign stops a fuzz target that has not
#: ended by itself (the run in progress is dropped).
DEADLINE_SLACK = 2.0


class CampaignError(Exception):
    """The campaign cannot start; the message is one line for the user."""


# ------------------------------------------------ options of the fuzz targets


def split_options(
    argv: Sequence[str], names: Iterable[str], *, prog: str = "fuzz target"
) -> tuple[dict[str, str], list[str]]:
    """Our ``--name VALUE`` / ``--name=VALUE`` options out of ``argv[1:]``.

    Returns (values given, the rest: ``argv[0]`` plus libFuzzer's flags and
    corpus folders, in order).  libFuzzer's flags take one dash, so any
    ``--word`` is ours; an unknown one is an error (``SystemExit(2)``).
    """
    known = set(names)
    values: dict[str, str] = {}
    rest = [argv[0]] if argv else ["fuzz"]
    args = list(argv[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg[2:].partition("=")
            if name not in known:
                print(f"{prog}: error: unknown option --{name} (ours: "
                      f"{', '.join('--' + n for n in sorted(known))}; libFuzzer flags take one dash: "
                      "-flag=value)", file=sys.stderr)
                raise SystemExit(2)
            if not eq:
                if i + 1 >= len(args):
                    print(f"{prog}: error: --{name} needs a value", file=sys.stderr)
                    raise SystemExit(2)
                i += 1
                value = args[i]
            values[name] = value
        else:
            rest.append(arg)
        i += 1
    return values, rest


def options_with_env(values: dict[str, str], names: Iterable[str]) -> dict[str, str]:
    """``values`` completed from the environment, and exported to it, so that
    libFuzzer's re-executed workers (fork mode) see the same options."""
    merged = {}
    for name in names:
        env = OPTION_ENV[name]
        if name in values:
            merged[name] = values[name]
            os.environ[env] = values[name]
        elif env in os.environ:
            merged[name] = os.environ[env]
    return merged


def has_flag(flags: Sequence[str], name: str) -> bool:
    prefix = f"-{name}="
    return any(f.startswith(prefix) for f in flags)


def flag_value(flags: Sequence[str], name: str) -> Optional[str]:
    prefix = f"-{name}="
    value = None
    for f in flags:
        if f.startswith(prefix):
            value = f[len(prefix):]
    return value


def ensure_flag(flags: list[str], name: str, value: str) -> None:
    """Append ``-name=value`` unless the flag is already given."""
    if not has_flag(flags, name):
        flags.append(f"-{name}={value}")


_EXIT_HOOKS: list = []  # ctypes trampolines must live as long as the process


def register_exit_hooks(callback: Callable[[], None]) -> None:
    """Run ``callback`` however a fuzz target ends: Python's ``atexit`` covers
    atheris' ``-atheris_runs`` and an uncaught exception; C's ``on_exit``
    covers libFuzzer's own ``exit()`` (e.g. after ``-max_total_time``), which
    skips Python's.  ``callback`` must tolerate being called twice."""
    import atexit
    import ctypes

    atexit.register(callback)
    try:
        libc = ctypes.CDLL("libc.so.6")
        hook = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)(lambda status, arg: callback())
        if libc.on_exit(hook, None) == 0:
            _EXIT_HOOKS.append(hook)
    except (OSError, AttributeError):  # not glibc: Python's atexit only
        pass


# ---------------------------------------------------------------- locations


def fuzz_target_script(self_test: bool = False) -> Path:
    """The fuzz target script in the source tree next to the ``harness`` package."""
    import harness

    folder = Path(harness.__file__).resolve().parent.parent / "fuzz_targets"
    script = folder / ("grammar_fuzzer.py" if self_test else "loom_opt_fuzzer.py")
    if not script.is_file():
        raise CampaignError(
            f"fuzz target {script.name} not found in {folder}: loomfuzz fuzz needs the "
            "source tree (install it with pip install -e .)"
        )
    if not os.access(script, os.X_OK):
        raise CampaignError(
            f"fuzz target {script} is not executable (libFuzzer's fork mode runs it "
            f"directly): chmod +x {script}"
        )
    return script


def child_env(base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The environment of the fuzz target: this Python's folder first on PATH,
    so that ``#!/usr/bin/env python3`` finds the same interpreter (and its
    atheris) when libFuzzer re-executes the script in fork mode."""
    env = dict(os.environ if base is None else base)
    bindir = str(Path(sys.executable).parent)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != bindir]
    env["PATH"] = os.pathsep.join([bindir, *parts])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


# -------------------------------------------------------------------- corpus


def seed_programs(grammar, count: int = 48, seed: int = 0, *, draws: int = 20_000,
                  patience: int = 300) -> list[bytes]:
    """Encoded programs for an empty corpus: trees drawn from the PCFG (``seed``),
    each kept when it adds a k-path feature not seen yet, until the grammar's
    features are covered, ``draws`` trees were tried or ``patience`` draws in a
    row added nothing (a wide grammar has features too rare to wait for: the
    fuzzer's mutations reach them); then more drawn trees up to ``count``."""
    from harness.core.codec import encode, nonempty
    from harness.core.features import KPathFeatures
    from harness.core.walk import random_trees

    features = KPathFeatures(grammar)
    covered: set[int] = set()
    out: list[bytes] = []
    seen: set[bytes] = set()
    last_new = 0
    for drawn, tree in enumerate(random_trees(grammar, seed)):
        exploring = len(covered) < len(features) and drawn < draws and drawn - last_new < patience
        if not exploring and len(out) >= count:
            break
        new = features.of(tree) - covered
        if not new and exploring:
            continue
        if new:
            last_new = drawn
        covered |= new
        data = nonempty(encode(tree, grammar), tree, grammar)  # libFuzzer skips empty files
        if data not in seen:
            seen.add(data)
            out.append(data)
    return out


def seed_corpus(corpus: Path, grammar, count: int = 48, seed: int = 0) -> int:
    """Write :func:`seed_programs` into ``corpus`` (named by SHA-1, as libFuzzer
    names its files); returns how many files were written."""
    corpus.mkdir(parents=True, exist_ok=True)
    written = 0
    for data in seed_programs(grammar, count, seed):
        path = corpus / hashlib.sha1(data).hexdigest()
        if not path.exists():
            path.write_bytes(data)
            written += 1
    return written


@dataclass
class CorpusReport:
    readable: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    empty: list[str] = field(default_factory=list)
    noncanonical: list[str] = field(default_factory=list)


def _corpus_entries(corpus: Path) -> list[Path]:
    entries = []
    for root, dirs, files in os.walk(corpus):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        entries.extend(Path(root) / f for f in sorted(files))
    return entries


def inspect_corpus(corpus: Path, grammar) -> CorpusReport:
    """Read every corpus file once: unreadable, empty and non-canonical ones."""
    from harness.core.codec import decode, encode, max_input_length

    limit = max_input_length(grammar)

    report = CorpusReport()
    for path in _corpus_entries(corpus):
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block: never open it
                report.unreadable.append((str(path), "not a regular file"))
                continue
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
        except OSError as error:
            report.unreadable.append((str(path), error.strerror or str(error)))
            continue
        if not data:
            report.empty.append(str(path))
            continue
        report.readable += 1
        if len(data) > limit or data.rstrip(b"\0") != encode(decode(data, grammar), grammar).rstrip(b"\0"):
            report.noncanonical.append(str(path))
    return report


def count_files(folder: Path) -> int:
    """Regular files under ``folder`` (hidden folders skipped, as libFuzzer does).
    ``os.scandir``: file types come with the listing, no stat per file (the
    statistics sampler counts the corpus every few seconds)."""
    if not folder.is_dir():
        return 0
    total, pending = 0, [folder]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.is_dir():
                        if not entry.is_symlink() and not entry.name.startswith("."):
                            pending.append(Path(entry.path))
                    elif entry.is_file():
                        total += 1
        except OSError:
            continue
    return total


# ---------------------------------------------------------------- campaign


@dataclass
class CampaignConfig:
    corpus: Path
    artifacts: Path
    self_test: bool = False
    target: str = "loom-opt"
    loom_opt: Optional[str] = None  # an absolute binary path, resolved by the caller
    pass_args: Optional[str] = None
    pipeline: Optional[str] = None
    expectations: Optional[str] = None
    timeout: Optional[float] = None
    memory_mb: Optional[int] = None  # 0: no limit
    coverage: str = "none"
    grammar_features: str = "auto"
    grammar: Optional[str] = None  # a grammar file (--grammar); None: the profile's
    profile: Optional[str] = None  # a built-in profile (--profile); None: the default
    time: Optional[int] = None
    runs: Optional[int] = None
    jobs: int = 1
    seed: Optional[int] = None
    seed_count: int = 48
    libfuzzer_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the child
    runner: str = "process"  # process | persistent (harness.run.runners)
    restart_every: Optional[int] = None
    stats_interval: Optional[float] = None  # seconds between rows of stats.csv (None: series' default)
    oracle: str = "crash"  # crash | differential (harness.execute.oracle)
    oracle_mlir_opt: Optional[str] = None  # with differential: the optimizer under test


@dataclass
class CampaignResult:
    returncode: int  # of the fuzz target process
    executions: Optional[int]
    seconds: float  # wall clock of the whole run
    rate_seconds: Optional[float]  # the time the executions took, when known
    corpus_before: int
    corpus_after: int
    findings: dict[str, list[dict]]  # kind -> sidecar records
    orphans: list[str]  # crash files without a sidecar (errors of the harness itself)
    interrupted: bool = False
    edges: Optional[int] = None  # distinct AFL++ edges seen, with --coverage afl
    in_target: Optional[float] = None  # seconds inside the runs (summed over workers)
    restarts: Optional[int] = None  # persistent drivers restarted (summed over workers)
    restart_reasons: str = ""
    grammar_coverage: Optional[str] = None  # "grammar coverage: k=1 a/b, k=2 c/d" of the corpus after
    stop_signal: Optional[int] = None  # the signal that stopped the campaign, if one did
    deadline: bool = False  # loomfuzz stopped it at --time (libFuzzer had not)

    @property
    def finding_count(self) -> int:
        return sum(len(v) for v in self.findings.values())

    @property
    def exec_per_second(self) -> Optional[float]:
        if self.executions is None:
            return None
        seconds = self.rate_seconds or self.seconds
        return self.executions / seconds if seconds > 0 else None


def libfuzzer_flags(config: CampaignConfig) -> list[str]:
    """libFuzzer flags for the config; explicit ``libfuzzer_args`` come last and win."""
    user = list(config.libfuzzer_args)
    flags: list[str] = []
    fork = config.jobs > 1

    def add(name: str, value) -> None:
        if not has_flag(user, name):
            flags.append(f"-{name}={value}")

    if config.time is not None:
        add("max_total_time", config.time)
    if config.runs is not None:
        if fork or has_flag(user, "fork") or has_flag(user, "jobs"):
            add("runs", config.runs)
        else:
            add("atheris_runs", config.runs)
    if config.seed is not None:
        add("seed", config.seed)
    if fork:
        add("fork", config.jobs)
        add("ignore_crashes", 1)
        add("ignore_timeouts", 1)
        add("ignore_ooms", 1)
    add("artifact_prefix", str(config.artifacts.resolve()) + os.sep)
    return flags + user


def build_command(config: CampaignConfig, script: Path) -> list[str]:
    """The fuzz target's command line: this Python, the script, our options,
    the corpus folder, libFuzzer's flags."""
    command = [sys.executable, str(script)]
    if not config.self_test:
        command.append(f"--target={config.target}")
        if config.loom_opt:
            command.append(f"--loom-opt={config.loom_opt}")
        if config.pass_args is not None:
            command.append(f"--pass-args={config.pass_args}")
        if config.pipeline is not None:
            command.append(f"--pipeline={config.pipeline}")
        if config.expectations is not None:
            command.append(f"--expectations={os.path.abspath(config.expectations)}")
        if config.timeout is not None:
            command.append(f"--timeout={config.timeout:g}")
        if config.memory_mb is not None:
            command.append(f"--memory-mb={config.memory_mb}")
        if config.coverage and config.coverage != "none":
            command.append(f"--coverage={config.coverage}")
        if config.grammar_features != "auto":
            command.append(f"--grammar-features={config.grammar_features}")
        if config.oracle != "crash":
            command.append(f"--oracle={config.oracle}")
            if config.oracle_mlir_opt:
                command.append(f"--mlir-opt={config.oracle_mlir_opt}")
        if config.runner == "persistent":
            command.append("--runner=persistent")
            if config.restart_every is not None:
                command.append(f"--restart-every={config.restart_every}")
        if config.grammar:
            command.append(f"--grammar={os.path.abspath(config.grammar)}")
        if config.profile:
            command.append(f"--profile={config.profile}")
    command.append(f"--artifacts={config.artifacts.resolve()}")
    command.extend(libfuzzer_flags(config))
    command.append(str(config.corpus.resolve()))
    return command


def parse_summary(line: str) -> Optional[tuple[int, float]]:
    """(executions, seconds) from a fuzz target's summary line."""
    match = _SUMMARY.search(line)
    return (int(match.group(1)), float(match.group(2))) if match else None


def finding_kind(record: Mapping) -> str:
    """A finding's kind from its sidecar (harness.run.runner.FINDING_KINDS)."""
    return str(record.get("finding_kind") or record.get("outcome") or "unknown")


def _sidecars(artifacts: Path) -> dict[str, int]:
    """Sidecar name -> modification time (ns)."""
    if not artifacts.is_dir():
        return {}
    out = {}
    for p in artifacts.iterdir():
        if p.suffix == ".json" and not p.name.startswith("."):
            try:
                out[p.name] = p.stat().st_mtime_ns
            except OSError:
                continue  # removed meanwhile
    return out


def _written_since(artifacts: Path, before: Mapping[str, int]) -> set[str]:
    """The sidecars written since ``before``: new ones, and those of findings found again
    (same input, same name: the fuzz target rewrote the sidecar)."""
    return {name for name, mtime in _sidecars(artifacts).items() if before.get(name) != mtime}


def _crash_files(artifacts: Path) -> set[str]:
    if not artifacts.is_dir():
        return set()
    return {
        p.name for p in artifacts.iterdir()
        if re.fullmatch(r"(crash|timeout|oom|leak|slow-unit)-[0-9a-f]{40}", p.name)
    }


class _FindingCounter:
    """Findings by kind from the sidecars new since the campaign started (each read once)."""

    def __init__(self, artifacts: Path, before: Mapping[str, int]) -> None:
        self.artifacts = artifacts
        self.before = before
        self.kinds: dict[str, str] = {}  # sidecar name -> kind

    def counts(self) -> dict[str, int]:
        for name in sorted(_written_since(self.artifacts, self.before) - set(self.kinds)):
            try:
                record = json.loads((self.artifacts / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # still being written: read at the next sample
            if isinstance(record, dict) and "outcome" in record:
                self.kinds[name] = finding_kind(record)
        counts: dict[str, int] = {}
        for kind in self.kinds.values():
            counts[kind] = counts.get(kind, 0) + 1
        return counts


class _Progress:
    """Parses the fuzz target's output while it streams through."""

    def __init__(self) -> None:
        self.summary: Optional[tuple[int, float]] = None
        self.fork_runs: Optional[int] = None
        self.status_runs: Optional[int] = None
        self.done_runs: Optional[int] = None
        self.stat_runs: Optional[int] = None
        self.edges: Optional[int] = None  # AFL++ edges seen (the most of any worker)
        self.in_target: Optional[float] = None
        self.restarts: Optional[int] = None
        self.restart_reasons: list[str] = []

    def feed(self, line: str) -> None:
        summary = parse_summary(line)
        if summary:
            self.summary = summary
            edges = _EDGES.search(line)
            if edges:
                self.edges = max(self.edges or 0, int(edges.group(1)))
            in_target = _IN_TARGET.search(line)
            if in_target:
                self.in_target = (self.in_target or 0.0) + float(in_target.group(1))
            persistent = _PERSISTENT.search(line)
            if persistent:
                self.restarts = (self.restarts or 0) + int(persistent.group(1))
                if persistent.group(2) != "none":
                    self.restart_reasons.append(persistent.group(2))
            return
        for pattern, attr in ((_FORK_STATUS, "fork_runs"), (_STATUS, "status_runs"),
                              (_DONE, "done_runs"), (_STAT_RUNS, "stat_runs")):
            match = pattern.match(line)
            if match:
                setattr(self, attr, int(match.group(1)))
                return

    def executions(self) -> tuple[Optional[int], Optional[float]]:
        if self.fork_runs is not None:
            return self.fork_runs, None
        if self.summary is not None:
            return self.summary
        for runs in (self.stat_runs, self.done_runs, self.status_runs):
            if runs is not None:
                return runs, None
        return None, None


def run_campaign(config: CampaignConfig, script: Path, out: TextIO = sys.stderr) -> CampaignResult:
    """Run the fuzz target to its end, streaming its output to ``out``."""
    from harness.fuzzing.series import DEFAULT_INTERVAL, CampaignSeries
    from harness.fuzzing.status import StatusDisplay

    config.corpus.mkdir(parents=True, exist_ok=True)
    config.artifacts.mkdir(parents=True, exist_ok=True)
    remove_partials(config.artifacts)  # temporaries of writers killed in an earlier run
    corpus_before = count_files(config.corpus)
    sidecars_before = _sidecars(config.artifacts)
    crashes_before = _crash_files(config.artifacts)
    command = build_command(config, script)
    env = child_env()
    env.update(config.env)
    print(f"loomfuzz fuzz: {shlex.join(command)}", file=out, flush=True)
    progress = _Progress()
    start = time.monotonic()
    display = StatusDisplay(out)
    series = CampaignSeries(
        config.artifacts, corpus_size=lambda: count_files(config.corpus),
        findings=_FindingCounter(config.artifacts, sidecars_before).counts,
        libfuzzer_executions=lambda: progress.executions()[0],
        interval=config.stats_interval or DEFAULT_INTERVAL, on_sample=display.update, started=start,
    )
    env.update(series.environment)
    # The supervisor turns SIGINT/SIGTERM/SIGHUP into a stop of the whole
    # campaign (see harness/fuzzing/supervisor.py); the output is read to its
    # end either way, so the summary counts everything done until then.
    with Supervisor() as supervisor:
        try:
            proc = supervisor.start(command, env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError:
            series.finish()
            raise
        series.start()
        deadline = _Deadline(supervisor, config.time)
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", errors="replace")
            try:
                display.line(line)
            except (BrokenPipeError, ValueError):  # nobody reads our output any more
                pass
            progress.feed(line.rstrip("\n"))
        deadline.cancel()
    interrupted = supervisor.signum is not None
    series.stop()  # before the end time is taken: no periodic row may come after the last one
    seconds = time.monotonic() - start
    if proc.returncode in (LIBFUZZER_INTERRUPTED, -signal.SIGINT, 130) and not deadline.fired:
        interrupted = True
    executions, rate_seconds = progress.executions()
    counted = series.worker_executions()
    restarts, restart_reasons = series.worker_restarts()
    if restarts is not None and (progress.restarts is None or config.jobs > 1):
        # fork mode: the workers' summary lines go to libFuzzer's job logs; their rows count
        progress.restarts = restarts
        progress.restart_reasons = [", ".join(
            f"{reason}: {n}" for reason, n in (p.rsplit(":", 1) for p in restart_reasons.split())
        )] if restart_reasons else []
    if counted is not None and (executions is None or counted > executions):
        # fork mode: libFuzzer does not count the jobs still running when it stops
        executions, rate_seconds = counted, None
    findings: dict[str, list[dict]] = {}
    new_sidecars = sorted(_written_since(config.artifacts, sidecars_before))
    for name in new_sidecars:
        try:
            record = json.loads((config.artifacts / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or "outcome" not in record:
            continue
        findings.setdefault(finding_kind(record), []).append(record)
    stems = {name[: -len(".json")] for name in new_sidecars}
    orphans = sorted(n for n in _crash_files(config.artifacts) - crashes_before if n not in stems)
    result = CampaignResult(
        returncode=proc.returncode,
        executions=executions,
        seconds=seconds,
        rate_seconds=rate_seconds,
        corpus_before=corpus_before,
        corpus_after=count_files(config.corpus),
        findings=findings,
        orphans=orphans,
        edges=progress.edges,
        in_target=progress.in_target,
        restarts=progress.restarts,
        restart_reasons="; ".join(progress.restart_reasons),
        interrupted=interrupted,
        grammar_coverage=_corpus_grammar_coverage(config),
        stop_signal=supervisor.signum,
        deadline=deadline.fired and supervisor.signum is None,
    )
    series.finish(
        executions=result.executions, corpus=result.corpus_after, edges=result.edges,
        findings={kind: len(records) for kind, records in findings.items()}, elapsed=seconds,
    )
    display.close()
    return result


class _Deadline:
    """Stops the campaign through its supervisor (as a stop signal would, but
    not counted as one) :data:`DEADLINE_SLACK` seconds after ``seconds``."""

    def __init__(self, supervisor, seconds: Optional[float]) -> None:
        self.fired = False
        self._supervisor = supervisor
        self._timer: Optional[threading.Timer] = None
        if seconds is not None:
            self._timer = threading.Timer(seconds + DEADLINE_SLACK, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._supervisor.stop()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _corpus_grammar_coverage(config: CampaignConfig) -> Optional[str]:
    """The k-path coverage of the corpus folder (``loomfuzz coverage``'s figure);
    None for ``--self``, whose inputs are not programs of the grammar."""
    if config.self_test or not config.corpus.is_dir():
        return None
    from harness.core.grammar import GrammarError, load
    from harness.fuzzing.grammar_coverage import fuzz_corpus_coverage

    try:
        return fuzz_corpus_coverage(config.corpus, load(config.grammar, config.profile)).summary()
    except GrammarError:
        return None


def _throughput_lines(config: CampaignConfig, result: CampaignResult) -> list[str]:
    """Where the time went: inside the target runs, outside them, restarts."""
    lines = []
    over = result.rate_seconds or result.seconds
    if result.in_target is not None and config.jobs == 1 and over > 0:
        outside = max(0.0, over - result.in_target)
        lines.append(f"  time:        {result.in_target:.1f} s in the target, {outside:.1f} s outside "
                     f"({100 * outside / over:.0f}%: mutation, decoding, rendering, judging, libFuzzer)")
    elif result.in_target is not None:
        lines.append(f"  time:        {result.in_target:.1f} s in the target (all workers)")
    persistent = config.runner == "persistent"
    if persistent and result.restarts is None:
        lines.append("  persistent:  on (driver restarts not reported: no worker summary seen)")
    elif persistent:
        reasons = f" ({result.restart_reasons})" if result.restart_reasons else ""
        lines.append(f"  persistent:  {result.restarts} driver restarts{reasons}")
    return lines


def format_summary(config: CampaignConfig, result: CampaignResult) -> str:
    """The summary printed at the end of ``loomfuzz fuzz``."""
    lines = ["loomfuzz fuzz: summary"]
    if result.executions is None:
        lines.append(f"  executions:  unknown (the run took {result.seconds:.1f} s)")
    else:
        rate = result.exec_per_second
        over = result.rate_seconds or result.seconds
        lines.append(f"  executions:  {result.executions} ({rate:.1f}/s over {over:.1f} s)"
                     if rate is not None else f"  executions:  {result.executions}")
    lines.extend(_throughput_lines(config, result))
    lines.append(f"  corpus:      {result.corpus_before} -> {result.corpus_after} files in {config.corpus}")
    if result.deadline:
        lines.append(f"  stopped:     at --time {config.time} by loomfuzz (libFuzzer reads its limit "
                     "only between rounds of mutations, and not while it runs the seed corpus)")
    if result.grammar_coverage is not None:
        lines.append(f"  {result.grammar_coverage}")
    if result.edges is not None:
        per_worker = " (the most any worker saw)" if config.jobs > 1 else ""
        lines.append(f"  coverage:    {result.edges} distinct AFL++ edges seen{per_worker}")
    if result.findings:
        kinds = ", ".join(f"{kind}: {len(records)}" for kind, records in sorted(result.findings.items()))
        lines.append(f"  findings:    {result.finding_count} ({kinds}) in {config.artifacts}")
        shown = 0
        for kind, records in sorted(result.findings.items()):
            for record in records:
                if shown == 10:
                    lines.append("               ...")
                    break
                lines.append(f"               {record.get('name')}: {record.get('why') or record.get('reason')}")
                shown += 1
    else:
        lines.append("  findings:    none")
    if result.orphans:
        lines.append(
            f"  harness errors: {len(result.orphans)} crash file(s) without a sidecar "
            f"(an exception in loom-fuzz itself? see the output above): {', '.join(result.orphans[:5])}"
        )
    return "\n".join(lines)
