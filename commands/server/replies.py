"""What the server answers a request with: its status, body, exit code and headers
(SPEC §11), made once and sent either way a request is served (an ASGI cycle's two
messages, or the one write of a request taken straight from the parser: `direct`).

The status follows the exit code (`render.outcome`); every answer carries that code
as `Quotaledger-Exit-Code`, and a refusal that says when to come back its
`Retry-After`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.clock import parse_at
from quotaledger.journal.errors import Error
from quotaledger.journal.limits import RETRY_AFTER_BUSY_S
from quotaledger.render.outcome import error_body, exit_code_of, status_of_exit
from quotaledger.server import routes
from quotaledger.server.waiters import retry_after_s
from quotaledger.usecases.decode import Answer

JSON = b"application/json"
RETRY_HELPS = frozenset({codes.LOCK_TIMEOUT, codes.SHUTTING_DOWN, codes.STORAGE_FAILURE})
"""503s a retry can cure: the lock freed, or the server restarted (recovery on open)."""
EXIT_TEXT = {code: str(code).encode() for code in range(5)}

Rewrite = Callable[[bytes, str], bytes]
"""An answer's bytes with its follow-up commands naming the client's journal."""


def unchanged(body: bytes, kind: str) -> bytes:
    return body


class Reply(NamedTuple):
    """One answer as sent."""

    status: int
    body: bytes
    exit_code: int
    content_type: bytes = JSON
    extra: tuple[tuple[bytes, bytes], ...] = ()
    """Headers beyond the three every answer has (`Retry-After`, `WWW-Authenticate`)."""

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-type", self.content_type),
            (b"content-length", str(len(self.body)).encode()),
            (b"quotaledger-exit-code", EXIT_TEXT[self.exit_code]),
            *self.extra,
        ]


def answer_reply(answer: Answer, rewrite: Rewrite = unchanged) -> Reply:
    """A use case's typed answer, as `--json` prints it (200 whatever its exit code)."""
    exit_code = exit_code_of(answer)
    extra: tuple[tuple[bytes, bytes], ...] = ()
    if exit_code == 1:
        after_s = _retry_after_s(answer)
        if after_s is not None:
            extra = ((b"retry-after", str(after_s).encode()),)
    body = rewrite(msgspec.json.encode(answer) + b"\n", "json")
    return Reply(200, body, exit_code, JSON, extra)


def error_reply(error: Error, cli: routes.CliCall | None = None) -> Reply:
    """An error's JSON object, in the caller's words, with the status its exit code (or
    the route) says."""
    exit_code = error.exit_code
    status = getattr(error, "status", None) or status_of_exit(exit_code)
    extra: tuple[tuple[bytes, bytes], ...] = ()
    if status == 503 and error.code in RETRY_HELPS:
        extra = ((b"retry-after", str(RETRY_AFTER_BUSY_S).encode()),)
    if status == 401:
        extra = ((b"www-authenticate", b"Bearer"),)
    body = msgspec.json.encode(error_body(routes.error_json(error, cli))) + b"\n"
    return Reply(status, body, exit_code, JSON, extra)


def _retry_after_s(answer: Answer) -> int | None:
    """Whole seconds until a refused request could pass, where the refusal says when
    (a queued run's estimated start, a cooldown's end); None where only a change of
    load can tell."""
    if getattr(answer, "queued", None) is True:
        return retry_after_s(answer)
    figures = getattr(answer, "figures", None)
    until = getattr(figures, "cooldown_until", None)
    at = getattr(answer, "at", None)
    if not isinstance(until, str) or not isinstance(at, str):
        return None
    wait_us = parse_at(until) - parse_at(at)
    return max(1, math.ceil(wait_us / 1e6)) if wait_us > 0 else None
