"""Usage as providers report it (SPEC §3.6): the OpenAI chat-completions, OpenAI
Responses and Anthropic `usage` objects, alone or inside a whole response body, become
the observation's disjoint counters; anything else is refused with the field named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from quotaledger.adapters.usage import USAGE_FORMATS, parse_usage, usage_of
from quotaledger.journal import InvalidInput

CHAT = {
    "prompt_tokens": 1200,
    "completion_tokens": 300,
    "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1000, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 100},
}
RESPONSES = {
    "input_tokens": 900,
    "input_tokens_details": {"cached_tokens": 400},
    "output_tokens": 50,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 950,
}
ANTHROPIC = {
    "input_tokens": 25,
    "cache_creation_input_tokens": 2000,
    "cache_read_input_tokens": 8000,
    "output_tokens": 480,
    "service_tier": "standard",
}


def fields(uncached: int, cached: int, cache_write: int, output: int) -> dict[str, int]:
    return {
        "uncached_input": uncached,
        "cached_input": cached,
        "cache_write_input": cache_write,
        "output": output,
        "requests": 1,
    }


def test_the_formats_are_listed_in_order() -> None:
    assert USAGE_FORMATS == ("openai", "anthropic", "auto")


@pytest.mark.parametrize("usage_format", ["openai", "auto"])
def test_openai_chat_completions_uncached_is_prompt_minus_cached(usage_format: str) -> None:
    assert usage_of(CHAT, usage_format) == fields(200, 1000, 0, 300)


@pytest.mark.parametrize("usage_format", ["openai", "auto"])
def test_openai_responses_api(usage_format: str) -> None:
    assert usage_of(RESPONSES, usage_format) == fields(500, 400, 0, 50)


@pytest.mark.parametrize("usage_format", ["anthropic", "auto"])
def test_anthropic_counters_are_already_disjoint(usage_format: str) -> None:
    assert usage_of(ANTHROPIC, usage_format) == fields(25, 8000, 2000, 480)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"id": "chatcmpl-1", "object": "chat.completion", "choices": [], "usage": CHAT},
            {**fields(200, 1000, 0, 300), "request_id": "chatcmpl-1"},
        ),
        (
            {"id": "resp_1", "object": "response", "usage": RESPONSES},
            {**fields(500, 400, 0, 50), "request_id": "resp_1"},
        ),
        (
            {"id": "msg_1", "type": "message", "usage": ANTHROPIC},
            {**fields(25, 8000, 2000, 480), "request_id": "msg_1"},
        ),
        ({"usage": CHAT}, fields(200, 1000, 0, 300)),
        ({"id": None, "usage": CHAT}, fields(200, 1000, 0, 300)),
        ({"id": 7, "usage": CHAT}, fields(200, 1000, 0, 300)),
        ({"id": "has space", "usage": CHAT}, fields(200, 1000, 0, 300)),
    ],
)
def test_a_whole_response_body_is_accepted(body: dict[str, Any], expected: dict[str, Any]) -> None:
    """Its id, when it is an identifier, is the observation's request id (SPEC §11)."""
    assert usage_of(body, "auto") == expected


def test_absent_or_null_cache_details_count_zero() -> None:
    assert usage_of({"prompt_tokens": 10, "completion_tokens": 2}, "openai") == fields(10, 0, 0, 2)
    chat = {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None}
    assert usage_of(chat, "auto") == fields(10, 0, 0, 2)
    chat = {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {}}
    assert usage_of(chat, "auto") == fields(10, 0, 0, 2)
    anthropic = {
        "input_tokens": 7,
        "output_tokens": 3,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
    }
    assert usage_of(anthropic, "anthropic") == fields(7, 0, 0, 3)


def test_a_bare_input_output_pair_means_the_same_in_both_mappings() -> None:
    bare = {"input_tokens": 7, "output_tokens": 3}
    assert usage_of(bare, "auto") == usage_of(bare, "openai") == usage_of(bare, "anthropic")
    assert usage_of(bare, "auto") == fields(7, 0, 0, 3)


def test_parse_usage_reads_json_text() -> None:
    assert parse_usage(json.dumps({"usage": ANTHROPIC}), "auto") == fields(25, 8000, 2000, 480)


@pytest.mark.parametrize(
    ("body", "usage_format", "field"),
    [
        ({"prompt_tokens": -1, "completion_tokens": 2}, "openai", "prompt_tokens"),
        ({"prompt_tokens": 1.5, "completion_tokens": 2}, "openai", "prompt_tokens"),
        ({"prompt_tokens": "10", "completion_tokens": 2}, "openai", "prompt_tokens"),
        ({"prompt_tokens": True, "completion_tokens": 2}, "openai", "prompt_tokens"),
        ({"prompt_tokens": 10**12 + 1, "completion_tokens": 2}, "openai", "prompt_tokens"),
        ({"prompt_tokens": 10}, "openai", "completion_tokens"),
        ({"completion_tokens": 3}, "auto", "prompt_tokens"),
        (
            {
                "prompt_tokens": 10,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 11},
            },
            "openai",
            "prompt_tokens_details.cached_tokens",
        ),
        (
            {
                "prompt_tokens": 10,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": -1},
            },
            "auto",
            "prompt_tokens_details.cached_tokens",
        ),
        (
            {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": [1]},
            "auto",
            "prompt_tokens_details",
        ),
        (
            {"input_tokens": 5, "output_tokens": 1, "input_tokens_details": {"cached_tokens": 6}},
            "auto",
            "input_tokens_details.cached_tokens",
        ),
        ({"input_tokens": 5}, "anthropic", "output_tokens"),
        ({"output_tokens": 5}, "anthropic", "input_tokens"),
        (
            {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 2.0},
            "anthropic",
            "cache_read_input_tokens",
        ),
        (
            {"input_tokens": 5, "output_tokens": 1, "cache_creation_input_tokens": -2},
            "auto",
            "cache_creation_input_tokens",
        ),
        (
            {"usage": {"prompt_tokens": 1, "completion_tokens": -1}},
            "auto",
            "usage.completion_tokens",
        ),
    ],
)
def test_a_bad_count_is_refused_with_the_field_named(
    body: dict[str, Any], usage_format: str, field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        usage_of(body, usage_format)
    error = caught.value
    assert error.code == "invalid_usage"
    assert error.exit_code == 2
    assert error.context["field"] == field
    assert field in error.message


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"total_tokens": 5},
        {"tokens": 5},
        {"usage": None},
        {"usage": {"words": 3}},
        [1, 2],
        "usage",
        None,
        # an OpenAI chat body's keys and Anthropic's cache keys: which mapping is meant?
        {"prompt_tokens": 5, "completion_tokens": 1, "cache_read_input_tokens": 2},
    ],
)
def test_a_body_matching_neither_mapping_is_refused(body: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        usage_of(body, "auto")
    assert caught.value.code == "invalid_usage"


def test_an_anthropic_body_under_the_openai_mapping_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        usage_of(ANTHROPIC, "openai")
    assert caught.value.code == "invalid_usage"
    with pytest.raises(InvalidInput):
        usage_of(CHAT, "anthropic")


def test_an_unknown_format_is_refused_with_the_choices() -> None:
    with pytest.raises(InvalidInput) as caught:
        usage_of(CHAT, "gemini")
    assert caught.value.code == "invalid_choice"
    assert "openai, anthropic, auto" in caught.value.message


@pytest.mark.parametrize("text", ["", "{not json", "12"])
def test_usage_text_that_is_not_a_json_object_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_usage(text, "auto")
    assert caught.value.code == "invalid_usage"
