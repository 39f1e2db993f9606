"""Constrained value types shared by every domain's event payloads (SPEC §8).

They are checked when a payload is decoded, which happens right before an event is
written and whenever it is read back, so the API and the CLI cannot write a value
the spec forbids.

The modules that define msgspec Structs (payloads, states, records, checkpoints) do
not use `from __future__ import annotations`: with string annotations msgspec
compiles and evaluates every one of them each time a decoder is built, which a CLI
call that loads a checkpoint does over the whole state (some 200 strings, about a
tenth of the call). tests/package/test_layering.py keeps it so.
"""

import inspect
import sys
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.clock import CANONICAL_AT_PATTERN, names_a_real_second
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.identifier import IDENTIFIER_PATTERN as IDENTIFIER_PATTERN
from quotaledger.journal.identifier import IDENTIFIERS_KNOWN as IDENTIFIERS_KNOWN
from quotaledger.journal.identifier import has_identifier_chars, not_an_identifier
from quotaledger.projections.limits import (
    FREE_TEXT_BYTES_MAX,
    IDENTIFIER_CHARS_MAX,
    TOKEN_COUNT_MAX,
    byte_size,
)


class _IdentifierChars:
    """Marks a field whose characters Payload.__post_init__ checks (msgspec ignores it).

    The same rule as IDENTIFIER_PATTERN, checked with `str.strip` instead of msgspec's
    `pattern`: that calls into `re` for every identifier of every payload, which
    costs about 5 µs on the first append after an fdatasync (cold caches) and 0.2 µs
    warm, on every durable append and every record a fold or verify reads.
    """


Identifier = Annotated[
    str, msgspec.Meta(min_length=1, max_length=IDENTIFIER_CHARS_MAX), _IdentifierChars()
]
TokenCount = Annotated[int, msgspec.Meta(ge=0, le=TOKEN_COUNT_MAX)]


class _TextBytes:
    """Marks a free-text field (or a list of them) whose UTF-8 size Payload.__post_init__
    checks: SPEC §8 bounds free text at 4 KiB, in bytes as the services' `check_text`
    counts, while msgspec's `max_length` counts characters. The `max_length` stays as a
    first, cheap check: a text with more characters than the bytes allowed is too long."""


FreeText = Annotated[str, msgspec.Meta(max_length=FREE_TEXT_BYTES_MAX), _TextBytes()]
TEXT_SIZE = byte_size(FREE_TEXT_BYTES_MAX)
"""The bound as messages state it (4 KiB)."""
TEXT_CHARS_ALWAYS_FIT = FREE_TEXT_BYTES_MAX // 4
"""A text of at most this many characters fits whatever they are (UTF-8 takes at most
four bytes a character), so only a longer one is encoded to be measured."""
Sha256Hex = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}\Z")]


class _RealTime:
    """Marks a time field whose date Payload.__post_init__ checks (msgspec ignores it):
    the pattern accepts 2026-02-30, and a payload that folds to an error must not
    verify (SPEC §2.4: a record verifies when its payload decodes)."""


CanonicalAt = Annotated[str, msgspec.Meta(pattern=CANONICAL_AT_PATTERN), _RealTime()]
"""A canonical `at` string inside a payload (RFC 3339 UTC, microseconds, Z)."""


class TextTooLong(InvalidInput, ValueError):
    """A free-text field longer than 4 KiB in UTF-8 (reported as InvalidIdentifier is):
    `invalid_text`, free text's one code (SPEC §8), the message naming the limit."""

    code = codes.INVALID_TEXT


class InvalidPayloadTime(InvalidInput, ValueError):
    """A time field naming no real moment, e.g. 2026-02-30 (reported as
    InvalidIdentifier is)."""

    code = codes.INVALID_TIME


class Payload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base of every event payload: immutable, strict, tag named by the registry.

    Untracked by the cycle collector: a payload is a tree decoded from JSON (or built
    from values to be encoded as one), never part of a cycle, and a batch allocates a
    thousand of them per transaction; tracking them made batched appends 20% slower.
    """

    def __post_init__(self) -> None:
        # msgspec checks an identifier's length and a time's shape; an identifier's
        # characters and a time's date are checked here.
        checked = _CHECKED_FIELDS.get(type(self))
        if checked is None:
            checked = _CHECKED_FIELDS[type(self)] = _checked_fields(type(self))
        identifiers, times, texts = checked
        for name in identifiers:
            value = getattr(self, name)
            if value is not None and value not in IDENTIFIERS_KNOWN:
                check_identifier(name, value)
        for name in times:
            value = getattr(self, name)
            # The shape is msgspec's `pattern` check (on decode, and so before any
            # append); the date is checked here, from a cache of seconds.
            if value is not None and not names_a_real_second(value):
                raise InvalidPayloadTime(f"{name} {value!r} is not a real time from 1970 to 9999")
        for name in texts:
            value = getattr(self, name)
            if isinstance(value, str):  # the common case: one short text, no call
                if len(value) > TEXT_CHARS_ALWAYS_FIT:
                    check_text(name, value)
            elif value is not None and any(map(_too_long, value)):
                raise TextTooLong(f"{name} is longer than {TEXT_SIZE}")


def check_identifier(name: str, value: str) -> None:
    """Refuse `value` (field `name`) unless it is made of IDENTIFIER_CHARS (its length
    is msgspec's check): the engine's rule (journal.identifier), which remembers it."""
    if not has_identifier_chars(value):
        raise not_an_identifier(name, value)


def check_text(name: str, value: str) -> None:
    """Refuse a free text (field `name`) longer than 4 KiB in UTF-8."""
    if _too_long(value):
        raise TextTooLong(f"{name} is longer than {TEXT_SIZE}")


def _too_long(text: str) -> bool:
    # surrogatepass: a lone surrogate is measured (three bytes), not raised on.
    return len(text.encode("utf-8", "surrogatepass")) > FREE_TEXT_BYTES_MAX


_Names = tuple[str, ...]
_CHECKED_FIELDS: dict[type[Payload], tuple[_Names, _Names, _Names]] = {}
"""Each payload type's Identifier, CanonicalAt and FreeText fields, found on first use."""


def _checked_fields(cls: type[Payload]) -> tuple[_Names, _Names, _Names]:
    annotations = _field_annotations(cls)
    return (
        _marked_fields(annotations, _IdentifierChars),
        _marked_fields(annotations, _RealTime),
        _marked_fields(annotations, _TextBytes, in_lists=True),
    )


def _marked_fields(
    annotations: dict[str, Any], marker: type, *, in_lists: bool = False
) -> tuple[str, ...]:
    """The fields annotated with `marker`; with `in_lists`, also lists of such values
    (`Annotated[list[FreeText], ...]`)."""

    def marked(annotation: Any) -> bool:  # e.g. Identifier or Identifier | None
        origin = get_origin(annotation)
        if origin is Annotated:
            base, *extras = get_args(annotation)
            return any(isinstance(extra, marker) for extra in extras) or marked(base)
        if origin in (Union, UnionType):
            return any(marked(arg) for arg in get_args(annotation))
        if in_lists and origin is list:
            return marked(get_args(annotation)[0])
        return False

    return tuple(name for name, annotation in annotations.items() if marked(annotation))


def _field_annotations(cls: type[Payload]) -> dict[str, Any]:
    """Each field's annotation, evaluated if it is a string (a payload type defined
    in a module with postponed annotations, such as a test's), each module's strings
    once."""
    found: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        namespace = sys.modules[base.__module__].__dict__
        for name, annotation in inspect.get_annotations(base).items():
            found[name] = _evaluated(annotation, namespace)
    return {name: found[name] for name in cls.__struct_fields__}


_EVALUATED: dict[tuple[str, str], Any] = {}


def _evaluated(annotation: Any, namespace: dict[str, Any]) -> Any:
    if not isinstance(annotation, str):
        return annotation
    key = (namespace["__name__"], annotation)
    value = _EVALUATED.get(key, _EVALUATED)
    if value is _EVALUATED:
        value = _EVALUATED[key] = eval(annotation, namespace)  # what typing would do
    return value


class StateStruct(msgspec.Struct, kw_only=True):
    """Base of mutable projection state (checkpointed with MessagePack)."""
