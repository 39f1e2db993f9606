"""`metrics --listen HOST:PORT`: GET /metrics for a Prometheus scrape (SPEC §7).

The answer is the same exposition `metrics` prints, rendered afresh (the journal
folded anew) for each request, served by `quotaledger serve`'s HTTP machinery
(quotaledger.server.listening). Imported only by the listen path, so no other
command pays for it at start-up.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from quotaledger.journal import Error, InvalidInput, codes
from quotaledger.server import listening

DEFAULT_HOST = "127.0.0.1"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_ADDRESS = re.compile(r"(?:(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]*):)?([0-9]{1,5})")


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT` (host 127.0.0.1); `[::1]:PORT` for IPv6."""
    match = _ADDRESS.fullmatch(text.strip())
    port = int(match.group(2)) if match else -1
    if match is None or not 0 <= port <= 65535:
        raise InvalidInput(
            f"--listen {text!r} is not HOST:PORT (e.g. 127.0.0.1:9464, :9464; port 0-65535)",
            code=codes.INVALID_LISTEN_ADDRESS,
        )
    host = (match.group(1) or DEFAULT_HOST).strip("[]")
    return host, port


def serve(
    host: str,
    port: int,
    render: Callable[[], str],
    on_ready: Callable[[str], None],
) -> None:
    """Serve GET /metrics with `render()` until SIGINT or SIGTERM; returns then.

    The machinery of `quotaledger serve` (uvicorn, its limits): scrapes are answered
    concurrently, each rendered in a worker thread (`render` opens the journal anew),
    so an idle or slow connection holds up no other, and a reset is no traceback."""
    sock = listening.bind(host, port)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        status, content_type, text = 404, "text/plain; charset=utf-8", "only /metrics is served\n"
        if scope["method"] not in ("GET", "HEAD"):
            status, text = 405, "only GET and HEAD\n"
        elif scope["path"] == "/metrics":
            try:
                status, content_type, text = 200, CONTENT_TYPE, await asyncio.to_thread(render)
            except Error as error:  # a corrupt or missing journal: say so, keep serving
                status, text = 500, f"quotaledger: {error.message} [{error.code}]\n"
        data = text.encode()
        headers = [
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(data)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        body = b"" if scope["method"] == "HEAD" else data
        await send({"type": "http.response.body", "body": body})

    server = listening.Server(listening.config(app, keep_alive_s=5, drain_s=5))

    async def run() -> None:
        server.stop_on_signals()
        on_ready(listening.url_of(sock) + "/metrics")
        await server.serve(sockets=[sock])

    try:
        listening.run(run())
    finally:
        sock.close()
