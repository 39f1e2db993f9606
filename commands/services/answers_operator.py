"""The operator's answer shapes (SPEC §7): goals, audit, whatif, report, metrics.

As in `answers`: each TypedDict lists its keys in the order the answer is built and
printed. Usage, figures, requests and metric families stay `dict[str, Any]`: their
keys come from the projection's Structs, checked there.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from quotaledger.services.answers import Number, SettlementView

# -- goals ---------------------------------------------------------------------------


class GatesJson(TypedDict):
    cases: bool
    tokens: bool


class GoalSummaryJson(TypedDict):
    domains: list[str]
    gates: GatesJson
    dimensions: list[str]
    active_runs: int
    last_event_at: str
    admission_ready: bool
    next_action: str


class GoalsAnswer(TypedDict):
    ok: bool
    at: str | None
    goals: dict[str, GoalSummaryJson]


# -- audit ---------------------------------------------------------------------------


class SampleJson(TypedDict):
    seq: int
    at: str
    uncached_input: int
    cached_input: int
    output: int
    coverage: str
    leaves_window_at: str


class ContributorUsageJson(TypedDict):
    uncached_input: int
    cached_input: int
    output: int


class ContributorJson(TypedDict):
    run: str | None
    usage_tpm: Number
    usage: ContributorUsageJson
    share: float | None
    active: bool
    forecast_tpm: int | None
    sample_count: int
    samples: list[SampleJson]


ReservationJson = TypedDict(
    "ReservationJson",
    {
        "run": str,
        "case": str | None,
        "arm": str | None,
        "class": str,  # a keyword: hence this form
        "forecast_tpm": int | None,
        "admitted_at": str,
        "lease_until": str | None,
        "seq": int,
    },
)

WindowJson = TypedDict("WindowJson", {"from": str, "to": str, "samples": int, "rule": str})

ExplanationJson = TypedDict(
    "ExplanationJson",
    {
        # SPEC §7's keys, in its order
        "binding_constraint": str | None,
        "binding_dimension": str | None,
        "shortfall_tpm": Number | None,
        "shortfall": dict[str, Number],
        "usage_tpm": Number,
        "reserved_tpm": int,
        "load_tpm": Number,
        "target_tpm": int | None,
        "top_contributors": list[ContributorJson],
        "cooldown_until": str | None,
        "coverage": str,
        "earliest_admissible_at": str | None,
        # more context
        "reasons": list[str],
        "usage": dict[str, Any],
        "headroom_tpm": Number | None,
        "forecast_tpm": int | None,
        "class": str,
        "available_tpm": int | None,
        "dimensions": dict[str, Any],
        "cold_start_reserve_tpm": int | None,
        "evaluator_reserve_tpm": int | None,
        "quota_tpm": int | None,
        "cooldown_active": bool,
        "observation_stale": bool,
        "last_observation_at": str | None,
        "active_cases": dict[str, Any],
        "target_active_cases": int | None,
        "max_active_cases": int | None,
        "reservations": list[ReservationJson],
        "window": WindowJson,
        "idempotent_replay": bool,
    },
)
"""Why a capacity decision came out as it did (SPEC §7's `explanation`, plus context)."""


class RecordedEventJson(TypedDict):
    """The journaled decision an audit re-took."""

    seq: int
    hash: str
    kind: str
    at: str
    goal: str
    run: str


class SettlementEventJson(TypedDict):
    """The journaled settlement event an audit re-took (`run` always null)."""

    seq: int
    hash: str
    kind: str
    at: str
    goal: str | None
    run: None
    agent: Any
    turn: Any


class OutcomeJson(TypedDict):
    admitted: bool
    reasons: list[str]


class SettlementExplanationJson(TypedDict):
    """SPEC §7's explanation keys (the capacity ones null) and the settlement view."""

    binding_constraint: str | None
    shortfall_tpm: None
    usage_tpm: None
    reserved_tpm: None
    load_tpm: None
    target_tpm: None
    top_contributors: list[ContributorJson]
    cooldown_until: None
    coverage: None
    earliest_admissible_at: str | None
    settlement: SettlementView


class CapacityAuditAnswer(TypedDict):
    ok: bool
    event: RecordedEventJson
    recorded: OutcomeJson
    replayed: OutcomeJson
    reproduced: bool
    differences: list[str]
    explanation: ExplanationJson
    request: dict[str, Any]
    reasons: NotRequired[list[str]]


class SettlementAuditAnswer(TypedDict):
    ok: bool
    event: SettlementEventJson
    recorded: OutcomeJson
    replayed: OutcomeJson
    replayed_idempotent: bool
    reproduced: bool
    differences: list[str]
    explanation: SettlementExplanationJson
    request: dict[str, Any]
    reasons: NotRequired[list[str]]


# -- whatif --------------------------------------------------------------------------


class FlipJson(TypedDict):
    seq: int
    run: str
    at: str
    recorded_admitted: bool
    whatif_admitted: bool
    whatif_reasons: list[str]
    recorded_reasons: list[str]
    whatif_idempotent: bool


RangeJson = TypedDict("RangeJson", {"from": str | None, "to": str | None})  # `from`: a keyword


class WhatIfAnswer(TypedDict):
    ok: bool
    goal: str
    assumptions: list[str]
    decisions: int
    flips: list[FlipJson]
    changes: dict[str, Any]
    range: RangeJson


# -- report --------------------------------------------------------------------------


class ReportAnswer(TypedDict):
    ok: bool
    goal: str
    out: str
    bytes: int
    points: int
    decisions: int
    admissions: int
    refusals: int
    rejections: int


# -- metrics -------------------------------------------------------------------------


class MetricsAnswer(TypedDict):
    """`metrics`: `out` and `bytes` only when written to a file."""

    ok: bool
    at: str | None
    goals: list[str]
    metrics: dict[str, dict[str, Any]]
    out: NotRequired[str]
    bytes: NotRequired[int]
