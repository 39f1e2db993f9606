"""The metric families of `metrics` (SPEC §7, §12.2, §12.4): every goal's, its queue's
and its spend's, by name, kind and help text (the pools' are `pool_metrics`')."""

from __future__ import annotations

from quotaledger.usecases.operator import MetricFamily

FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        "quotaledger_usage_tpm",
        "gauge",
        "Raw tokens observed in the trailing 60 s window, by counter.",
    ),
    (
        "quotaledger_usage_weighted_tpm",
        "gauge",
        "Tokens in the window that count against the quota (cached input weighted).",
    ),
    ("quotaledger_reserved_tpm", "gauge", "Sum of the forecasts of the active runs."),
    (
        "quotaledger_load",
        "gauge",
        "Per configured dimension: max(usage, reserved, provider-reported use).",
    ),
    ("quotaledger_target", "gauge", "Per configured dimension: the target admission fills."),
    (
        "quotaledger_provider_remaining",
        "gauge",
        "Per dimension: what the provider's live report says remains.",
    ),
    ("quotaledger_load_tpm", "gauge", "max(weighted usage, reserved): what admission compares."),
    ("quotaledger_target_tpm", "gauge", "The token gate's target (absent without a token gate)."),
    ("quotaledger_quota_tpm", "gauge", "The provider quota (absent without a token gate)."),
    (
        "quotaledger_headroom_tpm",
        "gauge",
        "Largest forecast a run of this class could be admitted with now (may be negative).",
    ),
    (
        "quotaledger_active_runs",
        "gauge",
        "Active runs by group (baseline, test; total counts every active run).",
    ),
    (
        "quotaledger_cooldown_remaining_seconds",
        "gauge",
        "Seconds until the provider-rejection cooldown ends (0 when none is active).",
    ),
    ("quotaledger_observation_stale", "gauge", "1 when the latest metered observation is stale."),
    ("quotaledger_usage_unmetered", "gauge", "1 when an unmetered sample is in the window."),
    ("quotaledger_admission_ready", "gauge", "1 when a 1 TPM solver run would be admitted now."),
    ("quotaledger_admissions_total", "counter", "Admissions journaled (capacity.admitted)."),
    (
        "quotaledger_refusals_total",
        "counter",
        "Refusals journaled, by reason (a refusal with two reasons counts under both).",
    ),
    ("quotaledger_refusal_events_total", "counter", "Refusal events journaled (capacity.refused)."),
    ("quotaledger_rejections_total", "counter", "Provider rejections (429) recorded."),
    ("quotaledger_releases_total", "counter", "Runs released."),
    (
        "quotaledger_spend_tokens_total",
        "counter",
        "Tokens spent (summed as tpm) since the caps' cap_since; all of them without a cap.",
    ),
    (
        "quotaledger_spend_usd_total",
        "counter",
        "US dollars of the priced observations since cap_since; all of them without a cap.",
    ),
    ("quotaledger_spend_cap", "gauge", "A spend cap, by unit (tokens, usd)."),
    ("quotaledger_queue_length", "gauge", "Entries waiting in the queue now."),
    (
        "quotaledger_queue_oldest_seconds",
        "gauge",
        "Seconds the oldest entry waiting in the queue has waited (0 when none waits).",
    ),
    (
        "quotaledger_queue_wait_seconds",
        "histogram",
        "Seconds each entry admitted from the queue waited, from queued to admitted.",
    ),
    ("quotaledger_journal_head_seq", "gauge", "Sequence number of the journal's last record."),
)


def metric_families() -> dict[str, MetricFamily]:
    return {name: MetricFamily(kind, help_text) for name, kind, help_text in FAMILIES}
