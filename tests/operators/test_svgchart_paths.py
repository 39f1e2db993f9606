"""A chart of a long range draws each vertex once: hundreds of events fall in one
tenth of a pixel, and a vertex that repeats the one before draws nothing, so the
SVG leaves it out (a 100,000-observation report was 28 MB, nearly all repeats)."""

from __future__ import annotations

import random
import re

from quotaledger.report import svgchart


def _paths(svg: str) -> list[list[str]]:
    return [found.split() for found in re.findall(r'points="([^"]*)"', svg)]


def _every_vertex(points: list[tuple[float, float]], chart: svgchart.Chart) -> list[str]:
    """Each point as the chart places it (the rule before repeats were left out)."""
    x_min, x_max, y_max = svgchart._bounds(chart)
    plot_w = svgchart.WIDTH_PX - svgchart.MARGIN_LEFT_PX - svgchart.MARGIN_RIGHT_PX
    plot_h = svgchart.HEIGHT_PX - svgchart.MARGIN_TOP_PX - svgchart.MARGIN_BOTTOM_PX
    return [
        f"{svgchart.MARGIN_LEFT_PX + (x - x_min) / (x_max - x_min) * plot_w:.1f},"
        f"{svgchart.MARGIN_TOP_PX + plot_h - y / y_max * plot_h:.1f}"
        for x, y in points
    ]


def _without_repeats(vertices: list[str]) -> list[str]:
    return [v for i, v in enumerate(vertices) if i == 0 or v != vertices[i - 1]]


def test_a_long_series_keeps_every_vertex_that_draws_and_no_repeat() -> None:
    rng = random.Random(7)
    # A window sum: it moves a little at each event, mostly by less than a tenth of a pixel.
    points = [(i * 0.01, 1_000_000 + rng.randrange(0, 40)) for i in range(30_000)]
    chart = svgchart.Chart(title="t", lines=[svgchart.Series("s", "#000", points)])
    (path,) = _paths(svgchart.render(chart))
    assert path == _without_repeats(_every_vertex(points, chart))
    plot_w = svgchart.WIDTH_PX - svgchart.MARGIN_LEFT_PX - svgchart.MARGIN_RIGHT_PX
    assert len(path) <= plot_w * 10 + 1  # a vertex per tenth of a pixel at most, not 30,000


def test_stacked_and_stepped_series_draw_what_every_point_draws() -> None:
    rng = random.Random(11)
    xs = [i * 0.5 for i in range(4_000)]
    lower = [(x, float(rng.randrange(0, 50))) for x in xs]
    upper = [(x, float(rng.randrange(0, 50))) for x in xs]
    chart = svgchart.Chart(
        title="t",
        step=True,
        stacked=[svgchart.Series("a", "#111", lower), svgchart.Series("b", "#222", upper)],
    )
    first, second = _paths(svgchart.render(chart))
    stepped = svgchart._stepped
    zero = [(x, 0.0) for x, _ in lower]
    top_b = [(x, y + lower[i][1]) for i, (x, y) in enumerate(upper)]
    assert first == _without_repeats(_every_vertex(stepped(lower), chart)) + _without_repeats(
        _every_vertex(list(reversed(stepped(zero))), chart)
    )
    assert second == _without_repeats(_every_vertex(stepped(top_b), chart)) + _without_repeats(
        _every_vertex(list(reversed(stepped(lower))), chart)
    )


def _stacked_reference(chart: svgchart.Chart) -> list[list[str]]:
    """Each stacked polygon's vertices the way every point draws them: each series on
    the sum of those below at its own x, its top then its bottom backwards, repeats out."""
    baseline: dict[float, float] = {}
    paths = []
    for series in chart.stacked:
        points = sorted(series.points)
        top = [(x, baseline.get(x, 0.0) + y) for x, y in points]
        bottom = [(x, baseline.get(x, 0.0)) for x, _ in points]
        if chart.step:
            top, bottom = svgchart._stepped(top), svgchart._stepped(bottom)
        paths.append(
            _without_repeats(_every_vertex(top, chart))
            + _without_repeats(_every_vertex(bottom[::-1], chart))
        )
        for x, y in points:
            baseline[x] = baseline.get(x, 0.0) + y
    return paths


def test_stacks_that_share_no_x_and_unsorted_points_draw_what_every_point_draws() -> None:
    """The stack adds position by position only on a shared x column without repeats;
    otherwise x by x, as before."""
    rng = random.Random(13)
    for step in (True, False):
        lower = [(rng.randrange(0, 3_000) * 0.5, float(rng.randrange(0, 50))) for _ in range(900)]
        upper = [(rng.randrange(0, 3_000) * 0.5, float(rng.randrange(0, 50))) for _ in range(900)]
        same = [(x, float(rng.randrange(0, 50))) for x, _ in lower]  # shared x, with repeats
        for stacked in ([lower, upper], [lower, same]):
            chart = svgchart.Chart(
                title="t",
                step=step,
                stacked=[svgchart.Series(str(i), "#111", s) for i, s in enumerate(stacked)],
            )
            assert _paths(svgchart.render(chart)) == _stacked_reference(chart)
