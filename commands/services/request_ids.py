"""Repeats of a request id on `observe` and `reject` (SPEC §11 "Idempotent
observations"): found in the fold's index under the journal's lock, answered from the
first event (nothing appended; the transaction makes what it folded durable before
the answer is given), or refused `request_id_conflict` when the payload differs.

A repeat's payload is built as if it had been made at the first event's time, so that
what the event's time alone decides (a provider reset given as a duration, a
Retry-After given as a date) does not make a retry look like another request.
"""

from __future__ import annotations

from typing import NamedTuple

from msgspec import UNSET

from quotaledger.journal import Transaction
from quotaledger.journal.clock import canonical_at, event_time, format_us, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections import reasons as R
from quotaledger.projections.ledger import LedgerState
from quotaledger.services.pooling import pool_clock
from quotaledger.usecases.capacity import ObserveAnswer, RejectAnswer
from quotaledger.usecases.decode import Event


class Repeat(NamedTuple):
    """A request that repeats `seen`'s id, made at `at_us` (its explicit time, or the
    time it would have been given)."""

    request_id: str
    seen: cap.SeenRequest
    at_us: int
    state: cap.GoalCapacity


def repeat_of(
    txn: Transaction[LedgerState], goal: str, request_id: str | None, at: str | None
) -> Repeat | None:
    """The repeat a request with `request_id` is, if the goal saw the id within 900 s.

    Looked up before the request's time is checked: a client that retries with the
    time it sent the first time, after later events, gets the first answer rather
    than `time_regression`."""
    if request_id is None:
        return None
    state = txn.state.capacity.goals.get(goal)
    if state is None or not state.request_ids:
        return None
    if at is None:
        at_us = parse_at(event_time(goal, txn.last_at(goal), txn.wall_us, None))
    else:
        at_us = parse_at(canonical_at(at))
    seen = cap.seen_request(state.request_ids, request_id, at_us)
    return None if seen is None else Repeat(request_id, seen, at_us, state)


def repeat_or_time(
    txn: Transaction[LedgerState],
    goal: str,
    request_id: str | None,
    at: str | None,
) -> tuple[Repeat | None, str, int]:
    """The repeat the request is (if it is one) and its time: a repeat's is the first
    one's (its text empty: it appends nothing), any other's is taken under the lock,
    on the clock of the goal's pool (SPEC §12.1)."""
    repeat = repeat_of(txn, goal, request_id, at)
    if repeat is not None:  # answered as if made at the first one's time
        return repeat, "", repeat.seen.at_us
    at_text = txn.time_for(goal, at, pool_clock(txn.state, goal))
    return None, at_text, parse_at(at_text)


def original_event(seen: cap.SeenRequest) -> Event:
    return Event(seen.seq, seen.hash, seen.kind, format_us(seen.at_us))


def observe_repeat(repeat: Repeat, payload: cap.CapacityObserved, goal: str) -> ObserveAnswer:
    """The answer to an observation repeating a request id: the first event's, or the
    refusal when `payload` (made at the first one's time) is not the first's."""
    seen, state = repeat.seen, repeat.state
    same = cap.same_observation(seen, payload)
    window = cap.usage_at(state, max(repeat.at_us, state.last_at_us))
    run = payload.run
    leased = state.runs.get(run) if run is not None else None
    lease_until = None if leased is None or leased.lease_until_us is None else leased.lease_until_us
    return ObserveAnswer(
        ok=same,
        goal=goal,
        run=run,
        request_id=repeat.request_id,
        appended=False,
        idempotent=same,
        reasons=UNSET if same else [R.REQUEST_ID_CONFLICT],
        usage_tpm=window.usage_tpm,
        usage=window.parts,
        coverage=window.coverage,
        provider=payload.provider if same else None,
        lease_until=None if lease_until is None else format_us(lease_until),
        event=original_event(seen),
    )


def reject_repeat(repeat: Repeat, same: bool, goal: str) -> RejectAnswer:
    """The answer to a rejection repeating a request id: the first rejection's fields
    (its cooldown was the state's then), or the refusal when the members the request
    determines differ (`same`: `cap.same_rejection`). An id an observation holds is a
    conflict: the cooldown shown is then the goal's as it stands."""
    seen, state = repeat.seen, repeat.state
    first = cap.first_rejection(seen)
    if first is None:  # the id is an observation's
        until_us = max(state.cooldown_until_us or repeat.at_us, repeat.at_us)
        first = cap.CapacityRejected(
            run=None, retry_after_s=None, cooldown_s=0, clamped=False,
            cooldown_until=format_us(until_us), streak=max(state.streak, 1), detail=None,
        )  # fmt: skip
    return RejectAnswer(
        ok=same,
        goal=goal,
        appended=False,
        idempotent=same,
        reasons=UNSET if same else [R.REQUEST_ID_CONFLICT],
        run=first.run,
        request_id=repeat.request_id,
        retry_after_s=first.retry_after_s,
        cooldown_s=first.cooldown_s,
        clamped=first.clamped,
        cooldown_until=first.cooldown_until,
        streak=first.streak,
        detail=first.detail,
        provider=UNSET if first.provider is None else first.provider,
        event=original_event(seen),
    )
