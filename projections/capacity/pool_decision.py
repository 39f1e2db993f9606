"""A pool as of a time and its part of a member's admission decision (SPEC §12.1).

The pool's load per dimension is folded from its members' states (each goal's usage
and reservations as §3.6 and §12.3 define them, with the pool's cached-input weight
and without provider reports) plus the organisation's provider report, counted once.
Shares are exact: a goal's part of a target is `share_units x target / 10^4`, and
every comparison is made on exact fractions, so a load exactly at a bound fits.
"""

import bisect
import operator
from collections.abc import Mapping
from fractions import Fraction

import msgspec

from quotaledger.journal.clock import format_us_or_none, parse_at
from quotaledger.projections import reasons as R
from quotaledger.projections.capacity.config import (
    DAILY_DIMENSIONS,
    DEFAULT_COOLDOWN_BASE_S,
    DEFAULT_COOLDOWN_MAX_S,
    DIMENSIONS,
    Dimension,
    Number,
)
from quotaledger.projections.capacity.evaluation import (
    Spend,
    active_runs_at,
    day_totals_at,
    dimension_usage,
    forecast_of,
    run_remaining,
    run_remaining_usd_micro,
    tidy,
    usage_at,
)
from quotaledger.projections.capacity.events import (
    AdmitRequest,
    PoolDimensionFigures,
    PoolFigures,
)
from quotaledger.projections.capacity.fold import ZERO_TOTALS, GoalCapacity, ProviderState, Totals
from quotaledger.projections.capacity.money import micro_of
from quotaledger.projections.capacity.pool_fold import PoolMember, PoolState, totals_of
from quotaledger.projections.limits import SHARE_UNITS

_sample_seq = operator.attrgetter("seq")


class PoolContext(msgspec.Struct, frozen=True):
    """What a member's decision needs of its pool: the pool's state and every member's
    state (folded to the decision, the deciding goal's included)."""

    name: str
    state: PoolState
    members: Mapping[str, GoalCapacity]
    former: Mapping[str, GoalCapacity] = msgspec.field(default_factory=dict)
    """The goals that left the pool and are not members now: what they spent in it
    while members is the pool's (SPEC §12.4)."""

    def with_member(self, goal: str, state: GoalCapacity) -> "PoolContext":
        """The same pool with `goal`'s state replaced (a promotion's working state)."""
        return msgspec.structs.replace(self, members={**self.members, goal: state})


def exact(value: Number) -> Fraction:
    """A load as the exact decimal it is shown as (its floats are rounded to 10^-6)."""
    return Fraction(value) if isinstance(value, int) else Fraction(repr(value))


def number(value: Fraction) -> Number:
    """An exact figure as a JSON number: an int when whole, else rounded to 10^-6."""
    if value.denominator == 1:
        return int(value)
    return tidy(round(float(value), 6))


def part_of(units: int, target: int) -> Fraction:
    """`units` (of 10^-4) of `target`, exactly."""
    return Fraction(units * target, SHARE_UNITS)


class MemberLoad(msgspec.Struct, frozen=True):
    usage: Fraction
    reserved: Fraction
    load: Fraction


class PoolDimension(msgspec.Struct, frozen=True):
    """One pool dimension as of a time."""

    dimension: Dimension
    quota: int
    target: int
    usage: Fraction
    reserved: Fraction
    provider_used: int | None
    load: Fraction
    members: dict[str, MemberLoad]
    room: Fraction | None
    """What the live provider report leaves: remaining minus the members' usage since."""

    def unused(self, goal: str, member: PoolMember) -> Fraction:
        found = self.members.get(goal)
        load = found.load if found is not None else Fraction(0)
        return max(Fraction(0), part_of(member.share, self.target) - load)

    def protected(self, goal: str, member: PoolMember) -> Fraction:
        """What `goal` is guaranteed and does not use: no other member may take it."""
        lent = part_of(member.lending_limit, self.target)
        return max(Fraction(0), self.unused(goal, member) - lent)

    def protected_others(self, goal: str, pool: PoolState) -> Fraction:
        return sum(
            (self.protected(h, m) for h, m in pool.members.items() if h != goal), Fraction(0)
        )


class PoolEvaluation(msgspec.Struct, frozen=True):
    name: str
    at_us: int
    cooldown_until_us: int | None
    cooldown_active: bool
    dimensions: dict[Dimension, PoolDimension]
    spend: Spend


def _plus(a: Totals, b: Totals) -> Totals:
    return tuple(x + y for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


def _minus(a: Totals, b: Totals) -> Totals:
    return tuple(x - y for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


def pool_total(ctx: PoolContext) -> Totals:
    """What the pool's members spent in it, in all (raw sums): what the goals that left
    spent there while members and each member's observations since it joined (SPEC §12.1: a goal's
    events count in the pool it is a member of at their time)."""
    total = ZERO_TOTALS
    for states in (ctx.members, ctx.former):
        for state in states.values():
            left = state.pool_spent.get(ctx.name)
            if left is not None:
                total = _plus(total, left)
    for name in ctx.state.members:
        member = ctx.members.get(name)
        if member is not None and member.pool is not None and member.pool.name == ctx.name:
            total = _plus(total, _minus(member.totals, member.pool_base))
    return total


def pool_spent(ctx: PoolContext) -> Totals:
    """What the members spent together since the caps' `cap_since` (the pool's whole
    history without a cap): the count read when `cap_since` was set plus the pool's
    total since (SPEC §12.4)."""
    config = ctx.state.config
    total = pool_total(ctx)
    if config is None or config.cap_since is None:
        return total
    counted = ZERO_TOTALS if config.cap_counted is None else totals_of(config.cap_counted)
    base = ZERO_TOTALS if config.cap_total is None else totals_of(config.cap_total)
    return _plus(counted, _minus(total, base))


def pool_spend_at(ctx: PoolContext, at_us: int) -> Spend:
    """The pool's spend (SPEC §12.4): tokens with the pool's cached-input weight,
    dollars by the price in force per model, and what its members' active runs may
    still spend (their forecasts' remainders)."""
    config = ctx.state.config
    weight = config.cached_input_weight if config is not None else 1.0
    spent = pool_spent(ctx)
    runs = [
        run
        for name in ctx.state.members
        if (state := ctx.members.get(name)) is not None
        for run in active_runs_at(state, at_us)
    ]
    cap_usd = None if config is None else config.cap_usd
    return Spend(
        since_us=None if config is None or config.cap_since is None else parse_at(config.cap_since),
        tokens=dimension_usage(spent, weight, "tpm"),
        usd_micro=spent[8],
        unpriced_tokens=spent[7],
        cap_tokens=None if config is None else config.cap_tokens,
        cap_usd_micro=None if cap_usd is None else micro_of(cap_usd),
        reserved_tokens=tidy(sum(run_remaining(r, "tpd", weight) for r in runs)) if runs else 0,
        reserved_usd_micro=sum(run_remaining_usd_micro(r) for r in runs) if runs else 0,
    )


def member_load(goal: GoalCapacity, at_us: int, weight: float, dimension: str) -> MemberLoad:
    """A member's usage, reservation and load of one dimension (no provider reports)."""
    runs = active_runs_at(goal, at_us)
    if dimension in DAILY_DIMENSIONS:
        usage = dimension_usage(day_totals_at(goal, at_us), weight, dimension)
        reserved = tidy(sum(run_remaining(r, dimension, weight) for r in runs)) if runs else 0
        return MemberLoad(exact(usage), exact(reserved), exact(tidy(usage + reserved)))
    usage = dimension_usage(usage_at(goal, at_us).totals, weight, dimension)
    reserved = sum(forecast_of(r.request, dimension) or 0 for r in runs) if runs else 0
    return MemberLoad(exact(usage), Fraction(reserved), max(exact(usage), Fraction(reserved)))


def _totals_after(goal: GoalCapacity, seq: int) -> Totals:
    """The goal's observations after record `seq`, as raw sums."""
    samples = goal.samples
    index = bisect.bisect_right(samples, seq, key=_sample_seq)
    before = samples[index - 1].totals if index > 0 else goal.base_totals
    return tuple(a - b for a, b in zip(goal.totals, before, strict=True))  # type: ignore[return-value]


def latest_report(
    members: Mapping[str, GoalCapacity], dimension: str, at_us: int
) -> ProviderState | None:
    """The latest provider report of `dimension` any member recorded by `at_us`."""
    found: ProviderState | None = None
    for state in members.values():
        report = state.provider.get(dimension)
        if (
            report is not None
            and report.at_us <= at_us
            and (found is None or report.seq > found.seq)
        ):
            found = report
    return found


def pool_evaluate(ctx: PoolContext, at_us: int) -> PoolEvaluation:
    """The pool as of `at_us` (at or after every member's and the pool's latest event)."""
    pool = ctx.state
    config = pool.config
    weight = config.cached_input_weight if config is not None else 1.0
    limits = config.limits if config is not None else {}
    members = {name: ctx.members.get(name) or GoalCapacity() for name in pool.members}
    dimensions: dict[Dimension, PoolDimension] = {}
    for dimension in DIMENSIONS:
        limit = limits.get(dimension)
        if limit is None:
            continue
        loads = {
            name: member_load(state, at_us, weight, dimension) for name, state in members.items()
        }
        used = room = None
        report = None if dimension in DAILY_DIMENSIONS else latest_report(members, dimension, at_us)
        if report is not None and report.live_at(at_us):
            if report.limit is not None and report.remaining is not None:
                used = max(0, report.limit - report.remaining)
            if report.remaining is not None:
                since = sum(
                    (
                        exact(dimension_usage(_totals_after(state, report.seq), weight, dimension))
                        for state in members.values()
                    ),
                    Fraction(0),
                )
                room = report.remaining - since
        total = sum((m.load for m in loads.values()), Fraction(0))
        dimensions[dimension] = PoolDimension(
            dimension=dimension,
            quota=limit.quota,
            target=limit.target,
            usage=sum((m.usage for m in loads.values()), Fraction(0)),
            reserved=sum((m.reserved for m in loads.values()), Fraction(0)),
            provider_used=used,
            load=max(total, Fraction(used or 0)),
            members=loads,
            room=room,
        )
    until_us = pool.cooldown_until_us
    return PoolEvaluation(
        name=ctx.name,
        at_us=at_us,
        cooldown_until_us=until_us,
        cooldown_active=until_us is not None and at_us < until_us,
        dimensions=dimensions,
        spend=pool_spend_at(ctx, at_us),
    )


class PoolVerdict(msgspec.Struct, frozen=True):
    """The pool's reasons for a member's request, in SPEC §12.1's order (each once), and
    its figures."""

    reasons: tuple[str, ...]
    figures: PoolFigures


def member_terms(ctx: PoolContext, goal: str, state: GoalCapacity) -> PoolMember:
    """The goal's terms in the pool (its own record of them if the pool has none)."""
    found = ctx.state.members.get(goal)
    if found is not None:
        return found
    share, borrowing, lending = state.pool.units if state.pool is not None else (0, 0, 0)
    return PoolMember(share=share, borrowing_limit=borrowing, lending_limit=lending)


def pool_verdict(
    pe: PoolEvaluation, ctx: PoolContext, goal: str, state: GoalCapacity, request: AdmitRequest
) -> PoolVerdict:
    """The pool's part of the decision for `goal`'s request."""
    terms = member_terms(ctx, goal, state)
    failing: dict[str, bool] = dict.fromkeys(R.POOL_REASONS[1:], False)
    binding: Dimension | None = None
    shown: dict[Dimension, PoolDimensionFigures] = {}
    for dimension, d in pe.dimensions.items():
        forecast = forecast_of(request, dimension)
        target = d.target
        share = part_of(terms.share, target)
        ceiling = part_of(terms.share + terms.borrowing_limit, target)
        mine = d.members.get(goal)
        goal_load = mine.load if mine is not None else Fraction(0)
        others = d.protected_others(goal, ctx.state)
        fails: list[str] = []
        if forecast is None:
            fails.append(R.POOL_FORECAST_REQUIRED)
        else:
            needed = d.load + forecast
            if forecast > target or forecast > ceiling:
                fails.append(R.POOL_FORECAST_EXCEEDS_TARGET)
            if needed > target:
                fails.append(R.POOL_HEADROOM_EXHAUSTED)
            if goal_load + forecast > ceiling:
                fails.append(R.POOL_BORROWING_LIMIT)
            if needed <= target and needed + others > target:
                fails.append(R.POOL_SHARE_PROTECTED)
            if d.room is not None and forecast > d.room:
                fails.append(R.POOL_PROVIDER_EXHAUSTED)
        for reason in fails:
            failing[reason] = True
        if fails and binding is None:
            binding = dimension
        shown[dimension] = PoolDimensionFigures(
            usage=number(d.usage),
            reserved=number(d.reserved),
            provider_used=d.provider_used,
            load=number(d.load),
            target=target,
            forecast=forecast,
            share=number(share),
            goal_load=number(goal_load),
            borrowed=number(max(Fraction(0), goal_load - share)),
            protected_others=number(others),
            headroom=number(min(target - d.load - others, ceiling - goal_load)),
        )
    reasons = [R.POOL_COOLDOWN_ACTIVE] if pe.cooldown_active else []
    reasons += [reason for reason, failed in failing.items() if failed]
    spend = pe.spend
    reasons += pool_cap_reasons(spend, request)  # the pool's caps come last
    figures = PoolFigures(
        name=pe.name,
        binding_dimension=binding,
        cooldown_until=format_us_or_none(pe.cooldown_until_us),
        dimensions=shown,
        spend=spend.figures(request) if spend.capped else msgspec.UNSET,
    )
    return PoolVerdict(tuple(reasons), figures)


def pool_cap_reasons(spend: Spend, request: AdmitRequest) -> list[str]:
    """The pool's caps' reasons (SPEC §12.1, §12.4), each once whatever units fail."""
    if not spend.capped:
        return []
    reached, exceeded = spend.failing(request)
    return [
        reason
        for reason, failed in (
            (R.POOL_SPEND_CAP_REACHED, reached),
            (R.POOL_SPEND_CAP_EXCEEDED, exceeded),
        )
        if failed
    ]


def pool_cooldown_terms(pool: PoolState) -> tuple[int, int]:
    """The pool's cooldown base and max, in seconds."""
    config = pool.config
    if config is None:
        return DEFAULT_COOLDOWN_BASE_S, DEFAULT_COOLDOWN_MAX_S
    return config.cooldown_base_s, config.cooldown_max_s


def pool_change_points(ctx: PoolContext, at_us: int) -> list[int]:
    """Times after `at_us` at which the pool's part changes with no new event: its
    cooldown ending, a provider report of a member lapsing."""
    points: set[int] = set()
    if ctx.state.cooldown_until_us is not None:
        points.add(ctx.state.cooldown_until_us)
    for name in ctx.state.members:
        state = ctx.members.get(name)
        if state is not None:
            points.update(report.ends_us() for report in state.provider.values())
    return sorted(p for p in points if p > at_us)
