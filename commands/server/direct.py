"""Writers taken straight from the parser: no ASGI task, one write per answer.

Most of what the server does per request is the ASGI machinery around it: a scope
dict, a response cycle, a task running the application's coroutines, a Future per
request and two messages to send the answer (about half the loop thread's Python per
request, measured by callgrind). The runner's per-event requests (`observe`, `admit`,
`release`: a plain JSON `POST /v1/WRITER` with the write token) need none of it: the
protocol hands the parsed request to the application (`Api.direct`), which decodes
it, queues it for the committer in this turn's group, and answers it, when its
outcome comes back, with the bytes the ASGI path would have sent (the same `Reply`),
in one write.

Everything else takes the ASGI path, which answers every case: another method, a
query, a CLI client, a body not sized by a plain Content-Length, `Expect`, an admit
that waits in the queue (found once its body is decoded), a connection whose writes
are paused (the client is not reading), and a request pipelined behind one not yet
answered (the cycle below keeps their order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from quotaledger.journal.limits import BODY_BYTES_MAX
from quotaledger.server import replies

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from quotaledger.usecases.registry import UseCase

Outcome = Any


class _Unwatched:
    """A direct cycle's stand-in for uvicorn's per-cycle event: nothing waits on it."""

    __slots__ = ()

    def set(self) -> None:
        return None


_UNWATCHED = _Unwatched()


class DirectCycle:
    """One request served directly, as uvicorn's protocol sees it and as the
    committer does.

    To the protocol it is the connection's current cycle (`response_complete`,
    `keep_alive`, `disconnected`, `message_event`), so a pipelined request waits
    behind it, a lost connection marks it and a shutdown asks it to close after its
    answer. To the committer it is the request's ticket: `done` and `set_result`, as
    the ASGI path's Future has them."""

    __slots__ = (
        "body",
        "case",
        "disconnected",
        "headers",
        "keep_alive",
        "on_outcome",
        "protocol",
        "response_complete",
    )
    message_event = _UNWATCHED

    def __init__(
        self,
        protocol: HttpToolsProtocol,
        case: UseCase,
        headers: list[tuple[bytes, bytes]],
        keep_alive: bool,
    ) -> None:
        self.protocol = protocol
        self.case = case
        self.headers = headers
        self.keep_alive = keep_alive
        self.body = bytearray()
        self.disconnected = False
        self.response_complete = False
        self.on_outcome: Callable[[DirectCycle, Outcome], None] = _unset

    def done(self) -> bool:
        """Never: its outcome counts (a promotion, a queue's timer) even if its client
        went away, as the ASGI path's does."""
        return False

    def set_result(self, outcome: Outcome) -> None:
        self.on_outcome(self, outcome)

    def send(self, reply: replies.Reply) -> None:
        """Answer in one write, the bytes uvicorn's cycle would have written for the
        same response (no library headers are configured: `listening.config`)."""
        if self.response_complete:
            return
        self.response_complete = True
        if self.disconnected:
            return  # as uvicorn's cycle: nothing to write to, no next request
        content = [STATUS_LINE[reply.status]]
        for name, value in reply.headers():
            content += (name, b": ", value, b"\r\n")
        if not self.keep_alive:
            content.append(b"connection: close\r\n")
        content += (b"\r\n", reply.body)
        protocol = self.protocol
        protocol.transport.write(b"".join(content))
        if not self.keep_alive:
            protocol.transport.close()
        protocol.on_response_complete()


def _unset(cycle: DirectCycle, outcome: Outcome) -> None:
    raise AssertionError("a direct cycle's outcome came before it was queued")


ASGI_ONLY = frozenset({b"transfer-encoding", b"expect"})
"""Request headers that send a request down the ASGI path, whose `receive` handles
them (a chunked body, `100 Continue`)."""


def plain_json_body(headers: list[tuple[bytes, bytes]], cli_header: bytes) -> bool:
    """A request whose body is JSON sized by one Content-Length within the limit, from
    a client other than the CLI's (whose answers are printed text: the ASGI path)."""
    content_type = length = None
    for name, value in headers:
        if name == b"content-type":
            content_type = value
        elif name == b"content-length":
            length = value
        elif name in ASGI_ONLY or name == cli_header:
            return False
    return (
        content_type == replies.JSON
        and length is not None
        and length.isdigit()
        and int(length) <= BODY_BYTES_MAX
    )
