"""The capacity decisions (SPEC §3.2-§3.6): admission, release, a rejection's
cooldown, when a refused request would pass, readiness and the next action."""

import bisect
import math
from typing import Any

import msgspec

from quotaledger.journal.clock import US_PER_S, format_us
from quotaledger.projections import reasons as R
from quotaledger.projections.capacity.config import (
    ARM_GROUP,
    DAILY_DIMENSIONS,
    DEFAULT_COOLDOWN_BASE_S,
    DEFAULT_COOLDOWN_MAX_S,
    LIMIT_DIMENSIONS,
    CaseConfig,
    Dimension,
    Number,
)
from quotaledger.projections.capacity.evaluation import (
    DimensionState,
    Evaluation,
    Spend,
    evaluate,
    forecast_of,
    tidy,
)
from quotaledger.projections.capacity.events import (
    ADMITTED,
    REFUSED,
    RELEASED,
    ActiveCases,
    AdmitRequest,
    CapacityAdmitted,
    CapacityRefused,
    CapacityReleased,
    Figures,
    Receipt,
)
from quotaledger.projections.capacity.fold import DAY_US, WINDOW_US, ActiveRun, GoalCapacity
from quotaledger.projections.capacity.pool_decision import (
    PoolContext,
    pool_change_points,
    pool_cooldown_terms,
    pool_evaluate,
    pool_verdict,
)
from quotaledger.projections.capacity.pool_fold import PoolState
from quotaledger.projections.decision import Decision


def seconds_us(seconds: Number) -> int:
    """A duration in whole microseconds; a fractional one is rounded up (a cooldown
    never ends early), after dropping float noise (0.1 s is 100000 µs, not 100001)."""
    if isinstance(seconds, int):
        return seconds * US_PER_S
    return math.ceil(round(seconds * US_PER_S, 3))


# -- the admission decision (SPEC §3.3, §3.6) ------------------------------------------


class Admission(msgspec.Struct, frozen=True):
    """What an admission decision used and took (its `Decision.detail`)."""

    figures: Figures
    receipt: Receipt | None
    """For an admission: the new receipt, or the original one on an idempotent replay."""
    original: ActiveRun | None = None
    """The active admission of the same run, if any."""


AdmissionDecision = Decision[Admission]
"""`ok` is admitted; the event is `capacity.admitted` or, for a refusal, the journaled
`capacity.refused`; an idempotent replay appends nothing."""


def decide_admission(
    goal: GoalCapacity,
    request: AdmitRequest,
    at_us: int,
    pool: PoolContext | None = None,
    name: str | None = None,
) -> AdmissionDecision:
    """May `request` start at `at_us`? Pure: the same answer for the same inputs.

    `goal` is the goal's state folded up to (not including) the decision; `at_us` is the
    decision's time, at or after the goal's latest folded event. For a goal in a pool,
    `pool` is its pool (every member folded as far) and `name` the goal's name: the
    pool's reasons follow the goal's own (SPEC §12.1). `admit`, `audit`, `whatif` and
    `verify --decisions` all decide with this one function.
    """
    ev = evaluate(goal, at_us)
    verdict = None
    if pool is not None and name is not None and goal.pool is not None:
        ctx = pool.with_member(name, goal)
        verdict = pool_verdict(pool_evaluate(ctx, at_us), ctx, name, goal, request)
    original = next((r for r in ev.active_runs if r.request.run == request.run), None)
    if original is not None:
        figures = ev.figures(request, request.run_class)
        if verdict is not None:
            figures = msgspec.structs.replace(figures, pool=verdict.figures)
        if original.request == request:
            detail = Admission(figures, original.receipt, original)
            return Decision(idempotent=True, detail=detail)
        return _refusal(request, (R.RUN_EXISTS_WITH_DIFFERENT_REQUEST,), figures, original)
    reasons = refusal_reasons(ev, request)
    figures = ev.figures(request, request.run_class, binding_dimension(reasons))
    if verdict is not None:
        reasons += verdict.reasons
        figures = msgspec.structs.replace(figures, pool=verdict.figures)
    if reasons:
        return _refusal(request, reasons, figures, None)
    receipt = _receipt(ev, figures, request)
    admitted = CapacityAdmitted(request=request, receipt=receipt)
    return Decision(kind=ADMITTED, payload=admitted, detail=Admission(figures, receipt))


def _refusal(
    request: AdmitRequest,
    reasons: tuple[str, ...],
    figures: Figures,
    original: ActiveRun | None,
) -> AdmissionDecision:
    """A refusal is journaled, with the figures it was decided on (SPEC §3.3)."""
    refused = CapacityRefused(request=request, reasons=list(reasons), figures=figures)
    return Decision(
        reasons=reasons,
        kind=REFUSED,
        payload=refused,
        detail=Admission(figures, None, original),
    )


def binding_dimension(reasons: tuple[str, ...] | list[str]) -> Dimension | None:
    """The first dimension with a failing reason (gate-wide reasons name none)."""
    for reason in reasons:
        dimension = R.REASON_DIMENSION.get(reason)
        if dimension is not None:
            return dimension  # type: ignore[return-value]
    return None


def refusal_reasons(ev: Evaluation, request: AdmitRequest) -> tuple[str, ...]:
    """Every failing reason, in the documented order (idempotency aside)."""
    if not ev.configured:
        return (R.NOT_CONFIGURED,)
    reasons: list[str] = []
    if ev.cases is not None:
        reasons += case_reasons(ev.cases, ev.active_cases, request.arm)
    if ev.tokens is not None:
        reasons += token_reasons(ev, request)
    reasons += cap_reasons(ev.spend, request)
    return tuple(reasons)


def cap_reasons(spend: Spend, request: AdmitRequest) -> list[str]:
    """The spend caps' reasons (SPEC §12.4), each once whatever units fail it: per unit
    `spend_cap_reached` when spent >= cap, else `spend_cap_exceeded` when spent + the
    active runs' remaining forecasts + this request's forecast > cap."""
    if not spend.capped:  # a goal without caps: nothing to compare
        return []
    reached, exceeded = spend.failing(request)
    return [
        r
        for r, failed in ((R.SPEND_CAP_REACHED, reached), (R.SPEND_CAP_EXCEEDED, exceeded))
        if failed
    ]


def cap_reached(spend: Spend) -> bool:
    """Some cap is spent: the goal starts nothing new (`next_action` spend_cap_reached)."""
    return spend.reached


def case_reasons(cases: CaseConfig, active: ActiveCases, arm: str | None) -> list[str]:
    """The case gate's failing reasons for one more run of `arm`."""
    reasons: list[str] = []
    if active.total >= cases.target_active_cases:
        reasons.append(R.TARGET_CAPACITY_EXHAUSTED)
    if active.total >= cases.max_active_cases:
        reasons.append(R.TOTAL_CAPACITY_EXHAUSTED)
    if arm is None:
        reasons.append(R.CASE_ARM_REQUIRED)
        return reasons
    group = ARM_GROUP[arm]
    if group == "baseline" and active.baseline >= cases.max_baseline_cases:
        reasons.append(R.BASELINE_CAPACITY_EXHAUSTED)
    if group == "test" and active.test >= cases.max_test_cases:
        reasons.append(R.TEST_CAPACITY_EXHAUSTED)
    if group == "baseline":
        # A baseline may not take a slot the test arms are still owed.
        owed_to_test = max(0, cases.reserved_test_cases - active.test)
        if cases.target_active_cases - (active.total + 1) < owed_to_test:
            reasons.append(R.RESERVED_TEST_CAPACITY)
    return reasons


def token_reasons(ev: Evaluation, request: AdmitRequest) -> list[str]:
    """The token gate's failing reasons for `request`, in SPEC §3.6's order: tpm's
    forecast checks, the gate-wide checks, tpm's room checks, then itpm, otpm, rpm, tpd,
    rpd. The freshness checks apply to a gate with a per-minute dimension (SPEC §12.3)."""
    dimensions = ev.dimensions
    run_class = request.run_class
    reasons: list[str] = []
    tpm = dimensions.get("tpm")
    if tpm is not None:
        reasons += _forecast_checks(tpm, forecast_of(request, "tpm"))
    if ev.cooldown_active:
        reasons.append(R.CAPACITY_COOLDOWN_ACTIVE)
    if ev.minute_gate:
        if ev.usage.unmetered_in_window:
            reasons.append(R.USAGE_UNMETERED_IN_WINDOW)
        if ev.observation_stale:
            reasons.append(R.USAGE_OBSERVATION_STALE)
    if tpm is not None:
        reasons += _room_checks(tpm, forecast_of(request, "tpm"), run_class)
    for dimension in LIMIT_DIMENSIONS:
        state = dimensions.get(dimension)
        if state is not None:
            forecast = forecast_of(request, dimension)
            reasons += _forecast_checks(state, forecast)
            reasons += _room_checks(state, forecast, run_class)
    return reasons


def _forecast_checks(s: DimensionState, forecast: int | None) -> list[str]:
    assert s.limit is not None
    names = R.DIMENSION_REASONS[s.dimension]
    if forecast is None:
        return [names["forecast_required"]]
    if forecast > s.limit.target:
        return [names["forecast_exceeds_target"]]
    return []


def _room_checks(s: DimensionState, forecast: int | None, run_class: str) -> list[str]:
    """The headroom check (with the evaluator-reserve rule) and the provider's remaining."""
    if forecast is None:
        return []
    assert s.limit is not None
    names = R.DIMENSION_REASONS[s.dimension]
    reasons: list[str] = []
    needed = s.load + forecast + s.limit.cold_start_reserve
    available = s.available(run_class)
    assert available is not None
    if needed > available:
        # A solver that only lacks room because of the evaluator reserve is told so.
        protected = run_class == "solver" and needed <= s.limit.target
        reasons.append(
            names["evaluator_reserve_protected"] if protected else names["headroom_exhausted"]
        )
    room = None if s.provider is None else s.provider.room
    if room is not None and forecast > room:
        reasons.append(names["provider_exhausted"])
    return reasons


def _receipt(ev: Evaluation, figures: Figures, request: AdmitRequest) -> Receipt:
    lease_s = request.lease_s
    return Receipt(
        **msgspec.structs.asdict(figures),
        run=request.run,
        at=format_us(ev.at_us),
        cases="not_configured" if ev.cases is None else "slot_taken",
        tokens="not_configured" if ev.tokens is None else "reserved",
        lease_until=None if lease_s is None else format_us(ev.at_us + lease_s * US_PER_S),
    )


def shortfall_tpm(figures: Figures, run_class: str) -> Number | None:
    """How many TPM the forecast is over its headroom (None without a forecast or gate)."""
    if figures.forecast_tpm is None or figures.headroom_tpm is None:
        return None
    return tidy(figures.forecast_tpm - figures.headroom_tpm)


def shortfalls(
    ev: Evaluation, request: AdmitRequest, reasons: tuple[str, ...]
) -> dict[str, Number]:
    """Per dimension with a failing reason: how much its forecast is over what that
    dimension allows (its headroom, and the provider's remaining room where that
    refused it). A dimension refused only for a missing forecast has no number."""
    found: dict[str, Number] = {}
    for dimension, state in ev.dimensions.items():
        names = R.DIMENSION_REASONS[dimension]
        failing = {check for check, reason in names.items() if reason in reasons}
        forecast = forecast_of(request, dimension)
        if not failing or forecast is None:
            continue
        over: list[Number] = []
        if failing - {"provider_exhausted"}:
            headroom = state.headroom(request.run_class)
            assert headroom is not None
            over.append(forecast - headroom)
        room = None if state.provider is None else state.provider.room
        if "provider_exhausted" in failing and room is not None:
            over.append(forecast - room)
        if over:
            found[dimension] = tidy(max(over))
    return found


def decide_release(goal: GoalCapacity, run: str, at_us: int) -> Decision[None]:
    """`release`: an active run's slot and reservation are freed; a run that is not
    active holds nothing, so there is nothing to release (`run_not_active`)."""
    active = goal.runs.get(run)  # runs are keyed by their request's run
    if active is None or active.admitted_at_us > at_us or not active.active_at(at_us):
        return Decision(reasons=(R.RUN_NOT_ACTIVE,), detail=None)
    return Decision(kind=RELEASED, payload=CapacityReleased(run=run), detail=None)


# -- when things change by themselves --------------------------------------------------


def change_points_after(
    goal: GoalCapacity, at_us: int, *, samples_after_seq: int = -1
) -> list[int]:
    """Times after `at_us` at which the evaluation changes with no new event: a sample
    leaves the window, a lease ends, a cooldown ends, a provider report stops being
    live. Sorted, without duplicates.

    With `samples_after_seq`, only the samples folded after that record are looked at
    (the others' times were asked for before): a timeline asking after every event
    pays for each sample once, never for the whole window again.
    """
    points: set[int] = set()
    samples = goal.samples
    index = len(samples) - 1
    while index >= goal.head and samples[index].seq > samples_after_seq:
        points.add(samples[index].at_us + WINDOW_US)
        index -= 1
    for run in goal.runs.values():
        if run.lease_until_us is not None and run.active_at(at_us):
            points.add(run.lease_until_us)
    if goal.cooldown_until_us is not None:
        points.add(goal.cooldown_until_us)
    for report in goal.provider.values():
        points.add(report.ends_us())
    limits = goal.tokens.limits if goal.tokens is not None else {}
    if any(d in limits for d in DAILY_DIMENSIONS):  # seconds leaving the day (SPEC §12.3)
        seconds = goal.day_seconds
        start = bisect.bisect_right(seconds, (at_us - DAY_US) // US_PER_S, lo=goal.day_head)
        points.update(second * US_PER_S + DAY_US for second in seconds[start:])
    return sorted(p for p in points if p > at_us)


def earliest_admissible_us(
    goal: GoalCapacity,
    request: AdmitRequest,
    at_us: int,
    pool: PoolContext | None = None,
    name: str | None = None,
) -> int | None:
    """The earliest time after `at_us` at which `request` would pass had nothing else
    happened (samples ageing out, cooldown ending, leases expiring, provider reports
    lapsing: every dimension, and for a pooled goal every member's and the pool's
    own); None if never."""
    points = set(change_points_after(goal, at_us))
    if pool is not None:
        for member in pool.members.values():
            points.update(change_points_after(member, at_us))
        points.update(pool_change_points(pool, at_us))
    for point_us in sorted(points):
        if decide_admission(goal, request, point_us, pool, name).ok:
            return point_us
    return None


# -- cooldowns (SPEC §3.2) -------------------------------------------------------------


class CooldownPlan(msgspec.Struct, frozen=True):
    retry_after_s: Number | None
    cooldown_s: Number
    clamped: bool
    cooldown_until_us: int
    streak: int

    def cooldown_fields(self) -> dict[str, Any]:
        """The cooldown's members of the event that records it (`capacity.rejected`,
        `pool.cooldown`): its length, whether it was clamped, its end, the streak."""
        return {
            "cooldown_s": self.cooldown_s,
            "clamped": self.clamped,
            "cooldown_until": format_us(self.cooldown_until_us),
            "streak": self.streak,
        }


def plan_rejection(goal: GoalCapacity, at_us: int, retry_after_s: Number | None) -> CooldownPlan:
    """The bounded cooldown a provider rejection at `at_us` starts."""
    tokens = goal.tokens
    base_s = tokens.cooldown_base_s if tokens is not None else DEFAULT_COOLDOWN_BASE_S
    max_s = tokens.cooldown_max_s if tokens is not None else DEFAULT_COOLDOWN_MAX_S
    return plan_cooldown(goal.cooldown_until_us, goal.streak, base_s, max_s, at_us, retry_after_s)


def plan_pool_rejection(pool: PoolState, at_us: int, retry_after_s: Number | None) -> CooldownPlan:
    """The pool's cooldown a member's provider rejection at `at_us` starts (SPEC §12.1):
    §3.2's rule with the pool's terms and a streak counted across its members."""
    base_s, max_s = pool_cooldown_terms(pool)
    return plan_cooldown(pool.cooldown_until_us, pool.streak, base_s, max_s, at_us, retry_after_s)


def plan_cooldown(
    previous_us: int | None,
    previous_streak: int,
    base_s: int,
    max_s: int,
    at_us: int,
    retry_after_s: Number | None,
) -> CooldownPlan:
    """SPEC §3.2's bounded cooldown, given the last cooldown's end and streak."""
    # A rejection soon after the last cooldown continues the streak; a quiet spell resets it.
    continues = previous_us is not None and at_us < previous_us + max_s * US_PER_S
    streak = previous_streak + 1 if continues else 1
    wanted_s = retry_after_s if retry_after_s is not None else base_s * 2 ** min(streak - 1, 64)
    cooldown_s = min(wanted_s, max_s)
    until_us = at_us + seconds_us(cooldown_s)
    if previous_us is not None:
        until_us = max(previous_us, until_us)
    return CooldownPlan(retry_after_s, cooldown_s, wanted_s > max_s, until_us, streak)


# -- configuration changes and readiness (SPEC §3.1, §3.5) -----------------------------


def config_below_occupancy(active: ActiveCases, cases: CaseConfig | None) -> list[str]:
    """Which new case limits are below the runs already active (empty: none)."""
    if cases is None:
        return []
    limits = [
        ("max_active_cases", cases.max_active_cases, active.total),
        ("max_baseline_cases", cases.max_baseline_cases, active.baseline),
        ("max_test_cases", cases.max_test_cases, active.test),
    ]
    return [f"{name} {limit} < {count} active" for name, limit, count in limits if limit < count]


READY_PROBE = AdmitRequest(
    run="admission-ready-probe",
    case=None,
    arm=None,
    run_class="solver",
    forecast_tpm=1,
    lease_s=None,
    forecast_itpm=1,
    forecast_otpm=1,
    forecast_rpm=1,
    forecast_tokens=1,
    forecast_requests=1,
)
"""The request `admission_ready` asks about: a solver forecasting 1 in every dimension."""


def ready_pool_reasons(
    goal: GoalCapacity, at_us: int, pool: PoolContext | None, name: str
) -> tuple[str, ...]:
    """The pool's reasons (SPEC §12.1) for the request `admission_ready` asks about, as
    `decide_admission` gives them: none for a goal in no pool. Decided at `at_us` or,
    if later, the pool's clock (its and every member's latest event), as an admit
    would be."""
    if pool is None or goal.pool is None:
        return ()
    ctx = pool.with_member(name, goal)
    clock_us = max((m.last_at_us for m in ctx.members.values()), default=0)
    at_us = max(at_us, ctx.state.last_at_us, clock_us)
    return pool_verdict(pool_evaluate(ctx, at_us), ctx, name, goal, READY_PROBE).reasons


def admission_ready(ev: Evaluation, pool_reasons: tuple[str, ...] = ()) -> bool:
    """Would a solver run forecasting 1 per dimension pass the token gate, with a case
    slot free, and its pool (`pool_reasons`: `ready_pool_reasons`) let it in?"""
    if not ev.configured or pool_reasons:
        return False
    if ev.cases is not None and ev.active_cases.total >= ev.cases.target_active_cases:
        return False
    if ev.tokens is not None and token_reasons(ev, READY_PROBE):
        return False
    return not cap_reasons(ev.spend, READY_PROBE)


def next_action(
    ev: Evaluation,
    *,
    clock_ahead: bool = False,
    held_in_queue: bool = False,
    pool_reasons: tuple[str, ...] = (),
) -> str:
    """What the goal's operator or runner should do next (SPEC §3.5, §12.4's order:
    the first that applies). `clock_ahead`: the goal's last event is beyond the
    clock-skew bound ahead of the wall clock (SPEC §2.2), which only the operator can
    put right; `held_in_queue`: an entry of the goal waits that cannot start now;
    `pool_reasons`: its pool's (`ready_pool_reasons`), whose cooldown is waited for and
    whose spent cap stops it (SPEC §12.4)."""
    cases, tokens, active = ev.cases, ev.tokens, ev.active_cases
    if not ev.configured:
        return "configure"
    if clock_ahead:
        return "check_clocks"
    if cap_reached(ev.spend) or R.POOL_SPEND_CAP_REACHED in pool_reasons:
        return "spend_cap_reached"
    if ev.spend.cap_usd_micro is not None and ev.usage.totals[7]:
        return "price_models"  # unpriced tokens in the last 60 s (SPEC §12.4)
    if (tokens is not None and ev.cooldown_active) or R.POOL_COOLDOWN_ACTIVE in pool_reasons:
        return "wait_for_cooldown"
    if ev.minute_gate and (ev.observation_stale or ev.usage.unmetered_in_window):
        return "observe_usage"
    over_cases = cases is not None and (
        active.total > cases.target_active_cases
        or active.total > cases.max_active_cases
        or active.baseline > cases.max_baseline_cases
        or active.test > cases.max_test_cases
    )
    over_tokens = any(
        s.limit is not None and s.reserved > s.limit.target for s in ev.dimensions.values()
    )
    if over_cases or over_tokens:
        return "release_runs"
    if held_in_queue:
        return "wait_in_queue"
    if admission_ready(ev, pool_reasons):
        return "backfill_to_target"
    return "hold_at_target"
