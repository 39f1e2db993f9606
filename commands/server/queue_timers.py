"""The server's timers on the queues it serves (SPEC §12.2).

One timer per queue, at the earliest `estimated_start_at` known among its entries:
when it fires, the server runs a write transaction on the queue that appends nothing
of its own, so it only promotes (every write promotes), whether or not a client is
polling; the waiters that promotion admits are answered at once, and the timer is
set again at the queue's next estimate. A queued answer (any client's) sets the
timer earlier when its estimate is; a write that changes the queue (a promotion, a
cancel, a release of a queued run) has it look again at once, since the entries
behind may now start sooner. At start the server looks at every queue with an
entry waiting (a restart leaves nobody polling them).

A queue is named as the journal names it: a pooled goal waits in its pool's queue
(one timer for the pool, however many of its members wait), any other goal in its
own. The timers learn which queue a goal waits in from the answers themselves (a
queued answer's pool figures; a promotion's `queue`), never by reading the ledger's
state from the event loop: a goal not yet seen is taken as its own queue, and its
first promotion (which promotes its pool's queue all the same) says which it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from quotaledger.journal.clock import parse_at, wall_us
from quotaledger.journal.limits import WAIT_POLL_S_MAX

Promote = Callable[[str], Awaitable[Any]]
"""Runs the promotion of a queue (a goal's or a pool's name); its outcome
(`QueuePromotion`, or an Error)."""


class QueueTimers:
    """At most one armed timer per queue: the time it fires (µs) and its handle."""

    def __init__(self, promote: Promote) -> None:
        self._promote = promote
        self._armed: dict[str, tuple[int, asyncio.TimerHandle]] = {}
        self._running: set[asyncio.Future[None]] = set()
        self._queue_of: dict[str, str] = {}
        """The queue each goal seen waits in (its pool's name, or absent: its own)."""

    def __len__(self) -> int:
        return len(self._armed)

    def at(self, queue: str, when_us: int) -> None:
        """Promote `queue` at `when_us` (wall clock, µs), unless its timer is already
        set no later."""
        armed = self._armed.get(queue)
        if armed is not None:
            if armed[0] <= when_us:
                return
            armed[1].cancel()
        delay_s = max(0.0, (when_us - wall_us()) / 1e6)
        handle = asyncio.get_running_loop().call_later(delay_s, self._fire, queue)
        self._armed[queue] = (when_us, handle)

    def now(self, queue: str) -> None:
        self.at(queue, wall_us())

    def queue_of(self, goal: str) -> str:
        """The queue `goal` waits in, as the answers seen so far say."""
        return self._queue_of.get(goal, goal)

    def note(self, outcome: Any) -> None:
        """A client's answer: a queued run's estimate sets its queue's timer; a write
        that moved the queue has it looked at again now."""
        goal = getattr(outcome, "goal", None)
        if not isinstance(goal, str):
            return
        if getattr(outcome, "queued", None) is True:
            self._learn(goal, _pool_of(outcome))
            estimate = outcome.estimated_start_at
            if isinstance(estimate, str):
                self.at(self.queue_of(goal), parse_at(estimate))
        elif (
            getattr(outcome, "promoted", None)
            or getattr(outcome, "cancelled", None) is True
            or getattr(outcome, "dequeued", None) is True
        ):
            self.now(self.queue_of(goal))

    def cancel(self) -> None:
        for _, handle in self._armed.values():
            handle.cancel()
        self._armed.clear()

    def _learn(self, goal: str, queue: str | None) -> None:
        if queue is None or queue == goal:
            self._queue_of.pop(goal, None)
        else:
            self._queue_of[goal] = queue

    def _fire(self, queue: str) -> None:
        del self._armed[queue]
        task = asyncio.ensure_future(self._run(queue))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, queue: str) -> None:
        outcome = await self._promote(queue)
        found = getattr(outcome, "queue", None)
        if isinstance(found, str):
            self._learn(outcome.goal, found)
            queue = found  # a goal's name given for its pool's queue: the pool's from now
        next_us = getattr(outcome, "next_estimate_us", None)
        if isinstance(next_us, int):
            self.at(queue, next_us)
        elif not hasattr(outcome, "next_estimate_us"):
            # Refused (a lock held too long by another writer): look again shortly.
            self.at(queue, wall_us() + int(WAIT_POLL_S_MAX * 1e6))


def _pool_of(answer: Any) -> str | None:
    """The pool a queued answer's goal waits in (its figures' pool), or None."""
    pool = getattr(getattr(answer, "figures", None), "pool", None)
    name = getattr(pool, "name", None)
    return name if isinstance(name, str) else None
