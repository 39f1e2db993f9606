"""The offline HTML report of one goal (SPEC §7 `report`) or one pool (§12.1
`report --pool P`: each dimension's load stacked by member goal, `PoolTimeline`).

One self-contained file: inline CSS, inline SVG charts (`quotaledger.report.svgchart`), no
script, no external resource — it renders the same with scripts disabled and without
network. The figures come from `projections.audit.Timeline`, which samples the goal at
every time its usage, reservations or limits change, so the step charts are exact.
"""

from __future__ import annotations

from html import escape
from typing import Any

from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from quotaledger.projections import audit as au
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.pool_timeline import PoolTimeline
from quotaledger.projections.capacity.events import PoolFigures
from quotaledger.projections.capacity.pool_events import PoolConfigured
from quotaledger.projections.capacity.pool_fold import PoolMember
from quotaledger.projections.limits import SHARE_UNITS
from quotaledger.render import readable
from quotaledger.render.followup import audit_line, command_line, journal_words
from quotaledger.report import charts, svgchart
from quotaledger.usecases.operator import RunHost, ValidityAnswer

DENSE_POINTS = 2000
"""Beyond this many chart points, the report suggests a narrower range."""

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
.queued { display: inline-block; background: #fff4ce; color: #6b4e00; border-radius: 3px;
          padding: 0 4px; margin: 1px 2px 1px 0; font-size: 12px; }
.note { color: #555; font-size: 12px; }
.scroll { overflow-x: auto; }
table.inner { width: auto; margin: 0; }
table.inner th { background: #fafafa; font-weight: normal; color: #555; }
svg.chart { display: block; margin: 8px 0; width: 100%; height: auto; }
tr.audit td { border-top: none; color: #555; white-space: normal; }
code.audit { user-select: all; color: #222; }
"""


def render_report(
    timeline: au.Timeline,
    *,
    journal_id: str | None,
    head_seq: int,
    head_hash: str,
    generated_at: str,
    journal_target: str,
    validity: ValidityAnswer,
) -> str:
    """The whole HTML document; `journal_target` is the journal as the user named it
    (a path or URL), for the audit commands it prints; `validity` the goal's runs in
    the range, with their verdicts (SPEC §13.2)."""
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
    parts += _charts(timeline)
    parts += [
        f"<h2>Refusals ({len(refusals)})</h2>",
        _times_note(day),
        refusals_table(refusals, day, journal_words(journal_target)),
        f"<h2>Admissions ({len(admissions)})</h2>",
        admissions_table(admissions, day),
        "<h2>Cooldowns</h2>",
        cooldowns_table(timeline.cooldowns, day),
        validity_section(validity, day),
        "<h2>Configuration changes</h2>",
        configs_table(timeline.configs, day),
        '<p class="meta">Generated by <code>quotaledger report</code> from the journal alone. '
        "Audit any decision with <code>"
        + escape(command_line(["audit", "--seq", "N"], journal_words(journal_target)))
        + "</code>.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _charts(timeline: au.Timeline) -> list[str]:
    """The charts' section: one chart per configured dimension, then the active runs
    (none without a point to draw)."""
    points = timeline.points
    if not points:
        return []
    return [
        "<h2>Usage, reservations and limits, per dimension</h2>",
        '<p class="note">One chart per configured dimension, in its own unit. Usage in '
        "the trailing 60 s window, stacked by the parts the dimension counts (cached "
        "input weighted as the config says); reserved = the active runs' forecasts; "
        "provider used = limit - remaining of the provider's report while it was live; "
        "the load is the largest of the three. Target and quota lines from the config "
        "in force. Markers along the bottom: admissions (●), refusals (✕, coloured by "
        "the dimension that bound them), provider rejections (▲); shaded: cooldown.</p>",
        *dense_note(len(points)),
        *(
            svgchart.render(charts.dimension_chart(timeline, d))
            for d in charts.charted_dimensions(timeline)
        ),
        *_spend_section(timeline),
        "<h2>Active runs</h2>",
        svgchart.render(charts.active_chart(timeline)),
    ]


def dense_note(points: int) -> list[str]:
    """Beyond `DENSE_POINTS` chart points, the note that suggests a narrower range."""
    if points <= DENSE_POINTS:
        return []
    return [
        f'<p class="note">{points:,} points: narrow the range with --since / --until to see '
        "single decisions.</p>"
    ]


def _spend_section(timeline: au.Timeline) -> list[str]:
    """Spend against the caps (SPEC §12.4), where the goal had one."""
    found = charts.spend_charts(timeline)
    if not found:
        return []
    return [
        "<h2>Spend against the caps</h2>",
        '<p class="note">What the goal spent since the caps\' cap_since: tokens summed as '
        "TPM is, dollars at the price in force for each observation's model (unpriced "
        "tokens add none); the cap's line from the config in force. A cap stops new "
        "admissions, never a running run. The daily charts above (TPD, RPD) draw the "
        "day's usage, what the active runs may still spend (reserved), and their sum, "
        "the load.</p>",
        *(svgchart.render(chart) for chart in found),
    ]


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


def refusals_table(
    refusals: list[au.RecordedDecision], day: str | None = None, journal: list[str] | None = None
) -> str:
    """One row per refusal, with the command that audits it (`journal`: the words that
    name the journal in it, `followup.journal_words`)."""
    if not refusals:
        return '<p class="note">No refusals in range.</p>'
    header = (
        "seq",
        "at",
        "run",
        "arm · class",
        "reasons",
        "dimension",
        "figures",
        "active",
        "coverage",
        "cooldown until",
    )
    rows = []
    for d in refusals:
        f, r = d.figures, d.request
        reasons = "".join(f'<span class="reason">{escape(x)}</span>' for x in d.reasons)
        waits = d.kind == "capacity.queued"
        if waits:  # a refusal that waits in the queue (SPEC §12.2)
            reasons = '<span class="queued">queued, waits</span>' + reasons
        rows.append(
            f'<tr class="refusal{" queued" if waits else ""}" id="seq-{d.seq}">'
            + _td(d.seq, num=True)
            + _time_td(d.at, day)
            + _td(r.run)
            + _td(f"{r.arm or '-'} · {r.run_class}")
            + f'<td class="wrap">{reasons}</td>'
            + "".join(_refusal_figures(f))
            + _td(f"{f.active_cases.total} ({f.active_cases.baseline}b/{f.active_cases.test}t)")
            + _td(f.coverage + (" (stale)" if f.observation_stale else ""))
            + _time_td(f.cooldown_until, day)
            + "</tr>"
            # Beneath it, the whole width: visible without scrolling the wide row.
            + f'<tr class="audit"><td colspan="{len(header)}">why: <code class="audit">'
            + escape(audit_line(d.seq, journal or []))
            + "</code></td></tr>"
        )
    return _table(header, rows, "refusals")


def _refusal_figures(f: Any) -> list[str]:
    """The cells of the dimension a refusal is about (the one that bound it, else TPM or
    the first configured): its name and unit, and its figures as `admit` prints them,
    in one cell that wraps (a column per figure made the table wider than the page)."""
    name = f.binding_dimension or (
        "tpm" if "tpm" in f.dimensions else next(iter(f.dimensions), None)
    )
    if name is None:  # figures recorded before dimensions existed: the TPM ones
        label = "TPM"
        figures = (
            f"load {_num(f.load_tpm)} (usage {_num(f.usage_tpm)}, reserved "
            f"{_num(f.reserved_tpm)}) + forecast {_num(f.forecast_tpm)} vs target "
            f"{_num(f.target_tpm)}; headroom {_num(f.headroom_tpm)} TPM"
        )
    else:
        g = f.dimensions[name]
        unit = charts.DIMENSIONS[name].unit
        label = f"{name.upper()} ({unit})" + (" binding" if name == f.binding_dimension else "")
        figures = readable.dimension_figures(g, name.upper(), forecast=g.forecast, fmt=_num)
    return [_td(label), _td(figures, wrap=True)]


def admissions_table(admissions: list[au.RecordedDecision], day: str | None = None) -> str:
    if not admissions:
        return '<p class="note">No admissions in range.</p>'
    header = ("seq", "at", "run", "arm", "class", "per dimension, before it", "lease")
    rows = []
    for d in admissions:
        r = d.request
        lease = d.receipt.lease_until if d.receipt is not None else None
        run = _td(r.run)
        if d.queued_at is not None:  # a promotion: how long it waited (SPEC §12.2)
            waited_s = (d.at_us - parse_at(d.queued_at)) / US_PER_S
            run = (
                f'<td>{escape(r.run)} <span class="queued" title="queued at '
                f'{escape(d.queued_at)}">waited {_num(waited_s)} s in the queue</span></td>'
            )
        rows.append(
            f'<tr class="admission{" promoted" if d.queued_at is not None else ""}">'
            + _td(d.seq, num=True)
            + _time_td(d.at, day)
            + run
            + _td(r.arm or "-")
            + _td(r.run_class)
            + f"<td>{_dimensions_cell(d.figures)}</td>"
            + _time_td(lease, day)
            + "</tr>"
        )
    return _table(header, rows, "admissions")


def _dimensions_cell(f: Any) -> str:
    """An admission's figures in every dimension the decision checked, each in its unit
    (figures recorded before dimensions existed: the TPM ones)."""
    head = "".join(f"<th>{h}</th>" for h in ("", "forecast", "load", "target", "headroom", "unit"))
    if f.dimensions:
        rows = [
            (name, (g.forecast, g.load, g.target, g.headroom), charts.DIMENSIONS[name].unit)
            for name, g in f.dimensions.items()
        ]
    else:
        values = (f.forecast_tpm, f.load_tpm, f.target_tpm, f.headroom_tpm)
        rows = [("tpm", values, charts.DIMENSIONS["tpm"].unit)]
    body = "".join(
        f"<tr><th>{name.upper()}</th>"
        + "".join(_td(_num(v), num=True) for v in values)
        + _td(unit)
        + "</tr>"
        for name, values, unit in rows
    )
    return f'<table class="inner"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def cooldowns_table(cooldowns: list[au.Cooldown], day: str | None = None) -> str:
    if not cooldowns:
        return '<p class="note">No provider rejections in range.</p>'
    by_member = any(c.goal is not None for c in cooldowns)  # a pool's: whose 429 it was
    header = ("rejected at", *(("goal",) if by_member else ()), "run", "retry-after s",
              "cooldown s", "until")  # fmt: skip
    rows = [
        "<tr>"
        + _time_td(format_us(c.start_us), day)
        + (_td(c.goal) if by_member else "")
        + _td(c.run or "-")
        + _td(_num(c.retry_after_s), num=True)
        + _td(c.cooldown_s, num=True)
        + _time_td(format_us(c.end_us), day)
        + "</tr>"
        for c in cooldowns
    ]
    return _table(header, rows, "cooldowns")


def validity_section(validity: ValidityAnswer, day: str | None = None) -> str:
    """The counts by verdict, then one row per run (what `validity` prints)."""
    title = f"<h2>Validity of results ({len(validity.runs)} runs)</h2>"
    counts = (
        title
        + '<div class="summary">'
        + "".join(_figure(n, verdict) for verdict, n in validity.counts.items())
    )
    counts += "</div>"
    if not validity.runs:
        return counts + '<p class="note">No runs in range.</p>'
    header = (
        "run", "case", "arm", "queued", "admitted", "released", "waited s", "input",
        "output", "429s", "host", "verdict",
    )  # fmt: skip
    rows = []
    for r in validity.runs:
        tokens = r.tokens
        cells = _td(r.run) + _td(r.case or "-") + _td(r.arm or "-")
        cells += _time_td(r.queued_at, day) + _time_td(r.admitted_at, day)
        cells += _time_td(r.released_at, day)
        cells += _td(_num(r.waited_s), num=True)
        cells += _td(
            _num(tokens.uncached_input + tokens.cached_input + tokens.cache_write_input), num=True
        )
        cells += _td(_num(tokens.output), num=True) + _td(r.rejections, num=True)
        cells += _td(_host_text(r.host), wrap=True) + _td(r.verdict)
        rows.append("<tr>" + cells + "</tr>")
    return counts + _table(header, rows, "validity")


def _host_text(host: RunHost | None) -> str:
    if host is None:
        return "-"
    last = host.last_outcome or "running"
    if host.last_failure is not None:
        last += f" ({host.last_failure})"
    return (
        f"lane {host.lane}: {host.attempts} attempts, last {last}, "
        f"{host.quota_failures} quota failures, {host.continued} continued"
    )


def configs_table(configs: list[tuple[str, Any]], day: str | None = None) -> str:
    """One row per configure: the case gate's fields, each dimension's envelope, and the
    token gate's other settings, as cells (never a dump of the payload)."""
    if not configs:
        return '<p class="note">No configure in range.</p>'
    header = ("at", "case gate", "dimensions", "token gate settings")
    rows = []
    for at, payload in configs:
        cells = _time_td(at, day)
        cells += f'<td class="wrap">{_case_cell(payload.cases)}</td>'
        cells += f'<td class="wrap">{_limits_cell(payload.tokens)}</td>'
        cells += f'<td class="wrap">{_settings_cell(payload.tokens)}</td>'
        rows.append("<tr>" + cells + "</tr>")
    return _table(header, rows, "configs")


def _case_cell(cases: Any) -> str:
    if cases is None:
        return "not configured"
    return _pairs(
        [
            ("max active", cases.max_active_cases),
            ("target active", cases.target_active_cases),
            ("max baseline", cases.max_baseline_cases),
            ("max test", cases.max_test_cases),
            ("reserved test", cases.reserved_test_cases),
        ]
    )


def _limits_cell(tokens: Any) -> str:
    limits = cap.limits_of(tokens)
    if not limits:
        return "not configured"
    head = "".join(
        f"<th>{h}</th>" for h in ("", "quota", "target", "evaluator reserve", "cold start")
    )
    body = "".join(
        f"<tr><th>{name.upper()}</th>"
        + "".join(
            _td(_num(v), num=True)
            for v in (lim.quota, lim.target, lim.evaluator_reserve, lim.cold_start_reserve)
        )
        + "</tr>"
        for name, lim in limits.items()
    )
    return f'<table class="inner"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _settings_cell(tokens: Any) -> str:
    if tokens is None:
        return "not configured"
    return _pairs(
        [
            ("cached input weight", f"{tokens.cached_input_weight:g}"),
            ("max observation age", f"{tokens.max_observation_age_s} s"),
            ("cooldown base", f"{tokens.cooldown_base_s} s"),
            ("cooldown max", f"{tokens.cooldown_max_s} s"),
        ]
    )


def _pairs(pairs: list[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{escape(k)}</th>{_td(v, num=True)}</tr>" for k, v in pairs)
    return f'<table class="inner"><tbody>{body}</tbody></table>'


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


# -- the report of a pool (SPEC §12.1 `report --pool P`) -----------------------------------


def render_pool_report(
    timeline: PoolTimeline,
    *,
    journal_id: str | None,
    head_seq: int,
    head_hash: str,
    generated_at: str,
    journal_target: str,
) -> str:
    """The whole HTML document (`journal_target`: the journal as the user named it, for
    the audit commands it prints)."""
    pool = timeline.pool
    refusals = [d for d in timeline.decisions if not d.admitted]
    admissions = [d for d in timeline.decisions if d.admitted]
    points = timeline.points
    day = _pool_single_day(timeline)
    span = (
        f"{format_us(points[0].at_us)} — {format_us(points[-1].at_us)}"
        if points
        else "no pool events in range"
    )
    words = journal_words(journal_target)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>quotaledger report: pool {escape(pool)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Capacity report — pool <code>{escape(pool)}</code></h1>",
        f'<p class="meta">{escape(span)} · journal {escape(journal_id or "-")} · head '
        f"{head_seq}:{escape(head_hash)} · generated {escape(generated_at)}</p>",
        '<div class="summary">',
        _figure(len(timeline.members), "member goals"),
        _figure(len(admissions), "admissions"),
        _figure(len(refusals), "refusals"),
        _figure(timeline.rejections, "provider rejections (429)"),
        _figure(timeline.observations, "usage observations"),
        "</div>",
    ]
    parts += _pool_charts(timeline)
    parts += [
        "<h2>Members</h2>",
        members_table(timeline),
        f"<h2>Refusals ({len(refusals)})</h2>",
        _times_note(day),
        pool_refusals_table(refusals, day, words),
        f"<h2>Admissions ({len(admissions)})</h2>",
        pool_admissions_table(admissions, day),
        "<h2>The pool's cooldowns</h2>",
        cooldowns_table(timeline.cooldowns, day),
        "<h2>Pool configuration changes</h2>",
        pool_configs_table(timeline.configs, day),
        '<p class="meta">Generated by <code>quotaledger report --pool</code> from the journal '
        "alone. Audit any decision with <code>"
        + escape(command_line(["audit", "--seq", "N"], words))
        + "</code>.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _pool_charts(timeline: PoolTimeline) -> list[str]:
    points = timeline.points
    if not points:
        return []
    return [
        "<h2>Load by goal against the pool's target, per dimension</h2>",
        '<p class="note">One chart per pool dimension, in its own unit. Each member '
        "goal's own load (its usage in the trailing window or its active runs' "
        "reservations, whichever is larger; no provider report) stacked, in the order the "
        "goals joined; provider used = limit - remaining of the latest live provider "
        "report any member recorded, which counts at the pool once: the pool's load is "
        "the larger of it and the stack. Target and quota lines from the pool's config in "
        "force. Markers along the bottom: the members' admissions (●), refusals (✕, "
        "coloured by the pool dimension that bound them), provider rejections (▲); "
        "shaded: the pool's cooldown.</p>",
        *dense_note(len(points)),
        *(
            svgchart.render(charts.pool_dimension_chart(timeline, d))
            for d in charts.pool_charted_dimensions(timeline)
        ),
    ]


def _pool_single_day(timeline: PoolTimeline) -> str | None:
    points = timeline.points
    times = [format_us(p.at_us) for p in (points[:1] + points[-1:])]
    times += [d.at for d in timeline.decisions] + [at for at, _ in timeline.configs]
    times += [format_us(c.end_us) for c in timeline.cooldowns]
    days = {t[:10] for t in times}
    return days.pop() if len(days) == 1 else None


def _fraction(units: int) -> str:
    return f"{units / SHARE_UNITS:g}"


def members_table(timeline: PoolTimeline) -> str:
    """Each member's terms at the end of the range (a goal that left: none)."""
    if not timeline.members:
        return '<p class="note">No member in range.</p>'
    pool = timeline.state.pools.pools.get(timeline.pool)
    now: dict[str, PoolMember] = dict(pool.members) if pool is not None else {}
    header = ("goal", "share", "borrowing limit", "lending limit", "guaranteed", "priority")
    rows = []
    for goal in timeline.members:
        m = now.get(goal)
        if m is None:
            rows.append("<tr>" + _td(goal) + '<td colspan="5">left the pool</td></tr>')
            continue
        rows.append(
            "<tr>"
            + _td(goal)
            + _td(_fraction(m.share), num=True)
            + _td(_fraction(m.borrowing_limit), num=True)
            + _td(_fraction(m.lending_limit), num=True)
            + _td(_fraction(m.share - m.lending_limit), num=True)
            + _td(m.priority, num=True)
            + "</tr>"
        )
    return _table(header, rows, "members")


def _pool_figures(d: au.RecordedDecision) -> tuple[str, str]:
    """The pool dimension a member's refusal is about (the one that bound it, else the
    first) and its figures."""
    pool = d.figures.pool
    if not isinstance(pool, PoolFigures) or not pool.dimensions:
        return "-", "-"
    binding = pool.binding_dimension
    name = binding if binding is not None else next(iter(pool.dimensions))
    g = pool.dimensions[name]
    label = name.upper() + (" binding" if name == pool.binding_dimension else "")
    figures = (
        f"pool load {_num(g.load)} + forecast {_num(g.forecast)} vs target {_num(g.target)}; "
        f"goal load {_num(g.goal_load)} (share {_num(g.share)}, borrowed {_num(g.borrowed)}); "
        f"others guaranteed {_num(g.protected_others)}; headroom {_num(g.headroom)}"
    )
    return label, figures


def pool_refusals_table(
    refusals: list[au.RecordedDecision], day: str | None, journal: list[str]
) -> str:
    if not refusals:
        return '<p class="note">No refusals in range.</p>'
    header = ("seq", "at", "goal", "run", "reasons", "pool dimension", "figures")
    rows = []
    for d in refusals:
        reasons = "".join(f'<span class="reason">{escape(x)}</span>' for x in d.reasons)
        if d.kind == "capacity.queued":
            reasons = '<span class="queued">queued, waits</span>' + reasons
        label, figures = _pool_figures(d)
        rows.append(
            f'<tr class="refusal" id="seq-{d.seq}">'
            + _td(d.seq, num=True)
            + _time_td(d.at, day)
            + _td(d.goal)
            + _td(d.request.run)
            + f'<td class="wrap">{reasons}</td>'
            + _td(label)
            + _td(figures, wrap=True)
            + "</tr>"
            + f'<tr class="audit"><td colspan="{len(header)}">why: <code class="audit">'
            + escape(audit_line(d.seq, journal))
            + "</code></td></tr>"
        )
    return _table(header, rows, "refusals")


def pool_admissions_table(admissions: list[au.RecordedDecision], day: str | None) -> str:
    if not admissions:
        return '<p class="note">No admissions in range.</p>'
    header = ("seq", "at", "goal", "run", "class", "forecast", "lease")
    rows = []
    for d in admissions:
        r = d.request
        forecasts = ", ".join(
            f"{name} {value}"
            for name, value in (
                ("tpm", r.forecast_tpm),
                ("itpm", r.forecast_itpm),
                ("otpm", r.forecast_otpm),
                ("rpm", r.forecast_rpm),
                ("tokens", r.forecast_tokens),
                ("requests", r.forecast_requests),
            )
            if value is not None
        )
        lease = d.receipt.lease_until if d.receipt is not None else None
        rows.append(
            '<tr class="admission">'
            + _td(d.seq, num=True)
            + _time_td(d.at, day)
            + _td(d.goal)
            + _td(r.run)
            + _td(r.run_class)
            + _td(forecasts or "-")
            + _time_td(lease, day)
            + "</tr>"
        )
    return _table(header, rows, "admissions")


def pool_configs_table(configs: list[tuple[str, PoolConfigured]], day: str | None) -> str:
    if not configs:
        return '<p class="note">No pool configure in range.</p>'
    header = ("at", "dimensions (quota / target)", "cached input weight", "cooldown base / max")
    rows = []
    for at, payload in configs:
        limits = ", ".join(
            f"{name.upper()} {_num(limit.quota)} / {_num(limit.target)}"
            for name, limit in payload.limits.items()
        )
        rows.append(
            "<tr>"
            + _time_td(at, day)
            + _td(limits or "none", wrap=True)
            + _td(f"{payload.cached_input_weight:g}", num=True)
            + _td(f"{payload.cooldown_base_s} s / {payload.cooldown_max_s} s")
            + "</tr>"
        )
    return _table(header, rows, "configs")
