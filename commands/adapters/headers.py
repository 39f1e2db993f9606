"""Provider rate-limit headers (SPEC §3.6 "Provider reports"), parsed without an SDK.

    report = provider_report(response.headers)       # httpx.Headers, requests, a dict
    ledger.observe(goal="g", **usage, provider_headers=report)

What is recognised, by lower-case name (anything else is ignored):

    x-ratelimit-{limit,remaining,reset}-requests         OpenAI     -> rpm
    x-ratelimit-{limit,remaining,reset}-tokens           OpenAI     -> tpm
    anthropic-ratelimit-requests-{limit,remaining,reset}  Anthropic  -> rpm
    anthropic-ratelimit-input-tokens-*                    Anthropic  -> itpm
    anthropic-ratelimit-output-tokens-*                   Anthropic  -> otpm
    anthropic-ratelimit-tokens-*                          Anthropic  -> tpm
    retry-after (seconds, or an HTTP-date), retry-after-ms
    x-request-id (OpenAI), request-id (Anthropic)        the request id (SPEC §11)

OpenAI's resets are durations (`20ms`, `6m0s`, `1h2m3.5s`), Anthropic's are RFC 3339
times. Parsing happens in two steps because a duration and a Retry-After date only mean
something from a moment: `parse_provider_headers` checks the values and keeps them
relative; `ProviderHeaders.resolve(at_us)` measures them from the event's time, so a
replay of the same event gets the same `reset_at`. A recognised header with a malformed
value is `invalid_provider_headers` (exit 2) naming it; a request id that is not an
identifier is ignored (the observation is recorded, only not deduplicated).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any

from quotaledger.adapters import is_request_id
from quotaledger.journal import codes
from quotaledger.journal.clock import (
    US_PER_S,
    format_us,
    has_unit,
    not_a_duration,
    parse_at,
    parse_duration_us,
)
from quotaledger.journal.errors import InvalidInput
from quotaledger.projections.limits import RETRY_AFTER_S_MAX, TOKEN_COUNT_MAX, power_of_ten

RETRY_AFTER = "retry-after"
RETRY_AFTER_MS = "retry-after-ms"
REQUEST_ID_HEADERS = ("x-request-id", "request-id")
"""The provider's request id (OpenAI's name first), for `request_id` (SPEC §11)."""
MEMBERS = ("limit", "remaining", "reset")


def _names(prefix: str, suffix: str, dimension: str) -> dict[str, tuple[str, str]]:
    return {f"{prefix}{member}{suffix}": (dimension, member) for member in MEMBERS}


# header name -> (dimension, member); OpenAI puts the dimension last, Anthropic first.
OPENAI_HEADERS = {
    **_names("x-ratelimit-", "-requests", "rpm"),
    **_names("x-ratelimit-", "-tokens", "tpm"),
}
ANTHROPIC_HEADERS = {
    **_names("anthropic-ratelimit-requests-", "", "rpm"),
    **_names("anthropic-ratelimit-input-tokens-", "", "itpm"),
    **_names("anthropic-ratelimit-output-tokens-", "", "otpm"),
    **_names("anthropic-ratelimit-tokens-", "", "tpm"),
}
DIMENSION_HEADERS = {**OPENAI_HEADERS, **ANTHROPIC_HEADERS}
RECOGNISED = frozenset({*DIMENSION_HEADERS, RETRY_AFTER, RETRY_AFTER_MS, *REQUEST_ID_HEADERS})

_COUNT = re.compile(r"[0-9]+")
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
HEADER_VALUE_CHARS_MAX = 256
"""A recognised header's value is a count, a duration or a date: a few dozen characters."""


def _malformed(header: str, value: str, expected: str) -> InvalidInput:
    shown = value if len(value) <= 60 else value[:40] + f"... ({len(value)} characters)"
    return InvalidInput(
        f"provider header {header}: {shown!r} is not {expected}",
        code=codes.INVALID_PROVIDER_HEADERS,
        header=header,
        option="--provider-headers",
    )


@dataclass(frozen=True)
class Reset:
    """When a dimension's window resets: at a time, or after a duration from the event."""

    header: str
    at_us: int | None = None
    after_us: int | None = None
    value: str = ""
    """The header's value as the provider sent it (for a message)."""

    def resolve(self, at_us: int) -> str:
        reset_us = self.at_us if self.at_us is not None else at_us + (self.after_us or 0)
        try:
            return format_us(reset_us)
        except InvalidInput:
            raise _malformed(
                self.header, self.value, "a reset inside the supported time range"
            ) from None


@dataclass(frozen=True)
class RetryAfter:
    """A Retry-After: a delay in seconds, or an HTTP-date measured from the event."""

    header: str
    seconds: Decimal | None = None
    date_us: int | None = None

    def resolve(self, at_us: int) -> int | float:
        if self.seconds is not None:
            seconds = self.seconds
        else:
            assert self.date_us is not None
            seconds = _bounded_seconds(
                self.header, Decimal(max(0, self.date_us - at_us)) / US_PER_S
            )
        # Whole microseconds, rounded up: never a shorter wait than the provider asked for.
        micros = math.ceil(seconds * US_PER_S)
        whole, rest = divmod(micros, US_PER_S)
        return whole if rest == 0 else micros / US_PER_S


@dataclass(frozen=True)
class ProviderReport:
    """A provider's report as of an event: `provider` is the payload member
    `{D: {"limit", "remaining", "reset_at"}}` (every recognised dimension; a member
    whose header was absent is null) and `retry_after_s` the Retry-After, if any."""

    provider: dict[str, dict[str, Any]]
    retry_after_s: int | float | None


@dataclass(frozen=True)
class ProviderHeaders:
    """The recognised headers of one response, checked; times still relative."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    resets: dict[str, Reset] = field(default_factory=dict)
    retry_after: RetryAfter | None = None
    request_id: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.counts or self.resets or self.retry_after or self.request_id)

    def resolve(self, at_us: int) -> ProviderReport:
        """The report as of the event at `at_us`."""
        provider: dict[str, dict[str, Any]] = {}
        for dimension in sorted({*self.counts, *self.resets}, key=_DIMENSION_ORDER.index):
            counts = self.counts.get(dimension, {})
            reset = self.resets.get(dimension)
            provider[dimension] = {
                "limit": counts.get("limit"),
                "remaining": counts.get("remaining"),
                "reset_at": None if reset is None else reset.resolve(at_us),
            }
        retry = None if self.retry_after is None else self.retry_after.resolve(at_us)
        return ProviderReport(provider, retry)


_DIMENSION_ORDER = ("tpm", "itpm", "otpm", "rpm")


HeaderSource = str | Mapping[str, Any] | Iterable[tuple[str, Any]]
"""Raw `Name: value` lines or a JSON object as text, or a headers mapping (httpx.Headers,
requests' CaseInsensitiveDict, a dict), or (name, value) pairs."""


def parse_provider_headers(source: HeaderSource) -> ProviderHeaders:
    """Check the recognised headers in `source` and keep them, relative to no time yet."""
    values = _recognised(_pairs(source))
    counts: dict[str, dict[str, int]] = {}
    resets: dict[str, Reset] = {}
    # OpenAI's names first, so that Anthropic's own win where a proxy (LiteLLM) also
    # sent them under OpenAI's names: the same numbers, but only one source per value.
    for name, (dimension, member) in DIMENSION_HEADERS.items():
        if name not in values:
            continue
        value = values[name]
        if member == "reset":
            resets[dimension] = _reset(name, value)
        else:
            counts.setdefault(dimension, {})[member] = _count(name, value)
    for dimension, pair in counts.items():
        if "limit" in pair and "remaining" in pair and pair["remaining"] > pair["limit"]:
            name = next(n for n, dm in DIMENSION_HEADERS.items() if dm == (dimension, "remaining"))
            raise _malformed(name, str(pair["remaining"]), f"at most the limit {pair['limit']}")
    retry_after = None
    if RETRY_AFTER_MS in values:  # the more precise of the two when both are sent
        retry_after = _retry_after_ms(values[RETRY_AFTER_MS])
    elif RETRY_AFTER in values:
        retry_after = _retry_after(values[RETRY_AFTER])
    request_id = next((values[name] for name in REQUEST_ID_HEADERS if name in values), None)
    return ProviderHeaders(counts, resets, retry_after, request_id)


def provider_report(headers: HeaderSource) -> dict[str, str]:
    """The recognised headers of a response, by lower-case name, checked as the ledger
    will check them: what `observe`/`reject` take as `provider_headers` (and what
    `--provider-headers FILE` takes as a JSON object)."""
    values = _recognised(_pairs(headers))
    parse_provider_headers(values)
    return values


# -- reading the source ------------------------------------------------------------------


def _pairs(source: HeaderSource) -> list[tuple[str, Any]]:
    if isinstance(source, str):
        return _text_pairs(source)
    if isinstance(source, Mapping):
        return [(str(name), value) for name, value in source.items()]
    pairs = list(source)
    if not all(isinstance(pair, list | tuple) and len(pair) == 2 for pair in pairs):
        raise InvalidInput(
            "provider headers given as a sequence must be (name, value) pairs",
            code=codes.INVALID_PROVIDER_HEADERS,
            option="--provider-headers",
        )
    return [(str(name), value) for name, value in pairs]


def _text_pairs(text: str) -> list[tuple[str, Any]]:
    stripped = text.strip()
    if stripped.startswith(("{", "[", '"')):
        from quotaledger.journal.jsoninput import JsonInputError, parse_bounded

        try:
            body = parse_bounded(stripped)
        except JsonInputError as exc:
            raise InvalidInput(
                f"provider headers are not valid JSON: {exc}",
                code=codes.INVALID_PROVIDER_HEADERS,
                option="--provider-headers",
            ) from None
        if not isinstance(body, dict):
            raise InvalidInput(
                "provider headers in JSON must be an object of header names to values",
                code=codes.INVALID_PROVIDER_HEADERS,
                option="--provider-headers",
            )
        return list(body.items())
    pairs: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.startswith("HTTP/"):
            # A status line (curl -i / -D): a redirect chain dumps one block per response,
            # and the last response is the one whose headers count.
            pairs = []
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or name != name.rstrip():
            raise InvalidInput(
                f"provider headers line {number} is not 'Name: value': {line[:80]!r}",
                code=codes.INVALID_PROVIDER_HEADERS,
                option="--provider-headers",
                line=number,
            )
        pairs.append((name, value.strip()))
    return pairs


def _recognised(pairs: list[tuple[str, Any]]) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw_name, raw_value in pairs:
        name = raw_name.strip().lower()
        if name not in RECOGNISED:
            continue
        # Strings, or numbers from a JSON object; a bool or a list is not a header value.
        if isinstance(raw_value, bool) or not isinstance(raw_value, str | int | float):
            # Named as the JSON spelled it (null, true, [..]), never as Python prints it.
            raise InvalidInput(
                f"provider header {name}: {json.dumps(raw_value)[:80]} is not a header value "
                "(a string or a number)",
                code=codes.INVALID_PROVIDER_HEADERS,
                header=name,
                option="--provider-headers",
            )
        value = str(raw_value).strip()
        if name in REQUEST_ID_HEADERS and not is_request_id(value):
            continue  # not an identifier: recorded without it, never refused for it
        if len(value) > HEADER_VALUE_CHARS_MAX:
            # Before any number is parsed: int() of 5,000 digits is a ValueError.
            raise _malformed(name, value, f"a value of at most {HEADER_VALUE_CHARS_MAX} characters")
        if name in values and values[name] != value:
            raise _malformed(name, value, f"one value (it was also sent as {values[name]!r})")
        values[name] = value
    return values


# -- values --------------------------------------------------------------------------------


def _count(header: str, value: str) -> int:
    if _COUNT.fullmatch(value) is None or int(value) > TOKEN_COUNT_MAX:
        raise _malformed(header, value, f"an integer from 0 to {power_of_ten(TOKEN_COUNT_MAX)}")
    return int(value)


def _reset(header: str, value: str) -> Reset:
    if header in OPENAI_HEADERS:
        # Go's time.Duration.String() (`6m0s`, `1.5s`, `20ms`, `0s`): the one duration
        # grammar (SPEC §2.2), with its unit always: a bare number could be a count or
        # an epoch as well as seconds. Rounded up: never a reset earlier than sent.
        try:
            if not has_unit(value):
                raise not_a_duration(header, value)
            after_us = parse_duration_us(value, header, round_up=True)
        except InvalidInput:
            raise _malformed(header, value, "a duration such as 20ms, 1s or 6m0s") from None
        return Reset(header, after_us=after_us, value=value)
    try:
        return Reset(header, at_us=parse_at(value), value=value)
    except InvalidInput:
        raise _malformed(header, value, "an RFC 3339 time with a zone") from None


def _retry_after(value: str) -> RetryAfter:
    if _SECONDS.fullmatch(value) is not None:
        return RetryAfter(RETRY_AFTER, seconds=_bounded_seconds(RETRY_AFTER, Decimal(value)))
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        raise _malformed(RETRY_AFTER, value, "seconds or an HTTP-date") from None
    if moment.tzinfo is None:  # an asctime date: HTTP-dates are GMT (RFC 9110 §5.6.7)
        moment = moment.replace(tzinfo=UTC)
    try:
        date_us = parse_at(moment.astimezone(UTC).isoformat())
    except InvalidInput:
        raise _malformed(RETRY_AFTER, value, "an HTTP-date in the supported range") from None
    return RetryAfter(RETRY_AFTER, date_us=date_us)


def _retry_after_ms(value: str) -> RetryAfter:
    if _SECONDS.fullmatch(value) is None:
        raise _malformed(RETRY_AFTER_MS, value, "milliseconds")
    return RetryAfter(
        RETRY_AFTER_MS, seconds=_bounded_seconds(RETRY_AFTER_MS, Decimal(value) / 1000)
    )


def _bounded_seconds(header: str, seconds: Decimal) -> Decimal:
    if seconds > RETRY_AFTER_S_MAX:  # the bound `reject --retry-after-s` has
        raise _malformed(header, str(seconds), f"at most {RETRY_AFTER_S_MAX} seconds")
    return seconds


__all__ = [
    "RECOGNISED",
    "REQUEST_ID_HEADERS",
    "HeaderSource",
    "ProviderHeaders",
    "ProviderReport",
    "parse_provider_headers",
    "provider_report",
]
