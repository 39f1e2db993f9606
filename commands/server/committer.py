"""The commit loop: requests queue as they arrive; one commit at a time, in one worker
thread, takes every waiting request (at most `max_batch`) and decides them in arrival
order; requests arriving meanwhile wait for the next commit. No artificial delay.

Each request is its own transaction today (one lock, one fdatasync); the loop is
batch-shaped so that the engine's group commit (one write and one sync per batch)
slots in at `_decide_batch`.
"""

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.errors import JournalPoisoned, LockTimeout, StorageFailure
from quotaledger.server.routes import Route
from quotaledger.server.telemetry import Telemetry

Outcome = Any
"""An answer dict, a list (the log's records), or the `Error` a request raised."""


class Job:
    __slots__ = ("future", "route", "values")

    def __init__(self, route: Route, values: Mapping[str, Any], future: "asyncio.Future[Outcome]"):
        self.route = route
        self.values = values
        self.future = future


class Committer:
    def __init__(self, ledger: Ledger, max_batch: int, telemetry: Telemetry) -> None:
        self.ledger = ledger
        self.max_batch = max_batch
        self.telemetry = telemetry
        self.waiting: deque[Job] = deque()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="quotaledger-commit")
        self.draining: asyncio.Task[None] | None = None
        self.failed = False
        """A commit's write or sync failed: the server answers what it holds and exits 4."""
        self.on_failure: Callable[[], None] = lambda: None
        """Called on the event loop once a commit failed (the server stops)."""
        self.commits: list[Callable[[], None]] = []
        """Called on the event loop after every commit (the log's followers)."""

    async def run(self, route: Route, values: Mapping[str, Any]) -> Outcome:
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self.waiting.append(Job(route, values, future))
        self.telemetry.waiting.set(len(self.waiting))
        if self.draining is None or self.draining.done():
            self.draining = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self.waiting:
            batch = [self.waiting.popleft() for _ in range(min(self.max_batch, len(self.waiting)))]
            self.telemetry.waiting.set(len(self.waiting))
            started = time.perf_counter()
            outcomes = await loop.run_in_executor(self.executor, self._decide_batch, batch)
            self.telemetry.commit_seconds.observe(time.perf_counter() - started)
            self.telemetry.batch_size.observe(len(batch))
            for job, outcome in zip(batch, outcomes, strict=True):
                if not job.future.done():
                    job.future.set_result(outcome)
            for notify in self.commits:
                notify()
            if self.failed:
                self.on_failure()

    def _decide_batch(self, batch: list[Job]) -> list[Outcome]:
        """Every request of `batch` in arrival order (in the worker thread)."""
        outcomes: list[Outcome] = []
        for job in batch:
            if self.failed:
                outcomes.append(JournalPoisoned("the server's journal failed a commit"))
                continue
            try:
                answer = job.route.call(self.ledger, job.values)
                outcomes.append(answer if isinstance(answer, dict) else list(answer))
            except StorageFailure as error:
                self.failed = self.failed or _poisons(error)
                outcomes.append(error)
            except Exception as error:  # an Error answers; anything else is a 500
                outcomes.append(error)
        return outcomes

    async def close(self) -> None:
        """Answers what waits, then stops the worker."""
        while self.draining is not None and not self.draining.done():
            await self.draining
        self.executor.shutdown(wait=True)


def _poisons(error: StorageFailure) -> bool:
    """A failed write or sync (not a lock timeout, after which a retry helps)."""
    return not isinstance(error, LockTimeout)
