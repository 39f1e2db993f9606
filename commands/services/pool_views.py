"""A pool as its readers show it (SPEC §12.1): `pools`, `inspect --pool P`, `metrics`.

Everything is read from one fold of the pool's members (`projections.capacity.
pool_evaluate`), the same figures a member's admission decides on."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from quotaledger.journal.clock import format_us, format_us_or_none
from quotaledger.projections import capacity as cap
from quotaledger.projections.capacity import queue as cq
from quotaledger.projections.capacity.pool_decision import (
    PoolDimension,
    latest_report,
    number,
    part_of,
)
from quotaledger.projections.ledger import LedgerState
from quotaledger.services.queueing import queue_rows
from quotaledger.services.spend_views import spend_view
from quotaledger.usecases.pools import (
    MemberDimensionView,
    PoolDimensionView,
    PoolMemberView,
    PoolProviderView,
    PoolView,
)


def pool_context(state: LedgerState, name: str) -> cap.PoolContext:
    """The pool `name` with its members' states (only theirs load)."""
    pool = state.pools.pools[name]
    goals = state.capacity.goals
    members = {m: g for m in pool.members if (g := goals.get(m)) is not None}
    former = {
        f: g for f in pool.former if f not in pool.members and (g := goals.get(f)) is not None
    }
    return cap.PoolContext(name, pool, members, former)


def pool_last_us(ctx: cap.PoolContext) -> int:
    """The latest event of the pool or any member: the pool's clock."""
    return max([ctx.state.last_at_us, *(g.last_at_us for g in ctx.members.values())])


def member_view(
    name: str, member: cap.PoolMember, dimensions: Mapping[cap.Dimension, PoolDimension]
) -> PoolMemberView:
    shown: dict[str, MemberDimensionView] = {}
    for dimension, d in dimensions.items():
        found = d.members.get(name)
        load = found.load if found is not None else Fraction(0)
        share = part_of(member.share, d.target)
        shown[dimension] = MemberDimensionView(
            load=number(load),
            borrowed=number(max(Fraction(0), load - share)),
            protected=number(d.protected(name, member)),
        )
    return PoolMemberView(
        share=cap.share_number(member.share),
        borrowing_limit=cap.share_number(member.borrowing_limit),
        lending_limit=cap.share_number(member.lending_limit),
        priority=member.priority,
        dimensions=shown,
    )


def pool_view(ctx: cap.PoolContext, at_us: int, *, with_provider: bool = False) -> PoolView:
    """The pool as of `at_us` (at or after its clock)."""
    pe = cap.pool_evaluate(ctx, at_us)
    config = ctx.state.config
    limits = config.limits if config is not None else {}
    dimensions: dict[str, PoolDimensionView] = {
        dimension: PoolDimensionView(
            quota=limits[dimension].quota,
            target=d.target,
            usage=number(d.usage),
            reserved=number(d.reserved),
            provider_used=d.provider_used,
            load=number(d.load),
        )
        for dimension, d in pe.dimensions.items()
    }
    members = {
        name: member_view(name, member, pe.dimensions) for name, member in ctx.state.members.items()
    }
    queue_length = sum(
        1
        for state in ctx.members.values()
        for entry in state.queue.values()
        if entry.waiting_at(at_us)
    )
    view = PoolView(
        at=format_us(at_us),
        dimensions=dimensions,
        cooldown_until=format_us_or_none(pe.cooldown_until_us),
        members=members,
        queue_length=queue_length,
        spend=spend_view(pe.spend),
    )
    if with_provider:
        view.provider = provider_views(ctx, at_us)
        view.queue = queue_rows(cq.pool_queue(ctx), at_us)
    return view


def provider_views(ctx: cap.PoolContext, at_us: int) -> dict[str, PoolProviderView]:
    """The latest provider report of each dimension any member recorded."""
    found: dict[str, PoolProviderView] = {}
    limits = ctx.state.config.limits if ctx.state.config is not None else {}
    for dimension in cap.MINUTE_DIMENSIONS:
        report = latest_report(ctx.members, dimension, at_us)
        if report is None:
            continue
        live = report.live_at(at_us)
        limit = limits.get(dimension)
        found[dimension] = PoolProviderView(
            limit=report.limit,
            remaining=report.remaining,
            reset_at=format_us_or_none(report.reset_at_us),
            reported_at=format_us(report.at_us),
            live=live,
            used=(
                max(0, report.limit - report.remaining)
                if live and report.limit is not None and report.remaining is not None
                else None
            ),
            config_above_provider_limit=(
                limit is not None and report.limit is not None and limit.quota > report.limit
            ),
        )
    return found
