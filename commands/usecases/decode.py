"""Requests and answers: the base Structs, and `decode`, the one place a request is
made from what a caller gave.

    request = decode(AdmitRequest, {"goal": "g", "run": "r1"}, CLI)

`decode` converts and checks every field against its type (msgspec, strict: no
string for a number, no float for an integer), then runs the rules a constraint
cannot state (`fields.Rule`), and words any failure as the field's own rule does,
with the caller's name for the field (`CLI`: its flag, `API`: its keyword).
"""

import datetime as dt
import inspect
import re
import typing
from collections.abc import Callable, Container, Mapping
from typing import Any, TypeVar

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.clock import format_us
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.store import PendingRecord
from quotaledger.usecases.fields import Rule


class Request(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What a caller asks of one use case; every field is a keyword of the API."""

    def check(self, names: Callable[[str], str]) -> None:
        """The rules across fields (exactly one of two options, a range in order),
        worded with the caller's `names`; `decode` calls it once each field is valid."""


class Answer(msgspec.Struct, kw_only=True):
    """What a use case answers: `--json` prints it, the API returns it as a dict.

    Field order is key order; a field whose value is `msgspec.UNSET` is left out."""


class Event(msgspec.Struct):
    """The event a writer appended (SPEC §8: `"event": {"seq", "hash", "kind", "at"}`)."""

    seq: int
    hash: str
    kind: str
    at: str


def event_of(pending: PendingRecord) -> Event:
    record = pending.record
    return Event(record.seq, record.hash, record.kind, record.at)


def event_or_unset(pending: PendingRecord | None) -> Event | msgspec.UnsetType:
    """An answer's `event`: present only when something was appended."""
    return msgspec.UNSET if pending is None else event_of(pending)


R = TypeVar("R", bound=Request)

Names = Callable[[str], str]
"""A caller's word for a field: the CLI's flag, the API's keyword, an HTTP body key."""

FLAG_OF_FIELD = {
    "class_": "--class",
    "turn_id": "--turn",
    "import_from": "SOURCE",
    "command": "command argument",  # `probe run`'s CMD ARGS... after `--`
    "candidates": "--candidate",
    "file": "FILE",
}
"""Fields whose flag is not `--` and the field's name with `-` for `_`."""


def CLI(field: str) -> str:
    if field.isupper():  # an environment variable's name: every caller's word for it
        return field
    flag = FLAG_OF_FIELD.get(field)
    return flag if flag is not None else "--" + field.replace("_", "-")


def API(field: str) -> str:
    return field


TIME_FIELDS = frozenset({"at", "since", "until", "deadline"})
"""Fields that name a moment: the API also takes an aware datetime for them."""


def decode(
    request_type: type[R], values: Mapping[str, Any], names: Names, *, strict: bool = True
) -> R:
    """`values` as a `request_type`, or the `InvalidInput` that says what is wrong.

    Not `strict`: the values are text to be read as their fields' types (a URL's
    query: `"12"` an integer, `"true"` a boolean)."""
    plan = _plan(request_type)
    if plan.times:
        values = {
            key: (_moment(names(key), value) if key in plan.times else value)
            for key, value in values.items()
        }
    try:
        request = msgspec.convert(values, request_type, strict=strict)
    except msgspec.ValidationError as error:
        raise _worded(request_type, plan, values, str(error), names) from None
    except UnicodeEncodeError:  # a lone surrogate (undecodable argv bytes) in a string
        raise _not_text(plan, values, names) from None
    return _checked(request, plan, names)


def decode_json(request_type: type[R], body: bytes, names: Names) -> R:
    """A JSON object (an HTTP request's body) as a `request_type`: decoded straight
    into the type, and through `decode` (for its wording) only when that fails."""
    plan = _plan(request_type)
    try:
        return _checked(msgspec.json.decode(body, type=request_type), plan, names)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError:
        raise InvalidInput("the body is not JSON", code=codes.INVALID_BODY) from None
    except RecursionError:
        raise _too_deep() from None
    try:
        values = msgspec.json.decode(body)
    except RecursionError:
        raise _too_deep() from None
    if not isinstance(values, dict):
        raise InvalidInput(
            f"the body must be a JSON object of parameters, not {type(values).__name__}",
            code=codes.INVALID_BODY,
        )
    return decode(request_type, values, names)


def _too_deep() -> InvalidInput:
    return InvalidInput("the body's JSON is nested too deeply", code=codes.INVALID_BODY)


def _checked(request: R, plan: "_Plan", names: Names) -> R:
    for field, check, known in plan.always:
        value = getattr(request, field)
        if value is not None and value not in known:
            check(names(field), value)
    request.check(names)
    return request


class _Plan:
    """What `decode` needs to know of a request type, found once per type."""

    __slots__ = ("always", "rules", "times")

    def __init__(self, request_type: type[Request]) -> None:
        hints = typing.get_type_hints(request_type, include_extras=True)
        self.rules: dict[str, Rule] = {}
        self.always: list[tuple[str, Callable[[str, Any], object], Container[Any]]] = []
        for field in request_type.__struct_fields__:
            rule = _rule_in(hints[field])
            if rule is not None:
                self.rules[field] = rule
                if rule.always:
                    self.always.append((field, rule.check, rule.known))
        self.times = frozenset(TIME_FIELDS & set(request_type.__struct_fields__))


_PLANS: dict[type[Request], _Plan] = {}


def field_rule(request_type: type[Request], field: str) -> Rule | None:
    """The Rule of a request's field (None for a field without one, or no such field):
    its `code` is the field's one error code."""
    return _plan(request_type).rules.get(field)


def _plan(request_type: type[Request]) -> _Plan:
    plan = _PLANS.get(request_type)
    if plan is None:
        plan = _PLANS[request_type] = _Plan(request_type)
    return plan


def description_of(hint: Any) -> str | None:
    """A field's own description: the outermost `msgspec.Meta(description=...)` of its
    annotation, the one msgspec's JSON Schema shows (a field's type, such as a token
    count, may carry a description of its own further in)."""
    metas = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, msgspec.Meta)]
    described = [m.description for m in metas if m.description is not None]
    return described[-1] if described else None


def field_descriptions(request_type: type[Request]) -> dict[str, str]:
    """Each field's description, in field order (a field without one is left out)."""
    hints = typing.get_type_hints(request_type, include_extras=True)
    found = {name: description_of(hints[name]) for name in request_type.__struct_fields__}
    return {name: text for name, text in found.items() if text is not None}


def documented(request_type: type[Request]) -> str:
    """The request type's docstring and its fields' descriptions: the docstring of the
    API's method (`--help` and /openapi.json say the same of each field)."""
    doc = inspect.cleandoc(request_type.__doc__ or "")
    fields = [f"    {name}: {text}" for name, text in field_descriptions(request_type).items()]
    return f"{doc}\n\nParameters:\n" + "\n".join(fields) if fields else doc


def _rule_in(hint: Any) -> Rule | None:
    """The Rule of a field's type, looking through `X | None` and `list[X]`."""
    for meta in getattr(hint, "__metadata__", ()):
        if isinstance(meta, Rule):
            return meta
    for inner in typing.get_args(hint):
        rule = _rule_in(inner)
        if rule is not None:
            return rule
    return None


def _not_text(plan: "_Plan", values: Mapping[str, Any], names: Names) -> InvalidInput:
    """The field whose string UTF-8 cannot hold, with its rule's code (its one code)."""
    for field, value in values.items():
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, str) and not _encodes(item):
                rule = plan.rules.get(field)
                return InvalidInput(
                    f"{names(field)} is not valid UTF-8 text",
                    code=codes.INVALID_TEXT if rule is None else rule.code,
                    parameter=names(field),
                )
    return InvalidInput("a value is not valid UTF-8 text", code=codes.INVALID_TEXT)


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


_AT_FIELD = re.compile(r"at `\$\.([A-Za-z_][A-Za-z0-9_]*)")
_UNKNOWN = re.compile(r"unknown field `([^`]*)`")
_MISSING = re.compile(r"missing required field `([^`]*)`")


def _worded(
    request_type: type[Request], plan: _Plan, values: Mapping[str, Any], message: str, names: Names
) -> InvalidInput:
    """msgspec's complaint as the field's own rule words it (or plainly, when the
    value is of the wrong kind altogether)."""
    if match := _UNKNOWN.search(message):
        return InvalidInput(
            f"unknown parameter {names(match.group(1))!r}",
            code=codes.INVALID_ARGUMENT,
            parameter=names(match.group(1)),
        )
    if match := _MISSING.search(message):
        return InvalidInput(
            f"{names(match.group(1))} is required",
            code=codes.INVALID_ARGUMENT,
            parameter=names(match.group(1)),
        )
    match = _AT_FIELD.search(message)
    if match is None:
        return InvalidInput(message, code=codes.INVALID_ARGUMENT)
    field = match.group(1)
    value = values.get(field)
    rule = plan.rules.get(field)
    wrong_kind = ", got `" in message  # not a value its rule could read at all
    if rule is not None and not wrong_kind:
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            rule.check(names(field), item)  # raises when the rule is what was broken
    expected = message.split(" - at ", 1)[0].split(", got ", 1)[0]
    expected = expected.removeprefix("Expected ").replace("`", "")
    kinds = [_KIND_WORDS.get(kind, kind) for kind in expected.split(" | ") if kind != "null"]
    if field in plan.times:
        kinds = ["an aware datetime or an RFC 3339 string"]
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    given = shown if value is None else f"{type(value).__name__} {shown}"
    return InvalidInput(
        f"{names(field)} must be {' or '.join(kinds)}, not {given}",
        code=codes.INVALID_ARGUMENT,
        parameter=names(field),
    )


def plain_complaint(message: str) -> str:
    """msgspec's complaint about a value inside a field, in words (no `$`, no type
    names): `Expected `int`, got `str` - at `$[...].limit`` as `expected an integer,
    got a string at [...].limit`."""
    text, _, where = message.partition(" - at ")
    text = re.sub(
        r"`([^`]*)`",
        lambda kinds: " or ".join(_KIND_WORDS.get(k, k) for k in kinds.group(1).split(" | ")),
        text,
    )
    text = text[:1].lower() + text[1:]
    where = where.replace("`", "").replace("$", "").lstrip(".")
    return f"{text} at {where}" if where else text


_KIND_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "array": "a sequence of strings",
    "object": "an object",
    "null": "null",
}


def _moment(name: str, value: Any) -> Any:
    """An aware datetime as canonical RFC 3339 text; anything else as it is."""
    if not isinstance(value, dt.datetime):
        return value
    offset = value.utcoffset()
    if offset is None:
        raise InvalidInput(
            f"{name} must be an aware datetime (with a time zone), not {value!r}",
            code=codes.INVALID_ARGUMENT,
            parameter=name,
        )
    naive = value.replace(tzinfo=None) - offset
    return format_us((naive - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1))


def builtins(answer: Answer) -> dict[str, Any]:
    """An answer as the dict `--json` prints (what the Python API returns)."""
    result: dict[str, Any] = msgspec.to_builtins(answer)
    return result


T = TypeVar("T", bound=msgspec.Struct)


def typed(answer_type: type[T], data: Mapping[str, Any]) -> T:
    """An answer (or a part of one) the Python API returned as a dict, as the typed
    answer (`builtins` undone): for code that renders an API answer as the CLI does."""
    return msgspec.convert(data, answer_type)
