"""``loomfuzz plot`` and ``loomfuzz generate --plot`` (issue 12): real PNG files, looked at pixel by pixel."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PIL import Image

from harness.fuzzing.series import STATS_FILE, read_series

from tests.test_coverage import _compile
from tests.test_fuzz import loomfuzz
from tests.conftest import FAKE_SOURCE

#: matplotlib's first two colours: the first and the second campaign
BLUE, ORANGE = (0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)


def pixels_of(path: Path, colour: tuple[int, int, int], tolerance: int = 12) -> int:
    image = Image.open(path).convert("RGB")
    return sum(
        n for n, (r, g, b) in image.getcolors(image.width * image.height)
        if abs(r - colour[0]) <= tolerance and abs(g - colour[1]) <= tolerance and abs(b - colour[2]) <= tolerance
    )


def non_white_fraction(path: Path) -> float:
    image = Image.open(path).convert("L")
    dark = sum(n for n, level in image.getcolors(256) if level < 250)
    return dark / (image.width * image.height)


@pytest.fixture(scope="module")
def two_campaigns(tmp_path_factory, fake_loom_opt):
    """The same fake loom-opt fuzzed twice: built with afl-clang-fast under --coverage afl, and plain."""
    fake_afl = _compile(tmp_path_factory, "afl-clang-fast", FAKE_SOURCE, "fake-loom-opt-afl")
    root = tmp_path_factory.mktemp("campaigns")
    runs = {}
    for name, binary, extra in (("afl", fake_afl, ["--coverage", "afl"]), ("plain", fake_loom_opt, [])):
        artifacts = root / name / "artifacts"
        result = loomfuzz("fuzz", "--loom-opt", binary, "--pass-args=--plant=none", *extra, "--time", 3,
                          "--seed", 4, "--stats-interval", 0.4, "--corpus", root / name / "corpus",
                          "--artifacts", artifacts, cwd=root, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        runs[name] = artifacts
    return root, runs


def test_plot_two_campaigns(two_campaigns, tmp_path):
    root, runs = two_campaigns
    afl_rows = read_series(runs["afl"] / STATS_FILE)
    assert afl_rows[-1]["edges"] > 0  # the bridge's edges reached the series
    assert all(r["edges"] is None for r in read_series(runs["plain"] / STATS_FILE))
    out = tmp_path / "plots"
    result = loomfuzz("plot", f"afl={runs['afl']}", runs["plain"] / STATS_FILE, "-o", out, cwd=root)
    assert result.returncode == 0, result.stderr
    assert "6 charts of 2 campaign(s)" in result.stdout
    names = ["executions.png", "exec-rate.png", "corpus.png", "edges.png", "findings.png", "grammar.png"]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, "index.html"])
    for name in names:
        png = out / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert Image.open(png).size == (800, 450), name
        assert non_white_fraction(png) > 0.02, name  # axes, labels and lines, not a blank canvas
    for name in ("executions.png", "exec-rate.png", "corpus.png"):  # both campaigns drawn, overlaid
        assert pixels_of(out / name, BLUE) > 200 and pixels_of(out / name, ORANGE) > 200, name
    assert pixels_of(out / "edges.png", BLUE) > 200 and pixels_of(out / "edges.png", ORANGE) == 0
    index = (out / "index.html").read_text()
    for name in names:
        assert f'<img src="{name}"' in index
    assert "<td>afl</td>" in index and f"<td>{runs['plain']}</td>" in index
    plain_last = read_series(runs["plain"] / STATS_FILE)[-1]
    assert f"<td>{plain_last['executions']:,}</td>" in index and index.count("<td>ended</td>") == 2


def test_plot_errors_are_one_line(two_campaigns, tmp_path):
    root, runs = two_campaigns
    bad = tmp_path / "bad.csv"
    bad.write_text((runs["plain"] / STATS_FILE).read_text().replace("\n", "\n1,2\n", 1))
    for args, message in (
        ([tmp_path / "nowhere"], r"nowhere: cannot read: No such file"),
        ([tmp_path], r": no stats\.csv in this folder"),
        ([bad], r"bad\.csv:2: 2 fields, the header has \d+"),
        ([runs["plain"], runs["plain"]], r"both labelled"),
        ([runs["plain"] / "stats-workers.csv"], r"stats-workers\.csv: the workers' own rows"),
    ):
        result = loomfuzz("plot", *args, "-o", tmp_path / "out", cwd=root)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("loomfuzz plot: error: "), result.stderr
        assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "out").exists()


def test_generate_plot_of_observed_vs_expected(tmp_path):
    png = tmp_path / "choices.png"
    result = loomfuzz("generate", "-n", 2000, "--seed", 3, "--stats", "--plot", png, "-o", tmp_path / "c",
                      cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "<region>" in result.stdout  # the table is still printed
    image = Image.open(png)
    rows = len(re.findall(r"^\s*(?:<[\w-]+>)?\s+\S+\s+\d\.\d{4}\s+\d\.\d{4}\s+\d+", result.stdout, re.M))
    assert rows == 17
    assert image.size == (800, int((0.32 * rows + 1.2) * 100))
    # one colour per weighted nonterminal (six in the default grammar): matplotlib's first six, bars at alpha 0.75
    blended = [tuple(round(255 - 0.75 * (255 - c)) for c in colour)
               for colour in (BLUE, ORANGE, (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28), (0x94, 0x67, 0xBD),
                              (0x8C, 0x56, 0x4B))]
    assert all(pixels_of(png, colour, tolerance=6) > 500 for colour in blended)
    bad = loomfuzz("generate", "-n", 10, "--plot", tmp_path / "no-such-dir" / "x" / "f.png", "-o", "-",
                   cwd=tmp_path)
    assert bad.returncode == 0 and (tmp_path / "no-such-dir" / "x" / "f.png").is_file()  # folders made
