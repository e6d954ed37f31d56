"""The shared fixtures' behaviour where a tool is missing (issue 26, item 6): the
``mlir_opt`` fixture skips, naming the install command, where mlir-opt-22 is
absent, and fails instead in CI (``$CI`` set), where .ci/setup installs it.

Each case is a real pytest run in a subprocess of a test that asks for the fixture.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_with_fixture(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text("from tests.conftest import mlir_opt  # noqa: F401\n")
    (tmp_path / "test_asks.py").write_text("def test_asks(mlir_opt):\n    print('GOT', mlir_opt)\n")
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "MLIR_OPT")}
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), environ.get("PYTHONPATH", "")])
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "pytest", "-rsf", "-s", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120)


def test_missing_mlir_opt_skips_with_the_install_command(tmp_path):
    result = run_with_fixture(tmp_path, MLIR_OPT=str(tmp_path / "no-mlir-opt"))
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout and "GOT" not in result.stdout
    assert "apt-get install -y --no-install-recommends mlir-22-tools" in result.stdout


@pytest.mark.parametrize("ci", ["true", "1"])
def test_missing_mlir_opt_fails_in_ci(tmp_path, ci):
    result = run_with_fixture(tmp_path, MLIR_OPT=str(tmp_path / "no-mlir-opt"), CI=ci)
    assert result.returncode == 1, result.stdout
    assert "1 error" in result.stdout and "mlir-22-tools" in result.stdout


def test_present_mlir_opt_is_given(tmp_path, mlir_opt):
    result = run_with_fixture(tmp_path, MLIR_OPT=mlir_opt, CI="true")
    assert result.returncode == 0 and f"GOT {mlir_opt}" in result.stdout, result.stdout


def test_ci_false_is_not_ci(tmp_path):
    result = run_with_fixture(tmp_path, MLIR_OPT=str(tmp_path / "no-mlir-opt"), CI="false")
    assert "1 skipped" in result.stdout, result.stdout
