"""The outcome policy, in one place: exit code <-> HTTP status <-> JSON error body,
both directions (SPEC §8, §11).

An outcome is an answer (exit 0 ok, idempotent replays included; 1 a decision
refused: an answer, not an error) or an error, whose exit code its class states
(journal/errors.py: 2 invalid input, 3 journal corrupt, 4 I/O failure). The server
answers with the status of its exit code and the exit code itself
(`Quotaledger-Exit-Code`); a client of it reads them back, and an answer without the
header (a proxy's) by its status alone. Every face (the CLI, the lean CLI, the server,
the remote client) maps outcomes with these functions.

Imported by the lean CLI client of a server (lean/remote_call.py): the engine's error tree
and nothing heavier (no msgspec, no typer).
"""

from __future__ import annotations

from typing import Any

from quotaledger.journal import codes
from quotaledger.journal.errors import Error

EXIT_OK = 0
EXIT_REFUSED = 1
"""A decision refused (`{"ok": false, "reasons": [...]}`): an answer, not an error."""
EXIT_INVALID = 2
EXIT_CORRUPT = 3
EXIT_STORAGE = 4
EXIT_ABORTED = EXIT_STORAGE
"""Ctrl-C before a command acknowledged anything: nothing is known to be written."""
ANSWERED = frozenset({EXIT_OK, EXIT_REFUSED})
"""The exit codes of an answer: its body is what `--json` prints, not an error."""

STATUS_OF_EXIT = {EXIT_OK: 200, EXIT_REFUSED: 200, EXIT_INVALID: 400, EXIT_CORRUPT: 500}
STATUS_OF_EXIT[EXIT_STORAGE] = 503
"""HTTP status by exit code (SPEC §11): a refusal (exit 1) is an answer, not an error."""


def exit_code_of(outcome: Error | Any) -> int:
    """The exit code of an error (its class's) or of an answer, typed or a JSON-ready
    dict (0 ok, 1 refused)."""
    if isinstance(outcome, Error):
        return outcome.exit_code
    ok = outcome.get("ok", True) if isinstance(outcome, dict) else getattr(outcome, "ok", True)
    return EXIT_OK if ok else EXIT_REFUSED


def status_of_exit(exit_code: int) -> int:
    """The HTTP status of an outcome's exit code (500 for one no error has)."""
    return STATUS_OF_EXIT.get(exit_code, 500)


def exit_of_status(status: int) -> int:
    """The exit code of an error answer that does not state its own (a proxy's): 503
    is a storage failure a retry can cure, another 5xx the server's fault, else the
    request's (invalid input)."""
    if status == 503:
        return EXIT_STORAGE
    return EXIT_CORRUPT if status >= 500 else EXIT_INVALID


def error_body(error: dict[str, Any]) -> dict[str, Any]:
    """The JSON object an error answers with (an error's `to_json`)."""
    return {"ok": False, "error": error}


def error_of_body(status: int, exit_code: int | None, body: Any) -> tuple[dict[str, Any], int]:
    """The error object an error answer carries, and its exit code: an answer that is
    not the server's (a proxy's page) is `server_protocol_error`, and without the exit
    code header, the exit code is its status's."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {"code": codes.SERVER_PROTOCOL_ERROR, "message": f"HTTP {status}"}
    return error, exit_of_status(status) if exit_code is None else exit_code


def error_line(message: str, code: object) -> str:
    """The one line an error is on stderr (SPEC §8): a line break in the message (a
    path the user gave may hold one) is shown escaped, never ends the line."""
    shown = message.replace("\r", "\\r").replace("\n", "\\n")
    return f"quotaledger: error: {shown} [{code}]\n"
