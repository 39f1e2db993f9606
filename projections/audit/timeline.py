"""The timeline of a goal (for the report): its figures at every time they change."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import US_PER_S, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.audit import RecordedDecision, recorded_decision
from quotaledger.projections.audit.goalfold import GoalFold

# -- the timeline of a goal (for the report) --------------------------------------------


class DimensionPoint(NamedTuple):
    """One configured dimension as of a point: the parts its load is the maximum of
    (SPEC §3.6) and its limits."""

    usage: cap.Number
    reserved: cap.Number
    provider_used: int | None
    """limit - remaining of the provider's report while it is live, else None."""
    load: cap.Number
    target: int
    quota: int


class Point(msgspec.Struct, frozen=True, gc=False):
    """The goal as of `at_us` (values hold until the next point).

    A Struct untracked by the cycle collector (it holds numbers, a string and a dict of
    number tuples, never a cycle): a long report keeps one per change point, about a
    hundred thousand, and a dataclass cost several times as much to build."""

    at_us: int
    uncached_input_tpm: float
    cached_input_weighted_tpm: float
    output_tpm: float
    usage_tpm: float
    reserved_tpm: int
    load_tpm: float
    target_tpm: int | None
    quota_tpm: int | None
    solver_limit_tpm: int | None
    active_runs: int
    cooldown_active: bool
    coverage: str
    dimensions: dict[str, DimensionPoint] = msgspec.field(default_factory=dict)
    """Every configured dimension (tpm included), in reporting order."""
    cache_write_input_tpm: float = 0
    """Tokens written to a prompt cache in the window (counted as input, SPEC §3.6)."""
    spend: tuple[cap.Number, float, int | None, float | None] | None = None
    """With a spend cap (SPEC §12.4): tokens and dollars spent since `cap_since`, and
    the token and dollar caps."""


def spend_of(spend: cap.Spend) -> tuple[cap.Number, float, int | None, float | None] | None:
    """A point's spend: None without a cap."""
    if not spend.capped:
        return None
    usd_cap = None if spend.cap_usd_micro is None else cap.usd_number(spend.cap_usd_micro)
    return (spend.tokens, cap.usd_number(spend.usd_micro), spend.cap_tokens, usd_cap)


def point_of(ev: cap.Evaluation) -> Point:
    """The point of an evaluation: what `Timeline` computes without one (the reference
    its fast path is tested against)."""
    parts = ev.usage.parts
    tokens = ev.tokens
    weight = tokens.cached_input_weight if tokens is not None else 1.0
    return Point(
        at_us=ev.at_us,
        uncached_input_tpm=parts.uncached_input,
        cached_input_weighted_tpm=parts.cached_input * weight,
        output_tpm=parts.output,
        usage_tpm=ev.usage.usage_tpm,
        reserved_tpm=ev.reserved_tpm,
        load_tpm=ev.load_tpm,
        target_tpm=None if tokens is None else tokens.target_tpm,
        quota_tpm=None if tokens is None else tokens.quota_tpm,
        solver_limit_tpm=ev.available_tpm("solver"),
        active_runs=ev.active_cases.total,
        cooldown_active=ev.cooldown_active,
        coverage=ev.usage.coverage,
        dimensions={
            d: DimensionPoint(
                s.usage, s.reserved, s.provider_used, s.load, s.limit.target, s.limit.quota
            )
            for d, s in ev.dimensions.items()
            if s.limit is not None
        },
        cache_write_input_tpm=parts.cache_write_input,
        spend=spend_of(ev.spend),
    )


@dataclass(frozen=True)
class Cooldown:
    start_us: int
    end_us: int
    run: str | None
    retry_after_s: cap.Number | None
    cooldown_s: cap.Number
    goal: str | None = None
    """The member whose 429 started a pool's cooldown; None for a goal's own."""

    @classmethod
    def of(cls, at_us: int, payload: cap.CapacityRejected | cap.PoolCooldown) -> "Cooldown":
        """The cooldown a rejection (a goal's, or a pool's cooldown) at `at_us` started."""
        until_us = parse_at(payload.cooldown_until)
        goal = payload.goal if isinstance(payload, cap.PoolCooldown) else None
        return cls(at_us, until_us, payload.run, payload.retry_after_s, payload.cooldown_s, goal)


class _Held(NamedTuple):
    """An active run as the timeline needs it: when it stops holding its forecasts."""

    lease_until_us: int | None
    forecasts: tuple[int, ...]
    """Its forecast of each of `cap.DIMENSIONS` (0 where it gives none)."""


def _reserved(held: list[_Held]) -> tuple[int, ...]:
    """Each dimension's sum of the forecasts of `held`."""
    totals = [0] * len(cap.DIMENSIONS)
    for run in held:
        for index, forecast in enumerate(run.forecasts):
            totals[index] += forecast
    return tuple(totals)


class _Sampler:
    """A goal's figures at times at or after its latest folded event, without an
    `Evaluation` per time.

    Between two event times only the window's samples, the leases in force, the
    cooldown and the provider reports' liveness change; the config, the runs, the
    reports and the running totals are read once per event time (`refresh`), and the
    window's first sample steps forward from `goal.head` (where the fold left it at the
    latest event). `point(t)` equals `point_of(cap.evaluate(goal, t))`
    (tests/operators/test_report_timeline.py checks it at every point)."""

    def __init__(self, goal: cap.GoalCapacity) -> None:
        self.goal = goal
        self.start = goal.head
        self.now_totals = cap.ZERO_TOTALS
        self.held: list[_Held] = []
        self.leased = False
        """Whether a held run has a lease: then which runs hold depends on the time."""
        self.reserved: tuple[int, ...] = _reserved([])
        self.timers: list[int] = []
        """When a lease, the cooldown or a provider report ends after the latest event,
        sorted: with the samples leaving the window, the times a figure changes."""
        self.refresh(changed=True)

    def refresh(self, *, changed: bool) -> None:
        """Take up the goal's latest event time; `changed`: its events may have changed
        more than the window (config, runs, leases, cooldown, provider reports)."""
        goal = self.goal
        self.start = goal.head
        samples = goal.samples
        self.now_totals = samples[-1].totals if samples else goal.base_totals
        if not changed:
            return
        self._configured(goal.tokens)
        last_us = goal.last_at_us
        runs = [
            r for r in goal.runs.values() if r.admitted_at_us <= last_us and r.active_at(last_us)
        ]
        self.held = [
            _Held(
                r.lease_until_us, tuple(cap.forecast_of(r.request, d) or 0 for d in cap.DIMENSIONS)
            )
            for r in runs
        ]
        self.leased = any(r.lease_until_us is not None for r in runs)
        self.reserved = _reserved(self.held)
        timers = {r.lease_until_us for r in runs if r.lease_until_us is not None}
        if goal.cooldown_until_us is not None:
            timers.add(goal.cooldown_until_us)
        timers.update(report.ends_us() for report in goal.provider.values())
        self.timers = sorted(t for t in timers if t > last_us)

    def _configured(self, tokens: cap.TokenConfig | None) -> None:
        self.weight = tokens.cached_input_weight if tokens is not None else 1.0
        self.target_tpm = None if tokens is None else tokens.target_tpm
        self.quota_tpm = None if tokens is None else tokens.quota_tpm
        limits = cap.limits_of(tokens)
        tpm = limits.get("tpm")
        self.solver_limit_tpm = None if tpm is None else tpm.target - tpm.evaluator_reserve
        self.limited = [
            (index, dimension, limit)
            for index, dimension in enumerate(cap.DIMENSIONS)
            if (limit := limits.get(dimension)) is not None
        ]
        """The configured dimensions: (index, name, limit)."""
        self.daily = any(d in cap.DAILY_DIMENSIONS for _, d, _ in self.limited)
        """A daily dimension is configured: its seconds leaving the day change figures."""

    def window_start(self, at_us: int) -> int:
        """The first sample counting at `at_us` (no earlier than the last time asked)."""
        samples = self.goal.samples
        start, count = self.start, len(samples)
        cutoff_us = at_us - cap.WINDOW_US
        while start < count and samples[start].at_us <= cutoff_us:
            start += 1
        self.start = start
        return start

    def next_change(self, after_us: int) -> int | None:
        """The first time after `after_us` at which a figure changes with no event: the
        window's oldest sample leaves it, or a timer ends; None if nothing will."""
        samples = self.goal.samples
        start = self.window_start(after_us)
        found = samples[start].at_us + cap.WINDOW_US if start < len(samples) else None
        if self.daily:
            day_us = cap.day_leaves_us(self.goal, after_us)
            if day_us is not None and (found is None or day_us < found):
                found = day_us
        for timer_us in self.timers:
            if timer_us > after_us:
                return timer_us if found is None or timer_us < found else found
        return found

    def point(self, at_us: int) -> Point:
        goal = self.goal
        start = self.window_start(at_us)
        before = goal.samples[start - 1].totals if start else goal.base_totals
        u1, c1, w1, o1, r1, m1, e1 = self.now_totals[:7]
        u0, c0, w0, o0, r0, m0, e0 = before[:7]
        uncached, cached, cache_write, output = u1 - u0, c1 - c0, w1 - w0, o1 - o0
        weight = self.weight
        usage_tpm = cap.weighted_tpm(uncached, cached, output, weight, cache_write)
        reserved, active = self.reserved, len(self.held)
        if self.leased:
            held = [h for h in self.held if h.lease_until_us is None or h.lease_until_us > at_us]
            reserved, active = _reserved(held), len(held)
        dimensions: dict[str, DimensionPoint] = {}
        if self.limited:
            window = (uncached, cached, cache_write, output, r1 - r0, m1 - m0, e1 - e0)
            dimensions = self._dimensions(window, reserved, at_us)
        cooldown_us = goal.cooldown_until_us
        return Point(
            at_us=at_us,
            uncached_input_tpm=uncached,
            cached_input_weighted_tpm=cached * weight,
            output_tpm=output,
            usage_tpm=usage_tpm,
            reserved_tpm=reserved[0],
            load_tpm=(
                self._load("tpm", usage_tpm, reserved[0], at_us)
                if goal.provider
                else max(usage_tpm, reserved[0], 0)  # `_load` without a provider report
            ),
            target_tpm=self.target_tpm,
            quota_tpm=self.quota_tpm,
            solver_limit_tpm=self.solver_limit_tpm,
            active_runs=active,
            cooldown_active=cooldown_us is not None and at_us < cooldown_us,
            coverage="unmetered" if m1 - m0 else "estimated" if e1 - e0 else "measured",
            dimensions=dimensions,
            cache_write_input_tpm=cache_write,
            spend=self._spend(),
        )

    def _spend(self) -> tuple[cap.Number, float, int | None, float | None] | None:
        """Spend changes at events only (observations, configures): read from the goal."""
        goal = self.goal
        if goal.caps is None:
            return None
        return spend_of(cap.spend_at(goal, [], self.weight))  # reservations are not drawn

    def _dimensions(
        self, window: tuple[int, ...], reserved: tuple[int, ...], at_us: int
    ) -> dict[str, DimensionPoint]:
        found: dict[str, DimensionPoint] = {}
        for index, dimension, limit in self.limited:
            if dimension in cap.DAILY_DIMENSIONS:
                found[dimension] = self._daily(dimension, limit, at_us)
                continue
            usage = cap.dimension_usage(window, self.weight, dimension)
            held = reserved[index]
            used = self._provider_used(dimension, at_us)
            load = max(usage, held, used or 0)
            found[dimension] = DimensionPoint(usage, held, used, load, limit.target, limit.quota)
        return found

    def _daily(self, dimension: str, limit: cap.Limit, at_us: int) -> DimensionPoint:
        """A daily dimension (SPEC §12.3): the day's usage plus what the runs active at
        `at_us` may still spend (read from the goal: observations change it)."""
        goal, weight = self.goal, self.weight
        usage = cap.dimension_usage(cap.day_totals_at(goal, at_us), weight, dimension)
        runs = cap.active_runs_at(goal, at_us)
        held = cap.tidy(sum(cap.run_remaining(r, dimension, weight) for r in runs))
        return DimensionPoint(usage, held, None, cap.tidy(usage + held), limit.target, limit.quota)

    def _provider_used(self, dimension: str, at_us: int) -> int | None:
        """`DimensionState.provider_used`: limit - remaining of a live provider report."""
        report = self.goal.provider.get(dimension)
        if (
            report is not None
            and report.at_us <= at_us
            and report.live_at(at_us)
            and report.limit is not None
            and report.remaining is not None
        ):
            return max(0, report.limit - report.remaining)
        return None

    def _load(self, dimension: str, usage: cap.Number, reserved: int, at_us: int) -> cap.Number:
        """`DimensionState.load`: the largest of usage, reservations and the count of a
        live provider report."""
        return max(usage, reserved, self._provider_used(dimension, at_us) or 0)


class Timeline(GoalFold):
    """Samples a goal at every time its figures can change; feed every record in order.

    Usage is a step function of time: it changes only at an observation's time and 60 s
    later, when the sample leaves the window; reservations change at admissions,
    releases and lease ends; limits at configures. Sampling at exactly those times
    makes a step chart of the points exact. The next such time comes from the state
    alone (the window's oldest sample, the leases, cooldown and provider reports in
    force), so a timeline can start from any folded state, a checkpoint's included, and
    before `since_us` it only follows the fold.

    By default it folds the goal's records itself. With `folded`, the caller folds each
    record into that state right after `feed` has seen it (the journal's own fold, in
    `Journal.replay`), and the timeline only reads the state.
    """

    def __init__(
        self,
        goal: str,
        *,
        since_us: int | None = None,
        until_us: int | None = None,
        folded: Callable[[], cap.CapacityState] | None = None,
    ) -> None:
        super().__init__(goal, since_us, until_us)
        self.points: list[Point] = []
        self.decisions: list[RecordedDecision] = []
        self.cooldowns: list[Cooldown] = []
        self.rejections = 0
        self.releases = 0
        self.observations = 0
        self.configs: list[tuple[str, cap.CapacityConfigured]] = []
        self._folded = folded
        self._bound = False
        self._sampler: _Sampler | None = None
        self._stale = False
        """The goal folded events since the sampler last took up its state."""
        self._changed = True
        """Those events may have changed more than the window (see `_may_change_more`)."""
        self._group_us: int | None = None
        self._last_us: int | None = None
        self._finished = False
        self._started = since_us is None

    def feed(self, record: Record, payload: Any) -> None:
        if self._folded is None and not self._finished and self.price(record, payload):
            return  # prices fold into the timeline's own state (the journal's has them)
        if record.goal != self.goal or record.kind not in cap.EVENTS or self._finished:
            return
        if not self._bound:
            self._bind()
        at_us = parse_at(record.at)
        if self.until_us is not None and at_us > self.until_us:
            self.finish()  # the state is the range's end now: nothing later folds into it
            return
        if at_us != self._group_us:
            self._close_group()
            self._advance_to(at_us)
            self._group_us = at_us
        self._stale = True
        if not self._changed:
            self._changed = self._may_change_more(payload)
        if self._folded is None:
            cap.apply(self.state, record, payload)
        self._last_us = at_us
        if self.since_us is None or at_us >= self.since_us:
            self._note(record, payload, at_us)

    def finish(self) -> None:
        """Sample to the end of the range (default: 60 s after the last event)."""
        if self._finished:
            return
        if not self._bound:
            self._bind()
        self._close_group()
        self._finished = True
        if self.until_us is not None:
            end_us = self.until_us
        elif self._last_us is not None:
            end_us = self._last_us + cap.WINDOW_US
        else:
            return
        self._advance_to(end_us)
        if self._last_us is not None and (self.since_us is None or end_us >= self.since_us):
            self._sample(end_us)

    def _bind(self) -> None:
        """Take up the state as the first record of the goal finds it (or the end):
        empty, or a checkpoint's holding the goal's events before the range."""
        self._bound = True
        if self._folded is not None:
            self.state = self._folded()
        goal = self.state.goals.get(self.goal)
        if goal is not None:
            self._last_us = goal.last_at_us
            self._stale = True

    def _may_change_more(self, payload: Any) -> bool:
        """Whether folding this event may change more than the window: anything but an
        observation without a provider report that renews no lease."""
        if not isinstance(payload, cap.CapacityObserved) or payload.provider is not None:
            return True
        return payload.run is not None and (self._sampler is None or self._sampler.leased)

    def _note(self, record: Record, payload: Any, at_us: int) -> None:
        if isinstance(payload, cap.CapacityObserved):  # most events: counted first
            self.observations += 1
            return
        decision = recorded_decision(record, payload)
        if decision is not None:
            self.decisions.append(decision)
        elif isinstance(payload, cap.CapacityRejected):
            self.rejections += 1
            self.cooldowns.append(Cooldown.of(at_us, payload))
        elif isinstance(payload, cap.CapacityReleased):
            self.releases += 1
        elif isinstance(payload, cap.CapacityConfigured):
            self.configs.append((record.at, payload))

    def _close_group(self) -> None:
        """Every event at the group's time is folded: sample it (in the range)."""
        group_us = self._group_us
        if group_us is None:
            return
        self._group_us = None
        if self.since_us is None or group_us >= self.since_us:
            self._sample(group_us)

    def _fresh_sampler(self) -> _Sampler | None:
        """The sampler on the state folded so far (None while the goal has no event)."""
        sampler = self._sampler
        if not self._stale:
            return sampler
        self._stale = False
        if sampler is None:
            goal = self.state.goals.get(self.goal)
            if goal is None:
                return None
            sampler = self._sampler = _Sampler(goal)
        else:
            sampler.refresh(changed=self._changed)
        self._changed = False
        return sampler

    def _advance_to(self, until_us: int) -> None:
        """Sample the change points before `until_us` (the state holds until then)."""
        if self._last_us is None:
            return  # nothing folded yet: nothing changes
        since_us = self.since_us
        if not self._started:
            if since_us is None or until_us <= since_us:
                return  # before the range: nothing is sampled, so nothing to look for
            self._sample(since_us)
        sampler = self._fresh_sampler()
        assert sampler is not None
        point_us = sampler.next_change(self.points[-1].at_us if self.points else self._last_us)
        while point_us is not None and point_us < until_us:
            self._sample(point_us)
            point_us = sampler.next_change(point_us)

    def _sample(self, at_us: int) -> None:
        self._started = True
        if self.points and at_us <= self.points[-1].at_us:
            return
        sampler = self._fresh_sampler()
        assert sampler is not None
        self.points.append(sampler.point(at_us))


def merged_cooldowns(cooldowns: list[Cooldown]) -> list[tuple[int, int]]:
    """The time spans during which a cooldown was active (overlaps merged)."""
    spans: list[tuple[int, int]] = []
    for c in sorted(cooldowns, key=lambda c: c.start_us):
        if spans and c.start_us <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], c.end_us))
        else:
            spans.append((c.start_us, c.end_us))
    return spans


def seconds(delta_us: int) -> float:
    return delta_us / US_PER_S
