"""The queue inside a writer's transaction (SPEC §12.2): the queue a goal waits in,
and the promotion every write transaction on a goal runs after its own events.

The two places pools plug in are here: `queue_view` (the goals of the queue a goal
waits in, and the decision for their requests) and `working_state` (the states a
promotion decides on: the goals of that queue as the transaction's own events leave
them, before they commit).
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.journal import Transaction
from quotaledger.journal.clock import format_us, parse_at
from quotaledger.journal.record import BATCH_KIND, GENESIS_KIND
from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity as cap
from quotaledger.projections.capacity import queue as cq
from quotaledger.projections.capacity.events import (
    DEQUEUED,
    QUEUED,
    QueuedRef,
)
from quotaledger.projections.capacity.fold import fork_goal
from quotaledger.projections.ledger import LedgerState, pool_context_of
from quotaledger.services.pooling import pool_after
from quotaledger.usecases.capacity import AdmitAnswer, QueueEntryView, RunRef


def queue_view(state: LedgerState, goal: str) -> cq.QueueView:
    """The queue `goal` waits in, as of the folded `state`: its own, or its pool's (one
    queue for every member, deciding in the pool)."""
    pool = pool_context_of(state, goal)
    if pool is None:
        return cq.goal_queue(goal, cap.goal_of(state.capacity, goal))
    return cq.pool_queue(pool.with_member(goal, cap.goal_of(state.capacity, goal)))


def queue_name(state: LedgerState, goal: str) -> str:
    """The name of the queue `goal` waits in: its pool's, or its own (pools and goals
    share one space of names, SPEC §12.1, so the name says which)."""
    found = state.capacity.goals.get(goal)
    return goal if found is None or found.pool is None else found.pool.name


def promoting_goal(state: LedgerState, name: str) -> str | None:
    """The goal through which a write promotes the queue `name` (a goal's own queue,
    or a pool's, SPEC §12.2): the goal itself, or the first of the pool's members (any
    member's write promotes the pool's one queue); None for a name that is neither."""
    if name in state.capacity.goals:
        return name
    pool = state.pools.pools.get(name)
    if pool is None:
        return None
    goals = state.capacity.goals
    return next((m for m in sorted(pool.members) if m in goals), None)


def queue_goals(state: LedgerState, goal: str) -> list[str]:
    """The goals whose entries wait in `goal`'s queue: its pool's members, or itself."""
    pool = pool_context_of(state, goal)
    return [goal] if pool is None else sorted({goal, *pool.members})


def may_move(state: LedgerState, goal: str, at_us: int, own: list[PendingRecord]) -> bool:
    """Could a promotion find anything? Only where an entry waits (or was just queued):
    a writer on a goal with an empty queue pays nothing for it."""
    # Loops, not generators: every write asks this, and nearly always of empty queues.
    for pending in own:
        if pending.record.kind == QUEUED:
            return True
    goals = state.capacity.goals
    for name in queue_goals(state, goal):
        found = goals.get(name)
        if found is not None and any(e.waiting_at(at_us) for e in found.queue.values()):
            return True
    return False


def working_state(state: LedgerState, goal: str, own: list[PendingRecord]) -> cap.CapacityState:
    """The goals of `goal`'s queue (its pool's members, for a pooled goal) as the
    transaction's own events leave them."""
    work = cap.CapacityState(
        goals={
            name: fork_goal(cap.goal_of(state.capacity, name)) for name in queue_goals(state, goal)
        },
        prices=state.capacity.prices,
    )
    for pending in own:
        if pending.record.kind in cap.EVENTS:  # a pool's own events fold apart (pool_after)
            cap.apply(work, pending.record, pending.payload)
    return work


def promote(
    txn: Transaction[LedgerState], goal: str, at: str, own: list[PendingRecord]
) -> list[PendingRecord]:
    """Admit the entries at the head of `goal`'s queue that now fit, in order (and
    dequeue, as refused, those a later change made fail a reason that is not
    queueable), each at the transaction's one time `at`, after its own events `own`.
    The promotions' records, as staged (their final seq and hash: `final_records`)."""
    at_us = parse_at(at)
    if not may_move(txn.state, goal, at_us, own):
        return []
    work = working_state(txn.state, goal, own)
    pool = pool_after(txn.state, goal, work.goals[goal], own)
    if pool is not None:  # every member as this transaction leaves it
        pool = msgspec.structs.replace(pool, members=work.goals)
    first = own[0].record.seq if own else None
    staged: list[PendingRecord] = []
    while True:
        view = cq.goal_queue(goal, work.goals[goal]) if pool is None else cq.pool_queue(pool)
        step = cq.next_step(view, at_us)
        if step is None:
            return staged
        waiting = step.waiting
        if step.admits:
            receipt = step.decision.detail.receipt
            assert receipt is not None
            seq = waiting.entry.seq
            if seq == first:
                # The entry was queued by this transaction's first event, which a
                # journal.batch record leads once a promotion follows: one seq later.
                seq += 1
            ref = QueuedRef(seq=seq, at=format_us(waiting.entry.at_us))
            payload = cap.CapacityAdmitted(
                request=waiting.entry.request, receipt=receipt, queued=ref
            )
            pending = txn.append(cap.ADMITTED, waiting.goal, payload, at)
        else:
            pending = txn.append(DEQUEUED, waiting.goal, step.dequeued(), at)
        cap.apply(work, pending.record, pending.payload)
        staged.append(pending)


def promoted_of(staged: list[PendingRecord]) -> list[RunRef] | UnsetType:
    """The admissions among a promotion's records, as a writer's answer lists them
    (absent when it admitted none)."""
    found = [
        RunRef(goal=p.record.goal or "", run=p.payload.request.run)
        for p in staged
        if p.record.kind == cap.ADMITTED
    ]
    return found if found else UNSET


def final_records(txn: Transaction[LedgerState]) -> list[PendingRecord]:
    """The events a committed transaction wrote, in order, as written (a transaction
    of several events shifts every seq by the journal.batch record that leads them)."""
    return [p for p in txn.committed if p.record.kind not in (BATCH_KIND, GENESIS_KIND)]


def next_estimate_us(state: LedgerState, goal: str, at_us: int) -> int | None:
    """The earliest `estimated_start_at` after `at_us` in the queue `goal` waits in (None:
    no entry has one): when a server's timer on that queue promotes next. An estimate
    at `at_us` or before, that this time's promotion did not admit, waits for a write
    (an observation, for an entry held only by staleness), not for time."""
    if not may_move(state, goal, at_us, []):
        return None
    later = [
        estimate_us
        for estimate_us in cq.estimates(queue_view(state, goal), at_us).values()
        if estimate_us is not None and estimate_us > at_us
    ]
    return min(later) if later else None


class QueuePromotion(msgspec.Struct, kw_only=True):
    """What a server's timer on a queue did (SPEC §12.2): the admissions it made, as
    the records written, at its one time; and when the queue next moves by time."""

    goal: str
    """The goal whose write promoted (a member of the pool, for a pool's queue)."""
    queue: str
    """The queue's name: the pool's for a pooled goal, else the goal's (`queue_name`)."""
    at: str | None
    admitted: list[AdmitAnswer]
    """Each admitted run's answer, as a poll of it would give it now (its receipt)."""
    next_estimate_us: int | None


def held_in_queue(view: cq.QueueView, goal: str, at_us: int) -> bool:
    """Does an entry of `goal` wait that cannot start now (`next_action`
    `wait_in_queue`)? One that could would start at the next write on the queue."""
    state = view.goals.get(goal)
    if state is None or not state.queue:
        return False
    return any(
        not cq.decide_in_queue(view, goal, entry.request, at_us).ok
        for entry in state.queue.values()
        if entry.waiting_at(at_us)
    )


def queue_rows(view: cq.QueueView, at_us: int) -> list[QueueEntryView]:
    """`inspect`'s `queue` (SPEC §12.2): every entry waiting at `at_us`, in order, with
    its estimate and the reasons it is held by now."""
    return [
        QueueEntryView(
            goal=s.waiting.goal,
            run=s.waiting.run,
            priority=s.waiting.priority,
            position=s.position,
            queued_at=format_us(s.waiting.entry.at_us),
            expires_at=format_us(s.waiting.entry.expires_us),
            estimated_start_at=cq.format_us_or_none(s.estimated_start_us),
            reasons=list(
                cq.decide_in_queue(view, s.waiting.goal, s.waiting.entry.request, at_us).reasons
            ),
        )
        for s in cq.standings(view, at_us)
    ]
