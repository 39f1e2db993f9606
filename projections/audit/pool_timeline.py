"""The timeline of a pool (for `report --pool P`, SPEC §12.1): each pool dimension's
load, member by member, against the pool's target, at every time it changes.

Fed every record in journal order, it folds the ledger as recorded; the pool's and
its members' records (one clock, SPEC §12.1) are the range's: at each of their times,
and at each time between them when a figure changes with no event (a sample leaving
a window, a lease ending, the cooldown ending, a provider report lapsing), the pool is
evaluated by `pool_evaluate`, the fold `admit` decides on.
"""

import bisect
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from quotaledger.journal import Record
from quotaledger.journal.clock import US_PER_S, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.audit import RecordedDecision, recorded_decision
from quotaledger.projections.audit.timeline import Cooldown
from quotaledger.projections.capacity.pool_decision import number, pool_change_points
from quotaledger.projections.ledger import PROJECTOR, LedgerState, on_pool_clock


class PoolDimensionPoint(NamedTuple):
    """One pool dimension as of a point."""

    members: dict[str, cap.Number]
    """Each member's own load (usage and reservations, no provider report)."""
    load: cap.Number
    """The pool's: the members' sum, or the live provider report's use when larger."""
    provider_used: int | None
    target: int
    quota: int


class PoolPoint(NamedTuple):
    """The pool as of `at_us` (values hold until the next point)."""

    at_us: int
    cooldown_active: bool
    dimensions: dict[str, PoolDimensionPoint]


@dataclass
class PoolTimeline:
    """Feed it every record in journal order (`feed`), then `finish`; read `points`,
    `decisions` (its members'), `cooldowns` (the pool's) and `configs`."""

    pool: str
    since_us: int | None = None
    until_us: int | None = None
    state: LedgerState = field(default_factory=PROJECTOR.initial)
    points: list[PoolPoint] = field(default_factory=list)
    decisions: list[RecordedDecision] = field(default_factory=list)
    cooldowns: list[Cooldown] = field(default_factory=list)
    configs: list[tuple[str, cap.PoolConfigured]] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    """Every goal that was a member in the range, in the order it first was."""
    rejections: int = 0
    observations: int = 0
    _last_us: int | None = None

    def feed(self, record: Record, payload: Any) -> None:
        if not on_pool_clock(self.state, self.pool, record, payload):
            PROJECTOR.apply(self.state, record, payload)  # other streams: as recorded
            return
        at_us = parse_at(record.at)  # the pool's clock: never back in journal order
        if self.until_us is not None and at_us > self.until_us:
            return
        self._advance_to(at_us)
        PROJECTOR.apply(self.state, record, payload)
        self._last_us = at_us
        if not self._in_range(at_us):
            return
        self._note(record, payload, at_us)
        self._sample(at_us)

    def finish(self) -> None:
        """Sample to the end of the range (default: 60 s after the last event)."""
        if self._last_us is None:
            return
        end_us = self.until_us if self.until_us is not None else self._last_us + cap.WINDOW_US
        self._advance_to(end_us)
        if self._in_range(end_us):
            self._sample(end_us)

    # -- which records, when ----------------------------------------------------------

    def _in_range(self, at_us: int) -> bool:
        return self.since_us is None or at_us >= self.since_us

    def _note(self, record: Record, payload: Any, at_us: int) -> None:
        if isinstance(payload, cap.PoolConfigured):
            self.configs.append((record.at, payload))
        elif isinstance(payload, cap.PoolCooldown):
            self.rejections += 1
            self.cooldowns.append(Cooldown.of(at_us, payload))
        elif isinstance(payload, cap.CapacityObserved):
            self.observations += 1
        else:
            decision = recorded_decision(record, payload)
            if decision is not None:
                self.decisions.append(decision)

    def _advance_to(self, at_us: int) -> None:
        """Sample every time after the last event and before `at_us` at which a figure
        changes with no event (and the range's start, if it lies there)."""
        last_us = self._last_us
        if last_us is None:
            return
        times = {t for t in self._change_points(last_us) if t < at_us}
        if self.since_us is not None and last_us < self.since_us < at_us:
            times.add(self.since_us)
        for t in sorted(times):
            if self._in_range(t):
                self._sample(t)

    def _change_points(self, after_us: int) -> list[int]:
        ctx = self._context()
        if ctx is None:
            return []
        points: set[int] = set(pool_change_points(ctx, after_us))
        daily = ctx.state.config is not None and any(
            d in cap.DAILY_DIMENSIONS for d in ctx.state.config.limits
        )
        for goal in ctx.members.values():
            points.update(cap.change_points_after(goal, after_us))
            if daily:  # the pool's day, whatever the member's own gate (SPEC §12.3)
                seconds = goal.day_seconds
                low = (after_us - cap.DAY_US) // US_PER_S
                start = bisect.bisect_right(seconds, low, lo=goal.day_head)
                points.update(s * US_PER_S + cap.DAY_US for s in seconds[start:])
        return [p for p in points if p > after_us]

    # -- the points -----------------------------------------------------------------

    def _context(self) -> cap.PoolContext | None:
        pool = self.state.pools.pools.get(self.pool)
        if pool is None or pool.config is None:
            return None
        goals = self.state.capacity.goals
        members = {m: goals.get(m) or cap.GoalCapacity() for m in pool.members}
        return cap.PoolContext(self.pool, pool, members)

    def _sample(self, at_us: int) -> None:
        ctx = self._context()
        if ctx is None:
            return
        for name in ctx.state.members:
            if name not in self.members:
                self.members.append(name)
        pe = cap.pool_evaluate(ctx, at_us)
        point = PoolPoint(
            at_us,
            pe.cooldown_active,
            {
                dimension: PoolDimensionPoint(
                    {g: number(m.load) for g, m in d.members.items()},
                    number(d.load),
                    d.provider_used,
                    d.target,
                    d.quota,
                )
                for dimension, d in pe.dimensions.items()
            },
        )
        if self.points and self.points[-1].at_us == at_us:
            self.points[-1] = point  # a transaction's events take one time
        else:
            self.points.append(point)
