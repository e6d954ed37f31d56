"""Which releases a wrong-code bucket reproduces on (``triage --oracle differential --releases``).

After a wrong-code (or executor-disagreement) bucket's program is minimized,
it is judged again under the pipeline its findings were found with (the whole
one, not the bisection's prefix) with each release as the optimizer under test:
the reference values stay the interpreter's, the lowering and the run stay the
trusted toolchain's (:func:`harness.triage.wrong_code.verdict_of`).  A release
reads the program as its parser does (MLIR 15/16: without overflow flags,
:mod:`harness.execute.releases`, through :attr:`OracleSettings.release`).

Which releases (:func:`releases_from_option`, the option's value):

* ``auto``: every ``mlir-opt-N`` on PATH and LLVM's development head where
  :func:`harness.targets.identity.which` finds it (each head wheel's tool,
  :mod:`harness.targets.heads`: ``mlir-opt-head`` with every upstream pass, the
  ``iree-base-compiler`` wheel's ``iree-opt``), one per binary, in release order;
* ``none``: no release is judged;
* ``PATH[,PATH...]``: those builds (a name on PATH or a path).

The optimizer the findings were found with is always judged first (it is the
build the bucket is about; when it is one of the releases, that release is
marked ``under_test``).  Each release gets one :data:`RESULTS` word and a
one-line detail:

=================  ==============================================================
``reproduces``     the same finding kind; ``same_first_difference`` says whether its
                   first difference is the bucket's (function, row, value, both values)
``correct``        the same values as the reference
``other finding``  a finding of another kind (e.g. wrong code where the bucket is an
                   executor disagreement, or output that is not valid MLIR)
``rejects``        it exits with an error: a pass it lacks, a syntax it cannot parse
``crashes``        it dies (a signal, an assertion, LLVM's crash handler)
``times out``      it runs past the optimizer's timeout
``cannot judge``   the trusted toolchain cannot lower or run what it printed
``not run``        its binary is missing or cannot be started (why, in the detail)
=================  ==============================================================
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from harness.execute.differential import ExecutorsDisagree, OptimizerError, ReferenceFailed, Same, TargetFailed, \
    WrongCode
from harness.oracles.differential_runner import OracleSettings, oracle_settings
from harness.targets.heads import HEADS
from harness.targets.identity import HEX_ELEMENTS_OPTION, IdentityError, identify, which
from harness.run.driver_protocol import DriverError
from harness.triage.wrong_code import DISAGREEMENT, disagreement_of, verdict_of

__all__ = ["CHECKED_KINDS", "RESULTS", "Release", "ReleaseResult", "ReleaseSelection", "found_releases",
           "judge_on_releases", "release_of", "releases_from_option"]

#: The bucket kinds whose program is judged on the releases.
CHECKED_KINDS = ("wrong-code", DISAGREEMENT)
#: What a release can give (see the module docstring).
RESULTS = ("reproduces", "correct", "other finding", "rejects", "crashes", "times out", "cannot judge", "not run")
_MLIR_OPT_N = re.compile(r"mlir-opt-(\d+)")
_CRASH = re.compile(r"Assertion .* failed|LLVM ERROR|Stack dump|PLEASE submit a bug report|Segmentation fault")


@dataclass(frozen=True)
class Release:
    """One build to judge a bucket's program with."""

    name: str  # "MLIR 19", "head (24.0.0git, mlir-opt-head)"; a build of no release: its file name
    binary: str  # as given or found (a path, or a name on PATH)
    version: str | None  # its LLVM version ("19.1.7", "24.0.0git"); None: unknown
    missing: str | None = None  # why it cannot run (its result is then "not run")

    @property
    def real_path(self) -> str | None:
        found = which(self.binary)
        return os.path.realpath(found) if found else None

    def to_json(self) -> dict:
        return {"name": self.name, "binary": self.binary, "version": self.version, "missing": self.missing}


def _name_of(version: str | None, binary: str) -> str:
    """``MLIR 19``; ``head (24.0.0git, mlir-opt-head)`` for a development build (two head
    builds of one version differ by their tool); the file name otherwise."""
    if version is None:
        return os.path.basename(binary)
    major, _, rest = version.partition(".")
    if not re.fullmatch(r"[\d.]*", rest):  # 24.0.0git: no release, LLVM's development head
        return f"head ({version}, {os.path.basename(binary)})"
    return f"MLIR {major}"


def release_of(binary: str) -> Release:
    """The build ``binary`` names, asked once (:func:`harness.targets.identity.identify`)."""
    found = which(binary)
    if found is None:
        return Release(os.path.basename(binary), binary, None, f"{binary} is not an executable file or on PATH")
    try:
        identity = identify(found)
    except IdentityError as error:
        return Release(os.path.basename(binary), binary, None, str(error))
    if identity.family != "mlir-opt":
        return Release(os.path.basename(binary), binary, identity.version,
                       f"{binary} is no mlir-opt build (its --help names no --pass-pipeline)")
    return Release(_name_of(identity.version, binary), binary, identity.version)


def _release_order(release: Release) -> tuple:
    numbers = [int(n) for n in re.findall(r"\d+", release.version or "")] or [1 << 30]
    return numbers, release.version or "", release.binary


def found_releases(path: str | None = None) -> list[str]:
    """Every ``mlir-opt-N`` on ``path`` (default: PATH), then each head's tool where found
    (``mlir-opt-head``, ``iree-opt``); one name per binary (the first found of those that
    are the same file)."""
    seen: dict[str, str] = {}
    for folder in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            candidate = os.path.join(folder, name)
            if _MLIR_OPT_N.fullmatch(name) and os.access(candidate, os.X_OK) and os.path.isfile(candidate):
                seen.setdefault(os.path.realpath(candidate), candidate)
    for head in HEADS:
        tool = which(head.tool)
        if tool is not None:
            seen.setdefault(os.path.realpath(tool), tool)
    return list(seen.values())


@dataclass(frozen=True)
class ReleaseSelection:
    """The ``--releases`` setting, resolved: what was asked, and the builds it names."""

    spec: str  # auto | none | PATH[,PATH...]
    releases: tuple[Release, ...] = ()

    def describe(self) -> str:
        """One line: which builds will be judged (``auto``: which were found)."""
        if not self.releases:
            return "releases: none judged" + (" (none found on PATH)" if self.spec == "auto" else "")
        found = "found" if self.spec == "auto" else "named"
        parts = [f"{r.name} ({r.binary}" + (f", LLVM {r.version})" if r.version else ")")
                 + (f": not run, {r.missing}" if r.missing else "") for r in self.releases]
        return f"releases {found}: " + ", ".join(parts)


def releases_from_option(value: str, path: str | None = None) -> ReleaseSelection:
    """The selection ``--releases VALUE`` names (see the module docstring).  Raises
    ``ValueError`` (one line) for an empty list."""
    spec = value.strip()
    if spec == "none":
        return ReleaseSelection("none")
    if spec == "auto":
        binaries = found_releases(path)
    else:
        binaries = [part.strip() for part in spec.split(",")]
        if not spec or any(not b for b in binaries):
            raise ValueError(f"--releases takes auto, none or PATH[,PATH...], not {value!r}")
    releases, real = [], set()
    for binary in binaries:
        release = release_of(binary)
        key = release.real_path or binary
        if key not in real:  # one judgement per build, whatever its names
            real.add(key)
            releases.append(release)
    releases.sort(key=_release_order)
    names = [r.name for r in releases]
    releases = [replace(r, name=f"{r.name} ({os.path.basename(r.binary)})") if names.count(r.name) > 1 else r
                for r in releases]
    return ReleaseSelection(spec, tuple(releases))


@dataclass(frozen=True)
class ReleaseResult:
    """What one release gave for a bucket's program."""

    name: str
    binary: str
    version: str | None
    result: str  # one of RESULTS
    detail: str = ""
    same_first_difference: bool | None = None  # reproduces: the bucket's first difference again
    under_test: bool = False  # the optimizer the findings were found with

    def to_json(self) -> dict:
        return {"name": self.name, "binary": self.binary, "version": self.version, "result": self.result,
                "detail": self.detail, "same_first_difference": self.same_first_difference,
                "under_test": self.under_test}


def _settings_for(settings: OracleSettings, release: Release) -> OracleSettings:
    """``settings`` with ``release`` as the optimizer under test: its own release (what its
    parser reads) and its own printing option (dense elements as literals where it differs
    from the reference toolchain's release: harness.oracles.differential_runner.oracle_settings)."""
    extra = tuple(a for a in settings.optimizer.extra_args if not a.startswith(f"--{HEX_ELEMENTS_OPTION}"))
    fresh = oracle_settings(replace(settings.optimizer, binary=release.binary, extra_args=extra),
                            settings.toolchain, settings.batch_size, runner=settings.runner)
    return replace(settings, optimizer=fresh.optimizer, release=fresh.release)


def _first_key(exec_text: str, verdict) -> tuple | None:
    """What makes a first difference the same: the module (a disagreement's), function, row,
    column and both values."""
    if isinstance(verdict, WrongCode):
        side, first = "", verdict.first
    elif isinstance(verdict, ExecutorsDisagree):
        found = disagreement_of(exec_text, verdict)
        side, first = f"{found.side} {found.how}", found.first
    else:
        return None
    if first is None:
        return (side,)
    return side, first.function.symbol, first.row, first.column, first.reference, first.target


def _describe(exec_text: str, verdict) -> str:
    if isinstance(verdict, ExecutorsDisagree):
        return disagreement_of(exec_text, verdict).describe()
    return verdict.describe()


def _failure(verdict: TargetFailed, missing: list[str]) -> tuple[str, str]:
    """(result, detail) of an optimizer that did not optimize."""
    detail = verdict.detail.splitlines()[0] if verdict.detail else verdict.stage
    if verdict.stage != "optimize":  # it printed something the reference cannot read
        return "other finding", f"{verdict.kind}: {detail}"
    if detail.startswith("timed out"):
        return "times out", detail
    if detail.startswith("signal") or _CRASH.search(verdict.stderr or ""):
        crash = _CRASH.search(verdict.stderr or "")
        return "crashes", detail if crash is None or crash.group(0) in detail else f"{detail} ({crash.group(0)})"
    if missing:
        return "rejects", f"it has no pass {', '.join(missing)}"
    return "rejects", detail


def judge_release(text: str, settings: OracleSettings, pipeline: str, kind: str, bucket_first: tuple | None,
                  release: Release, *, under_test: bool = False) -> ReleaseResult:
    """``release``'s result for the canonical program ``text`` of a bucket of ``kind``, judged
    under ``pipeline`` (``settings``: the bucket's, its twins included)."""
    def result(word: str, detail: str = "", same: bool | None = None) -> ReleaseResult:
        return ReleaseResult(release.name, release.binary, release.version, word, detail[:300], same, under_test)

    if release.missing:
        return result("not run", release.missing)
    mine = settings if under_test else _settings_for(settings, release)
    try:
        verdict = verdict_of(text, mine, pipeline)
    except (OptimizerError, DriverError) as error:
        return result("not run", str(error).splitlines()[0] if str(error) else type(error).__name__)
    exec_text = mine.exec_text(text)
    if verdict is None:  # the bucket's program is judged: this cannot be, but say so if it is
        return result("cannot judge", "off P1-P24 or undefined behaviour")
    if verdict.kind == kind:
        key = _first_key(exec_text, verdict)
        same = key == bucket_first if bucket_first is not None else None
        detail = "the same first difference" if same else _describe(exec_text, verdict)
        return result("reproduces", detail, same)
    if isinstance(verdict, Same):
        return result("correct")
    if isinstance(verdict, (WrongCode, ExecutorsDisagree)):
        return result("other finding", f"{verdict.kind}: {_describe(exec_text, verdict)}")
    if isinstance(verdict, ReferenceFailed):
        return result("cannot judge", f"{verdict.stage}: {verdict.detail.splitlines()[0] if verdict.detail else ''}")
    identity_missing = []
    found = which(release.binary)
    if found is not None:
        try:
            identity_missing = identify(found).missing_passes(pipeline)
        except IdentityError:
            pass
    word, detail = _failure(verdict, identity_missing)
    return result(word, detail)


def judge_on_releases(text: str, settings: OracleSettings, pipeline: str, kind: str, bucket_verdict,
                      releases: Sequence[Release], *,
                      judged: Callable[[], None] | None = None) -> list[ReleaseResult]:
    """Every release's result for a bucket's minimized program ``text`` (see the module
    docstring): the optimizer under test first (``settings.optimizer``), then ``releases``
    in their order; ``bucket_verdict``: the bucket's own (its first difference is compared);
    ``judged()`` is called after each judgement (progress)."""
    bucket_first = _first_key(settings.exec_text(text), bucket_verdict)
    own = os.path.realpath(which(settings.optimizer.binary) or settings.optimizer.binary)
    results = []
    if all(r.real_path != own for r in releases):
        tested = release_of(settings.optimizer.binary)
        name = os.path.basename(settings.optimizer.binary)
        results.append(judge_release(text, settings, pipeline, kind, bucket_first,
                                     replace(tested, name=name, missing=None), under_test=True))
        if judged:
            judged()
    for release in releases:
        results.append(judge_release(text, settings, pipeline, kind, bucket_first, release,
                                     under_test=release.real_path == own))
        if judged:
            judged()
    return results
