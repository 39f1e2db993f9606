"""The adapters read the SDKs' real response types (SPEC §3.6 "Adapters for Python
runners"): OpenAI's ChatCompletion and Response, Anthropic's Message, and the header
mappings of httpx and requests. The SDKs are test extras; nothing here is a fake."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
import requests.structures
from anthropic.types import Message
from anthropic.types import Usage as AnthropicUsage
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from quotaledger.adapters import anthropic as ql_anthropic
from quotaledger.adapters import headers as ql_headers
from quotaledger.adapters import openai as ql_openai
from quotaledger.journal import InvalidInput


def chat_completion(**usage: object) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1764424800,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "hello"},
                }
            ],
            "usage": usage or None,
        }
    )


def responses_response() -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1764424800,
            "model": "gpt-4.1",
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 900,
                "input_tokens_details": {"cached_tokens": 400, "cache_write_tokens": 0},
                "output_tokens": 50,
                "output_tokens_details": {"reasoning_tokens": 10},
                "total_tokens": 950,
            },
        }
    )


def anthropic_message(**usage: object) -> Message:
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "hello"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
    )


def test_openai_chat_completion() -> None:
    completion = chat_completion(
        prompt_tokens=1200,
        completion_tokens=300,
        total_tokens=1500,
        prompt_tokens_details={"cached_tokens": 1000},
    )
    expected = {
        "uncached_input": 200,
        "cached_input": 1000,
        "cache_write_input": 0,
        "output": 300,
        "requests": 1,
    }
    # A whole response's id is the observation's request id (SPEC §11); a usage has none.
    whole = {**expected, "request_id": "chatcmpl-1", "model": completion.model}
    assert ql_openai.usage(completion) == whole
    assert ql_openai.usage(completion.usage) == expected
    assert ql_openai.usage(completion.model_dump()) == whole


def test_openai_chat_completion_without_details() -> None:
    completion = chat_completion(prompt_tokens=10, completion_tokens=2, total_tokens=12)
    assert ql_openai.usage(completion)["uncached_input"] == 10


def test_openai_chat_completion_without_usage_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        ql_openai.usage(chat_completion())
    assert caught.value.context["field"] == "usage"


def test_openai_responses_api() -> None:
    response = responses_response()
    expected = {
        "uncached_input": 500,
        "cached_input": 400,
        "cache_write_input": 0,
        "output": 50,
        "requests": 1,
    }
    assert ql_openai.usage(response) == {
        **expected,
        "request_id": "resp_1",
        "model": response.model,
    }
    assert ql_openai.usage(response.usage) == expected


def test_anthropic_message_with_cache_reads_and_writes() -> None:
    message = anthropic_message(
        input_tokens=25,
        output_tokens=480,
        cache_creation_input_tokens=2000,
        cache_read_input_tokens=8000,
    )
    expected = {
        "uncached_input": 25,
        "cached_input": 8000,
        "cache_write_input": 2000,
        "output": 480,
        "requests": 1,
    }
    assert ql_anthropic.usage(message) == {
        **expected,
        "request_id": "msg_1",
        "model": message.model,
    }
    assert isinstance(message.usage, AnthropicUsage)
    assert ql_anthropic.usage(message.usage) == expected


def test_anthropic_message_without_cache_fields() -> None:
    message = anthropic_message(input_tokens=7, output_tokens=3)
    assert ql_anthropic.usage(message.usage) == {
        "uncached_input": 7,
        "cached_input": 0,
        "cache_write_input": 0,
        "output": 3,
        "requests": 1,
    }


def test_a_response_id_that_is_not_an_identifier_is_left_out() -> None:
    completion = chat_completion(prompt_tokens=10, completion_tokens=2, total_tokens=12)
    odd = completion.model_copy(update={"id": "chatcmpl 1"})
    assert "request_id" not in ql_openai.usage(odd)
    assert "request_id" not in ql_openai.usage(completion.model_copy(update={"id": "x" * 129}))


def test_the_response_model_prices_the_observation(journal_path: str) -> None:
    from quotaledger.api import Ledger

    message = anthropic_message(input_tokens=1_000, output_tokens=100)
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", cap_usd=10)
        ledger.price_set(model=message.model, input_usd_per_mtok=3, output_usd_per_mtok=15)
        answer = ledger.observe(goal="g", **ql_anthropic.usage(message))
        assert answer["appended"]
        spend = ledger.inspect(goal="g")["goals"]["g"]["spend"]
        assert (spend["usd"], spend["unpriced_tokens"]) == (0.0045, 0)


def test_a_response_observed_twice_through_the_adapter_counts_once(journal_path: str) -> None:
    from quotaledger.api import Ledger

    message = anthropic_message(input_tokens=7, output_tokens=3)
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=1000)
        first = ledger.observe(goal="g", **ql_anthropic.usage(message))
        again = ledger.observe(goal="g", **ql_anthropic.usage(message))
        assert (first["appended"], first["request_id"]) == (True, "msg_1")
        assert (again["appended"], again["idempotent"], again["event"]) == (
            False,
            True,
            first["event"],
        )
        assert ledger.inspect(goal="g")["goals"]["g"]["usage"]["output"] == 3


def test_each_adapter_refuses_the_other_providers_usage() -> None:
    message = anthropic_message(input_tokens=7, output_tokens=3, cache_read_input_tokens=1)
    with pytest.raises(InvalidInput):
        ql_openai.usage(message)
    completion = chat_completion(prompt_tokens=10, completion_tokens=2, total_tokens=12)
    with pytest.raises(InvalidInput):
        ql_anthropic.usage(completion)


def test_something_that_is_no_response_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        ql_openai.usage(object())
    assert caught.value.code == "invalid_usage"


RATE_LIMITS = [
    ("x-ratelimit-limit-requests", "500"),
    ("X-RateLimit-Remaining-Requests", "499"),
    ("x-ratelimit-reset-requests", "120ms"),
    ("content-type", "application/json"),
]
EXPECTED = {
    "x-ratelimit-limit-requests": "500",
    "x-ratelimit-remaining-requests": "499",
    "x-ratelimit-reset-requests": "120ms",
}


def test_provider_report_from_httpx_headers() -> None:
    assert ql_headers.provider_report(httpx.Headers(RATE_LIMITS)) == EXPECTED


def test_provider_report_from_an_httpx_response() -> None:
    response = httpx.Response(429, headers=[*RATE_LIMITS, ("Retry-After", "1.5")])
    assert ql_headers.provider_report(response.headers) == {**EXPECTED, "retry-after": "1.5"}


def test_provider_report_from_requests_case_insensitive_dict() -> None:
    headers = requests.structures.CaseInsensitiveDict(dict(RATE_LIMITS))
    assert ql_headers.provider_report(headers) == EXPECTED


def test_provider_report_keeps_the_request_id_headers() -> None:
    openai_style = httpx.Headers([*RATE_LIMITS, ("X-Request-Id", "req_abc")])
    assert ql_headers.provider_report(openai_style) == {**EXPECTED, "x-request-id": "req_abc"}
    anthropic_style = httpx.Headers([("request-id", "req_011CU"), ("content-type", "x")])
    assert ql_headers.provider_report(anthropic_style) == {"request-id": "req_011CU"}
    parsed = ql_headers.parse_provider_headers({"request-id": "b", "x-request-id": "a"})
    assert parsed.request_id == "a"  # OpenAI's name first
    # A request id that is not an identifier is left out, never refused.
    assert ql_headers.provider_report({"x-request-id": "not one"}) == {}


def test_provider_report_from_a_dict_and_from_pairs() -> None:
    assert ql_headers.provider_report(dict(RATE_LIMITS)) == EXPECTED
    assert ql_headers.provider_report(RATE_LIMITS) == EXPECTED


def test_a_repeated_header_in_httpx_is_refused() -> None:
    # httpx joins repeated values with ", ": two different limits are no limit at all.
    headers = httpx.Headers([("x-ratelimit-limit-tokens", "1"), ("x-ratelimit-limit-tokens", "2")])
    with pytest.raises(InvalidInput) as caught:
        ql_headers.provider_report(headers)
    assert caught.value.context["header"] == "x-ratelimit-limit-tokens"


ADAPTERS = ["usage", "headers", "openai", "anthropic", "litellm"]


@pytest.mark.parametrize("module", ADAPTERS)
def test_importing_an_adapter_imports_no_sdk(module: str) -> None:
    code = (
        f"import sys, quotaledger.adapters.{module}\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'litellm', 'httpx', 'requests')"
        " if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
