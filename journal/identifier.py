"""The identifier rule (SPEC §8), stated once: 1-128 characters of A-Za-z0-9._:@/-.

Goals (which the engine checks on every append), runs, lanes, agents... The request
types (usecases.fields), the payload types (projections.types) and `txn.append` all
check with what is here.
"""

from __future__ import annotations

import re
from typing import Any

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput

IDENTIFIER_CHARS_MAX = 128
IDENTIFIER_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@/-"
"""The characters an identifier is made of (SPEC §8: A-Za-z0-9._:@/-)."""
# \Z: "$" would accept a trailing newline.
IDENTIFIER_PATTERN = rf"^[{re.escape(IDENTIFIER_CHARS)}]{{1,{IDENTIFIER_CHARS_MAX}}}\Z"
"""The identifier rule as a regular expression (what a JSON Schema shows)."""

IDENTIFIERS_KNOWN: set[str] = set()
"""Identifiers already found to be made of IDENTIFIER_CHARS. Runs, goals and lanes
recur on event after event, and a set lookup costs a fifth of the character check
(`str.strip` over 67 characters), which every payload decoded pays: a fold reads
hundreds of thousands. The same rule, remembered; bounded by IDENTIFIERS_KNOWN_MAX."""
IDENTIFIERS_KNOWN_MAX = 65_536


class InvalidIdentifier(InvalidInput, ValueError):
    """A value that is not an identifier (exit 2). Also a ValueError: raised inside a
    payload's __post_init__, msgspec reports it as a ValidationError when decoding."""

    code = codes.INVALID_IDENTIFIER


def has_identifier_chars(value: str) -> bool:
    """Whether every character of `value` is one of IDENTIFIER_CHARS (its length is
    checked apart: msgspec's `max_length` in payloads); remembered if so."""
    if value in IDENTIFIERS_KNOWN:
        return True
    if value.strip(IDENTIFIER_CHARS):
        return False
    if type(value) is str:  # a subclass could compare equal to another string
        if len(IDENTIFIERS_KNOWN) >= IDENTIFIERS_KNOWN_MAX:
            IDENTIFIERS_KNOWN.clear()
        IDENTIFIERS_KNOWN.add(value)
    return True


def is_identifier(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= IDENTIFIER_CHARS_MAX
        and has_identifier_chars(value)
    )


def not_an_identifier(
    name: str, value: object, *, about: bool = False, **context: Any
) -> InvalidIdentifier:
    """The error for `value` given as `name`: the caller's word for it, or (`about`)
    the engine's parameter, which a caller with other names words its own way."""

    def message(word: str) -> str:
        return (
            f"{word} {value!r} is not an identifier (1-{IDENTIFIER_CHARS_MAX} characters of "
            "A-Z a-z 0-9 . _ : @ / -)"
        )

    if about:
        return InvalidIdentifier(message, about=name, **context)
    return InvalidIdentifier(message(name), **context)


def check_identifier(name: str, value: str, **context: Any) -> str:
    """`value`, if it is an identifier; else the error naming it `name`."""
    if not is_identifier(value):
        raise not_an_identifier(name, value, **context)
    return value
