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
import math
import re
import typing
from collections.abc import Callable, Container, Mapping
from math import isfinite
from typing import Any, TypeVar

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.clock import format_us
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import INTEGER_DIGITS_MAX
from quotaledger.journal.store import PendingRecord
from quotaledger.usecases.fields import Rule


class Request(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What a caller asks of one use case; every field is a keyword of the API."""

    def check(self, names: Callable[[str], str]) -> None:
        """The rules across fields (exactly one of two options, a range in order),
        worded with the caller's `names`; `decode` calls it once each field is valid."""

    def check_contents(self) -> None:
        """The rules of what a document the request carries holds (a usage body,
        provider headers), which its service reads anyway as it carries the request
        out, with these very functions: a client of a server runs them before sending
        (`remote.checked`), so a bad one is refused there with the local call's error;
        the local call does not read them twice."""


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


HTTP_KEY_OF_FIELD = {"class_": "class"}
"""Fields whose HTTP body or query key is not the Python keyword: named over HTTP as
the answers and the journal name them (SPEC §11), where Python cannot (a keyword)."""
FIELD_OF_HTTP_KEY = {key: field for field, key in HTTP_KEY_OF_FIELD.items()}


def HTTP(field: str) -> str:
    return HTTP_KEY_OF_FIELD.get(field, field)


def fields_of_http(values: Mapping[str, Any]) -> dict[str, Any]:
    """An HTTP body's or query's keys as the request's fields (`class` as `class_`);
    the Python spelling is not a key over HTTP (refused as any unknown one)."""
    found: dict[str, Any] = {}
    for key, value in values.items():
        if key in HTTP_KEY_OF_FIELD:
            raise InvalidInput(
                f"unknown parameter {key!r} (over HTTP it is {HTTP(key)!r})",
                code=codes.INVALID_ARGUMENT,
                parameter=key,
            )
        found[FIELD_OF_HTTP_KEY.get(key, key)] = value
    return found


TIME_FIELDS = frozenset({"at", "since", "until", "deadline"})
"""Fields that name a moment: the API also takes an aware datetime for them."""


def decode(
    request_type: type[R], values: Mapping[str, Any], names: Names, *, strict: bool = True
) -> R:
    """`values` as a `request_type`, or the `InvalidInput` that says what is wrong.

    Not `strict`: the values are text to be read as their fields' types (a URL's
    query: `"12"` an integer, `"true"` a boolean)."""
    return _decode(request_type, values, names, strict)


def _decode(request_type: type[R], values: Mapping[str, Any], names: Names, strict: bool) -> R:
    plan = _plan(request_type)
    plain = _plain(values)
    if not plain:
        _refuse_huge_integers(request_type, values, names, strict)
        _refuse_non_finite(plan, values, names)
    if plan.times and not plain:  # plain: no datetime among the values, nothing to convert
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
    if not plain:  # else every field JSON takes any value of holds JSON or its default
        _refuse_non_json(request, plan, names)
    return _checked(request, plan, names)


_HUGE: int = 10**INTEGER_DIGITS_MAX
_HUGE_BITS = _HUGE.bit_length()
_STAND_IN = _HUGE - 1
"""The largest integer an input may carry: beyond every bound, yet printable."""


def _is_huge(value: Any) -> bool:
    return type(value) is int and abs(value).bit_length() >= _HUGE_BITS and abs(value) >= _HUGE


def _plain(values: Mapping[str, Any]) -> bool:
    """Whether every value is text, None, a bool, an integer short of `_HUGE` or a
    finite float: nothing the screens refuse (huge integers, NaN and infinities, what
    JSON cannot carry), which a runner's every call then does not walk again, one
    function call a value."""
    for value in values.values():
        kind = type(value)
        if kind is str or value is None or kind is bool:
            continue
        if kind is int:
            if -_HUGE < value < _HUGE:
                continue
        elif kind is float and isfinite(value):
            continue
        return False
    return True


def _refuse_huge_integers(
    request_type: type[R], values: Mapping[str, Any], names: Names, strict: bool
) -> None:
    """Refuse an integer of more than `INTEGER_DIGITS_MAX` digits with the code its
    field gives any out-of-range integer (found by decoding a printable stand-in that
    is beyond every bound), before anything tries to print it."""
    for field, value in values.items():
        items = value if isinstance(value, list | tuple) else [value]
        if not any(_is_huge(item) for item in items):
            continue
        stand_in = [
            (_STAND_IN if item > 0 else -_STAND_IN) if _is_huge(item) else item for item in items
        ]
        try:
            decode(
                request_type,
                {**values, field: stand_in if isinstance(value, list | tuple) else stand_in[0]},
                names,
                strict=strict,
            )
        except InvalidInput as error:
            code = error.code
        else:
            code = codes.INVALID_ARGUMENT
        raise InvalidInput(
            f"{names(field)} is out of range: an integer of more than {INTEGER_DIGITS_MAX} digits",
            code=code,
            parameter=names(field),
        )


def _refuse_non_finite(plan: "_Plan", values: Mapping[str, Any], names: Names) -> None:
    """Refuse NaN or an infinity anywhere in a value, with its field's one code: no
    bound holds it, and JSON cannot carry it (encoded, it would become null)."""
    for field, value in values.items():
        if _non_finite_in(value, 0):
            rule = plan.rules.get(field)
            raise InvalidInput(
                f"{names(field)} must be a finite number, not {value!r}"
                if isinstance(value, float)
                else f"{names(field)} holds a number that is not finite (NaN or infinity)",
                code=codes.INVALID_ARGUMENT if rule is None else rule.code,
                parameter=names(field),
            )


def _non_finite_in(value: Any, depth: int) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if depth > _SCREEN_DEPTH_MAX:
        return False  # too deep to be a request: its own rule refuses it
    if isinstance(value, dict):
        return any(_non_finite_in(item, depth + 1) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_non_finite_in(item, depth + 1) for item in value)
    return False


_SCREEN_DEPTH_MAX = 64
_NOT_JSON = (bytes, bytearray, memoryview, dt.date, dt.time, dt.timedelta, set, frozenset, complex)
"""Values JSON has no form for, that an encoder would turn into something else
(bytes into base64 text, a timedelta into ISO 8601 text). An SDK's object or a
mapping of headers is left to the field's own reader."""


def _refuse_non_json(request: Request, plan: "_Plan", names: Names) -> None:
    """Refuse a value JSON cannot carry (bytes, a timedelta, a set) in a field that
    takes any JSON (a usage report, provider headers), with the field's one code: the
    Python API and a client of a server then answer it alike, and a client never
    sends it as something else."""
    for field in plan.open_fields:
        foreign = _first_foreign(getattr(request, field), 0)
        if foreign is not None:
            rule = plan.rules.get(field)
            raise InvalidInput(
                f"{names(field)} holds a {type(foreign).__name__}, which is not JSON",
                code=codes.INVALID_ARGUMENT if rule is None else rule.code,
                parameter=names(field),
            )


def _first_foreign(value: Any, depth: int) -> Any:
    if isinstance(value, _NOT_JSON):
        return value
    if depth > _SCREEN_DEPTH_MAX:
        return None
    if isinstance(value, dict):
        for item in value.values():
            found = _first_foreign(item, depth + 1)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for item in value:
            found = _first_foreign(item, depth + 1)
            if found is not None:
                return found
    return None


def _json_integer(text: str) -> int:
    """An integer of a JSON body; one too long to convert stands in as a huge one
    (refused by `_refuse_huge_integers`, never printed)."""
    if len(text) > INTEGER_DIGITS_MAX + 1:
        return -(_HUGE * 10) if text.startswith("-") else _HUGE * 10
    return int(text)


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def decode_json(request_type: type[R], body: bytes, names: Names) -> R:
    """A JSON object (an HTTP request's body, its keys HTTP's: `fields_of_http`) as a
    `request_type`: decoded straight into the type (or, where a key is not its field's
    name, into a dict first), and through the standard library's parser (for its
    wording) only when that fails."""
    plan = _plan(request_type)
    found = _decode_fast(request_type, plan, body, names)
    if found is not None:
        return found
    try:
        # The standard library's parser, on this path only: msgspec refuses a number
        # out of its range (1e400, 5,000 digits) as if the body were not JSON, where
        # it is JSON with a value out of its field's range.
        import json  # this path only: a writer's every valid body never loads it

        values = json.loads(body, parse_int=_json_integer, parse_constant=_no_constant)
    except RecursionError:
        raise _too_deep() from None
    except ValueError:  # malformed after all (msgspec's fast path let it through)
        raise InvalidInput("the body is not JSON", code=codes.INVALID_BODY) from None
    if not isinstance(values, dict):
        raise InvalidInput(
            f"the body must be a JSON object of parameters, not {type(values).__name__}",
            code=codes.INVALID_BODY,
        )
    return _decode(request_type, fields_of_http(values), names, True)


def _decode_fast(request_type: type[R], plan: "_Plan", body: bytes, names: Names) -> R | None:
    """The request msgspec decodes from `body` at once, or None to say why slowly."""
    if plan.renamed:  # keys to rename first: a dict (msgspec's, fast), then the type
        try:
            given = msgspec.json.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if not isinstance(given, dict):
            return None
        try:  # JSON holds no huge integer, NaN or bytes here: msgspec's checks suffice
            return _checked(msgspec.convert(fields_of_http(given), request_type), plan, names)
        except msgspec.ValidationError:
            return None
    try:
        return _checked(msgspec.json.decode(body, type=request_type), plan, names)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError:
        raise InvalidInput("the body is not JSON", code=codes.INVALID_BODY) from None
    except RecursionError:
        raise _too_deep() from None


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

    __slots__ = ("always", "open_fields", "renamed", "rules", "times")

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
        self.renamed = bool(HTTP_KEY_OF_FIELD.keys() & set(request_type.__struct_fields__))
        self.open_fields = tuple(
            field for field in request_type.__struct_fields__ if _takes_any(hints[field])
        )
        """Fields whose type takes any value (a JSON document): checked for JSON."""


def _takes_any(hint: Any) -> bool:
    if hint is Any:
        return True
    return any(_takes_any(arg) for arg in typing.get_args(hint))


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
