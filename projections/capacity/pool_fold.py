"""A pool's state and the fold of its own stream (SPEC §12.1): its config, its members
and their terms, its cooldown. What its members used is theirs: a decision reads it
from their states (`pool_decision`), so this fold keeps no usage of its own."""

from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import parse_at
from quotaledger.projections.capacity.events import CapCounted
from quotaledger.projections.capacity.fold import Totals
from quotaledger.projections.capacity.money import micro_of
from quotaledger.projections.capacity.pool_events import (
    PoolConfigured,
    PoolCooldown,
    PoolMembership,
)
from quotaledger.projections.types import StateStruct


class PoolMember(StateStruct, gc=False):
    """A member's terms, exact: share, borrowing and lending limits in units of 10^-4."""

    share: int
    borrowing_limit: int
    lending_limit: int
    priority: int = 0


class PoolState(StateStruct):
    config: PoolConfigured | None = None
    members: dict[str, PoolMember] = msgspec.field(default_factory=dict)
    """The goals that are members now, in the order they first joined."""
    cooldown_until_us: int | None = None
    streak: int = 0
    last_at_us: int = 0
    former: list[str] = msgspec.field(default_factory=list)
    """The goals that left the pool (some may have joined again), in the order they
    first left: what they spent in it while members stays the pool's (SPEC §12.4)."""


class PoolsState(StateStruct):
    pools: dict[str, PoolState] = msgspec.field(default_factory=dict)


def apply_pool(state: PoolsState, record: Record, payload: Any) -> None:
    """Fold one of a pool's events into its state."""
    name = record.goal
    if name is None:
        return
    pool = state.pools.get(name)
    if pool is None:
        pool = state.pools[name] = PoolState()
    at_us = parse_at(record.at)
    if isinstance(payload, PoolConfigured):
        pool.config = payload
    elif isinstance(payload, PoolMembership):
        if payload.left:
            pool.members.pop(payload.goal, None)
            if payload.goal not in pool.former:
                pool.former.append(payload.goal)
        else:
            share, borrowing, lending = payload.units
            pool.members[payload.goal] = PoolMember(
                share=share,
                borrowing_limit=borrowing,
                lending_limit=lending,
                priority=payload.priority or 0,
            )
    elif isinstance(payload, PoolCooldown):
        until_us = parse_at(payload.cooldown_until)
        previous = pool.cooldown_until_us
        pool.cooldown_until_us = until_us if previous is None else max(previous, until_us)
        pool.streak = payload.streak
    if at_us > pool.last_at_us:
        pool.last_at_us = at_us


def fork_pool(pool: PoolState) -> PoolState:
    """A copy `apply_pool` may change without touching `pool`."""
    return msgspec.structs.replace(pool, members=dict(pool.members), former=list(pool.former))


def totals_of(counted: CapCounted) -> Totals:
    """A `CapCounted` as raw sums (`Totals`: requests and coverage counts 0)."""
    usd = micro_of(counted.usd) or 0
    return (
        counted.uncached_input,
        counted.cached_input,
        counted.cache_write_input,
        counted.output,
        0,
        0,
        0,
        counted.unpriced_tokens,
        usd,
    )
