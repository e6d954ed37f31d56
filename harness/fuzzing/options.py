"""``loomfuzz fuzz``'s settings: one typed value, written once, read by the fuzz target.

:class:`FuzzOptions` holds every setting of a campaign: what the fuzz target
needs (grammar, target, runner, oracle, feedback, where results go) and what
only the campaign uses (corpus, libFuzzer's limits).  ``loomfuzz fuzz``
builds one from its arguments (:mod:`harness.commands.fuzz`), the campaign
writes it to ``ARTIFACTS/fuzz-options.json`` (:data:`OPTIONS_FILE`) and
starts the fuzz target with ``--options=FILE``.  libFuzzer's ``-fork`` /
``-jobs`` re-execute the target with libFuzzer's own arguments only, so the
same path also travels in the one variable :data:`OPTIONS_ENV`; nothing else
is relayed through the environment.

A fuzz target calls :func:`target_options` on its ``argv``: the options
(from ``--options``, else ``$LOOMFUZZ_OPTIONS``, else the defaults, which is
how ClusterFuzzLite runs a bundled target) and libFuzzer's flags.  A missing
or corrupt options file is one line and exit 2.

Only the standard library and :mod:`harness.core.typed_json` are imported
(fuzz targets import this at start-up).
"""

from __future__ import annotations

import enum
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from harness.core import typed_json
from harness.execute.twins import DEFAULT_TWINS

__all__ = [
    "CoverageKind",
    "FeatureMode",
    "FuzzOptions",
    "OPTIONS_ENV",
    "OPTIONS_FILE",
    "OracleKind",
    "RunnerKind",
    "StatsOptions",
    "SUMMARY_FILE",
    "read_options",
    "target_options",
    "write_options",
]

#: The file the campaign writes in the artifacts folder.
OPTIONS_FILE = "fuzz-options.json"
#: The workers' summary records (:mod:`harness.fuzzing.worker_summary`).
SUMMARY_FILE = "fuzz-summary.jsonl"
#: The one variable that carries the options file's path to re-executed workers.
OPTIONS_ENV = "LOOMFUZZ_OPTIONS"


class RunnerKind(enum.Enum):
    PROCESS = "process"  # one target process per program
    PERSISTENT = "persistent"  # one long-lived fork-server driver (harness.run.runners)


class CoverageKind(enum.Enum):
    NONE = "none"
    AFL = "afl"  # edges of an AFL++-instrumented target (harness.run.coverage)


class FeatureMode(enum.Enum):
    AUTO = "auto"  # grammar features on without real coverage, off with it
    ON = "on"
    OFF = "off"


class OracleKind(enum.Enum):
    CRASH = "crash"  # the target's outcome judged by its expectations
    DIFFERENTIAL = "differential"  # the exec rendering before/after the optimizer (harness.execute)


@dataclass(frozen=True)
class StatsOptions:
    """Where a fuzz target appends its rows of statistics (harness.fuzzing.series)."""

    path: Path
    interval: float = 2.0

    def __post_init__(self) -> None:
        if not self.interval > 0:
            raise ValueError(f"the statistics interval must be positive, not {self.interval}")


@dataclass(frozen=True)
class FuzzOptions:
    """Every setting of one ``loomfuzz fuzz`` campaign (see the module docstring)."""

    # -- the programs
    grammar: Optional[Path] = None  # a grammar file; None: the profile's
    profile: Optional[str] = None  # a built-in profile (or break:P<n>); None: the default
    # -- the target
    target: str = "loom-opt"  # loom-opt, mlir-opt or another tool's name
    binary: Optional[str] = None  # its binary, as the command resolved it; None: look it up
    family: Optional[str] = None  # --family: the family of a build named by path (harness.targets.target)
    build: Optional[str] = None  # the build under test, one line (Target.describe: family and why)
    pass_args: Optional[tuple[str, ...]] = None
    pipeline: Optional[str] = None
    expectations: Optional[Path] = None
    timeout: float = 10.0  # seconds per target run
    memory_mb: int = 4096  # address-space limit per run; 0: none
    runner: RunnerKind = RunnerKind.PROCESS
    restart_every: Optional[int] = None  # persistent: programs per driver worker
    # -- feedback
    coverage: CoverageKind = CoverageKind.NONE
    grammar_features: FeatureMode = FeatureMode.AUTO
    # -- the oracle
    oracle: OracleKind = OracleKind.CRASH
    # differential only (None: harness.execute's defaults, the Debian toolchain)
    optimizer: Optional[str] = None  # the optimizer under test
    reference_runner: Optional[str] = None  # the trusted runner
    runtime_library: Optional[str] = None  # the runner's runtime library
    twins: float = DEFAULT_TWINS  # the share of programs judged with constant twins (harness.execute.twins)
    # -- where results go
    artifacts: Optional[Path] = None  # findings (-artifact_prefix=ARTIFACTS/)
    summary: Optional[Path] = None  # each worker appends its summary record here
    stats: Optional[StatsOptions] = None  # each worker appends rows of statistics here
    # -- the campaign only (libFuzzer's side; fuzz targets ignore these)
    corpus: Path = Path("corpus")
    self_test: bool = False  # fuzz loom-fuzz's own grammar code (grammar_fuzzer.py)
    time: Optional[int] = None  # -max_total_time
    runs: Optional[int] = None  # -atheris_runs (-runs in fork mode)
    jobs: int = 1  # -fork
    seed: Optional[int] = None  # -seed
    libfuzzer_args: tuple[str, ...] = ()  # flags after --, they win

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, not {self.timeout}")
        if self.memory_mb < 0:
            raise ValueError(f"memory_mb must be 0 (no limit) or more, not {self.memory_mb}")
        if self.restart_every is not None and self.restart_every < 1:
            raise ValueError(f"restart_every must be at least 1, not {self.restart_every}")
        if self.jobs < 1:
            raise ValueError(f"jobs must be at least 1, not {self.jobs}")

    @property
    def fork(self) -> bool:
        return self.jobs > 1


def write_options(options: FuzzOptions, path: Path) -> None:
    typed_json.dump(options, path)


def read_options(path: str | os.PathLike) -> FuzzOptions:
    """The options in ``path``; ``typed_json.TypedJsonError`` (one line) when unusable."""
    return typed_json.load(FuzzOptions, path)


def _fail(prog: str, message: str) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def target_options(argv: Sequence[str], prog: str) -> tuple[FuzzOptions, list[str]]:
    """A fuzz target's options and libFuzzer's part of ``argv`` (``argv[0]``,
    its ``-flags`` and corpus folders).  ``--options=FILE`` (or ``--options
    FILE``) names the options; else ``$LOOMFUZZ_OPTIONS``; else the defaults.
    The path is exported to :data:`OPTIONS_ENV` for libFuzzer's re-executed
    workers.  Any other ``--word`` is an error (libFuzzer's flags take one
    dash): one line, exit 2."""
    rest = [argv[0]] if argv else [prog]
    path: Optional[str] = None
    args = list(argv[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg[2:].partition("=")
            if name != "options":
                _fail(prog, f"unknown option --{name}: the settings come in a file, --options=FILE "
                            "(loomfuzz fuzz writes ARTIFACTS/fuzz-options.json); libFuzzer's flags "
                            "take one dash")
            if not eq:
                if i + 1 >= len(args):
                    _fail(prog, "--options needs a file")
                i += 1
                value = args[i]
            path = value
        else:
            rest.append(arg)
        i += 1
    if path is None:
        path = os.environ.get(OPTIONS_ENV) or None
    if path is None:
        return FuzzOptions(), rest
    try:
        options = read_options(path)
    except typed_json.TypedJsonError as error:
        _fail(prog, f"options file {error}")
    os.environ[OPTIONS_ENV] = os.path.abspath(path)
    return options, rest
