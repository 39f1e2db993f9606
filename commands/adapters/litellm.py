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

It never breaks the user's call and never loses an observation silently (LiteLLM
swallows a callback's exception at debug level): usage with malformed rate-limit
headers is recorded without them, usage whose counts do not add up (cached above
prompt) as `unmetered`, and a 429 with an unusable Retry-After without its headers
(the goal's cooldown rule applies), each with a WARNING on the `quotaledger` logger; a
call whose observation cannot be written at all (a lock timeout, a full disk) is
logged at ERROR with the counts that were lost and counted in `callback.failures`.
`Callback(..., strict=True)` raises instead.

A `Ledger` is not safe for concurrent use from several threads: the callback
serialises its own calls, and a runner that also uses the ledger from other threads
should give the callback a `Ledger` of its own (`Ledger.open(same_path)`: the
journal's lock orders the two).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

from quotaledger.adapters import is_request_id
from quotaledger.adapters.usage import litellm_usage_of, plain
from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
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

log = logging.getLogger("quotaledger")


class Callback:
    """Observes every successful LiteLLM call on `goal` (and `run`); rejects on a 429."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Callback:
        if cls is Callback:  # build (once) the class LiteLLM recognises, and make that
            cls = _logger_class()
        return super().__new__(cls)

    def __init__(
        self, ledger: Ledger, goal: str, run: str | None = None, *, strict: bool = False
    ) -> None:
        check_identifier("goal", goal, option="goal")
        if run is not None:
            check_identifier("run", run, option="run")
        super().__init__()  # LiteLLM's CustomLogger
        self.ledger = ledger
        self.goal = goal
        self.run = run
        self.strict = strict
        self.failures = 0
        """Calls whose observation or rejection could not be written (each logged)."""
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
        fields = self._usage_fields(getattr(response_obj, "usage", None))
        headers = _response_headers(response_obj)
        # An observation logged twice counts once (SPEC §11): the provider's request-id
        # header names the call when it came with one (the ledger takes it from the
        # headers); else the response id, which LiteLLM keeps from OpenAI (chatcmpl-...)
        # but makes up for others (Anthropic's msg_... is replaced).
        response_id = getattr(response_obj, "id", None)
        if not _names_request(headers) and is_request_id(response_id):
            fields["request_id"] = response_id
        # The model that answered prices the tokens (SPEC §12.4); a name that is not an
        # identifier is left out (its tokens then count as unpriced).
        model = getattr(response_obj, "model", None) or kwargs.get("model")
        if is_request_id(model):
            fields["model"] = model
        observe = partial(
            self.ledger.observe,
            goal=self.goal,
            run=self._run_of(kwargs),
            source=_source(kwargs),
            **fields,
        )
        self._record("observation", fields, observe, headers)

    def _usage_fields(self, usage_obj: Any) -> dict[str, Any]:
        """The observation's counts; usage that does not map (cached above prompt, a
        negative count) is one request of unknown tokens, with a WARNING: the window
        then reads as unmetered rather than as idle."""
        unmetered: dict[str, Any] = {"requests": 1, "coverage": "unmetered"}
        if usage_obj is None:
            return unmetered
        raw = plain(usage_obj)
        try:
            return dict(litellm_usage_of(raw))
        except InvalidInput as error:
            log.warning(
                "quotaledger: goal %s: LiteLLM usage %r does not map (%s); recorded as one "
                "unmetered request",
                self.goal,
                raw,
                error.message,
            )
            return unmetered

    def _reject(self, kwargs: dict[str, Any]) -> None:
        exception = kwargs.get("exception")
        if getattr(exception, "status_code", None) != RATE_LIMITED:
            return
        detail = f"HTTP 429 from {kwargs.get('model') or 'the provider'}: {exception}"
        reject = partial(
            self.ledger.reject,
            goal=self.goal,
            run=self._run_of(kwargs),
            detail=detail[:DETAIL_CHARS_MAX],
        )
        self._record("rejection", {"detail": detail[:80]}, reject, _exception_headers(exception))

    def _record(
        self,
        what: str,
        counts: Mapping[str, Any],
        call: Callable[..., Any],
        headers: Mapping[str, str],
    ) -> None:
        """`call(provider_headers=headers)`; malformed headers dropped with a WARNING;
        a write that fails logged at ERROR with what was lost (or raised when strict)."""
        try:
            with self._lock:
                try:
                    call(provider_headers=headers)
                except InvalidInput as error:
                    if error.code != codes.INVALID_PROVIDER_HEADERS:
                        raise
                    log.warning(
                        "quotaledger: goal %s: %s; the %s is recorded without the provider's "
                        "headers",
                        self.goal,
                        error.message,
                        what,
                    )
                    call(provider_headers={})
        except Exception as error:  # never the user's call's problem, never silent
            if self.strict:
                raise
            self.failures += 1
            log.error(
                "quotaledger: goal %s: a LiteLLM call's %s was not recorded (%s); lost: %s",
                self.goal,
                what,
                error,
                dict(counts),
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
