"""The constrained value types requests are made of, each with the rule that says
what is wrong with a bad value (SPEC §8): identifiers, token counts, free text,
times, choices. The constraint (msgspec `Meta`) is what decoding checks and what the
JSON Schema shows; the `Rule` beside it words the error with its code."""

from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.identifier import IDENTIFIER_PATTERN, is_identifier, not_an_identifier
from quotaledger.projections.limits import (
    FREE_TEXT_BYTES_MAX,
    IDENTIFIER_CHARS_MAX,
    TOKEN_COUNT_MAX,
    byte_size,
    power_of_ten,
)


class Rule:
    """Attached to a constrained type: `check(name, value)` raises the precise error
    for a value that broke the constraint, `name` being the caller's word for it.

    `always`: the check also runs on every decoded value, for what a msgspec
    constraint cannot say (text measured in UTF-8 bytes, a choice's own wording)."""

    __slots__ = ("always", "check")

    def __init__(self, check: Callable[[str, Any], object], *, always: bool = False) -> None:
        self.check = check
        self.always = always


def check_identifier(name: str, value: str) -> str:
    if isinstance(value, str) and not is_identifier(value):
        raise not_an_identifier(name, value, option=name)
    return value


def check_tokens(name: str, value: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= TOKEN_COUNT_MAX:
        raise InvalidInput(
            f"{name} must be an integer from 0 to {power_of_ten(TOKEN_COUNT_MAX)}, got {value}",
            code=codes.INVALID_TOKEN_COUNT,
            option=name,
        )
    return value


def check_text(name: str, value: str) -> str:
    if not isinstance(value, str):
        return value
    try:
        encoded = value.encode()
    except UnicodeEncodeError:  # undecodable bytes from argv arrive as lone surrogates
        raise InvalidInput(
            f"{name} is not valid UTF-8 text", code=codes.INVALID_TEXT, option=name
        ) from None
    if len(encoded) > FREE_TEXT_BYTES_MAX:
        raise InvalidInput(
            f"{name} is longer than {byte_size(FREE_TEXT_BYTES_MAX)}",
            code=codes.TEXT_TOO_LONG,
            option=name,
        )
    return value


def check_choice(choices: tuple[str, ...]) -> Callable[[str, Any], object]:
    def check(name: str, value: Any) -> object:
        if value not in choices:
            raise InvalidInput(
                f"{name} must be one of {', '.join(choices)}, got {value!r}",
                code=codes.INVALID_CHOICE,
                option=name,
            )
        return value

    return check


Identifier = Annotated[
    str,
    msgspec.Meta(
        pattern=IDENTIFIER_PATTERN.replace("\\Z", "$"),
        max_length=IDENTIFIER_CHARS_MAX,
        description=f"1-{IDENTIFIER_CHARS_MAX} characters of A-Za-z0-9._:@/-",
    ),
    Rule(check_identifier),
]
"""An identifier (goal, run, case, lane, attempt, session, profile, agent, turn, task,
replan). The schema's `$` stands for the check's `\\Z` (which refuses a trailing
newline): JSON Schema's dialect has no `\\Z`; `check_identifier` is what decides."""
TokenCount = Annotated[
    int,
    msgspec.Meta(
        ge=0, le=TOKEN_COUNT_MAX, description=f"A token count, 0..{power_of_ten(TOKEN_COUNT_MAX)}"
    ),
    Rule(check_tokens),
]
FreeText = Annotated[
    str,
    # Characters, a first and cheap bound: the rule counts the UTF-8 bytes.
    msgspec.Meta(
        max_length=FREE_TEXT_BYTES_MAX,
        description=f"Free text, at most {byte_size(FREE_TEXT_BYTES_MAX)}",
    ),
    Rule(check_text, always=True),
]
Time = Annotated[str, msgspec.Meta(description="RFC 3339 with a time zone")]
"""A moment as RFC 3339 text; the API also takes an aware datetime, which `decode`
turns into this text. Its value is checked where it is used (`journal.clock`)."""


def choice(choices: tuple[str, ...], description: str) -> Any:
    """A string type that must be one of `choices`, worded as SPEC §8 has it
    (`invalid_choice`); the schema lists the choices in its description."""
    described = f"{description} One of: {', '.join(choices)}."
    return Annotated[
        str, msgspec.Meta(description=described), Rule(check_choice(choices), always=True)
    ]
