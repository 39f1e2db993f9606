"""The queue (SPEC §12.2): who waits, in what order, who is admitted next and when.

A queue is a key (a goal's name; its pool's, for a pooled goal: one queue per pool,
its members' entries ordered by their goals' priority, then seq) and the goals that
wait in it. Its entries are the `capacity.queued` events of those goals, each kept in
its own goal's state (`GoalCapacity.queue`); the queue is their merge, by priority
descending then seq ascending. Everything here is a pure function of the goals'
states and a time, through one view (`QueueView`): the goals of a queue and the
decision for a goal's request. Pools plug in by giving their own view.

Who blocks whom: an entry that does not fit blocks the entries behind it of its own
goal always, and other goals' only when it fails a pool-wide reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from quotaledger.journal.clock import US_PER_S, format_us
from quotaledger.projections import reasons as R
from quotaledger.projections.capacity.decision import (
    Admission,
    AdmissionDecision,
    change_points_after,
    decide_admission,
)
from quotaledger.projections.capacity.events import (
    REFUSED,
    AdmitRequest,
    CapacityDequeued,
    CapacityRefused,
)
from quotaledger.projections.capacity.fold import ActiveRun, GoalCapacity, QueueEntry
from quotaledger.projections.capacity.pool_decision import PoolContext, pool_change_points
from quotaledger.projections.decision import Decision

# -- reasons ---------------------------------------------------------------------------

QUEUEABLE_REASONS = frozenset(
    {
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
        R.BASELINE_CAPACITY_EXHAUSTED,
        R.TEST_CAPACITY_EXHAUSTED,
        R.RESERVED_TEST_CAPACITY,
        R.CAPACITY_COOLDOWN_ACTIVE,
        R.USAGE_UNMETERED_IN_WINDOW,
        R.USAGE_OBSERVATION_STALE,
        R.SPEND_CAP_EXCEEDED,
        R.QUEUE_AHEAD,
        # The pool's (SPEC §12.1).
        R.POOL_COOLDOWN_ACTIVE,
        R.POOL_BORROWING_LIMIT,
        R.POOL_SHARE_PROTECTED,
        R.POOL_SPEND_CAP_EXCEEDED,
    }
)
"""Reasons time or another run's release can cure (SPEC §12.2), besides every
`*headroom_exhausted`, `*evaluator_reserve_protected` and `*provider_exhausted`."""
QUEUEABLE_SUFFIXES = ("headroom_exhausted", "evaluator_reserve_protected", "provider_exhausted")

POOL_WIDE_REASONS = frozenset(
    {
        R.POOL_COOLDOWN_ACTIVE,
        R.POOL_HEADROOM_EXHAUSTED,
        R.POOL_SHARE_PROTECTED,
        R.POOL_PROVIDER_EXHAUSTED,
        R.POOL_SPEND_CAP_EXCEEDED,
    }
)
"""An entry failing one of these blocks every entry behind it, whatever its goal."""


def queueable(reason: str) -> bool:
    return reason in QUEUEABLE_REASONS or reason.endswith(QUEUEABLE_SUFFIXES)


def all_queueable(reasons: Iterable[str]) -> bool:
    """A refusal for these reasons may wait in the queue (and an entry failing only
    these stays in it)."""
    return all(queueable(reason) for reason in reasons)


def pool_wide(reasons: Iterable[str]) -> bool:
    return any(reason in POOL_WIDE_REASONS for reason in reasons)


# -- the view: the goals of one queue and the decision for a goal's request --------------


class Waiting(msgspec.Struct, frozen=True):
    """One entry of a queue, with its goal and the priority it waits at."""

    goal: str
    entry: QueueEntry
    priority: int

    @property
    def run(self) -> str:
        return self.entry.request.run

    @property
    def order(self) -> tuple[int, int]:
        return (-self.priority, self.entry.seq)


class QueueView:
    """The goals that wait in one queue (by name) and the decision for a request of
    one of them. A goal's own queue holds that goal alone; a pool's, its members."""

    __slots__ = ("goals", "key", "pool")

    def __init__(
        self, key: str, goals: Mapping[str, GoalCapacity], pool: PoolContext | None = None
    ) -> None:
        self.key = key
        self.goals = dict(goals)
        self.pool = pool
        """The pool of the goals (SPEC §12.1), whose reasons their decisions include."""

    def decide(self, goal: str, request: AdmitRequest, at_us: int) -> AdmissionDecision:
        """The admission decision for `goal`'s request, queue aside."""
        return decide_admission(self.goals[goal], request, at_us, self.pool, goal)

    def priority(self, goal: str) -> int:
        """The priority `goal`'s entries wait at (its configured one, SPEC §12.1)."""
        return self.goals[goal].priority

    def replaced(self, goal: str, state: GoalCapacity) -> QueueView:
        """The same queue with `goal`'s state replaced (a simulation's); a pool's
        decisions then see it too."""
        pool = None if self.pool is None else self.pool.with_member(goal, state)
        return type(self)(self.key, {**self.goals, goal: state}, pool)

    def waiting(self, at_us: int) -> list[Waiting]:
        """The entries waiting at `at_us`, in queue order."""
        found = [
            Waiting(name, entry, self.priority(name))
            for name, state in self.goals.items()
            for entry in state.queue.values()
            if entry.waiting_at(at_us)
        ]
        found.sort(key=lambda w: w.order)
        return found


def goal_queue(goal: str, state: GoalCapacity) -> QueueView:
    """The queue a goal outside any pool waits in: its own."""
    return QueueView(goal, {goal: state})


def pool_queue(pool: PoolContext) -> QueueView:
    """The queue of a pool (SPEC §12.2): every member's entries, in one order."""
    return QueueView(pool.name, pool.members, pool)


def entry_of(view: QueueView, goal: str, run: str, at_us: int) -> QueueEntry | None:
    """`run`'s entry, if it waits in the queue at `at_us`."""
    state = view.goals.get(goal)
    entry = None if state is None else state.queue.get(run)
    return entry if entry is not None and entry.waiting_at(at_us) else None


# -- who blocks whom -----------------------------------------------------------------------


def blocks(ahead: Waiting, ahead_reasons: Iterable[str], goal: str) -> bool:
    """Does `ahead`, failing `ahead_reasons`, hold back an entry of `goal` behind it?"""
    return ahead.goal == goal or pool_wide(ahead_reasons)


def blockers(view: QueueView, goal: str, run: str, at_us: int) -> list[Waiting]:
    """The waiting entries that hold back `goal`'s `run`: for a queued run, the entries
    ahead of it that block it; for any other, the entries of equal or higher priority
    that would block it (it would wait behind them)."""
    queue = view.waiting(at_us)
    own = next((w for w in queue if w.goal == goal and w.run == run), None)
    if own is not None:
        ahead = queue[: queue.index(own)]
    else:
        priority = view.priority(goal)
        ahead = [w for w in queue if w.priority >= priority]
    found = []
    for waiting in ahead:
        if waiting.goal == goal or pool_wide(
            view.decide(waiting.goal, waiting.entry.request, at_us).reasons
        ):
            found.append(waiting)
    return found


def decide_in_queue(
    view: QueueView, goal: str, request: AdmitRequest, at_us: int
) -> AdmissionDecision:
    """The admission decision with the queue (SPEC §12.2): the goal's decision, then
    `queue_ahead` (last) when a waiting entry would block the request. `admit`, a
    promotion, `audit` and `verify --decisions` decide with this one function."""
    decision = view.decide(goal, request, at_us)
    if decision.idempotent or R.RUN_EXISTS_WITH_DIFFERENT_REQUEST in decision.reasons:
        return decision
    if not blockers(view, goal, request.run, at_us):
        return decision
    detail = decision.detail
    reasons = (*decision.reasons, R.QUEUE_AHEAD)
    refused = CapacityRefused(request=request, reasons=list(reasons), figures=detail.figures)
    return Decision(
        reasons=reasons,
        kind=REFUSED,
        payload=refused,
        detail=Admission(detail.figures, None, detail.original),
    )


# -- promotion -----------------------------------------------------------------------------


class Step(msgspec.Struct, frozen=True):
    """What a promotion does next: admit `waiting` (its decision admits it), or dequeue
    it as refused (its decision fails a reason that is not queueable)."""

    waiting: Waiting
    decision: AdmissionDecision

    @property
    def admits(self) -> bool:
        return self.decision.ok

    def dequeued(self) -> CapacityDequeued:
        return CapacityDequeued(
            run=self.waiting.run, reason="refused", reasons=list(self.decision.reasons)
        )


def next_step(view: QueueView, at_us: int) -> Step | None:
    """The next entry a promotion at `at_us` admits or refuses, in queue order, passing
    only the entries that the entries ahead do not block; None: nothing moves. An entry
    held back by its own goal's still blocks every entry behind it when it fails a
    pool-wide reason (it does not fit, SPEC §12.2), as `blockers` has it."""
    held: set[str] = set()
    for waiting in view.waiting(at_us):
        decision = view.decide(waiting.goal, waiting.entry.request, at_us)
        if waiting.goal in held:
            if pool_wide(decision.reasons):
                return None
            continue
        if decision.ok and not decision.idempotent:
            return Step(waiting, decision)
        if not all_queueable(decision.reasons) or decision.idempotent:
            return Step(waiting, decision)
        if pool_wide(decision.reasons):
            return None  # it holds back every entry behind it
        held.add(waiting.goal)
    return None


# -- the estimate --------------------------------------------------------------------------

ESTIMATE_IGNORES = frozenset({R.USAGE_OBSERVATION_STALE})
"""Staleness is not a change by time: the runner keeps its observations fresh."""


def admitted_run(decision: AdmissionDecision, request: AdmitRequest, at_us: int) -> ActiveRun:
    """The active run a simulated admission at `at_us` would leave."""
    receipt = decision.detail.receipt
    assert receipt is not None
    lease_s = request.lease_s
    return ActiveRun(
        request=request,
        receipt=receipt,
        seq=-1,
        hash="",
        admitted_at_us=at_us,
        lease_until_us=None if lease_s is None else at_us + lease_s * US_PER_S,
    )


def _fits(view: QueueView, waiting: Waiting, at_us: int) -> AdmissionDecision | None:
    """The decision admitting `waiting` at `at_us`, staleness ignored; None if it
    would not."""
    request = waiting.entry.request
    decision = view.decide(waiting.goal, request, at_us)
    if decision.ok and not decision.idempotent:
        return decision
    if decision.idempotent or not set(decision.reasons) <= ESTIMATE_IGNORES:
        return None
    # Held only by staleness: the decision as if an observation had just come in.
    state = view.goals[waiting.goal]
    fresh = msgspec.structs.replace(state, last_metered_at_us=at_us)
    decision = view.replaced(waiting.goal, fresh).decide(waiting.goal, request, at_us)
    return decision if decision.ok and not decision.idempotent else None


def estimates(view: QueueView, at_us: int) -> dict[tuple[str, str], int | None]:
    """Each waiting entry's `estimated_start_at` (SPEC §12.2), by (goal, run): the first
    of now and the times where the state changes by time alone at which the decision
    admits it, the entries ahead admitted at their own estimates; None at or after its
    expiry, behind a blocking entry without one, or never (a release no lease bounds)."""
    queue = view.waiting(at_us)
    found: dict[tuple[str, str], int | None] = {}
    simulated = view
    wide: dict[tuple[str, str], bool] = {}
    """Whether each entry fails a pool-wide reason now: decided once per entry, not once
    per entry behind it."""
    for index, waiting in enumerate(queue):
        start_us: int | None = at_us
        for ahead in queue[:index]:
            if ahead.goal != waiting.goal:  # another goal's blocks only on a pool-wide reason
                key = (ahead.goal, ahead.run)
                if key not in wide:
                    reasons = view.decide(ahead.goal, ahead.entry.request, at_us).reasons
                    wide[key] = pool_wide(reasons)
                if not wide[key]:
                    continue
            estimate = found[(ahead.goal, ahead.run)]
            start_us = None if estimate is None or start_us is None else max(start_us, estimate)
        key = (waiting.goal, waiting.run)
        found[key] = None
        if start_us is None:
            continue
        expires_us = waiting.entry.expires_us
        for point_us in _candidates(simulated, waiting.goal, start_us, queue[:index]):
            if point_us >= expires_us:
                break
            decision = _fits(simulated, waiting, point_us)
            if decision is not None:
                found[key] = point_us
                state = simulated.goals[waiting.goal]
                admitted = admitted_run(decision, waiting.entry.request, point_us)
                runs = {**state.runs, waiting.run: admitted}
                simulated = simulated.replaced(
                    waiting.goal, msgspec.structs.replace(state, runs=runs)
                )
                break
    return found


def _candidates(view: QueueView, goal: str, start_us: int, ahead: list[Waiting]) -> list[int]:
    """`start_us`, then the times after it where the goal's state changes by time alone
    (an entry ahead expiring among them)."""
    points = set(change_points_after(view.goals[goal], start_us))
    if view.pool is not None:  # another member's load leaving by time frees the pool
        points.update(pool_change_points(view.pool, start_us))
        for state in view.goals.values():
            points.update(change_points_after(state, start_us))
    points.update(w.entry.expires_us for w in ahead if w.entry.expires_us > start_us)
    return [start_us, *sorted(points)]


# -- what a queued run is told -------------------------------------------------------------


class Standing(msgspec.Struct, frozen=True):
    """Where a queued run stands (the queued answer, `inspect`'s queue)."""

    waiting: Waiting
    position: int
    """1 at the head."""
    ahead: list[Waiting]
    estimated_start_us: int | None


def standings(view: QueueView, at_us: int) -> list[Standing]:
    """Every waiting entry's place, the entries ahead of it and its estimate."""
    queue = view.waiting(at_us)
    found = estimates(view, at_us)
    return [Standing(w, i + 1, queue[:i], found[(w.goal, w.run)]) for i, w in enumerate(queue)]


def standing_of(view: QueueView, goal: str, run: str, at_us: int) -> Standing | None:
    for standing in standings(view, at_us):
        if standing.waiting.goal == goal and standing.waiting.run == run:
            return standing
    return None


def format_us_or_none(at_us: int | None) -> str | None:
    return None if at_us is None else format_us(at_us)
