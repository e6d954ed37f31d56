"""triage's ``report.html`` (issue 12), opened in a real headless Chromium.

Two real ``loomfuzz triage`` runs of the planted-bug fake loom-opt (the
second one brings one new bucket), then Chromium (Debian's ``chromium``,
installed by .ci/setup) renders the page: a screenshot, the rendered DOM
(title, buckets, the sorted order, the chart's bars) and its console.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from harness.triage.report_html import highlight_mlir
from shapes import Body, Nesting, Program, Thread, make_site
from shapes import encode_program as encode
from shapes import render_program as render
from triage_inputs import MINIMAL

PASS_ARGS = "--plant=assert,segv,fatal --loom-lower-for-to-graph"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0",
                  "--host-resolver-rules=MAP * ~NOTFOUND"]  # a fetch would fail and log an error
_CONSOLE = re.compile(r":CONSOLE[:(]")


def chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium not found: apt-get install -y --no-install-recommends chromium (.ci/setup does)")
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, text=True, timeout=120)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if _CONSOLE.search(line)]


def triage(fake: str, db: Path, out: Path, *inputs: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "triage", "--loom-opt", fake, f"--pass-args={PASS_ARGS}",
         "--db", str(db), "--out", str(out), "--jobs", "2", "--no-progress", *map(str, inputs)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def report(tmp_path_factory, fake_loom_opt) -> Path:
    root = tmp_path_factory.mktemp("html")
    first, second = root / "night-1", root / "night-2"
    first.mkdir()
    second.mkdir()
    bigger_assert = Program((Thread(True, (make_site(Nesting.NONE, Body.ARITH), make_site(Nesting.FOR, Body.FREEZE))),))
    for k, program in enumerate((MINIMAL["assert"], bigger_assert, MINIMAL["segv"])):
        (first / f"crash-{k}").write_bytes(encode(program))
    (second / "fatal.mlir").write_text(render(MINIMAL["fatal"]), encoding="utf-8")
    db, out = root / "triage.db", root / "triage"
    triage(fake_loom_opt, db, out, first)
    triage(fake_loom_opt, db, out, first, second)  # run 2: the fatal bucket is new
    return out / "report.html"


def test_report_html_in_headless_chromium(report, tmp_path):
    text = report.read_text()
    # self-contained: nothing refers to another resource (the browser below has no network either)
    assert not re.search(r"""(?:src|href)=["']?(?:https?:|//)|url\((?!#)|@import|<link""", text)
    assert "<script src" not in text

    url = report.as_uri() + "#sort=-members"
    dom = chromium(url, tmp_path / "profile-dom", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    assert console_lines(dom.stderr) == [], console_lines(dom.stderr)
    assert re.search(r"<title>loom-fuzz triage: 3 buckets</title>", page)
    assert 'data-ready="yes"' in page  # the page's script ran to its end
    assert re.search(r'<ul id="page-errors"></ul>', page)  # and caught no error
    rows = re.findall(r'<tr class="bucket" id="row-(\d+)">(.*?)</tr>', page, re.S)
    assert len(rows) == 3
    members = [int(re.findall(r'<td data-sort="([^"]*)"', cells)[4]) for _, cells in rows]
    assert members == sorted(members, reverse=True) and members[0] == 2  # sorted by #sort=-members
    assert 'data-key="members" data-type="number" tabindex="0" aria-sort="descending"' in page
    assert re.search(r'<figure id="new-buckets" data-runs="2" data-new="2,1"><svg', page)
    assert page.count('class="code program"') == 3 and page.count('class="code lit"') == 3
    assert '<span class="directive">RUN:</span>' in page and '<span class="op">scf.for</span>' in page

    shot = tmp_path / "report.png"
    screenshot = chromium(report.as_uri(), tmp_path / "profile-shot", f"--screenshot={shot}",
                          "--window-size=1280,1600", "--hide-scrollbars")
    assert screenshot.returncode == 0 and shot.is_file(), screenshot.stderr[-2000:]
    assert console_lines(screenshot.stderr) == []
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1600)
    colours = image.getcolors(1280 * 1600)
    assert len(colours) > 50  # text, table, chart: not a blank page


def test_console_scan_sees_errors(tmp_path):
    """The check above can fail: the same scan catches a page that logs an error."""
    control = tmp_path / "control.html"
    control.write_text("<!DOCTYPE html><title>c</title><script>console.error('control-42'); nope();</script>")
    proc = chromium(control.as_uri(), tmp_path / "profile", "--dump-dom")
    lines = console_lines(proc.stderr)
    assert any("control-42" in line for line in lines) and any("nope is not defined" in line for line in lines)


def test_highlighting_escapes_and_marks_tokens():
    html = highlight_mlir('// RUN: not --crash loom-opt %s\n%r0 = arith.constant 4 : i32 // <x & y>\n'
                          'func.call @thread_0() {graph_name = "g<1>"}\nmemref.store %v, %m[%i] : memref<4xi32>')
    assert '<span class="directive">RUN:</span>' in html
    assert '<span class="ssa">%r0</span> = <span class="op">arith.constant</span>' in html
    assert '<span class="type">i32</span>' in html and '<span class="symbol">@thread_0</span>' in html
    assert '<span class="comment">// &lt;x &amp; y&gt;</span>' in html
    assert '<span class="string">&quot;g&lt;1&gt;&quot;</span>' in html
    assert '<span class="op">memref.store</span>' in html and '<span class="type">memref</span>&lt;4xi32&gt;' in html
    assert "<x" not in html
