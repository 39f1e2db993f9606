"""The HTTP API of `quotaledger serve` as an ASGI application (SPEC §11).

    POST /v1/COMMAND    a writer: the body is its keyword parameters as a JSON object
    GET  /v1/COMMAND    a reader: the parameters in the query string
    GET  /v1/log        JSON Lines; `follow=true` goes on as records commit
    GET  /metrics, /report?goal=G (or ?pool=P), /healthz, /readyz, /openapi.json

The body answered is exactly what `--json` prints; the status follows the exit code
(`render.outcome`), which every answer also carries as `Quotaledger-Exit-Code`.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from quotaledger.journal import codes
from quotaledger.journal.errors import Error, InvalidInput
from quotaledger.journal.limits import BODY_BYTES_MAX, FIRST_LINES_WAIT_S
from quotaledger.projections.limits import byte_size
from quotaledger.render.answers import log_printed, output_of
from quotaledger.render.outcome import (
    EXIT_OK,
    EXIT_STORAGE,
    status_of_exit,
)
from quotaledger.render.output import json_line, output_code, printed_text
from quotaledger.render.prometheus import prometheus_text
from quotaledger.server import routes
from quotaledger.server.committer import Committer, Internal, Work, internal_error
from quotaledger.server.direct import DirectCycle, plain_json_body
from quotaledger.server.followups import FollowUps
from quotaledger.server.queue_timers import QueueTimers
from quotaledger.server.readers import Printed, Readers
from quotaledger.server.replies import (
    JSON,
    Reply,
    Rewrite,
    answer_reply,
    error_reply,
    unchanged,
)
from quotaledger.server.telemetry import Telemetry
from quotaledger.server.waiters import Waiters
from quotaledger.services.capacity import CapacityService
from quotaledger.usecases.decode import Answer
from quotaledger.usecases.operator import MetricsRequest
from quotaledger.usecases.registry import SERVED, UseCase

Scope = dict[str, Any]
Headers = list[tuple[bytes, bytes]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_BODY_TOO_LARGE = f"the body is over {byte_size(BODY_BYTES_MAX)}"
DIRECT_CASES = {f"/v1/{name}".encode(): case for name, case in SERVED.items() if case.writes}
"""The writers a request may reach straight from the parser, by its exact URL."""
FOR_READERS = frozenset({"/readyz", "/metrics", "/report", "/openapi.json"})
ROUTE_LABELS = frozenset(routes.SERVED_NAMES) | FOR_READERS | {"/healthz"}
"""What `quotaledger_http_requests_total` may label a request with (SPEC §11): the
served commands and paths; any other path the client made up counts as "other"."""


class Tokens:
    """The bearer tokens a request may carry: none configured means no check."""

    def __init__(self, token: str | None, read_token: str | None) -> None:
        self.token = token.encode() if token else None
        self.read_token = read_token.encode() if read_token else None

    def access(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        """'write', 'read', or None (no valid token), compared in constant time."""
        if self.token is None:
            return "write"
        given = next((v for k, v in headers if k == b"authorization"), b"")
        scheme, _, value = given.partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        value = value.strip()
        if hmac.compare_digest(value, self.token):
            return "write"
        if self.read_token is not None and hmac.compare_digest(value, self.read_token):
            return "read"
        return None


class Api:
    """The ASGI application: routes, auth, limits and answers over one committer."""

    committer: Committer
    """Set once made: it delivers through this application (`deliver`)."""

    def __init__(
        self,
        readers: Readers,
        telemetry: Telemetry,
        tokens: Tokens,
        openapi: Callable[[], bytes],
    ) -> None:
        self.readers = readers
        self.telemetry = telemetry
        self.tokens = tokens
        self._openapi = openapi
        self._openapi_body: bytes | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.follow_ups = FollowUps("", "")
        """Set once the server knows its journal and address (`run`)."""
        self._handing: list[Work] = []
        """Requests for the committer taken in this turn of the event loop."""
        self.waiters = Waiters()
        """The admits held while their runs wait in a queue."""
        self.timers = QueueTimers(self._promote)
        """A timer per queue served, at its earliest estimate (SPEC §12.2)."""

    def deliver(self, outcomes: list[tuple[Any, Any]]) -> None:
        """From the committer's thread: hand each waiting request its outcome."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(_resolve, outcomes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        command = path[4:] if path.startswith("/v1/") else path
        cli: routes.CliCall | None = None
        try:
            cli = routes.cli_call(scope["headers"])
            status = await self._route(scope, receive, send, path, method, cli)
        except Error as error:
            status = await _error(send, error, method, cli)
        except Exception as exc:  # a fault of ours: a JSON 500 with its exit code
            status = await _error(send, internal_error(exc), method, cli)
        self.telemetry.request(command, status)

    async def _route(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        path: str,
        method: str,
        cli: routes.CliCall | None,
    ) -> int:
        if path == "/healthz":
            if method not in ("GET", "HEAD"):
                raise routes.RouteError(
                    405, f"{path} is called with GET, not {method}", code=codes.METHOD_NOT_ALLOWED
                )
            return await _send(send, Reply(200, b'{"ok":true}\n', 0), head=method == "HEAD")
        access = self.tokens.access(scope["headers"])
        if access is None:
            raise routes.RouteError(
                401, "a valid bearer token is required", code=codes.UNAUTHORIZED
            )
        if path.startswith("/v1/"):
            case = routes.use_case_of(path, method)
            if case.writes and access != "write":
                raise routes.RouteError(
                    403, "the read-only token may not call a writer", code=codes.FORBIDDEN
                )
            if case.writes:
                routes.refuse_query(case, scope["query_string"])
            body = await _body(scope, receive) if case.writes else b""
            if cli is not None:
                request = routes.request_of_cli(case, body, scope["query_string"])
            elif case.writes:
                request = routes.request_of_body(case, body)
            else:
                request = routes.request_of_query(case, scope["query_string"])
            return await self._use_case(send, receive, case, request, method, cli, scope)
        return await self._plain(scope, send, path, method)

    def _client_target(self, headers: Headers, cli: routes.CliCall | None) -> str:
        """The journal as this request's client reaches it (`FollowUps`)."""
        host = next((v for k, v in headers if k == b"host"), None)
        return self.follow_ups.client_target(host, cli.shown.journal_target if cli else None)

    async def _plain(self, scope: Scope, send: Send, path: str, method: str) -> int:
        """The routes outside /v1: readiness, the OpenAPI document, metrics, the report."""
        if path not in FOR_READERS:
            raise routes.RouteError(404, f"{path} is not served", code=codes.UNKNOWN_COMMAND)
        if method not in ("GET", "HEAD"):
            raise routes.RouteError(
                405, f"{path} is called with GET, not {method}", code=codes.METHOD_NOT_ALLOWED
            )
        if path == "/readyz":
            ready = self.committer.accepting and self.committer.last_commit_ok
            body = b'{"ok":true}\n' if ready else b'{"ok":false}\n'
            exit_code = EXIT_OK if ready else EXIT_STORAGE
            return await _send(send, Reply(status_of_exit(exit_code), body, exit_code))
        if path == "/openapi.json":
            if self._openapi_body is None:
                self._openapi_body = self._openapi()
            return await _send(send, Reply(200, self._openapi_body, 0))
        if path == "/metrics":
            return await self._metrics(send)
        page = await self.readers.report(routes.report_request(scope["query_string"]))
        page = self.follow_ups.rewrite(page, self._client_target(scope["headers"], None), "html")
        return await _send(send, Reply(200, page, 0, b"text/html; charset=utf-8"))

    async def _use_case(
        self,
        send: Send,
        receive: Receive,
        case: UseCase,
        request: Any,
        method: str,
        cli: routes.CliCall | None = None,
        scope: Scope | None = None,
    ) -> int:
        if case.name == "log":
            return await self._log(send, receive, request, cli)
        if case.whole_journal:
            outcome = await self.readers.answer(case.name, request)
        elif case.name == "admit" and request.wait_s is not None:
            outcome = await self._held(case, request, receive)
        else:
            outcome = await self._commit(case, request)
        if isinstance(outcome, Error):
            return await _error(send, outcome, method, cli)
        if cli is not None:
            rewrite = self._rewrite(scope["headers"] if scope else None, cli)
            return await _printed(send, case, request, outcome, cli, rewrite)
        rewrite = self._rewrite(scope["headers"] if scope else None, cli)
        return await _answer(send, outcome, method, rewrite)

    def _rewrite(self, headers: Headers | None, cli: routes.CliCall | None) -> Rewrite:
        """The answer's follow-up words for this request's client, whose target is
        found only for an answer that names a command (most name none)."""
        follow_ups = self.follow_ups

        def rewrite(body: bytes, kind: str) -> bytes:
            if not follow_ups.names_journal(body):
                return body
            client = self._client_target(headers, cli) if headers is not None else ""
            return follow_ups.rewrite(body, client, kind)

        return rewrite

    async def _commit(self, case: UseCase, request: Any) -> Any:
        """The request's outcome once the committer has served it (and it is durable).
        The requests of one turn of the event loop go to the committer together, in
        the order they came (`_hand_over`, run once at the end of the turn)."""
        assert self.loop is not None
        ticket = self.loop.create_future()
        self._queue(Work(case, request, ticket))
        outcome = await ticket
        self._settled(outcome)
        return outcome

    def _queue(self, work: Work) -> None:
        """Queue `work` for the committer with the rest of this turn's requests."""
        self._handing.append(work)
        if len(self._handing) == 1:
            assert self.loop is not None
            self.loop.call_soon(self._hand_over)

    def _settled(self, outcome: Any) -> None:
        """What a writer's outcome means to the requests held in queues: the waiters
        it promoted answer, and its queue's timer moves to its estimate."""
        self.waiters.wake(getattr(outcome, "promoted", None))
        self.timers.note(outcome)

    def direct_case(self, method: bytes, url: bytes, headers: Headers) -> UseCase | None:
        """The writer a request goes to straight from the parser (`direct`), or None
        for the ASGI path: a plain JSON `POST /v1/WRITER` with the write token."""
        if method != b"POST":
            return None
        case = DIRECT_CASES.get(url)
        if case is None or not plain_json_body(headers, routes.CLI_HEADER):
            return None
        return case if self.tokens.access(headers) == "write" else None

    def direct(self, cycle: DirectCycle) -> bool:
        """Serve a request taken straight from the parser, its whole body in: decoded,
        queued for the committer with this turn's requests, answered once its outcome
        is back. False for an admit that waits in the queue (found only now): the
        ASGI path holds it."""
        case = cycle.case
        try:
            request = routes.request_of_body(case, bytes(cycle.body))
        except Error as error:
            self._refuse_direct(cycle, error)
            return True
        except Exception as exc:  # a fault of ours, as the ASGI path answers it
            self._refuse_direct(cycle, internal_error(exc))
            return True
        if getattr(request, "wait_s", None) is not None:  # an admit that may wait
            return False
        cycle.on_outcome = self._direct_outcome
        self._queue(Work(case, request, cycle))
        return True

    def _refuse_direct(self, cycle: DirectCycle, error: Error) -> None:
        """Answer a request refused as it is decoded, once the parser is done with the
        bytes at hand: answered from inside the parser, the connection would arm its
        keep-alive timer before reading a request pipelined behind (which then could
        be closed under it), where uvicorn answers only from outside the parser."""
        assert self.loop is not None
        self.loop.call_soon(self._direct_reply, cycle, error_reply(error))

    def _direct_outcome(self, cycle: DirectCycle, outcome: Any) -> None:
        try:
            self._settled(outcome)
            if isinstance(outcome, Error):
                reply = error_reply(outcome)
            else:
                reply = answer_reply(outcome, self._rewrite(cycle.headers, None))
        except Exception as exc:  # a fault of ours: a JSON 500, never a hung client
            reply = error_reply(internal_error(exc))
        self._direct_reply(cycle, reply)

    def _direct_reply(self, cycle: DirectCycle, reply: Reply) -> None:
        cycle.send(reply)
        self.telemetry.request(cycle.case.name, reply.status)

    async def _promote(self, queue: str) -> Any:
        """A queue's timer: promote the queue (a goal's or a pool's name) in a write of
        the server's own, and answer the waiters it admits."""
        assert self.loop is not None
        ticket = self.loop.create_future()
        promotion = Internal("promote", lambda ledger: _promote_queue(ledger, queue))
        self._queue(Work(promotion, None, ticket))
        outcome = await ticket
        admitted = getattr(outcome, "admitted", None)
        if admitted:
            self.waiters.answer(admitted)
        return outcome

    def watch_queues(self, queues: Iterable[str]) -> None:
        """At start: look at once at the queues where entries wait (nobody polls them
        after a restart)."""
        for queue in queues:
            self.timers.now(queue)

    async def _held(self, case: UseCase, request: Any, receive: Receive) -> Any:
        """An admit that waits in the queue (SPEC §12.2), held until admitted, refused,
        its wait over or its client gone."""
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(_disconnected(receive, gone.set))
        try:
            return await self.waiters.hold(request, lambda once: self._commit(case, once), gone)
        finally:
            watcher.cancel()

    def _hand_over(self) -> None:
        works, self._handing = self._handing, []
        try:
            self.committer.submit(works)
        except Error as refused:  # shutting down: each request answers so
            _resolve([(work.ticket, refused) for work in works])

    async def _metrics(self, send: Send) -> int:
        outcome = await self._commit(routes.SERVED_METRICS, MetricsRequest())
        if isinstance(outcome, Error):
            raise outcome
        body = prometheus_text(outcome).encode() + self.telemetry.exposition()
        return await _send(send, Reply(200, body, 0, b"text/plain; version=0.0.4; charset=utf-8"))

    async def _log(
        self, send: Send, receive: Receive, request: Any, cli: routes.CliCall | None
    ) -> int:
        if cli is None:
            stream = self.readers.log(request)
            content_type = b"application/jsonl"
        else:  # what the local command prints, piece by piece (render/answers.py)
            stream = self.readers.log(request, _cli_log(cli.as_json))
            content_type = b"application/jsonl" if cli.as_json else b"text/plain; charset=utf-8"
        try:
            first = await asyncio.wait_for(stream.next(), FIRST_LINES_WAIT_S)
        except TimeoutError:
            first = b""  # a follower of a quiet journal: the headers go now
        if isinstance(first, Error):
            stream.close()
            raise first
        watcher = asyncio.ensure_future(_disconnected(receive, stream.close))
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", content_type),
                    (b"quotaledger-exit-code", b"0"),
                ],
            }
        )
        try:
            chunk: bytes | Error | None = first
            while chunk is not None:
                if isinstance(chunk, Error):
                    break  # mid-stream (corruption found later): the stream ends there
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                chunk = await stream.next()
            await send({"type": "http.response.body", "body": b""})
        finally:
            stream.close()
            watcher.cancel()
        return 200


def _promote_queue(ledger: Any, queue: str) -> Any:
    return CapacityService(ledger.journal).promote_queue(queue)


def _cli_log(as_json: bool) -> Printed:
    def printed(events: Iterable[Any], request: Any) -> Iterator[bytes]:
        return log_printed(events, as_json=as_json, follow=request.follow)

    return printed


async def _disconnected(receive: Receive, then: Callable[[], None]) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    then()


def _resolve(outcomes: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for future, outcome in outcomes:
        if not future.done():  # a client that went away: nothing to tell it
            future.set_result(outcome)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _body(scope: Scope, receive: Receive) -> bytes:
    """The request's body, at most 1 MiB, which must be JSON."""
    # One dict of the headers (made in C) rather than a Python loop over them: the
    # last of a repeated header wins, as it did in the loop; a Content-Length given
    # twice never gets here (the parser refuses it: `protocol`).
    headers = dict(scope["headers"])
    content_type = headers.get(b"content-type", b"")
    given = headers.get(b"content-length")
    length = int(given) if given is not None and given.isdigit() else -1
    if length > BODY_BYTES_MAX:
        raise routes.RouteError(413, _BODY_TOO_LARGE, code=codes.BODY_TOO_LARGE)
    if content_type != JSON and content_type.split(b";", 1)[0].strip().lower() != JSON:
        raise routes.RouteError(415, "the body must be application/json", code=codes.NOT_JSON)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise InvalidInput("the client went away", code=codes.INVALID_BODY)
        body: bytes = message.get("body", b"")
        size += len(body)
        if size > BODY_BYTES_MAX:
            raise routes.RouteError(413, _BODY_TOO_LARGE, code=codes.BODY_TOO_LARGE)
        chunks.append(body)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _printed(
    send: Send,
    case: UseCase,
    request: Any,
    answer: Answer,
    cli: routes.CliCall,
    rewrite: Rewrite = unchanged,
) -> int:
    """A CLI client's answer: what the local command prints, with its exit code."""
    output = output_of(case.name, request, answer, cli.shown)
    exit_code = output_code(output)
    body = json_line(output.data) if cli.as_json else printed_text(output).encode()
    body = rewrite(body, "json" if cli.as_json else "text")
    content_type = JSON if cli.as_json else b"text/plain; charset=utf-8"
    return await _send(send, Reply(status_of_exit(exit_code), body, exit_code, content_type))


async def _error(
    send: Send, error: Error, method: str = "GET", cli: routes.CliCall | None = None
) -> int:
    return await _send(send, error_reply(error, cli), head=method == "HEAD")


async def _answer(send: Send, answer: Answer, method: str, rewrite: Rewrite) -> int:
    return await _send(send, answer_reply(answer, rewrite), head=method == "HEAD")


async def _send(send: Send, reply: Reply, *, head: bool = False) -> int:
    """One answer as an ASGI response: its head, then its body (none for a HEAD)."""
    start = {"type": "http.response.start", "status": reply.status, "headers": reply.headers()}
    await send(start)
    await send({"type": "http.response.body", "body": b"" if head else reply.body})
    return reply.status
