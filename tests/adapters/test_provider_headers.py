"""The provider-header parser (SPEC §3.6 "Provider reports"): what OpenAI and Anthropic
send becomes `{D: {limit, remaining, reset_at}}` plus a Retry-After in seconds, measured
from the event's time, and a malformed recognised header is refused by name."""

from __future__ import annotations

import json

import pytest

from quotaledger.adapters.headers import parse_provider_headers, provider_report
from quotaledger.journal import InvalidInput
from quotaledger.journal.clock import parse_at

AT = "2026-11-29T14:00:00.000000Z"
AT_US = parse_at(AT)

OPENAI_RAW = """\
HTTP/1.1 200 OK
Content-Type: application/json
X-RateLimit-Limit-Requests: 500
x-ratelimit-remaining-requests: 499
x-ratelimit-reset-requests: 120ms
x-ratelimit-limit-tokens: 200000
x-ratelimit-remaining-tokens: 150000
x-ratelimit-reset-tokens: 6m0s
openai-processing-ms: 312
"""

ANTHROPIC = {
    "anthropic-ratelimit-requests-limit": "50",
    "anthropic-ratelimit-requests-remaining": "49",
    "anthropic-ratelimit-requests-reset": "2026-11-29T14:00:01Z",
    "anthropic-ratelimit-input-tokens-limit": "40000",
    "anthropic-ratelimit-input-tokens-remaining": "31000",
    "anthropic-ratelimit-input-tokens-reset": "2026-11-29T14:00:20.5Z",
    "anthropic-ratelimit-output-tokens-limit": "8000",
    "anthropic-ratelimit-output-tokens-remaining": "7000",
    "anthropic-ratelimit-output-tokens-reset": "2026-11-29T15:00:03+01:00",
    "anthropic-ratelimit-tokens-limit": "48000",
    "anthropic-ratelimit-tokens-remaining": "38000",
    "anthropic-ratelimit-tokens-reset": "2026-11-29T14:00:20.5Z",
    "request-id": "req_011",
}


def report(source: object, at: str = AT) -> tuple[dict[str, object], object]:
    parsed = parse_provider_headers(source)  # type: ignore[arg-type]
    resolved = parsed.resolve(parse_at(at))
    return resolved.provider, resolved.retry_after_s


def test_openai_raw_lines_map_requests_to_rpm_and_tokens_to_tpm() -> None:
    provider, retry_after_s = report(OPENAI_RAW)
    assert provider == {
        "rpm": {"limit": 500, "remaining": 499, "reset_at": "2026-11-29T14:00:00.120000Z"},
        "tpm": {"limit": 200000, "remaining": 150000, "reset_at": "2026-11-29T14:06:00.000000Z"},
    }
    assert retry_after_s is None


@pytest.mark.parametrize(
    ("duration", "reset_at"),
    [
        ("20ms", "2026-11-29T14:00:00.020000Z"),
        ("1s", "2026-11-29T14:00:01.000000Z"),
        ("6m0s", "2026-11-29T14:06:00.000000Z"),
        ("1h2m3.5s", "2026-11-29T15:02:03.500000Z"),
        ("0s", "2026-11-29T14:00:00.000000Z"),
        ("17.28s", "2026-11-29T14:00:17.280000Z"),
        ("250us", "2026-11-29T14:00:00.000250Z"),
        ("1500ns", "2026-11-29T14:00:00.000002Z"),  # rounded up: never earlier than sent
        ("500µs", "2026-11-29T14:00:00.000500Z"),  # Go's Duration.String() writes µs
        # The one duration grammar (SPEC §2.2) reads them: its `d` and compounds too.
        ("1d", "2026-11-30T14:00:00.000000Z"),
        ("1h30m", "2026-11-29T15:30:00.000000Z"),
    ],
)
def test_openai_reset_durations_are_measured_from_the_event_time(
    duration: str, reset_at: str
) -> None:
    provider, _ = report({"x-ratelimit-reset-tokens": duration})
    assert provider == {"tpm": {"limit": None, "remaining": None, "reset_at": reset_at}}


def test_the_same_headers_replayed_at_another_time_reset_from_that_time() -> None:
    parsed = parse_provider_headers({"x-ratelimit-reset-requests": "1s", "retry-after": "2"})
    later = parsed.resolve(AT_US + 3_000_000)
    assert later.provider["rpm"]["reset_at"] == "2026-11-29T14:00:04.000000Z"
    assert later.retry_after_s == 2


def test_anthropic_maps_four_dimensions_with_rfc3339_resets() -> None:
    provider, _ = report(ANTHROPIC)
    assert provider == {
        "rpm": {"limit": 50, "remaining": 49, "reset_at": "2026-11-29T14:00:01.000000Z"},
        "itpm": {"limit": 40000, "remaining": 31000, "reset_at": "2026-11-29T14:00:20.500000Z"},
        "otpm": {"limit": 8000, "remaining": 7000, "reset_at": "2026-11-29T14:00:03.000000Z"},
        "tpm": {"limit": 48000, "remaining": 38000, "reset_at": "2026-11-29T14:00:20.500000Z"},
    }


def test_json_object_names_are_case_insensitive_and_numbers_are_accepted() -> None:
    text = json.dumps({"Anthropic-RateLimit-Requests-Limit": 50, "RETRY-AFTER": "3"})
    provider, retry_after_s = report(text)
    assert provider == {"rpm": {"limit": 50, "remaining": None, "reset_at": None}}
    assert retry_after_s == 3


def test_no_recognised_header_is_an_empty_report() -> None:
    assert report("content-type: text/plain\r\nx-request-id: abc\r\n") == ({}, None)
    assert report({}) == ({}, None)
    assert report("") == ({}, None)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "20"}, 20),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "0"}, 0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250.5"}, 0.2505),
        # retry-after-ms is the more precise of the two when a provider sends both
        ({"retry-after": "2", "retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "Sun, 29 Nov 2026 14:00:30 GMT"}, 30),
        ({"retry-after": "Sunday, 29-Nov-26 14:00:30 GMT"}, 30),  # RFC 850, obsolete
        ({"retry-after": "Sun, 29 Nov 2026 13:59:00 GMT"}, 0),  # already past
    ],
)
def test_retry_after_seconds_milliseconds_and_http_dates(
    headers: dict[str, str], seconds: float
) -> None:
    provider, retry_after_s = report(headers)
    assert provider == {}
    assert retry_after_s == seconds


def test_a_retry_after_date_is_measured_from_the_event_time() -> None:
    parsed = parse_provider_headers({"retry-after": "Sun, 29 Nov 2026 14:00:30 GMT"})
    assert parsed.resolve(AT_US + 10_000_000).retry_after_s == 20


def test_curl_dump_keeps_the_last_response_of_a_redirect_chain() -> None:
    text = (
        "HTTP/1.1 307 Temporary Redirect\r\nx-ratelimit-limit-requests: 1\r\n\r\n"
        "HTTP/2 200\r\nx-ratelimit-limit-requests: 60\r\n\r\n"
    )
    provider, _ = report(text)
    assert provider == {"rpm": {"limit": 60, "remaining": None, "reset_at": None}}


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ({"x-ratelimit-limit-requests": "many"}, "x-ratelimit-limit-requests"),
        ({"x-ratelimit-remaining-tokens": "-1"}, "x-ratelimit-remaining-tokens"),
        ({"x-ratelimit-remaining-tokens": "1.5"}, "x-ratelimit-remaining-tokens"),
        ({"x-ratelimit-limit-tokens": str(10**12 + 1)}, "x-ratelimit-limit-tokens"),
        ({"x-ratelimit-reset-tokens": "6 minutes"}, "x-ratelimit-reset-tokens"),
        ({"x-ratelimit-reset-tokens": "60"}, "x-ratelimit-reset-tokens"),
        ({"x-ratelimit-reset-tokens": "-1s"}, "x-ratelimit-reset-tokens"),
        ({"x-ratelimit-reset-tokens": ""}, "x-ratelimit-reset-tokens"),
        ({"anthropic-ratelimit-tokens-reset": "in a minute"}, "anthropic-ratelimit-tokens-reset"),
        (
            {"anthropic-ratelimit-tokens-reset": "2026-11-29T14:00:00"},
            "anthropic-ratelimit-tokens-reset",
        ),
        ({"anthropic-ratelimit-input-tokens-limit": "x"}, "anthropic-ratelimit-input-tokens-limit"),
        ({"retry-after": "soon"}, "retry-after"),
        ({"retry-after": "-3"}, "retry-after"),
        ({"retry-after": "1e3"}, "retry-after"),
        ({"retry-after-ms": "1s"}, "retry-after-ms"),
        ({"retry-after": str(10**10)}, "retry-after"),
        (
            {"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "11"},
            "x-ratelimit-remaining-requests",
        ),
        ('{"x-ratelimit-limit-requests": [1, 2]}', "x-ratelimit-limit-requests"),
        ('{"x-ratelimit-limit-requests": true}', "x-ratelimit-limit-requests"),
        (
            "x-ratelimit-limit-requests: 1\nX-RateLimit-Limit-Requests: 2\n",
            "x-ratelimit-limit-requests",
        ),
    ],
)
def test_a_malformed_recognised_header_is_refused_by_name(headers: object, named: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        report(headers)
    error = caught.value
    assert error.code == "invalid_provider_headers"
    assert error.exit_code == 2
    assert error.context["header"] == named
    assert named in error.message


def test_a_malformed_unknown_header_is_ignored() -> None:
    assert report({"x-ratelimit-limit-project-tokens": "lots", "retry-after-seconds": "x"}) == (
        {},
        None,
    )


@pytest.mark.parametrize(
    "text",
    [
        "this is not a header block",
        "x-ratelimit-limit-requests 60\n",
        "{not json",
        "[1, 2]",
        '"x-ratelimit-limit-requests"',
    ],
)
def test_text_that_is_neither_lines_nor_a_json_object_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_provider_headers(text)
    assert caught.value.code == "invalid_provider_headers"


def test_a_reset_beyond_the_supported_time_range_is_refused_by_name() -> None:
    parsed = parse_provider_headers({"x-ratelimit-reset-tokens": "99999999999h"})
    with pytest.raises(InvalidInput) as caught:
        parsed.resolve(AT_US)
    assert caught.value.context["header"] == "x-ratelimit-reset-tokens"


def test_provider_report_keeps_only_the_recognised_headers_by_their_lower_case_names() -> None:
    headers = {"X-RateLimit-Limit-Requests": "60", "Set-Cookie": "s=1", "Retry-After": "2"}
    assert provider_report(headers) == {"x-ratelimit-limit-requests": "60", "retry-after": "2"}


def test_provider_report_refuses_what_the_ledger_would_refuse() -> None:
    with pytest.raises(InvalidInput) as caught:
        provider_report({"retry-after": "soon"})
    assert caught.value.context["header"] == "retry-after"


def test_anthropic_names_win_over_the_openai_names_a_proxy_adds() -> None:
    # LiteLLM repeats Anthropic's request and token limits under OpenAI's names.
    headers = {
        "anthropic-ratelimit-requests-remaining": "49",
        "x-ratelimit-remaining-requests": "48",
        "anthropic-ratelimit-requests-limit": "50",
    }
    provider, _ = report(headers)
    assert provider["rpm"] == {"limit": 50, "remaining": 49, "reset_at": None}
