"""A LiteLLM callback that feeds the ledger (SPEC §3.6 "Adapters for Python runners").

    import litellm
    from quotaledger.adapters.litellm import Callback

    litellm.callbacks = [Callback(ledger, goal="g", run="r1")]

Every successful call (`completion`, `acompletion`, streamed or not) is observed with
its usage, its provider's rate-limit headers and its request id (the response's
`request-id`/`x-request-id` header, else its id: an observation logged twice counts
once); every rate-limit failure (HTTP 429) is recorded
with `reject`, with the Retry-After (and request id) of the exception's response. A call served
from LiteLLM's cache reached no provider and is not observed; a call whose response
carries no usage is observed as `unmetered` (one request, tokens unknown). A call may
name its own run with `metadata={"quotaledger_run": "r2"}`.

Neither this module nor `Callback` imports LiteLLM: the first `Callback(...)` does, to
build the class that also derives from LiteLLM's `CustomLogger` (what LiteLLM calls
back). `isinstance(callback, Callback)` holds as usual.

LiteLLM calls a synchronous call's callback from its logging thread, and an
asynchronous one's as a task on the caller's event loop (the ledger's fsync then runs
in a worker thread, never on the loop): a loop closed right after its last call can
drop that call's task, so let it run a moment before closing. A streamed call is
observed once its stream ends (with `stream_options={"include_usage": True}`).

A `Ledger` is not safe for concurrent use from several threads: the callback
serialises its own calls, and a runner that also uses the ledger from other threads
should give the callback a `Ledger` of its own (`Ledger.open(same_path)`: the
journal's lock orders the two).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from quotaledger.adapters import is_request_id
from quotaledger.adapters.usage import litellm_usage_of, plain
from quotaledger.journal.identifier import check_identifier

if TYPE_CHECKING:
    from quotaledger.api import Ledger

RUN_METADATA_KEY = "quotaledger_run"
"""The `metadata` key a call may use to name its own run."""
PROVIDER_PREFIX = "llm_provider-"
"""LiteLLM passes a provider's response headers on as `llm_provider-<name>` (the
OpenAI-compatible `x-ratelimit-*` ones also bare)."""
DETAIL_CHARS_MAX = 500
RATE_LIMITED = 429


class Callback:
    """Observes every successful LiteLLM call on `goal` (and `run`); rejects on a 429."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Callback:
        if cls is Callback:  # build (once) the class LiteLLM recognises, and make that
            cls = _logger_class()
        return super().__new__(cls)

    def __init__(self, ledger: Ledger, goal: str, run: str | None = None) -> None:
        check_identifier("goal", goal, option="goal")
        if run is not None:
            check_identifier("run", run, option="run")
        super().__init__()  # LiteLLM's CustomLogger
        self.ledger = ledger
        self.goal = goal
        self.run = run
        self._lock = threading.Lock()

    # -- what LiteLLM calls ----------------------------------------------------------------

    def log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._observe(kwargs, response_obj)

    def log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._reject(kwargs)

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        await asyncio.to_thread(self._observe, kwargs, response_obj)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        await asyncio.to_thread(self._reject, kwargs)

    # -- what the ledger records -------------------------------------------------------

    def _observe(self, kwargs: dict[str, Any], response_obj: Any) -> None:
        if kwargs.get("cache_hit"):
            return  # LiteLLM's own cache answered: no provider saw this call
        usage_obj = getattr(response_obj, "usage", None)
        if usage_obj is None:
            fields: dict[str, Any] = {"requests": 1, "coverage": "unmetered"}
        else:
            fields = dict(litellm_usage_of(plain(usage_obj)))
        headers = _response_headers(response_obj)
        # An observation logged twice counts once (SPEC §11): the provider's request-id
        # header names the call when it came with one (the ledger takes it from the
        # headers); else the response id, which LiteLLM keeps from OpenAI (chatcmpl-...)
        # but makes up for others (Anthropic's msg_... is replaced).
        response_id = getattr(response_obj, "id", None)
        if not _names_request(headers) and is_request_id(response_id):
            fields["request_id"] = response_id
        with self._lock:
            self.ledger.observe(
                goal=self.goal,
                run=self._run_of(kwargs),
                source=_source(kwargs),
                provider_headers=headers,
                **fields,
            )

    def _reject(self, kwargs: dict[str, Any]) -> None:
        exception = kwargs.get("exception")
        if getattr(exception, "status_code", None) != RATE_LIMITED:
            return
        detail = f"HTTP 429 from {kwargs.get('model') or 'the provider'}: {exception}"
        with self._lock:
            self.ledger.reject(
                goal=self.goal,
                run=self._run_of(kwargs),
                detail=detail[:DETAIL_CHARS_MAX],
                provider_headers=_exception_headers(exception),
            )

    def _run_of(self, kwargs: dict[str, Any]) -> str | None:
        params = kwargs.get("litellm_params") or {}
        metadata = params.get("metadata") or kwargs.get("metadata") or {}
        run = metadata.get(RUN_METADATA_KEY) if isinstance(metadata, Mapping) else None
        return run if isinstance(run, str) else self.run


def _source(kwargs: dict[str, Any]) -> str:
    model = kwargs.get("model")
    return f"litellm {model}" if isinstance(model, str) and model else "litellm"


def _response_headers(response_obj: Any) -> dict[str, str]:
    """The provider's headers LiteLLM kept on a response, under their own names."""
    hidden = getattr(response_obj, "_hidden_params", None)
    additional = hidden.get("additional_headers") if isinstance(hidden, Mapping) else None
    if not isinstance(additional, Mapping):
        return {}
    headers: dict[str, str] = {}
    for name, value in additional.items():
        if not isinstance(name, str):
            continue
        bare = name.removeprefix(PROVIDER_PREFIX)
        if name.startswith(PROVIDER_PREFIX) or bare not in headers:
            headers[bare] = value
    return headers


def _names_request(headers: Mapping[str, Any]) -> bool:
    """Whether the headers carry a request id the ledger will take (adapters.headers)."""
    from quotaledger.adapters.headers import REQUEST_ID_HEADERS

    return any(
        name.lower() in REQUEST_ID_HEADERS and is_request_id(str(value).strip())
        for name, value in headers.items()
    )


def _exception_headers(exception: Any) -> Mapping[str, str]:
    headers = getattr(exception, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exception, "response", None)
        headers = getattr(response, "headers", None)
    return headers if isinstance(headers, Mapping) else {}


@lru_cache(maxsize=1)
def _logger_class() -> type[Callback]:
    from litellm.integrations.custom_logger import CustomLogger

    # Callback first: its methods override CustomLogger's no-op ones.
    return type("Callback", (Callback, CustomLogger), {"__module__": __name__})


__all__ = ["RUN_METADATA_KEY", "Callback"]
