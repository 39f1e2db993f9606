"""Operators' use cases (SPEC §7, §13.2): goals, audit, whatif, report, metrics, validity."""

from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import check_moment, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.usecases.configfields import ConfigFieldsRequest, refuse_out_of_range
from quotaledger.usecases.decode import Answer, Names, Request
from quotaledger.usecases.fields import Goal, Identifier, Rule, Time, TokenCount, UsdAmount
from quotaledger.usecases.out_path import check_out_path

Number = int | float

# -- request fields ----------------------------------------------------------------------


def check_seq(name: str, value: int) -> int:
    if isinstance(value, int) and value < 0:
        raise InvalidInput(f"{name} must be >= 0", code=codes.INVALID_OPTION)
    return value


def check_record_hash(name: str, value: str) -> str:
    if isinstance(value, str) and (len(value) != 64 or value.strip("0123456789abcdef")):
        raise InvalidInput(f"{name} must be 64 lowercase hex digits", code=codes.INVALID_OPTION)
    return value


Seq = Annotated[
    int,
    msgspec.Meta(ge=0, description="A record's seq"),
    Rule(check_seq, code=codes.INVALID_OPTION),
]
RecordHash = Annotated[
    str,
    msgspec.Meta(pattern="^[0-9a-f]{64}$", description="A record's hash (64 lowercase hex)"),
    Rule(check_record_hash, code=codes.INVALID_OPTION),
]
OutFile = Annotated[
    str,
    msgspec.Meta(description="A file to write, in an existing directory"),
    Rule(check_out_path, always=True, code=codes.INVALID_OPTION),
]
"""A file the command writes (replaced atomically): checked before any work."""


def range_us(since: str | None, until: str | None, names: Names) -> tuple[int | None, int | None]:
    """`--since`/`--until` as microseconds; exit 2 if either is malformed or the range
    ends before it starts."""
    since_us, until_us = _moment_us(names("since"), since), _moment_us(names("until"), until)
    if since_us is not None and until_us is not None and until_us < since_us:
        raise InvalidInput(
            f"{names('until')} is before {names('since')}", code=codes.INVALID_OPTION
        )
    return since_us, until_us


def _moment_us(name: str, text: str | None) -> int | None:
    return None if text is None else parse_at(check_moment(name, text))


# -- goals -------------------------------------------------------------------------------


class GoalsRequest(Request):
    """Every goal with an event, now or as of `at`."""

    at: Time | None = None


class Gates(msgspec.Struct):
    cases: bool
    tokens: bool


class GoalSummary(msgspec.Struct, kw_only=True):
    domains: list[str]
    gates: Gates
    dimensions: list[str]
    active_runs: int
    last_event_at: str
    admission_ready: bool
    clock_ahead: bool
    next_action: str | None
    """SPEC §3.5's next action; null for a goal no capacity event names (host or
    settlement work alone), which waits for no capacity configuration, unless its
    clock is ahead (`check_clocks`)."""


class GoalsAnswer(Answer):
    ok: bool
    at: str | None
    goals: dict[str, GoalSummary]


# -- audit -------------------------------------------------------------------------------


class AuditRequest(Request):
    """A journaled decision (by seq, by hash, or a run's latest), re-taken and explained."""

    seq: Seq | None = None
    hash: RecordHash | None = None
    goal: Identifier | None = None
    run: Identifier | None = None

    def one_selector(self) -> bool:
        """Whether exactly one of `seq`, `hash`, or `goal` with `run` is given (the
        audit checks it once the journal is read: a journal that cannot be read is
        reported first)."""
        by_run = self.goal is not None or self.run is not None
        chosen = sum((self.seq is not None, self.hash is not None, by_run))
        return chosen == 1 and (not by_run or (self.goal is not None and self.run is not None))


class AuditEvent(msgspec.Struct, kw_only=True):
    """The journaled decision an audit re-took; a settlement decision's has no run
    (null) and names its agent and turn."""

    seq: int
    hash: str
    kind: str
    at: str
    goal: str | None
    run: str | None
    agent: str | UnsetType | None = UNSET
    turn: str | UnsetType | None = UNSET


class Outcome(msgspec.Struct):
    admitted: bool
    reasons: list[str]


class WindowSample(msgspec.Struct, kw_only=True):
    seq: int
    at: str
    uncached_input: int
    cached_input: int
    output: int
    coverage: str
    leaves_window_at: str


class ContributorUsage(msgspec.Struct):
    uncached_input: int
    cached_input: int
    output: int


class Contributor(msgspec.Struct, kw_only=True):
    run: str | None
    usage_tpm: Number
    usage: ContributorUsage
    share: float | None
    active: bool
    forecast_tpm: int | None
    sample_count: int
    samples: list[WindowSample]


class Reservation(msgspec.Struct, kw_only=True):
    run: str
    case: str | None
    arm: str | None
    run_class: str = msgspec.field(name="class")
    forecast_tpm: int | None
    admitted_at: str
    lease_until: str | None
    seq: int


class Window(msgspec.Struct, kw_only=True):
    start: str = msgspec.field(name="from")
    to: str
    samples: int
    rule: str


class QueueFreedBy(msgspec.Struct):
    """The writer's own event in the transaction that promoted an entry."""

    seq: int
    kind: str


class QueueDecision(msgspec.Struct):
    """One of a queued entry's two decisions, re-taken on the state before it."""

    seq: int
    kind: str
    reproduced: bool
    reasons: list[str]
    differences: list[str]


class QueueExplanation(msgspec.Struct, kw_only=True):
    """A queued request's wait (SPEC §12.5): where it stood when queued, what held it,
    what freed it (null: time alone, the promotion came with no event of its own),
    and its estimate against its actual start."""

    queued_at: str
    position: int | None
    estimated_start_at: str | None
    admitted_at: str | None
    waited_s: Number | None
    held_by: list[str]
    freed_by: QueueFreedBy | None
    started_after_estimate_s: Number | None
    """The actual start minus the estimate given at queue time."""
    left: str | None
    """How it left the queue without an admission (cancelled, released, refused,
    moved; expired when queued anew), null when admitted or still there."""
    decisions: list[QueueDecision]
    """The refusal at queue time and the promotion, each re-taken."""


class Explanation(msgspec.Struct, kw_only=True):
    """Why a decision came out as it did: SPEC §7's keys (the capacity ones null for a
    settlement decision), then a capacity decision's context, or a settlement
    decision's view."""

    binding_constraint: str | None
    binding_dimension: str | UnsetType | None = UNSET
    shortfall_tpm: Number | None
    shortfall: dict[str, Number] | UnsetType = UNSET
    usage_tpm: Number | None
    reserved_tpm: int | None
    load_tpm: Number | None
    target_tpm: int | None
    top_contributors: list[Contributor]
    cooldown_until: str | None
    coverage: str | None
    earliest_admissible_at: str | None
    # A capacity decision's context (SPEC: more keys are welcome).
    reasons: list[str] | UnsetType = UNSET
    usage: cap.UsageParts | UnsetType = UNSET
    headroom_tpm: Number | UnsetType | None = UNSET
    forecast_tpm: int | UnsetType | None = UNSET
    run_class: str | UnsetType = msgspec.field(default=UNSET, name="class")
    available_tpm: int | UnsetType | None = UNSET
    dimensions: dict[cap.Dimension, cap.DimensionFigures] | UnsetType = UNSET
    cold_start_reserve_tpm: int | UnsetType | None = UNSET
    evaluator_reserve_tpm: int | UnsetType | None = UNSET
    quota_tpm: int | UnsetType | None = UNSET
    cooldown_active: bool | UnsetType = UNSET
    observation_stale: bool | UnsetType = UNSET
    last_observation_at: str | UnsetType | None = UNSET
    active_cases: cap.ActiveCases | UnsetType = UNSET
    target_active_cases: int | UnsetType | None = UNSET
    max_active_cases: int | UnsetType | None = UNSET
    spend: cap.SpendFigures | UnsetType = UNSET
    """A capped goal's spend at the decision (SPEC §12.5: `figures.spend`'s shape)."""
    pool: cap.PoolFigures | UnsetType = UNSET
    """A pooled decision's pool figures (SPEC §12.5), its members rebuilt before it."""
    reservations: list[Reservation] | UnsetType = UNSET
    window: Window | UnsetType = UNSET
    idempotent_replay: bool | UnsetType = UNSET
    settlement: dict[str, Any] | UnsetType = UNSET
    """A settlement decision's view, as its command answers it (keys by kind)."""
    queue: QueueExplanation | UnsetType = UNSET
    """A queued request's or a promotion's wait (SPEC §12.5)."""


class AuditAnswer(Answer, kw_only=True):
    """`ok` and `reproduced` are false when the replay differs from the record;
    `replayed_idempotent` only for a settlement decision."""

    ok: bool
    event: AuditEvent
    recorded: Outcome
    replayed: Outcome
    replayed_idempotent: bool | UnsetType = UNSET
    reproduced: bool
    differences: list[str]
    explanation: Explanation
    request: dict[str, Any]
    """The recorded request (a capacity decision's) or payload (a settlement
    decision's): its keys are the recorded event kind's."""
    reasons: list[str] | UnsetType = UNSET


# -- whatif ------------------------------------------------------------------------------


class WhatifRequest(ConfigFieldsRequest, kw_only=True):
    """Replay the goal's recorded admission requests under a changed config (the
    config fields given), over the journal or the range `since`..`until`."""

    goal: Identifier | None = None
    since: Time | None = None
    until: Time | None = None
    cap_tokens: TokenCount | None = None
    """What if the goal had this token cap (SPEC §12.4)."""
    cap_usd: UsdAmount | None = None
    """What if the goal had this dollar cap."""
    pool: Identifier | None = None
    """Replay every member of this pool instead (SPEC §12.1): the quota and target
    fields then change the pool's limits."""
    share: list[str] = msgspec.field(default_factory=list)
    """With `pool`: `G=F`, what if member G had share F."""
    price_model: Identifier | None = None
    """What if this model had been priced so (the price flags, as `price set` takes
    them) from the start of the replay: its recorded prices there are not used."""
    input_usd_per_mtok: UsdAmount | None = None
    """With `price_model`: US dollars per million input tokens."""
    output_usd_per_mtok: UsdAmount | None = None
    """With `price_model`: US dollars per million output tokens."""
    cached_input_usd_per_mtok: UsdAmount | None = None
    """With `price_model`: per million cached input tokens [default: the input price]."""
    cache_write_usd_per_mtok: UsdAmount | None = None
    """With `price_model`: per million cache-write tokens [default: the input price]."""

    INVALID = "the what-if config is invalid: "

    def check(self, names: Callable[[str], str]) -> None:
        # Every face: an override out of its range is refused even where it would not
        # apply (a dimension the goal does not configure), never silently ignored.
        if self.goal is not None and self.pool is not None:
            raise InvalidInput(
                lambda name: f"give {name('goal')} or {name('pool')}, not both",
                code=codes.INVALID_OPTION,
                about=("goal", "pool"),
            )
        if self.pool is None and self.share:
            raise InvalidInput(
                lambda name: f"{name('share')} goes with {name('pool')}",
                code=codes.INVALID_OPTION,
                about=("share", "pool"),
            )
        shares_of(self.share)
        self.price_override()
        refuse_out_of_range(self, self.INVALID)
        range_us(self.since, self.until, names)

    def price_override(self) -> cap.PriceSet | None:
        """The what-if price (SPEC §12.5), defaults as `price set`'s; the price flags go
        with `price_model`, which needs the input and output prices (exit 2)."""
        given = [name for name in cap.PRICE_FIELDS if getattr(self, name) is not None]
        if self.price_model is None:
            if given:
                raise InvalidInput(
                    lambda name: f"{name(given[0])} goes with {name('price_model')}",
                    code=codes.INVALID_OPTION,
                    about=(given[0], "price_model"),
                )
            return None
        missing = [
            name
            for name in ("input_usd_per_mtok", "output_usd_per_mtok")
            if getattr(self, name) is None
        ]
        if missing:
            raise InvalidInput(
                lambda name: f"{name('price_model')} needs {name(missing[0])}",
                code=codes.INVALID_OPTION,
                about=("price_model", missing[0]),
            )
        figures = {name: getattr(self, name) for name in cap.PRICE_FIELDS}
        for name in ("cached_input_usd_per_mtok", "cache_write_usd_per_mtok"):
            if figures[name] is None:
                figures[name] = figures["input_usd_per_mtok"]
        for name, value in figures.items():
            if cap.micro_of(value) is None:
                raise InvalidInput(
                    lambda n, v=value: (
                        f"{n} must be dollars from 0 with at most 6 decimals, got {v!r}"
                    ),
                    code=codes.INVALID_USD,
                    about=name,
                )
        exact = {name: cap.usd_number(cap.micro_of(v) or 0) for name, v in figures.items()}
        return cap.PriceSet(model=self.price_model, **exact)


def shares_of(given: list[str]) -> dict[str, int]:
    """`G=F` pairs as goal -> share in units of 10^-4 (`invalid_pool_share`)."""
    found: dict[str, int] = {}
    for pair in given:
        goal, _, fraction = pair.partition("=")
        try:
            value = float(fraction)
        except ValueError:
            value = -1.0
        units = cap.share_units(value) if 0 <= value <= 1 else None
        if not goal or units is None:
            raise InvalidInput(
                lambda name, p=pair: (
                    f"{name} takes GOAL=FRACTION (0..1, at most 4 places), got {p!r}"
                ),
                code=codes.INVALID_POOL_SHARE,
                about="share",
            )
        found[goal] = units
    return found


class Flip(msgspec.Struct, kw_only=True, omit_defaults=True):
    seq: int
    goal: str | UnsetType = UNSET
    """The member that flipped (`whatif --pool`)."""
    run: str
    at: str
    recorded_admitted: bool
    whatif_admitted: bool
    whatif_reasons: list[str]
    recorded_reasons: list[str]
    whatif_idempotent: bool


class PromotionFlip(msgspec.Struct, kw_only=True):
    """A queued entry whose start the replay moves (SPEC §12.5, §12.2): admitted at
    once, later, earlier, or never within the range (null)."""

    seq: int
    """Its `capacity.queued` event."""
    goal: str
    run: str
    queued_at: str
    recorded_admitted_at: str | None
    whatif_admitted_at: str | None
    whatif_reasons: list[str]
    """What held it in the replay when it started later or never; [] otherwise."""


class Range(msgspec.Struct):
    start: str | None = msgspec.field(name="from")
    end: str | None = msgspec.field(name="to")


class WhatifAnswer(Answer):
    ok: bool
    goal: str | None
    assumptions: list[str]
    decisions: int
    flips: list[Flip]
    changes: dict[str, Number]
    range: Range
    pool: str | UnsetType = UNSET
    promotions: list[PromotionFlip] | UnsetType = UNSET
    """The queued entries whose start the replay moves (SPEC §12.5)."""


# -- report ------------------------------------------------------------------------------


class ReportRequest(Request):
    """Write the goal's (or the pool's) self-contained offline HTML report to `out`."""

    out: OutFile
    goal: Identifier | None = None
    since: Time | None = None
    until: Time | None = None
    pool: Identifier | None = None
    """The pool's report instead (SPEC §12.1): each dimension's load stacked by goal."""

    def check(self, names: Callable[[str], str]) -> None:
        one_of_goal_or_pool(self.goal, self.pool, names)
        range_us(self.since, self.until, names)


def one_of_goal_or_pool(goal: str | None, pool: str | None, names: Callable[[str], str]) -> None:
    """Exactly one of `goal` and `pool` (exit 2 otherwise)."""
    if (goal is None) == (pool is None):
        either = "not both" if goal is not None else "whose report to write"
        raise InvalidInput(
            lambda name: f"give {name('goal')} or {name('pool')}, {either}",
            code=codes.INVALID_OPTION,
            about=("goal", "pool"),
        )


class ReportAnswer(Answer):
    ok: bool
    goal: str | None
    out: str
    bytes: int
    points: int
    decisions: int
    admissions: int
    refusals: int
    rejections: int
    pool: str | UnsetType = UNSET


# -- validity ----------------------------------------------------------------------------


class ValidityRequest(Request):
    """One row per run of the goal, with the verdict on whether quota touched its result."""

    goal: Goal
    since: Annotated[
        Time | None,
        msgspec.Meta(description="Only runs whose first event is at or after this time."),
    ] = None
    until: Annotated[
        Time | None,
        msgspec.Meta(description="Only runs whose first event is at or before this time."),
    ] = None

    def check(self, names: Callable[[str], str]) -> None:
        range_us(self.since, self.until, names)


class RunTokens(msgspec.Struct, kw_only=True):
    """Raw counters of every observation naming the run."""

    uncached_input: int
    cached_input: int
    cache_write_input: int
    output: int


class RunHost(msgspec.Struct, kw_only=True):
    """The host lane of the run's name (SPEC §4)."""

    lane: str
    attempts: int
    last_outcome: str | None
    last_failure: str | None
    quota_failures: int
    continued: int


class ValidityRun(msgspec.Struct, kw_only=True):
    run: str
    case: str | None
    arm: str | None
    queued_at: str | None
    admitted_at: str | None
    released_at: str | None
    waited_s: Number | None
    tokens: RunTokens
    rejections: int
    host: RunHost | None
    verdict: str


class ValidityAnswer(Answer):
    ok: bool
    goal: str
    counts: dict[str, int]
    """Every verdict (all five, in their order of precedence) and its number of runs."""
    runs: list[ValidityRun]


# -- metrics -----------------------------------------------------------------------------


class MetricsRequest(Request):
    """The state now (or as of `at`) as Prometheus metrics, of every goal or one; with
    `out`, also written there in the text format, atomically."""

    goal: Identifier | None = None
    at: Time | None = None
    out: OutFile | None = None


class MetricSample(msgspec.Struct, omit_defaults=True):
    labels: dict[str, str]
    value: Number | None
    suffix: str = ""
    """A histogram's sample: `_bucket`, `_sum` or `_count` after the family's name."""


class MetricFamily(msgspec.Struct):
    type: str
    help: str
    samples: list[MetricSample] = msgspec.field(default_factory=list)


class MetricsAnswer(Answer):
    """`out` and `bytes` only when written to a file."""

    ok: bool
    at: str | None
    goals: list[str]
    metrics: dict[str, MetricFamily]
    out: str | UnsetType = UNSET
    bytes: int | UnsetType = UNSET
