"""`quotaledger.adapters.litellm.Callback` under LiteLLM itself (SPEC §3.6): every
successful call, sync and async, is observed with its usage and its provider's headers;
every rate-limit failure is a `reject` with the Retry-After of the exception's response.

No network: LiteLLM's `mock_response` (a response, or the exception a provider raised),
and for the Anthropic path LiteLLM's own Anthropic client over httpx's MockTransport.
LiteLLM calls a sync call's callback from its logging thread, so the tests wait for the
event to reach the journal (a bounded wait for a condition, never a timed assertion).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download

import httpx
import litellm
import openai
import pytest
from litellm.integrations.custom_logger import CustomLogger
from litellm.llms.custom_httpx.http_handler import HTTPHandler

import quotaledger
from quotaledger.adapters.litellm import Callback
from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput

MESSAGES = [{"role": "user", "content": "hello"}]
WAIT_S = 120


def events(path: str, kind: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return [r for r in records if r["kind"] == kind]


async def async_wait_for(path: str, kind: str, count: int) -> list[dict[str, Any]]:
    """`wait_for` on the event loop: LiteLLM runs async callbacks as tasks of the loop
    the call ran on, so the loop must keep running until they are done."""
    deadline = time.monotonic() + WAIT_S
    while len(events(path, kind)) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return wait_for(path, kind, count)


def wait_for(path: str, kind: str, count: int) -> list[dict[str, Any]]:
    """The first `count` events of `kind`, once LiteLLM's logging has written them."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = events(path, kind)
        if len(found) >= count or time.monotonic() > deadline:
            assert len(found) >= count, f"{len(found)} {kind} events after {WAIT_S}s"
            return found
        time.sleep(0.02)


@pytest.fixture
def ledger(journal_path: str) -> Iterator[Ledger]:
    with Ledger.open(journal_path) as handle:
        handle.configure(goal="g", quota_tpm=100_000)
        yield handle


@pytest.fixture
def callback(ledger: Ledger) -> Iterator[Callback]:
    callback = Callback(ledger, goal="g", run="r1")
    litellm.callbacks = [callback]
    try:
        yield callback
    finally:
        # LiteLLM copies litellm.callbacks into its success/failure lists on first use:
        # take this test's callback (and its closing ledger) out of every one.
        litellm.logging_callback_manager.remove_callback_from_all_lists(callback)
        litellm.callbacks = []


def openai_response(headers: dict[str, str]) -> litellm.ModelResponse:
    response = litellm.ModelResponse(
        model="gpt-4o-mini",
        usage={
            "prompt_tokens": 1200,
            "completion_tokens": 300,
            "total_tokens": 1500,
            "prompt_tokens_details": {"cached_tokens": 1000},
        },
    )
    response.set_provider_response_headers(httpx.Headers(headers))
    return response


def rate_limit_error(headers: dict[str, str]) -> openai.RateLimitError:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    response = httpx.Response(429, headers=headers, request=request)
    return openai.RateLimitError("Rate limit reached", response=response, body=None)


def test_the_callback_is_a_litellm_custom_logger(callback: Callback) -> None:
    assert isinstance(callback, CustomLogger)
    assert isinstance(callback, Callback)
    assert (callback.goal, callback.run) == ("g", "r1")


def test_a_bad_goal_or_run_is_refused_when_the_callback_is_made(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput):
        Callback(ledger, goal="not a goal")
    with pytest.raises(InvalidInput):
        Callback(ledger, goal="g", run="")


def test_a_sync_completion_is_observed_with_its_usage_and_headers(
    callback: Callback, journal_path: str
) -> None:
    headers = {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
        "x-ratelimit-limit-tokens": "200000",
        "x-ratelimit-remaining-tokens": "150000",
    }
    litellm.completion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response=openai_response(headers)
    )
    [event] = wait_for(journal_path, "capacity.observed", 1)
    data = event["data"]
    assert (data["uncached_input"], data["cached_input"], data["output"]) == (200, 1000, 300)
    assert (data["requests"], data["run"], data["coverage"]) == (1, "r1", "measured")
    assert data["source"] == "litellm gpt-4o-mini"
    assert data["provider"]["tpm"] == {"limit": 200000, "remaining": 150000, "reset_at": None}
    assert data["provider"]["rpm"]["limit"] == 500
    assert data["provider"]["rpm"]["remaining"] == 499
    assert data["provider"]["rpm"]["reset_at"] > event["at"]  # 120 ms after the event


def test_the_response_id_is_the_request_id_and_a_second_log_counts_once(
    callback: Callback, journal_path: str
) -> None:
    response = litellm.completion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response=openai_response({})
    )
    [event] = wait_for(journal_path, "capacity.observed", 1)
    assert response.id.startswith("chatcmpl-")
    assert event["data"]["request_id"] == response.id
    size = Path(journal_path).stat().st_size
    # LiteLLM logging the same response again (a retried success handler) adds nothing.
    callback.log_success_event({"model": "gpt-4o-mini"}, response, None, None)
    assert Path(journal_path).stat().st_size == size
    assert len(events(journal_path, "capacity.observed")) == 1


def test_a_rejection_takes_the_request_id_of_the_exception_response(
    callback: Callback, journal_path: str
) -> None:
    error = rate_limit_error({"retry-after": "2", "x-request-id": "req_429a"})
    for _ in range(2):  # the same failure logged twice is one rejection
        callback.log_failure_event({"exception": error, "model": "gpt-4o-mini"}, None, None, None)
    [event] = events(journal_path, "capacity.rejected")
    assert (event["data"]["request_id"], event["data"]["retry_after_s"]) == ("req_429a", 2)


def test_async_completions_are_observed_once_each(callback: Callback, journal_path: str) -> None:
    async def two_calls() -> None:
        for _ in range(2):
            await litellm.acompletion(model="gpt-4o-mini", messages=MESSAGES, mock_response="hi")
        await async_wait_for(journal_path, "capacity.observed", 2)

    asyncio.run(two_calls())
    # A further sync call is observed too, and nothing was counted twice before it.
    litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="hi")
    observed = wait_for(journal_path, "capacity.observed", 3)
    assert len(observed) == 3
    for event in observed:
        data = event["data"]
        assert (data["requests"], data["run"]) == (1, "r1")
        assert data["uncached_input"] > 0 and data["output"] > 0


def test_streamed_calls_are_observed_once_the_stream_ends(
    callback: Callback, journal_path: str
) -> None:
    options = {"stream": True, "stream_options": {"include_usage": True}}
    for _ in litellm.completion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response="one two three", **options
    ):
        pass
    wait_for(journal_path, "capacity.observed", 1)

    async def stream() -> None:
        response = await litellm.acompletion(
            model="gpt-4o-mini", messages=MESSAGES, mock_response="four five", **options
        )
        async for _ in response:
            pass
        await async_wait_for(journal_path, "capacity.observed", 2)

    asyncio.run(stream())
    observed = wait_for(journal_path, "capacity.observed", 2)
    assert len(observed) == 2
    for event in observed:
        assert event["data"]["requests"] == 1
        assert event["data"]["output"] > 0


def test_a_call_may_name_its_own_run(callback: Callback, journal_path: str) -> None:
    litellm.completion(
        model="gpt-4o-mini",
        messages=MESSAGES,
        mock_response="hi",
        metadata={"quotaledger_run": "r2"},
    )
    [event] = wait_for(journal_path, "capacity.observed", 1)
    assert event["data"]["run"] == "r2"


def test_anthropic_through_litellm_keeps_cache_reads_and_writes_apart(
    callback: Callback, journal_path: str
) -> None:
    def anthropic_api(request: httpx.Request) -> httpx.Response:
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "hello"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 25,
                "output_tokens": 480,
                "cache_creation_input_tokens": 2000,
                "cache_read_input_tokens": 8000,
            },
        }
        headers = {
            "anthropic-ratelimit-input-tokens-limit": "40000",
            "anthropic-ratelimit-input-tokens-remaining": "31000",
            "anthropic-ratelimit-input-tokens-reset": "2026-11-29T14:00:20Z",
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "49",
            "request-id": "req_011CU",
        }
        return httpx.Response(200, json=body, headers=headers)

    client = HTTPHandler(client=httpx.Client(transport=httpx.MockTransport(anthropic_api)))
    litellm.completion(
        model="anthropic/claude-sonnet-4-5",
        messages=MESSAGES,
        api_key="sk-ant-test",
        client=client,
    )
    [event] = wait_for(journal_path, "capacity.observed", 1)
    data = event["data"]
    # LiteLLM replaces the Messages API's id (msg_1): the provider's request-id names it.
    assert data["request_id"] == "req_011CU"
    assert (data["uncached_input"], data["cache_write_input"]) == (25, 2000)
    assert (data["cached_input"], data["output"]) == (8000, 480)
    assert data["provider"] == {
        "itpm": {"limit": 40000, "remaining": 31000, "reset_at": "2026-11-29T14:00:20.000000Z"},
        "rpm": {"limit": 50, "remaining": 49, "reset_at": None},
    }


def test_a_rate_limit_error_is_a_rejection_with_its_retry_after(
    callback: Callback, journal_path: str
) -> None:
    error = rate_limit_error({"retry-after": "1.5", "x-ratelimit-remaining-requests": "0"})
    with pytest.raises(litellm.RateLimitError):
        litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response=error)
    [event] = wait_for(journal_path, "capacity.rejected", 1)
    data = event["data"]
    assert (data["retry_after_s"], data["cooldown_s"], data["run"]) == (1.5, 1.5, "r1")
    assert data["provider"] == {"rpm": {"limit": None, "remaining": 0, "reset_at": None}}
    assert data["detail"].startswith("HTTP 429 from gpt-4o-mini")
    assert events(journal_path, "capacity.observed") == []


def test_an_async_rate_limit_error_without_headers_starts_the_backoff(
    callback: Callback, journal_path: str
) -> None:
    async def call() -> None:
        with pytest.raises(litellm.RateLimitError):
            await litellm.acompletion(
                model="gpt-4o-mini", messages=MESSAGES, mock_response="litellm.RateLimitError"
            )
        await async_wait_for(journal_path, "capacity.rejected", 1)

    asyncio.run(call())
    [event] = wait_for(journal_path, "capacity.rejected", 1)
    assert (event["data"]["retry_after_s"], event["data"]["cooldown_s"]) == (None, 15)


def test_other_failures_and_cache_hits_record_nothing(
    callback: Callback, journal_path: str
) -> None:
    before = Path(journal_path).read_bytes()
    server_error = litellm.InternalServerError(
        message="overloaded", llm_provider="openai", model="gpt-4o-mini"
    )
    callback.log_failure_event({"exception": server_error}, None, None, None)
    cached = openai_response({})
    callback.log_success_event({"cache_hit": True, "model": "gpt-4o-mini"}, cached, None, None)
    assert Path(journal_path).read_bytes() == before


def test_a_response_without_usage_is_observed_as_unmetered(
    callback: Callback, journal_path: str
) -> None:
    response = litellm.ModelResponse(model="gpt-4o-mini")
    assert getattr(response, "usage", None) is None
    callback.log_success_event({"model": "gpt-4o-mini"}, response, None, None)
    [event] = events(journal_path, "capacity.observed")
    assert (event["data"]["coverage"], event["data"]["requests"]) == ("unmetered", 1)


def test_importing_the_callback_imports_no_sdk() -> None:
    code = (
        "import sys\n"
        "from quotaledger.adapters.litellm import Callback\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'litellm', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# -- nothing lost quietly (issue 28 item 9) -------------------------------------------------


def _quotaledger_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "quotaledger" and r.levelno == level
    ]


def test_malformed_rate_limit_headers_keep_the_usage_with_a_warning(
    callback: Callback, journal_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="quotaledger")
    headers = {"x-ratelimit-limit-tokens": "lots", "x-ratelimit-remaining-tokens": "9" * 5000}
    litellm.completion(
        model="gpt-4o-mini", messages=MESSAGES, mock_response=openai_response(headers)
    )
    [event] = wait_for(journal_path, "capacity.observed", 1)
    data = event["data"]
    assert (data["uncached_input"], data["cached_input"], data["output"]) == (200, 1000, 300)
    assert "provider" not in data or data["provider"] is None
    [warning] = _quotaledger_records(caplog, logging.WARNING)
    assert "x-ratelimit-" in warning and "without the provider's headers" in warning
    assert callback.failures == 0


def test_usage_that_does_not_add_up_is_an_unmetered_request_with_a_warning(
    callback: Callback, journal_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="quotaledger")
    odd = litellm.ModelResponse(
        model="gpt-4o-mini",
        usage={
            "prompt_tokens": 10,
            "completion_tokens": 3,
            "total_tokens": 13,
            "prompt_tokens_details": {"cached_tokens": 50},  # cached above prompt
        },
    )
    litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response=odd)
    [event] = wait_for(journal_path, "capacity.observed", 1)
    assert (event["data"]["coverage"], event["data"]["requests"]) == ("unmetered", 1)
    [warning] = _quotaledger_records(caplog, logging.WARNING)
    assert "cached_tokens (50) is more than" in warning


def test_a_429_with_a_garbage_retry_after_starts_the_goals_cooldown(
    callback: Callback, journal_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="quotaledger")
    error = rate_limit_error({"retry-after": "whenever you like"})
    with pytest.raises(litellm.RateLimitError):
        litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response=error)
    [event] = wait_for(journal_path, "capacity.rejected", 1)
    assert (event["data"]["retry_after_s"], event["data"]["cooldown_s"]) == (None, 15)
    [warning] = _quotaledger_records(caplog, logging.WARNING)
    assert "retry-after" in warning


def test_a_locked_journal_loses_the_call_loudly(
    journal_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Another handle holds the journal's lock past the callback's timeout: the
    observation cannot be written; it is logged at ERROR with its counts and counted."""
    caplog.set_level(logging.WARNING, logger="quotaledger")
    with Ledger.open(journal_path) as setup:
        setup.configure(goal="g", quota_tpm=100_000)
    ledger = Ledger.open(journal_path, lock_timeout_s=0.05)
    callback = Callback(ledger, goal="g", run="r1")
    litellm.callbacks = [callback]
    try:
        with Ledger.open(journal_path) as holder, holder.journal.transaction():
            before = Path(journal_path).read_bytes()
            litellm.completion(
                model="gpt-4o-mini", messages=MESSAGES, mock_response=openai_response({})
            )
            deadline = time.monotonic() + WAIT_S
            while callback.failures == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
        assert callback.failures == 1
        assert Path(journal_path).read_bytes() == before
        [error] = _quotaledger_records(caplog, logging.ERROR)
        assert "observation was not recorded" in error and "lock" in error
        assert "'uncached_input': 200" in error and "'output': 300" in error
    finally:
        litellm.logging_callback_manager.remove_callback_from_all_lists(callback)
        litellm.callbacks = []
        ledger.close()


def test_strict_raises_instead(journal_path: str) -> None:
    with Ledger.open(journal_path) as setup:
        setup.configure(goal="g", quota_tpm=100_000)
    with Ledger.open(journal_path, lock_timeout_s=0.05) as ledger:
        callback = Callback(ledger, goal="g", strict=True)
        with (
            Ledger.open(journal_path) as holder,
            holder.journal.transaction(),
            pytest.raises(quotaledger.Error) as caught,
        ):
            callback.log_success_event({"model": "m"}, openai_response({}), None, None)
        assert caught.value.code == "lock_timeout"
        assert callback.failures == 0
