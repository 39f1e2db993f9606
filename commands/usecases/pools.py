"""The pools' use cases (SPEC §12.1): `pool configure`.

A pool is a named limit several goals share: its events (`pool.configured`,
`pool.membership`, `pool.cooldown`) are appended under its name, which no goal may
take (pools and goals share one space of names).
"""

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.projections.capacity.pool_config import POOL_FIELDS, checked_given
from quotaledger.usecases.capacity import QueueEntryView, RunRef, SpendView
from quotaledger.usecases.decode import Answer, Event, Request
from quotaledger.usecases.fields import Identifier, Time, TokenCount, UsdAmount

Number = int | float


class PoolConfigureRequest(Request, kw_only=True):
    """Create or change a pool: only the fields given change (SPEC §12.1). A target
    never set explicitly follows its quota (90%); `remove_limit` removes dimensions."""

    pool: Identifier
    quota_tpm: int | None = None
    target_tpm: int | None = None
    quota_itpm: int | None = None
    target_itpm: int | None = None
    quota_otpm: int | None = None
    target_otpm: int | None = None
    quota_rpm: int | None = None
    target_rpm: int | None = None
    quota_tpd: int | None = None
    target_tpd: int | None = None
    quota_rpd: int | None = None
    target_rpd: int | None = None
    cached_input_weight: float | None = None
    cooldown_base_s: int | None = None
    cooldown_max_s: int | None = None
    cap_tokens: TokenCount | None = None
    """Spend cap: tokens the members spend together from `cap_since`."""
    cap_usd: UsdAmount | None = None
    """Spend cap in US dollars from `cap_since` (at most 6 decimals)."""
    cap_since: Time | None = None
    """Where the caps count from [default: when the first cap was configured]."""
    remove_cap: list[str] = msgspec.field(default_factory=list)
    remove_limit: list[str] = msgspec.field(default_factory=list)
    at: Time | None = None

    def check_contents(self) -> None:
        """A value outside its field's range, whatever the journal holds: a client of a
        server refuses it before sending, in the pool rule's words and code."""
        checked_given({name: getattr(self, name) for name in POOL_FIELDS})


class PoolLimitView(Answer):
    quota: int
    target: int


class PoolConfigView(Answer):
    limits: dict[str, PoolLimitView]
    cached_input_weight: float
    cooldown_base_s: int
    cooldown_max_s: int
    cap_tokens: int | None
    cap_usd: Number | None
    cap_since: str | None


class PoolConfigureAnswer(Answer, kw_only=True):
    """`pool configure`: appended, or nothing when nothing changes."""

    ok: bool
    pool: str
    appended: bool
    config: PoolConfigView
    explicit: list[str]
    changes: dict[str, list[Any]]
    event: Event | UnsetType = UNSET
    promoted: list[RunRef] | UnsetType = UNSET
    """The members' queued runs this configure admitted (SPEC §12.2)."""


class PoolsRequest(Request):
    """Every pool (as of time `at`, or now): its dimensions, members and queue."""

    at: Time | None = None


class PoolDimensionView(Answer):
    quota: int
    target: int
    usage: Number
    reserved: Number
    provider_used: int | None
    load: Number


class MemberDimensionView(Answer):
    load: Number
    borrowed: Number
    """What the member uses beyond its share of the target."""
    protected: Number
    """What of its share it does not use and does not lend: no other member may take it."""


class PoolMemberView(Answer):
    share: Number
    borrowing_limit: Number
    lending_limit: Number
    priority: int
    dimensions: dict[str, MemberDimensionView]


class PoolProviderView(Answer):
    limit: int | None
    remaining: int | None
    reset_at: str | None
    reported_at: str
    live: bool
    used: int | None
    config_above_provider_limit: bool


class PoolView(Answer):
    """One pool in `pools` and `inspect --pool` (SPEC §12.1)."""

    at: str
    dimensions: dict[str, PoolDimensionView]
    cooldown_until: str | None
    members: dict[str, PoolMemberView]
    queue_length: int
    spend: SpendView
    """The members' spend together (SPEC §12.4): since `cap_since` (the pool's whole
    history without a cap), with the pool's caps and its members' reservations."""
    provider: dict[str, PoolProviderView] | UnsetType = UNSET
    """`inspect --pool` only: the latest provider report of each dimension any member
    recorded (they count at the pool, once)."""
    queue: list[QueueEntryView] | UnsetType = UNSET
    """`inspect --pool` only: the pool's queue (SPEC §12.2), every entry waiting now, in
    order, with its estimate and the reasons that hold it."""


class PoolsAnswer(Answer):
    ok: bool
    pools: dict[str, PoolView]
