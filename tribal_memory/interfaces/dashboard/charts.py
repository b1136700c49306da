"""Server-side SVG charts: plain geometry computed here, drawn by the templates.

Each chart is a frozen dataclass of numbers and short labels; the template
turns it into ``<svg>`` markup with autoescaping on, so no chart needs
JavaScript or a chart library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 640
"""Width of every chart's drawing area, in SVG user units (px)."""
HEIGHT = 200
"""Height of a line chart's drawing area, in px."""
PAD = 36
"""Margin around the drawing area for axis labels, in px."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a line chart: ``points`` is the SVG ``points`` attribute ("x,y x,y ...")."""

    name: str
    css_class: str
    points: str
    dots: tuple[tuple[float, float, str], ...]
    """(x, y, value label) per data point."""


@dataclass(frozen=True, slots=True)
class LineChart:
    """Rates in [0, 1] over periods; empty ``series`` when there is nothing to draw."""

    title: str
    width: int
    height: int
    pad: int
    series: tuple[Series, ...]
    x_labels: tuple[tuple[float, str], ...]
    y_labels: tuple[tuple[float, str], ...]


@dataclass(frozen=True, slots=True)
class Bar:
    """One horizontal bar: ``length`` in px, ``label`` and the formatted ``value``."""

    label: str
    value: str
    length: float
    y: float


@dataclass(frozen=True, slots=True)
class BarChart:
    """Horizontal bars of shares in [0, 1]."""

    title: str
    width: int
    height: int
    bars: tuple[Bar, ...]


def line_chart(
    title: str, periods: Sequence[str], lines: Sequence[tuple[str, str, Sequence[float]]]
) -> LineChart:
    """A line chart of rates in [0, 1] (clipped) per period.

    Args:
        title: Caption.
        periods: X axis labels, oldest first.
        lines: (name, CSS class, one value per period) per line.

    Returns:
        The chart; with no periods, no series (the template says "no data").
    """
    if not periods:
        return LineChart(title, WIDTH, HEIGHT, PAD, (), (), ())
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    step = inner_w / max(1, len(periods) - 1)

    def x(i: int) -> float:
        return round(PAD + (i * step if len(periods) > 1 else inner_w / 2), 1)

    def y(value: float) -> float:
        return round(PAD + inner_h * (1.0 - min(1.0, max(0.0, value))), 1)

    series = []
    for name, css_class, values in lines:
        dots = tuple((x(i), y(v), f"{v:.0%}") for i, v in enumerate(values))
        points = " ".join(f"{dx},{dy}" for dx, dy, _ in dots)
        series.append(Series(name, css_class, points, dots))
    every = max(1, len(periods) // 8)
    x_labels = tuple((x(i), p) for i, p in enumerate(periods) if i % every == 0)
    y_labels = tuple((y(v), f"{v:.0%}") for v in (0.0, 0.5, 1.0))
    return LineChart(title, WIDTH, HEIGHT, PAD, tuple(series), x_labels, y_labels)


def bar_chart(title: str, items: Sequence[tuple[str, float]]) -> BarChart:
    """Horizontal bars of shares in [0, 1] (clipped), one per (label, value), 28 px apart."""
    label_w = 140
    room = WIDTH - label_w - 60
    bars = tuple(
        Bar(label, f"{value:.0%}", round(room * min(1.0, max(0.0, value)), 1), 10 + 28 * i)
        for i, (label, value) in enumerate(items)
    )
    return BarChart(title, WIDTH, 20 + 28 * len(bars), bars)
