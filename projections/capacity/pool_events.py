"""A pool's events (SPEC §12.1), each under the pool's name in the envelope's `goal`:
its configuration, who its members are, and the cooldowns its members' 429s start."""

from typing import Annotated

import msgspec

from quotaledger.projections.capacity.config import (
    CONFIG_RANGES,
    LIMIT_RANGES,
    Dimension,
)
from quotaledger.projections.capacity.events import (
    CapCounted,
    ConfigFieldName,
    FractionalSeconds,
    Priority,
    ShareFraction,
    UsdAmount,
    check_share,
    check_usd,
    share_units,
)
from quotaledger.projections.types import CanonicalAt, Identifier, Payload, TokenCount


def _meta(low_high: tuple[float, float]) -> msgspec.Meta:
    return msgspec.Meta(ge=low_high[0], le=low_high[1])


class PoolLimit(Payload, frozen=True):
    """One dimension of a pool: the provider's quota and the target to fill."""

    quota: Annotated[int, _meta(LIMIT_RANGES["quota"])]
    target: Annotated[int, _meta(LIMIT_RANGES["target"])]

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.target > self.quota:
            raise ValueError(f"target ({self.target}) must be <= quota ({self.quota})")


class PoolConfigured(Payload, frozen=True):
    """A pool's full new config (SPEC §12.1): its dimensions, how a cached input token
    counts, the cooldown rule its members' 429s start, its spend caps, and which
    fields were set explicitly (a target not in it follows its quota).

    With a cap, `cap_counted` is what the members spent together from `cap_since` to
    this configure (read once, as a goal's `cap_counted`: SPEC §12.4) and `cap_total`
    what they had spent in the pool in all by then (the departed members' spending,
    and each member's since it joined): the pool's spend from `cap_since` is
    `cap_counted` plus the pool's total since, which its fold keeps running."""

    limits: dict[Dimension, PoolLimit]
    cached_input_weight: Annotated[float, _meta(CONFIG_RANGES["cached_input_weight"])]
    cooldown_base_s: Annotated[int, _meta(CONFIG_RANGES["cooldown_base_s"])]
    cooldown_max_s: Annotated[int, _meta(CONFIG_RANGES["cooldown_max_s"])]
    cap_tokens: TokenCount | None = None
    cap_usd: UsdAmount | None = None
    cap_since: CanonicalAt | None = None
    explicit: list[ConfigFieldName] = msgspec.field(default_factory=list)
    cap_counted: CapCounted | None = None
    cap_total: CapCounted | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_usd("cap_usd", self.cap_usd)
        capped = self.cap_tokens is not None or self.cap_usd is not None
        if capped != (self.cap_since is not None):
            raise ValueError("cap_since goes with cap_tokens or cap_usd")
        if not capped and (self.cap_counted is not None or self.cap_total is not None):
            raise ValueError("cap_counted and cap_total go with a cap")


class PoolMembership(Payload, frozen=True, omit_defaults=True):
    """A goal joined the pool (or changed its terms): its share, borrowing and lending
    limits and priority; or it left (`left: true`, nothing else)."""

    goal: Identifier
    share: ShareFraction | None = None
    borrowing_limit: ShareFraction | None = None
    lending_limit: ShareFraction | None = None
    priority: Priority | None = None
    left: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        terms = (self.share, self.borrowing_limit, self.lending_limit, self.priority)
        if self.left and any(value is not None for value in terms):
            raise ValueError("a membership that leaves carries no terms")
        if not self.left and any(value is None for value in terms):
            raise ValueError("a membership carries share, borrowing_limit, lending_limit, priority")
        for name in ("share", "borrowing_limit", "lending_limit"):
            check_share(name, getattr(self, name))

    @property
    def units(self) -> tuple[int, int, int]:
        return (
            share_units(self.share or 0) or 0,
            share_units(self.borrowing_limit or 0) or 0,
            share_units(self.lending_limit or 0) or 0,
        )


class PoolCooldown(Payload, frozen=True):
    """A member's provider rejection started (or extended) the pool's cooldown, by
    §3.2's rule with the pool's terms and a streak counted across its members."""

    goal: Identifier
    run: Identifier | None
    retry_after_s: FractionalSeconds | None
    cooldown_s: FractionalSeconds
    clamped: bool
    cooldown_until: CanonicalAt
    streak: Annotated[int, msgspec.Meta(ge=1)]


POOL_CONFIGURED = "pool.configured"
POOL_MEMBERSHIP = "pool.membership"
POOL_COOLDOWN = "pool.cooldown"

POOL_EVENTS: dict[str, type[Payload]] = {
    POOL_CONFIGURED: PoolConfigured,
    POOL_MEMBERSHIP: PoolMembership,
    POOL_COOLDOWN: PoolCooldown,
}
"""Event kind -> payload Struct."""
