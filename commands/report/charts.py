"""The report's charts: one per configured dimension, each in its own unit (SPEC §3.6).

A goal enforcing tpm, itpm, otpm and rpm is four envelopes, and an operator reading the
page must see which one a refusal met. So each configured dimension gets a chart with a
visible title and its unit (tokens or requests per minute): its usage stacked by the
parts that dimension counts, the active runs' reservations, the provider's count while a
report of it was live, its target and quota, and every decision as a marker, a refusal
coloured by the dimension that bound it. All values come from `projections.audit`
`Point`s, which are the fold's figures at every time they change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

from quotaledger.journal.clock import US_PER_S, format_us
from quotaledger.projections import audit as au
from quotaledger.projections.audit.pool_timeline import PoolPoint, PoolTimeline
from quotaledger.projections.capacity.events import PoolFigures
from quotaledger.report import svgchart

COLORS = {
    "uncached": "#4e79a7",
    "cache_write": "#59a14f",
    "cached": "#76b7b2",
    "output": "#f28e2b",
    "requests": "#4e79a7",
    "reserved": "#7b3294",
    "provider": "#000000",
    "target": "#2ca02c",
    "quota": "#d62728",
    "admission": "#2ca02c",
    "rejection": "#8c564b",
    "cooldown": "#f4b400",
    "active": "#4e79a7",
}

BINDING_COLORS = {
    "tpm": "#d62728",
    "itpm": "#17becf",
    "otpm": "#e377c2",
    "rpm": "#bcbd22",
    "tpd": "#9467bd",
    "rpd": "#8c6d31",
    None: "#555555",
}
"""A refusal marker's colour: the dimension that bound it (None: no token dimension did,
e.g. a case slot or a cooldown)."""


@dataclass(frozen=True)
class Dimension:
    """How one dimension is titled and which parts its usage stacks."""

    name: str
    title: str
    unit: str
    parts: tuple[tuple[str, str, Callable[[au.Point], float]], ...]
    """(label, colour, value at a point)."""


def _rpm_usage(point: au.Point) -> float:
    return float(point.dimensions["rpm"].usage)


def _day_usage(name: str) -> Callable[[au.Point], float]:
    def usage(point: au.Point) -> float:
        return float(point.dimensions[name].usage)

    return usage


_INPUT_PARTS = (
    ("uncached input", COLORS["uncached"], attrgetter("uncached_input_tpm")),
    ("cache write input", COLORS["cache_write"], attrgetter("cache_write_input_tpm")),
    ("cached input (weighted)", COLORS["cached"], attrgetter("cached_input_weighted_tpm")),
)
_OUTPUT_PARTS = (("output", COLORS["output"], attrgetter("output_tpm")),)

DIMENSIONS = {
    "tpm": Dimension(
        "tpm", "TPM: all tokens per minute", "tokens per minute", _INPUT_PARTS + _OUTPUT_PARTS
    ),
    "itpm": Dimension("itpm", "ITPM: input tokens per minute", "tokens per minute", _INPUT_PARTS),
    "otpm": Dimension("otpm", "OTPM: output tokens per minute", "tokens per minute", _OUTPUT_PARTS),
    "rpm": Dimension(
        "rpm",
        "RPM: requests per minute",
        "requests per minute",
        (("requests", COLORS["requests"], _rpm_usage),),
    ),
    # The daily windows (SPEC §12.3): the day's usage; reserved = what the active runs may
    # still spend, and the load their sum.
    "tpd": Dimension(
        "tpd",
        "TPD: tokens in the trailing day",
        "tokens per day",
        (("tokens in the day", COLORS["uncached"], _day_usage("tpd")),),
    ),
    "rpd": Dimension(
        "rpd",
        "RPD: requests in the trailing day",
        "requests per day",
        (("requests in the day", COLORS["requests"], _day_usage("rpd")),),
    ),
}
DAILY = frozenset({"tpd", "rpd"})


def charted_dimensions(timeline: au.Timeline) -> list[str]:
    """The dimensions configured at some point of the range, in reporting order; a goal
    with none still gets its token usage (TPM) drawn."""
    found = {d for p in timeline.points for d in p.dimensions}
    return [d for d in DIMENSIONS if d in found] or ["tpm"]


def dimension_chart(timeline: au.Timeline, name: str) -> svgchart.Chart:
    """The chart of one dimension: usage stacked by part, reserved, provider used, target,
    quota, decisions and cooldowns."""
    dimension = DIMENSIONS[name]
    points = timeline.points
    origin_us, end_us = points[0].at_us, points[-1].at_us
    # Where the dimension is not configured its limits do not exist; a goal with no
    # dimension configured draws its TPM usage everywhere.
    held = [p for p in points if name in p.dimensions] or points

    def x(at_us: int) -> float:
        return (at_us - origin_us) / US_PER_S

    xs = [x(p.at_us) for p in held]

    def series(label: str, color: str, value: Callable[[au.Point], float]) -> svgchart.Series:
        return svgchart.Series(label, color, [(a, value(p)) for a, p in zip(xs, held, strict=True)])

    def reserved(p: au.Point) -> float:
        # `held` is every point only when the dimension is never configured (TPM usage
        # of a goal without a token dimension): its reservations are the TPM ones.
        return float(p.dimensions[name].reserved if name in p.dimensions else p.reserved_tpm)

    lines = [series("reserved", COLORS["reserved"], reserved)]
    if name in DAILY:
        load = series(
            "load (usage + reserved)", COLORS["quota"], lambda p: float(p.dimensions[name].load)
        )
        lines.append(svgchart.Series(load.label, "#7f7f7f", load.points))
    else:
        lines += _provider_segments(name, points, x)
    if any(name in p.dimensions for p in points):
        lines += _limit_lines(series, name)
    chart = _time_chart(
        f"{dimension.title} (goal {timeline.goal})",
        dimension.title,
        name,
        (origin_us, end_us),
        stacked=[series(label, color, value) for label, color, value in dimension.parts],
        lines=lines,
    )
    _add_markers(chart, timeline, x)
    return chart


def _provider_segments(
    name: str, points: list[au.Point] | list[PoolPoint], x: Callable[[int], float]
) -> list[svgchart.Series]:
    """The provider's count (limit - remaining) where a report was live: one line per
    live stretch, each held until the point where it stopped being live."""
    segments: list[svgchart.Series] = []
    current: list[tuple[float, float]] = []
    for p in points:
        used = p.dimensions[name].provider_used if name in p.dimensions else None
        if used is not None:
            current.append((x(p.at_us), float(used)))
        elif current:
            current.append((x(p.at_us), current[-1][1]))
            segments.append(svgchart.Series("provider used", COLORS["provider"], current))
            current = []
    if current:
        segments.append(svgchart.Series("provider used", COLORS["provider"], current))
    return segments


def _add_markers(chart: svgchart.Chart, timeline: au.Timeline, x: Callable[[int], float]) -> None:
    origin_us, end_us = timeline.points[0].at_us, timeline.points[-1].at_us
    _markers(chart, timeline.decisions, timeline.cooldowns, (origin_us, end_us), x)


def _markers(
    chart: svgchart.Chart,
    decisions: list[au.RecordedDecision],
    cooldowns: list[au.Cooldown],
    extent_us: tuple[int, int],
    x: Callable[[int], float],
    *,
    binding_of: Callable[[au.RecordedDecision], str | None] = lambda d: d.figures.binding_dimension,
    label_of: Callable[[au.RecordedDecision], str] = lambda d: decision_label(d),
) -> None:
    """Every decision as a marker (a refusal coloured by `binding_of` it), every 429 and
    the cooldowns shaded, and their legend entries."""
    origin_us, end_us = extent_us
    bindings: list[str | None] = []
    for d in decisions:
        label = label_of(d)
        if d.admitted:
            chart.markers.append(svgchart.Marker(x(d.at_us), label, COLORS["admission"]))
            continue
        binding = binding_of(d)
        if binding not in bindings:
            bindings.append(binding)
        color = BINDING_COLORS.get(binding, BINDING_COLORS[None])
        chart.markers.append(svgchart.Marker(x(d.at_us), label, color, shape="cross", row=1))
    for c in cooldowns:
        text = f"provider rejection at {format_us(c.start_us)}: cooldown {c.cooldown_s} s"
        chart.markers.append(
            svgchart.Marker(x(c.start_us), text, COLORS["rejection"], shape="triangle", row=2)
        )
    for start_us, stop_us in au.merged_cooldowns(cooldowns):
        chart.spans.append(
            svgchart.Span(
                x(max(start_us, origin_us)),
                x(min(stop_us, end_us)),
                f"cooldown {format_us(start_us)} — {format_us(stop_us)}",
                COLORS["cooldown"],
            )
        )
    chart.legend_extra = [("admitted", COLORS["admission"], "circle")]
    chart.legend_extra += [
        (
            f"refused: {b.upper()}" if b else "refused: other",
            BINDING_COLORS.get(b, BINDING_COLORS[None]),
            "cross",
        )
        for b in bindings
    ]
    chart.legend_extra += [
        ("429", COLORS["rejection"], "triangle"),
        ("cooldown", COLORS["cooldown"], "span"),
    ]


MEMBER_COLORS = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
"""A pool chart's members, stacked in the order they joined (then round again)."""


def pool_charted_dimensions(timeline: PoolTimeline) -> list[str]:
    """The pool's dimensions configured at some point of the range, in reporting order."""
    found = {d for p in timeline.points for d in p.dimensions}
    return [d for d in DIMENSIONS if d in found]


def pool_dimension_chart(timeline: PoolTimeline, name: str) -> svgchart.Chart:
    """One pool dimension (SPEC §12.1): each member's load stacked, the provider's count
    while a report was live, the pool's target and quota, every member's decision
    (a refusal coloured by the pool dimension that bound it) and the pool's cooldowns."""
    dimension = DIMENSIONS[name]
    origin_us, end_us = timeline.points[0].at_us, timeline.points[-1].at_us
    held = [p for p in timeline.points if name in p.dimensions]

    def x(at_us: int) -> float:
        return (at_us - origin_us) / US_PER_S

    xs = [x(p.at_us) for p in held]

    def series(label: str, color: str, value: Callable[[PoolPoint], float]) -> svgchart.Series:
        return svgchart.Series(label, color, [(a, value(p)) for a, p in zip(xs, held, strict=True)])

    def member_load(goal: str) -> Callable[[PoolPoint], float]:
        return lambda p: float(p.dimensions[name].members.get(goal, 0))

    stacked = [
        series(f"goal {goal}", MEMBER_COLORS[index % len(MEMBER_COLORS)], member_load(goal))
        for index, goal in enumerate(timeline.members)
    ]
    lines = _provider_segments(name, held, x) + _limit_lines(series, name)
    chart = _time_chart(
        f"{dimension.title}: load by goal (pool {timeline.pool})",
        f"{dimension.title}: load by goal",
        name,
        (origin_us, end_us),
        stacked=stacked,
        lines=lines,
    )
    _markers(
        chart,
        timeline.decisions,
        timeline.cooldowns,
        (origin_us, end_us),
        x,
        binding_of=_pool_binding,
        label_of=lambda d: f"goal {d.goal}: {decision_label(d)}",
    )
    return chart


def _limit_lines(series: Callable[..., svgchart.Series], name: str) -> list[svgchart.Series]:
    """Dimension `name`'s target and quota lines, drawn by the chart's own `series`."""
    return [
        series("target", COLORS["target"], lambda p: float(p.dimensions[name].target)),
        series("quota", COLORS["quota"], lambda p: float(p.dimensions[name].quota)),
    ]


def _time_chart(
    title: str,
    heading: str,
    name: str,
    span_us: tuple[int, int],
    *,
    stacked: list[svgchart.Series],
    lines: list[svgchart.Series],
) -> svgchart.Chart:
    """A dimension's step chart over `span_us`, in seconds from its start (a goal's or
    a pool's: only what is stacked and drawn differs)."""
    origin_us, end_us = span_us
    return svgchart.Chart(
        title=title,
        heading=heading,
        y_unit=DIMENSIONS[name].unit,
        dimension=name,
        t0=format_us(origin_us),
        step=True,
        x_range=(0.0, max((end_us - origin_us) / US_PER_S, 1.0)),
        x_label_at=_ticks(origin_us, end_us),
        stacked=stacked,
        lines=lines,
    )


def _pool_binding(d: au.RecordedDecision) -> str | None:
    """The dimension that bound a member's refusal: the pool's, else the goal's own."""
    pool = d.figures.pool
    found = pool.binding_dimension if isinstance(pool, PoolFigures) else None
    return found or d.figures.binding_dimension


def spend_charts(timeline: au.Timeline) -> list[svgchart.Chart]:
    """Spend against each cap (SPEC §12.4): tokens and dollars since `cap_since`, where
    the goal had a cap; none without one."""
    points = [p for p in timeline.points if p.spend is not None]
    if not points:
        return []
    origin_us, end_us = timeline.points[0].at_us, timeline.points[-1].at_us

    def x(at_us: int) -> float:
        return (at_us - origin_us) / US_PER_S

    found: list[svgchart.Chart] = []
    for unit, spent_at, cap_at, y_unit in (("tokens", 0, 2, "tokens"), ("usd", 1, 3, "US dollars")):
        capped = [p for p in points if p.spend is not None and p.spend[cap_at] is not None]
        if not capped:
            continue
        spent = [(x(p.at_us), float(p.spend[spent_at] or 0)) for p in capped if p.spend is not None]
        caps = [(x(p.at_us), float(p.spend[cap_at] or 0)) for p in capped if p.spend is not None]
        chart = svgchart.Chart(
            title=f"Spend in {y_unit} against the cap (goal {timeline.goal})",
            heading=f"Spend ({unit}) against the cap",
            step=True,
            y_unit=y_unit,
            t0=format_us(origin_us),
            x_range=(0.0, max(x(end_us), 1.0)),
            x_label_at=_ticks(origin_us, end_us),
            stacked=[svgchart.Series(f"spent ({unit})", COLORS["uncached"], spent)],
            lines=[svgchart.Series("cap", COLORS["quota"], caps)],
        )
        _add_markers(chart, timeline, x)
        found.append(chart)
    return found


def active_chart(timeline: au.Timeline) -> svgchart.Chart:
    points = timeline.points
    origin_us, end_us = points[0].at_us, points[-1].at_us

    def x(at_us: int) -> float:
        return (at_us - origin_us) / US_PER_S

    active = [(x(p.at_us), float(p.active_runs)) for p in points]
    return svgchart.Chart(
        title=f"Active runs (goal {timeline.goal})",
        heading="Active runs",
        step=True,
        y_unit="runs",
        t0=format_us(origin_us),
        x_range=(0.0, max(x(end_us), 1.0)),
        x_label_at=_ticks(origin_us, end_us),
        stacked=[svgchart.Series("active runs", COLORS["active"], active)],
    )


_TICK_STEPS_S: tuple[int, ...] = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
_TICK_STEPS_S += (7200, 10800, 21600, 43200, 86400, 172800, 604800)


def _ticks(origin_us: int, end_us: int, wanted: int = 8) -> list[tuple[float, str]]:
    """Round-valued time ticks across the range, labelled in UTC."""
    length_s = max((end_us - origin_us) / US_PER_S, 1.0)
    step_s = next((s for s in _TICK_STEPS_S if length_s / s <= wanted), _TICK_STEPS_S[-1])
    step_us = step_s * US_PER_S
    first_us = -(-origin_us // step_us) * step_us
    long_range = length_s >= 86400
    ticks = []
    at_us = first_us
    while at_us <= end_us:
        text = format_us(at_us)
        label = f"{text[5:10]} {text[11:16]}" if long_range else text[11:19]
        ticks.append(((at_us - origin_us) / US_PER_S, label))
        at_us += step_us
    return ticks


def decision_label(d: au.RecordedDecision) -> str:
    request = d.request
    head = f"seq {d.seq} {d.at} run {request.run} ({request.run_class}"
    head += f", forecast {request.forecast_tpm})" if request.forecast_tpm is not None else ")"
    if d.admitted:
        return f"admitted: {head}"
    binding = d.figures.binding_dimension
    bound = f" (binding {binding.upper()})" if binding else ""
    return f"refused{bound}: {head}: {', '.join(d.reasons)}"
