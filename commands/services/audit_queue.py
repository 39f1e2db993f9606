"""`audit` of a queued request or of a promotion (SPEC §12.2, §12.5): both decisions
re-taken (the refusal at queue time; the fit and the order at promotion time) and the
wait explained: where the entry stood and was estimated to start when it was queued,
what held it, what freed it and when it actually started.

What freed it is the writer's own event in the transaction that promoted it (a
release, an observation, a configure); null when that transaction wrote no event of
its own (a poll, or a server's timer): time alone freed it. A transaction of several
records is led by a `journal.batch` record that says how many follow.
"""

from __future__ import annotations

from typing import Any

from quotaledger.journal import Journal, Record
from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from quotaledger.journal.record import BATCH_KIND
from quotaledger.projections import audit as au
from quotaledger.projections import capacity as cap
from quotaledger.projections.capacity import queue as cq
from quotaledger.projections.capacity.events import DEQUEUED, QUEUED
from quotaledger.projections.ledger import pool_context_of
from quotaledger.services.queueing import queue_view
from quotaledger.usecases.operator import QueueDecision, QueueExplanation, QueueFreedBy


def is_queue_decision(record: Record, payload: Any) -> bool:
    """A `capacity.queued` record, or an admission a promotion made."""
    if record.kind == QUEUED:
        return True
    return record.kind == cap.ADMITTED and getattr(payload, "queued", None) is not None


def queue_explanation(journal: Journal[Any], record: Record, payload: Any) -> QueueExplanation:
    """The wait of the entry `record` queued or promoted, from the journal alone."""
    queued_seq = record.seq if record.kind == QUEUED else payload.queued.seq
    found = _entry_records(journal, queued_seq)
    queued, promotion, freed = found.queued, found.promotion, found.freed_by
    goal, run = queued[0].goal or "", queued[1].request.run
    after = journal.fold_as_of(seq=queued[0].seq, use_checkpoint=False)[0]
    queued_at_us = parse_at(queued[0].at)
    view = queue_view(after, goal)
    standing = cq.standing_of(view, goal, run, queued_at_us)
    decisions = [_redecide(journal, *queued)]
    admitted_at = waited_s = None
    if promotion is not None:
        decisions.append(_redecide(journal, *promotion))
        admitted_at = promotion[0].at
        waited_s = au.seconds(parse_at(admitted_at) - queued_at_us)
    estimate_us = None if standing is None else standing.estimated_start_us
    late_s = None
    if estimate_us is not None and admitted_at is not None:
        late_s = (parse_at(admitted_at) - estimate_us) / US_PER_S
    return QueueExplanation(
        queued_at=queued[0].at,
        position=None if standing is None else standing.position,
        estimated_start_at=None if estimate_us is None else format_us(estimate_us),
        admitted_at=admitted_at,
        waited_s=waited_s,
        held_by=list(queued[1].reasons),
        freed_by=freed,
        started_after_estimate_s=late_s,
        left=found.left,
        decisions=decisions,
    )


def _redecide(journal: Journal[Any], record: Record, payload: Any) -> QueueDecision:
    before = journal.fold_as_of(seq=record.seq - 1, use_checkpoint=False)[0]
    recorded = au.recorded_decision(record, payload)
    assert recorded is not None
    goal = cap.goal_of(before.capacity, recorded.goal)
    result = au.audit_decision(goal, recorded, pool_context_of(before, recorded.goal))
    return QueueDecision(
        seq=record.seq,
        kind=record.kind,
        reproduced=result.reproduced,
        reasons=list(result.replayed.reasons),
        differences=list(result.differences),
    )


class _Found:
    __slots__ = ("freed_by", "left", "promotion", "queued")

    def __init__(self, queued: tuple[Record, Any]) -> None:
        self.queued = queued
        self.promotion: tuple[Record, Any] | None = None
        self.freed_by: QueueFreedBy | None = None
        self.left: str | None = None

    def ends(self, record: Record, payload: Any, own: Record | None) -> bool:
        """Does `record` take the entry out of the queue (noted here)?"""
        queued_record, queued = self.queued
        if record.goal != queued_record.goal:
            return False
        promoted = getattr(payload, "queued", None)
        if record.kind == cap.ADMITTED and promoted is not None:
            if promoted.seq != queued_record.seq:
                return False  # another entry promoted by the same transaction
            self.promotion = (record, payload)
            if own is not None:
                self.freed_by = QueueFreedBy(seq=own.seq, kind=own.kind)
            return True
        run = queued.request.run
        if record.kind == DEQUEUED and payload.run == run:
            self.left = payload.reason
            return True
        if record.kind == QUEUED and payload.request.run == run:
            self.left = "expired"  # queued anew: the entry had expired
            return True
        return False


def _promotes(record: Record, payload: Any) -> bool:
    return (record.kind == cap.ADMITTED and getattr(payload, "queued", None) is not None) or (
        record.kind == DEQUEUED and payload.reason == "refused"
    )


def _entry_records(journal: Journal[Any], queued_seq: int) -> _Found:
    """The entry's `capacity.queued` record, the promotion that admitted it (if any)
    and that transaction's own first event; or how else it left the queue."""
    records = journal.records(after_seq=queued_seq - 1)
    record, payload, _line = next(records)
    found = _Found((record, payload))
    batch_end = -1
    own: Record | None = None
    for record, payload, _line in records:
        if record.kind == BATCH_KIND:
            batch_end, own = record.seq + payload.records, None
            continue
        if record.seq > batch_end:
            own = None
        if found.ends(record, payload, own):
            return found
        if own is None and record.seq <= batch_end and not _promotes(record, payload):
            own = record
    return found
