"""From an HTTP request to a use case and its typed request (SPEC §11).

A writer's body is its API method's keyword parameters as one JSON object; a reader's
query string carries them as text (integers in decimal, times RFC 3339, booleans
`true`/`false`, a list as its key repeated). Both decode into the request type the CLI
and the Python API decode into (`usecases.decode`), with the API's names for fields.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

import msgspec

from quotaledger.client import http
from quotaledger.journal import codes
from quotaledger.journal.errors import Error, InvalidInput
from quotaledger.render.output import TEXT_OPTIONS, Shown
from quotaledger.usecases.decode import (
    CLI,
    HTTP,
    Names,
    Request,
    decode,
    decode_json,
    fields_of_http,
)
from quotaledger.usecases.fields import Identifier, Time
from quotaledger.usecases.operator import one_of_goal_or_pool, range_us
from quotaledger.usecases.registry import SERVED, UseCase

SERVED_NAMES = frozenset(SERVED)
"""The commands served under /v1/."""
SERVED_METRICS = SERVED["metrics"]
"""`GET /metrics` is the `metrics` reader of every goal, as Prometheus text."""


class ReportPageRequest(Request):
    """`GET /report`: the goal's (or the pool's) report page (what `report` writes to a
    file)."""

    goal: Identifier | None = None
    since: Time | None = None
    until: Time | None = None
    pool: Identifier | None = None

    def check(self, names: Callable[[str], str]) -> None:
        one_of_goal_or_pool(self.goal, self.pool, names)
        range_us(self.since, self.until, names)


def report_request(query: bytes) -> ReportPageRequest:
    return decode(ReportPageRequest, query_values(ReportPageRequest, query), HTTP, strict=False)


CLI_HEADER = http.CLI_HEADER.encode()


class CliCall(NamedTuple):
    """A call from the CLI client: answered as the local command prints it (its text
    or its --json object, its exit code), its errors worded with the CLI's flags."""

    as_json: bool
    shown: Shown


def cli_call(headers: list[tuple[bytes, bytes]]) -> CliCall | None:
    """The CLI client's call a request's headers state, or None (any other client)."""
    value = None
    for name, given_value in headers:  # the first one given (no generator per request)
        if name == CLI_HEADER:
            value = given_value
            break
    if value is None:
        return None
    try:
        given = dict(parse_qsl(value.decode(), keep_blank_values=True))
    except UnicodeDecodeError:
        raise InvalidInput("the CLI header is not UTF-8", code=codes.INVALID_BODY) from None
    text = {name: given.get(name) == "true" for name in TEXT_OPTIONS}
    return CliCall(given.get("as") == "json", Shown(given.get("journal", ""), **text))


def names_of(cli: CliCall | None) -> Names:
    """A caller's words for fields: the CLI's flags for its client, else HTTP's keys
    (the API's keywords, `class` for `class_`)."""
    return HTTP if cli is None else CLI


def error_json(error: Error, cli: CliCall | None) -> dict[str, Any]:
    """An error's object in the caller's words; for an API client, a message naming
    parameters lists them (`parameters`), so that a client with other names for them
    (the CLI over `RemoteLedger`) can word it its own way (`remote.error_of`)."""
    found = error.to_json(names_of(cli))
    if cli is None and error.parameters:
        found["parameters"] = list(error.parameters)
    return found


class RouteError(InvalidInput):
    """An HTTP-level refusal: the status it answers with, and exit code 2."""

    def __init__(self, status: int, message: str, *, code: str) -> None:
        super().__init__(message, code=code)
        self.status = status


def use_case_of(path: str, method: str) -> UseCase:
    """The use case `/v1/NAME` names, if `method` is its method; else a RouteError."""
    name = path[len("/v1/") :]
    case = SERVED.get(name)
    if case is None:
        raise RouteError(
            404, f"{path} names no command the server serves", code=codes.UNKNOWN_COMMAND
        )
    wanted = "POST" if case.writes else "GET"
    if method != wanted and not (method == "HEAD" and wanted == "GET"):
        raise RouteError(
            405, f"{name} is called with {wanted}, not {method}", code=codes.METHOD_NOT_ALLOWED
        )
    return case


def refuse_query(case: UseCase, query: bytes) -> None:
    """A writer's parameters are its body's: a query key beside it would be ignored,
    silently (a reader refuses an unknown key too)."""
    if not query:
        return
    pairs = parse_qsl(query.decode(errors="replace"), keep_blank_values=True)
    key = pairs[0][0] if pairs else query.decode(errors="replace")[:60]
    raise InvalidInput(
        f"unknown parameter {key!r}: {case.name}'s parameters go in its JSON body",
        code=codes.INVALID_ARGUMENT,
        parameter=key,
    )


def request_of_body(case: UseCase, body: bytes) -> Request:
    decoded: Request = decode_json(case.request_type(), body or b"{}", HTTP)
    return _served(case, decoded)


def request_of_query(case: UseCase, query: bytes) -> Request:
    request_type: type[Request] = case.request_type()
    values = fields_of_http(query_values(request_type, query))
    return _served(case, decode(request_type, values, HTTP, strict=False))


def request_of_cli(case: UseCase, body: bytes, query: bytes) -> Request:
    """A CLI client's request: every field, typed as the CLI's parser typed it (JSON;
    a reader's query value is JSON too), decoded as the local command decodes it."""
    try:
        if case.writes:
            values = msgspec.json.decode(body or b"{}")
        else:
            pairs = parse_qsl(query.decode(), keep_blank_values=True)
            values = {key: msgspec.json.decode(value) for key, value in pairs}
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise InvalidInput("a CLI client's request is not JSON", code=codes.INVALID_BODY) from None
    if not isinstance(values, dict):
        raise InvalidInput("a CLI client's request is not an object", code=codes.INVALID_BODY)
    return _served(case, decode(case.request_type(), values, CLI))


def _served(case: UseCase, request: Request) -> Request:
    """A request the server may carry out: none writes a file where the server runs
    (`metrics`' `out`: a client scrapes GET /metrics instead)."""
    if getattr(request, "out", None) is not None:
        raise InvalidInput(
            f"{case.name}'s out writes a file where the server runs, which a client may "
            "not ask for; write the answer where the client runs (GET /metrics for the "
            "exposition)",
            code=codes.REMOTE_NOT_SERVED,
            parameter="out",
        )
    return request


def query_values(request_type: type[Request], query: bytes) -> dict[str, Any]:
    """A query string as the fields' values: a list field's key repeated is its items;
    any other key given twice is refused (which of the two was meant?)."""
    lists = _list_fields(request_type)
    values: dict[str, Any] = {}
    try:
        pairs = parse_qsl(query.decode(), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise InvalidInput("the query string is not UTF-8", code=codes.INVALID_BODY) from None
    for key, value in pairs:
        if key in lists:
            values.setdefault(key, []).append(value)
        elif key in values:
            raise InvalidInput(f"{key} is given twice in the query", code=codes.INVALID_BODY)
        else:
            values[key] = value
    return values


_LISTS: dict[type[Request], frozenset[str]] = {}


def _list_fields(request_type: type[Request]) -> frozenset[str]:
    found = _LISTS.get(request_type)
    if found is None:
        hints = typing.get_type_hints(request_type)
        found = _LISTS[request_type] = frozenset(
            name for name, hint in hints.items() if _is_list(hint)
        )
    return found


def _is_list(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is list:
        return True
    return any(_is_list(arg) for arg in typing.get_args(hint) if arg is not type(None))
