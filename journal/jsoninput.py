"""JSON a user hands in (a usage body, provider headers), parsed with bounds (SPEC §8).

    body = parse_bounded(text)      # raises JsonInputError(reason) when it is not one

Python's parser recurses once per nesting level and converts integers of any length,
so a body nested a thousand levels deep ends in a RecursionError and one of 5,000
digits in a ValueError from deep inside: neither says which input was wrong. Here the
depth is measured before parsing (a scan that skips strings) and every number is
bounded while it is parsed; the caller words the reason with its own option and code.
"""

from __future__ import annotations

import json
import re
from typing import Any

from quotaledger.journal.limits import JSON_DEPTH_MAX, NUMBER_CHARS_MAX

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class JsonInputError(ValueError):
    """Why a text is not bounded JSON, in words a message can end with."""


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects, strings skipped (a bracket inside
    a string is text)."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def _number(kind: type) -> Any:
    def parse(text: str) -> Any:
        if len(text) > NUMBER_CHARS_MAX:
            raise JsonInputError(f"a number of {len(text)} characters (at most {NUMBER_CHARS_MAX})")
        return kind(text)

    return parse


def _constant(name: str) -> Any:
    raise JsonInputError(f"{name} is not a JSON number")


def parse_bounded(text: str) -> Any:
    """`text` as JSON, nested at most JSON_DEPTH_MAX deep, numbers of at most
    NUMBER_CHARS_MAX characters, no NaN or Infinity; else JsonInputError."""
    depth = _depth(text)
    if depth > JSON_DEPTH_MAX:
        raise JsonInputError(f"nested {depth} levels deep (at most {JSON_DEPTH_MAX})")
    try:
        return json.loads(
            text,
            parse_int=_number(int),
            parse_float=_number(float),
            parse_constant=_constant,
        )
    except JsonInputError:
        raise
    except (ValueError, RecursionError) as exc:
        raise JsonInputError(str(exc)) from None


__all__ = ["JSON_DEPTH_MAX", "JsonInputError", "parse_bounded"]
