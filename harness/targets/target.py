"""The tool under test as a ``Target``: a command line (binary plus pass arguments;
the program goes to its stdin), the rendering it reads (``canonical`` for loom,
``oracle`` for upstream ``mlir-opt``), limits, the expectations it is judged
against and its build (:mod:`harness.targets.identity`); and how a name or a path
becomes one (:func:`resolve_target`)."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

from harness.targets.expectations import DEFAULT_RULE, Expectations, builtin_expectations, load_expectations
from harness.targets.folders import build_key
from harness.targets.heads import head_of_tool
from harness.targets.identity import BuildIdentity, IdentityError, identify, which

__all__ = ["DEFAULT_LOOM_PASS_ARGS", "DEFAULT_MLIR_PIPELINE", "FAMILIES", "Target", "TargetNotFound", "explicit_binary",
           "resolve_target"]

DEFAULT_LOOM_PASS_ARGS: tuple[str, ...] = ("--loom-lower-for-to-graph",)
MLIR_OPT_BASE_ARGS: tuple[str, ...] = ("--allow-unregistered-dialect",)
DEFAULT_MLIR_PIPELINE = "builtin.module(canonicalize,cse,sccp,symbol-dce)"
# Kept out of the way of stack traces: symbolization stays on (signatures need
# function names); this only turns off crash-reporter side channels.
DEFAULT_ENV: Mapping[str, str] = MappingProxyType({"LLVM_DISABLE_CRASH_REPORT": "1"})


class TargetNotFound(Exception):
    """No usable binary for the target; the message is one line for the user."""


#: The families ``--family`` names: loom's driver, upstream's, or a tool of the user's own.
FAMILIES = ("loom-opt", "mlir-opt", "other")
#: The family reason of a build whose --help names neither family's flag.
UNKNOWN_FAMILY = "its --help lists neither --loom-lower-for-to-graph nor --pass-pipeline"
_FAMILY_FLAG = {"loom-opt": "--loom-lower-for-to-graph", "mlir-opt": "--pass-pipeline"}


@dataclass(frozen=True)
class Target:
    name: str  # "loom-opt" | "mlir-opt" | a user's name
    argv: tuple[str, ...]  # binary + pass args; the program goes to stdin
    render: str = "canonical"  # the grammar's rendering it reads (the grammar names them)
    timeout: float = 10.0
    memory_mb: int | None = 4096  # RLIMIT_AS; None: no limit (sanitizer builds)
    expectations: Expectations | None = None  # None: built-in for `name`, else accept-all
    env: Mapping[str, str] = field(default_factory=lambda: DEFAULT_ENV, hash=False)  # added to os.environ
    #: the binary's family, release and capabilities, asked once (harness.targets.identity);
    #: None for a target built by hand (tests, the differential oracle's optimizer)
    build: BuildIdentity | None = field(default=None, compare=False)
    #: a program of the grammar's own shape in the target's rendering: the probe runs it
    #: before a campaign, so a target that refuses the grammar's programs is one line
    probe_program: str | None = field(default=None, compare=False, repr=False)
    #: why the build is judged as ``name``'s family ("its --help lists --pass-pipeline",
    #: "--family loom-opt", ...): the summaries say it; None for a target built by hand
    family_reason: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(self.argv))
        if not self.render:
            raise ValueError("render: the name of one of the grammar's renderings")
        if self.expectations is None:
            exp = builtin_expectations(self.name) or Expectations(
                source="builtin:accept-all", rules=(DEFAULT_RULE,)
            )
            object.__setattr__(self, "expectations", exp)
        if not isinstance(self.env, MappingProxyType):
            object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    @property
    def command(self) -> str:
        """The command line as a shell would take it, program on stdin."""
        return shlex.join(self.argv)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "argv": list(self.argv),
            "render": self.render,
            "timeout": self.timeout,
            "memory_mb": self.memory_mb,
            "env": dict(self.env),
            "expectations": self.expectations.source if self.expectations else None,
            "build": self.build.to_json() if self.build else None,
            "key": self.key,
        }

    def describe(self) -> str:
        """One line for a summary: the build, its release and the family it is judged as, and why."""
        build = self.build.describe() if self.build else self.argv[0]
        return f"{build} as {self.name} ({self.family_reason})" if self.family_reason else build

    @functools.cached_property
    def key(self) -> str:
        """The build under test in a folder name (harness.targets.folders.build_key):
        ``mlir-opt-19``, ``loom-opt-<digest>``; the differential oracle's optimizer is an
        mlir-opt build."""
        family = "mlir-opt" if self.name == "differential" else self.name
        if family not in ("loom-opt", "mlir-opt") and self.build is not None and self.build.family != "other":
            family = self.build.family
        return build_key(family, self.argv[0])

    @property
    def family_unknown(self) -> bool:
        """A build named by name or path whose family nothing told (harness.commands asks)."""
        return self.build is not None and self.family_reason == UNKNOWN_FAMILY


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def explicit_binary(path: str, what: str) -> str:
    """``path`` (a path to an executable file, or a name on PATH) as an absolute path; raises
    ``TargetNotFound`` (one line naming ``what``)."""
    if os.sep in path or os.path.exists(path):
        if _executable(path):
            return os.path.abspath(path)
        raise TargetNotFound(f"{what} binary {path!r} does not exist or is not executable")
    found = which(path)
    if not found:
        raise TargetNotFound(f"{what} binary {path!r} is not on PATH")
    return found


def _pipeline_args(pipeline: str) -> tuple[str, ...]:
    """A pipeline given as a flag (``--loom-lower-scf-to-dfg``) stays a flag;
    anything else is a textual pipeline for ``--pass-pipeline=``."""
    if pipeline.startswith("-"):
        return tuple(shlex.split(pipeline))
    return (f"--pass-pipeline={pipeline}",)


LOOM_NOT_FOUND = (
    "no loom-opt binary: pass --loom-opt PATH or set LOOM_OPT (loom's driver is also "
    "found as loom-raise-opt on PATH); --target mlir-opt works without loom"
)
MLIR_NOT_FOUND = (
    "no mlir-opt binary: set MLIR_OPT or put mlir-opt-22 on PATH "
    "(Debian: apt-get install mlir-22-tools)"
)


def _find_binary(given: str | None, what: str, variable: str, names: tuple[str, ...],
                 paths: tuple[str, ...], not_found: str) -> str:
    """The binary named on the command line, else by ``$variable``, else the first of
    ``names`` on PATH or of ``paths``; raises ``TargetNotFound(not_found)``."""
    if given:
        return explicit_binary(given, what)
    env = os.environ.get(variable)
    if env:
        return explicit_binary(env, variable)
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    for path in paths:
        if _executable(path):
            return path
    raise TargetNotFound(not_found)


def _find_loom_opt(loom_opt: str | None) -> str:
    return _find_binary(loom_opt, "loom-opt", "LOOM_OPT", ("loom-opt", "loom-raise-opt"), (), LOOM_NOT_FOUND)


def _find_mlir_opt(mlir_opt: str | None = None) -> str:
    return _find_binary(mlir_opt, "mlir-opt", "MLIR_OPT", ("mlir-opt-22", "mlir-opt"),
                        ("/usr/lib/llvm-22/bin/mlir-opt",), MLIR_NOT_FOUND)


def resolve_target(
    name: str = "loom-opt",
    *,
    loom_opt: str | None = None,
    mlir_opt: str | None = None,
    pass_args: Sequence[str] | None = None,
    pipeline: str | None = None,
    timeout: float = 10.0,
    memory_mb: int | None = 4096,
    expectations_path: str | None = None,
    family: str | None = None,
) -> Target:
    """Build a ``Target`` by name.

    ``loom-opt``: binary from ``loom_opt``, else ``$LOOM_OPT``, else
    ``loom-opt`` or ``loom-raise-opt`` on PATH; arguments ``pass_args``
    (default ``--loom-lower-for-to-graph``), replaced by ``pipeline`` when
    only that is given; canonical rendering.

    ``mlir-opt``: binary from ``mlir_opt``, else ``$MLIR_OPT``, else ``mlir-opt-22`` or ``mlir-opt`` on PATH;
    arguments ``pass_args`` (default ``--allow-unregistered-dialect``) plus
    ``pipeline`` (default ``DEFAULT_MLIR_PIPELINE``); oracle rendering.

    Any other name, or a path: a build of its own (``mlir-opt-19``, ``iree-opt``,
    ``mlir-opt-head``: LLVM's development head, harness.targets.heads;
    ``/opt/llvm/bin/mlir-opt``), binary ``loom_opt`` / ``mlir_opt`` or ``name``,
    asked once what it is (:func:`harness.targets.identity.identify`): a tool that
    takes mlir-opt's flags is the ``mlir-opt`` target with that binary, one that
    registers loom's pass the ``loom-opt`` target; anything else is a user's tool:
    arguments ``pass_args`` plus ``pipeline``, canonical rendering, and (unless
    ``expectations_path`` is given) accept-all expectations: any clean exit is
    fine, a crash, timeout or oom is a finding.

    ``family`` (``--family``: one of :data:`FAMILIES`) says the family of a build named by
    name or path instead of its ``--help``; the target's ``family_reason`` says which
    decided (:data:`UNKNOWN_FAMILY` when nothing did: harness.commands asks the user).

    A ``pipeline`` starting with ``-`` is passed as flags; otherwise as
    ``--pass-pipeline=PIPELINE``.
    """
    build = None
    if name == "loom-opt":
        family, binary = "loom-opt", _find_loom_opt(loom_opt)
        reason = "--loom-opt" if loom_opt else "--target loom-opt"
    elif name == "mlir-opt":
        family, binary = "mlir-opt", _find_mlir_opt(mlir_opt)
        reason = "--mlir-opt" if mlir_opt else "--target mlir-opt"
    else:
        # a build named by name or path (mlir-opt-19, /opt/llvm/bin/mlir-opt, iree-opt,
        # a loom-raise-opt elsewhere): its family is what it says of itself, or --family
        head = None if (loom_opt or mlir_opt) else head_of_tool(name)
        try:
            binary = explicit_binary(loom_opt or mlir_opt or name, name)
        except TargetNotFound:
            if head is None:
                raise
            raise TargetNotFound(f"{head.tool} is not installed: {head.install_hint()}") from None
        build = _identity(binary)
        if family is not None:
            reason = f"--family {family}"
        elif build.family != "other":
            family, reason = build.family, f"its --help lists {_FAMILY_FLAG[build.family]}"
        else:
            family, reason = "other", UNKNOWN_FAMILY
    if family != "other" and build is None:
        build = _identity(binary)
    if family == "loom-opt":
        if pass_args is not None:
            args = tuple(pass_args)
        elif pipeline is not None:
            args = ()
        else:
            args = DEFAULT_LOOM_PASS_ARGS
        render = "canonical"
        builtin = "loom-opt"
    elif family == "mlir-opt":
        args = tuple(pass_args) if pass_args is not None else MLIR_OPT_BASE_ARGS
        if pipeline is None:
            pipeline = DEFAULT_MLIR_PIPELINE
        render = "oracle"
        builtin = "mlir-opt"
    else:
        args = tuple(pass_args) if pass_args is not None else ()
        render = "canonical"
        builtin = name  # a tool of its own: no built-in expectations, so accept-all
    if family in ("loom-opt", "mlir-opt"):
        name = family  # probes, expectations and drivers are the family's; the build says which
    if pipeline:
        args = args + _pipeline_args(pipeline)
    expectations = (
        load_expectations(expectations_path)
        if expectations_path
        else builtin_expectations(builtin)
    )
    return Target(
        name=name,
        argv=(binary, *args),
        render=render,
        timeout=timeout,
        memory_mb=memory_mb,
        expectations=expectations,
        build=build,
        family_reason=reason,
    )


def _identity(binary: str) -> BuildIdentity:
    try:
        return identify(binary)
    except IdentityError as error:
        raise TargetNotFound(str(error)) from None


