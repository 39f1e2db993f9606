"""Event time: RFC 3339 UTC strings with microseconds, and integer microseconds.

Canonical `at` strings (``2026-11-29T09:41:12.000000Z``) sort lexicographically in
time order, so the journal compares them as strings and only projections that do
arithmetic convert them to integer microseconds since the epoch (`*_us`).
"""

from __future__ import annotations

import math
import os
import re
import time
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from functools import lru_cache

from quotaledger.journal import codes
from quotaledger.journal.environment import MAX_CLOCK_SKEW_S_ENV
from quotaledger.journal.errors import InvalidInput, TimeInFuture, TimeRegression
from quotaledger.journal.limits import CLOCK_SKEW_S_DEFAULT, CLOCK_SKEW_S_MAX

US_PER_S = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# ASCII digits only (`\d` also matches ١٢), bounded: Fraction() of 5,000 digits is a
# ValueError, and no duration needs more than 15 digits of seconds.
_NUMBER = r"[0-9]{1,15}(?:\.[0-9]{1,9})?"
# `ns` and `µs` too: what Go's time.Duration prints (a provider's reset header).
_TERM = re.compile(rf"({_NUMBER})(ns|us|µs|μs|ms|s|m|h|d)")
_DURATION = re.compile(rf"{_NUMBER}|(?:{_TERM.pattern})+")
"""SPEC §2.2: a number of seconds, or one or more number-and-unit terms (`1h30m`)."""
_UNIT_US: dict[str, Fraction | int] = {
    "ns": Fraction(1, 1000),
    "us": 1,
    "µs": 1,  # MICRO SIGN
    "μs": 1,  # GREEK SMALL LETTER MU
    "ms": 1_000,
    "s": US_PER_S,
    "m": 60 * US_PER_S,
    "h": 3600 * US_PER_S,
    "d": 86400 * US_PER_S,
}
_CANONICAL_AT = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"
CANONICAL_AT_PATTERN = rf"^{_CANONICAL_AT}\Z"  # \Z: "$" would accept a trailing newline
"""The canonical time (RFC 3339 UTC, microseconds, Z) as a whole-string pattern, for
msgspec's `pattern` (which searches); this module matches it with `fullmatch`."""
_CANONICAL = re.compile(_CANONICAL_AT)


def wall_us() -> int:
    """The wall clock now, in microseconds since the epoch."""
    return time.time_ns() // 1000


AT_US_MIN = 0
AT_US_MAX = 253_402_300_799_999_999
"""Event times run from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z: the
canonical form has a four-digit year, and nothing a runner records predates 1970."""


def _out_of_range(what: str) -> InvalidInput:
    return InvalidInput(
        f"{what} is outside the supported range 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59Z",
        code=codes.INVALID_TIME,
    )


_last_parsed: tuple[str, int] = ("1970-01-01T00:00:00.000000Z", 0)
"""The last canonical time format_us formatted or parse_at parsed: a batch's events
share one time, and the fold of an append parses the time its transaction formatted.
One tuple, replaced whole, so it is safe across threads."""
_last_second: tuple[str, int] = ("1970-01-01T00:00:00.", 0)
"""The second (through its ".") parse_at last parsed outside this cache, in µs
(its start): replaced whole like `_last_parsed`."""


_MILLIS = tuple(f".{n:03d}" for n in range(1000))
_MICROS_Z = tuple(f"{n:03d}Z" for n in range(1000))
"""Every append formats its time: two table lookups cost half of "%06d" formatting."""


def format_us(at_us: int) -> str:
    """Canonical `at` string for a time in microseconds since the epoch."""
    if not AT_US_MIN <= at_us <= AT_US_MAX:
        raise _out_of_range(f"time {at_us} µs after the epoch")
    global _last_parsed
    seconds, micros = divmod(at_us, US_PER_S)
    text = _format_second(seconds) + _MILLIS[micros // 1000] + _MICROS_Z[micros % 1000]
    # The time an append formats is the time its fold parses next: remember the pair.
    _last_parsed = (text, at_us)
    return text


def format_us_or_none(at_us: int | None) -> str | None:
    """`format_us`, with None for no time (a lease that never ends, no cooldown)."""
    return None if at_us is None else format_us(at_us)


@lru_cache(maxsize=1024)
def _format_second(seconds: int) -> str:
    # Every append formats its time: the date part changes once a second, so cache it.
    moment = _EPOCH + timedelta(seconds=seconds)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )


def parse_at(text: str) -> int:
    """Microseconds since the epoch for an RFC 3339 timestamp with a zone."""
    global _last_parsed, _last_second
    last_text, last_us = _last_parsed
    if text == last_text:
        return last_us
    second, second_us = _last_second
    micros = text[20:26]
    # A fold parses one time per record, most of them in the second the one before
    # named: then the rest is six ASCII digits and Z (what _CANONICAL would match, for
    # a second already parsed), checked without the regex or the second's cache.
    if (
        text.startswith(second)
        and len(text) == 27
        and text[26] == "Z"
        and micros.isdigit()
        and micros.isascii()
    ):
        at_us = second_us + int(micros)
    elif _CANONICAL.fullmatch(text) is not None:  # a canonical time in another second
        second_us = _parse_second(text[:19]) * US_PER_S
        _last_second = (text[:20], second_us)
        at_us = second_us + int(micros)
    else:
        return _parse_any(text)
    _last_parsed = (text, at_us)
    return at_us


@lru_cache(maxsize=1024)
def _parse_second(text: str) -> int:
    return _parse_any(text + "Z") // US_PER_S


# RFC 3339 §5.6 date-time (T/Z may be lower case, a space may separate date and time);
# the zone is optional here only so that its absence gets its own message below.
# fromisoformat alone also takes ISO 8601 forms RFC 3339 does not (20260101T000001Z,
# +0000, no seconds), which SPEC §8 makes exit 2.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


def _parse_any(text: str) -> int:
    try:
        if _RFC3339.fullmatch(text.strip()) is None:
            raise ValueError(text)
        parsed = datetime.fromisoformat(text.strip().upper())
    except ValueError as exc:
        raise InvalidInput(f"not an RFC 3339 timestamp: {text!r}", code=codes.INVALID_TIME) from exc
    if parsed.tzinfo is None:
        raise InvalidInput(
            f"timestamp {text!r} has no zone; add Z or an offset such as +00:00",
            code=codes.INVALID_TIME,
        )
    delta = parsed - _EPOCH
    at_us = (delta.days * 86400 + delta.seconds) * US_PER_S + delta.microseconds
    if not AT_US_MIN <= at_us <= AT_US_MAX:
        raise _out_of_range(f"timestamp {text!r}")
    return at_us


def canonical_at(text: str) -> str:
    """Normalise any RFC 3339 timestamp to the canonical UTC form (exit 2 if invalid)."""
    at_us = parse_at(text)  # also validates a canonical-looking string (month 13, ...)
    return text if _CANONICAL.fullmatch(text) else format_us(at_us)


def check_moment(name: str, text: str) -> str:
    """`text` as canonical RFC 3339 (`canonical_at`), or its error naming `name`: the
    caller's word for the parameter (the CLI's `--at`, the API's `at`)."""
    try:
        return canonical_at(text)
    except InvalidInput as error:
        raise InvalidInput(f"{name}: {error.message}", code=error.code) from None


def names_a_real_second(text: str) -> bool:
    """Whether a canonical-looking `at` (its shape checked elsewhere, e.g. by a
    schema's pattern) names a real second in the supported range: no 2026-02-30."""
    try:
        _parse_second(text[:19])
    except InvalidInput:
        return False
    return True


def is_canonical_at(text: str) -> bool:
    """Whether `text` is a canonical `at` string of a real time in the supported range."""
    return _CANONICAL.fullmatch(text) is not None and names_a_real_second(text)


DURATION_FORMS = "seconds, or e.g. 90s, 1.5h, 1h30m, 2d"


def not_a_duration(name: str, text: str) -> InvalidInput:
    """The one error of a malformed duration, naming the parameter (`about`: a caller
    words it with its own name for it, the CLI with its flag)."""
    return InvalidInput(
        lambda named: f"{named} {text!r} is not a duration ({DURATION_FORMS})",
        code=codes.INVALID_DURATION,
        about=name,
    )


def _duration_us(text: str, name: str) -> Fraction:
    """A duration in microseconds, exactly (SPEC §2.2): ``90`` (seconds), ``90s``,
    ``1.5h``, ``1h30m``, ``6m0s``, ``2d``, ``250ms``. Every bad one: the same error."""
    stripped = text.strip()
    if _DURATION.fullmatch(stripped) is None:
        raise not_a_duration(name, text)
    if _TERM.match(stripped) is None:  # a bare number of seconds
        return Fraction(stripped) * US_PER_S
    return sum(
        (Fraction(number) * _UNIT_US[unit] for number, unit in _TERM.findall(stripped)),
        Fraction(0),
    )


def parse_duration_us(text: str, name: str, *, round_up: bool = False) -> int:
    """A duration as users write it, in whole microseconds (see `_duration_us`),
    rounded down, or up (`round_up`: a wait never shorter than asked for); `name` is
    the parameter's, for the error."""
    exact = _duration_us(text, name)
    return math.ceil(exact) if round_up else math.floor(exact)


def has_unit(text: str) -> bool:
    """Whether a duration is written with units (`90s`), not as bare seconds (`90`)."""
    return _TERM.match(text.strip()) is not None


def parse_duration_s(text: str, name: str) -> float:
    """A duration option's value in seconds (SPEC §8): the grammar of `_duration_us`.

    The one parser every ``--*-s`` option (and its environment variable) goes
    through; the caller decides whether a fraction of a second is meaningful.
    """
    seconds = _duration_us(text, name) / US_PER_S
    return int(seconds) if seconds.denominator == 1 else float(seconds)


def parse_deadline_us(text: str, now_us: int, name: str = "deadline") -> int:
    """An absolute RFC 3339 deadline, or one relative to the event time (``+30m``)."""
    if text.strip().startswith("+"):
        return now_us + parse_duration_us(text.strip()[1:], name)
    return parse_at(text)


_ENVIRON: dict[bytes, bytes] = os.environ._data  # type: ignore[attr-defined]
"""The dict behind os.environ (and os.environb), which every change to os.environ
updates. Every writer's transaction reads the bound: `os.environ.get` costs a
microsecond there (a KeyError raised and caught when the variable is unset), a lookup
in this dict 20 ns."""
_CLOCK_SKEW_KEY = os.fsencode(MAX_CLOCK_SKEW_S_ENV)
_clock_skew_parsed: tuple[bytes, int] | None = None
"""The variable's last value found valid, and its bound: parsed once, not per read."""


def max_clock_skew_us() -> int:
    """The clock-skew bound (SPEC §2.2): QUOTALEDGER_MAX_CLOCK_SKEW_S, else 300 s.
    Read, and so checked, on every call."""
    global _clock_skew_parsed
    raw = _ENVIRON.get(_CLOCK_SKEW_KEY)
    if raw is None:
        return CLOCK_SKEW_S_DEFAULT * US_PER_S
    parsed = _clock_skew_parsed
    if parsed is not None and parsed[0] == raw:
        return parsed[1]
    text = os.fsdecode(raw).strip()
    if not text:
        return CLOCK_SKEW_S_DEFAULT * US_PER_S
    skew_us = parse_duration_us(text, MAX_CLOCK_SKEW_S_ENV)
    if not 0 <= skew_us <= CLOCK_SKEW_S_MAX * US_PER_S:
        raise InvalidInput(
            f"{MAX_CLOCK_SKEW_S_ENV} {text!r} must be from 0 to {CLOCK_SKEW_S_MAX} seconds",
            code=codes.INVALID_DURATION,
            option=MAX_CLOCK_SKEW_S_ENV,
        )
    _clock_skew_parsed = (raw, skew_us)
    return skew_us


def check_not_in_future(
    at: str, now_us: int, last_at: str | None = None, clock: str = "this machine's clock"
) -> None:
    """Refuse an explicit time on a writer beyond the clock-skew bound (`time_in_future`).

    A time not after the goal's last event is never refused here: it is what an
    implicit time already is (and a regression is refused on its own).
    """
    skew_us = max_clock_skew_us()
    if parse_at(at) <= now_us + skew_us or (last_at is not None and at <= last_at):
        return
    raise TimeInFuture(
        lambda name: (
            f"{name} {at} is more than {skew_us / US_PER_S:g} s ahead of {clock} "
            f"({format_us(now_us)}); writers record no future events (set "
            f"{MAX_CLOCK_SKEW_S_ENV} for a skewed clock)"
        ),
        about="at",
        at=at,
        now=format_us(now_us),
        max_clock_skew_s=skew_us / US_PER_S,
    )


def event_time(
    goal: str | None,
    last_at: str | None,
    now_us: int,
    explicit_at: str | None,
    clock: str = "this machine's clock",
) -> str:
    """A goal's event time by SPEC §2.2: implicit time is max(now, the goal's last event)
    and never refused; an explicit time more than the clock-skew bound ahead of now is
    `time_in_future`, one earlier than the goal's last event `time_regression`."""
    # The bound is checked on every writer's time, not only when --at needs it (SPEC §8:
    # an environment value is checked whenever it is read), so a bad one never lies
    # unnoticed until the first explicit time.
    max_clock_skew_us()
    if explicit_at is None:
        now = format_us(now_us)
        return now if last_at is None or now >= last_at else last_at
    at = canonical_at(explicit_at)
    check_not_in_future(at, now_us, clock=clock)
    if last_at is not None and at < last_at:
        last = "the last journal-level event" if goal is None else f"goal {goal!r}'s last event"
        raise TimeRegression(
            lambda name: f"{name} {at} is earlier than {last} at {last_at}",
            about="at",
            at=at,
            last_at=last_at,
        )
    return at
