"""Adapters for Python runners (SPEC §3.6): what provider SDKs return, as observations.

    from quotaledger.adapters import openai as ql_openai

    ledger.observe(goal="g", run="r1", **ql_openai.usage(completion))

- `openai.usage(obj)`, `anthropic.usage(obj)`: an SDK response (or its `usage`, or a
  dict) as the observation's fields `uncached_input`, `cached_input`,
  `cache_write_input`, `output`, `requests`, and a whole response's id as
  `request_id` (SPEC §11: a retried observation counts once);
- `headers.provider_report(headers)`: the rate-limit headers (and request id) of a
  response, for `provider_headers=`;
- `litellm.Callback(ledger, goal, run=None)`: a LiteLLM `CustomLogger` that observes
  every successful call and records every rate-limit failure with `reject`;
- `inspect_ai`: inspect_ai hooks (SPEC §13.1) that admit, observe and release every
  sample of an `inspect eval` on one goal (`inspect_names`: their settings and names).

No module here imports an SDK at import time: the SDKs are optional extras
(`pip install 'quotaledger[openai]'`, `[anthropic]`, `[litellm]`, `[inspect]`), and
the mappings read SDK objects by their attributes. The one exception is `inspect_ai`,
which only inspect loads (its entry point): nothing else imports it.
"""

from quotaledger.journal.identifier import IDENTIFIER_CHARS, IDENTIFIER_CHARS_MAX

USAGE_FORMATS: tuple[str, ...] = ("openai", "anthropic", "auto")
"""The `--usage-format` choices: here, so the CLI names them without loading the mapping."""


def is_request_id(value: object) -> bool:
    """Whether a provider's response id or request-id header can be an observation's
    `request_id` (an identifier, SPEC §8), checked without being remembered as
    recurring identifiers are (journal.identifier): each request id is new."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= IDENTIFIER_CHARS_MAX
        and not value.strip(IDENTIFIER_CHARS)
    )
