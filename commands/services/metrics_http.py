"""`metrics --listen HOST:PORT`: GET /metrics for a Prometheus scrape (SPEC §7).

The standard library's http.server, one request at a time: a scrape is one small
GET every few seconds, and the answer is the same exposition `metrics` prints,
rendered afresh (the journal folded anew) for each request. Imported only by the
listen path, so no other command pays for it at start-up.
"""

from __future__ import annotations

import re
import signal
import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import FrameType
from typing import Any

from quotaledger.journal import Error, InvalidInput, StorageFailure, codes

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


class _Stop(Exception):
    """SIGTERM: stop serving as Ctrl-C does."""


class _MetricsHandler(BaseHTTPRequestHandler):
    server: _MetricsServer

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, *, send_body: bool) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self._send(404, "text/plain; charset=utf-8", "only /metrics is served\n", send_body)
            return
        try:
            body = self.server.render()
        except Error as error:  # a corrupt or missing journal: say so, keep serving
            message = f"quotaledger: {error.message} [{error.code}]\n"
            self._send(500, "text/plain; charset=utf-8", message, send_body)
            return
        self._send(200, CONTENT_TYPE, body, send_body)

    def _send(self, status: int, content_type: str, text: str, send_body: bool) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if send_body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not news


class _MetricsServer(HTTPServer):
    def __init__(self, address: tuple[str, int], render: Callable[[], str]) -> None:
        self.render = render
        super().__init__(address, _MetricsHandler)


class _MetricsServerV6(_MetricsServer):
    address_family = socket.AF_INET6


def serve(
    host: str,
    port: int,
    render: Callable[[], str],
    on_ready: Callable[[str], None],
) -> None:
    """Serve GET /metrics with `render()` until SIGINT or SIGTERM; returns then."""
    server_class = _MetricsServerV6 if ":" in host else _MetricsServer
    try:
        server = server_class((host, port), render)
    except OSError as exc:
        raise StorageFailure(
            f"cannot listen on {host}:{port}: {exc.strerror}", code=codes.LISTEN_FAILED
        ) from exc

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        bound_host, bound_port = (str(part) for part in server.server_address[:2])
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        on_ready(f"http://{shown}:{bound_port}/metrics")
        server.serve_forever()
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
