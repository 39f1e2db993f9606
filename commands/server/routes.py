"""Which use cases the server serves, and how an HTTP request becomes their keyword
arguments (a JSON body for a writer, a query string for a reader)."""

import inspect
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import msgspec

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput, codes
from quotaledger.usecases.decode import API, decode
from quotaledger.usecases.registry import USE_CASES

SERVED_WRITERS = (
    "configure",
    "observe",
    "admit",
    "reject",
    "release",
    "host_phase",
    "host_start",
    "host_exit",
    "host_return",
    "host_continue",
    "host_stop",
    "host_replan",
    "budget_configure",
    "turn_open",
    "turn_writeback",
    "turn_spend",
)
SERVED_READERS = (
    "inspect",
    "goals",
    "audit",
    "whatif",
    "log",
    "digest",
    "metrics",
    "host_status",
    "host_heartbeat",
    "turn_resume",
    "turn_status",
)
"""SPEC §11's lists: `probe_run` runs a process on the server, the journal's
maintenance commands (repair, import, export, ...) stay local: 404."""


INTERNAL_PARAMETERS = frozenset({"self", "wait", "follow"})
"""A legacy method's parameters no HTTP caller gives (`follow` is the log's stream)."""


ANY = "**"
"""In a legacy route's kinds: its method takes further keywords (`**config`)."""


class Route(NamedTuple):
    name: str
    writes: bool
    kinds: dict[str, Any]
    """Each keyword's kind (int, float, bool, list or str), to read a query value."""
    request_type: Any
    """The use case's request type; None while it is not converted (`legacy`)."""

    def check(self, values: Mapping[str, Any]) -> None:
        """The request's own checks, answered at once (outside any commit)."""
        if self.request_type is not None:
            decode(self.request_type, values, API)
            return
        for key in values:  # a legacy method checks the rest itself
            if key in INTERNAL_PARAMETERS or (key not in self.kinds and ANY not in self.kinds):
                raise InvalidInput(
                    f"unknown parameter {key!r}", code=codes.INVALID_ARGUMENT, parameter=key
                )

    def call(self, ledger: Ledger, values: Mapping[str, Any]) -> Any:
        method: Callable[..., Any] = getattr(ledger, self.name)
        return method(**values)


def route_of(name: str) -> Route:
    method = getattr(Ledger, name)
    legacy = getattr(method, "__wrapped__", None)
    if legacy is not None:  # not converted yet: its annotations are text (and a TypedDict)
        kinds: dict[str, Any] = {}
        for parameter in inspect.signature(legacy).parameters.values():
            if parameter.kind is parameter.VAR_KEYWORD:
                kinds.update(_unpacked(legacy, str(parameter.annotation)))
            else:
                kinds[parameter.name] = _kind_of_text(str(parameter.annotation))
        return Route(name, USE_CASES[name].writes, kinds, None)
    request_type = USE_CASES[name].request_type()
    hints = typing.get_type_hints(request_type, include_extras=True)
    kinds = {field: _base(hint) for field, hint in hints.items()}
    return Route(name, USE_CASES[name].writes, kinds, request_type)


def _unpacked(method: Any, annotation: str) -> dict[str, Any]:
    """The keywords of `**config: Unpack[ConfigFields]` (a TypedDict's keys)."""
    name = annotation.removeprefix("Unpack[").removesuffix("]")
    fields = getattr(sys.modules[method.__module__], name, None)
    if fields is None:
        return {ANY: str}
    return {key: _kind_of_text(str(hint)) for key, hint in fields.__annotations__.items()}


def _kind_of_text(annotation: str) -> Any:
    for word, kind in (("list[", list), ("bool", bool), ("float", float), ("int", int)):
        if word in annotation:
            return kind
    return str


def routes() -> dict[str, Route]:
    return {name: route_of(name) for name in (*SERVED_WRITERS, *SERVED_READERS)}


def body_values(body: bytes) -> dict[str, Any]:
    """A writer's JSON body: one object of keyword arguments."""
    try:
        values = msgspec.json.decode(body) if body.strip() else {}
    except msgspec.DecodeError as error:
        raise InvalidInput(f"the body is not JSON: {error}", code=codes.INVALID_INPUT) from None
    if not isinstance(values, dict):
        raise InvalidInput("the body must be a JSON object of parameters", code=codes.INVALID_INPUT)
    return values


def query_values(route: Route, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """A reader's query: integers in decimal, booleans true/false, a list as the key
    repeated, anything else (times in RFC 3339 included) as text."""
    grouped: dict[str, list[str]] = {}
    for key, value in pairs:
        grouped.setdefault(key, []).append(value)
    values: dict[str, Any] = {}
    for key, texts in grouped.items():
        kind = route.kinds.get(key, str)
        if kind is list:
            values[key] = texts
        else:
            values[key] = _scalar(key, kind, texts[-1])
    return values


def _base(hint: Any) -> Any:
    """`int` of `Annotated[int | None, ...]`, `list` of `list[str] | None`."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _base(typing.get_args(hint)[0])
    if origin is list or hint is list:
        return list
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args and origin is not None:
        return _base(args[0])
    return hint


def _scalar(key: str, kind: Any, text: str) -> Any:
    if kind is bool:
        if text not in ("true", "false"):
            raise InvalidInput(f"{key} must be true or false, not {text!r}", parameter=key)
        return text == "true"
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise InvalidInput(
                f"{key} must be {'an integer' if kind is int else 'a number'}, not {text!r}",
                code=codes.INVALID_ARGUMENT,
                parameter=key,
            ) from None
    return text
