"""An outcome as an HTTP answer: status, headers, body (SPEC §11's mapping)."""

import datetime as dt
import math
from typing import Any, NamedTuple

import msgspec

from quotaledger.cli.output import exit_code_of, http_status_of
from quotaledger.journal.errors import Error, LockTimeout, StorageFailure

JSON = b"application/json"
JSON_LINES = b"application/jsonl"
EXIT_HEADER = b"quotaledger-exit-code"


class Reply(NamedTuple):
    status: int
    exit_code: int
    body: bytes
    content_type: bytes = JSON
    retry_after_s: int | None = None

    def headers(self) -> list[tuple[bytes, bytes]]:
        headers = [
            (b"content-type", self.content_type),
            (b"content-length", str(len(self.body)).encode()),
            (EXIT_HEADER, str(self.exit_code).encode()),
        ]
        if self.retry_after_s is not None:
            headers.append((b"retry-after", str(self.retry_after_s).encode()))
        return headers


async def send_whole(send: Any, reply: Reply) -> None:
    """`reply` through an ASGI `send`, head and body."""
    await send({"type": "http.response.start", "status": reply.status, "headers": reply.headers()})
    await send({"type": "http.response.body", "body": reply.body})


def refusal(status: int, code: str, message: str) -> Reply:
    """An HTTP-level refusal (400, 401, 403, 404, 405, 413, 415, 431): exit code 2."""
    error = {"ok": False, "error": {"code": code, "message": message}}
    return Reply(status, 2, msgspec.json.encode(error))


def of_outcome(outcome: Any) -> Reply:
    if isinstance(outcome, Error):
        return of_error(outcome)
    if isinstance(outcome, BaseException):  # a bug: said plainly, not as a journal error
        error = {"ok": False, "error": {"code": "internal_error", "message": repr(outcome)}}
        return Reply(500, 3, msgspec.json.encode(error))
    if isinstance(outcome, list):  # the log's records: JSON Lines, as `log --json`
        lines = b"".join(msgspec.json.encode(record, enc_hook=str) + b"\n" for record in outcome)
        return Reply(200, 0, lines, JSON_LINES)
    exit_code = exit_code_of(outcome)
    retry = _retry_after_s(outcome) if exit_code == 1 else None
    body = msgspec.json.encode(outcome, enc_hook=str)
    return Reply(http_status_of(exit_code), exit_code, body, retry_after_s=retry)


def of_error(error: Error) -> Reply:
    exit_code = exit_code_of(error)
    body = msgspec.json.encode({"ok": False, "error": error.to_json()}, enc_hook=str)
    # A lock held by another writer frees; a failed disk does not, a restart may.
    retry = 1 if isinstance(error, LockTimeout) else None
    if isinstance(error, StorageFailure) and retry is None:
        retry = 5
    return Reply(http_status_of(exit_code), exit_code, body, retry_after_s=retry)


def _retry_after_s(answer: dict[str, Any]) -> int | None:
    """A refusal's earliest admissible time as whole seconds from now."""
    figures = answer.get("figures")
    until = figures.get("cooldown_until") if isinstance(figures, dict) else None
    if not isinstance(until, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(until.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0, math.ceil((moment - dt.datetime.now(dt.UTC)).total_seconds()))
