"""The capacity events' payloads (SPEC §3.1) and their kinds."""

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.journal.identifier import IDENTIFIER_CHARS, not_an_identifier
from quotaledger.projections.capacity.config import (
    Arm,
    CaseConfig,
    Coverage,
    Dimension,
    MinuteDimension,
    Number,
    RunClass,
    TokenConfig,
)
from quotaledger.projections.capacity.money import USD_MAX, Usd, micro_of
from quotaledger.projections.limits import (
    LEASE_S_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    QUEUE_TTL_S_MAX,
    RETRY_AFTER_S_MAX,
    SHARE_PLACES,
    SHARE_UNITS,
)
from quotaledger.projections.types import (
    IDENTIFIERS_KNOWN,
    TEXT_CHARS_ALWAYS_FIT,
    CanonicalAt,
    FreeText,
    Identifier,
    Payload,
    TokenCount,
    check_identifier,
    check_text,
)

FractionalSeconds = (
    Annotated[int, msgspec.Meta(ge=0, le=RETRY_AFTER_S_MAX)]
    | Annotated[float, msgspec.Meta(ge=0.0, le=RETRY_AFTER_S_MAX)]
)
"""Seconds that may be fractional (a Retry-After of 1.5 s); an integer stays an integer."""

UsdAmount = (
    Annotated[int, msgspec.Meta(ge=0, le=USD_MAX)]
    | Annotated[float, msgspec.Meta(ge=0.0, le=USD_MAX)]
)
"""Dollars (or dollars per million tokens) as a payload holds them; at most 6 decimals,
which `check_usd` checks."""


def check_usd(name: str, value: Usd | None) -> None:
    """A payload's dollars take at most 6 decimals (SPEC §12.4)."""
    if value is not None and micro_of(value) is None:
        raise ValueError(f"{name} must be dollars with at most 6 decimals, got {value!r}")


# -- a pool's shares (SPEC §12.1) -------------------------------------------------------

ShareFraction = (
    Annotated[int, msgspec.Meta(ge=0, le=1)] | Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
)
"""A share, borrowing or lending limit of a pool: a decimal 0..1 with at most 4 places
(`check_share`), kept exactly in units of 10^-4 (`share_units`)."""
Priority = Annotated[int, msgspec.Meta(ge=PRIORITY_MIN, le=PRIORITY_MAX)]


def share_units(value: Number) -> int | None:
    """`value` in units of 10^-4 (0.33 -> 3300), or None when it has more places: the
    decimal the user wrote, never its binary float's noise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * SHARE_UNITS
    scaled = round(value * SHARE_UNITS)
    if (
        abs(value * SHARE_UNITS - scaled) > 1e-6
        or round(scaled / SHARE_UNITS, SHARE_PLACES) != value
    ):
        return None
    return scaled


def share_number(units: int) -> Number:
    """Units of 10^-4 as the JSON number they were written as (3300 -> 0.33, 10000 -> 1)."""
    if units % SHARE_UNITS == 0:
        return units // SHARE_UNITS
    return round(units / SHARE_UNITS, SHARE_PLACES)


def check_share(name: str, value: Number | None) -> None:
    if value is not None and share_units(value) is None:
        raise ValueError(f"{name} must be a decimal 0..1 with at most 4 places, got {value!r}")


class PoolRef(Payload, frozen=True):
    """A goal's membership of a pool as its `capacity.configured` records it."""

    name: Identifier
    share: ShareFraction
    borrowing_limit: ShareFraction
    lending_limit: ShareFraction

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("share", "borrowing_limit", "lending_limit"):
            check_share(name, getattr(self, name))

    @property
    def units(self) -> tuple[int, int, int]:
        """share, borrowing limit, lending limit in units of 10^-4."""
        return (
            share_units(self.share) or 0,
            share_units(self.borrowing_limit) or 0,
            share_units(self.lending_limit) or 0,
        )


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
    forecast_tokens: TokenCount | None = None
    """The run's expected total tokens (SPEC §12.3): its tpd reservation, and its spend
    cap reservation in tokens (SPEC §12.4)."""
    forecast_requests: TokenCount | None = None
    """The run's expected total requests: its rpd reservation."""
    forecast_usd: UsdAmount | None = None
    """The run's expected dollars: its spend cap reservation in dollars."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_usd("forecast_usd", self.forecast_usd)


class DimensionFigures(Payload, frozen=True):
    """One dimension's numbers in a decision (SPEC §3.6)."""

    usage: Number
    reserved: Number
    """Per minute: the active runs' forecasts. Per day: what they may still spend (a
    forecast total less what was observed with the run, weighted: maybe fractional)."""
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


ProviderReport = dict[MinuteDimension, ProviderLimit]


class SpendUnit(Payload, frozen=True):
    """One capped unit's numbers in a decision (SPEC §12.4): tokens or dollars."""

    spent: Number
    reserved: Number
    forecast: Number | None
    cap: Number


SpendFigures = dict[Literal["tokens", "usd"], SpendUnit]


class PoolDimensionFigures(Payload, frozen=True):
    """One pool dimension's numbers in a pooled decision (SPEC §12.1). `share` is the
    goal's nominal part of the target (share x target), `goal_load` its own load,
    `borrowed` what it uses beyond its share, `protected_others` what the other members
    are guaranteed and do not use, `headroom` what the goal may still take."""

    usage: Number
    reserved: Number
    provider_used: int | None
    load: Number
    target: int
    forecast: int | None
    share: Number
    goal_load: Number
    borrowed: Number
    protected_others: Number
    headroom: Number


class PoolFigures(Payload, frozen=True):
    """The pool's part of a pooled decision's figures (SPEC §12.1)."""

    name: Identifier
    binding_dimension: Dimension | None
    cooldown_until: CanonicalAt | None
    dimensions: dict[Dimension, PoolDimensionFigures]
    spend: SpendFigures | UnsetType = UNSET
    """The pool's capped units (SPEC §12.4), in `figures.spend`'s shape."""


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
    spend: SpendFigures | UnsetType = UNSET
    """Each capped unit's spend, reservations, forecast and cap (SPEC §12.4); absent
    for a goal without caps (so figures without caps encode as they always did)."""
    pool: PoolFigures | UnsetType = UNSET
    """The pool's numbers (SPEC §12.1); absent for a goal in no pool."""


class Receipt(Figures, frozen=True, kw_only=True):
    """An admission's figures plus what it took. The event's seq and hash are added
    when it is presented (a record cannot contain its own hash)."""

    run: Identifier
    at: CanonicalAt
    cases: Literal["slot_taken", "not_configured"]
    tokens: Literal["reserved", "not_configured"]
    lease_until: CanonicalAt | None = None  # the fold takes leases from the request


ConfigFieldName = Annotated[str, msgspec.Meta(pattern=r"^[a-z_]{1,64}\Z")]


class CapCounted(Payload, frozen=True):
    """What a goal had spent since its `cap_since` before a configure: the fold keeps the
    running total from there (SPEC §12.4: a past `--cap-since` counts what was observed
    since, read once by the configure that sets it)."""

    uncached_input: int
    cached_input: int
    cache_write_input: int
    output: int
    unpriced_tokens: int
    usd: UsdAmount

    def __post_init__(self) -> None:
        super().__post_init__()
        check_usd("usd", self.usd)


class Caps(Payload, frozen=True):
    """A goal's spend caps (SPEC §12.4): at least one of the two. Kept in the state; a
    `capacity.configured` event carries them as its members `cap_tokens`, `cap_usd`,
    `cap_since` and `cap_counted`, as `pool.configured` does (SPEC §12.1)."""

    cap_tokens: TokenCount | None
    cap_usd: UsdAmount | None
    cap_since: CanonicalAt
    counted: CapCounted

    def __post_init__(self) -> None:
        super().__post_init__()
        check_usd("cap_usd", self.cap_usd)
        if self.cap_tokens is None and self.cap_usd is None:
            raise ValueError("caps need cap_tokens or cap_usd")

    def members(self) -> dict[str, Any]:
        """The `capacity.configured` members that carry these caps."""
        return {
            "cap_tokens": self.cap_tokens,
            "cap_usd": self.cap_usd,
            "cap_since": self.cap_since,
            "cap_counted": self.counted,
        }


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
    cap_tokens: TokenCount | None = None
    """Spend caps (SPEC §12.4): at most this many tokens since `cap_since`..."""
    cap_usd: UsdAmount | None = None
    """... at most these dollars (either or both: with one, `cap_since` and
    `cap_counted` are present)."""
    cap_since: CanonicalAt | None = None
    cap_counted: CapCounted | None = None
    """What the goal had spent since `cap_since` before this event (read once from the
    journal when `cap_since` is set: the fold keeps the running total from here)."""
    pool: PoolRef | None = None
    """The pool the goal is a member of (SPEC §12.1), or null."""
    priority: Priority = 0
    """Its entries' priority in its queue (SPEC §12.2)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_usd("cap_usd", self.cap_usd)
        capped = self.cap_tokens is not None or self.cap_usd is not None
        if capped != (self.cap_since is not None) or capped != (self.cap_counted is not None):
            raise ValueError("cap_since and cap_counted go with cap_tokens or cap_usd")

    @property
    def caps(self) -> Caps | None:
        if self.cap_since is None or self.cap_counted is None:
            return None
        return Caps(self.cap_tokens, self.cap_usd, self.cap_since, self.cap_counted)


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
    request_id: Identifier | None = None
    """The provider's response id (SPEC §11): a repeat within 900 s counts once."""
    model: Identifier | None = None
    """The model that answered (SPEC §12.4): its price in force gives the dollars."""

    def __post_init__(self) -> None:
        # Payload.__post_init__'s checks of this kind's fields (run, request_id, model, source;
        # the provider's times are ProviderLimit's), written out: most events are
        # observations, and the generic loop over the fields costs three times as
        # much. tests/capacity/test_value_rules.py holds the two to the same verdict.
        run = self.run
        if run is not None and run not in IDENTIFIERS_KNOWN:
            check_identifier("run", run)
        # Not remembered in IDENTIFIERS_KNOWN, as runs are: each request id is new, and
        # would only push the recurring identifiers out.
        request_id = self.request_id
        if request_id is not None and request_id.strip(IDENTIFIER_CHARS):
            raise not_an_identifier("request_id", request_id)
        model = self.model
        if model is not None and model not in IDENTIFIERS_KNOWN:
            check_identifier("model", model)
        source = self.source
        if source is not None and len(source) > TEXT_CHARS_ALWAYS_FIT:
            check_text("source", source)


class QueuedRef(Payload, frozen=True):
    """The queue entry an admission promoted (SPEC §12.2): its `capacity.queued`."""

    seq: Annotated[int, msgspec.Meta(ge=0)]
    at: CanonicalAt


class CapacityAdmitted(Payload, frozen=True, omit_defaults=True):
    request: AdmitRequest
    receipt: Receipt
    queued: QueuedRef | None = None
    """A promotion from the queue names the entry it admitted (SPEC §12.2); absent for
    an admission decided on its own request, which encodes as it always did."""


class CapacityQueued(Payload, frozen=True):
    """A refusal for reasons time or a release can cure, left waiting in the queue
    (SPEC §12.2): the request, the reasons and figures it was refused on, and how
    long it may wait (it expires at `at + ttl_s`: a pure function of time)."""

    request: AdmitRequest
    reasons: list[Annotated[str, msgspec.Meta(pattern=r"^[a-z_]{1,64}\Z")]]
    figures: Figures
    ttl_s: Annotated[int, msgspec.Meta(ge=1, le=QUEUE_TTL_S_MAX)]


DequeueReason = Literal["cancelled", "released", "refused", "moved"]


class CapacityDequeued(Payload, frozen=True, omit_defaults=True):
    """An entry left the queue without an admission (SPEC §12.2): cancelled (`admit
    --cancel`), released (`release` of a queued run), refused (a later change made it
    fail a reason that is not queueable: `reasons`) or moved (its goal joined or left
    a pool). Expiry needs no event."""

    run: Identifier
    reason: DequeueReason
    reasons: list[Annotated[str, msgspec.Meta(pattern=r"^[a-z_]{1,64}\Z")]] | None = None


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
    request_id: Identifier | None = None
    """As `CapacityObserved.request_id`."""


class CapacityReleased(Payload, frozen=True):
    run: Identifier


class PriceSet(Payload, frozen=True):
    """A model's price from now on (SPEC §12.4), in dollars per million tokens."""

    model: Identifier
    input_usd_per_mtok: UsdAmount
    cached_input_usd_per_mtok: UsdAmount
    cache_write_usd_per_mtok: UsdAmount
    output_usd_per_mtok: UsdAmount

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in PRICE_FIELDS:
            check_usd(name, getattr(self, name))


PRICE_FIELDS = (
    "input_usd_per_mtok",
    "cached_input_usd_per_mtok",
    "cache_write_usd_per_mtok",
    "output_usd_per_mtok",
)
"""A price's four figures, in the order the fold keeps them."""

CONFIGURED = "capacity.configured"
OBSERVED = "capacity.observed"
ADMITTED = "capacity.admitted"
REFUSED = "capacity.refused"
REJECTED = "capacity.rejected"
RELEASED = "capacity.released"
QUEUED = "capacity.queued"
DEQUEUED = "capacity.dequeued"
PRICE_SET = "price.set"

EVENTS: dict[str, type[Payload]] = {
    CONFIGURED: CapacityConfigured,
    OBSERVED: CapacityObserved,
    ADMITTED: CapacityAdmitted,
    REFUSED: CapacityRefused,
    REJECTED: CapacityRejected,
    RELEASED: CapacityReleased,
    QUEUED: CapacityQueued,
    DEQUEUED: CapacityDequeued,
    PRICE_SET: PriceSet,
}
"""Event kind -> payload Struct."""
DECISION_KINDS = (ADMITTED, REFUSED, QUEUED)
"""The journaled admission decisions: a queue entry is a refusal that waits."""
