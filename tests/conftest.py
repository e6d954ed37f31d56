"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
FAKE_SOURCE = FIXTURES / "fake_loom_opt.c"


@pytest.fixture(scope="session")
def fake_loom_opt(tmp_path_factory) -> str:
    """Path of the planted-bug test double, compiled with ``cc`` once per session.

    Flags: ``--plant=LIST`` (default: assert, segv, fatal, flaky); see the top
    of tests/fixtures/fake_loom_opt.c.
    """
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.fail("no C compiler (cc) to build tests/fixtures/fake_loom_opt.c")
    out = tmp_path_factory.mktemp("fake") / "fake-loom-opt"
    proc = subprocess.run(
        [cc, "-O1", "-g", "-o", str(out), str(FAKE_SOURCE)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"cc failed to build {FAKE_SOURCE}:\n{proc.stderr}")
    return str(out)


@pytest.fixture(scope="session")
def mlir_opt() -> str:
    """Path of upstream ``mlir-opt-22``; fails (not skips) when it is missing:
    CI installs Debian's mlir-22-tools."""
    path = (
        os.environ.get("MLIR_OPT")
        or shutil.which("mlir-opt-22")
        or ("/usr/lib/llvm-22/bin/mlir-opt" if os.access("/usr/lib/llvm-22/bin/mlir-opt", os.X_OK) else None)
    )
    if not path:
        pytest.fail("mlir-opt-22 not found: apt-get install -y --no-install-recommends mlir-22-tools")
    return path
