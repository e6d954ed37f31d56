"""``loomfuzz plot``: campaigns' ``stats.csv`` series as PNG charts and an ``index.html``.

Each input is a campaign: an artifacts folder (its ``stats.csv``) or a CSV
file, optionally named ``LABEL=PATH``.  Every chart overlays all campaigns
(one colour each) against elapsed time, so two runs, e.g. with and without
``--coverage afl``, compare at a glance:

    executions.png   executions so far
    exec-rate.png    executions per second
    corpus.png       corpus files
    edges.png        AFL++ edges seen (only when some campaign has them)
    grammar.png      grammar coverage (only when some campaign has it)
    findings.png     findings so far

``index.html`` shows them under a table of each campaign's last row
(duration, executions, mean exec/s, corpus, edges, findings by kind, whether
the campaign ended or was cut short).  The page is self-contained apart from
the PNG files beside it.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.fuzzing.series import FINDING_COLUMNS, STATS_FILE, SeriesError, read_series
from harness.plots import Curve, line_chart

__all__ = ["CHARTS", "Campaign", "load_campaign", "write_plots"]


@dataclass(frozen=True)
class Chart:
    file: str
    column: str
    title: str
    ylabel: str
    optional: bool = False  # drawn only when some campaign has values
    step: bool = False


CHARTS = (
    Chart("executions.png", "executions", "Executions", "executions"),
    Chart("exec-rate.png", "exec_per_s", "Executions per second", "exec/s"),
    Chart("corpus.png", "corpus", "Corpus size", "files"),
    Chart("edges.png", "edges", "AFL++ edges seen", "edges", optional=True, step=True),
    Chart("grammar.png", "grammar_coverage", "Grammar coverage", "coverage", optional=True),
    Chart("findings.png", "findings", "Findings", "findings", step=True),
)


@dataclass(frozen=True)
class Campaign:
    label: str
    path: Path  # the CSV file
    rows: list[dict]

    @property
    def complete(self) -> bool:
        """Whether the campaign wrote its last row (it was not killed)."""
        return bool(self.rows) and self.rows[-1].get("final") == 1


def load_campaign(argument: str) -> Campaign:
    """A campaign from ``PATH`` or ``LABEL=PATH`` (a folder holding stats.csv, or a CSV file)."""
    label, path_text = None, argument
    if "=" in argument and not os.path.exists(argument):
        label, path_text = argument.split("=", 1)
    path = Path(path_text)
    if path.is_dir():
        path = path / STATS_FILE
        if not path.exists():
            raise SeriesError(f"{path_text}: no {STATS_FILE} in this folder (not a loomfuzz fuzz artifacts folder?)")
    rows = read_series(path)
    if not rows:
        raise SeriesError(f"{path}: no rows yet")
    if "worker" in rows[0]:
        raise SeriesError(f"{path}: the workers' own rows, interleaved; plot the merged {STATS_FILE} beside it")
    if label is None:
        label = path_text.rstrip("/")
        if label.endswith(f"/{STATS_FILE}"):
            label = label[: -len(STATS_FILE) - 1]
    return Campaign(label or str(path), path, rows)


def _time_unit(campaigns: Sequence[Campaign]) -> tuple[str, float]:
    longest = max(c.rows[-1]["elapsed_s"] or 0 for c in campaigns)
    if longest < 180:
        return "seconds", 1.0
    if longest < 3 * 3600:
        return "minutes", 60.0
    return "hours", 3600.0


def _findings_by_kind(row: dict) -> str:
    kinds = [(c[len("findings_"):], row.get(c)) for c in FINDING_COLUMNS]
    text = ", ".join(f"{kind}: {n}" for kind, n in kinds if n)
    return text or "none"


def _summary_rows(campaigns: Sequence[Campaign]) -> list[list[str]]:
    rows = []
    for c in campaigns:
        last = c.rows[-1]
        elapsed = last["elapsed_s"] or 0
        done = last["executions"]
        mean = f"{done / elapsed:,.1f}" if done is not None and elapsed > 0 else "-"
        rows.append([
            c.label,
            f"{elapsed:,.1f} s",
            f"{done:,}" if done is not None else "-",
            mean,
            f"{last['corpus']:,}" if last.get("corpus") is not None else "-",
            f"{last['edges']:,}" if last.get("edges") is not None else "-",
            f"{last['grammar_coverage']:g}" if last.get("grammar_coverage") is not None else "-",
            f"{last['findings'] or 0} ({_findings_by_kind(last)})",
            str(len(c.rows)),
            "ended" if c.complete else "cut short (no last row)",
        ])
    return rows


SUMMARY_HEADER = ["campaign", "duration", "executions", "mean exec/s", "corpus", "edges",
                  "grammar coverage", "findings", "rows", "end"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f0f0f0; }
figure { display: inline-block; margin: 0 1em 1em 0; }
figcaption { color: #555; font-size: 0.9em; }
"""


def _index_html(title: str, campaigns: Sequence[Campaign], drawn: Sequence[Chart],
                skipped: Sequence[Chart]) -> str:
    e = html.escape
    table = ["<table id=\"summary\">", "<tr>" + "".join(f"<th>{e(h)}</th>" for h in SUMMARY_HEADER) + "</tr>"]
    for row in _summary_rows(campaigns):
        table.append("<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>")
    table.append("</table>")
    figures = [
        f'<figure><img src="{e(chart.file)}" alt="{e(chart.title)}" width="800" height="450">'
        f"<figcaption>{e(chart.title)}</figcaption></figure>"
        for chart in drawn
    ]
    notes = [f"<p>No {e(chart.title.lower())} in these campaigns"
             + (" (run with --coverage afl)" if chart.column == "edges" else "") + ".</p>"
             for chart in skipped]
    sources = "".join(f"<li>{e(c.label)}: <code>{e(str(c.path))}</code></li>" for c in campaigns)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>{e(title)}</h1>\n" + "\n".join(table) + "\n" + "\n".join(figures) + "\n"
        + "\n".join(notes) + f"\n<h2>Sources</h2><ul>{sources}</ul>\n</body></html>\n"
    )


def write_plots(campaigns: Sequence[Campaign], out: Path, *, title: str = "loom-fuzz campaigns") -> list[Path]:
    """Draw every chart into ``out`` and write ``out/index.html``; return the files written."""
    out.mkdir(parents=True, exist_ok=True)
    unit, scale = _time_unit(campaigns)
    written, drawn, skipped = [], [], []
    for chart in CHARTS:
        has_values = any(r.get(chart.column) is not None for c in campaigns for r in c.rows)
        if chart.optional and not has_values:
            skipped.append(chart)
            continue
        curves = [
            Curve(c.label, [r["elapsed_s"] / scale for r in c.rows], [r.get(chart.column) for r in c.rows],
                  step=chart.step)
            for c in campaigns
        ]
        line_chart(out / chart.file, chart.title, f"elapsed ({unit})", chart.ylabel, curves)
        written.append(out / chart.file)
        drawn.append(chart)
    index = out / "index.html"
    tmp = out / ".index.html.tmp"
    tmp.write_text(_index_html(title, campaigns, drawn, skipped), encoding="utf-8")
    os.replace(tmp, index)
    written.append(index)
    return written
