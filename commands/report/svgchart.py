"""A small inline-SVG time-series chart: stacked areas, lines, markers, shaded spans.

The report must render offline with scripts disabled, so charts are plain SVG built
here rather than by a plotting library (which would add a heavy dependency for a
handful of shapes). Coordinates are computed in Python; the SVG carries no script.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from itertools import groupby, pairwise
from typing import NamedTuple, TypeVar

T = TypeVar("T")

WIDTH_PX = 960
HEIGHT_PX = 330
MARGIN_LEFT_PX = 70
MARGIN_RIGHT_PX = 36
MARGIN_TOP_PX = 30
MARGIN_BOTTOM_PX = 40
LEGEND_ROW_PX = 16


@dataclass
class Series:
    label: str
    color: str
    points: list[tuple[float, float]]  # (x seconds, y value)


@dataclass
class Marker:
    x: float
    label: str
    color: str
    shape: str = "circle"  # circle | cross | triangle
    row: int = 0
    """Markers sit in rows along the bottom of the plot (0 = lowest)."""


@dataclass
class Span:
    x0: float
    x1: float
    label: str
    color: str = "#f4b400"


@dataclass
class Chart:
    title: str
    x_label_at: list[tuple[float, str]] = field(default_factory=list)
    stacked: list[Series] = field(default_factory=list)
    lines: list[Series] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    y_unit: str = "TPM"
    step: bool = False
    """Series are step functions: a value holds until the next point (exact for
    piecewise-constant quantities such as a windowed sum); otherwise points are joined."""
    legend_extra: list[tuple[str, str, str]] = field(default_factory=list)
    """More legend entries: (label, color, shape) with shape circle | cross | span."""
    x_range: tuple[float, float] | None = None
    """Fixed x extent (else from the data)."""
    heading: str = ""
    """The title drawn visibly above the plot (`title` is the accessible name)."""
    dimension: str = ""
    """The dimension charted, carried as `data-dimension` (empty: none)."""
    t0: str = ""
    """The time at x = 0 (RFC 3339), carried as `data-t0` with the x extent in seconds:
    what a reader of the SVG needs to map a time onto it."""


class _Columns(NamedTuple):
    """A series' points sorted, as two columns."""

    xs: list[float]
    ys: list[float]


def _columns(series: Series) -> _Columns:
    points = sorted(series.points)
    return _Columns([x for x, _ in points], [y for _, y in points])


def _shared_xs(columns: list[_Columns]) -> list[float] | None:
    """The x column every one of `columns` has, if they share one without a repeated x:
    then a stack adds them position by position (the same sums, in the same order, as
    adding them x by x)."""
    if not columns:
        return None
    xs = columns[0].xs
    if any(c.xs != xs for c in columns[1:]):
        return None
    if any(b <= a for a, b in pairwise(xs)):
        return None
    return xs


def _stack_tops(columns: list[_Columns]) -> list[list[float]] | None:
    """Each stacked series' top (its values on those below), on a shared x column."""
    if _shared_xs(columns) is None:
        return None
    tops: list[list[float]] = []
    base = [0.0] * len(columns[0].xs)
    for column in columns:
        base = [b + y for b, y in zip(base, column.ys, strict=True)]
        tops.append(base)
    return tops


def _bounds(chart: Chart) -> tuple[float, float, float]:
    stacked = [_columns(s) for s in chart.stacked]
    lines = [_columns(s) for s in chart.lines]
    return _bounds_of(chart, stacked, lines, _stack_tops(stacked))


def _bounds_of(
    chart: Chart,
    stacked: list[_Columns],
    lines: list[_Columns],
    tops: list[list[float]] | None,
) -> tuple[float, float, float]:
    y_max = 1.0
    if tops is not None:
        totals: list[float] = tops[-1] if tops else []
    else:
        by_x: dict[float, float] = {}
        for column in stacked:
            for x, y in zip(column.xs, column.ys, strict=True):
                by_x[x] = by_x.get(x, 0.0) + y
        totals = list(by_x.values())
    y_max = max([y_max, *totals] + [y for c in lines for y in c.ys])
    if chart.x_range is not None:
        x_min, x_max = chart.x_range
    else:
        xs = [x for c in stacked + lines for x in c.xs]
        xs.extend(m.x for m in chart.markers)
        xs.extend(v for s in chart.spans for v in (s.x0, s.x1))
        x_min, x_max = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_max <= x_min:
        x_max = x_min + 1.0
    return x_min, x_max, _nice_ceiling(y_max * 1.05)


class _Frame:
    """The plot area of a chart and the mapping of data onto it, in pixels."""

    def __init__(
        self, x_min: float, x_max: float, y_max: float, plot_w: float, plot_h: float
    ) -> None:
        self.x_min, self.x_max, self.y_max = x_min, x_max, y_max
        self.plot_w, self.plot_h = plot_w, plot_h
        self.y_text: dict[float, str] = {}
        """Each y as `points` formats it, once per chart."""
        self._x_column: tuple[list[float], list[str]] = ([], [])
        """The last x column formatted, and its texts: a chart's series share their x."""

    def px(self, x: float) -> float:
        return MARGIN_LEFT_PX + (x - self.x_min) / (self.x_max - self.x_min) * self.plot_w

    def py(self, y: float) -> float:
        return MARGIN_TOP_PX + self.plot_h - y / self.y_max * self.plot_h

    def x_texts(self, xs: list[float]) -> list[str]:
        """Each x at a tenth of a pixel (`px`, spelled out: it runs once per point)."""
        known, texts = self._x_column
        if xs == known:
            return texts
        x_min, span, plot_w = self.x_min, self.x_max - self.x_min, self.plot_w
        texts = [f"{MARGIN_LEFT_PX + (x - x_min) / span * plot_w:.1f}" for x in xs]
        self._x_column = (xs, texts)
        return texts

    def y_texts(self, ys: list[float]) -> list[str]:
        """Each y at a tenth of a pixel, each distinct y formatted once per chart."""
        texts = self.y_text
        for y in set(ys).difference(texts):
            texts[y] = f"{self.py(y):.1f}"
        return [texts[y] for y in ys]

    def points(self, xs: list[float], ys: list[float], *, step: bool) -> list[str]:
        """The vertices, at a tenth of a pixel, through the points or (`step`) of a step
        function through them (each value holds until the next x). A long range puts
        hundreds of events in one tenth of a pixel: a vertex that repeats the one before
        draws nothing, so it is left out (a 100,000-observation report was 28 MB, nearly
        all repeats). A point that repeats the one before adds only such repeats, step or
        not, so those go first, before the steps are drawn."""
        placed = [p for p, _ in groupby(zip(self.x_texts(xs), self.y_texts(ys), strict=True))]
        if step:
            placed = _stepped(placed)
        return [v for v, _ in groupby([f"{x},{y}" for x, y in placed])]


def render(chart: Chart) -> str:
    plot_w = WIDTH_PX - MARGIN_LEFT_PX - MARGIN_RIGHT_PX
    plot_h = HEIGHT_PX - MARGIN_TOP_PX - MARGIN_BOTTOM_PX
    stacked = [_columns(s) for s in chart.stacked]
    lines = [_columns(s) for s in chart.lines]
    tops = _stack_tops(stacked)
    frame = _Frame(*_bounds_of(chart, stacked, lines, tops), plot_w, plot_h)
    legend, legend_rows = _legend(chart)
    height_px = HEIGHT_PX + LEGEND_ROW_PX * (legend_rows - 1)
    data = f' data-dimension="{escape(chart.dimension)}"' if chart.dimension else ""
    if chart.t0:
        data += f' data-t0="{escape(chart.t0)}" data-x-min-s="{frame.x_min:g}"'
        data += f' data-x-max-s="{frame.x_max:g}"'
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH_PX}" '
        f'height="{height_px}" viewBox="0 0 {WIDTH_PX} {height_px}" role="img" '
        f'aria-label="{escape(chart.title)}"{data}>',
        f"<title>{escape(chart.title)}</title>",
        f'<text class="chart-title" x="{MARGIN_LEFT_PX}" y="{MARGIN_TOP_PX - 10}" '
        f'font-size="14" font-weight="bold">{escape(chart.heading or chart.title)}</text>',
        f'<rect class="plot" x="{MARGIN_LEFT_PX}" y="{MARGIN_TOP_PX}" width="{plot_w}" '
        f'height="{plot_h}" fill="#fff" stroke="#ccc"/>',
    ]
    out += _spans(chart, frame)
    out += _grid(frame)
    out += _stacks(chart, frame, stacked, tops)
    out += _lines(chart, frame, lines)
    out += [_marker(marker, frame) for marker in chart.markers]
    out += _x_axis(chart, frame)
    middle = f"{MARGIN_TOP_PX + plot_h / 2:.1f}"
    out.append(
        f'<text class="y-unit" x="14" y="{middle}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 14 {middle})">{escape(chart.y_unit)}</text>'
    )
    out.append(legend)
    out.append("</svg>")
    return "\n".join(out)


def _spans(chart: Chart, frame: _Frame) -> list[str]:
    out = []
    for span in chart.spans:
        x0, x1 = frame.px(max(span.x0, frame.x_min)), frame.px(min(span.x1, frame.x_max))
        width = max(x1 - x0, 1)
        out.append(
            f'<rect class="cooldown" x="{x0:.1f}" y="{MARGIN_TOP_PX}" width="{width:.1f}" '
            f'height="{frame.plot_h}" fill="{span.color}" fill-opacity="0.18">'
            f"<title>{escape(span.label)}</title></rect>"
        )
    return out


def _grid(frame: _Frame) -> list[str]:
    """Horizontal grid lines with their y labels."""
    y_step = _nice_step(frame.y_max / 5)
    while frame.y_max / y_step > 6.5:  # the ceiling may have rounded up a step size
        y_step = _nice_step(y_step * 1.01)
    out = []
    for i in range(round(frame.y_max / y_step) + 1):
        value = y_step * i
        y = frame.py(value)
        out.append(
            f'<line x1="{MARGIN_LEFT_PX}" x2="{WIDTH_PX - MARGIN_RIGHT_PX}" y1="{y:.1f}" '
            f'y2="{y:.1f}" stroke="#eee"/><text class="y-tick" data-value="{value:g}" '
            f'x="{MARGIN_LEFT_PX - 6}" y="{y + 4:.1f}" font-size="11" '
            f'text-anchor="end">{_short(value)}</text>'
        )
    return out


def _stacks(
    chart: Chart, frame: _Frame, stacked: list[_Columns], tops: list[list[float]] | None
) -> list[str]:
    out = []
    baseline: dict[float, float] = {}
    below: list[str] | None = None  # on a shared x: the vertices of the top below
    for index, (series, column) in enumerate(zip(chart.stacked, stacked, strict=True)):
        xs, ys = column
        if not xs:
            continue
        if tops is not None:
            upper = frame.points(xs, tops[index], step=chart.step)
            if below is None:
                below = frame.points(xs, [0.0] * len(xs), step=chart.step)
            lower, below = below, upper
        else:  # the series do not share their x: stack them x by x
            top = [baseline.get(x, 0.0) + y for x, y in zip(xs, ys, strict=True)]
            bottom = [baseline.get(x, 0.0) for x in xs]
            for x, y in zip(xs, ys, strict=True):
                baseline[x] = baseline.get(x, 0.0) + y
            upper = frame.points(xs, top, step=chart.step)
            lower = frame.points(xs, bottom, step=chart.step)
        # The bottom is drawn backwards: leaving out repeats commutes with reversing.
        out.append(
            f'<polygon class="stack" points="{" ".join(upper)} {" ".join(reversed(lower))}" '
            f'fill="{series.color}" fill-opacity="0.75"><title>{escape(series.label)}</title>'
            "</polygon>"
        )
    return out


def _lines(chart: Chart, frame: _Frame, lines: list[_Columns]) -> list[str]:
    out = []
    for series, (xs, ys) in zip(chart.lines, lines, strict=True):
        if not xs:
            continue
        out.append(
            f'<polyline class="line" points="{" ".join(frame.points(xs, ys, step=chart.step))}" '
            f'fill="none" stroke="{series.color}" stroke-width="2">'
            f"<title>{escape(series.label)}</title></polyline>"
        )
    return out


def _marker(marker: Marker, frame: _Frame) -> str:
    x, y = frame.px(marker.x), MARGIN_TOP_PX + frame.plot_h - 8 - 14 * marker.row
    title = f"<title>{escape(marker.label)}</title>"
    if marker.shape == "cross":
        return (
            f'<g class="marker refusal" stroke="{marker.color}" stroke-width="2">{title}'
            f'<line x1="{x - 5:.1f}" y1="{y - 5:.1f}" x2="{x + 5:.1f}" y2="{y + 5:.1f}"/>'
            f'<line x1="{x - 5:.1f}" y1="{y + 5:.1f}" x2="{x + 5:.1f}" y2="{y - 5:.1f}"/></g>'
        )
    if marker.shape == "triangle":
        return (
            f'<polygon class="marker rejection" points="{x:.1f},{y - 6:.1f} '
            f'{x - 5:.1f},{y + 4:.1f} {x + 5:.1f},{y + 4:.1f}" fill="{marker.color}">'
            f"{title}</polygon>"
        )
    return (
        f'<circle class="marker admission" cx="{x:.1f}" cy="{y:.1f}" r="4" '
        f'fill="{marker.color}">{title}</circle>'
    )


def _x_axis(chart: Chart, frame: _Frame) -> list[str]:
    axis_y = MARGIN_TOP_PX + frame.plot_h
    out = []
    for x, label in chart.x_label_at:
        if not frame.x_min <= x <= frame.x_max:
            continue
        out.append(
            f'<line x1="{frame.px(x):.1f}" x2="{frame.px(x):.1f}" y1="{axis_y}" '
            f'y2="{axis_y + 4}" stroke="#888"/><text x="{frame.px(x):.1f}" y="{axis_y + 16}" '
            f'font-size="11" text-anchor="middle">{escape(label)}</text>'
        )
    return out


def _legend(chart: Chart) -> tuple[str, int]:
    """The legend, wrapped onto as many rows as it needs below the plot, and that count."""
    items = [(s.label, s.color, "rect") for s in chart.stacked]
    items += [(s.label, s.color, "line") for s in chart.lines]
    items += chart.legend_extra
    parts, x, rows = [], MARGIN_LEFT_PX, 1
    y = HEIGHT_PX - 14
    for label, color, shape in items:
        width = 24 + 6 * len(label)
        if x + width > WIDTH_PX and x > MARGIN_LEFT_PX:
            x, y, rows = MARGIN_LEFT_PX, y + LEGEND_ROW_PX, rows + 1
        if shape == "line":
            mark = f'<line x1="{x}" x2="{x + 10}" y1="{y + 5}" y2="{y + 5}" stroke="{color}" '
            mark += 'stroke-width="2"/>'
        elif shape == "circle":
            mark = f'<circle cx="{x + 5}" cy="{y + 5}" r="4" fill="{color}"/>'
        elif shape == "cross":
            mark = (
                f'<path d="M{x + 1},{y + 1} L{x + 9},{y + 9} M{x + 1},{y + 9} L{x + 9},{y + 1}" '
                f'stroke="{color}" stroke-width="2"/>'
            )
        elif shape == "triangle":
            mark = f'<polygon points="{x + 5},{y} {x},{y + 9} {x + 10},{y + 9}" fill="{color}"/>'
        elif shape == "span":
            mark = (
                f'<rect x="{x}" y="{y}" width="10" height="10" fill="{color}" fill-opacity="0.3"/>'
            )
        else:
            mark = f'<rect x="{x}" y="{y}" width="10" height="10" fill="{color}"/>'
        parts.append(mark + f'<text x="{x + 14}" y="{y + 9}" font-size="11">{escape(label)}</text>')
        x += width
    return '<g class="legend">' + "".join(parts) + "</g>", rows


def _stepped(points: list[tuple[T, T]]) -> list[tuple[T, T]]:
    """A step function through `points`: each value holds until the next x."""
    out: list[tuple[T, T]] = []
    for i, (x, y) in enumerate(points):
        if i:
            out.append((x, points[i - 1][1]))
        out.append((x, y))
    return out


def _nice_step(raw: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is >= raw (at least 1)."""
    if raw <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw))


def _nice_ceiling(value: float) -> float:
    """A round upper bound for the y axis: about five grid steps of a nice size."""
    step = _nice_step(value / 5)
    return max(step * math.ceil(value / step - 1e-9), step)


def _short(value: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"
