"""The capacity use cases that configure and show a goal (SPEC §3.5): configure and
inspect. Apart from `usecases.capacity` so that a runner's per-event command
(observe, admit, ...) does not build the config fields and the goal view.
"""

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.projections import capacity as cap
from quotaledger.usecases.capacity import QueueEntryView, RunRef, SpendView
from quotaledger.usecases.configfields import ConfigFieldsRequest
from quotaledger.usecases.decode import Answer, Event, Request
from quotaledger.usecases.fields import (
    Identifier,
    PoolFraction,
    Priority,
    Time,
    TokenCount,
    UsdAmount,
)
from quotaledger.usecases.pools import PoolView

Number = int | float


# -- requests --------------------------------------------------------------------------


class ConfigureRequest(ConfigFieldsRequest, kw_only=True):
    """Change a goal's capacity config: only the fields given change (SPEC §3.5).

    A derived default never set explicitly (a target from its quota, the case
    target and caps from max_active_cases) follows its source. `remove_limit`
    removes dimensions (tpm, itpm, otpm, rpm), `remove_gate` gates (cases, tokens).
    """

    goal: Identifier
    at: Time | None = None
    remove_limit: list[str] = msgspec.field(default_factory=list)
    remove_gate: list[str] = msgspec.field(default_factory=list)
    cap_tokens: TokenCount | None = None
    """Spend cap (SPEC §12.4): tokens from `cap_since`, summed as tpm is."""
    cap_usd: UsdAmount | None = None
    """Spend cap in US dollars from `cap_since` (at most 6 decimals)."""
    cap_since: Time | None = None
    """Where the caps count from [default: when the first cap was configured]; a past
    time counts what was observed since."""
    remove_cap: list[str] = msgspec.field(default_factory=list)
    """Caps to remove: tokens, usd."""
    pool: Identifier | None = None
    """Join this pool (SPEC §12.1), or change the terms in it."""
    pool_share: PoolFraction | None = None
    """The goal's nominal fraction of every pool dimension's target (0..1, 4 places)."""
    pool_borrowing_limit: PoolFraction | None = None
    """How much beyond its share the goal may use [default: 1 - share]."""
    pool_lending_limit: PoolFraction | None = None
    """How much of its share others may borrow while it is unused [default: share]."""
    priority: Priority | None = None
    """Its queue entries' priority, -1000..1000 [default: 0]."""
    leave_pool: bool = False
    """Leave the goal's pool."""


class InspectRequest(Request):
    """Every goal (or one) as of now, as of time `at`, or as of record `seq`.

    Now means the implicit time a writer would use (wall clock, never before the
    goal's last event); with `seq`, each goal is shown as of its last event up to
    that record.
    """

    goal: Identifier | None = None
    at: Time | None = None
    seq: int | None = None
    pool: Identifier | None = None
    """A pool instead of goals (SPEC §12.1): its dimensions, members, queue and the
    provider reports its members recorded."""


# -- answers ---------------------------------------------------------------------------


class TokensView(cap.TokenConfig, frozen=True, omit_defaults=False):
    """The token gate as answers show it: `limits` always present (events omit it
    when empty)."""

    def __post_init__(self) -> None:
        """A view of a config already checked when it was made."""


class CapsView(Answer):
    cap_tokens: int | None
    cap_usd: Number | None
    cap_since: str


class ConfigView(Answer):
    cases: cap.CaseConfig | None
    tokens: TokensView | None
    caps: CapsView | UnsetType = UNSET
    """The spend caps (SPEC §12.4), when the goal has one."""
    pool: cap.PoolRef | UnsetType | None = UNSET
    """The goal's pool and its terms (SPEC §12.1), when it is or was just in one."""
    priority: int | UnsetType = UNSET


class ConfigureAnswer(Answer, kw_only=True):
    """`configure`: appended, or refused (a case limit below the runs already active)."""

    ok: bool
    goal: str
    appended: bool
    reasons: list[str] | UnsetType = UNSET
    detail: list[str] | UnsetType = UNSET
    active_cases: cap.ActiveCases | UnsetType = UNSET
    config: ConfigView
    explicit: list[str] | UnsetType = UNSET
    changes: dict[str, list[Any]]
    event: Event | UnsetType = UNSET
    promoted: list[RunRef] | UnsetType = UNSET


class Headroom(Answer):
    solver: Number | None
    evaluator: Number | None


class ActiveRunView(Answer, kw_only=True):
    run: str
    case: str | None
    arm: str | None
    class_: str = msgspec.field(name="class")
    forecast_tpm: int | None
    forecasts: dict[str, int | None]
    admitted_at: str
    lease_until: str | None
    seq: int


class DimensionView(Answer):
    usage: Number
    reserved: Number
    provider_used: int | None
    load: Number
    quota: int | None
    target: int | None
    headroom: Headroom


class ProviderView(Answer):
    limit: int | None
    remaining: int | None
    reset_at: str | None
    reported_at: str
    live: bool
    used: int | None
    used_since: Number
    headroom: Number | None
    config_above_provider_limit: bool


class Totals(Answer):
    admissions: int
    refusals: int
    refusals_by_reason: dict[str, int]
    rejections: int
    releases: int


class GoalView(Answer):
    """One goal in `inspect` (SPEC §8)."""

    at: str
    config: ConfigView
    usage_tpm: Number
    usage: cap.UsageParts
    reserved_tpm: int
    load_tpm: Number
    headroom_tpm: Headroom
    coverage: str
    observation_stale: bool
    last_observation_at: str | None
    cooldown_until: str | None
    cooldown_active: bool
    active_runs: list[ActiveRunView]
    active_counts: cap.ActiveCases
    dimensions: dict[str, DimensionView]
    provider: dict[str, ProviderView]
    admission_ready: bool
    clock_ahead: bool
    """The goal's last event is beyond the clock-skew bound ahead of this machine's
    clock (a file journal; SPEC §2.2): `next_action` is then `check_clocks`."""
    next_action: str
    totals: Totals
    spend: SpendView
    queue: list[QueueEntryView]
    """The queue the goal waits in (its own; SPEC §12.2), empty when none waits."""


class InspectAnswer(Answer):
    ok: bool
    goals: dict[str, GoalView] | UnsetType = UNSET
    """Every goal, or one (absent for `inspect --pool`)."""
    pools: dict[str, PoolView] | UnsetType = UNSET
    """`inspect --pool P`: the pool (SPEC §12.1)."""
