"""The live status of ``loomfuzz fuzz`` (issue 12) on a real terminal: tmux.

A real campaign runs in a tmux pane; the screen is read with ``capture-pane``
while it runs.  On the terminal there is one status line, rewritten in place
(its figures change, no second copy appears, libFuzzer's progress lines are
gone: they are in the campaign's log).  Piped, the same campaign prints plain lines
(tests/test_campaign_terminal.py).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness
from harness.fuzzing.campaign_series import Snapshot
from harness.fuzzing.status import StatusDisplay, format_status, is_progress_line

REPO = Path(harness.__file__).resolve().parent.parent
STATUS = re.compile(r"^\[\s*\d+[smh][\dms]*\]\s+([\d,]+) exec\s+[\d,]+/s\s+corpus ([\d,]+)\s+(?:grammar [\d.]+\s+)?findings 0"
                    r"\s+left \d+s$")


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def test_status_is_refreshed_in_place_under_tmux(fake_loom_opt, tmp_path):
    if shutil.which("tmux") is None:
        pytest.fail("tmux not found: apt-get install -y tmux (.ci/setup does)")
    script = tmp_path / "run.sh"
    command = [sys.executable, "-m", "harness.cli", "fuzz", "--loom-opt", fake_loom_opt,
               "--pass-args=--plant=none", "--time", "5", "--seed", "3", "--stats-interval", "0.5",
               "--corpus", str(tmp_path / "corpus"), "--artifacts", str(tmp_path / "artifacts")]
    script.write_text(
        f"cd {shlex.quote(str(tmp_path))}\n"
        f"export PYTHONPATH={shlex.quote(str(REPO))}\n"
        "unset COLUMNS\n"  # the pane's own width (200), not one the test's environment exports
        f"{shlex.join(command)}\n"
        "echo EXIT=$?\n"
        "sleep 120\n"
    )
    socket = f"loomfuzz-test-{os.getpid()}"
    tmux(socket, "new-session", "-d", "-s", "fuzz", "-x", "200", "-y", "60", f"bash {shlex.quote(str(script))}")
    screens = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            screen = tmux(socket, "capture-pane", "-p", "-t", "fuzz")
            screens.append(screen)
            if "EXIT=" in screen:
                break
            time.sleep(0.25)
        else:
            pytest.fail("the campaign did not end within 120 s:\n" + screens[-1])
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)
    final = screens[-1]
    assert "EXIT=0" in final, final
    seen = []
    for screen in screens:
        lines = screen.splitlines()
        status = [line.rstrip() for line in lines if STATUS.match(line.rstrip())]
        assert len(status) <= 1, screen  # one status line, rewritten, never a second one
        assert not any(is_progress_line(line) for line in lines), screen  # libFuzzer's lines replaced
        if status:
            seen.append(status[0])
    executions = [int(STATUS.match(s).group(1).replace(",", "")) for s in seen]
    assert len(set(seen)) >= 4, seen  # the line changed in place several times
    assert executions == sorted(executions) and executions[-1] > executions[0]
    # the last status stays on screen above the summary, with the summary's count
    assert re.search(r"executions:\s+([\d]+)", final).group(1) == str(executions[-1])
    assert final.index(seen[-1]) < final.index("loomfuzz fuzz: summary")


class _Terminal:
    """A stream that says it is a terminal (to check what StatusDisplay writes)."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_display_prints_messages_above_the_status(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # the terminal's width, as a shell exports it
    terminal = _Terminal()
    display = StatusDisplay(terminal)
    snap = Snapshot(elapsed_s=65.2, executions=12345, exec_per_s=190.4, corpus=61, edges=311,
                    grammar_coverage=None, findings={"crash": 2}, workers=2)
    assert format_status(snap) == "[  1m05s]  12,345 exec  190/s  corpus 61  edges 311  workers 2  findings 2 (crash 2)"
    # the folder's findings (an earlier run's too) and the time left of --time
    assert format_status(snap, {"crash": 5, "timeout": 1}, 54.9) == (
        "[  1m05s]  12,345 exec  190/s  corpus 61  edges 311  workers 2  findings 6 (crash 5, timeout 1)  left 54s")
    display.update(snap)
    display.message("loomfuzz fuzz: found crash-1: crash: SIGSEGV")
    display.close()
    status = format_status(snap)
    assert terminal.text == f"\r\x1b[K{status}\r\x1b[Kloomfuzz fuzz: found crash-1: crash: SIGSEGV\n{status}\n"
    piped = _Terminal()
    piped.isatty = lambda: False  # type: ignore[method-assign]
    display = StatusDisplay(piped, plain_every=3600)
    display.update(snap)
    display.message("loomfuzz fuzz: found crash-1: crash: SIGSEGV")
    display.update(snap)  # within plain_every of the last line: not printed
    final = Snapshot(**{**snap.__dict__, "final": True})
    display.update(final)  # the last one is
    display.close()
    assert piped.text == (f"loomfuzz fuzz: status: {status}\nloomfuzz fuzz: found crash-1: crash: SIGSEGV\n"
                          f"loomfuzz fuzz: status: {status}\n")
    # a narrower terminal: the status line is cut to fit it (one column to spare)
    monkeypatch.setenv("COLUMNS", "40")
    narrow = _Terminal()
    display = StatusDisplay(narrow)
    display.update(snap)
    display.close()
    assert narrow.text == f"\r\x1b[K{status[:39]}\n"
