"""What a campaign shows (issue 46, item 4): one status line on a terminal (tmux), a plain line
every few seconds when piped, libFuzzer's and the workers' chatter in the log file named at the
start, each reason of finding printed once, the summary's counts equal to what the folder holds
after a resume, and a stop that names the command which resumes the campaign.

Real campaigns of the planted-bug fake loom-opt; the folder is read by the test itself (its
``crash-*.json``), not through the code under test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import harness
from harness.contract import load_grammar
from harness.fuzzing.campaign_summary import corpus_grammar_coverage
from harness.fuzzing.corpus import seed_corpus
from harness.fuzzing.options import FuzzOptions
from harness.fuzzing.status import PLAIN_EVERY, is_progress_line
from tests.test_stop import MARK, marked

REPO = Path(harness.__file__).resolve().parent.parent
LOOMFUZZ = [sys.executable, "-m", "harness.cli"]
STATUS = re.compile(r"^\[\s*(\d+)s\]\s+([\d,]+) exec\s+[\d,]+/s\s+corpus ([\d,]+)\s+.*findings (\d+)(?: \(([^)]*)\))?"
                    r"\s+left (\d+)s$")
PLAIN = re.compile(r"^loomfuzz fuzz: status: \[\s*(\d+)s\]")
#: what libFuzzer and the workers print, which belongs in the log, never on the terminal
CHATTER = re.compile(r"^(?:INFO:|WARNING:|==\d+==|Finding:|Traceback|MS: |#\d+)|ERROR: libFuzzer|loom-fuzz summary:")


def folder_findings(artifacts: Path) -> dict[str, dict]:
    """The folder's findings as the test reads them: crash-<sha1>.json name -> record."""
    return {p.name: json.loads(p.read_text()) for p in sorted(artifacts.glob("crash-*.json"))}


def log_named(output: str) -> Path:
    (line,) = [line for line in output.splitlines() if "libFuzzer's and the workers' output: " in line]
    return Path(line.rsplit(": ", 1)[1])


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def test_a_terminal_campaign_is_one_status_line_and_ctrl_c_names_the_resume_command(fake_loom_opt, tmp_path):
    if shutil.which("tmux") is None:
        pytest.fail("tmux not found: apt-get install -y tmux (.ci/setup does)")
    mark = uuid.uuid4().hex
    argv = ["fuzz", "--loom-opt", fake_loom_opt, "--pass-args=--plant=assert", "--jobs", "2", "--time", "20",
            "--seed", "3", "--stats-interval", "0.5", "--corpus", "corpus", "--artifacts", "artifacts"]
    script = tmp_path / "run.sh"
    script.write_text(
        f"cd {shlex.quote(str(tmp_path))}\n"
        f"export PYTHONPATH={shlex.quote(str(REPO))}\n"
        "unset COLUMNS\n"
        f"{MARK}={mark} {shlex.join([*LOOMFUZZ, *argv])}\n"  # the campaign's processes alone carry the mark
        "echo EXIT=$?\n"
        "sleep 120\n"
    )
    socket = f"loomfuzz-terminal-{os.getpid()}"
    tmux(socket, "new-session", "-d", "-s", "fuzz", "-x", "400", "-y", "50", f"bash {shlex.quote(str(script))}")
    screens: list[str] = []
    interrupted_at = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            screen = tmux(socket, "capture-pane", "-p", "-J", "-t", "fuzz")  # -J: wrapped lines joined
            screens.append(screen)
            if "EXIT=" in screen:
                break
            statuses = {line.strip() for s in screens for line in s.splitlines() if STATUS.match(line.strip())}
            running = any(STATUS.match(s).group(2) != "0" and STATUS.match(s).group(4) != "0" for s in statuses)
            if interrupted_at is None and len(statuses) >= 5 and running:  # it runs, it has found
                tmux(socket, "send-keys", "-t", "fuzz", "C-c")  # the terminal's Ctrl-C: SIGINT to its group
                interrupted_at = len(screens)
            time.sleep(0.25)
        else:
            pytest.fail("the campaign did not end within 90 s:\n" + screens[-1])
        final = screens[-1]
        assert interrupted_at is not None, final  # it was still running when Ctrl-C came
        # the whole campaign stopped: nothing with its marker is left
        left = marked(mark)
        for _ in range(100):
            if not left:
                break
            time.sleep(0.1)
            left = marked(mark)
        assert left == [], left
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)

    seen = []
    for screen in screens:
        lines = [line.rstrip() for line in screen.splitlines() if line.strip()]
        assert len(lines) < 15, screen  # a short screen, whatever the campaign does
        assert not [line for line in lines if CHATTER.search(line) or is_progress_line(line)], screen
        status = [line for line in lines if STATUS.match(line)]
        assert len(status) <= 1, screen  # one status line, rewritten in place
        seen += status
    assert len(set(seen)) >= 5, seen  # it changed in place
    figures = [STATUS.match(line).groups() for line in seen]
    executions = [int(f[1].replace(",", "")) for f in figures]
    time_left = [int(f[5]) for f in figures]
    assert executions == sorted(executions) and executions[-1] > executions[0]
    assert time_left == sorted(time_left, reverse=True) and time_left[0] >= 15  # a countdown of --time 20

    artifacts = tmp_path / "artifacts"
    findings = folder_findings(artifacts)
    final_lines = [line.rstrip() for line in final.splitlines() if line.strip()]
    assert "EXIT=130" in final_lines, final  # 128 + SIGINT
    assert re.search(r"^  stopped:     by SIGINT \(Ctrl-C\) after \d+ s$", final, re.M), final
    resume = f"  resume:      the same command continues it (in {tmp_path}): {shlex.join([*LOOMFUZZ, *argv])}"
    assert resume in final_lines, final
    # the findings by kind, on the last status and in the summary, are the folder's
    assert findings and STATUS.match(seen[-1]).group(4) == str(len(findings)), (seen[-1], len(findings))
    assert f"  findings:    {len(findings)} (crash: {len(findings)}) in {artifacts}:" in final, final
    # one reason planted: printed once, as the first finding found
    (found,) = [line for line in final_lines if line.startswith("loomfuzz fuzz: found ")]
    name = found.split()[3].rstrip(":")
    assert f"{name}.json" in findings and "freeze under loop" in found
    log = log_named(final)
    assert log == artifacts / "fuzz.log" and "-fork=2" in log.read_text()  # the chatter went there


def test_a_piped_campaign_prints_a_line_every_few_seconds_and_counts_the_folder_after_a_resume(
        fake_loom_opt, tmp_path):
    artifacts = tmp_path / "artifacts"

    def campaign(seconds: int, seed: int) -> subprocess.CompletedProcess:
        argv = ["fuzz", "--loom-opt", fake_loom_opt, "--jobs", "2", "--time", str(seconds), "--seed", str(seed),
                "--stats-interval", "0.5", "--corpus", "corpus", "--artifacts", "artifacts"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOMFUZZ_") and k != "LOOM_OPT"}
        done = subprocess.run([*LOOMFUZZ, *argv], capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=120)
        assert done.returncode == 1, done.stdout + done.stderr[-3000:]  # findings
        # nothing of libFuzzer's or the workers' on stderr: only loomfuzz's own lines
        assert all(line.startswith("loomfuzz fuzz: ") for line in done.stderr.splitlines()), done.stderr
        assert "\r" not in done.stderr and "\x1b[" not in done.stderr
        # a plain status line every few seconds (and one at the end), never one per sample
        elapsed = [int(PLAIN.match(line).group(1)) for line in done.stderr.splitlines() if PLAIN.match(line)]
        assert len(elapsed) >= 2, done.stderr
        assert all(b - a >= PLAIN_EVERY - 1 for a, b in zip(elapsed[:-2], elapsed[1:-1])), elapsed
        # the chatter is in the log named at the start
        log = log_named(done.stderr)
        assert log == artifacts / "fuzz.log"
        assert done.stderr.splitlines().index(next(l for l in done.stderr.splitlines() if str(log) in l)) <= 1
        return done

    first = campaign(8, 1)
    after_first = folder_findings(artifacts)
    text = (artifacts / "fuzz.log").read_text()
    assert "-fork=2" in text and "INFO: Seed: 1" in text
    # each reason printed once, with a finding of the folder that has it
    found = [line for line in first.stderr.splitlines() if line.startswith("loomfuzz fuzz: found ")]
    reasons = [line.split(": ", 2)[2] for line in found]
    assert found and len(set(reasons)) == len(reasons), found
    for line in found:
        name = line.split()[3].rstrip(":")
        assert after_first[f"{name}.json"]["why"] == line.split(": ", 2)[2]
    assert set(reasons) <= {record["why"] for record in after_first.values()}
    assert f"  findings:    {len(after_first)} (crash: {len(after_first)}) in {artifacts}: " \
           f"{len(after_first)} new in this run\n" in first.stdout, first.stdout

    second = campaign(6, 2)
    after = folder_findings(artifacts)
    new = len(set(after) - set(after_first))
    # the summary's counts are the folder's: all of it, and what this run added
    summary = re.search(r"^  findings:    (\d+) \(crash: (\d+)\) in .*: (\d+|none) new in this run, (\d+) from "
                        r"earlier runs", second.stdout, re.M)
    assert summary, second.stdout
    assert int(summary.group(1)) == int(summary.group(2)) == len(after)
    assert summary.group(3) == (str(new) if new else "none") and int(summary.group(4)) == len(after_first)
    listed = sum(int(n) for n in re.findall(r"^ +(\d+) x ", second.stdout, re.M))
    assert listed == len(after)  # by reason, every finding of the folder
    last = [line for line in second.stderr.splitlines() if PLAIN.match(line)][-1]
    assert f"findings {len(after)} (crash {len(after)})" in last, last  # the status line too
    # a reason printed by the first run is not printed again
    again = {line.split(": ", 2)[2] for line in second.stderr.splitlines() if line.startswith("loomfuzz fuzz: found ")}
    assert not again & set(reasons)
    assert (artifacts / "fuzz.log").read_text().count("==== loomfuzz fuzz ") == 2  # appended, one header a run


def test_a_failing_fuzz_target_shows_its_last_lines_not_all_of_them(fake_loom_opt, tmp_path):
    """libFuzzer's RSS limit below the Python process's own size: the harness itself runs out of
    memory (an oom- file without a sidecar), which the terminal explains with the log's last lines."""
    done = subprocess.run([*LOOMFUZZ, "fuzz", "--loom-opt", fake_loom_opt, "--pass-args=--plant=none", "--time", "20",
                           "--corpus", "corpus", "--artifacts", "artifacts", "--", "-rss_limit_mb=30"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    tail = [line for line in lines if line.startswith("  | ")]
    assert any("ERROR: libFuzzer: out-of-memory" in line for line in tail), done.stderr
    assert 0 < len(tail) <= 20 and not any(is_progress_line(line[4:]) for line in tail)
    assert not [line for line in lines if not line.startswith(("loomfuzz fuzz: ", "  | "))], done.stderr
    assert lines[-1].endswith(f"all of its output in {tmp_path / 'artifacts' / 'fuzz.log'})")
    assert "harness errors: 1 crash file(s) without a sidecar" in done.stdout and "resume:" not in done.stdout


def test_a_break_campaign_summary_keeps_its_grammar_coverage(tmp_path):
    """--profile break --break P5 (issue 44): the summary's corpus coverage is the campaign's grammar's."""
    corpus = tmp_path / "corpus"
    seed_corpus(corpus, load_grammar(None, "break:P5"))
    line = corpus_grammar_coverage(FuzzOptions(profile="break:P5", corpus=corpus))
    assert line is not None and re.fullmatch(r"grammar coverage: k=1 (\d+)/\1, k=2 (\d+)/\2", line), line
