"""A CLI command run as a client of `quotaledger serve`, without typer (SPEC §9, §11).

The command line is read with the table generated from the typer app
(client/grammar.py); what the local CLI reads and checks before its request (a
`FILE|-` option, one reader of stdin, observe's counts) is checked with the same
functions (client/inputs.py). The request goes as the use case's JSON body or query,
with the `quotaledger-cli` header: the server decodes it with the CLI's names for
its fields (so an error names the flag) and answers what the local command prints,
text or --json, with its exit code (cli/answers.py). A command line the table cannot
read exactly as click would (`--help`, an unknown option, a malformed number or
duration, a missing option, an option that fills no field) is left to the full CLI.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from quotaledger.client.grammar import COMMANDS, IDENTIFIERS
from quotaledger.client.http import ANSWERED, CLI_HEADER, Connection, query_string
from quotaledger.client.inputs import (
    STDIN_OPTIONS,
    check_observe_counts,
    check_one_stdin_reader,
    env_json,
    read_input,
)
from quotaledger.client.numbers import finite, integer
from quotaledger.client.printing import Printer, closed_stdout, write_bytes
from quotaledger.journal import codes
from quotaledger.journal.errors import Error
from quotaledger.journal.identifier import check_identifier
from quotaledger.journal.target import check_target

LOCK_TIMEOUT_ENV = "QUOTALEDGER_LOCK_TIMEOUT_S"
EXIT_OK, EXIT_ABORTED = 0, 4


class Unread(Exception):
    """A command line the grammar does not read as click would: the full CLI runs it."""


class Call:
    """One command line, read: the use case, its request, how to print its answer."""

    def __init__(self, args: list[str]) -> None:
        words = 2 if " ".join(args[:2]) in COMMANDS else 1
        key = " ".join(args[:words])
        if key not in COMMANDS or args[:words][-1].startswith("-"):
            raise Unread(key)
        self.name, self.writes, flags, options = COMMANDS[key]
        given = _given(args[words:], flags, options)
        self.target: str | None = given.pop("journal", None)
        json_flag = given.pop("json_", None)
        from_env = env_json()
        if from_env is None:
            raise Unread("QUOTALEDGER_JSON")  # a value click refuses, even with --json
        self.as_json = from_env if json_flag is None else bool(json_flag)
        if "lock_timeout_s" in given or LOCK_TIMEOUT_ENV in os.environ:
            raise Unread("--lock-timeout-s")  # checked by the engine's bound: the full CLI
        flag_of = {index: flag for flag, (index, on) in reversed(flags.items()) if on}
        self.flags: dict[str, str] = {}
        """Each request field's flag (its option's first), for an error's wording."""
        self.at: str | None = given.get("at")
        self.request: dict[str, Any] = {}
        self.identifiers: dict[str, str] = {}
        self.shown: dict[str, Any] = {}
        chosen: dict[str, list[tuple[str, str]]] = {}
        """Each field a choice makes: the values and flags given for it."""
        for index, option in enumerate(options):
            param, kind, _multiple, _required, value, field, _role = option
            if kind == "choice":
                made = [(value, flag_of[index])] if param in given else []
                chosen[field] = chosen.get(field, []) + made
            else:
                self._read(option, given, flag_of[index])
        for field, made in chosen.items():
            if len(made) != 1:
                raise Unread(field)  # none or both of --open/--settle: the full CLI says so
            self.request[field], self.flags[field] = made[0]

    def _read(self, option: Any, given: dict[str, Any], flag: str) -> None:
        param, kind, multiple, required, default, field, role = option
        if role in ("common", "checked"):
            return
        if param not in given:
            if required:
                raise Unread(param)
            if role == "":
                return
            value = default
        elif role == "":
            raise Unread(param)  # an option that fills no field (`metrics --listen`)
        else:
            raw = given[param]
            value = [_value(kind, v) for v in raw] if multiple else _value(kind, raw)
        if param in IDENTIFIERS and value is not None:
            self.identifiers[IDENTIFIERS[param]] = value
        if role == "text":
            self.shown[param] = value
        else:
            self.request[field] = value
            self.flags[field] = flag

    def header(self, target: str) -> str:
        options = {"as": "json" if self.as_json else "text", "journal": target, **self.shown}
        return query_string(options)[1:]

    def worded(self, error: dict[str, Any]) -> dict[str, Any]:
        """An error that names a field as the engine does (`target_itpm needs ...`)
        named by its flag, as the full CLI words it (remote.error_of)."""
        message = str(error.get("message", ""))
        about = next((name for name in self.request if message.startswith(name + " ")), None)
        if about is None:
            return error
        return {**error, "message": self.flags[about] + message[len(about) :]}


def _given(args: list[str], flags: dict[str, Any], options: list[Any]) -> dict[str, Any]:
    """Each option's value(s) as given (the last of a repeated one, as click keeps)."""
    given: dict[str, Any] = {}
    rest = iter(args)
    for arg in rest:
        # A short option only as a word of its own (`-f`): click reads `-fx` and `-f=x`
        # in ways of its own.
        flag, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        found = flags.get(flag)
        if found is None:
            raise Unread(arg)  # an argument, `--help`, a typo
        index, on = found
        param, kind, multiple = options[index][:3]
        if kind in ("flag", "choice"):
            if eq:
                raise Unread(arg)
            given[param] = on
            continue
        if not eq:
            following = next(rest, None)
            if following is None:
                raise Unread(arg)
            value = following
        if multiple:
            given.setdefault(param, []).append(value)
        else:
            given[param] = value
    return given


def _value(kind: str, text: str) -> Any:
    if kind == "int":
        number: int | float | None = integer(text)
    elif kind == "float":
        number = finite(text)
    elif kind.startswith("duration"):
        number = _duration(text, whole=kind == "duration_s")
    else:
        return text  # a string, or the name of a `FILE|-` option's file (read later)
    if number is None:
        raise Unread(text)
    return number


def _duration(text: str, *, whole: bool) -> int | float | None:
    from quotaledger.journal.clock import parse_duration_s

    try:
        seconds = parse_duration_s(text, "duration")  # its error: the full CLI words it
    except Error:
        return None
    if whole:
        return seconds if isinstance(seconds, int) else None
    return float(seconds)


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
        _check(command, target)
        body = _request_body(command)
        return _answered(command, target, body)
    except Error as error:
        return _print_error(error.to_json(), error.exit_code, as_json=command.as_json)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): how a pipe ends
        return closed_stdout()


def _check(command: Call, target: str) -> None:
    """What the local CLI checks before a command runs (cli/common.py's
    check_common_input), in its order."""
    check_target(target, option="--journal")
    if command.at is not None:
        from quotaledger.journal.clock import canonical_at

        canonical_at(command.at)
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
    headers = ((CLI_HEADER, command.header(target)),)
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
            answer = connection.request("GET", path, None, headers, printed)
    except KeyboardInterrupt:
        return _interrupted(command)
    finally:
        connection.close()
    status, exit_code, body = answer
    if exit_code in ANSWERED:
        sys.stdout.flush()
        return exit_code
    error, exit_code = _error_of(status, exit_code, body)
    return _print_error(command.worded(error), exit_code, as_json=command.as_json)


def _interrupted(command: Call) -> int:
    """Ctrl-C: the way out of `log --follow`, exit 0 as the local command; any other
    command acknowledged nothing: exit 4, in the full CLI's words (cli/main.py)."""
    if command.name == "log":
        sys.stdout.flush()
        return EXIT_OK
    sys.stderr.write("quotaledger: aborted\n")
    return EXIT_ABORTED


def _error_of(status: int, exit_code: int | None, body: bytes) -> tuple[dict[str, Any], int]:
    """The error an answer carries (worded for the CLI by the server), and its exit code;
    an answer that is not the server's (a proxy's) is `server_protocol_error`."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        error = None
    if not isinstance(error, dict):
        error = {"code": codes.SERVER_PROTOCOL_ERROR, "message": f"HTTP {status}"}
    if exit_code is None:
        exit_code = 4 if status == 503 else 3 if status >= 500 else 2
    return error, exit_code


def _print_error(error: dict[str, Any], exit_code: int, *, as_json: bool) -> int:
    """An error as the CLI prints it (cli/output.py's emit_error)."""
    if as_json:
        line = json.dumps({"ok": False, "error": error}, ensure_ascii=False, separators=(",", ":"))
        write_bytes(sys.stdout, (line + "\n").encode())
    else:
        sys.stderr.write(f"quotaledger: error: {error.get('message', '')} [{error.get('code')}]\n")
    return exit_code
