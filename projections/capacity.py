"""Capacity admission (SPEC §3): events, the per-goal fold, and the admission decision.

A goal composes two optional gates: the case gate (how many runs may be active) and
the token gate (a tokens-per-minute envelope over a trailing 60 s window). The fold
(`apply`) only records what happened; every question about a moment — usage, load,
coverage, active runs, cooldown — is answered by pure functions of a goal's state and
a time `at_us` (`evaluate`, `usage_at`, `active_runs_at`, `decide_admission`). The same
functions serve `admit`, `inspect`, `audit` and `whatif`, so an audit that rebuilds
the state just before a decision and re-runs `decide_admission` with the recorded
request and time gets the very answer the live command got.

"As of t" questions are valid for any t at or after the goal's latest folded event:
the fold prunes only what no such question can need (samples at or before
`latest - 60 s`, runs whose lease ended at or before `latest`).

Times in the state are integer microseconds since the epoch (`*_us`); times in
payloads and in results are canonical RFC 3339 strings.
"""

import bisect
import math
import operator
from typing import Annotated, Any, Literal

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import US_PER_S, format_us, format_us_or_none, parse_at
from quotaledger.projections import reasons as R
from quotaledger.projections.decision import Decision
from quotaledger.projections.types import (
    IDENTIFIERS_KNOWN,
    TEXT_CHARS_ALWAYS_FIT,
    CanonicalAt,
    FreeText,
    Identifier,
    Payload,
    StateStruct,
    TokenCount,
    check_identifier,
    check_text,
)

VERSION = "3"

WINDOW_US = 60 * US_PER_S
"""The usage window: a sample counts at t while t - 60 s < at <= t."""

CASES_MAX = 1024
QUOTA_TPM_MAX = 10**12
COOLDOWN_S_LIMIT = 86_400
"""`cooldown_max_s` may not exceed a day (SPEC §3.1)."""
OBSERVATION_AGE_S_MAX = 86_400
LEASE_S_MAX = 366 * 86_400
RETRY_AFTER_S_MAX = 10**9
USAGE_DECIMALS = 6
"""Weighted usage is rounded so that float noise never flips a decision."""

DEFAULT_TARGET_FRACTION = (9, 10)
DEFAULT_MAX_OBSERVATION_AGE_S = 60
DEFAULT_COOLDOWN_BASE_S = 15
DEFAULT_COOLDOWN_MAX_S = 300

Coverage = Literal["measured", "estimated", "unmetered"]
Dimension = Literal["tpm", "itpm", "otpm", "rpm"]
LimitDimension = Literal["itpm", "otpm", "rpm"]
"""The dimensions configured under TokenConfig.limits (tpm is TokenConfig's own fields)."""
Arm = Literal["baseline", "control", "treatment", "explore"]
RunClass = Literal["solver", "evaluator"]
Group = Literal["baseline", "test"]

COVERAGES: tuple[str, ...] = ("measured", "estimated", "unmetered")
DIMENSIONS: tuple[Dimension, ...] = ("tpm", "itpm", "otpm", "rpm")
"""Every dimension of the token gate, in the order its reasons are reported (SPEC §3.6)."""
LIMIT_DIMENSIONS: tuple[LimitDimension, ...] = ("itpm", "otpm", "rpm")
ARMS: tuple[str, ...] = ("baseline", "control", "treatment", "explore")
RUN_CLASSES: tuple[str, ...] = ("solver", "evaluator")
ARM_GROUP: dict[str, Group] = {
    "baseline": "baseline",
    "control": "test",
    "treatment": "test",
    "explore": "test",
}

Number = int | float
Range = tuple[Number, Number]
"""The lowest and highest value a field takes, both included."""

CONFIG_RANGES: dict[str, Range] = {
    "max_active_cases": (1, CASES_MAX),
    "target_active_cases": (0, CASES_MAX),
    "max_baseline_cases": (0, CASES_MAX),
    "max_test_cases": (0, CASES_MAX),
    "reserved_test_cases": (0, CASES_MAX),
    "quota_tpm": (1, QUOTA_TPM_MAX),
    "target_tpm": (0, QUOTA_TPM_MAX),
    "evaluator_reserve_tpm": (0, QUOTA_TPM_MAX),
    "cold_start_reserve_tpm": (0, QUOTA_TPM_MAX),
    "cached_input_weight": (0.0, 1.0),
    "max_observation_age_s": (0, OBSERVATION_AGE_S_MAX),
    "cooldown_base_s": (0, COOLDOWN_S_LIMIT),
    "cooldown_max_s": (0, COOLDOWN_S_LIMIT),
}
"""Each config field's range (SPEC §3.1), stated once: the Structs' field constraints
and `*_config_problems` both read it."""
LIMIT_RANGES: dict[str, Range] = {
    "quota": (1, QUOTA_TPM_MAX),
    "target": (0, QUOTA_TPM_MAX),
    "evaluator_reserve": (0, QUOTA_TPM_MAX),
    "cold_start_reserve": (0, QUOTA_TPM_MAX),
}
"""The range of each field of a dimension's limit (SPEC §3.6), under `limits`."""


def _range_of(field: str, ranges: dict[str, Range] = CONFIG_RANGES) -> msgspec.Meta:
    """The field's range from `ranges`, as the constraint msgspec checks on decode."""
    low, high = ranges[field]
    return msgspec.Meta(ge=low, le=high)


Seconds = Annotated[int, msgspec.Meta(ge=0, le=10**9)]
FractionalSeconds = (
    Annotated[int, msgspec.Meta(ge=0, le=RETRY_AFTER_S_MAX)]
    | Annotated[float, msgspec.Meta(ge=0.0, le=RETRY_AFTER_S_MAX)]
)
"""Seconds that may be fractional (a Retry-After of 1.5 s); an integer stays an integer."""


# -- configuration -------------------------------------------------------------------


class CaseConfig(Payload, frozen=True):
    """The concurrency envelope: how many runs may be active, by group."""

    max_active_cases: Annotated[int, _range_of("max_active_cases")]
    target_active_cases: Annotated[int, _range_of("target_active_cases")]
    max_baseline_cases: Annotated[int, _range_of("max_baseline_cases")]
    max_test_cases: Annotated[int, _range_of("max_test_cases")]
    reserved_test_cases: Annotated[int, _range_of("reserved_test_cases")]

    def __post_init__(self) -> None:
        problems = case_config_problems(self)
        if problems:
            raise ValueError("; ".join(problems))


class DimensionLimit(Payload, frozen=True):
    """One more dimension's envelope (itpm, otpm or rpm), per minute (SPEC §3.6)."""

    quota: Annotated[int, _range_of("quota", LIMIT_RANGES)]
    target: Annotated[int, _range_of("target", LIMIT_RANGES)]
    evaluator_reserve: Annotated[int, _range_of("evaluator_reserve", LIMIT_RANGES)]
    cold_start_reserve: Annotated[int, _range_of("cold_start_reserve", LIMIT_RANGES)]
    # Checked by TokenConfig.__post_init__, which names the dimension in its messages.


class TokenConfig(Payload, frozen=True, omit_defaults=True):
    """The token gate: the combined TPM envelope (its own fields) and, under `limits`, the
    other dimensions providers enforce. Rates per minute, durations in seconds.

    `quota_tpm` (and with it `target_tpm`) is null when only `limits` are configured.
    `omit_defaults`: a config without limits encodes as it did before they existed.
    """

    quota_tpm: Annotated[int, _range_of("quota_tpm")] | None
    target_tpm: Annotated[int, _range_of("target_tpm")] | None
    evaluator_reserve_tpm: Annotated[int, _range_of("evaluator_reserve_tpm")]
    cold_start_reserve_tpm: Annotated[int, _range_of("cold_start_reserve_tpm")]
    cached_input_weight: Annotated[float, _range_of("cached_input_weight")]
    max_observation_age_s: Annotated[int, _range_of("max_observation_age_s")]
    cooldown_base_s: Annotated[int, _range_of("cooldown_base_s")]
    cooldown_max_s: Annotated[int, _range_of("cooldown_max_s")]
    limits: dict[LimitDimension, DimensionLimit] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = token_config_problems(self)
        if problems:
            raise ValueError("; ".join(problems))


# The config fields by gate, in declaration order (`configrule` flattens them).
CASE_FIELDS: tuple[str, ...] = CaseConfig.__struct_fields__
TOKEN_FIELDS: tuple[str, ...] = tuple(f for f in TokenConfig.__struct_fields__ if f != "limits")
LIMIT_PARTS: tuple[str, ...] = DimensionLimit.__struct_fields__
"""A dimension's fields under `limits`; `configure` takes them as `--{part}-{dimension}`."""

# The range tables name exactly the configs' fields, in their order.
assert tuple(CONFIG_RANGES) == CASE_FIELDS + TOKEN_FIELDS
assert tuple(LIMIT_RANGES) == LIMIT_PARTS
assert TOKEN_FIELDS[:2] == ("quota_tpm", "target_tpm")


def _range_problem(
    name: str,
    value: Number,
    field: str | None = None,
    ranges: dict[str, Range] = CONFIG_RANGES,
) -> list[str]:
    """The problem of a value outside its field's range (`field`, or `name` itself)."""
    low, high = ranges[name if field is None else field]
    if isinstance(value, bool) or not low <= value <= high:
        return [f"{name} must be from {low} to {high}, got {value}"]
    return []


def case_config_problems(c: CaseConfig) -> list[str]:
    """Every rule of SPEC §3.1 the case config breaks (empty when valid)."""
    problems = [p for name in CASE_FIELDS for p in _range_problem(name, getattr(c, name))]
    if problems:
        return problems
    return _broken_rules(
        ("target_active_cases", c.target_active_cases, "max_active_cases", c.max_active_cases),
        ("max_baseline_cases", c.max_baseline_cases, "max_active_cases", c.max_active_cases),
        ("max_test_cases", c.max_test_cases, "max_active_cases", c.max_active_cases),
        ("reserved_test_cases", c.reserved_test_cases, "max_test_cases", c.max_test_cases),
        ("reserved_test_cases", c.reserved_test_cases, "max_active_cases", c.max_active_cases),
        (
            "target_active_cases",
            c.target_active_cases,
            "max_baseline_cases + max_test_cases",
            c.max_baseline_cases + c.max_test_cases,
        ),
    )


def token_config_problems(t: TokenConfig) -> list[str]:
    """Every rule of SPEC §3.1 and §3.6 the token config breaks (empty when valid)."""
    problems: list[str] = []
    if t.quota_tpm is None:
        if not t.limits:
            problems.append("the token gate needs quota_tpm or another dimension's quota")
        if t.target_tpm is not None:
            problems.append("target_tpm needs quota_tpm")
        if t.evaluator_reserve_tpm or t.cold_start_reserve_tpm:
            problems.append("evaluator_reserve_tpm and cold_start_reserve_tpm need quota_tpm")
    else:
        problems += _range_problem("quota_tpm", t.quota_tpm)
        if t.target_tpm is None:
            problems.append("target_tpm is required with quota_tpm")
        else:
            problems += _range_problem("target_tpm", t.target_tpm)
    for name in TOKEN_FIELDS[2:]:  # the fields after quota_tpm and target_tpm
        problems += _range_problem(name, getattr(t, name))
    for dimension, limit in t.limits.items():
        problems += dimension_limit_problems(dimension, limit)
    if problems or t.quota_tpm is None or t.target_tpm is None:
        return problems
    return _broken_rules(
        ("target_tpm", t.target_tpm, "quota_tpm", t.quota_tpm),
        (
            "evaluator_reserve_tpm + cold_start_reserve_tpm",
            t.evaluator_reserve_tpm + t.cold_start_reserve_tpm,
            "target_tpm",
            t.target_tpm,
        ),
    )


def dimension_limit_problems(dimension: str, d: DimensionLimit) -> list[str]:
    """Every rule of SPEC §3.6 one dimension's limit breaks, named by its config fields."""

    def name(field: str) -> str:
        return f"{field}_{dimension}"

    problems = [
        p
        for field in LIMIT_PARTS
        for p in _range_problem(name(field), getattr(d, field), field, LIMIT_RANGES)
    ]
    if problems:
        return problems
    return _broken_rules(
        (name("target"), d.target, name("quota"), d.quota),
        (
            f"{name('evaluator_reserve')} + {name('cold_start_reserve')}",
            d.evaluator_reserve + d.cold_start_reserve,
            name("target"),
            d.target,
        ),
    )


def _broken_rules(*rules: tuple[str, int, str, int]) -> list[str]:
    """Messages for every `left <= right` rule that does not hold."""
    return [
        f"{left} ({lvalue}) must be <= {right} ({rvalue})"
        for left, lvalue, right, rvalue in rules
        if lvalue > rvalue
    ]


def default_target_tpm(quota_tpm: int) -> int:
    """SPEC §3.1: the target defaults to 90% of the quota (rounded down)."""
    numerator, denominator = DEFAULT_TARGET_FRACTION
    return quota_tpm * numerator // denominator


# -- event payloads (SPEC §3.1) --------------------------------------------------------


class UsageParts(Payload, frozen=True, kw_only=True):
    """Raw (unweighted) token counts in the window, kept disjoint."""

    uncached_input: int
    cached_input: int
    cache_write_input: int = 0  # absent from figures written before it existed
    output: int


class ActiveCases(Payload, frozen=True):
    total: int
    baseline: int
    test: int


class AdmitRequest(Payload, frozen=True, omit_defaults=True):
    """What `admit` was asked. `omit_defaults`: only the members added after the first
    version have defaults, so a request without them encodes as it always did."""

    run: Identifier
    case: Identifier | None
    arm: Arm | None
    run_class: RunClass = msgspec.field(name="class")
    forecast_tpm: TokenCount | None
    lease_s: Annotated[int, msgspec.Meta(ge=1, le=LEASE_S_MAX)] | None
    forecast_itpm: TokenCount | None = None
    forecast_otpm: TokenCount | None = None
    forecast_rpm: TokenCount | None = None


class DimensionFigures(Payload, frozen=True):
    """One dimension's numbers in a decision (SPEC §3.6)."""

    usage: Number
    reserved: int
    provider_used: int | None
    """limit - remaining of the provider's live report, or null when none is live."""
    load: Number
    target: int
    headroom: Number
    """For the request's class: target - evaluator reserve (solvers) - cold start - load."""
    forecast: int | None


class ProviderLimit(Payload, frozen=True):
    """What a provider reported of one dimension in a response's headers (SPEC §3.6)."""

    limit: TokenCount | None
    remaining: TokenCount | None
    reset_at: CanonicalAt | None


ProviderReport = dict[Dimension, ProviderLimit]


class Figures(Payload, frozen=True, kw_only=True):
    """The numbers a decision used, as of its time."""

    usage_tpm: Number
    usage: UsageParts
    reserved_tpm: int
    load_tpm: Number
    target_tpm: int | None
    headroom_tpm: Number | None
    """For the request's class: target - evaluator reserve (solvers) - cold start - load."""
    forecast_tpm: int | None
    coverage: Coverage
    # Defaults only for members beyond SPEC §3.3's list: quotaledger always writes them
    # (in this order; the encoder writes defaults too), but figures written elsewhere
    # from the spec's list still decode.
    observation_stale: bool = False
    last_observation_at: CanonicalAt | None = None
    cooldown_until: CanonicalAt | None
    active_cases: ActiveCases
    target_active_cases: int | None = None
    max_active_cases: int | None = None
    quota_tpm: int | None = None
    evaluator_reserve_tpm: int | None = None
    cold_start_reserve_tpm: int | None = None
    dimensions: dict[Dimension, DimensionFigures] = msgspec.field(default_factory=dict)
    binding_dimension: Dimension | None = None


class Receipt(Figures, frozen=True, kw_only=True):
    """An admission's figures plus what it took. The event's seq and hash are added
    when it is presented (a record cannot contain its own hash)."""

    run: Identifier
    at: CanonicalAt
    cases: Literal["slot_taken", "not_configured"]
    tokens: Literal["reserved", "not_configured"]
    lease_until: CanonicalAt | None = None  # the fold takes leases from the request


ConfigFieldName = Annotated[str, msgspec.Meta(pattern=r"^[a-z_]{1,64}\Z")]


class CapacityConfigured(Payload, frozen=True, omit_defaults=True):
    """The goal's full new config. `explicit` names every config field (as `configure`
    takes it) set explicitly by this or an earlier configure and not since removed:
    a field not in it is a derived default that follows its source (SPEC §3.5).

    `omit_defaults` here and on the payloads below: only the members added after the
    first version have defaults, so an event without them encodes as it always did.
    """

    cases: CaseConfig | None
    tokens: TokenConfig | None
    explicit: list[ConfigFieldName] = msgspec.field(default_factory=list)


class CapacityObserved(Payload, frozen=True, kw_only=True, omit_defaults=True):
    run: Identifier | None
    uncached_input: TokenCount
    cached_input: TokenCount
    cache_write_input: TokenCount = 0
    output: TokenCount
    requests: TokenCount | None
    coverage: Coverage
    source: FreeText | None
    provider: ProviderReport | None = None

    def __post_init__(self) -> None:
        # Payload.__post_init__'s checks of this kind's fields (run, source; the
        # provider's times are ProviderLimit's), written out: most events are
        # observations, and the generic loop over the fields costs three times as
        # much. tests/capacity/test_value_rules.py holds the two to the same verdict.
        run = self.run
        if run is not None and run not in IDENTIFIERS_KNOWN:
            check_identifier("run", run)
        source = self.source
        if source is not None and len(source) > TEXT_CHARS_ALWAYS_FIT:
            check_text("source", source)


class CapacityAdmitted(Payload, frozen=True):
    request: AdmitRequest
    receipt: Receipt


class CapacityRefused(Payload, frozen=True):
    request: AdmitRequest
    reasons: list[Annotated[str, msgspec.Meta(pattern=r"^[a-z_]{1,64}\Z")]]
    figures: Figures


class CapacityRejected(Payload, frozen=True, omit_defaults=True):
    run: Identifier | None
    retry_after_s: FractionalSeconds | None
    cooldown_s: FractionalSeconds
    clamped: bool
    cooldown_until: CanonicalAt
    streak: Annotated[int, msgspec.Meta(ge=1)]
    detail: FreeText | None
    provider: ProviderReport | None = None


class CapacityReleased(Payload, frozen=True):
    run: Identifier


CONFIGURED = "capacity.configured"
OBSERVED = "capacity.observed"
ADMITTED = "capacity.admitted"
REFUSED = "capacity.refused"
REJECTED = "capacity.rejected"
RELEASED = "capacity.released"

EVENTS: dict[str, type[Payload]] = {
    CONFIGURED: CapacityConfigured,
    OBSERVED: CapacityObserved,
    ADMITTED: CapacityAdmitted,
    REFUSED: CapacityRefused,
    REJECTED: CapacityRejected,
    RELEASED: CapacityReleased,
}
"""Event kind -> payload Struct."""
DECISION_KINDS = (ADMITTED, REFUSED)


# -- state -----------------------------------------------------------------------------

Totals = tuple[int, int, int, int, int, int, int]
"""Running totals over a goal's observations: uncached, cached, cache-write and output
tokens, requests, and how many samples were unmetered and estimated."""
ZERO_TOTALS: Totals = (0, 0, 0, 0, 0, 0, 0)
TOTALS_REBASE_AT = 2**62
"""Totals are rebased before they could leave MessagePack's 64-bit integers."""
COMPACT_MIN = 64
"""Samples that left the window are dropped in bulk, once at least this many (and at
least half the list) have: amortised O(1) per event, never a shift per event."""
PROVIDER_REPORT_MAX_AGE_US = 60 * US_PER_S
"""A provider report stays live at most this long (and never past its reset)."""


class Sample(StateStruct, gc=False, kw_only=False):
    """One `capacity.observed` event, as the window needs it.

    `totals` are the goal's running totals up to and including this sample: the usage
    of consecutive samples is the difference of two totals, so a window's usage costs
    two bisections however many samples it holds (SPEC §9).

    Untracked by the cycle collector (it holds only ints and strings, so it can never
    be part of a cycle): a busy goal keeps a minute of samples, often hundreds of
    thousands, and every full collection would otherwise walk them all. Positional
    fields (not kw_only): the fold builds one per observation, positionally.
    """

    at_us: int
    uncached_input: int
    cached_input: int
    output: int
    coverage: str
    run: str | None = None
    seq: int = -1
    cache_write_input: int = 0
    requests: int = 0
    """As counted for rpm: given, else one for a sample with tokens, none for a heartbeat."""
    totals: Totals = ZERO_TOTALS


class ProviderState(StateStruct, gc=False):
    """The latest provider report of one dimension (SPEC §3.6)."""

    at_us: int
    seq: int
    limit: int | None
    remaining: int | None
    reset_at_us: int | None
    totals: Totals
    """The goal's running totals when the report was folded: usage observed after it is
    the difference."""

    def live_at(self, at_us: int) -> bool:
        if at_us - self.at_us > PROVIDER_REPORT_MAX_AGE_US:
            return False
        return self.reset_at_us is None or at_us < self.reset_at_us

    def ends_us(self) -> int:
        """The first time the report is no longer live."""
        aged_us = self.at_us + PROVIDER_REPORT_MAX_AGE_US + 1
        return aged_us if self.reset_at_us is None else min(aged_us, self.reset_at_us)


class ActiveRun(StateStruct):
    """An admitted, unreleased run (it stops being active when its lease ends)."""

    request: AdmitRequest
    receipt: Receipt
    seq: int
    hash: str
    admitted_at_us: int
    lease_until_us: int | None = None

    def active_at(self, at_us: int) -> bool:
        return self.lease_until_us is None or self.lease_until_us > at_us

    @property
    def group(self) -> Group | None:
        arm = self.request.arm
        return None if arm is None else ARM_GROUP[arm]


class GoalCapacity(StateStruct):
    """Everything the fold knows about one goal."""

    cases: CaseConfig | None = None
    tokens: TokenConfig | None = None
    explicit: list[str] = msgspec.field(default_factory=list)
    """The latest configure's `explicit` (SPEC §3.5)."""
    last_at_us: int = 0
    samples: list[Sample] = msgspec.field(default_factory=list)
    """Time-ordered (per-goal `at` never decreases in a journal); those before `head`
    have left the window and wait to be dropped in bulk."""
    head: int = 0
    base_totals: Totals = ZERO_TOTALS
    """The running totals before `samples[0]`."""
    totals: Totals = ZERO_TOTALS
    """The running totals over every observation folded."""
    last_metered_at_us: int | None = None
    """The latest measured or estimated observation, however old (for staleness)."""
    provider: dict[str, ProviderState] = msgspec.field(default_factory=dict)
    """The latest provider report of each dimension reported."""
    runs: dict[str, ActiveRun] = msgspec.field(default_factory=dict)
    lease_check_us: int | None = None
    """No lease ends before this time (a lower bound: renewals only push ends later), so
    the fold looks for expired runs only once the goal's time reaches it."""
    cooldown_until_us: int | None = None
    streak: int = 0
    admissions_total: int = 0
    refusal_events_total: int = 0
    refusals_total: dict[str, int] = msgspec.field(default_factory=dict)
    """Refusals by reason (a refusal with two reasons counts once under each)."""
    rejections_total: int = 0
    releases_total: int = 0


class CapacityState(StateStruct):
    goals: dict[str, GoalCapacity] = msgspec.field(default_factory=dict)


def goal_of(state: CapacityState, goal: str) -> GoalCapacity:
    """The goal's state, or a fresh empty one (not added to `state`)."""
    found = state.goals.get(goal)
    return found if found is not None else GoalCapacity()


# -- the fold --------------------------------------------------------------------------


def apply(state: CapacityState, record: Record, payload: Any) -> None:  # noqa: C901, PLR0912, PLR0915
    """Fold one event of this domain into the state.

    Observations (most events) and the window's trim are inline, and ruff's complexity
    limits are waived here alone: this runs once per record of every fold, where a
    call per step costs measurably (docs/performance.md)."""
    if record.goal is None:  # capacity events always name a goal; nothing to fold
        return
    goal = state.goals.get(record.goal)
    if goal is None:
        goal = state.goals[record.goal] = GoalCapacity()
    at_us = parse_at(record.at)
    if isinstance(payload, CapacityObserved):  # most events: folded inline
        uncached, cached, output = payload.uncached_input, payload.cached_input, payload.output
        cache_write = payload.cache_write_input
        requests = payload.requests
        if requests is None:  # SPEC §3.6: one request when it carries tokens
            requests = 1 if uncached or cached or output or cache_write else 0
        coverage = payload.coverage
        t = goal.totals
        totals = goal.totals = (
            t[0] + uncached,
            t[1] + cached,
            t[2] + cache_write,
            t[3] + output,
            t[4] + requests,
            t[5] + (coverage == "unmetered"),
            t[6] + (coverage == "estimated"),
        )
        # Positional, in Sample's field order: keywords cost a name match per field.
        goal.samples.append(
            Sample(
                at_us, uncached, cached, output, coverage, payload.run, record.seq,
                cache_write, requests, totals,
            )
        )  # fmt: skip
        if coverage != "unmetered":
            goal.last_metered_at_us = at_us
        if payload.run is not None and goal.runs:
            _renew_lease(goal, payload.run, at_us)
        if payload.provider is not None:
            _note_provider(goal, payload.provider, record.seq, at_us)
    elif isinstance(payload, CapacityAdmitted):
        _apply_admitted(goal, payload, record, at_us)
    elif isinstance(payload, CapacityRefused):
        goal.refusal_events_total += 1
        for reason in payload.reasons:
            goal.refusals_total[reason] = goal.refusals_total.get(reason, 0) + 1
    elif isinstance(payload, CapacityRejected):
        until_us = parse_at(payload.cooldown_until)
        previous = goal.cooldown_until_us
        goal.cooldown_until_us = until_us if previous is None else max(previous, until_us)
        goal.streak = payload.streak
        goal.rejections_total += 1
        if payload.provider is not None:
            _note_provider(goal, payload.provider, record.seq, at_us)
    elif isinstance(payload, CapacityReleased):
        if goal.runs.pop(payload.run, None) is not None:
            goal.releases_total += 1
    elif isinstance(payload, CapacityConfigured):
        goal.cases, goal.tokens = payload.cases, payload.tokens
        goal.explicit = list(payload.explicit)
    if at_us > goal.last_at_us:
        goal.last_at_us = at_us
    # Forget what no question "as of t >= the goal's latest event" can need; the checks
    # are inline because they run for every event and rarely find anything.
    last_us = goal.last_at_us
    cutoff_us = last_us - WINDOW_US
    samples = goal.samples
    head = goal.head
    if head < len(samples) and samples[head].at_us <= cutoff_us:
        # Step, not bisect: on a busy goal each event moves the window by a sample or
        # two, and every sample passes `head` once (a bisection cost a dozen key calls
        # per event); a gap longer than the window drops them all just the same.
        count = len(samples)
        head += 1
        while head < count and samples[head].at_us <= cutoff_us:
            head += 1
        goal.head = head
        if head >= COMPACT_MIN and head * 2 >= count:
            _compact(goal)
    if goal.lease_check_us is not None and goal.lease_check_us <= last_us:
        _expire_leases(goal)


def _compact(goal: GoalCapacity) -> None:
    """Drop the samples that left the window (and rebase totals grown too large)."""
    head = goal.head
    goal.base_totals = goal.samples[head - 1].totals
    del goal.samples[:head]
    goal.head = 0
    if max(goal.totals) >= TOTALS_REBASE_AT:
        base = goal.base_totals

        def rebased(totals: Totals) -> Totals:
            return tuple(a - b for a, b in zip(totals, base, strict=True))  # type: ignore[return-value]

        for sample in goal.samples:
            sample.totals = rebased(sample.totals)
        for report in goal.provider.values():
            report.totals = rebased(report.totals)
        goal.totals = rebased(goal.totals)
        goal.base_totals = ZERO_TOTALS


def _note_provider(goal: GoalCapacity, report: ProviderReport, seq: int, at_us: int) -> None:
    for dimension, limit in report.items():
        goal.provider[dimension] = ProviderState(
            at_us=at_us,
            seq=seq,
            limit=limit.limit,
            remaining=limit.remaining,
            reset_at_us=None if limit.reset_at is None else parse_at(limit.reset_at),
            totals=goal.totals,
        )


def _renew_lease(goal: GoalCapacity, run_id: str, at_us: int) -> None:
    """An observation of an active leased run extends its lease."""
    run = goal.runs.get(run_id)
    if run is not None and run.lease_until_us is not None and run.active_at(at_us):
        assert run.request.lease_s is not None
        renewed_us = at_us + run.request.lease_s * US_PER_S
        run.lease_until_us = max(run.lease_until_us, renewed_us)


def _apply_admitted(goal: GoalCapacity, p: CapacityAdmitted, record: Record, at_us: int) -> None:
    lease_s = p.request.lease_s
    goal.runs[p.request.run] = ActiveRun(
        request=p.request,
        receipt=p.receipt,
        seq=record.seq,
        hash=record.hash,
        admitted_at_us=at_us,
        lease_until_us=None if lease_s is None else at_us + lease_s * US_PER_S,
    )
    goal.admissions_total += 1
    if lease_s is not None:
        end_us = at_us + lease_s * US_PER_S
        check_us = goal.lease_check_us
        goal.lease_check_us = end_us if check_us is None else min(check_us, end_us)


def _expire_leases(goal: GoalCapacity) -> None:
    """The goal's time reached a lease's end: drop ended runs, find the next check time."""
    for run in [r for r, active in goal.runs.items() if not active.active_at(goal.last_at_us)]:
        del goal.runs[run]
    ends = [r.lease_until_us for r in goal.runs.values() if r.lease_until_us is not None]
    goal.lease_check_us = min(ends) if ends else None


_sample_at = operator.attrgetter("at_us")
"""A sample's time, the bisections' key (in C: a Python function costs a call per step)."""


# -- questions as of a time ------------------------------------------------------------


def window_range(goal: GoalCapacity, at_us: int) -> tuple[int, int]:
    """`samples[start:end]` are the observations counting at `at_us`:
    `at_us - 60 s < at <= at_us`.

    What the two bisections would find, looked at first where it nearly always is:
    the window of a command (at or after the goal's latest event) starts at `head`,
    which the fold keeps at the first sample inside the window of the latest event,
    and ends after the last sample. A durable append asks this once or twice, right
    after its fdatasync, when every bisection step costs several times its warm cost.
    """
    samples = goal.samples
    count = len(samples)
    cutoff_us = at_us - WINDOW_US
    start = goal.head
    if start < count and samples[start].at_us <= cutoff_us:
        start = bisect.bisect_right(samples, cutoff_us, lo=start + 1, key=_sample_at)
    if start == count or samples[-1].at_us <= at_us:
        return start, count
    return start, bisect.bisect_right(samples, at_us, lo=start, key=_sample_at)


def window_samples(goal: GoalCapacity, at_us: int) -> list[Sample]:
    """The observations counting at `at_us`, oldest first (a copy: O(window))."""
    start, end = window_range(goal, at_us)
    return goal.samples[start:end]


def _totals_before(goal: GoalCapacity, index: int) -> Totals:
    return goal.samples[index - 1].totals if index > 0 else goal.base_totals


def weighted_tpm(
    uncached_input: int, cached_input: int, output: int, weight: float, cache_write_input: int = 0
) -> Number:
    """Tokens that count against the quota; an int unless the weight makes it fractional."""
    if weight == 1.0:
        return uncached_input + cache_write_input + cached_input + output
    value = round(
        uncached_input + cache_write_input + output + cached_input * weight, USAGE_DECIMALS
    )
    return int(value) if value.is_integer() else value


def dimension_usage(totals: Totals, weight: float, dimension: str) -> Number:
    """One dimension's usage of the tokens and requests in `totals` (SPEC §3.6)."""
    uncached, cached, cache_write, output, requests = totals[:5]
    if dimension == "tpm":
        return weighted_tpm(uncached, cached, output, weight, cache_write)
    if dimension == "itpm":
        return weighted_tpm(uncached, cached, 0, weight, cache_write)
    if dimension == "otpm":
        return output
    return requests


def _difference(after: Totals, before: Totals) -> Totals:
    a, b = after, before
    return (
        a[0] - b[0],
        a[1] - b[1],
        a[2] - b[2],
        a[3] - b[3],
        a[4] - b[4],
        a[5] - b[5],
        a[6] - b[6],
    )


class Usage(msgspec.Struct, frozen=True):
    """The trailing-window usage as of a time."""

    usage_tpm: Number
    parts: UsageParts
    coverage: Coverage
    unmetered_in_window: bool
    totals: Totals
    """The window's raw sums (see `Totals`)."""
    weight: float

    def of(self, dimension: str) -> Number:
        return dimension_usage(self.totals, self.weight, dimension)


def usage_at(goal: GoalCapacity, at_us: int) -> Usage:
    """Usage in the window ending at `at_us`, its raw parts and its coverage.

    Coverage is the weakest kind of sample in the window: `unmetered` if any sample is
    unmetered (usage is then unknown until it leaves), else `estimated` if any is
    estimated, else `measured`.
    """
    start, end = window_range(goal, at_us)
    window = _difference(_totals_before(goal, end), _totals_before(goal, start))
    uncached, cached, cache_write, output, _, unmetered, estimated = window
    coverage: Coverage = "unmetered" if unmetered else "estimated" if estimated else "measured"
    weight = goal.tokens.cached_input_weight if goal.tokens is not None else 1.0
    return Usage(
        usage_tpm=weighted_tpm(uncached, cached, output, weight, cache_write),
        parts=UsageParts(
            uncached_input=uncached,
            cached_input=cached,
            cache_write_input=cache_write,
            output=output,
        ),
        coverage=coverage,
        unmetered_in_window=unmetered > 0,
        totals=window,
        weight=weight,
    )


def active_runs_at(goal: GoalCapacity, at_us: int) -> list[ActiveRun]:
    """Runs admitted, not released and not past their lease at `at_us`, in admission order."""
    if not goal.runs:
        return []
    runs = [r for r in goal.runs.values() if r.admitted_at_us <= at_us and r.active_at(at_us)]
    return sorted(runs, key=lambda r: r.seq)


def active_counts(runs: list[ActiveRun]) -> ActiveCases:
    groups = [r.group for r in runs]
    return ActiveCases(
        total=len(runs), baseline=groups.count("baseline"), test=groups.count("test")
    )


def max_observation_age_us(goal: GoalCapacity) -> int:
    age_s = goal.tokens.max_observation_age_s if goal.tokens else DEFAULT_MAX_OBSERVATION_AGE_S
    return age_s * US_PER_S


def forecast_of(request: AdmitRequest, dimension: str) -> int | None:
    """The request's forecast of one dimension; `forecast_tpm`, when absent, is
    `forecast_itpm + forecast_otpm` if both are given (SPEC §3.6)."""
    if dimension == "tpm":
        if request.forecast_tpm is not None:
            return request.forecast_tpm
        if request.forecast_itpm is not None and request.forecast_otpm is not None:
            return request.forecast_itpm + request.forecast_otpm
        return None
    if dimension == "itpm":
        return request.forecast_itpm
    if dimension == "otpm":
        return request.forecast_otpm
    return request.forecast_rpm


class Limit(msgspec.Struct, frozen=True):
    """One configured dimension's envelope, whichever way the config spells it."""

    quota: int
    target: int
    evaluator_reserve: int
    cold_start_reserve: int


def limits_of(tokens: TokenConfig | None) -> dict[Dimension, Limit]:
    """The configured dimensions, in reporting order."""
    if tokens is None:
        return {}
    found: dict[Dimension, Limit] = {}
    if tokens.quota_tpm is not None and tokens.target_tpm is not None:
        found["tpm"] = Limit(
            tokens.quota_tpm,
            tokens.target_tpm,
            tokens.evaluator_reserve_tpm,
            tokens.cold_start_reserve_tpm,
        )
    for dimension in LIMIT_DIMENSIONS:
        limit = tokens.limits.get(dimension)
        if limit is not None:
            found[dimension] = Limit(
                limit.quota, limit.target, limit.evaluator_reserve, limit.cold_start_reserve
            )
    return found


class ProviderView(msgspec.Struct, frozen=True):
    """A dimension's latest provider report as of a time."""

    report: ProviderState
    live: bool
    used_since: Number
    """The dimension's usage observed after the report."""

    @property
    def used(self) -> int | None:
        """What the provider counts as used (limit - remaining), while live."""
        report = self.report
        if not self.live or report.limit is None or report.remaining is None:
            return None
        return max(0, report.limit - report.remaining)

    @property
    def room(self) -> Number | None:
        """What the provider would still accept: remaining minus usage since, while live."""
        if not self.live or self.report.remaining is None:
            return None
        return _tidy(self.report.remaining - self.used_since)


class DimensionState(msgspec.Struct, frozen=True):
    """One dimension as of a time (configured or not: `limit` is None when it is not)."""

    dimension: Dimension
    limit: Limit | None
    usage: Number
    reserved: int
    provider: ProviderView | None

    @property
    def provider_used(self) -> int | None:
        return None if self.provider is None else self.provider.used

    @property
    def load(self) -> Number:
        # Forecasts already cover the usage of the runs they belong to, and the
        # provider's count covers both: the largest is the load, never their sum.
        provider = self.provider
        used = None if provider is None else provider.used
        return max(self.usage, self.reserved, used or 0)

    def available(self, run_class: str) -> int | None:
        """The part of the target a run of this class may fill (None: not configured)."""
        if self.limit is None:
            return None
        protected = self.limit.evaluator_reserve if run_class == "solver" else 0
        return self.limit.target - protected

    def headroom(self, run_class: str) -> Number | None:
        """Largest forecast a run of this class could be admitted with (may be negative)."""
        available = self.available(run_class)
        if available is None or self.limit is None:
            return None
        return _tidy(available - self.limit.cold_start_reserve - self.load)


class Evaluation(msgspec.Struct, frozen=True):
    """Everything about a goal as of `at_us` that does not depend on a request."""

    at_us: int
    cases: CaseConfig | None
    tokens: TokenConfig | None
    usage: Usage
    every_dimension: dict[Dimension, DimensionState]
    """All four dimensions, configured or not (reports are kept for every one)."""
    dimensions: dict[Dimension, DimensionState]
    """The configured dimensions, in reporting order (an admission reads them twice)."""
    observation_stale: bool
    last_observation_at_us: int | None
    cooldown_until_us: int | None
    cooldown_active: bool
    active_runs: tuple[ActiveRun, ...]
    active_cases: ActiveCases

    @property
    def configured(self) -> bool:
        return self.cases is not None or self.tokens is not None

    @property
    def tpm(self) -> DimensionState:
        return self.every_dimension["tpm"]

    @property
    def reserved_tpm(self) -> int:
        return self.tpm.reserved

    @property
    def load_tpm(self) -> Number:
        return self.tpm.load

    def available_tpm(self, run_class: str) -> int | None:
        return self.tpm.available(run_class)

    def headroom_tpm(self, run_class: str) -> Number | None:
        return self.tpm.headroom(run_class)

    def figures(
        self, request: AdmitRequest | None, run_class: str, binding: Dimension | None = None
    ) -> Figures:
        cases, tokens, usage = self.cases, self.tokens, self.usage
        tpm = self.every_dimension["tpm"]
        dimensions = {
            d: _dimension_figures(
                s, None if request is None else forecast_of(request, d), run_class
            )
            for d, s in self.dimensions.items()
        }
        return Figures(
            usage_tpm=usage.usage_tpm,
            usage=usage.parts,
            reserved_tpm=tpm.reserved,
            load_tpm=tpm.load,
            target_tpm=None if tokens is None else tokens.target_tpm,
            headroom_tpm=tpm.headroom(run_class),
            forecast_tpm=None if request is None else forecast_of(request, "tpm"),
            coverage=usage.coverage,
            observation_stale=self.observation_stale,
            last_observation_at=format_us_or_none(self.last_observation_at_us),
            cooldown_until=format_us_or_none(self.cooldown_until_us),
            active_cases=self.active_cases,
            target_active_cases=None if cases is None else cases.target_active_cases,
            max_active_cases=None if cases is None else cases.max_active_cases,
            quota_tpm=None if tokens is None else tokens.quota_tpm,
            evaluator_reserve_tpm=None if tokens is None else tokens.evaluator_reserve_tpm,
            cold_start_reserve_tpm=None if tokens is None else tokens.cold_start_reserve_tpm,
            dimensions=dimensions,
            binding_dimension=binding,
        )


def _dimension_figures(s: DimensionState, forecast: int | None, run_class: str) -> DimensionFigures:
    limit, load, available = s.limit, s.load, s.available(run_class)
    assert limit is not None and available is not None
    return DimensionFigures(
        usage=s.usage,
        reserved=s.reserved,
        provider_used=s.provider_used,
        load=load,
        target=limit.target,
        headroom=_tidy(available - limit.cold_start_reserve - load),  # s.headroom, load once
        forecast=forecast,
    )


def evaluate(goal: GoalCapacity, at_us: int) -> Evaluation:
    """The goal as of `at_us` (which must be at or after the goal's latest folded event)."""
    usage = usage_at(goal, at_us)
    runs = active_runs_at(goal, at_us)
    limits = limits_of(goal.tokens)
    now_totals = _totals_before(goal, len(goal.samples))
    every: dict[Dimension, DimensionState] = {}
    configured: dict[Dimension, DimensionState] = {}
    for dimension in DIMENSIONS:
        report = goal.provider.get(dimension)
        view = None
        if report is not None and report.at_us <= at_us:
            since = dimension_usage(_difference(now_totals, report.totals), usage.weight, dimension)
            view = ProviderView(report, report.live_at(at_us), since)
        limit = limits.get(dimension)
        every[dimension] = state = DimensionState(
            dimension=dimension,
            limit=limit,
            usage=usage.of(dimension),
            reserved=sum(forecast_of(r.request, dimension) or 0 for r in runs) if runs else 0,
            provider=view,
        )
        if limit is not None:
            configured[dimension] = state
    metered_us = goal.last_metered_at_us
    if metered_us is not None and metered_us > at_us:
        metered_us = None  # not yet observed as of at_us
    cooldown_us = goal.cooldown_until_us
    return Evaluation(
        at_us=at_us,
        cases=goal.cases,
        tokens=goal.tokens,
        usage=usage,
        every_dimension=every,
        dimensions=configured,
        observation_stale=metered_us is None or at_us - metered_us > max_observation_age_us(goal),
        last_observation_at_us=metered_us,
        cooldown_until_us=cooldown_us,
        cooldown_active=cooldown_us is not None and at_us < cooldown_us,
        active_runs=tuple(runs),
        active_cases=active_counts(runs),
    )


def seconds_us(seconds: Number) -> int:
    """A duration in whole microseconds; a fractional one is rounded up (a cooldown
    never ends early), after dropping float noise (0.1 s is 100000 µs, not 100001)."""
    if isinstance(seconds, int):
        return seconds * US_PER_S
    return math.ceil(round(seconds * US_PER_S, 3))


def _tidy(value: Number) -> Number:
    if isinstance(value, float):
        value = round(value, USAGE_DECIMALS)
        return int(value) if value.is_integer() else value
    return value


# -- the admission decision (SPEC §3.3, §3.6) ------------------------------------------


class Admission(msgspec.Struct, frozen=True):
    """What an admission decision used and took (its `Decision.detail`)."""

    figures: Figures
    receipt: Receipt | None
    """For an admission: the new receipt, or the original one on an idempotent replay."""
    original: ActiveRun | None = None
    """The active admission of the same run, if any."""


AdmissionDecision = Decision[Admission]
"""`ok` is admitted; the event is `capacity.admitted` or, for a refusal, the journaled
`capacity.refused`; an idempotent replay appends nothing."""


def decide_admission(goal: GoalCapacity, request: AdmitRequest, at_us: int) -> AdmissionDecision:
    """May `request` start at `at_us`? Pure: the same answer for the same inputs.

    `goal` is the goal's state folded up to (not including) the decision; `at_us` is the
    decision's time, at or after the goal's latest folded event. `admit`, `audit` and
    `whatif` all decide with this one function.
    """
    ev = evaluate(goal, at_us)
    original = next((r for r in ev.active_runs if r.request.run == request.run), None)
    if original is not None:
        figures = ev.figures(request, request.run_class)
        if original.request == request:
            detail = Admission(figures, original.receipt, original)
            return Decision(idempotent=True, detail=detail)
        return _refusal(request, (R.RUN_EXISTS_WITH_DIFFERENT_REQUEST,), figures, original)
    reasons = refusal_reasons(ev, request)
    figures = ev.figures(request, request.run_class, binding_dimension(reasons))
    if reasons:
        return _refusal(request, reasons, figures, None)
    receipt = _receipt(ev, figures, request)
    admitted = CapacityAdmitted(request=request, receipt=receipt)
    return Decision(kind=ADMITTED, payload=admitted, detail=Admission(figures, receipt))


def _refusal(
    request: AdmitRequest,
    reasons: tuple[str, ...],
    figures: Figures,
    original: ActiveRun | None,
) -> AdmissionDecision:
    """A refusal is journaled, with the figures it was decided on (SPEC §3.3)."""
    refused = CapacityRefused(request=request, reasons=list(reasons), figures=figures)
    return Decision(
        reasons=reasons,
        kind=REFUSED,
        payload=refused,
        detail=Admission(figures, None, original),
    )


def binding_dimension(reasons: tuple[str, ...] | list[str]) -> Dimension | None:
    """The first dimension with a failing reason (gate-wide reasons name none)."""
    for reason in reasons:
        dimension = R.REASON_DIMENSION.get(reason)
        if dimension is not None:
            return dimension  # type: ignore[return-value]
    return None


def refusal_reasons(ev: Evaluation, request: AdmitRequest) -> tuple[str, ...]:
    """Every failing reason, in the documented order (idempotency aside)."""
    if not ev.configured:
        return (R.NOT_CONFIGURED,)
    reasons: list[str] = []
    if ev.cases is not None:
        reasons += case_reasons(ev.cases, ev.active_cases, request.arm)
    if ev.tokens is not None:
        reasons += token_reasons(ev, request)
    return tuple(reasons)


def case_reasons(cases: CaseConfig, active: ActiveCases, arm: str | None) -> list[str]:
    """The case gate's failing reasons for one more run of `arm`."""
    reasons: list[str] = []
    if active.total >= cases.target_active_cases:
        reasons.append(R.TARGET_CAPACITY_EXHAUSTED)
    if active.total >= cases.max_active_cases:
        reasons.append(R.TOTAL_CAPACITY_EXHAUSTED)
    if arm is None:
        reasons.append(R.CASE_ARM_REQUIRED)
        return reasons
    group = ARM_GROUP[arm]
    if group == "baseline" and active.baseline >= cases.max_baseline_cases:
        reasons.append(R.BASELINE_CAPACITY_EXHAUSTED)
    if group == "test" and active.test >= cases.max_test_cases:
        reasons.append(R.TEST_CAPACITY_EXHAUSTED)
    if group == "baseline":
        # A baseline may not take a slot the test arms are still owed.
        owed_to_test = max(0, cases.reserved_test_cases - active.test)
        if cases.target_active_cases - (active.total + 1) < owed_to_test:
            reasons.append(R.RESERVED_TEST_CAPACITY)
    return reasons


def token_reasons(ev: Evaluation, request: AdmitRequest) -> list[str]:
    """The token gate's failing reasons for `request`, in SPEC §3.6's order: tpm's
    forecast checks, the gate-wide checks, tpm's room checks, then itpm, otpm, rpm."""
    dimensions = ev.dimensions
    run_class = request.run_class
    reasons: list[str] = []
    tpm = dimensions.get("tpm")
    if tpm is not None:
        reasons += _forecast_checks(tpm, forecast_of(request, "tpm"))
    if ev.cooldown_active:
        reasons.append(R.CAPACITY_COOLDOWN_ACTIVE)
    if ev.usage.unmetered_in_window:
        reasons.append(R.USAGE_UNMETERED_IN_WINDOW)
    if ev.observation_stale:
        reasons.append(R.USAGE_OBSERVATION_STALE)
    if tpm is not None:
        reasons += _room_checks(tpm, forecast_of(request, "tpm"), run_class)
    for dimension in LIMIT_DIMENSIONS:
        state = dimensions.get(dimension)
        if state is not None:
            forecast = forecast_of(request, dimension)
            reasons += _forecast_checks(state, forecast)
            reasons += _room_checks(state, forecast, run_class)
    return reasons


def _forecast_checks(s: DimensionState, forecast: int | None) -> list[str]:
    assert s.limit is not None
    names = R.DIMENSION_REASONS[s.dimension]
    if forecast is None:
        return [names["forecast_required"]]
    if forecast > s.limit.target:
        return [names["forecast_exceeds_target"]]
    return []


def _room_checks(s: DimensionState, forecast: int | None, run_class: str) -> list[str]:
    """The headroom check (with the evaluator-reserve rule) and the provider's remaining."""
    if forecast is None:
        return []
    assert s.limit is not None
    names = R.DIMENSION_REASONS[s.dimension]
    reasons: list[str] = []
    needed = s.load + forecast + s.limit.cold_start_reserve
    available = s.available(run_class)
    assert available is not None
    if needed > available:
        # A solver that only lacks room because of the evaluator reserve is told so.
        protected = run_class == "solver" and needed <= s.limit.target
        reasons.append(
            names["evaluator_reserve_protected"] if protected else names["headroom_exhausted"]
        )
    room = None if s.provider is None else s.provider.room
    if room is not None and forecast > room:
        reasons.append(names["provider_exhausted"])
    return reasons


def _receipt(ev: Evaluation, figures: Figures, request: AdmitRequest) -> Receipt:
    lease_s = request.lease_s
    return Receipt(
        **msgspec.structs.asdict(figures),
        run=request.run,
        at=format_us(ev.at_us),
        cases="not_configured" if ev.cases is None else "slot_taken",
        tokens="not_configured" if ev.tokens is None else "reserved",
        lease_until=None if lease_s is None else format_us(ev.at_us + lease_s * US_PER_S),
    )


def shortfall_tpm(figures: Figures, run_class: str) -> Number | None:
    """How many TPM the forecast is over its headroom (None without a forecast or gate)."""
    if figures.forecast_tpm is None or figures.headroom_tpm is None:
        return None
    return _tidy(figures.forecast_tpm - figures.headroom_tpm)


def shortfalls(
    ev: Evaluation, request: AdmitRequest, reasons: tuple[str, ...]
) -> dict[str, Number]:
    """Per dimension with a failing reason: how much its forecast is over what that
    dimension allows (its headroom, and the provider's remaining room where that
    refused it). A dimension refused only for a missing forecast has no number."""
    found: dict[str, Number] = {}
    for dimension, state in ev.dimensions.items():
        names = R.DIMENSION_REASONS[dimension]
        failing = {check for check, reason in names.items() if reason in reasons}
        forecast = forecast_of(request, dimension)
        if not failing or forecast is None:
            continue
        over: list[Number] = []
        if failing - {"provider_exhausted"}:
            headroom = state.headroom(request.run_class)
            assert headroom is not None
            over.append(forecast - headroom)
        room = None if state.provider is None else state.provider.room
        if "provider_exhausted" in failing and room is not None:
            over.append(forecast - room)
        if over:
            found[dimension] = _tidy(max(over))
    return found


def decide_release(goal: GoalCapacity, run: str, at_us: int) -> Decision[None]:
    """`release`: an active run's slot and reservation are freed; a run that is not
    active holds nothing, so there is nothing to release (`run_not_active`)."""
    active = goal.runs.get(run)  # runs are keyed by their request's run
    if active is None or active.admitted_at_us > at_us or not active.active_at(at_us):
        return Decision(reasons=(R.RUN_NOT_ACTIVE,), detail=None)
    return Decision(kind=RELEASED, payload=CapacityReleased(run=run), detail=None)


# -- when things change by themselves --------------------------------------------------


def change_points_after(
    goal: GoalCapacity, at_us: int, *, samples_after_seq: int = -1
) -> list[int]:
    """Times after `at_us` at which the evaluation changes with no new event: a sample
    leaves the window, a lease ends, a cooldown ends, a provider report stops being
    live. Sorted, without duplicates.

    With `samples_after_seq`, only the samples folded after that record are looked at
    (the others' times were asked for before): a timeline asking after every event
    pays for each sample once, never for the whole window again.
    """
    points: set[int] = set()
    samples = goal.samples
    index = len(samples) - 1
    while index >= goal.head and samples[index].seq > samples_after_seq:
        points.add(samples[index].at_us + WINDOW_US)
        index -= 1
    for run in goal.runs.values():
        if run.lease_until_us is not None and run.active_at(at_us):
            points.add(run.lease_until_us)
    if goal.cooldown_until_us is not None:
        points.add(goal.cooldown_until_us)
    for report in goal.provider.values():
        points.add(report.ends_us())
    return sorted(p for p in points if p > at_us)


def earliest_admissible_us(goal: GoalCapacity, request: AdmitRequest, at_us: int) -> int | None:
    """The earliest time after `at_us` at which `request` would pass had nothing else
    happened (samples ageing out, cooldown ending, leases expiring, provider reports
    lapsing: every dimension); None if never."""
    for point_us in change_points_after(goal, at_us):
        if decide_admission(goal, request, point_us).ok:
            return point_us
    return None


# -- cooldowns (SPEC §3.2) -------------------------------------------------------------


class CooldownPlan(msgspec.Struct, frozen=True):
    retry_after_s: Number | None
    cooldown_s: Number
    clamped: bool
    cooldown_until_us: int
    streak: int


def plan_rejection(goal: GoalCapacity, at_us: int, retry_after_s: Number | None) -> CooldownPlan:
    """The bounded cooldown a provider rejection at `at_us` starts."""
    tokens = goal.tokens
    base_s = tokens.cooldown_base_s if tokens is not None else DEFAULT_COOLDOWN_BASE_S
    max_s = tokens.cooldown_max_s if tokens is not None else DEFAULT_COOLDOWN_MAX_S
    previous_us = goal.cooldown_until_us
    # A rejection soon after the last cooldown continues the streak; a quiet spell resets it.
    continues = previous_us is not None and at_us < previous_us + max_s * US_PER_S
    streak = goal.streak + 1 if continues else 1
    wanted_s = retry_after_s if retry_after_s is not None else base_s * 2 ** min(streak - 1, 64)
    cooldown_s = min(wanted_s, max_s)
    until_us = at_us + seconds_us(cooldown_s)
    if previous_us is not None:
        until_us = max(previous_us, until_us)
    return CooldownPlan(retry_after_s, cooldown_s, wanted_s > max_s, until_us, streak)


# -- configuration changes and readiness (SPEC §3.1, §3.5) -----------------------------


def config_below_occupancy(active: ActiveCases, cases: CaseConfig | None) -> list[str]:
    """Which new case limits are below the runs already active (empty: none)."""
    if cases is None:
        return []
    limits = [
        ("max_active_cases", cases.max_active_cases, active.total),
        ("max_baseline_cases", cases.max_baseline_cases, active.baseline),
        ("max_test_cases", cases.max_test_cases, active.test),
    ]
    return [f"{name} {limit} < {count} active" for name, limit, count in limits if limit < count]


READY_PROBE = AdmitRequest(
    run="admission-ready-probe",
    case=None,
    arm=None,
    run_class="solver",
    forecast_tpm=1,
    lease_s=None,
    forecast_itpm=1,
    forecast_otpm=1,
    forecast_rpm=1,
)
"""The request `admission_ready` asks about: a solver forecasting 1 in every dimension."""


def admission_ready(ev: Evaluation) -> bool:
    """Would a solver run forecasting 1 per dimension pass the token gate, with a case
    slot free?"""
    if not ev.configured:
        return False
    if ev.cases is not None and ev.active_cases.total >= ev.cases.target_active_cases:
        return False
    return ev.tokens is None or not token_reasons(ev, READY_PROBE)


def next_action(ev: Evaluation) -> str:
    """What the goal's operator or runner should do next (SPEC §3.5, first that applies)."""
    cases, tokens, active = ev.cases, ev.tokens, ev.active_cases
    if not ev.configured:
        return "configure"
    if tokens is not None and ev.cooldown_active:
        return "wait_for_cooldown"
    if tokens is not None and (ev.observation_stale or ev.usage.unmetered_in_window):
        return "observe_usage"
    over_cases = cases is not None and (
        active.total > cases.target_active_cases
        or active.total > cases.max_active_cases
        or active.baseline > cases.max_baseline_cases
        or active.test > cases.max_test_cases
    )
    over_tokens = any(
        s.limit is not None and s.reserved > s.limit.target for s in ev.dimensions.values()
    )
    if over_cases or over_tokens:
        return "release_runs"
    if admission_ready(ev):
        return "backfill_to_target"
    return "hold_at_target"
