"""What providers send, fed to `observe` and `reject` (SPEC §3.6): `--provider-headers
FILE|-`, `--usage FILE|- [--usage-format]`, `--cache-write-input`, fractional and
HTTP-date Retry-After; every bad input is exit 2 with nothing written."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput
from tests.capacity.capacity_helpers import at
from tests.support import line_count, run_cli

OPENAI_HEADERS = """\
HTTP/2 200
content-type: application/json
x-ratelimit-limit-requests: 500
x-ratelimit-remaining-requests: 499
x-ratelimit-reset-requests: 120ms
x-ratelimit-limit-tokens: 200000
x-ratelimit-remaining-tokens: 150000
x-ratelimit-reset-tokens: 6m0s
"""
CHAT_BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "usage": {
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 1000},
    },
}
ANTHROPIC_USAGE = {
    "input_tokens": 25,
    "cache_creation_input_tokens": 2000,
    "cache_read_input_tokens": 8000,
    "output_tokens": 480,
}


def events(path: str, kind: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return [r for r in records if r["kind"] == kind]


def write(tmp_path: Path, name: str, content: str | dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def counts(**overrides: int) -> list[str]:
    values = {"uncached_input": 0, "cached_input": 0, "output": 0, **overrides}
    return [a for k, v in values.items() for a in (f"--{k.replace('_', '-')}", str(v))]


def error_of(result: Any) -> dict[str, Any]:
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    body = result.json
    assert body["ok"] is False
    return body["error"]


@pytest.fixture
def configured(cli, journal_path):
    assert cli("configure", "--goal", "g", "--quota-tpm", "100000", "--at", at(0)).code == 0
    return journal_path


# -- --provider-headers ------------------------------------------------------------------


def test_observe_records_the_provider_report_measured_from_the_event_time(
    cli, configured, tmp_path
):
    path = write(tmp_path, "headers.txt", OPENAI_HEADERS)
    result = cli("observe", "--goal", "g", *counts(output=10), "--at", at(1),
                 "--provider-headers", path)  # fmt: skip
    assert result.code == 0, result.stdout
    expected = {
        "tpm": {"limit": 200000, "remaining": 150000, "reset_at": at(361)},
        "rpm": {"limit": 500, "remaining": 499, "reset_at": at(1.12)},
    }
    assert result.json["provider"] == expected
    [event] = events(configured, "capacity.observed")
    assert event["data"]["provider"] == expected


def test_observe_reads_json_provider_headers_from_stdin(cli, configured, monkeypatch):
    headers = {
        "Anthropic-RateLimit-Output-Tokens-Limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": 7000,
    }
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(headers)))
    result = cli("observe", "--goal", "g", *counts(), "--at", at(1), "--provider-headers", "-")
    assert result.code == 0, result.stdout
    [event] = events(configured, "capacity.observed")
    assert event["data"]["provider"] == {
        "otpm": {"limit": 8000, "remaining": 7000, "reset_at": None}
    }


def test_headers_with_no_recognised_name_record_no_report(cli, configured, tmp_path):
    path = write(tmp_path, "headers.txt", "content-type: text/plain\n")
    result = cli("observe", "--goal", "g", *counts(), "--at", at(1), "--provider-headers", path)
    assert result.code == 0, result.stdout
    [event] = events(configured, "capacity.observed")
    assert "provider" not in event["data"]  # a line written as it was before reports existed


@pytest.mark.parametrize("command", ["observe", "reject"])
def test_a_malformed_recognised_header_is_exit_2_naming_it_and_nothing_is_written(
    cli, configured, tmp_path, command
):
    path = write(tmp_path, "headers.txt", "x-ratelimit-reset-tokens: six minutes\n")
    before = line_count(configured)
    extra = counts() if command == "observe" else []
    error = error_of(cli(command, "--goal", "g", *extra, "--provider-headers", path))
    assert error["code"] == "invalid_provider_headers"
    assert error["header"] == "x-ratelimit-reset-tokens"
    assert "x-ratelimit-reset-tokens" in error["message"]
    assert line_count(configured) == before


def test_an_unreadable_headers_file_is_exit_2(cli, configured, tmp_path):
    before = line_count(configured)
    missing = str(tmp_path / "missing.txt")
    error = error_of(cli("observe", "--goal", "g", *counts(), "--provider-headers", missing))
    assert error["option"] == "--provider-headers"
    assert line_count(configured) == before


def test_reject_takes_retry_after_from_the_headers(cli, configured, tmp_path):
    path = write(tmp_path, "headers.txt", "HTTP/1.1 429 Too Many Requests\nretry-after-ms: 1500\n")
    result = cli("reject", "--goal", "g", "--at", at(10), "--provider-headers", path)
    assert result.code == 0, result.stdout
    body = result.json
    assert (body["retry_after_s"], body["cooldown_s"], body["clamped"]) == (1.5, 1.5, False)
    assert body["cooldown_until"] == at(11.5)
    [event] = events(configured, "capacity.rejected")
    assert event["data"]["retry_after_s"] == 1.5


def test_reject_measures_an_http_date_retry_after_from_the_event_time(cli, configured, tmp_path):
    # at(0) is 2026-11-29T14:00:00Z; the provider asks to wait until 14:00:40 GMT.
    path = write(tmp_path, "h.txt", "retry-after: Sun, 29 Nov 2026 14:00:40 GMT\n")
    body = cli("reject", "--goal", "g", "--at", at(10), "--provider-headers", path).json
    assert (body["retry_after_s"], body["cooldown_until"]) == (30, at(40))


def test_an_explicit_retry_after_wins_over_the_headers(cli, configured, tmp_path):
    path = write(tmp_path, "h.txt", "retry-after: 100\nx-ratelimit-remaining-requests: 0\n")
    body = cli("reject", "--goal", "g", "--at", at(10), "--retry-after-s", "2",
               "--provider-headers", path).json  # fmt: skip
    assert body["retry_after_s"] == 2
    assert body["provider"] == {"rpm": {"limit": None, "remaining": 0, "reset_at": None}}


@pytest.mark.parametrize(("given", "seconds"), [("1.5", 1.5), ("90s", 90), ("2m", 120), ("0", 0)])
def test_retry_after_s_takes_fractions_and_durations(cli, configured, given, seconds):
    body = cli("reject", "--goal", "g", "--at", at(10), "--retry-after-s", given).json
    assert body["retry_after_s"] == seconds


@pytest.mark.parametrize("given", ["soon", "-1", "1e3", "nan", str(10**10)])
def test_a_bad_retry_after_s_is_exit_2_and_nothing_is_written(cli, configured, given):
    before = line_count(configured)
    error = error_of(cli("reject", "--goal", "g", "--retry-after-s", given))
    assert "--retry-after-s" in error["message"]
    assert line_count(configured) == before


# -- --usage ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "usage_format", "expected"),
    [
        (CHAT_BODY, "auto", (200, 1000, 0, 300)),
        (CHAT_BODY, "openai", (200, 1000, 0, 300)),
        (ANTHROPIC_USAGE, "anthropic", (25, 8000, 2000, 480)),
        (ANTHROPIC_USAGE, "auto", (25, 8000, 2000, 480)),
        ({"type": "message", "usage": ANTHROPIC_USAGE}, None, (25, 8000, 2000, 480)),
    ],
)
def test_observe_usage_records_the_mapped_counters_and_one_request(
    cli, configured, tmp_path, body, usage_format, expected
):
    path = write(tmp_path, "usage.json", body)
    fmt = [] if usage_format is None else ["--usage-format", usage_format]
    result = cli("observe", "--goal", "g", "--at", at(1), "--usage", path, *fmt)
    assert result.code == 0, result.stdout
    [event] = events(configured, "capacity.observed")
    data = event["data"]
    got = (data["uncached_input"], data["cached_input"], data.get("cache_write_input", 0))
    assert (*got, data["output"]) == expected
    assert data["requests"] == 1
    assert result.json["usage"]["cache_write_input"] == expected[2]


def test_observe_usage_reads_stdin(cli, configured, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(CHAT_BODY)))
    assert cli("observe", "--goal", "g", "--at", at(1), "--usage", "-").code == 0
    [event] = events(configured, "capacity.observed")
    assert event["data"]["cached_input"] == 1000


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--uncached-input", "5"], "usage"),
        (["--output", "5"], "usage"),
        (["--cache-write-input", "5"], "usage"),
        (["--requests", "2"], "usage"),
        (["--usage-format", "gemini"], "invalid_choice"),
    ],
)
def test_usage_with_count_flags_or_an_unknown_format_is_exit_2(
    cli, configured, tmp_path, args, code
):
    path = write(tmp_path, "usage.json", CHAT_BODY)
    before = line_count(configured)
    error = error_of(cli("observe", "--goal", "g", "--usage", path, *args))
    assert error["code"] == code
    assert line_count(configured) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"prompt_tokens": -1, "completion_tokens": 1}, "prompt_tokens"),
        ({"prompt_tokens": 2.5, "completion_tokens": 1}, "prompt_tokens"),
        ({"prompt_tokens": 2}, "completion_tokens"),
        (
            {
                "usage": {
                    "prompt_tokens": 2,
                    "completion_tokens": 1,
                    "prompt_tokens_details": {"cached_tokens": 3},
                }
            },
            "usage.prompt_tokens_details.cached_tokens",
        ),
        ({"input_tokens": 1, "output_tokens": "2"}, "output_tokens"),
    ],
)
def test_a_bad_usage_body_is_exit_2_naming_the_field(cli, configured, tmp_path, body, field):
    path = write(tmp_path, "usage.json", body)
    before = line_count(configured)
    error = error_of(cli("observe", "--goal", "g", "--usage", path))
    assert (error["code"], error["field"]) == ("invalid_usage", field)
    assert field in error["message"]
    assert line_count(configured) == before


@pytest.mark.parametrize("content", ['{"words": 3}', "not json", "[]"])
def test_a_usage_body_matching_neither_mapping_is_exit_2(cli, configured, tmp_path, content):
    path = write(tmp_path, "usage.json", content)
    error = error_of(cli("observe", "--goal", "g", "--usage", path))
    assert error["code"] == "invalid_usage"


def test_observe_without_counts_or_usage_is_exit_2(cli, configured):
    error = error_of(cli("observe", "--goal", "g", "--uncached-input", "1", "--output", "1"))
    assert error["code"] == "usage"
    assert "--cached-input" in error["message"]


def test_help_lists_the_usage_formats():
    result = run_cli("observe", "--help")
    assert result.code == 0
    assert "openai|anthropic|auto" in " ".join(result.stdout.split())


def test_cache_write_input_flag(cli, configured):
    result = cli("observe", "--goal", "g", *counts(uncached_input=5, cache_write_input=7),
                 "--at", at(1))  # fmt: skip
    assert result.code == 0, result.stdout
    [event] = events(configured, "capacity.observed")
    assert event["data"]["cache_write_input"] == 7
    assert result.json["usage"]["cache_write_input"] == 7


# -- the Python API --------------------------------------------------------------------------


def test_the_api_takes_usage_and_headers_objects(journal_path):
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
        headers = httpx.Headers(
            {"X-RateLimit-Limit-Requests": "60", "x-ratelimit-remaining-requests": "59"}
        )
        body = ledger.observe(goal="g", usage=CHAT_BODY, provider_headers=headers, at=at(1))
        assert body["usage"]["cached_input"] == 1000
        assert body["provider"] == {"rpm": {"limit": 60, "remaining": 59, "reset_at": None}}
        rejected = ledger.reject(goal="g", provider_headers={"retry-after": "2.5"}, at=at(2))
        assert rejected["retry_after_s"] == 2.5
        assert ledger.reject(goal="g", retry_after_s=0.25, at=at(3))["retry_after_s"] == 0.25


@pytest.mark.parametrize(
    "call",
    [
        {"usage": CHAT_BODY, "uncached_input": 1},
        {"usage": CHAT_BODY, "usage_format": "gemini"},
        {"usage": {"tokens": 1}},
        {"provider_headers": {"retry-after": "soon"}},
        {"provider_headers": 12},
    ],
)
def test_the_api_refuses_bad_provider_input_before_writing(journal_path, call):
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
        before = line_count(journal_path)
        with pytest.raises(InvalidInput):
            ledger.observe(goal="g", **call)
        assert line_count(journal_path) == before


@pytest.mark.parametrize("value", [True, float("nan"), float("inf"), -0.5, [1]])
def test_the_api_refuses_a_bad_retry_after(journal_path, value):
    with Ledger.open(journal_path) as ledger, pytest.raises(InvalidInput) as caught:
        ledger.reject(goal="g", retry_after_s=value)
    assert "retry_after_s" in caught.value.message or "--retry-after-s" in caught.value.message
