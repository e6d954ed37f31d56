"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
FAKE_SOURCE = FIXTURES / "fake_loom_opt.c"


def build_c(source: Path, out: Path) -> str:
    """``source`` compiled with ``cc`` to ``out``; fails the test when it cannot be."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.fail(f"no C compiler (cc) to build {source}")
    proc = subprocess.run([cc, "-O1", "-g", "-o", str(out), str(source)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"cc failed to build {source}:\n{proc.stderr}")
    return str(out)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full-samples", action="store_true",
                     help="run the sampled tests at the issues' full sizes (10,000 programs through the "
                          "checker, 50,000 mutations, 300 wide programs per pipeline...): minutes more; "
                          "the suite's default sizes keep it near ten minutes on two cores")


@dataclass(frozen=True)
class Samples:
    """How many programs (mutations, runs) a sampled test takes: the suite's size, or with
    ``--full-samples`` the size its issue asked for (the same test, the same assertions)."""

    full: bool

    def __call__(self, suite: int, full: int) -> int:
        return full if self.full else suite


@pytest.fixture(scope="session")
def samples(request: pytest.FixtureRequest) -> Samples:
    return Samples(bool(request.config.getoption("--full-samples")))


@pytest.fixture(scope="session")
def fake_loom_opt(tmp_path_factory) -> str:
    """Path of the planted-bug test double, compiled with ``cc`` once per session.

    Flags: ``--plant=LIST`` (default: assert, segv, fatal, flaky); see the top
    of tests/fixtures/fake_loom_opt.c.
    """
    return build_c(FAKE_SOURCE, tmp_path_factory.mktemp("fake") / "fake-loom-opt")


@pytest.fixture(scope="session")
def persistent_fake(tmp_path_factory) -> str:
    """Path of tests/fixtures/persistent_fake.c (a one-shot tool and a
    fork-server driver with planted faults), compiled once per session."""
    return build_c(FIXTURES / "persistent_fake.c", tmp_path_factory.mktemp("pfake") / "persistent-fake")


MLIR_OPT_INSTALL = "apt-get install -y --no-install-recommends mlir-22-tools (or: bash .ci/setup)"
MLIR_OPT_LIBDIR = "/usr/lib/llvm-22/bin/mlir-opt"  # where Debian's mlir-22-tools puts it


def find_mlir_opt(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """(path of upstream ``mlir-opt-22``, or None; where it was looked for).

    ``$MLIR_OPT`` when set (it must name an executable: a wrong path is a missing
    tool, not one to fail on later), else ``mlir-opt-22`` on ``$PATH``, else
    Debian's ``/usr/lib/llvm-22/bin/mlir-opt``."""
    if environ.get("MLIR_OPT"):
        path = environ["MLIR_OPT"]
        return (path if os.path.isfile(path) and os.access(path, os.X_OK) else None), f"MLIR_OPT={path}"
    found = shutil.which("mlir-opt-22", path=environ.get("PATH", os.defpath))
    if not found and os.access(MLIR_OPT_LIBDIR, os.X_OK):
        found = MLIR_OPT_LIBDIR
    return found, f"mlir-opt-22 on PATH or {MLIR_OPT_LIBDIR}"


def running_in_ci(environ: Mapping[str, str]) -> bool:
    """CI services set ``CI`` (GitHub Actions, GitLab, ... : ``CI=true``); .ci/run sets it too."""
    return environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def mlir_opt() -> str:
    """Path of upstream ``mlir-opt-22``.  Where it is absent the test is skipped
    with the install command, except in CI (``$CI`` set), where .ci/setup has
    installed it: there a missing mlir-opt-22 fails, so no skip hides a broken
    install step."""
    path, where = find_mlir_opt(os.environ)
    if path:
        return path
    message = f"mlir-opt-22 not found ({where}): {MLIR_OPT_INSTALL}"
    if running_in_ci(os.environ):
        pytest.fail(message + "; CI is set, so this is a failure, not a skip")
    pytest.skip(message)
