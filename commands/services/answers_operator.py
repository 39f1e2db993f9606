"""The operator's answer shapes (SPEC §7): goals, audit, whatif, metrics.

As in `answers`: each TypedDict lists its keys in the order the answer is built and
printed. `explanation` (a capacity audit's), requests and metric families stay
`dict[str, Any]`: their keys come from the projection's Structs, checked there.
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
    explanation: dict[str, Any]
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


# -- metrics -------------------------------------------------------------------------


class MetricsAnswer(TypedDict):
    """`metrics`: `out` and `bytes` only when written to a file."""

    ok: bool
    at: str | None
    goals: list[str]
    metrics: dict[str, dict[str, Any]]
    out: NotRequired[str]
    bytes: NotRequired[int]
