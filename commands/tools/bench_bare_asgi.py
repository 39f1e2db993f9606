"""`bench --serve`'s bare ASGI baseline: the server's HTTP stack with no application.

The same uvicorn, httptools parser (our protocol, with its one write per answer),
uvloop event loop and limits as `quotaledger serve` (`server/listening.py`), running a
bare ASGI application that reads each request's body and answers a fixed small JSON
body with the headers the server sends. Its CPU per event is what the HTTP stack and
its ASGI cycle cost alone; the skeleton's over it is what the application's own
request path adds (routing, decoding, the hand-off to the committer thread and back,
the answer, the disk's calls), less the ASGI cycle the server's per-event writers skip
(`server/direct.py`). Issue 42 holds it to at most 1.25x at 12 and 32 clients.

It is an internal entry point, run only by the bench
(`python -m quotaledger.tools.bench_bare_asgi HOST:PORT`): no command, option or
environment variable reaches it.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from quotaledger.journal.limits import DRAIN_S, KEEP_ALIVE_S
from quotaledger.server import listening

BODY = b'{"ok":true,"command":"observe","line":1}\n'
"""About the size of the skeleton's answer."""
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(BODY)).encode()),
        (b"quotaledger-exit-code", b"0"),
    ],
}
END = {"type": "http.response.body", "body": BODY}


async def app(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body", False):
        pass
    await send(START)
    await send(END)


async def _serve(host: str, port: int) -> int:
    server = listening.Server(listening.config(app, keep_alive_s=KEEP_ALIVE_S, drain_s=DRAIN_S))
    sock = listening.bind(host, port)
    server.stop_on_signals()
    await server.serve(sockets=[sock])
    return 0


def main(argv: list[str]) -> int:
    (listen,) = argv
    host, _, port = listen.rpartition(":")
    return listening.run(_serve(host, int(port)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
