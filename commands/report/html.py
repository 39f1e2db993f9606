"""The offline HTML report of one goal (SPEC §7 `report`).

One self-contained file: inline CSS, inline SVG charts (`quotaledger.report.svgchart`), no
script, no external resource — it renders the same with scripts disabled and without
network. The figures come from `projections.audit.Timeline`, which samples the goal at
every time its usage, reservations or limits change, so the step charts are exact.
"""

from __future__ import annotations

from html import escape
from operator import attrgetter
from typing import Any

import msgspec

from quotaledger.journal.clock import US_PER_S, format_us
from quotaledger.projections import audit as au
from quotaledger.report import svgchart

COLORS = {
    "uncached": "#4e79a7",
    "cached": "#76b7b2",
    "output": "#f28e2b",
    "reserved": "#7b3294",
    "target": "#2ca02c",
    "solver": "#98df8a",
    "quota": "#d62728",
    "admission": "#2ca02c",
    "refusal": "#d62728",
    "rejection": "#8c564b",
    "cooldown": "#f4b400",
    "active": "#4e79a7",
}

DENSE_POINTS = 2000
"""Beyond this many chart points, the report suggests a narrower range."""

_TICK_STEPS_S: tuple[int, ...] = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
_TICK_STEPS_S += (7200, 10800, 21600, 43200, 86400, 172800, 604800)

CSS = """
body { font-family: -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif;
       margin: 24px auto; max-width: 1160px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta { color: #666; font-size: 12px; }
.summary { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.summary div { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 110px; }
.summary b { display: block; font-size: 20px; }
.summary span { color: #666; font-size: 12px; }
table { border-collapse: collapse; font-size: 11.5px; width: 100%; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top;
         white-space: nowrap; }
td.wrap { white-space: normal; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.reason { display: inline-block; background: #fde2e1; color: #8b1a1a; border-radius: 3px;
          padding: 0 4px; margin: 1px 2px 1px 0; font-family: monospace; }
.note { color: #555; font-size: 12px; }
.scroll { overflow-x: auto; }
svg.chart { display: block; margin: 8px 0; width: 100%; height: auto; }
"""


def render_report(
    timeline: au.Timeline,
    *,
    journal_id: str | None,
    head_seq: int,
    head_hash: str,
    generated_at: str,
) -> str:
    """The whole HTML document."""
    goal = timeline.goal
    refusals = [d for d in timeline.decisions if not d.admitted]
    admissions = [d for d in timeline.decisions if d.admitted]
    points = timeline.points
    peak = max((p.usage_tpm for p in points), default=0)
    day = _single_day(timeline)
    span = (
        f"{format_us(points[0].at_us)} — {format_us(points[-1].at_us)}"
        if points
        else "no capacity events in range"
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>quotaledger report: {escape(goal)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Capacity report — goal <code>{escape(goal)}</code></h1>",
        f'<p class="meta">{escape(span)} · journal {escape(journal_id or "-")} · head '
        f"{head_seq}:{escape(head_hash)} · generated {escape(generated_at)}</p>",
        '<div class="summary">',
        _figure(len(admissions), "admissions"),
        _figure(len(refusals), "refusals"),
        _figure(timeline.rejections, "provider rejections (429)"),
        _figure(timeline.releases, "releases"),
        _figure(timeline.observations, "usage observations"),
        _figure(_num(peak), "peak usage TPM"),
        "</div>",
    ]
    if points:
        parts += [
            "<h2>Token usage, reservations and limits</h2>",
            '<p class="note">Usage in the trailing 60 s window, stacked by counter (cached '
            "input weighted as the config says); reserved = the active runs' forecasts; "
            "target and quota lines from the config in force. Markers along the bottom: "
            "admissions (●), refusals (✕), provider rejections (▲); shaded: cooldown.</p>",
            *(
                [
                    f'<p class="note">{len(points):,} points: narrow the range with --since / '
                    "--until to see single decisions.</p>"
                ]
                if len(points) > DENSE_POINTS
                else []
            ),
            svgchart.render(usage_chart(timeline)),
            *(svgchart.render(c) for c in dimension_charts(timeline)),
            "<h2>Active runs</h2>",
            svgchart.render(active_chart(timeline)),
        ]
    parts += [
        f"<h2>Refusals ({len(refusals)})</h2>",
        _times_note(day),
        refusals_table(refusals, day),
        f"<h2>Admissions ({len(admissions)})</h2>",
        admissions_table(admissions, day),
        "<h2>Cooldowns</h2>",
        cooldowns_table(timeline.cooldowns, day),
        "<h2>Configuration changes</h2>",
        configs_table(timeline.configs, day),
        '<p class="meta">Generated by <code>quotaledger report</code> from the journal alone. '
        "Audit any decision with <code>quotaledger audit --seq N</code>.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


# -- charts ------------------------------------------------------------------------------


def _xs(points: list[au.Point]) -> list[float]:
    """Each point's x: seconds since the first point."""
    origin_us = points[0].at_us
    return [(p.at_us - origin_us) / US_PER_S for p in points]


def usage_chart(timeline: au.Timeline) -> svgchart.Chart:
    points = timeline.points
    origin_us = points[0].at_us
    end_us = points[-1].at_us
    xs = _xs(points)

    def x(at_us: int) -> float:
        return (at_us - origin_us) / US_PER_S

    def series(label: str, color: str, value: Any) -> svgchart.Series:
        return svgchart.Series(
            label, color, list(zip(xs, map(float, map(value, points)), strict=True))
        )

    def limit(label: str, color: str, value: Any) -> list[svgchart.Series]:
        # A limit is drawn only where it exists (a goal may configure its token gate later).
        values = list(map(value, points))
        pts = [(x, float(v)) for x, v in zip(xs, values, strict=True) if v is not None]
        return [svgchart.Series(label, color, pts)] if pts else []

    chart = svgchart.Chart(
        title=f"Usage TPM of goal {timeline.goal}",
        step=True,
        x_range=(0.0, max(x(end_us), 1.0)),
        x_label_at=_ticks(origin_us, end_us),
        stacked=[
            series("uncached input", COLORS["uncached"], attrgetter("uncached_input_tpm")),
            series(
                "cached input (weighted)",
                COLORS["cached"],
                attrgetter("cached_input_weighted_tpm"),
            ),
            series("output", COLORS["output"], attrgetter("output_tpm")),
        ],
        lines=[
            series("reserved", COLORS["reserved"], attrgetter("reserved_tpm")),
            *limit("target", COLORS["target"], attrgetter("target_tpm")),
            *limit("quota", COLORS["quota"], attrgetter("quota_tpm")),
        ],
    )
    for d in timeline.decisions:
        label = _decision_label(d)
        if d.admitted:
            chart.markers.append(svgchart.Marker(x(d.at_us), label, COLORS["admission"]))
        else:
            chart.markers.append(
                svgchart.Marker(x(d.at_us), label, COLORS["refusal"], shape="cross", row=1)
            )
    for c in timeline.cooldowns:
        chart.markers.append(
            svgchart.Marker(
                x(c.start_us),
                f"provider rejection at {format_us(c.start_us)}: cooldown {c.cooldown_s} s",
                COLORS["rejection"],
                shape="triangle",
                row=2,
            )
        )
    for start_us, stop_us in au.merged_cooldowns(timeline.cooldowns):
        chart.spans.append(
            svgchart.Span(
                x(max(start_us, origin_us)),
                x(min(stop_us, end_us)),
                f"cooldown {format_us(start_us)} — {format_us(stop_us)}",
                COLORS["cooldown"],
            )
        )
    chart.legend_extra = [
        ("admitted", COLORS["admission"], "circle"),
        ("refused", COLORS["refusal"], "cross"),
        ("429", COLORS["rejection"], "triangle"),
        ("cooldown", COLORS["cooldown"], "span"),
    ]
    return chart


def dimension_charts(timeline: au.Timeline) -> list[svgchart.Chart]:
    """One usage chart per configured dimension other than tpm (SPEC §3.6)."""
    points = timeline.points
    origin_us, end_us = points[0].at_us, points[-1].at_us

    def x(at_us: int) -> float:
        return (at_us - origin_us) / US_PER_S

    charts: list[svgchart.Chart] = []
    if not any(p.dimensions for p in points):
        return charts
    for dimension in ("itpm", "otpm", "rpm"):
        held = [p for p in points if dimension in p.dimensions]
        if not held:
            continue

        def pts(index: int, dimension: str = dimension) -> list[tuple[float, float]]:
            return [
                (x(p.at_us), float(p.dimensions[dimension][index]))
                for p in points
                if dimension in p.dimensions
            ]

        charts.append(
            svgchart.Chart(
                title=f"Usage {dimension.upper()} of goal {timeline.goal}",
                step=True,
                x_range=(0.0, max(x(end_us), 1.0)),
                x_label_at=_ticks(origin_us, end_us),
                stacked=[svgchart.Series("usage", COLORS["uncached"], pts(0))],
                lines=[
                    svgchart.Series("load", COLORS["reserved"], pts(1)),
                    svgchart.Series("target", COLORS["target"], pts(2)),
                ],
            )
        )
    return charts


def active_chart(timeline: au.Timeline) -> svgchart.Chart:
    points = timeline.points
    origin_us, end_us = points[0].at_us, points[-1].at_us

    def x(at_us: int) -> float:
        return (at_us - origin_us) / US_PER_S

    active = [p.active_runs for p in points]
    return svgchart.Chart(
        title=f"Active runs of goal {timeline.goal}",
        step=True,
        y_unit="runs",
        x_range=(0.0, max(x(end_us), 1.0)),
        x_label_at=_ticks(origin_us, end_us),
        stacked=[
            svgchart.Series(
                "active runs", COLORS["active"], list(zip(_xs(points), active, strict=True))
            )
        ],
    )


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


def _decision_label(d: au.RecordedDecision) -> str:
    request = d.request
    head = f"seq {d.seq} {d.at} run {request.run} ({request.run_class}"
    head += f", forecast {request.forecast_tpm})" if request.forecast_tpm is not None else ")"
    if d.admitted:
        return f"admitted: {head}"
    return f"refused: {head}: {', '.join(d.reasons)}"


# -- tables ------------------------------------------------------------------------------


def _single_day(timeline: au.Timeline) -> str | None:
    """The UTC date every time in the report falls on, if there is one."""
    points = timeline.points  # in time order: the first and the last span every day between
    times = [format_us(p.at_us) for p in (points[:1] + points[-1:])]
    times += [d.at for d in timeline.decisions] + [at for at, _ in timeline.configs]
    times += [format_us(c.end_us) for c in timeline.cooldowns]
    days = {t[:10] for t in times}
    return days.pop() if len(days) == 1 else None


def _times_note(day: str | None) -> str:
    where = f"on {day}" if day else "(date and time)"
    return f'<p class="note">Times are UTC {escape(where)}; hover a time for its full value.</p>'


def _time_td(at: str | None, day: str | None) -> str:
    if at is None:
        return "<td>-</td>"
    shown = at[11:26] if day and at.startswith(day) else at[:10] + " " + at[11:26]
    return f'<td title="{escape(at)}">{escape(shown)}</td>'


def refusals_table(refusals: list[au.RecordedDecision], day: str | None = None) -> str:
    if not refusals:
        return '<p class="note">No refusals in range.</p>'
    header = (
        "seq",
        "at",
        "run",
        "arm · class",
        "forecast",
        "reasons",
        "usage",
        "reserved",
        "load",
        "target",
        "headroom",
        "active",
        "coverage",
        "cooldown until",
    )
    rows = []
    for d in refusals:
        f, r = d.figures, d.request
        reasons = "".join(f'<span class="reason">{escape(x)}</span>' for x in d.reasons)
        rows.append(
            f'<tr class="refusal" id="seq-{d.seq}">'
            + _td(d.seq, num=True)
            + _time_td(d.at, day)
            + _td(r.run)
            + _td(f"{r.arm or '-'} · {r.run_class}")
            + _td(_num(r.forecast_tpm), num=True)
            + f'<td class="wrap">{reasons}</td>'
            + _td(_num(f.usage_tpm), num=True)
            + _td(_num(f.reserved_tpm), num=True)
            + _td(_num(f.load_tpm), num=True)
            + _td(_num(f.target_tpm), num=True)
            + _td(_num(f.headroom_tpm), num=True)
            + _td(f"{f.active_cases.total} ({f.active_cases.baseline}b/{f.active_cases.test}t)")
            + _td(f.coverage + (" (stale)" if f.observation_stale else ""))
            + _time_td(f.cooldown_until, day)
            + "</tr>"
        )
    return _table(header, rows, "refusals")


def admissions_table(admissions: list[au.RecordedDecision], day: str | None = None) -> str:
    if not admissions:
        return '<p class="note">No admissions in range.</p>'
    header = ("seq", "at", "run", "arm", "class", "forecast", "load before", "target", "lease")
    rows = []
    for d in admissions:
        r, f = d.request, d.figures
        lease = d.receipt.lease_until if d.receipt is not None else None
        rows.append(
            '<tr class="admission">'
            + _td(d.seq, num=True)
            + _time_td(d.at, day)
            + _td(r.run)
            + _td(r.arm or "-")
            + _td(r.run_class)
            + _td(_num(r.forecast_tpm), num=True)
            + _td(_num(f.load_tpm), num=True)
            + _td(_num(f.target_tpm), num=True)
            + _time_td(lease, day)
            + "</tr>"
        )
    return _table(header, rows, "admissions")


def cooldowns_table(cooldowns: list[au.Cooldown], day: str | None = None) -> str:
    if not cooldowns:
        return '<p class="note">No provider rejections in range.</p>'
    header = ("rejected at", "run", "retry-after s", "cooldown s", "until")
    rows = [
        "<tr>"
        + _time_td(format_us(c.start_us), day)
        + _td(c.run or "-")
        + _td(_num(c.retry_after_s), num=True)
        + _td(c.cooldown_s, num=True)
        + _time_td(format_us(c.end_us), day)
        + "</tr>"
        for c in cooldowns
    ]
    return _table(header, rows, "cooldowns")


def configs_table(configs: list[tuple[str, Any]], day: str | None = None) -> str:
    if not configs:
        return '<p class="note">No configure in range.</p>'
    header = ("at", "case gate", "token gate")
    rows = []
    for at, payload in configs:
        cases = msgspec.to_builtins(payload.cases)
        tokens = msgspec.to_builtins(payload.tokens)
        cells = _time_td(at, day) + _td(_kv(cases), wrap=True) + _td(_kv(tokens), wrap=True)
        rows.append("<tr>" + cells + "</tr>")
    return _table(header, rows, "configs")


def _kv(values: dict[str, Any] | None) -> str:
    if values is None:
        return "not configured"
    return ", ".join(f"{k}={v}" for k, v in values.items())


def _table(header: tuple[str, ...], rows: list[str], css_class: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    return (
        f'<div class="scroll"><table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>'
        + "\n".join(rows)
        + "</tbody></table></div>"
    )


def _td(value: Any, *, num: bool = False, wrap: bool = False) -> str:
    css = ' class="num"' if num else ' class="wrap"' if wrap else ""
    return f"<td{css}>{escape(str(value))}</td>"


def _figure(value: Any, label: str) -> str:
    return f"<div><b>{escape(str(value))}</b><span>{escape(label)}</span></div>"


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"
