"""The ASGI app: routes, auth, limits on the body, and the answers (SPEC §11).

A bare ASGI callable (no framework): the routes are the registry's, the parsing is
the HTTP server's (granian), and a framework would add an import and a layer per
request for nothing the server uses.
"""

import asyncio
import tempfile
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from quotaledger.journal.errors import Error, StorageFailure
from quotaledger.server import answers
from quotaledger.server.answers import Reply, refusal, send_whole
from quotaledger.server.auth import Access, Tokens
from quotaledger.server.committer import Committer
from quotaledger.server.follow import follow_log
from quotaledger.server.openapi import document
from quotaledger.server.routes import Route, body_values, query_values, route_of, routes
from quotaledger.server.telemetry import Telemetry
from quotaledger.services.operator import prometheus_text
from quotaledger.usecases.operator import MetricsAnswer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MAX_BODY_BYTES = 1024 * 1024
"""SPEC §11: a body over 1 MiB is 413 (read no further)."""
METRICS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


class Server:
    """What the app answers from: the commit loop, the tokens, the journal's target."""

    def __init__(self, committer: Committer, tokens: Tokens, target: str) -> None:
        self.committer = committer
        self.tokens = tokens
        self.target = target
        self.telemetry: Telemetry = committer.telemetry
        self.routes: dict[str, Route] = routes()
        self.report_route = route_of("report")
        self.stopping = False

    @property
    def ready(self) -> bool:
        return not (self.stopping or self.committer.failed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        command = path.removeprefix("/v1/") if path.startswith("/v1/") else path
        if command == "log" and _wants_follow(scope):
            await self._follow(scope, receive, send)
            return
        reply = await self._answer(scope, receive, path)
        self.telemetry.requests.labels(command, str(reply.status)).inc()
        await send_whole(send, reply)

    async def _answer(self, scope: Scope, receive: Receive, path: str) -> Reply:
        if path == "/healthz":
            return Reply(200, 0, b'{"ok":true}')
        access = self.tokens.access(_header(scope, b"authorization"))
        if access is Access.NONE:
            return refusal(401, "unauthorized", "a valid bearer token is required")
        method = scope["method"]
        if path.startswith("/v1/"):
            return await self._use_case(scope, receive, path[4:], access)
        if method not in ("GET", "HEAD"):
            known = path in ("/readyz", "/metrics", "/report", "/openapi.json")
            if known:
                return refusal(405, "method_not_allowed", f"{path} answers GET only")
            return refusal(404, "not_found", f"no such path: {path}")
        try:
            return await self._page(scope, path)
        except Error as error:
            return answers.of_error(error)

    async def _page(self, scope: Scope, path: str) -> Reply:
        if path == "/readyz":
            if self.ready:
                return Reply(200, 0, b'{"ok":true}')
            return answers.of_error(StorageFailure("the server is not ready (stopping or failed)"))
        if path == "/openapi.json":
            return Reply(200, 0, document(self.routes))
        if path == "/metrics":
            return await self._metrics()
        if path == "/report":
            return await self._report(scope)
        return refusal(404, "not_found", f"no such path: {path}")

    async def _use_case(self, scope: Scope, receive: Receive, name: str, access: Access) -> Reply:
        route = self.routes.get(name)
        if route is None:
            return refusal(404, "unknown_command", f"the server does not serve {name!r}")
        method = scope["method"]
        wanted = "POST" if route.writes else "GET"
        if method != wanted and not (wanted == "GET" and method == "HEAD"):
            return refusal(405, "method_not_allowed", f"{name} is called with {wanted}")
        if route.writes and access is not Access.WRITE:
            return refusal(403, "forbidden", f"{name} appends: the read-only token may not")
        if not self.ready:
            return answers.of_error(StorageFailure("the server is shutting down"))
        try:
            if route.writes:
                values = await _body(scope, receive)
                if isinstance(values, Reply):
                    return values
            else:
                values = query_values(route, parse_qsl(scope["query_string"].decode()))
            route.check(values)
        except Error as error:
            return answers.of_error(error)
        return answers.of_outcome(await self.committer.run(route, values))

    async def _metrics(self) -> Reply:
        outcome = await self.committer.run(self.routes["metrics"], {})
        if not isinstance(outcome, dict):
            return answers.of_outcome(outcome)
        text = prometheus_text(msgspec.convert(outcome, MetricsAnswer)).encode()
        return Reply(200, 0, text + self.telemetry.exposition(), METRICS_TYPE)

    async def _report(self, scope: Scope) -> Reply:
        report = self.report_route
        values = query_values(report, parse_qsl(scope["query_string"].decode()))
        with tempfile.TemporaryDirectory(prefix="quotaledger-report-") as folder:
            out = Path(folder) / "report.html"
            outcome = await self.committer.run(report, {**values, "out": str(out)})
            if not isinstance(outcome, dict) or not outcome.get("ok"):
                return answers.of_outcome(outcome)
            page = await asyncio.to_thread(out.read_bytes)
        return Reply(200, 0, page, b"text/html; charset=utf-8")

    async def _follow(self, scope: Scope, receive: Receive, send: Send) -> None:
        access = self.tokens.access(_header(scope, b"authorization"))
        route = self.routes["log"]
        try:
            if access is Access.NONE:
                raise PermissionError
            values = query_values(route, parse_qsl(scope["query_string"].decode()))
            values.pop("follow", None)
            route.check(values)
        except PermissionError:
            reply = refusal(401, "unauthorized", "a valid bearer token is required")
            await send_whole(send, reply)
            return
        except Error as error:
            await send_whole(send, answers.of_error(error))
            return
        await follow_log(self, values, receive, send)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _wants_follow(scope: Scope) -> bool:
    return ("follow", "true") in parse_qsl(scope["query_string"].decode())


async def _body(scope: Scope, receive: Receive) -> dict[str, Any] | Reply:
    """A writer's JSON body, or the refusal of it (415 not JSON, 413 too large)."""
    content_type = (_header(scope, b"content-type") or b"application/json").split(b";")[0]
    if content_type.strip().lower() != b"application/json":
        return refusal(415, "unsupported_media_type", "the body must be application/json")
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return refusal(413, "body_too_large", "the body is over 1 MiB")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return refusal(413, "body_too_large", "the body is over 1 MiB")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return body_values(b"".join(chunks))


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
