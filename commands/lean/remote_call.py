"""A CLI command run as a client of `quotaledger serve`, without typer (SPEC §9, §11).

The command line is read with the table generated from the typer app
(lean/grammar.py); what the local CLI reads and checks before its request (a
`FILE|-` option, one reader of stdin, observe's counts) is checked with the same
functions (console/inputs.py). The request goes as the use case's JSON body or query,
with the `quotaledger-cli` header: the server decodes it with the CLI's names for
its fields (so an error names the flag) and answers what the local command prints,
text or --json, with its exit code (render/answers.py). A command line the table cannot
read exactly as click would (`--help`, an unknown option, a malformed number or
duration, a missing option, an option that fills no field) is left to the full CLI.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from quotaledger.client.http import CLI_HEADER, Connection, query_string
from quotaledger.console.inputs import (
    STDIN_OPTIONS,
    check_observe_counts,
    check_one_stdin_reader,
    read_input,
)
from quotaledger.console.printing import Printer, closed_stdout, write_bytes
from quotaledger.journal.errors import Error
from quotaledger.journal.identifier import check_identifier
from quotaledger.journal.lock_timeout import check_lock_timeout_s
from quotaledger.journal.target import check_target
from quotaledger.lean.command_line import Call, Unread, lock_timeout_s
from quotaledger.render.outcome import (
    ANSWERED,
    EXIT_ABORTED,
    EXIT_OK,
    error_body,
    error_line,
    error_of_body,
)


def call(args: list[str], target: str) -> int | None:
    """Runs `args` against the server at `target`: the exit code, or None where the
    full CLI must run it."""
    try:
        command = Call(args)
    except Unread:
        return None
    if command.target is not None and command.target != target:
        return None  # `--journal` was another option's value
    try:
        timeout_s = lock_timeout_s(command)  # only checked: the server waits for its lock
    except Unread:
        return None
    try:
        _check(command, target, timeout_s)
        body = _request_body(command)
        return _answered(command, target, body)
    except Error as error:
        return _print_error(error.to_json(), error.exit_code, as_json=command.as_json)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): how a pipe ends
        return closed_stdout()


def _header(command: Call, target: str) -> str:
    options = {"as": "json" if command.as_json else "text", "journal": target, **command.shown}
    return query_string(options)[1:]


def _worded(command: Call, error: dict[str, Any]) -> dict[str, Any]:
    """An error that names a field as the engine does (`target_itpm needs ...`) named
    by its flag, as the full CLI words it (remote.error_of)."""
    message = str(error.get("message", ""))
    about = next((name for name in command.request if message.startswith(name + " ")), None)
    if about is None:
        return error
    return {**error, "message": command.flags[about] + message[len(about) :]}


def _check(command: Call, target: str, timeout_s: float) -> None:
    """What the local CLI checks before a command runs (console/context.py's
    check_common_input), in its order."""
    check_target(target, option="--journal")
    check_lock_timeout_s(timeout_s)
    if command.at is not None:
        from quotaledger.journal.clock import check_moment

        check_moment("--at", command.at)
    for option, value in command.identifiers.items():
        check_identifier(option, value, option=option)
    check_one_stdin_reader(command.request)


def _request_body(command: Call) -> dict[str, Any]:
    """The request, with what the CLI reads itself in place of a `FILE|-` option."""
    request = command.request
    if command.name == "observe":
        check_observe_counts(request)
    for name, flag in STDIN_OPTIONS.items():
        if name in request:
            request[name] = read_input(flag, request[name])
    return request


def _answered(command: Call, target: str, request: dict[str, Any]) -> int:
    connection = Connection(target)
    headers = ((CLI_HEADER, _header(command, target)),)
    printed = Printer(as_json=command.as_json)  # the answer, as it comes (a log streams)
    # Every field, null included, typed as the CLI's parser typed it: the server decodes
    # it as the local command does (strictly, with the CLI's names for the fields).
    try:
        if command.writes:
            body = json.dumps(request, ensure_ascii=False).encode()
            answer = connection.request("POST", f"/v1/{command.name}", body, headers, printed)
        else:
            typed = {key: json.dumps(value, ensure_ascii=False) for key, value in request.items()}
            path = f"/v1/{command.name}{query_string(typed)}"
            endless = command.name == "log" and bool(request.get("follow"))
            answer = connection.request("GET", path, None, headers, printed, endless=endless)
    except KeyboardInterrupt:
        return _interrupted(command)
    finally:
        connection.close()
    status, exit_code, body = answer
    if exit_code in ANSWERED:
        sys.stdout.flush()
        return exit_code
    error, exit_code = _error_of(status, exit_code, body)
    return _print_error(_worded(command, error), exit_code, as_json=command.as_json)


def _interrupted(command: Call) -> int:
    """Ctrl-C: the way out of `log --follow`, exit 0 as the local command; any other
    command acknowledged nothing: exit 4, in the full CLI's words (cli/main.py)."""
    if command.name == "log":
        sys.stdout.flush()
        return EXIT_OK
    sys.stderr.write("quotaledger: aborted\n")
    return EXIT_ABORTED


def _error_of(status: int, exit_code: int | None, body: bytes) -> tuple[dict[str, Any], int]:
    """The error an answer carries (worded for the CLI by the server), and its exit code."""
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    return error_of_body(status, exit_code, decoded)


def _print_error(error: dict[str, Any], exit_code: int, *, as_json: bool) -> int:
    """An error as the CLI prints it (render/output.py's emit_error)."""
    if as_json:
        line = json.dumps(error_body(error), ensure_ascii=False, separators=(",", ":"))
        write_bytes(sys.stdout, (line + "\n").encode())
    else:
        sys.stderr.write(error_line(str(error.get("message", "")), error.get("code")))
    return exit_code
