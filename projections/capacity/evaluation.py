"""Questions about a goal as of a time: its window, usage, load and dimensions."""

import bisect
import operator
from collections.abc import Collection

import msgspec
from msgspec import UNSET

from quotaledger.journal.clock import US_PER_S, format_us_or_none, parse_at
from quotaledger.projections.capacity.caps import spent_totals
from quotaledger.projections.capacity.config import (
    DAILY_DIMENSIONS,
    DEFAULT_MAX_OBSERVATION_AGE_S,
    DIMENSIONS,
    LIMIT_DIMENSIONS,
    MINUTE_DIMENSIONS,
    CaseConfig,
    Coverage,
    Dimension,
    Number,
    TokenConfig,
)
from quotaledger.projections.capacity.events import (
    ActiveCases,
    AdmitRequest,
    DimensionFigures,
    Figures,
    SpendFigures,
    SpendUnit,
    UsageParts,
)
from quotaledger.projections.capacity.fold import (
    DAY_US,
    WINDOW_US,
    ActiveRun,
    GoalCapacity,
    ProviderState,
    Sample,
    Totals,
)
from quotaledger.projections.capacity.money import micro_of, usd_number

USAGE_DECIMALS = 6
"""Weighted usage is rounded so that float noise never flips a decision."""

_sample_at = operator.attrgetter("at_us")
"""A sample's time, the bisections' key (in C: a Python function costs a call per step)."""


# -- questions as of a time ------------------------------------------------------------


def window_range(goal: GoalCapacity, at_us: int) -> tuple[int, int]:
    """`samples[start:end]` are the observations counting at `at_us`:
    `at_us - 60 s < at <= at_us`.

    What the two bisections would find, looked at first where it nearly always is:
    the window of a command (at or after the goal's latest event) starts at `head`,
    which the fold keeps at the first sample inside the window of the latest event,
    and ends after the last sample. A durable append asks this once or twice, right
    after its fdatasync, when every bisection step costs several times its warm cost.
    """
    samples = goal.samples
    count = len(samples)
    cutoff_us = at_us - WINDOW_US
    start = goal.head
    if start < count and samples[start].at_us <= cutoff_us:
        start = bisect.bisect_right(samples, cutoff_us, lo=start + 1, key=_sample_at)
    if start == count or samples[-1].at_us <= at_us:
        return start, count
    return start, bisect.bisect_right(samples, at_us, lo=start, key=_sample_at)


def window_samples(goal: GoalCapacity, at_us: int) -> list[Sample]:
    """The observations counting at `at_us`, oldest first (a copy: O(window))."""
    start, end = window_range(goal, at_us)
    return goal.samples[start:end]


def _totals_before(goal: GoalCapacity, index: int) -> Totals:
    return goal.samples[index - 1].totals if index > 0 else goal.base_totals


def weighted_tpm(
    uncached_input: int, cached_input: int, output: int, weight: float, cache_write_input: int = 0
) -> Number:
    """Tokens that count against the quota; an int unless the weight makes it fractional."""
    if weight == 1.0:
        return uncached_input + cache_write_input + cached_input + output
    value = round(
        uncached_input + cache_write_input + output + cached_input * weight, USAGE_DECIMALS
    )
    return int(value) if value.is_integer() else value


def dimension_usage(totals: Totals | tuple[int, ...], weight: float, dimension: str) -> Number:
    """One dimension's usage of the tokens and requests in `totals` (SPEC §3.6; tpd
    sums tokens as tpm does, rpd requests as rpm, SPEC §12.3)."""
    uncached, cached, cache_write, output, requests = totals[:5]
    if dimension in ("tpm", "tpd"):
        return weighted_tpm(uncached, cached, output, weight, cache_write)
    if dimension == "itpm":
        return weighted_tpm(uncached, cached, 0, weight, cache_write)
    if dimension == "otpm":
        return output
    return requests


def _difference(after: Totals, before: Totals) -> Totals:
    a, b = after, before
    return (
        a[0] - b[0],
        a[1] - b[1],
        a[2] - b[2],
        a[3] - b[3],
        a[4] - b[4],
        a[5] - b[5],
        a[6] - b[6],
        a[7] - b[7],
        a[8] - b[8],
    )


def day_totals_at(goal: GoalCapacity, at_us: int) -> Totals:
    """The raw sums of the observations of the daily window at `at_us` (SPEC §12.3): an
    observation at second s counts while s > at_us - 86,400 s. Two running totals and
    one bisection over the day's seconds, whatever the number of observations in it."""
    seconds = goal.day_seconds
    now = goal.day_totals[-1] if seconds else goal.day_base
    # s * 1 s > at - 1 day  <=>  s > floor((at - 1 day) / 1 s), s being whole seconds.
    last_out = (at_us - DAY_US) // US_PER_S
    start = bisect.bisect_right(seconds, last_out, lo=min(goal.day_head, len(seconds)))
    before = goal.day_totals[start - 1] if start > 0 else goal.day_base
    return _difference(now, before)


def day_leaves_us(goal: GoalCapacity, at_us: int) -> int | None:
    """When the oldest second counting at `at_us` leaves the daily window (None: none)."""
    seconds = goal.day_seconds
    last_out = (at_us - DAY_US) // US_PER_S
    start = bisect.bisect_right(seconds, last_out, lo=min(goal.day_head, len(seconds)))
    return None if start >= len(seconds) else seconds[start] * US_PER_S + DAY_US


class Usage(msgspec.Struct, frozen=True):
    """The trailing-window usage as of a time."""

    usage_tpm: Number
    parts: UsageParts
    coverage: Coverage
    unmetered_in_window: bool
    totals: Totals
    """The window's raw sums (see `Totals`)."""
    weight: float

    def of(self, dimension: str) -> Number:
        return dimension_usage(self.totals, self.weight, dimension)


def usage_at(goal: GoalCapacity, at_us: int) -> Usage:
    """Usage in the window ending at `at_us`, its raw parts and its coverage.

    Coverage is the weakest kind of sample in the window: `unmetered` if any sample is
    unmetered (usage is then unknown until it leaves), else `estimated` if any is
    estimated, else `measured`.
    """
    start, end = window_range(goal, at_us)
    window = _difference(_totals_before(goal, end), _totals_before(goal, start))
    uncached, cached, cache_write, output, _, unmetered, estimated = window[:7]
    coverage: Coverage = "unmetered" if unmetered else "estimated" if estimated else "measured"
    weight = goal.tokens.cached_input_weight if goal.tokens is not None else 1.0
    return Usage(
        usage_tpm=weighted_tpm(uncached, cached, output, weight, cache_write),
        parts=UsageParts(
            uncached_input=uncached,
            cached_input=cached,
            cache_write_input=cache_write,
            output=output,
        ),
        coverage=coverage,
        unmetered_in_window=unmetered > 0,
        totals=window,
        weight=weight,
    )


def active_runs_at(goal: GoalCapacity, at_us: int) -> list[ActiveRun]:
    """Runs admitted, not released and not past their lease at `at_us`, in admission order."""
    if not goal.runs:
        return []
    runs = [r for r in goal.runs.values() if r.admitted_at_us <= at_us and r.active_at(at_us)]
    return sorted(runs, key=lambda r: r.seq)


def active_counts(runs: list[ActiveRun]) -> ActiveCases:
    groups = [r.group for r in runs]
    return ActiveCases(
        total=len(runs), baseline=groups.count("baseline"), test=groups.count("test")
    )


def max_observation_age_us(goal: GoalCapacity) -> int:
    age_s = goal.tokens.max_observation_age_s if goal.tokens else DEFAULT_MAX_OBSERVATION_AGE_S
    return round(age_s * US_PER_S)


def forecast_of(request: AdmitRequest, dimension: str) -> int | None:
    """The request's forecast of one dimension; `forecast_tpm`, when absent, is
    `forecast_itpm + forecast_otpm` if both are given (SPEC §3.6)."""
    if dimension == "tpm":
        if request.forecast_tpm is not None:
            return request.forecast_tpm
        if request.forecast_itpm is not None and request.forecast_otpm is not None:
            return request.forecast_itpm + request.forecast_otpm
        return None
    if dimension == "itpm":
        return request.forecast_itpm
    if dimension == "otpm":
        return request.forecast_otpm
    if dimension == "rpm":
        return request.forecast_rpm
    if dimension == "tpd":
        return request.forecast_tokens
    return request.forecast_requests


def run_remaining(run: ActiveRun, dimension: str, weight: float) -> Number:
    """What an active run may still spend of a daily dimension (SPEC §12.3): its forecast
    total less what was observed with it after its admission, never below 0; nothing
    without the forecast."""
    forecast = forecast_of(run.request, dimension)
    if forecast is None:
        return 0
    return tidy(max(0, forecast - dimension_usage(run.observed, weight, dimension)))


def run_remaining_usd_micro(run: ActiveRun) -> int:
    """What an active run may still spend in dollars (SPEC §12.4), in micro-dollars."""
    forecast = run.request.forecast_usd
    if forecast is None:
        return 0
    return max(0, (micro_of(forecast) or 0) - run.observed[5])


class Limit(msgspec.Struct, frozen=True):
    """One configured dimension's envelope, whichever way the config spells it."""

    quota: int
    target: int
    evaluator_reserve: int
    cold_start_reserve: int


def limits_of(tokens: TokenConfig | None) -> dict[Dimension, Limit]:
    """The configured dimensions, in reporting order."""
    if tokens is None:
        return {}
    found: dict[Dimension, Limit] = {}
    if tokens.quota_tpm is not None and tokens.target_tpm is not None:
        found["tpm"] = Limit(
            tokens.quota_tpm,
            tokens.target_tpm,
            tokens.evaluator_reserve_tpm,
            tokens.cold_start_reserve_tpm,
        )
    for dimension in LIMIT_DIMENSIONS:
        limit = tokens.limits.get(dimension)
        if limit is not None:
            found[dimension] = Limit(
                limit.quota, limit.target, limit.evaluator_reserve, limit.cold_start_reserve
            )
    return found


class ProviderView(msgspec.Struct, frozen=True):
    """A dimension's latest provider report as of a time."""

    report: ProviderState
    live: bool
    used_since: Number
    """The dimension's usage observed after the report."""

    @property
    def used(self) -> int | None:
        """What the provider counts as used (limit - remaining), while live."""
        report = self.report
        if not self.live or report.limit is None or report.remaining is None:
            return None
        return max(0, report.limit - report.remaining)

    @property
    def room(self) -> Number | None:
        """What the provider would still accept: remaining minus usage since, while live."""
        if not self.live or self.report.remaining is None:
            return None
        return tidy(self.report.remaining - self.used_since)


class DimensionState(msgspec.Struct, frozen=True):
    """One dimension as of a time (configured or not: `limit` is None when it is not)."""

    dimension: Dimension
    limit: Limit | None
    usage: Number
    reserved: Number
    provider: ProviderView | None
    daily: bool = False
    """A daily dimension (SPEC §12.3): its reservation is what the runs may still spend,
    on top of what was used, so the load is their sum."""

    @property
    def provider_used(self) -> int | None:
        return None if self.provider is None else self.provider.used

    @property
    def load(self) -> Number:
        if self.daily:
            return tidy(self.usage + self.reserved)
        # Forecasts already cover the usage of the runs they belong to, and the
        # provider's count covers both: the largest is the load, never their sum.
        provider = self.provider
        used = None if provider is None else provider.used
        return max(self.usage, self.reserved, used or 0)

    def available(self, run_class: str) -> int | None:
        """The part of the target a run of this class may fill (None: not configured)."""
        if self.limit is None:
            return None
        protected = self.limit.evaluator_reserve if run_class == "solver" else 0
        return self.limit.target - protected

    def headroom(self, run_class: str) -> Number | None:
        """Largest forecast a run of this class could be admitted with (may be negative)."""
        available = self.available(run_class)
        if available is None or self.limit is None:
            return None
        return tidy(available - self.limit.cold_start_reserve - self.load)


class Evaluation(msgspec.Struct, frozen=True):
    """Everything about a goal as of `at_us` that does not depend on a request."""

    at_us: int
    cases: CaseConfig | None
    tokens: TokenConfig | None
    usage: Usage
    tpm: DimensionState
    """tpm, configured or not (the figures' `*_tpm`); every dimension: `every_dimension`."""
    dimensions: dict[Dimension, DimensionState]
    """The configured dimensions, in reporting order (an admission reads them twice)."""
    observation_stale: bool
    last_observation_at_us: int | None
    cooldown_until_us: int | None
    cooldown_active: bool
    active_runs: tuple[ActiveRun, ...]
    active_cases: ActiveCases
    spend: "Spend"
    pooled: bool = False
    """The goal is a member of a pool (SPEC §12.1): configured without gates of its
    own, and its provider reports count at the pool, not here."""

    @property
    def configured(self) -> bool:
        return self.cases is not None or self.tokens is not None or self.spend.capped or self.pooled

    @property
    def minute_gate(self) -> bool:
        """The token gate has a per-minute dimension: the gate-wide freshness reasons
        apply (SPEC §12.3: a gate with only daily dimensions needs no observation every
        minute)."""
        return not self.dimensions.keys().isdisjoint(MINUTE_DIMENSIONS)  # in C, no generator

    @property
    def reserved_tpm(self) -> int:
        return int(self.tpm.reserved)  # per minute: a sum of whole forecasts

    @property
    def load_tpm(self) -> Number:
        return self.tpm.load

    def available_tpm(self, run_class: str) -> int | None:
        return self.tpm.available(run_class)

    def headroom_tpm(self, run_class: str) -> Number | None:
        return self.tpm.headroom(run_class)

    def figures(
        self, request: AdmitRequest | None, run_class: str, binding: Dimension | None = None
    ) -> Figures:
        cases, tokens, usage = self.cases, self.tokens, self.usage
        tpm = self.tpm
        dimensions = {
            d: dimension_figures(s, None if request is None else forecast_of(request, d), run_class)
            for d, s in self.dimensions.items()
        }
        return Figures(
            usage_tpm=usage.usage_tpm,
            usage=usage.parts,
            reserved_tpm=self.reserved_tpm,
            load_tpm=tpm.load,
            target_tpm=None if tokens is None else tokens.target_tpm,
            headroom_tpm=tpm.headroom(run_class),
            forecast_tpm=None if request is None else forecast_of(request, "tpm"),
            coverage=usage.coverage,
            observation_stale=self.observation_stale,
            last_observation_at=format_us_or_none(self.last_observation_at_us),
            cooldown_until=format_us_or_none(self.cooldown_until_us),
            active_cases=self.active_cases,
            target_active_cases=None if cases is None else cases.target_active_cases,
            max_active_cases=None if cases is None else cases.max_active_cases,
            quota_tpm=None if tokens is None else tokens.quota_tpm,
            evaluator_reserve_tpm=None if tokens is None else tokens.evaluator_reserve_tpm,
            cold_start_reserve_tpm=None if tokens is None else tokens.cold_start_reserve_tpm,
            dimensions=dimensions,
            binding_dimension=binding,
            spend=self.spend.figures(request) if self.spend.capped else UNSET,
        )


def dimension_figures(s: DimensionState, forecast: int | None, run_class: str) -> DimensionFigures:
    limit, load, available = s.limit, s.load, s.available(run_class)
    assert limit is not None and available is not None
    return DimensionFigures(
        usage=s.usage,
        reserved=s.reserved,
        provider_used=s.provider_used,
        load=load,
        target=limit.target,
        headroom=tidy(available - limit.cold_start_reserve - load),  # s.headroom, load once
        forecast=forecast,
    )


class Spend(msgspec.Struct, frozen=True):
    """A goal's spend as of a time (SPEC §12.4). Dollars in micro-dollars; tokens summed
    as tpm with the goal's cached-input weight (1.0 without a token gate)."""

    since_us: int | None
    """The caps' `cap_since`; None without a cap (the figures are then the goal's whole
    history, as `metrics`' counters)."""
    tokens: Number
    usd_micro: int
    unpriced_tokens: int
    cap_tokens: int | None
    cap_usd_micro: int | None
    reserved_tokens: Number
    reserved_usd_micro: int

    @property
    def capped(self) -> bool:
        return self.cap_tokens is not None or self.cap_usd_micro is not None

    def failing(self, request: AdmitRequest) -> tuple[bool, bool]:
        """(reached, exceeded) for `request` (SPEC §12.4): per unit reached when spent
        >= cap, else exceeded when spent + the active runs' remaining forecasts + this
        request's forecast > cap."""
        reached = exceeded = False
        if self.cap_tokens is not None:
            if self.tokens >= self.cap_tokens:
                reached = True
            elif (
                self.tokens + self.reserved_tokens + (request.forecast_tokens or 0)
                > self.cap_tokens
            ):
                exceeded = True
        if self.cap_usd_micro is not None:
            forecast = 0 if request.forecast_usd is None else micro_of(request.forecast_usd) or 0
            if self.usd_micro >= self.cap_usd_micro:
                reached = True
            elif self.usd_micro + self.reserved_usd_micro + forecast > self.cap_usd_micro:
                exceeded = True
        return reached, exceeded

    @property
    def reached(self) -> bool:
        """Some cap is spent: nothing new starts (`next_action` spend_cap_reached)."""
        tokens = self.cap_tokens is not None and self.tokens >= self.cap_tokens
        usd = self.cap_usd_micro is not None and self.usd_micro >= self.cap_usd_micro
        return tokens or usd

    def figures(self, request: AdmitRequest | None) -> SpendFigures:
        """`figures.spend`: each capped unit's spent, reserved, forecast and cap."""
        found: SpendFigures = {}
        if self.cap_tokens is not None:
            found["tokens"] = SpendUnit(
                spent=self.tokens,
                reserved=self.reserved_tokens,
                forecast=None if request is None else request.forecast_tokens,
                cap=self.cap_tokens,
            )
        if self.cap_usd_micro is not None:
            forecast = None if request is None else request.forecast_usd
            found["usd"] = SpendUnit(
                spent=usd_number(self.usd_micro),
                reserved=usd_number(self.reserved_usd_micro),
                forecast=None if forecast is None else usd_number(micro_of(forecast) or 0),
                cap=usd_number(self.cap_usd_micro),
            )
        return found


def spend_at(goal: GoalCapacity, runs: list[ActiveRun], weight: float) -> Spend:
    """The goal's spend since its caps' `cap_since` (its whole history without a cap),
    and what its active runs may still spend."""
    caps = goal.caps
    spent = spent_totals(goal)
    since_us = None if caps is None else parse_at(caps.cap_since)
    return Spend(
        since_us=since_us,
        tokens=dimension_usage(spent, weight, "tpm"),
        usd_micro=spent[8],
        unpriced_tokens=spent[7],
        cap_tokens=None if caps is None else caps.cap_tokens,
        cap_usd_micro=None if caps is None or caps.cap_usd is None else micro_of(caps.cap_usd),
        reserved_tokens=tidy(sum(run_remaining(r, "tpd", weight) for r in runs)) if runs else 0,
        reserved_usd_micro=sum(run_remaining_usd_micro(r) for r in runs) if runs else 0,
    )


def evaluate(goal: GoalCapacity, at_us: int) -> Evaluation:
    """The goal as of `at_us` (which must be at or after the goal's latest folded event).

    Only the configured dimensions and tpm (the figures' own) are built: a decision
    reads no other, and the rest cost an admission a third of the evaluation. The
    views that show every dimension's provider report ask `every_dimension`."""
    usage = usage_at(goal, at_us)
    runs = active_runs_at(goal, at_us)
    limits = limits_of(goal.tokens)
    states = _dimension_states(goal, at_us, usage, runs, limits, limits.keys() | {"tpm"})
    configured = {d: states[d] for d in limits}
    metered_us = goal.last_metered_at_us
    if metered_us is not None and metered_us > at_us:
        metered_us = None  # not yet observed as of at_us
    cooldown_us = goal.cooldown_until_us
    return Evaluation(
        at_us=at_us,
        cases=goal.cases,
        tokens=goal.tokens,
        usage=usage,
        tpm=states["tpm"],
        dimensions=configured,
        observation_stale=metered_us is None or at_us - metered_us > max_observation_age_us(goal),
        last_observation_at_us=metered_us,
        cooldown_until_us=cooldown_us,
        cooldown_active=cooldown_us is not None and at_us < cooldown_us,
        active_runs=tuple(runs),
        active_cases=active_counts(runs),
        spend=spend_at(goal, runs, usage.weight),
        pooled=goal.pool is not None,
    )


def every_dimension(goal: GoalCapacity, at_us: int) -> dict[Dimension, DimensionState]:
    """All six dimensions as of `at_us`, configured or not (provider reports are kept
    for every one), in reporting order; each equal to `evaluate`'s where it has one."""
    usage = usage_at(goal, at_us)
    runs = active_runs_at(goal, at_us)
    return _dimension_states(goal, at_us, usage, runs, limits_of(goal.tokens), DIMENSIONS)


def _dimension_states(
    goal: GoalCapacity,
    at_us: int,
    usage: Usage,
    runs: list[ActiveRun],
    limits: dict[Dimension, Limit],
    wanted: Collection[Dimension],
) -> dict[Dimension, DimensionState]:
    """The `wanted` dimensions' states, in reporting order."""
    states: dict[Dimension, DimensionState] = {}
    weight = usage.weight
    # A pooled goal's provider reports are the organisation's: they count at its pool.
    reports = goal.provider if goal.pool is None else {}
    now_totals = _totals_before(goal, len(goal.samples))
    for dimension in MINUTE_DIMENSIONS:
        if dimension not in wanted:
            continue
        report = reports.get(dimension)
        view = None
        if report is not None and report.at_us <= at_us:
            since = dimension_usage(_difference(now_totals, report.totals), weight, dimension)
            view = ProviderView(report, report.live_at(at_us), since)
        states[dimension] = DimensionState(
            dimension=dimension,
            limit=limits.get(dimension),
            usage=usage.of(dimension),
            reserved=sum(forecast_of(r.request, dimension) or 0 for r in runs) if runs else 0,
            provider=view,
        )
    daily = [d for d in DAILY_DIMENSIONS if d in wanted]
    if daily:
        states.update(_daily_states(goal, at_us, weight, runs, limits, daily))
    return states


def _daily_states(
    goal: GoalCapacity,
    at_us: int,
    weight: float,
    runs: list[ActiveRun],
    limits: dict[Dimension, Limit],
    daily: list[Dimension],
) -> dict[Dimension, DimensionState]:
    day = day_totals_at(goal, at_us)
    return {
        dimension: DimensionState(
            dimension=dimension,
            limit=limits.get(dimension),
            usage=dimension_usage(day, weight, dimension),
            reserved=tidy(sum(run_remaining(r, dimension, weight) for r in runs)) if runs else 0,
            provider=None,
            daily=True,
        )
        for dimension in daily
    }


def tidy(value: Number) -> Number:
    if isinstance(value, float):
        value = round(value, USAGE_DECIMALS)
        return int(value) if value.is_integer() else value
    return value
