"""A pooled goal inside a writer's transaction (SPEC §12.1): the streams that share
its clock, and its pool as a decision needs it."""

from __future__ import annotations

import msgspec

from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity as cap
from quotaledger.projections.ledger import LedgerState, pool_context_of


def pool_clock(state: LedgerState, goal: str) -> tuple[str, ...]:
    """The streams whose clock `goal` shares: its pool's and every other member's (SPEC
    §12.1: one clock per pool); none for a goal in no pool."""
    found = state.capacity.goals.get(goal)
    if found is None or found.pool is None:
        return ()
    name = found.pool.name
    pool = state.pools.pools.get(name)
    members = () if pool is None else tuple(m for m in pool.members if m != goal)
    return (name, *members)


def pool_after(
    state: LedgerState, goal: str, work: cap.GoalCapacity, own: list[PendingRecord]
) -> cap.PoolContext | None:
    """`goal`'s pool as the transaction's own events leave it: `work` is the goal's own
    state so far, and the pool's events among `own` (a cooldown) are folded into a copy."""
    ctx = pool_context_of(state, goal)
    if ctx is None:
        return None
    pool_events = [p for p in own if p.record.kind in cap.POOL_EVENTS and p.record.goal == ctx.name]
    pool = ctx.state
    if pool_events:
        pool = cap.fork_pool(pool)
        scratch = cap.PoolsState(pools={ctx.name: pool})
        for pending in pool_events:
            cap.apply_pool(scratch, pending.record, pending.payload)
    return msgspec.structs.replace(ctx, state=pool, members={**ctx.members, goal: work})
