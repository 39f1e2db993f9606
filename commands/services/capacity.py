"""A runner's capacity use cases (SPEC §3.5): observe, admit, reject, release
(configure and inspect: `services.capacity_state`).

Each writer is one transaction: lock -> catch up -> sample time (under the lock,
seed 000) -> decide with the pure functions of `projections.capacity` -> append ->
fdatasync. Each takes its request (`usecases.capacity`: its values already checked)
and returns its answer, the object the CLI prints with `--json`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import msgspec
from msgspec import UNSET

from quotaledger.journal import InvalidInput, Transaction, codes
from quotaledger.journal.clock import format_us, format_us_or_none, parse_at, wall_us
from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity as cap
from quotaledger.projections import reasons as R
from quotaledger.projections.capacity import events as cap_events
from quotaledger.projections.capacity import queue as cq
from quotaledger.projections.decision import Decision
from quotaledger.projections.ledger import LedgerState
from quotaledger.services.base import ServiceBase, conclude
from quotaledger.services.pooling import pool_clock
from quotaledger.services.queueing import (
    QueuePromotion,
    final_records,
    next_estimate_us,
    promote,
    promoted_of,
    promoting_goal,
    queue_name,
    queue_view,
)
from quotaledger.services.request_ids import observe_repeat, reject_repeat, repeat_or_time
from quotaledger.usecases.capacity import (
    AdmitAnswer,
    AdmitRequest,
    ObserveAnswer,
    ObserveRequest,
    ReceiptView,
    RejectAnswer,
    RejectRequest,
    ReleaseAnswer,
    ReleaseRequest,
    RunRef,
    observed_counts,
    provider_headers_of,
    provider_report_of,
)
from quotaledger.usecases.decode import event_of, event_or_unset
from quotaledger.usecases.waiting import pause_until, queue_ttl_s, wait_for_admission

if TYPE_CHECKING:
    from quotaledger.adapters.headers import ProviderHeaders


class CapacityService(ServiceBase):
    """Capacity admission over the open journal."""

    # -- observe -----------------------------------------------------------------------

    def observe(self, request: ObserveRequest) -> ObserveAnswer:
        """Record provider usage (a zero-token measured observation is a heartbeat)."""
        goal, run = request.goal, request.run
        counts = observed_counts(request)
        headers = provider_headers_of(request.provider_headers, request.provider)
        fixed_report = provider_report(request.provider)
        request_id = request_id_of(request.request_id, counts, headers)
        # The response's model, unless one is given (SPEC §12.4).
        from_body = counts.pop("model", None)
        model = from_body if request.model is None else request.model
        with self.journal.transaction() as txn:
            self.require_configured(txn.state, goal)
            repeat, at_text, at_us = repeat_or_time(txn, goal, request_id, request.at)
            report = fixed_report
            if headers is not None:
                report = provider_report(headers.resolve(at_us).provider)
            payload = cap.CapacityObserved(
                run=run,
                **counts,
                coverage=request.coverage,  # type: ignore[arg-type]
                source=request.source,
                provider=report,
                request_id=request_id,
                model=model,
            )
            if repeat is not None:
                return observe_repeat(repeat, payload, goal)
            pending = txn.append(cap.OBSERVED, goal, payload, at_text)
            promoted = promote(txn, goal, at_text, [pending])
        if promoted:
            pending, *promoted = final_records(txn)
        state = cap.goal_of(self.journal.state.capacity, goal)
        # The answer shows the window's usage only: not the whole evaluation (every
        # dimension, the active runs), which costs 3-4x as much.
        window = cap.usage_at(state, at_us)
        leased = state.runs.get(run) if run is not None else None
        return ObserveAnswer(
            ok=True,
            goal=goal,
            run=run,
            request_id=UNSET if request_id is None else request_id,
            appended=True,
            idempotent=UNSET if request_id is None else False,
            usage_tpm=window.usage_tpm,
            usage=window.parts,
            coverage=window.coverage,
            provider=report,
            lease_until=format_us_or_none(leased.lease_until_us) if leased is not None else None,
            event=event_of(pending),
            promoted=promoted_of(promoted),
        )

    # -- admit -------------------------------------------------------------------------

    def admit(self, request: AdmitRequest) -> AdmitAnswer:
        """Decide whether `run` may start now; journal the admission or the refusal.
        With `queue`, a refusal time or a release can cure waits in the queue; with
        `wait_s`, the call then polls until admitted or the wait is over (SPEC §12.2)."""
        if request.cancel:
            return self._cancel(request)
        ttl_s = ttl_of(request)
        if not request.wait_s:
            return self._admit_once(request, ttl_s)
        once = msgspec.structs.replace(request, wait_s=None, queue=True, queue_ttl_s=ttl_s)
        return wait_for_admission(
            lambda remaining_s: self._admit_once(once, ttl_s),
            pause_s_of,
            request.wait_s,
        )

    def _admit_once(self, request: AdmitRequest, ttl_s: int) -> AdmitAnswer:
        goal, dry_run = request.goal, request.dry_run
        asked = request.payload()
        if dry_run and not self.journal.store.writable:
            return self._dry_admit_unlocked(request, asked)
        with self.journal.transaction() as txn:
            self.require_configured(txn.state, goal)
            at_text = txn.time_for(goal, request.at, pool_clock(txn.state, goal))
            at_us = parse_at(at_text)
            decision, pending = _decide_and_append(txn, request, asked, at_text, at_us, ttl_s)
            promoted = (
                []
                if dry_run or (decision and not pending)
                else promote(txn, goal, at_text, [pending] if pending is not None else [])
            )
        if promoted:
            written = final_records(txn)
            pending, promoted = (
                (written[0], written[1:]) if pending is not None else (None, written)
            )
        mine = next((p for p in promoted if _admits(p, goal, asked.run)), None)
        if mine is not None:  # admitted from the queue by this very transaction
            answer = promoted_answer(goal, mine, pending, at_text)
        elif decision is None or (pending is not None and pending.record.kind == cap_events.QUEUED):
            state = self.journal.state
            answer = self._queued_answer(state, goal, asked, at_us, at_text, pending)
        else:
            answer = admit_answer(goal, decision, pending, at_text, dry_run=dry_run)
        answer.promoted = promoted_of(promoted)
        return answer

    def _dry_admit_unlocked(self, request: AdmitRequest, asked: cap.AdmitRequest) -> AdmitAnswer:
        """A read-only handle polls without the lock: whatever is durable now."""
        goal = request.goal
        ledger: LedgerState = self.journal.refresh()
        self.require_configured(ledger, goal)
        at_text = self._time_without_lock(goal, request.at, pool_clock(ledger, goal))
        at_us = parse_at(at_text)
        view = queue_view(ledger, goal)
        if cq.entry_of(view, goal, asked.run, at_us) is not None:
            return self._queued_answer(ledger, goal, asked, at_us, at_text, None)
        decision = cq.decide_in_queue(view, goal, asked, at_us)
        return admit_answer(goal, decision, None, at_text, dry_run=True)

    def _queued_answer(
        self,
        state: LedgerState,
        goal: str,
        asked: cap.AdmitRequest,
        at_us: int,
        at_text: str,
        pending: PendingRecord | None,
    ) -> AdmitAnswer:
        """Where a queued run stands as of `at_us` (SPEC §12.2): its position, the runs
        ahead, its estimate, and the reasons and figures it is held by now."""
        run = asked.run
        view = queue_view(state, goal)
        standing = cq.standing_of(view, goal, run, at_us)
        if standing is None:  # it left the queue: admitted, or refused by a promotion
            decision = cq.decide_in_queue(view, goal, asked, at_us)
            return admit_answer(goal, decision, pending, at_text, dry_run=False)
        entry = standing.waiting.entry
        held = cq.decide_in_queue(view, goal, entry.request, at_us)
        return AdmitAnswer(
            ok=False,
            goal=goal,
            at=at_text,
            admitted=False,
            idempotent=False,
            appended=pending is not None,
            dry_run=False,
            queued=True,
            run=run,
            position=standing.position,
            ahead=[RunRef(goal=w.goal, run=w.run) for w in standing.ahead],
            queued_at=format_us(entry.at_us),
            expires_at=format_us(entry.expires_us),
            estimated_start_at=format_us_or_none(standing.estimated_start_us),
            reasons=list(held.reasons),
            figures=held.detail.figures,
            binding_dimension=held.detail.figures.binding_dimension,
            event=event_of(pending) if pending is not None else None,
        )

    def _cancel(self, request: AdmitRequest) -> AdmitAnswer:
        """`admit --cancel`: take the run's entry out of the queue (SPEC §12.2)."""
        goal, run = request.goal, request.run
        check_cancel_alone(request)
        promoted: list[PendingRecord] = []
        with self.journal.transaction() as txn:
            self.require_configured(txn.state, goal)
            at_text = txn.time_for(goal, request.at, pool_clock(txn.state, goal))
            view = queue_view(txn.state, goal)
            entry = cq.entry_of(view, goal, run, parse_at(at_text))
            pending = None
            if entry is not None:
                payload = cap_events.CapacityDequeued(run=run, reason="cancelled")
                pending = txn.append(cap_events.DEQUEUED, goal, payload, at_text)
                promoted = promote(txn, goal, at_text, [pending])
        if promoted:
            pending, *promoted = final_records(txn)
        return AdmitAnswer(
            ok=True,
            goal=goal,
            run=run,
            at=at_text,
            admitted=False,
            idempotent=False,
            appended=pending is not None,
            dry_run=False,
            cancelled=pending is not None,
            reason=UNSET if pending is not None else R.RUN_NOT_QUEUED,
            event=event_of(pending) if pending is not None else None,
            promoted=promoted_of(promoted),
        )

    def promote_queue(self, name: str) -> QueuePromotion:
        """A server's timer on the queue `name` (a goal's own, or a pool's: SPEC
        §12.2): a write transaction on the queue that appends nothing of its own, so it
        only promotes, at the queue's time now; then when the queue next moves by time
        alone. A pool's queue is promoted through one of its members (any member's
        write promotes it all)."""
        staged: list[PendingRecord] = []
        at_text = None
        goal = None
        with self.journal.transaction() as txn:
            goal = promoting_goal(txn.state, name)
            if goal is not None:
                at_text = txn.time_for(goal, None, pool_clock(txn.state, goal))
                staged = promote(txn, goal, at_text, [])
        written = final_records(txn) if staged else []
        at_us = parse_at(at_text) if at_text is not None else wall_us()
        state = self.journal.state
        return QueuePromotion(
            goal=goal or name,
            queue=name if goal is None else queue_name(state, goal),
            at=at_text,
            admitted=[
                promoted_answer(p.record.goal or name, p, None, at_text or "")
                for p in written
                if p.record.kind == cap.ADMITTED
            ],
            next_estimate_us=None if goal is None else next_estimate_us(state, goal, at_us),
        )

    # -- reject ------------------------------------------------------------------------

    def reject(self, request: RejectRequest) -> RejectAnswer:
        """Record a provider capacity rejection (HTTP 429) and start the bounded cooldown."""
        goal = request.goal
        retry_after_s: float | None = request.retry_after_s
        if retry_after_s is not None and retry_after_s.is_integer():
            retry_after_s = int(retry_after_s)  # 30.0 is recorded as 30, as it always was
        headers = provider_headers_of(request.provider_headers, request.provider)
        report = provider_report(request.provider)
        request_id = request_id_of(request.request_id, {}, headers)
        with self.journal.transaction() as txn:
            state = self.require_configured(txn.state, goal)
            repeat, at_text, at_us = repeat_or_time(txn, goal, request_id, request.at)
            if headers is not None:
                resolved = headers.resolve(at_us)
                report = provider_report(resolved.provider)
                if retry_after_s is None:
                    retry_after_s = resolved.retry_after_s
            if repeat is not None:
                same = cap.same_rejection(
                    repeat.seen, request.run, retry_after_s, request.detail, report
                )
                return reject_repeat(repeat, same, goal)
            plan = cap.plan_rejection(state, at_us, retry_after_s)
            payload = cap.CapacityRejected(
                run=request.run,
                retry_after_s=plan.retry_after_s,
                **plan.cooldown_fields(),
                detail=request.detail,
                provider=report,
                request_id=request_id,
            )
            pending = txn.append(cap.REJECTED, goal, payload, at_text)
            own = [pending]
            if state.pool is not None:  # a 429 from the shared key cools the pool down
                own.append(pool_cooldown(txn, state.pool.name, goal, payload, at_text, at_us))
            promoted = promote(txn, goal, at_text, own)
        if promoted or len(own) > 1:
            pending, *written = final_records(txn)
            promoted = [p for p in written if p.record.kind not in cap.POOL_EVENTS]
        answer = rejected_answer(goal, payload, pending)
        answer.promoted = promoted_of(promoted)
        return answer

    # -- release -----------------------------------------------------------------------

    def release(self, request: ReleaseRequest) -> ReleaseAnswer:
        """Release an active run's case slot and token reservation, or take a queued
        run out of the queue (SPEC §12.2); either promotes into what it frees."""
        goal, run = request.goal, request.run
        promoted: list[PendingRecord] = []
        dequeued = False
        with self.journal.transaction() as txn:
            state = self.require_configured(txn.state, goal)
            at_text = txn.time_for(goal, request.at, pool_clock(txn.state, goal))
            at_us = parse_at(at_text)
            decision = cap.decide_release(state, run, at_us)
            pending = conclude(txn, goal, at_text, decision)
            if pending is None and cq.entry_of(queue_view(txn.state, goal), goal, run, at_us):
                payload = cap_events.CapacityDequeued(run=run, reason="released")
                pending = txn.append(cap_events.DEQUEUED, goal, payload, at_text)
                dequeued = True
            if pending is not None:
                promoted = promote(txn, goal, at_text, [pending])
        if promoted:
            pending, *promoted = final_records(txn)
        # Releasing a run that is not active is ok: it holds nothing (SPEC §3.4).
        return ReleaseAnswer(
            ok=True,
            goal=goal,
            run=run,
            released=pending is not None and not dequeued,
            appended=pending is not None,
            reasons=[] if dequeued else list(decision.reasons),
            event=event_or_unset(pending),
            dequeued=True if dequeued else UNSET,
            promoted=promoted_of(promoted),
        )


def pool_cooldown(
    txn: Transaction[LedgerState],
    name: str,
    goal: str,
    rejected: cap.CapacityRejected,
    at_text: str,
    at_us: int,
) -> PendingRecord:
    """`pool.cooldown` under the pool's name, in the rejection's transaction (SPEC
    §12.1): §3.2's rule with the pool's terms, the rejection's Retry-After and a streak
    counted across the members."""
    pool = txn.state.pools.pools.get(name) or cap.PoolState()
    plan = cap.plan_pool_rejection(pool, at_us, rejected.retry_after_s)
    payload = cap.PoolCooldown(
        goal=goal,
        run=rejected.run,
        retry_after_s=plan.retry_after_s,
        **plan.cooldown_fields(),
    )
    return txn.append(cap.POOL_COOLDOWN, name, payload, at_text)


# -- building answers ------------------------------------------------------------------


def rejected_answer(
    goal: str, payload: cap.CapacityRejected, pending: PendingRecord
) -> RejectAnswer:
    """The payload's fields in its order; `provider` only when reported, as it is
    recorded (omit_defaults), and `request_id` with `idempotent` only when given."""
    request_id = payload.request_id
    return RejectAnswer(
        ok=True,
        goal=goal,
        appended=True,
        idempotent=UNSET if request_id is None else False,
        run=payload.run,
        request_id=UNSET if request_id is None else request_id,
        retry_after_s=payload.retry_after_s,
        cooldown_s=payload.cooldown_s,
        clamped=payload.clamped,
        cooldown_until=payload.cooldown_until,
        streak=payload.streak,
        detail=payload.detail,
        provider=UNSET if payload.provider is None else payload.provider,
        event=event_of(pending),
    )


def request_id_of(
    given: str | None, counts: dict[str, Any], headers: ProviderHeaders | None
) -> str | None:
    """A request's id (SPEC §11): the one given, else the usage body's (taken out of
    `counts`, which then hold the counters alone), else the response headers'."""
    from_body = counts.pop("request_id", None)
    if given is not None:
        return given
    if from_body is not None:
        return cast("str", from_body)
    return None if headers is None else headers.request_id


def provider_report(provider: Any) -> cap.ProviderReport | None:
    """A provider report (given, or resolved from headers) checked, in dimension order."""
    return None if provider is None else provider_report_of("provider", provider)


def admit_answer(
    goal: str,
    decision: cap.AdmissionDecision,
    pending: PendingRecord | None,
    at_text: str,
    *,
    dry_run: bool,
) -> AdmitAnswer:
    """The `admit` answer (SPEC §8): receipt on admission, reasons and figures on refusal."""
    detail = decision.detail
    answer = AdmitAnswer(
        ok=decision.ok,
        goal=goal,
        at=at_text,
        admitted=decision.ok,
        idempotent=decision.idempotent,
        appended=pending is not None,
        dry_run=dry_run,
        event=event_of(pending) if pending is not None else None,
    )
    if decision.ok:
        assert detail.receipt is not None
        # The receipt names its admission event: the original one on a replay, none on a
        # dry run. (It is added here because a record cannot contain its own hash.)
        seq = hash_ = None
        if decision.idempotent and detail.original is not None:
            seq, hash_ = detail.original.seq, detail.original.hash
        elif pending is not None:
            seq, hash_ = pending.record.seq, pending.record.hash
        fields = msgspec.structs.asdict(detail.receipt)
        answer.receipt = ReceiptView(**fields, seq=seq, hash=hash_)
    else:
        answer.reasons = list(decision.reasons)
        answer.figures = detail.figures
        answer.binding_dimension = detail.figures.binding_dimension
    return answer


# -- the queue (SPEC §12.2) --------------------------------------------------------------


def ttl_of(request: AdmitRequest) -> int:
    return queue_ttl_s(
        queue=request.queue,
        queue_ttl_s=request.queue_ttl_s,
        wait_s=request.wait_s,
        lease_s=request.lease_s,
    )


def check_cancel_alone(request: AdmitRequest) -> None:
    """`admit --cancel` names a run and nothing it would ask for."""
    given = [
        name
        for name in ("queue", "queue_ttl_s", "wait_s", "dry_run")
        if getattr(request, name) not in (None, False)
    ]
    if given:
        raise InvalidInput(
            lambda names: (
                f"{names('cancel')} takes a run out of the queue: leave out "
                + ", ".join(map(names, given))
            ),
            code=codes.INVALID_OPTION,
            about=("cancel", *given),
        )


def _decide_and_append(
    txn: Transaction[LedgerState],
    request: AdmitRequest,
    asked: cap.AdmitRequest,
    at: str,
    at_us: int,
    ttl_s: int,
) -> tuple[cap.AdmissionDecision | None, PendingRecord | None]:
    """An admit's decision and its own event: an admission, a refusal or a queue
    entry; None for a poll of a run already queued with this request (it appends
    nothing: the promotion that follows is what moves it)."""
    goal = request.goal
    view = queue_view(txn.state, goal)
    entry = cq.entry_of(view, goal, asked.run, at_us)
    if entry is not None and entry.request == asked:
        return None, None
    if entry is not None:  # queued with another request
        decision = different_request(view.decide(goal, asked, at_us), asked)
    else:
        decision = cq.decide_in_queue(view, goal, asked, at_us)
    if request.dry_run:
        return decision, None
    if request.queue and queues(decision):
        payload = cap_events.CapacityQueued(
            request=asked,
            reasons=list(decision.reasons),
            figures=decision.detail.figures,
            ttl_s=ttl_s,
        )
        return decision, txn.append(cap_events.QUEUED, goal, payload, at)
    return decision, conclude(txn, goal, at, decision)


def queues(decision: cap.AdmissionDecision) -> bool:
    """A refusal that waits in the queue when asked to: every reason queueable."""
    return (
        not decision.ok
        and not decision.idempotent
        and bool(decision.reasons)
        and cq.all_queueable(decision.reasons)
    )


def different_request(
    decision: cap.AdmissionDecision, asked: cap.AdmitRequest
) -> cap.AdmissionDecision:
    """A run queued with another request is refused as an active one would be."""
    figures = decision.detail.figures
    reasons = (R.RUN_EXISTS_WITH_DIFFERENT_REQUEST,)
    refused = cap.CapacityRefused(request=asked, reasons=list(reasons), figures=figures)
    return Decision(
        reasons=reasons,
        kind=cap.REFUSED,
        payload=refused,
        detail=cap.Admission(figures, None, None),
    )


def _admits(pending: PendingRecord, goal: str, run: str) -> bool:
    return (
        pending.record.kind == cap.ADMITTED
        and pending.record.goal == goal
        and pending.payload.request.run == run
    )


def promoted_answer(
    goal: str, admitted: PendingRecord, own: PendingRecord | None, at_text: str
) -> AdmitAnswer:
    """A queued run admitted by the very transaction that asked (its own queueing, or
    a poll): the receipt of the promotion (`idempotent` for a poll: it appended nothing)."""
    receipt = admitted.payload.receipt
    fields = msgspec.structs.asdict(receipt)
    return AdmitAnswer(
        ok=True,
        goal=goal,
        at=at_text,
        admitted=True,
        idempotent=own is None,
        appended=own is not None,
        dry_run=False,
        receipt=ReceiptView(**fields, seq=admitted.record.seq, hash=admitted.record.hash),
        event=event_of(own) if own is not None else None,
    )


def pause_s_of(answer: AdmitAnswer) -> float | None:
    """A waiting run's pause before its next poll (None: no more waiting)."""
    if answer.queued is not True:
        return None
    estimate = answer.estimated_start_at
    estimate_us = parse_at(estimate) if isinstance(estimate, str) else None
    return pause_until(estimate_us, parse_at(answer.at))
