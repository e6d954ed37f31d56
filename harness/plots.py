"""Charts drawn with matplotlib from plain numbers (no knowledge of files or campaigns).

Headless: figures are made with ``matplotlib.figure.Figure`` and the Agg
canvas, never through ``pyplot``, so no display, no global figure state and
no backend selection are involved.  Files are written to a temporary name and
renamed: an interrupted run never leaves half a PNG.

Used by ``loomfuzz plot`` (:func:`line_chart`), ``loomfuzz generate --plot``
(:func:`choice_frequency_chart`) and triage's ``report.html``
(:func:`bar_chart_svg`).
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["ChoiceRow", "Curve", "bar_chart_svg", "choice_frequency_chart", "line_chart"]

#: Pixels of a campaign chart: 800 x 450 (8 x 4.5 inches at 100 dpi).
CHART_SIZE = (8.0, 4.5)
CHART_DPI = 100


@dataclass(frozen=True)
class Curve:
    """One line of a chart; points whose y is None are left out."""

    label: str
    xs: Sequence[float]
    ys: Sequence[Optional[float]]
    step: bool = False  # a count that jumps (findings): drawn as steps


@dataclass(frozen=True)
class ChoiceRow:
    """One alternative of one weighted choice of the grammar."""

    decision: str  # e.g. "C7 nesting"
    alternative: str  # e.g. "for"
    observed: int  # how often it was chosen
    expected: float  # its probability in the grammar


def _figure(size: tuple[float, float], dpi: int):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=dpi)
    FigureCanvasAgg(figure)
    return figure


def _save(figure, path: Path, fmt: str = "png") -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    figure.savefig(tmp, format=fmt, dpi=figure.dpi)
    os.replace(tmp, path)


def line_chart(path: str | os.PathLike, title: str, xlabel: str, ylabel: str, curves: Sequence[Curve],
               *, size: tuple[float, float] = CHART_SIZE, dpi: int = CHART_DPI) -> None:
    """A PNG of ``curves`` overlaid (one colour each, a legend when there are several)."""
    figure = _figure(size, dpi)
    axes = figure.add_subplot()
    drawn = 0
    for curve in curves:
        points = [(x, y) for x, y in zip(curve.xs, curve.ys) if y is not None and x is not None]
        if not points:
            continue
        xs, ys = zip(*points)
        if curve.step:
            axes.step(xs, ys, where="post", label=curve.label, linewidth=1.8)
        else:
            axes.plot(xs, ys, label=curve.label, linewidth=1.8, marker="." if len(xs) < 30 else None)
        drawn += 1
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    if drawn == 0:
        axes.text(0.5, 0.5, "no data", transform=axes.transAxes, ha="center", va="center", color="grey")
    elif len(curves) > 1:
        axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    _save(figure, Path(path))


def choice_frequency_chart(path: str | os.PathLike, rows: Sequence[ChoiceRow], *, title: str = "") -> None:
    """Observed frequency (bar) against the grammar's probability (black tick) of
    every alternative, grouped by decision.  The grey band around each tick is
    where 95% of samples of this size fall (normal approximation of the binomial)."""
    totals: dict[str, int] = {}
    for row in rows:
        totals[row.decision] = totals.get(row.decision, 0) + row.observed
    height = max(3.0, 0.32 * len(rows) + 1.2)
    figure = _figure((8.0, height), CHART_DPI)
    axes = figure.add_subplot()
    labels, positions = [], []
    colours = {}
    palette = [f"C{i}" for i in range(10)]
    for index, row in enumerate(rows):
        y = len(rows) - 1 - index
        n = totals[row.decision]
        observed = row.observed / n if n else 0.0
        colour = colours.setdefault(row.decision, palette[len(colours) % len(palette)])
        axes.barh(y, observed, height=0.7, color=colour, alpha=0.75)
        if n:
            spread = 1.96 * math.sqrt(row.expected * (1 - row.expected) / n)
            axes.fill_betweenx([y - 0.38, y + 0.38], max(0.0, row.expected - spread),
                               min(1.0, row.expected + spread), color="grey", alpha=0.35, linewidth=0)
        axes.vlines(row.expected, y - 0.4, y + 0.4, color="black", linewidth=2)
        labels.append(f"{row.decision}: {row.alternative}")
        positions.append(y)
    axes.set_yticks(positions, labels, fontsize="small")
    axes.set_xlim(0, 1)
    axes.set_xlabel("frequency (bar: observed; black tick: grammar's probability; grey: 95% band)")
    axes.set_title(title or "observed vs expected frequency of every weighted choice")
    axes.grid(True, axis="x", alpha=0.3)
    figure.tight_layout()
    _save(figure, Path(path))


def bar_chart_svg(labels: Sequence[str], values: Sequence[float], *, title: str, xlabel: str,
                  ylabel: str, size: tuple[float, float] = (6.0, 2.8)) -> str:
    """An SVG bar chart as text, to inline in an HTML page (glyphs as paths: no fonts needed)."""
    import matplotlib

    figure = _figure(size, CHART_DPI)
    axes = figure.add_subplot()
    axes.bar(range(len(values)), values, color="C0", width=0.7)
    axes.set_xticks(range(len(labels)), labels)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.grid(True, axis="y", alpha=0.3)
    figure.tight_layout()
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "loom-fuzz"}):
        # no metadata block: no date (the same data gives the same page), no RDF namespaces
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None,
                                                       "Type": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # without the XML prolog and doctype: inline in HTML
