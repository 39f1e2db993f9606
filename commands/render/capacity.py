"""What configure and inspect print."""

from __future__ import annotations

from typing import Any

from msgspec import UnsetType

from quotaledger.projections import capacity as cap
from quotaledger.render import readable
from quotaledger.render.output import table
from quotaledger.render.per_event import cooldown_text, coverage_text, dimension_lines, num
from quotaledger.render.pools import pool_lines, spend_text
from quotaledger.render.queue import queue_lines
from quotaledger.usecases.capacity_state import (
    ConfigureAnswer,
    ConfigView,
    GoalView,
    InspectAnswer,
)


def configure_text(answer: ConfigureAnswer) -> str:
    if not answer.ok:
        assert isinstance(answer.reasons, list) and isinstance(answer.detail, list)
        return (
            f"REFUSED configure {answer.goal}: {', '.join(answer.reasons)} "
            f"({'; '.join(answer.detail)})"
        )
    # What a reconfiguration changed (a first configure's values are all new: the
    # summary says them).
    changed = ", ".join(
        f"{k} {_setting(k, old)} -> {_setting(k, new)}"
        for k, (old, new) in answer.changes.items()
        if old is not None
    )
    text = f"configured {answer.goal}: {config_summary(answer.config)}"
    return text + (f"\n  changed: {changed}" if changed else "")


def _setting(field: str, value: Any) -> str:
    """A config value as people read it: a field in seconds (`_s`) as a duration."""
    if field.endswith("_s") and isinstance(value, int | float):
        return readable.duration_text(value)
    return num(value)


def config_summary(config: ConfigView) -> str:
    parts = []
    cases, tokens = config.cases, config.tokens
    if cases:
        parts.append(
            f"cases target {cases.target_active_cases}/max {cases.max_active_cases} "
            f"(baseline <= {cases.max_baseline_cases}, test <= {cases.max_test_cases}, "
            f"reserved test {cases.reserved_test_cases})"
        )
    if tokens and tokens.quota_tpm is not None:
        parts.append(
            f"tokens target {tokens.target_tpm}/quota {tokens.quota_tpm} TPM "
            f"(evaluator reserve {tokens.evaluator_reserve_tpm}, cold start "
            f"{tokens.cold_start_reserve_tpm}, cached weight {tokens.cached_input_weight})"
        )
    for dimension, limit in (tokens.limits if tokens else {}).items():
        parts.append(
            f"{dimension} target {limit.target}/quota {limit.quota} "
            f"(evaluator reserve {limit.evaluator_reserve}, cold start "
            f"{limit.cold_start_reserve})"
        )
    caps = config.caps
    if not isinstance(caps, UnsetType):
        amounts = [f"{num(caps.cap_tokens)} tokens"] if caps.cap_tokens is not None else []
        amounts += [f"${num(caps.cap_usd)}"] if caps.cap_usd is not None else []
        parts.append(f"spend cap {' and '.join(amounts)} since {caps.cap_since}")
    pool = config.pool
    if isinstance(pool, cap.PoolRef):
        parts.append(
            f"pool {pool.name} share {num(pool.share)} (borrowing limit "
            f"{num(pool.borrowing_limit)}, lending limit {num(pool.lending_limit)})"
        )
    if isinstance(config.priority, int) and config.priority:
        parts.append(f"priority {config.priority}")
    return "; ".join(parts) if parts else "no gate"


def usage_text(goal: GoalView) -> str:
    """The window's tokens by counter, each named when not zero."""
    usage = goal.usage
    parts = [
        f"{label} {num(value)}"
        for label, value in (
            ("uncached", usage.uncached_input),
            ("cached", usage.cached_input),
            ("cache write", usage.cache_write_input),
            ("output", usage.output),
        )
        if value
    ]
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"usage: {num(goal.usage_tpm)} TPM in the last 60 s{detail}"


def inspect_text(answer: InspectAnswer) -> str:
    if isinstance(answer.pools, dict):
        return "\n".join(
            line for name, pool in answer.pools.items() for line in pool_lines(name, pool)
        )
    if not answer.goals:
        return "no goals"
    blocks = []
    for name, goal in answer.goals.items():
        counts = goal.active_counts
        ready = "ready" if goal.admission_ready else "not ready"
        lines = [
            f"goal {name} as of {goal.at}: {ready}, next action {goal.next_action}",
            f"  config: {config_summary(goal.config)}",
            f"  active: {counts.total} (baseline {counts.baseline}, test {counts.test})",
        ]
        if goal.config.tokens is not None:
            lines.append(f"  {usage_text(goal)}")
        lines += ["  " + line for line in dimension_lines(goal.dimensions, None)]
        for dimension, report in goal.provider.items():
            if report.live:
                above = (
                    ", config above provider limit" if report.config_above_provider_limit else ""
                )
                until = "" if report.reset_at is None else f" until {report.reset_at}"
                lines.append(
                    f"  provider {dimension}: {report.remaining} of {report.limit} left"
                    f"{until}{above}"
                )
        lines.append(f"  {coverage_text(goal)}, {cooldown_text(goal.cooldown_until, goal.at)}")
        spend = goal.spend
        if spend.cap_tokens is not None or spend.cap_usd is not None or spend.usd:
            lines.append(f"  {spend_text(spend)}")  # nothing priced nor capped: no line
        if goal.active_runs:
            rows = [
                [
                    r.run,
                    r.case or "-",
                    r.arm or "-",
                    r.class_,
                    num(r.forecast_tpm),
                    r.admitted_at,
                    r.lease_until or "-",
                ]
                for r in goal.active_runs
            ]
            header = ["RUN", "CASE", "ARM", "CLASS", "FORECAST", "ADMITTED_AT", "LEASE_UNTIL"]
            lines.append("    " + table(rows, header).replace("\n", "\n    "))
        lines += queue_lines(goal.queue)
        blocks.append("\n".join(lines))
    return "\n".join(blocks)
