"""libFuzzer's side of a campaign: its flags, the fuzz target's command line, its output.

* :func:`libfuzzer_flags` translates the options into libFuzzer flags:
  ``--time S`` -> ``-max_total_time=S``; ``--runs N`` -> ``-atheris_runs=N``
  (``-runs=N`` in fork mode, where the parent counts the workers' runs);
  ``--seed S`` -> ``-seed=S``; ``--jobs N`` -> ``-fork=N`` with
  ``-ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1`` so that one finding
  does not stop the other workers (flags given after ``--`` win).
* :func:`build_command` is the fuzz target's command line: this Python, the
  script, ``--options=FILE``, libFuzzer's flags, the corpus.
* :func:`child_env` makes libFuzzer's fork-mode workers find this Python:
  they re-execute the script through its ``#!/usr/bin/env python3`` shebang,
  so the folder of ``sys.executable`` goes first on the child's ``PATH``;
  the options file's path goes in ``$LOOMFUZZ_OPTIONS`` (the workers get
  libFuzzer's argv only).
* :class:`LibFuzzerProgress` reads libFuzzer's own status lines (its run
  counts), the fallback when no worker reported (a target that died) and the
  count of fork mode's parent.

The flag helpers are used by the fuzz targets too: this module imports only
the standard library.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

from harness.fuzzing.options import OPTIONS_ENV, FuzzOptions

__all__ = [
    "CampaignError",
    "LIBFUZZER_INTERRUPTED",
    "LibFuzzerProgress",
    "build_command",
    "child_env",
    "ensure_flag",
    "flag_value",
    "fuzz_target_script",
    "has_flag",
    "libfuzzer_flags",
]

LIBFUZZER_INTERRUPTED = 72  # libFuzzer's -interrupt_exitcode default

_FORK_STATUS = re.compile(r"^#(\d+): cov: ")
_STATUS = re.compile(r"^#(\d+)\s+(?:INITED|NEW|REDUCE|pulse|RELOAD|DONE)\b")
_DONE = re.compile(r"^Done (\d+) (?:runs )?in (\d+) second")
_STAT_RUNS = re.compile(r"^stat::number_of_executed_units: (\d+)")


class CampaignError(Exception):
    """The campaign cannot start; the message is one line for the user."""


def has_flag(flags: Sequence[str], name: str) -> bool:
    prefix = f"-{name}="
    return any(f.startswith(prefix) for f in flags)


def flag_value(flags: Sequence[str], name: str) -> Optional[str]:
    """The last ``-name=value`` of ``flags`` (libFuzzer takes the last), or None."""
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


def fuzz_target_script(name: str) -> Path:
    """The fuzz target script ``name`` in the source tree next to the ``harness`` package
    (a grammar's: :func:`harness.contract.fuzz_script`; ``grammar_fuzzer.py`` for ``--self``)."""
    import harness

    folder = Path(harness.__file__).resolve().parent.parent / "fuzz_targets"
    script = folder / name
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


def child_env(options_file: Optional[Path] = None,
              base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The environment of the fuzz target (see the module docstring)."""
    env = dict(os.environ if base is None else base)
    bindir = str(Path(sys.executable).parent)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != bindir]
    env["PATH"] = os.pathsep.join([bindir, *parts])
    env.setdefault("PYTHONUNBUFFERED", "1")
    if options_file is not None:
        env[OPTIONS_ENV] = str(options_file.resolve())
    else:
        env.pop(OPTIONS_ENV, None)  # a stale one from an enclosing campaign
    return env


def libfuzzer_flags(options: FuzzOptions, artifacts: Path) -> list[str]:
    """libFuzzer flags for the options; explicit ``libfuzzer_args`` come last and win."""
    user = list(options.libfuzzer_args)
    flags: list[str] = []

    def add(name: str, value) -> None:
        if not has_flag(user, name):
            flags.append(f"-{name}={value}")

    if options.time is not None:
        add("max_total_time", options.time)
    if options.runs is not None:
        if options.fork or has_flag(user, "fork") or has_flag(user, "jobs"):
            add("runs", options.runs)
        else:
            add("atheris_runs", options.runs)
    if options.seed is not None:
        add("seed", options.seed)
    if options.fork:
        add("fork", options.jobs)
        add("ignore_crashes", 1)
        add("ignore_timeouts", 1)
        add("ignore_ooms", 1)
    add("artifact_prefix", str(artifacts.resolve()) + os.sep)
    return flags + user


def build_command(options: FuzzOptions, script: Path, options_file: Path) -> list[str]:
    """The fuzz target's command line: this Python, the script, the options
    file, libFuzzer's flags, the corpus folder."""
    artifacts = options.artifacts or Path("artifacts")
    return [sys.executable, str(script), f"--options={options_file.resolve()}",
            *libfuzzer_flags(options, artifacts), str(options.corpus.resolve())]


class LibFuzzerProgress:
    """libFuzzer's run counts, read from its output while it streams through."""

    def __init__(self) -> None:
        self.fork_runs: Optional[int] = None  # fork mode's parent: all jobs
        self.status_runs: Optional[int] = None
        self.done_runs: Optional[int] = None
        self.stat_runs: Optional[int] = None

    def feed(self, line: str) -> None:
        for pattern, attr in ((_FORK_STATUS, "fork_runs"), (_STATUS, "status_runs"),
                              (_DONE, "done_runs"), (_STAT_RUNS, "stat_runs")):
            match = pattern.match(line)
            if match:
                setattr(self, attr, int(match.group(1)))
                return

    def executions(self) -> Optional[int]:
        """The best count libFuzzer printed (fork mode: the parent's), or None."""
        for runs in (self.fork_runs, self.stat_runs, self.done_runs, self.status_runs):
            if runs is not None:
                return runs
        return None
