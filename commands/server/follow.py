"""`GET /v1/log?follow=true`: JSON Lines, then each commit's records as they commit
(flushed per commit) until the client disconnects.

The records are read by a read-only ledger of the follower's own in a thread of its
own (the readers' rules, never the commit thread's state); it wakes at every commit
of this server and at least every `POLL_S` for what other writers append.
"""

import asyncio
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from quotaledger.api import Ledger
from quotaledger.journal.errors import Error
from quotaledger.server.answers import EXIT_HEADER, JSON_LINES, of_error, send_whole

if TYPE_CHECKING:
    from quotaledger.server.app import Receive, Send, Server

POLL_S = 0.5


class _Gone(Exception):
    """The client went away: the reading thread stops."""


async def follow_log(
    server: "Server", values: Mapping[str, Any], receive: "Receive", send: "Send"
) -> None:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    woken = threading.Event()
    gone = threading.Event()
    server.committer.commits.append(woken.set)

    def wait() -> None:
        woken.wait(POLL_S)
        woken.clear()
        if gone.is_set():
            raise _Gone

    try:  # errors (no journal yet, an unknown goal) answer before the stream starts
        ledger = await asyncio.to_thread(Ledger.open, server.target, write=False)
        found = await asyncio.to_thread(ledger.log, **values, follow=True, wait=wait)
    except Error as error:
        server.committer.commits.remove(woken.set)
        await send_whole(send, of_error(error))
        return

    def read() -> None:
        try:
            for record in found:
                line = msgspec.json.encode(record, enc_hook=str) + b"\n"
                loop.call_soon_threadsafe(lines.put_nowait, line)
        except (_Gone, Error):  # an Error after the head: the stream just ends
            pass
        finally:
            ledger.close()
            loop.call_soon_threadsafe(lines.put_nowait, None)

    headers = [(b"content-type", JSON_LINES), (EXIT_HEADER, b"0")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    reader = loop.run_in_executor(None, read)
    disconnected = asyncio.ensure_future(_disconnect(receive))
    try:
        while not disconnected.done():
            line = await lines.get()
            if line is None:
                break
            batch = [line, *_drained(lines)]
            await send({"type": "http.response.body", "body": b"".join(batch), "more_body": True})
    finally:
        gone.set()
        woken.set()
        server.committer.commits.remove(woken.set)
        disconnected.cancel()
        await reader
    if not disconnected.cancelled():
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _drained(lines: "asyncio.Queue[bytes | None]") -> list[bytes]:
    """What else is already queued (one commit's records in one chunk)."""
    more: list[bytes] = []
    while not lines.empty():
        line = lines.get_nowait()
        if line is None:
            lines.put_nowait(None)
            break
        more.append(line)
    return more


async def _disconnect(receive: "Receive") -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
