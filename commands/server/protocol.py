"""The HTTP/1.1 protocol of the server library (uvicorn's, over httptools' parser)
with the limits SPEC §11 sets, which it does not set itself:

- a request head (its line and headers together) over 16 KiB: 431, connection closed;
- a request the parser refuses (a malformed line, method or header, a bad or
  duplicated Content-Length, a TLS hello on a plain port): the JSON error
  `invalid_request` (400, exit code 2), connection closed, as every HTTP-level refusal
  answers (uvicorn's own is a text/plain 400 without an exit code);
- a connection that has not completed its request within 60 s of its first byte (or
  of connecting): closed, without disturbing any other (slowloris);

and one write per answer: uvicorn writes a response's head as soon as the application
starts it and its body with the next message, two socket writes where one does (a
fifth of the event loop's time per request went to the second). Each request's cycle
gets a view of the connection (`HeadWithBody`) that holds the head until the body's
first write (or the response's end, or a close), so uvicorn still builds and checks
the head, owns keep-alive and chunked streaming, and the bytes sent are the same.

Body size (413) is the application's: it knows which bodies it reads.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, NoReturn

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from quotaledger.journal import codes
from quotaledger.journal.limits import HEAD_BYTES_MAX, REQUEST_S_MAX
from quotaledger.projections.limits import byte_size
from quotaledger.render.outcome import error_body
from quotaledger.server.direct import DirectCycle


def _error_line(code: str, message: str) -> bytes:
    """The JSON error object of an HTTP-level refusal, one line (SPEC §11)."""
    return (
        json.dumps(error_body({"code": code, "message": message}), separators=(",", ":")).encode()
        + b"\n"
    )


_HEAD_TOO_LARGE = _error_line(
    codes.HEAD_TOO_LARGE, f"the request line and headers are over {byte_size(HEAD_BYTES_MAX)}"
)
_NOT_HTTP = _error_line(
    codes.INVALID_REQUEST,
    "the request is not HTTP/1.1 (a malformed request line, method or header, or a bad "
    "Content-Length)",
)


class _HeadTooLarge(Exception):
    """Stops the parser: the 431 has been sent."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a head size limit and a request deadline."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        """The head's bytes so far: its URL and headers as parsed, or while the head
        is incomplete every byte received (a header the parser still buffers)."""
        self._in_head = False
        """A message has begun and its head has not ended."""
        self._raw_head_bytes = 0
        """Every byte received while a head is incomplete (the parser buffers a header
        until it ends): the bound on what a slow or huge head can make us hold."""
        self._refused = False
        self._deadline: asyncio.TimerHandle | None = None
        self._direct_case = getattr(self.app, "direct_case", None)
        """The application's choice of requests it takes straight from the parser
        (`server.direct`); None: every request is an ASGI cycle (the bare bench app)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._deadline is None:
            self._arm()  # the first byte of a request on a kept-alive connection
        super().data_received(data)
        if self._in_head and not self._refused:
            # Still in a head after all of this: it is all head (the parser buffers a
            # header until it ends, so the callbacks have not counted it yet).
            self._raw_head_bytes += len(data)
            if self._raw_head_bytes > HEAD_BYTES_MAX:
                self._refuse_head()

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # else the parser stopped on our own 431
            self._refuse(b"400 Bad Request", _NOT_HTTP)

    def on_message_begin(self) -> None:
        self._in_head, self._head_bytes, self._raw_head_bytes = True, 0, 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._head_bytes += len(url) + 16  # the method and version around it
        if self._head_bytes > HEAD_BYTES_MAX:
            self._head_too_large()
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        # Counted here, not through a helper: this runs per header of every request.
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > HEAD_BYTES_MAX:
            self._head_too_large()
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head, self._raw_head_bytes = False, 0
        direct = self._direct_cycle()
        if direct is not None:
            self.cycle = direct  # type: ignore[assignment]
        else:
            self._asgi_cycle()

    def _asgi_cycle(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before and self.cycle is not None:
            HeadWithBody.install(self.cycle)  # before its task first runs

    def _direct_cycle(self) -> DirectCycle | None:
        """This request's cycle if the application takes it straight from the parser
        (`direct`): only when no earlier request on the connection still waits for its
        answer (answers go in order) and the client reads what it is sent."""
        direct_case = self._direct_case
        if direct_case is None or self.expect_100_continue or self.flow.write_paused:
            return None
        current = self.cycle
        if current is not None and not current.response_complete:
            return None
        case = direct_case(self.parser.get_method(), self.url, self.headers)
        if case is None:
            return None
        keep_alive = self.parser.should_keep_alive() and self.parser.get_http_version() != "1.0"
        return DirectCycle(self, case, self.headers, keep_alive)

    def on_body(self, body: bytes) -> None:
        cycle: RequestResponseCycle | DirectCycle = self.cycle
        if type(cycle) is DirectCycle:
            cycle.body += body  # at most the Content-Length the head allowed
        else:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head, self._head_bytes = False, 0
        cycle: RequestResponseCycle | DirectCycle = self.cycle
        if type(cycle) is not DirectCycle:
            super().on_message_complete()
        elif not self.app.direct(cycle):  # the ASGI path after all, its body in
            self.cycle = None  # type: ignore[assignment]
            self._asgi_cycle()
            self.cycle.body = cycle.body
            super().on_message_complete()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(REQUEST_S_MAX, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def _head_too_large(self) -> NoReturn:
        """Answer 431 and stop the parser in the callback that went over the limit."""
        self._refuse_head()
        raise _HeadTooLarge

    def _refuse_head(self) -> None:
        self._refuse(b"431 Request Header Fields Too Large", _HEAD_TOO_LARGE)

    def _refuse(self, status: bytes, body: bytes) -> None:
        """Answer an HTTP-level refusal (exit code 2) and close: the parser cannot go on."""
        self._refused = True
        self._disarm()
        self.transport.write(
            b"HTTP/1.1 " + status + b"\r\n"
            b"content-type: application/json\r\n"
            b"quotaledger-exit-code: 2\r\n"
            b"connection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        self.transport.close()


class HeadWithBody:
    """A response cycle's view of its connection, on which the response's head (the
    first write once the response has started) waits for the next write, which then
    carries both; a response that writes nothing more (HEAD) sends it at its end, and
    a close sends it first. Writes before the response (`100 Continue`) and after the
    head (a stream's chunks) go at once."""

    __slots__ = ("_cycle", "_head", "_head_sent", "_transport")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle
        self._transport: asyncio.Transport = cycle.transport
        self._head: bytes | None = None
        self._head_sent = False

    @classmethod
    def install(cls, cycle: RequestResponseCycle) -> None:
        view = cls(cycle)
        answered = cycle.on_response

        def on_response() -> None:
            view.flush()
            answered()

        cycle.transport = view  # type: ignore[assignment]
        cycle.on_response = on_response

    def write(self, data: bytes) -> None:
        if self._head is not None:
            data, self._head, self._head_sent = self._head + data, None, True
        elif not self._head_sent and self._cycle.response_started:
            self._head = data  # written by `send` as the response starts
            return
        self._transport.write(data)

    def flush(self) -> None:
        if self._head is not None:
            self.write(b"")

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()
