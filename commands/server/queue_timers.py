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

A queue is named by its goal (the goal whose write promotes it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from quotaledger.journal.clock import parse_at, wall_us
from quotaledger.journal.limits import WAIT_POLL_S_MAX

Promote = Callable[[str], Awaitable[Any]]
"""Runs the promotion of a goal's queue; its outcome (`QueuePromotion`, or an Error)."""


class QueueTimers:
    """At most one armed timer per queue: the time it fires (µs) and its handle."""

    def __init__(self, promote: Promote) -> None:
        self._promote = promote
        self._armed: dict[str, tuple[int, asyncio.TimerHandle]] = {}
        self._running: set[asyncio.Future[None]] = set()

    def __len__(self) -> int:
        return len(self._armed)

    def at(self, goal: str, when_us: int) -> None:
        """Promote `goal`'s queue at `when_us` (wall clock, µs), unless its timer is
        already set no later."""
        armed = self._armed.get(goal)
        if armed is not None:
            if armed[0] <= when_us:
                return
            armed[1].cancel()
        delay_s = max(0.0, (when_us - wall_us()) / 1e6)
        handle = asyncio.get_running_loop().call_later(delay_s, self._fire, goal)
        self._armed[goal] = (when_us, handle)

    def now(self, goal: str) -> None:
        self.at(goal, wall_us())

    def note(self, outcome: Any) -> None:
        """A client's answer: a queued run's estimate sets its queue's timer; a write
        that moved the queue has it looked at again now."""
        goal = getattr(outcome, "goal", None)
        if not isinstance(goal, str):
            return
        if getattr(outcome, "queued", None) is True:
            estimate = outcome.estimated_start_at
            if isinstance(estimate, str):
                self.at(goal, parse_at(estimate))
        elif (
            getattr(outcome, "promoted", None)
            or getattr(outcome, "cancelled", None) is True
            or getattr(outcome, "dequeued", None) is True
        ):
            self.now(goal)

    def cancel(self) -> None:
        for _, handle in self._armed.values():
            handle.cancel()
        self._armed.clear()

    def _fire(self, goal: str) -> None:
        del self._armed[goal]
        task = asyncio.ensure_future(self._run(goal))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, goal: str) -> None:
        outcome = await self._promote(goal)
        next_us = getattr(outcome, "next_estimate_us", None)
        if isinstance(next_us, int):
            self.at(goal, next_us)
        elif not hasattr(outcome, "next_estimate_us"):
            # Refused (a lock held too long by another writer): look again shortly.
            self.at(goal, wall_us() + int(WAIT_POLL_S_MAX * 1e6))
