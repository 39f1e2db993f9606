"""A sample's admission for the inspect_ai hooks (SPEC §13.1): `admit --queue --wait`,
from an event loop, cancellable. Nothing here imports inspect_ai.

The sample queues, then asks again until it is admitted, refused outright, or its
wait (`QUOTALEDGER_INSPECT_WAIT_S`) is over:
- a server holds each ask at most HTTP_WAIT_S_MAX (it answers as soon as a promotion
  admits the run), so a longer wait asks again with what is left of it;
- a journal of this process (a path, PostgreSQL) is asked again at the entry's
  estimated start, at most WAIT_POLL_S_MAX apart (SPEC §12.2's waiting client).
Each ask runs in a worker thread, so the event loop never blocks. A wait that ends
without an admission (over, or cancelled: inspect cancels the sample's task) withdraws
the entry: the ask in flight is aborted (a server then stops holding it and asks no
more: its next ask would queue the run again), then `admit --cancel`, then `release`
in case a promotion admitted the run meanwhile. `Admissions.withdraw_left` is the
safety net for what a run of inspect left (its end withdraws them once more).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from quotaledger import Ledger
from quotaledger.adapters.inspect_names import Settings
from quotaledger.journal.clock import parse_at
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import HTTP_WAIT_S_MAX, READ_TIMEOUT_S, WAIT_POLL_S_MAX
from quotaledger.journal.target import is_remote_target

THREADS_MAX = 64
"""Ledger calls in flight at once, for each of the two kinds (the records a running
sample writes, the asks of waiting samples): waiting samples never starve the others."""

log = logging.getLogger("quotaledger")


class Ledgers:
    """Ledgers on one journal, one per call in flight: a waiting call over HTTP holds
    its connection, and a file journal's lock orders the writers."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.remote = is_remote_target(target)
        self._free: list[Ledger] = []
        self._lock = threading.Lock()

    def call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        """`Ledger.<method>(**kwargs)` on a free ledger (blocking: a worker thread's)."""
        with self._lock:
            ledger = self._free.pop() if self._free else None
        if ledger is None:
            ledger = Ledger.open(self.target)
        try:
            answer: dict[str, Any] = getattr(ledger, method)(**kwargs)
        except InvalidInput:
            self._give_back(ledger)
            raise
        except BaseException:  # the connection or the journal may be in any state
            ledger.close()
            raise
        self._give_back(ledger)
        return answer

    def _give_back(self, ledger: Ledger) -> None:
        with self._lock:
            self._free.append(ledger)

    def close(self) -> None:
        with self._lock:
            free, self._free = self._free, []
        for ledger in free:
            ledger.close()


@dataclass
class Waiting:
    """A sample this process queued and has not seen admitted: what a withdrawal takes
    back. Its lock orders an ask's start against the withdrawal."""

    goal: str
    run: str
    inspect_run: str
    withdrawn: bool = False
    asking: Ledger | None = None
    """The ledger of a server's held ask in flight (a connection of its own, which a
    withdrawal aborts)."""
    idle: threading.Event = field(default_factory=threading.Event)
    """Set while no ask is in flight."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.idle.set()


class Withdrawn(Exception):
    """An ask that was not sent: the sample's wait was withdrawn."""


class Admissions:
    """The waits of one process's samples (one instance, shared by its runs)."""

    def __init__(self) -> None:
        self._waiting: dict[str, Waiting] = {}
        self._lock = threading.Lock()
        self._limiter: anyio.CapacityLimiter | None = None

    async def wait(
        self, ledgers: Ledgers, config: Settings, waiting: Waiting, request: dict[str, Any]
    ) -> dict[str, Any]:
        """The last answer of the sample's wait: admitted, refused outright, or still
        queued when the wait was over (its entry then withdrawn). Cancelled, it
        withdraws the entry before the cancellation goes on."""
        key = f"{waiting.inspect_run}/{waiting.run}"
        with self._lock:
            self._waiting[key] = waiting
        queued = {**request, "queue": True, "queue_ttl_s": config.queue_ttl_s}
        deadline = anyio.current_time() + config.wait_s
        try:
            while True:
                remaining_s = deadline - anyio.current_time()
                answer: dict[str, Any] = await self._in_thread(
                    self._ask, ledgers, waiting, queued, remaining_s
                )
                if answer.get("queued") is not True:  # admitted, or refused outright
                    break
                remaining_s = deadline - anyio.current_time()
                if remaining_s <= 0:
                    await self._withdrawn(ledgers, waiting)
                    break
                if not ledgers.remote:
                    await anyio.sleep(min(pause_s(answer), remaining_s))
        except InvalidInput:  # the request was refused before anything was written
            with self._lock:
                self._waiting.pop(key, None)
            raise
        except BaseException:  # cancelled, or the ledger failed: nothing stays queued
            with anyio.CancelScope(shield=True):
                await self._withdrawn(ledgers, waiting)
            raise
        with self._lock:
            self._waiting.pop(key, None)
        return answer

    async def withdraw_left(self, ledgers: Ledgers, inspect_run: str) -> None:
        """Withdraw again every entry a wait of this inspect run queued and did not see
        admitted (a no-op for those already withdrawn): what a server still held when
        the wait was withdrawn cannot have queued it again unseen."""
        with self._lock:
            left = [k for k, w in self._waiting.items() if w.inspect_run == inspect_run]
            waits = [self._waiting.pop(key) for key in left]
        for waiting in waits:
            await self._withdrawn(ledgers, waiting)

    async def _withdrawn(self, ledgers: Ledgers, waiting: Waiting) -> None:
        """Withdraw the entry; a failure is logged (the entry then lasts until its ttl,
        and this run's end tries again), never raised over what ended the wait."""
        try:
            await self._in_thread(_withdraw, ledgers, waiting)
        except Exception as error:
            log.error(
                "quotaledger: goal %s: the queue entry of run %s, if it was queued, was not "
                "withdrawn (%s: %s): it lasts until its ttl unless this inspect run's end "
                "withdraws it",
                waiting.goal,
                waiting.run,
                type(error).__name__,
                error,
            )

    @staticmethod
    def _ask(
        ledgers: Ledgers, waiting: Waiting, queued: dict[str, Any], remaining_s: float
    ) -> dict[str, Any]:
        """One ask: queue the run or ask again (the poll promotes). A server holds it
        up to the rest of the wait, at most HTTP_WAIT_S_MAX, on a connection of its own
        that a withdrawal aborts."""
        with waiting.lock:
            if waiting.withdrawn:
                raise Withdrawn(waiting.run)
            waiting.idle.clear()
            held: Ledger | None = None
            if ledgers.remote:
                held = waiting.asking = Ledger.open(ledgers.target)
        try:
            if held is None:
                return ledgers.call("admit", **queued)
            hold_s = min(max(1, math.ceil(remaining_s)), HTTP_WAIT_S_MAX)
            answer: dict[str, Any] = held.admit(**queued, wait_s=hold_s)
            return answer
        finally:
            with waiting.lock:
                waiting.asking = None
                waiting.idle.set()
            if held is not None:
                held.close()

    async def _in_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(THREADS_MAX)
        # Abandoned on cancel: the withdrawal (shielded) aborts the ask and waits for it.
        return await anyio.to_thread.run_sync(
            function, *args, limiter=self._limiter, abandon_on_cancel=True
        )


def _withdraw(ledgers: Ledgers, waiting: Waiting) -> None:
    """Take the sample's entry out of the queue (blocking: a worker thread's): abort
    the ask in flight and wait for it to end, then cancel the entry, and release the
    run if a promotion admitted it meanwhile (a release of a run not active appends
    nothing)."""
    with waiting.lock:
        waiting.withdrawn = True
        asking = waiting.asking
    if asking is not None:
        abort = getattr(asking, "abort", None)
        if abort is not None:
            abort()
    waiting.idle.wait(READ_TIMEOUT_S)
    answer = ledgers.call("admit", goal=waiting.goal, run=waiting.run, cancel=True)
    if not answer.get("cancelled"):
        ledgers.call("release", goal=waiting.goal, run=waiting.run)


def pause_s(answer: dict[str, Any]) -> float:
    """How long a queued run waits before it asks again: until its estimate if that is
    ahead, else WAIT_POLL_S_MAX (SPEC §12.2)."""
    estimate = answer.get("estimated_start_at")
    at = answer.get("at")
    if not isinstance(estimate, str) or not isinstance(at, str):
        return WAIT_POLL_S_MAX
    wait_us = parse_at(estimate) - parse_at(at)
    return WAIT_POLL_S_MAX if wait_us <= 0 else min(wait_us / 1e6, WAIT_POLL_S_MAX)
