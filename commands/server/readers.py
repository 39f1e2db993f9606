"""Readers whose work is a pass over the journal (audit, what-if, the log, the report):
each on a reader handle of its own, in a worker thread, beside the commits.

A fresh handle reads what is durable in the journal now (its open makes the bytes it
read durable before it answers, as every reader does), so such a reader never answers
from a state older than the journal it was asked about, and never holds up a commit.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from quotaledger.api import Ledger
from quotaledger.journal.errors import Error
from quotaledger.journal.limits import FOLLOW_LOOK_S, LOG_CHUNK_BYTES, LOG_CHUNKS_AHEAD
from quotaledger.services.journal import JournalService
from quotaledger.services.operator import OperatorService


class Commits:
    """Wakes log followers when the server commits (other writers: every look)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._waiting = 0
        """Followers inside `wait`: counted under the condition, read without it."""

    def notify(self) -> None:
        # Per commit: with no follower waiting (nearly always) nothing to take or wake.
        # A follower that starts waiting just after this look missed this commit as
        # it would have missed a notify made just before its wait: it looks again
        # within its timeout.
        if not self._waiting:
            return
        with self._changed:
            self._changed.notify_all()

    def wait(self, timeout_s: float) -> None:
        with self._changed:
            self._waiting += 1
            try:
                self._changed.wait(timeout_s)
            finally:
                self._waiting -= 1


Printed = Callable[[Iterable[Any], Any], Iterator[bytes]]
"""The log's events (and its request) as the bytes to send, piece by piece."""


def json_lines(answers: Iterable[Any], request: Any) -> Iterator[bytes]:
    """The log's answer to any client but the CLI: one JSON object per line."""
    encode = msgspec.json.encode
    for answer in answers:
        yield encode(answer) + b"\n"


class Readers:
    def __init__(self, target: str, commits: Commits, lock_timeout_s: float) -> None:
        self.target = target
        self.commits = commits
        self.lock_timeout_s = lock_timeout_s
        self.followers: set[LogStream] = set()
        """The streams of `log --follow` being sent, which never end by themselves."""

    async def answer(self, name: str, request: Any) -> Any:
        return await asyncio.to_thread(self._answer, name, request)

    def _answer(self, name: str, request: Any) -> Any:
        try:
            with Ledger.open(
                self.target, write=False, lock_timeout_s=self.lock_timeout_s
            ) as ledger:
                return ledger.answer(name, request)
        except Error as exc:
            return exc

    async def report(self, request: Any) -> bytes:
        page: bytes = await asyncio.to_thread(self._report, request)
        return page

    def _report(self, request: Any) -> bytes:
        with OperatorService.open_unfolded(
            self.target, lock_timeout_s=self.lock_timeout_s
        ) as service:
            if request.pool is not None:
                page, _ = service.pool_report_page(request.pool, request.since, request.until)
                return page
            page, _ = service.report_page(request.goal, request.since, request.until)
        return page

    def log(self, request: Any, printed: Printed = json_lines) -> LogStream:
        """The log's answer as a stream of chunks: JSON Lines, or what `printed` makes
        of the events (a CLI client's: what the local command prints)."""
        stream = LogStream(asyncio.get_running_loop(), self.followers.discard)
        if request.follow:
            self.followers.add(stream)
        stream.start(lambda stop: self._log(request, printed, stream, stop))
        return stream

    def stop_following(self) -> None:
        """The server stops: each follower's stream ends now. A follower waits for no
        commit, so there is nothing of it to drain (a log without --follow, an
        answer like any other, is sent to its end)."""
        for stream in list(self.followers):
            stream.close()
        self.commits.notify()

    def _log(
        self, request: Any, printed: Printed, stream: LogStream, stop: threading.Event
    ) -> None:
        def wait() -> None:
            if stop.is_set():
                raise _Stopped
            self.commits.wait(FOLLOW_LOOK_S)
            if stop.is_set():
                raise _Stopped

        with JournalService.open(self.target, write=False) as service:
            answers = service.log(request, wait)
            chunk = bytearray()
            for piece in printed(answers, request):
                chunk += piece
                if len(chunk) >= LOG_CHUNK_BYTES or request.follow:
                    stream.put(bytes(chunk))
                    chunk.clear()
            if chunk:
                stream.put(bytes(chunk))


class _Stopped(Exception):
    """The client went away: the follower stops."""


class LogStream:
    """Chunks of JSON Lines handed from a reader thread to the event loop: bytes, then
    None at the end, or the Error that ended it."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, closed: Callable[[LogStream], None]
    ) -> None:
        self._loop = loop
        self._closed = closed
        self._queue: asyncio.Queue[bytes | Error | None] = asyncio.Queue()
        self._room = threading.Semaphore(LOG_CHUNKS_AHEAD)
        self._stop = threading.Event()

    def start(self, produce: Callable[[threading.Event], None]) -> None:
        def run() -> None:
            end: Error | None = None
            try:
                produce(self._stop)
            except _Stopped:
                pass
            except Error as exc:
                end = exc
            finally:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, end)

        threading.Thread(target=run, name="quotaledger-log", daemon=True).start()

    def put(self, chunk: bytes) -> None:
        while not self._room.acquire(timeout=FOLLOW_LOOK_S):
            if self._stop.is_set():
                raise _Stopped
        if self._stop.is_set():
            raise _Stopped
        self._loop.call_soon_threadsafe(self._queue.put_nowait, chunk)

    async def next(self) -> bytes | Error | None:
        item = await self._queue.get()
        if isinstance(item, bytes):
            self._room.release()
        return item

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._room.release()
        self._closed(self)
