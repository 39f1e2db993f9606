"""OpenAI SDK responses as observations (SPEC §3.6), without importing the SDK.

    completion = client.chat.completions.create(...)     # or client.responses.create(...)
    ledger.observe(goal="g", run="r1", **usage(completion))

Chat completions: uncached = prompt_tokens - prompt_tokens_details.cached_tokens;
Responses API: the same from input_tokens and input_tokens_details.cached_tokens.
"""

from __future__ import annotations

from typing import Any

from quotaledger.adapters.usage import Usage, plain, usage_of


def usage(obj: Any) -> Usage:
    """The observation's counters of a `ChatCompletion`, a `Response`, their `usage`
    (`CompletionUsage`, `ResponseUsage`), or the same as a dict; one request."""
    return usage_of(plain(obj), "openai")


__all__ = ["usage"]
