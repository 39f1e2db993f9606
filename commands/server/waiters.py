"""Requests the server holds while their run waits in a queue (SPEC §12.2).

`POST /v1/admit` with `"wait_s": N` (0..60) queues the run, then the server holds
the request until the run is admitted, refused, the wait is over or the client is
gone. The queue's timer (`queue_timers`) promotes at the earliest estimate and hands
each waiter it admits its answer (`answer`); a writer whose answer lists the run as
promoted wakes it to ask again (`wake`); and the waiter asks again itself (a poll,
which promotes too) at its own estimate, and 1 s apart once that has passed or
without one, for what other writers (the CLI, another server) may have done. A client that
disconnects stops its wait; its entry stays until its ttl or a cancel.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.clock import parse_at
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import HTTP_WAIT_S_MAX
from quotaledger.usecases.waiting import pause_until, queue_ttl_s

Poll = Callable[[Any], Awaitable[Any]]


class Woken:
    """A held request's wake-up, and the answer it is woken with, if any."""

    __slots__ = ("answer", "event")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.answer: Any = None


class Waiters:
    """The held requests, by (goal, run): each one's wake-up."""

    def __init__(self) -> None:
        self._woken: dict[tuple[str, str], Woken] = {}

    def __len__(self) -> int:
        return len(self._woken)

    def wake(self, promoted: Any) -> None:
        """An answer listed these runs as promoted: their waiters ask at once."""
        if not self._woken or not isinstance(promoted, list):
            return
        for ref in promoted:
            woken = self._woken.get((ref.goal, ref.run))
            if woken is not None:
                woken.event.set()

    def answer(self, admitted: list[Any]) -> None:
        """A promotion admitted these runs: their waiters answer with these answers
        (each the receipt a poll would give), asking nothing more."""
        for answer in admitted:
            woken = self._woken.get((answer.goal, answer.receipt.run))
            if woken is not None:
                woken.answer = answer
                woken.event.set()

    async def hold(self, request: Any, poll: Poll, gone: asyncio.Event) -> Any:
        """Queue `request` (an admit with `wait_s`), then ask again until it is no longer
        queued or its wait is over (or the client is `gone`); the last outcome."""
        wait_s = request.wait_s
        if wait_s > HTTP_WAIT_S_MAX:
            raise InvalidInput(
                f"wait_s is at most {HTTP_WAIT_S_MAX} per HTTP request, got {wait_s}: a longer "
                "wait asks again with what is left of it",
                code=codes.INVALID_DURATION,
                parameter="wait_s",
            )
        ttl_s = queue_ttl_s(
            queue=True, queue_ttl_s=request.queue_ttl_s, wait_s=None, lease_s=request.lease_s
        )
        once = msgspec.structs.replace(request, wait_s=None, queue=True, queue_ttl_s=ttl_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        key = (request.goal, request.run)
        woken = self._woken[key] = Woken()
        try:
            outcome = await poll(once)
            while getattr(outcome, "queued", None) is True and not gone.is_set():
                if woken.answer is not None:  # admitted while its poll was answered
                    return woken.answer
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                if not woken.event.is_set():  # a wake during the poll: ask at once
                    await _first(woken.event, gone, min(pause_of(outcome), remaining))
                if woken.answer is not None:
                    return woken.answer
                if gone.is_set():
                    break
                woken.event.clear()  # before the poll: a wake while it runs is kept
                outcome = await poll(once)
        finally:
            if self._woken.get(key) is woken:
                del self._woken[key]
        return outcome


def pause_of(answer: Any) -> float:
    estimate = answer.estimated_start_at
    estimate_us = parse_at(estimate) if isinstance(estimate, str) else None
    return pause_until(estimate_us, parse_at(answer.at))


async def _first(woken: asyncio.Event, gone: asyncio.Event, timeout_s: float) -> None:
    """Until woken, the client gone, or `timeout_s` passed."""
    tasks = [asyncio.ensure_future(woken.wait()), asyncio.ensure_future(gone.wait())]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def retry_after_s(answer: Any) -> int | None:
    """A queued answer's Retry-After: whole seconds to its estimate, rounded up (None
    without an estimate)."""
    estimate = getattr(answer, "estimated_start_at", None)
    if not isinstance(estimate, str):
        return None
    wait_us = parse_at(estimate) - parse_at(answer.at)
    return max(0, math.ceil(wait_us / 1e6))
