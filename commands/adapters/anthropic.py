"""Anthropic SDK responses as observations (SPEC §3.6), without importing the SDK.

    message = client.messages.create(...)
    ledger.observe(goal="g", run="r1", **usage(message))

uncached = input_tokens (Anthropic already excludes the cache from it), cache_write =
cache_creation_input_tokens, cached = cache_read_input_tokens, output = output_tokens.
"""

from __future__ import annotations

from typing import Any

from quotaledger.adapters.usage import Usage, plain, usage_of


def usage(obj: Any) -> Usage:
    """The observation's counters of a `Message`, its `Usage`, or the same as a dict;
    one request."""
    return usage_of(plain(obj), "anthropic")


__all__ = ["usage"]
