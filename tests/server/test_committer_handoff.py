"""The committer's hand-off (a lock and a one-ring bell, not a Condition): every
request queued is served once, in order, however the queueing races the thread's
sleep; `stop` serves what waits and ends the thread; a stopped committer refuses."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from quotaledger.journal.errors import StorageFailure
from quotaledger.server.committer import Committer, Internal, Work


class _Group:
    broken = None

    def refresh_checkpoint(self) -> None:
        pass


class _Journal:
    class store:  # the attribute the committer reads
        poisoned = False

    @contextmanager
    def group(self) -> Iterator[_Group]:
        yield _Group()


class _Ledger:
    journal = _Journal()


def _committer(served: list[Any], max_batch: int = 4) -> Committer:
    def deliver(outcomes: list[tuple[Any, Any]]) -> None:
        served.extend(ticket for ticket, _ in outcomes)

    return Committer(_Ledger(), deliver, max_batch=max_batch)  # type: ignore[arg-type]


def _works(tickets: range) -> list[Work]:
    return [Work(Internal("test", lambda ledger: None), None, ticket) for ticket in tickets]


def _wait_for(served: list[Any], count: int) -> None:
    deadline = time.monotonic() + 60
    while len(served) < count and time.monotonic() < deadline:
        time.sleep(0.001)


def test_every_request_is_served_once_in_order_across_sleeps_and_wake_ups() -> None:
    served: list[Any] = []
    committer = _committer(served)
    committer.start()
    sent = 0
    for round_ in range(300):
        size = 1 + round_ % 7  # groups over and under max_batch
        committer.submit(_works(range(sent, sent + size)))
        sent += size
        if round_ % 3 == 0:  # sometimes the thread has gone to sleep by the next
            _wait_for(served, sent)
    _wait_for(served, sent)
    committer.stop(60)
    assert served == list(range(sent))


def test_requests_queued_from_many_threads_are_all_served() -> None:
    served: list[Any] = []
    committer = _committer(served, max_batch=3)
    committer.start()

    def send(base: int) -> None:
        for i in range(200):
            committer.submit(_works(range(base + i * 2, base + i * 2 + 2)))

    threads = [threading.Thread(target=send, args=(k * 1000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _wait_for(served, 1600)
    committer.stop(60)
    assert sorted(served) == sorted(k * 1000 + j for k in range(4) for j in range(400))


def test_stop_serves_what_waits_and_then_refuses() -> None:
    served: list[Any] = []
    committer = _committer(served)
    committer.submit(_works(range(10)))  # queued before the thread starts
    committer.start()
    committer.stop(60)
    assert served == list(range(10))
    assert not committer._thread.is_alive()
    with pytest.raises(StorageFailure):
        committer.submit(_works(range(10, 11)))


def test_stop_wakes_a_sleeping_thread() -> None:
    committer = _committer([])
    committer.start()
    time.sleep(0.05)  # asleep by now, with nothing queued
    committer.stop(60)
    assert not committer._thread.is_alive()
