"""A runner's capacity use cases (SPEC §3.5): observe, admit, reject, release
(configure and inspect: `services.capacity_state`).

Each writer is one transaction: lock -> catch up -> sample time (under the lock,
seed 000) -> decide with the pure functions of `projections.capacity` -> append ->
fdatasync. Each takes its request (`usecases.capacity`: its values already checked)
and returns its answer, the object the CLI prints with `--json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import msgspec
from msgspec import UNSET

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import format_us, format_us_or_none, parse_at
from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity as cap
from quotaledger.projections.ledger import LedgerState
from quotaledger.services.base import ServiceBase, conclude
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
    provider_report_of,
)
from quotaledger.usecases.decode import event_of, event_or_unset

if TYPE_CHECKING:
    from quotaledger.adapters.headers import HeaderSource, ProviderHeaders


class CapacityService(ServiceBase):
    """Capacity admission over the open journal."""

    # -- observe -----------------------------------------------------------------------

    def observe(self, request: ObserveRequest) -> ObserveAnswer:
        """Record provider usage (a zero-token measured observation is a heartbeat)."""
        goal, run = request.goal, request.run
        counts = observed_counts(
            request.usage,
            request.usage_format,
            uncached_input=request.uncached_input,
            cached_input=request.cached_input,
            cache_write_input=request.cache_write_input,
            output=request.output,
            requests=request.requests,
        )
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
        )

    # -- admit -------------------------------------------------------------------------

    def admit(self, request: AdmitRequest) -> AdmitAnswer:
        """Decide whether `run` may start now; journal the admission or the refusal."""
        goal, dry_run = request.goal, request.dry_run
        asked = request.payload()
        if dry_run and not self.journal.store.writable:
            # A read-only handle polls without the lock: whatever is durable now.
            ledger: LedgerState = self.journal.refresh()
            state = self.require_configured(ledger, goal)
            at_text = self._time_without_lock(goal, request.at)
            decision = cap.decide_admission(state, asked, parse_at(at_text))
            return admit_answer(goal, decision, None, at_text, dry_run=True)
        with self.journal.transaction() as txn:
            state = self.require_configured(txn.state, goal)
            at_text = txn.time_for(goal, request.at)
            decision = cap.decide_admission(state, asked, parse_at(at_text))
            pending = None if dry_run else conclude(txn, goal, at_text, decision)
        return admit_answer(goal, decision, pending, at_text, dry_run=dry_run)

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
                cooldown_s=plan.cooldown_s,
                clamped=plan.clamped,
                cooldown_until=format_us(plan.cooldown_until_us),
                streak=plan.streak,
                detail=request.detail,
                provider=report,
                request_id=request_id,
            )
            pending = txn.append(cap.REJECTED, goal, payload, at_text)
        return rejected_answer(goal, payload, pending)

    # -- release -----------------------------------------------------------------------

    def release(self, request: ReleaseRequest) -> ReleaseAnswer:
        """Release an active run's case slot and token reservation."""
        goal, run = request.goal, request.run
        with self.journal.transaction() as txn:
            state = self.require_configured(txn.state, goal)
            at_text = txn.time_for(goal, request.at)
            decision = cap.decide_release(state, run, parse_at(at_text))
            pending = conclude(txn, goal, at_text, decision)
        # Releasing a run that is not active is ok: it holds nothing (SPEC §3.4).
        return ReleaseAnswer(
            ok=True,
            goal=goal,
            run=run,
            released=pending is not None,
            appended=pending is not None,
            reasons=list(decision.reasons),
            event=event_or_unset(pending),
        )


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


def observed_counts(usage: Any, usage_format: str, **counts: int | None) -> dict[str, Any]:
    """An observation's counters: from a provider's usage body, or from the count
    arguments (absent ones 0; `requests` stays null, SPEC §3.6), never both."""
    if usage is None:  # a runner's every call: nothing to look up
        return {
            name: (None if name == "requests" else 0) if value is None else value
            for name, value in counts.items()
        }
    # The provider formats load only when used: `admit` and a plain `observe` (a
    # runner's every call) never pay for them.
    from quotaledger.adapters.usage import parse_usage, plain, usage_of

    given = tuple(name for name, value in counts.items() if value is not None)
    if given:
        raise InvalidInput(
            lambda names: (
                f"{names('usage')} gives the counts: leave out " + ", ".join(map(names, given))
            ),
            code=codes.USAGE,
            about=("usage", *given),
            option="--usage",
        )
    mapped = (
        parse_usage(usage, usage_format)
        if isinstance(usage, str)
        else usage_of(plain(usage), usage_format)
    )
    return cast("dict[str, Any]", mapped)


def provider_headers_of(
    source: HeaderSource | None, provider: Mapping[str, Any] | None
) -> ProviderHeaders | None:
    """The recognised, checked headers of `--provider-headers` (exit 2 before the
    journal is touched), or None when none were given."""
    if source is None:
        return None
    from quotaledger.adapters.headers import parse_provider_headers

    if provider is not None:
        raise InvalidInput(
            lambda names: (
                f"give {names('provider_headers')} or a resolved provider report "
                f"({names('provider')}), not both"
            ),
            code=codes.INVALID_OPTION,
            about=("provider_headers", "provider"),
            option="--provider-headers",
        )
    if not isinstance(source, str | Mapping | list | tuple):
        raise InvalidInput(
            lambda name: (
                f"{name} must be header text or a mapping of names to values, "
                f"got {type(source).__name__}"
            ),
            code=codes.INVALID_PROVIDER_HEADERS,
            about="provider_headers",
            option="--provider-headers",
        )
    headers = parse_provider_headers(source)
    return None if headers.empty else headers


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
