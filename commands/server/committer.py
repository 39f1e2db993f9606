"""Group commit (SPEC §11): one thread decides every request in arrival order.

Requests that arrive while a commit is in flight wait for the next one; each round
takes every waiting request (at most `max_batch`) and serves them one after another:
a run of writers is one `Journal.group` (one lock hold, one write and one fdatasync,
or one COMMIT), a reader between them ends the run before it (it answers from the
state every earlier request left, after it is durable). No request is answered
before what its answer stands on is durable. A lone request commits at once: nothing
waits for company.

A failed write or fdatasync poisons the journal handle: every request of that group
is answered `storage_failure`, nothing of it acknowledged, and the committer stops
taking requests (the process then exits 4; recovery on the next open does the rest).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal import codes
from quotaledger.journal.errors import Error, JournalCorrupt, StorageFailure
from quotaledger.usecases.decode import Request
from quotaledger.usecases.registry import UseCase

Outcome = Any
"""A use case's typed answer, or the `Error` it raised."""
Deliver = Callable[[list[tuple[Any, Outcome]]], None]
"""Hands each waiting request (its ticket) its outcome, in one call per round."""


def internal_error(exc: BaseException) -> JournalCorrupt:
    """A fault of the server's own (a bug), as the error its request is answered with
    (500, exit 3); its traceback goes to stderr for whoever runs the server."""
    traceback.print_exception(exc, file=sys.stderr)
    return JournalCorrupt(
        f"the server failed on this request ({type(exc).__name__}); nothing of it was "
        "acknowledged; the server's log has the details",
        code=codes.INTERNAL_ERROR,
    )


class Internal:
    """A write of the server's own, no client's use case (a queue's timer, SPEC §12.2):
    `call(ledger)`, served in arrival order among the clients' writers."""

    __slots__ = ("call", "name")
    writes = True

    def __init__(self, name: str, call: Callable[[Ledger], Outcome]) -> None:
        self.name = name
        self.call = call


class Work:
    __slots__ = ("case", "request", "ticket")

    def __init__(self, case: UseCase | Internal, request: Request | None, ticket: Any) -> None:
        self.case = case
        self.request = request
        self.ticket = ticket


class Committer:
    """The thread that serves every request to the ledger, in arrival order."""

    def __init__(
        self,
        ledger: Ledger,
        deliver: Deliver,
        *,
        max_batch: int,
        on_commit: Callable[[int, float], None] = lambda size, seconds: None,
    ) -> None:
        self.ledger = ledger
        self._deliver = deliver
        self._max_batch = max_batch
        self._on_commit = on_commit
        self._waiting: deque[Work] = deque()
        self._lock = threading.Lock()
        """Guards `_waiting`, `_stopping` and `_asleep` (held for a few lines only)."""
        self._asleep = False
        """The thread found nothing to do and waits on `_bell`: the next to queue rings."""
        self._bell = threading.Lock()
        """Held while nobody rang: the sleeping thread blocks acquiring it, one release
        wakes it. Rung at most once per sleep (`_asleep` says when), so a release never
        meets an unheld lock. A plain lock, not a Condition: both ends are C calls, where
        a Condition's wait and notify are Python and allocate a lock per wait."""
        self._bell.acquire()
        self._stopping = False
        self.failure: StorageFailure | None = None
        """The storage failure that stopped the committer (the process exits 4)."""
        self.last_commit_ok = True
        self._thread = threading.Thread(target=self._run, name="quotaledger-committer")

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def accepting(self) -> bool:
        return not self._stopping and self.failure is None

    def start(self) -> None:
        self._thread.start()

    def submit(self, works: list[Work]) -> None:
        """Queue `works`, in order (the requests the event loop took in one turn: one
        hand-off for them all); each one's outcome is delivered once it is durable. A
        committer that stopped refuses them (`shutting_down`, exit 4: a retry
        elsewhere may help)."""
        with self._lock:
            if not self.accepting:
                raise StorageFailure(
                    "the server is shutting down; nothing was done", code=codes.SHUTTING_DOWN
                )
            self._waiting.extend(works)
            ring, self._asleep = self._asleep, False
        if ring:
            self._bell.release()

    def stop(self, timeout_s: float) -> None:
        """Take no more requests, serve what waits (at most `timeout_s`), then end."""
        with self._lock:
            self._stopping = True
            ring, self._asleep = self._asleep, False
        if ring:
            self._bell.release()
        self._thread.join(timeout_s)

    # -- the thread --------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                sleep = not self._waiting
                if sleep and (self._stopping or self.failure is not None):
                    return
                if sleep:
                    self._asleep = True
                elif len(self._waiting) <= self._max_batch:  # all of it, in two C calls
                    batch = list(self._waiting)
                    self._waiting.clear()
                else:
                    batch = [self._waiting.popleft() for _ in range(self._max_batch)]
            if sleep:
                self._bell.acquire()  # until `submit` or `stop` rings, once
                continue
            try:
                self._serve(batch)
            except Exception as exc:  # a fault of ours: whoever is still waiting hears it
                self._fail(batch, internal_error(exc))
            if self.failure is not None:
                self._refuse_waiting()
                return

    def _serve(self, batch: list[Work]) -> None:
        if len(batch) == 1 and batch[0].case.writes:  # a lone writer: one group
            self._commit(batch)
            return
        start = 0
        while start < len(batch):
            end = start
            while end < len(batch) and batch[end].case.writes:
                end += 1
            if end > start:
                self._commit(batch[start:end])
                if self.failure is not None:
                    self._fail(batch[end:], self.failure)
                    return
            if end < len(batch):
                self._deliver([(batch[end].ticket, self._read(batch[end]))])
                end += 1
            start = end

    def _commit(self, writers: list[Work]) -> None:
        ledger, answered = self.ledger, []
        started = time.perf_counter()
        try:
            with ledger.journal.group() as group:
                for work in writers:
                    answered.append((work.ticket, self._answer(work)))
                    if group.broken is not None:
                        raise group.broken
        except Error as exc:
            self._fail(writers, self._commit_error(exc))
            return
        except Exception as exc:  # a fold that raised: nothing of the group was written
            self._fail(writers, internal_error(exc))
            return
        self.last_commit_ok = True
        self._on_commit(len(writers), time.perf_counter() - started)
        self._deliver(answered)
        group.refresh_checkpoint()  # answered first: no client waits for a checkpoint

    def _commit_error(self, exc: Error) -> Error:
        """The answer of every request of a group that did not commit. A handle whose
        write or fdatasync failed is poisoned: the committer stops (exit 4)."""
        self.last_commit_ok = False
        if not self.ledger.journal.store.poisoned:
            return exc  # a lock timeout, a journal found corrupt: this group only
        self.failure = StorageFailure(
            f"the commit of this request's batch failed ({exc.message}); nothing of it was "
            "acknowledged and the server is stopping",
            code=codes.STORAGE_FAILURE,
        )
        return self.failure

    def _answer(self, work: Work) -> Outcome:
        try:
            if isinstance(work.case, Internal):
                return work.case.call(self.ledger)
            assert work.request is not None  # a client's use case comes with its request
            return self.ledger.answer(work.case.name, work.request)
        except Error as exc:
            return exc
        except Exception as exc:  # a fault of ours: this request fails, the server goes on
            return internal_error(exc)

    def _read(self, work: Work) -> Outcome:
        try:
            self.ledger.journal.refresh()  # what other writers appended (no lock)
        except Error as exc:
            return exc
        return self._answer(work)

    def _fail(self, works: list[Work], error: Error) -> None:
        if works:
            self._deliver([(work.ticket, error) for work in works])

    def _refuse_waiting(self) -> None:
        with self._lock:
            left = list(self._waiting)
            self._waiting.clear()
        assert self.failure is not None
        self._fail(left, self.failure)
