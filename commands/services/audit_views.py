"""The parts of `audit`'s and `whatif`'s answers (SPEC §7), made from
`projections.audit`'s results.

The projection re-takes the decisions and measures the window; this module only says
how an operator sees them.
"""

import msgspec

from quotaledger.journal.clock import format_us, format_us_or_none, parse_at
from quotaledger.projections import audit as au
from quotaledger.projections import capacity as cap
from quotaledger.projections import reasons as R
from quotaledger.projections.audit.pool_whatif import PoolFlip
from quotaledger.usecases.operator import (
    AuditEvent,
    Contributor,
    ContributorUsage,
    Explanation,
    Flip,
    PromotionFlip,
    Reservation,
    Window,
    WindowSample,
)

SAMPLES_PER_CONTRIBUTOR = 20
"""Samples shown per contributing run (the count of all of them is given too)."""


def _earliest(
    goal: cap.GoalCapacity,
    request: cap.AdmitRequest,
    at_us: int,
    decision: cap.AdmissionDecision,
    pool: cap.PoolContext | None,
    name: str | None,
) -> str | None:
    if decision.ok:
        return format_us(at_us)  # it was admissible right then
    return format_us_or_none(cap.earliest_admissible_us(goal, request, at_us, pool, name))


def explanation_of(
    goal: cap.GoalCapacity,
    request: cap.AdmitRequest,
    at_us: int,
    decision: cap.AdmissionDecision,
    pool: cap.PoolContext | None = None,
    name: str | None = None,
) -> Explanation:
    """Why `decision` came out as it did (SPEC §7's `explanation`, plus context)."""
    figures, reasons = decision.detail.figures, decision.reasons
    shortfall = None
    # SPEC §7: "when a token reason refused it" -- any reason of the token gate (§3.3
    # item 3), computed by the formula whenever the request carries a forecast.
    if any(reason in R.TOKEN_GATE_REASONS for reason in reasons):
        shortfall = cap.shortfall_tpm(figures, request.run_class)
    earliest = _earliest(goal, request, at_us, decision, pool, name)
    samples = cap.window_samples(goal, at_us)
    ev = cap.evaluate(goal, at_us)
    return Explanation(
        binding_constraint=reasons[0] if reasons else None,
        binding_dimension=cap.binding_dimension(reasons),
        shortfall_tpm=shortfall,
        shortfall=cap.shortfalls(ev, request, reasons),
        usage_tpm=figures.usage_tpm,
        reserved_tpm=figures.reserved_tpm,
        load_tpm=figures.load_tpm,
        target_tpm=figures.target_tpm,
        top_contributors=[contributor_of(c) for c in au.top_contributors(goal, at_us)],
        cooldown_until=figures.cooldown_until,
        coverage=figures.coverage,
        earliest_admissible_at=earliest,
        # More context (SPEC: more keys are welcome).
        reasons=list(reasons),
        usage=figures.usage,
        headroom_tpm=figures.headroom_tpm,
        forecast_tpm=figures.forecast_tpm,
        run_class=request.run_class,
        available_tpm=ev.available_tpm(request.run_class),
        dimensions=dict(figures.dimensions),
        cold_start_reserve_tpm=figures.cold_start_reserve_tpm,
        evaluator_reserve_tpm=figures.evaluator_reserve_tpm,
        quota_tpm=figures.quota_tpm,
        cooldown_active=R.CAPACITY_COOLDOWN_ACTIVE in reasons
        or (figures.cooldown_until is not None and parse_at(figures.cooldown_until) > at_us),
        observation_stale=figures.observation_stale,
        last_observation_at=figures.last_observation_at,
        active_cases=figures.active_cases,
        target_active_cases=figures.target_active_cases,
        max_active_cases=figures.max_active_cases,
        spend=figures.spend,
        pool=figures.pool,
        reservations=reservations_of(goal, at_us),
        window=Window(
            start=format_us(at_us - cap.WINDOW_US),
            to=format_us(at_us),
            samples=len(samples),
            rule="a sample counts at t while t - 60 s < at <= t",
        ),
        idempotent_replay=decision.idempotent,
    )


def contributor_of(row: au.Contributor) -> Contributor:
    return Contributor(
        run=row.run,
        usage_tpm=row.usage_tpm,
        usage=ContributorUsage(row.uncached_input, row.cached_input, row.output),
        share=row.share,
        active=row.held is not None,
        forecast_tpm=None if row.held is None else row.held.request.forecast_tpm,
        sample_count=len(row.samples),
        samples=[sample_of(s) for s in row.samples[-SAMPLES_PER_CONTRIBUTOR:]],
    )


def sample_of(sample: cap.Sample) -> WindowSample:
    return WindowSample(
        seq=sample.seq,
        at=format_us(sample.at_us),
        uncached_input=sample.uncached_input,
        cached_input=sample.cached_input,
        output=sample.output,
        coverage=sample.coverage,
        leaves_window_at=format_us(sample.at_us + cap.WINDOW_US),
    )


def reservations_of(goal: cap.GoalCapacity, at_us: int) -> list[Reservation]:
    """The active runs at `at_us` and what each holds."""
    return [
        Reservation(
            run=r.request.run,
            case=r.request.case,
            arm=r.request.arm,
            run_class=r.request.run_class,
            forecast_tpm=r.request.forecast_tpm,
            admitted_at=format_us(r.admitted_at_us),
            lease_until=format_us_or_none(r.lease_until_us),
            seq=r.seq,
        )
        for r in cap.active_runs_at(goal, at_us)
    ]


def recorded_event_of(recorded: au.RecordedDecision) -> AuditEvent:
    """The journaled decision an audit re-took."""
    return AuditEvent(
        seq=recorded.seq,
        hash=recorded.hash,
        kind=recorded.kind,
        at=recorded.at,
        goal=recorded.goal,
        run=recorded.request.run,
    )


def promotion_flip_of(flip: au.PromotionFlip) -> PromotionFlip:
    return PromotionFlip(
        seq=flip.seq,
        goal=flip.goal,
        run=flip.run,
        queued_at=flip.queued_at,
        recorded_admitted_at=flip.recorded_admitted_at,
        whatif_admitted_at=flip.whatif_admitted_at,
        whatif_reasons=list(flip.whatif_reasons),
    )


def flip_of(flip: au.Flip | PoolFlip) -> Flip:
    """A what-if's flip as answers show it (a pool's names the member that flipped)."""
    return Flip(
        seq=flip.seq,
        goal=flip.goal if isinstance(flip, PoolFlip) else msgspec.UNSET,
        run=flip.run,
        at=flip.at,
        recorded_admitted=flip.recorded_admitted,
        whatif_admitted=flip.whatif_admitted,
        whatif_reasons=list(flip.whatif_reasons),
        recorded_reasons=list(flip.recorded_reasons),
        whatif_idempotent=isinstance(flip, au.Flip) and flip.whatif_idempotent,
    )
