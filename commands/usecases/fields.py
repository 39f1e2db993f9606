"""The constrained value types requests are made of, each with the rule that says
what is wrong with a bad value (SPEC §8): identifiers, token counts, free text,
times, choices. The constraint (msgspec `Meta`) is what decoding checks and what the
JSON Schema shows; the `Rule` beside it words the error with its code."""

import math
import re
from collections.abc import Callable, Container
from typing import Annotated, Any

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.clock import check_moment, parse_deadline_us
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.identifier import (
    IDENTIFIER_PATTERN,
    IDENTIFIERS_KNOWN,
    is_identifier,
    not_an_identifier,
)
from quotaledger.projections import limits
from quotaledger.projections.capacity.events import share_units
from quotaledger.projections.capacity.money import USD_DECIMALS, USD_MAX, micro_of
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
    constraint cannot say (text measured in UTF-8 bytes, a choice's own wording).
    `code`: the error code of a bad value (SPEC §8: every bad value of one option gets
    that option's one code), which the CLI also gives a value its parser refuses.
    `known`: values the check is known to pass once the msgspec constraint has (the
    check's own memo), which `decode` does not check again."""

    __slots__ = ("always", "check", "code", "known")

    def __init__(
        self,
        check: Callable[[str, Any], object],
        *,
        code: str,
        always: bool = False,
        known: Container[Any] = (),
    ) -> None:
        self.check = check
        self.always = always
        self.code = code
        self.known = known


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


def check_text(name: str, value: str, *, not_utf8: str = "is not valid UTF-8 text") -> str:
    if not isinstance(value, str):
        return value
    try:
        encoded = value.encode()
    except UnicodeEncodeError:  # undecodable bytes from argv arrive as lone surrogates
        raise InvalidInput(f"{name} {not_utf8}", code=codes.INVALID_TEXT, option=name) from None
    if b"\0" in encoded:
        # A NUL is text to no reader (a C string ends there) and no PostgreSQL text
        # column stores it: refused here, on every store, not left to PostgreSQL (whose
        # exit 4 invites a retry forever) or to an import that then fails.
        raise InvalidInput(
            f"{name} holds a NUL character, which no text may", code=codes.INVALID_TEXT, option=name
        )
    if len(encoded) > FREE_TEXT_BYTES_MAX:
        # One code per condition (SPEC §8): a text too long is a bad text; the message
        # says which limit it broke.
        raise InvalidInput(
            f"{name} is longer than {byte_size(FREE_TEXT_BYTES_MAX)} "
            f"({len(encoded)} bytes in UTF-8)",
            code=codes.INVALID_TEXT,
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


def check_member(choices: tuple[str, ...], code: str) -> Rule:
    """One of `choices`, for an option whose wrong value has a code of its own
    (`--outcome`: `invalid_outcome`); the choices are the type's `Literal`."""

    def check(name: str, value: Any) -> object:
        if isinstance(value, str) and value not in choices:
            raise InvalidInput(f"{name} must be one of {', '.join(choices)}", code=code)
        return value

    return Rule(check, code=code)


def sha256_hex(value: str) -> str | None:
    """A SHA-256 hex digest as stored (trimmed, lower case), or None if it is not one."""
    digest = value.strip().lower()
    if len(digest) != 64 or not set(digest) <= _HEX:
        return None
    return digest


def check_digest(what: str, code: str) -> Callable[[str, Any], object]:
    def check(name: str, value: Any) -> object:
        if isinstance(value, str) and sha256_hex(value) is None:
            raise InvalidInput(f"{name} {value!r} is not {what}", code=code)
        return value

    return check


def check_range(message: str, code: str, low: float | None, high: float | None) -> Rule:
    """An integer from `low` to `high` (None: unbounded), worded by `message` with
    `{name}`, `{value}`, `{low}` and `{high}`."""

    def check(name: str, value: Any) -> object:
        if not isinstance(value, int) or isinstance(value, bool):
            return value  # a wrong kind of value: decode says so
        if not ((low is None or low <= value) and (high is None or value <= high)):
            worded = message.format(name=name, value=value, low=low, high=high)
            raise InvalidInput(worded, code=code)
        return value

    return Rule(check, code=code)


_HEX = frozenset("0123456789abcdef")


def check_effect(name: str, value: str) -> str:
    if isinstance(value, str) and not _EFFECT.match(value):
        raise InvalidInput(
            f"{name} {value!r} is not an effect id (32 lowercase hex digits, as printed by "
            "`turn writeback` and `turn resume`)",
            code=codes.INVALID_EFFECT,
            option=name,
        )
    return value


def check_window_hours(name: str, value: float) -> float:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and not (math.isfinite(value) and 0 < value <= limits.WINDOW_HOURS_MAX):
        raise InvalidInput(
            f"{name} must be a number > 0 and <= {limits.WINDOW_HOURS_MAX}, got {value}",
            code=codes.INVALID_WINDOW_HOURS,
            option=name,
        )
    return value


def check_probe_text(name: str, value: str) -> str:
    """Free text as `probe run` words it (SPEC §6 predates `check_text`'s wording)."""
    return check_text(name, value, not_utf8="is not valid UTF-8")


def check_command(name: str, value: list[str]) -> list[str]:
    """The probed command: one to 1024 arguments, the first not empty."""
    if not isinstance(value, list):
        return value  # one argument, of the wrong kind: `decode` words it
    if not value or not value[0]:
        raise InvalidInput(
            "give the command to probe after `--`: probe run --goal G -- CMD ARGS...",
            code=codes.COMMAND_MISSING,
        )
    if len(value) > limits.COMMAND_ARGS_MAX:
        raise InvalidInput(
            f"the command has more than {limits.COMMAND_ARGS_MAX} arguments",
            code=codes.COMMAND_TOO_LONG,
        )
    for arg in value:
        check_probe_text(name, arg)
    return value


def check_candidates(name: str, value: list[str]) -> list[str]:
    """At most 256 candidate files, a repeated one counted once."""
    if not isinstance(value, list):
        return value
    paths = list(dict.fromkeys(value))
    if len(paths) > limits.CANDIDATES_MAX:
        raise InvalidInput(
            f"at most {limits.CANDIDATES_MAX} {name} files", code=codes.TOO_MANY_CANDIDATES
        )
    for path in paths:
        check_probe_text(name, path)
    return value


def check_sidecar(name: str, value: str) -> str:
    if value == "":
        raise InvalidInput(f"{name} needs a path", code=codes.INVALID_OPTION, option=name)
    return check_probe_text(name, value)


def check_within(words: str, inside: Callable[[float], bool]) -> Callable[[str, Any], object]:
    """A number that must be `inside` its range, which `words` say (`invalid_option`)."""

    def check(name: str, value: Any) -> object:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and not inside(value):
            raise InvalidInput(f"{name} must be {words}", code=codes.INVALID_OPTION, option=name)
        return value

    return check


_EFFECT_PATTERN = r"^[0-9a-f]{32}$"
_EFFECT = re.compile(_EFFECT_PATTERN)


Identifier = Annotated[
    str,
    msgspec.Meta(
        pattern=IDENTIFIER_PATTERN.replace("\\Z", "$"),
        max_length=IDENTIFIER_CHARS_MAX,
        description=f"1-{IDENTIFIER_CHARS_MAX} characters of A-Za-z0-9._:@/-",
    ),
    # IDENTIFIERS_KNOWN: made of identifier characters; the constraint bounds the length.
    Rule(check_identifier, always=True, code=codes.INVALID_IDENTIFIER, known=IDENTIFIERS_KNOWN),
]
"""An identifier (goal, run, case, lane, attempt, session, profile, agent, turn, task,
replan). The schema's `$` stands for the check's `\\Z` (which refuses a trailing
newline): JSON Schema's dialect has no `\\Z`. So the pattern alone would let "g\\n"
through (`re`'s `$` matches before a final newline), and `check_identifier`, the
journal's rule, runs on every decoded identifier (`always`): it is what decides."""
TokenCount = Annotated[
    int,
    msgspec.Meta(
        ge=0, le=TOKEN_COUNT_MAX, description=f"A token count, 0..{power_of_ten(TOKEN_COUNT_MAX)}"
    ),
    Rule(check_tokens, code=codes.INVALID_TOKEN_COUNT),
]


def check_usd(name: str, value: object) -> object:
    """Dollars (SPEC §12.4): a number from 0 with at most 6 decimals."""
    if micro_of(value) is None:
        raise InvalidInput(
            f"{name} must be dollars from 0 to {power_of_ten(USD_MAX)} with at most "
            f"{USD_DECIMALS} decimals, got {value!r}",
            code=codes.INVALID_USD,
            option=name,
        )
    return value


UsdAmount = Annotated[
    int | float,
    msgspec.Meta(description=f"US dollars, 0..{power_of_ten(USD_MAX)}, at most 6 decimals"),
    Rule(check_usd, always=True, code=codes.INVALID_USD),
]
"""Dollars, or dollars per million tokens (SPEC §12.4): kept exact, as micro-dollars."""


def check_pool_fraction(name: str, value: object) -> object:
    """A pool share, borrowing or lending limit (SPEC §12.1): a decimal 0..1 with at most
    4 places, kept exactly in units of 10^-4."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= 1
        or share_units(value) is None
    ):
        raise InvalidInput(
            f"{name} must be a decimal from 0 to 1 with at most {limits.SHARE_PLACES} "
            f"places, got {value!r}",
            code=codes.INVALID_POOL_SHARE,
            option=name,
        )
    return value


PoolFraction = Annotated[
    int | float,
    msgspec.Meta(description="A fraction of a pool, 0..1, at most 4 decimal places"),
    Rule(check_pool_fraction, always=True, code=codes.INVALID_POOL_SHARE),
]


def check_priority(name: str, value: object) -> object:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not (limits.PRIORITY_MIN <= value <= limits.PRIORITY_MAX)
    ):
        raise InvalidInput(
            f"{name} must be an integer from {limits.PRIORITY_MIN} to {limits.PRIORITY_MAX}, "
            f"got {value!r}",
            code=codes.INVALID_CONFIG,
            option=name,
        )
    return value


Priority = Annotated[
    int,
    msgspec.Meta(
        ge=limits.PRIORITY_MIN,
        le=limits.PRIORITY_MAX,
        description=f"A queue priority, {limits.PRIORITY_MIN}..{limits.PRIORITY_MAX}",
    ),
    Rule(check_priority, code=codes.INVALID_CONFIG),
]
FreeText = Annotated[
    str,
    # Characters, a first and cheap bound: the rule counts the UTF-8 bytes.
    msgspec.Meta(
        max_length=FREE_TEXT_BYTES_MAX,
        description=f"Free text, at most {byte_size(FREE_TEXT_BYTES_MAX)}",
    ),
    Rule(check_text, always=True, code=codes.INVALID_TEXT),
]
Effect = Annotated[
    str,
    msgspec.Meta(pattern=_EFFECT_PATTERN, description="An effect id: 32 lowercase hex digits"),
    Rule(check_effect, code=codes.INVALID_EFFECT),
]
"""The effect id `turn writeback` and `turn resume` print (SPEC §5)."""
WindowHours = Annotated[
    float,
    msgspec.Meta(gt=0, le=limits.WINDOW_HOURS_MAX, description="A budget window in hours, > 0"),
    Rule(check_window_hours, code=codes.INVALID_WINDOW_HOURS),
]


def check_deadline(name: str, value: str) -> str:
    """A deadline's shape (it is resolved against the event's time where it is used),
    its error naming `name`."""
    try:
        parse_deadline_us(value, 0, name)
    except InvalidInput as error:
        if error.about is not None:  # a duration's error names it: as this caller does
            raise InvalidInput(error.worded(lambda field: name), code=error.code) from None
        raise InvalidInput(f"{name}: {error.message}", code=error.code) from None
    return value


Time = Annotated[
    str,
    msgspec.Meta(description="RFC 3339 with a time zone"),
    Rule(check_moment, always=True, code=codes.INVALID_TIME),
]
"""A moment as RFC 3339 text; the API also takes an aware datetime, which `decode`
turns into this text."""
EventTime = Annotated[
    Time | None,
    msgspec.Meta(description="Event time (RFC 3339); writers refuse one before the goal's last."),
]
"""A writer's `at` (SPEC §2.2): the event's time, by default the clock's."""
Goal = Annotated[Identifier, msgspec.Meta(description="Goal (campaign) identifier.")]


def choice(choices: tuple[str, ...], description: str) -> Any:
    """A string type that must be one of `choices`, worded as SPEC §8 has it
    (`invalid_choice`); the schema lists the choices in its description."""
    described = f"{description} One of: {', '.join(choices)}."
    return Annotated[
        str,
        # `extra`: the choices as data, for the CLI's option (cli/request_options.py).
        msgspec.Meta(description=described, extra={"choices": choices}),
        # `known`: a value among the choices passes the check, so it is not called for one.
        Rule(
            check_choice(choices),
            always=True,
            code=codes.INVALID_CHOICE,
            known=frozenset(choices),
        ),
    ]


def range_rule(base: Any, message: str, code: str) -> Rule:
    """The rule for `base`, an integer type annotated with its range
    (`msgspec.Meta(ge=..., le=...)`, stated once where the domain defines it), that
    words a value outside it (`check_range`'s `message`):
    `Annotated[base, range_rule(base, ...)]`."""
    meta = next(m for m in base.__metadata__ if isinstance(m, msgspec.Meta))
    return check_range(message, code, meta.ge, meta.le)


_DIGEST_PATTERN = r"^\s*[0-9a-fA-F]{64}\s*$"
"""What `sha256_hex` takes: 64 hex digits, either case, blanks around them."""
Sha256 = Annotated[
    str,
    msgspec.Meta(pattern=_DIGEST_PATTERN, description="A SHA-256 digest, 64 hex digits"),
    Rule(check_digest("64 hex digits", codes.INVALID_SHA256), code=codes.INVALID_SHA256),
]
"""A file's SHA-256 digest (`--handoff-sha256`); `sha256_hex` gives it as stored."""
EventHash = Annotated[
    str,
    msgspec.Meta(pattern=_DIGEST_PATTERN, description="An event's hash, 64 hex digits"),
    Rule(check_digest("an event hash", codes.INVALID_HASH), code=codes.INVALID_HASH),
]
"""An event's hash (`--bind`); `sha256_hex` gives it as stored."""
Deadline = Annotated[
    str,
    msgspec.Meta(description="RFC 3339 with a time zone, or +DURATION after the event's time"),
    Rule(check_deadline, always=True, code=codes.INVALID_TIME),
]
"""A deadline as text; the API also takes an aware datetime (`decode`). It is resolved
against the event's time where it is used (`journal.clock.parse_deadline_us`)."""


# -- `probe run` (SPEC §6) ---------------------------------------------------------------

ProbeText = Annotated[
    str,
    msgspec.Meta(max_length=FREE_TEXT_BYTES_MAX, description="Free text, at most 4 KiB"),
    Rule(check_probe_text, always=True, code=codes.INVALID_TEXT),
]
ProbeCommand = Annotated[
    list[str],
    msgspec.Meta(description=f"The command and its arguments (1-{limits.COMMAND_ARGS_MAX})"),
    Rule(check_command, always=True, code=codes.COMMAND_MISSING),
]
CandidatePaths = Annotated[
    list[str],
    msgspec.Meta(description=f"Candidate files, at most {limits.CANDIDATES_MAX}"),
    Rule(check_candidates, always=True, code=codes.TOO_MANY_CANDIDATES),
]
SidecarPath = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=FREE_TEXT_BYTES_MAX, description="A new file's path"),
    Rule(check_sidecar, always=True, code=codes.INVALID_OPTION),
]
ReferenceBytes = Annotated[
    int,
    msgspec.Meta(ge=0, le=limits.BYTES_MAX, description="Bytes, 0..2^62"),
    Rule(
        check_within("from 0 to 2^62", lambda value: 0 <= value <= limits.BYTES_MAX),
        code=codes.INVALID_OPTION,
    ),
]
IntervalMs = Annotated[
    int,
    msgspec.Meta(ge=limits.INTERVAL_MS_MIN, le=limits.INTERVAL_MS_MAX),
    Rule(
        check_within(
            f"from {limits.INTERVAL_MS_MIN} to {limits.INTERVAL_MS_MAX}",
            lambda value: limits.INTERVAL_MS_MIN <= value <= limits.INTERVAL_MS_MAX,
        ),
        code=codes.INVALID_OPTION,
    ),
]
ProbeTimeout = Annotated[
    float,
    msgspec.Meta(gt=0, le=limits.TIMEOUT_S_MAX, description="Seconds, > 0"),
    Rule(
        check_within(
            f"> 0 and <= {limits.TIMEOUT_S_MAX:g}", lambda value: 0 < value <= limits.TIMEOUT_S_MAX
        ),
        code=codes.INVALID_OPTION,
    ),
]
