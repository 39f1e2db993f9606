"""Usage as providers report it (SPEC §3.6), mapped onto the observation's counters.

    OpenAI chat completions   uncached = prompt_tokens - prompt_tokens_details.cached_tokens
                              cached   = prompt_tokens_details.cached_tokens
                              output   = completion_tokens
    OpenAI Responses API      the same from input_tokens, input_tokens_details.cached_tokens,
                              output_tokens
    Anthropic Messages        uncached    = input_tokens (it excludes the cache)
                              cache_write = cache_creation_input_tokens
                              cached      = cache_read_input_tokens
                              output      = output_tokens

Every mapping records one request. `auto` tells the shapes apart by their keys; a whole
response body holding a `usage` object is accepted, and its `id` (`chatcmpl-...`,
`resp_...`, `msg_...`) is the observation's `request_id` (SPEC §11: a retried
observation counts once; an id that is not an identifier is left out), and its `model` the
observation's model (SPEC §12.4: what prices its tokens). The result uses
the observation's field names, so it goes straight into `ledger.observe(goal=...,
**usage)`. Bad input is
`invalid_usage` (exit 2) naming the field, e.g. `usage.prompt_tokens_details.cached_tokens`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict

from quotaledger.adapters import USAGE_FORMATS, is_request_id
from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.projections.limits import TOKEN_COUNT_MAX, power_of_ten


class Usage(TypedDict):
    """An observation's counters, disjoint: tokens read from a cache are not also
    uncached, tokens written to one are not also uncached."""

    uncached_input: int
    cached_input: int
    cache_write_input: int
    output: int
    requests: int
    request_id: NotRequired[str]
    """The response's id, when a whole response was given."""
    model: NotRequired[str]
    """The response's model, when a whole response was given (SPEC §12.4: the price of
    the observation's tokens)."""


# The keys that say which provider wrote a usage object (a bare input/output pair means
# the same under the Responses and the Anthropic mapping, so it needs no marker).
_CHAT_KEYS = frozenset({"prompt_tokens", "completion_tokens"})
_RESPONSES_KEYS = frozenset({"input_tokens_details"})
_ANTHROPIC_KEYS = frozenset(
    {"cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation"}
)
_SHAPE_NAMES = {
    "chat": "OpenAI chat completions (prompt_tokens)",
    "responses": "OpenAI Responses (input_tokens_details)",
    "anthropic": "Anthropic (cache_*_input_tokens)",
}


def _invalid(message: str | Callable[[str], str], field: str | None = None) -> InvalidInput:
    """`message`: text, or a function of the caller's word for `usage` (the CLI's flag)."""
    context: dict[str, Any] = {"option": "--usage"}
    if field is not None:
        context["field"] = field
    about = None if isinstance(message, str) else "usage"
    return InvalidInput(message, code=codes.INVALID_USAGE, about=about, **context)


def parse_usage(text: str, usage_format: str = "auto") -> Usage:
    """The counters in a JSON `usage` object or response body (`observe --usage`)."""
    # here: only --usage needs it, and the CLI start-up does not
    from quotaledger.journal.jsoninput import JsonInputError, parse_bounded

    check_format(usage_format)
    try:
        body = parse_bounded(text)
    except JsonInputError as exc:
        reason = str(exc)
        raise _invalid(lambda name: f"{name} is not valid JSON: {reason}") from None
    return usage_of(body, usage_format)


def check_format(usage_format: str) -> str:
    if usage_format not in USAGE_FORMATS:
        raise InvalidInput(
            lambda name: f"{name} must be one of {', '.join(USAGE_FORMATS)}, got {usage_format!r}",
            code=codes.INVALID_CHOICE,
            about="usage_format",
            option="--usage-format",
        )
    return usage_format


def usage_of(body: Any, usage_format: str = "auto") -> Usage:
    """The counters of a usage object or of a response body holding one (plain data:
    dicts, lists, numbers, as JSON decodes them; see `plain` for SDK objects)."""
    check_format(usage_format)
    prefix = ""
    request_id = model = None
    if isinstance(body, Mapping) and "usage" in body:
        request_id, model = body.get("id"), body.get("model")
        body, prefix = body["usage"], "usage."
        if body is None:
            raise _invalid("the response body has no usage (usage is null)", "usage")
    if not isinstance(body, Mapping):
        raise _invalid(
            lambda name: (
                f"{name} must be a usage object or a response body holding one, "
                f"got {type(body).__name__}"
            ),
            prefix.rstrip(".") or None,
        )
    shape = _shape(body, usage_format, prefix)
    if shape == "chat":
        usage = _openai(body, prefix, "prompt_tokens", "prompt_tokens_details", "completion_tokens")
    elif shape == "responses":
        usage = _openai(body, prefix, "input_tokens", "input_tokens_details", "output_tokens")
    else:
        usage = _anthropic(body, prefix)
    if is_request_id(request_id):
        usage["request_id"] = str(request_id)
    if is_request_id(model):  # a model name follows the identifier rule too (SPEC §12.4)
        usage["model"] = str(model)
    return usage


def plain(obj: Any) -> Any:
    """An SDK response object (a pydantic model: openai, anthropic, litellm) as the plain
    data its JSON would decode to; plain data as it is."""
    if obj is None or isinstance(obj, Mapping | list | str | int | float):
        return obj
    usage = getattr(obj, "usage", None)
    if usage is not None and not callable(usage):
        # A response: only its id and usage are read, so the content is never copied.
        return {
            "id": getattr(obj, "id", None),
            "model": getattr(obj, "model", None),
            "usage": plain(usage),
        }
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    raise _invalid(f"not a usage object or response: {type(obj).__name__}")


def _shape(body: Mapping[str, Any], usage_format: str, prefix: str) -> str:
    keys = set(body)
    families = [
        name
        for name, markers in (
            ("chat", _CHAT_KEYS),
            ("responses", _RESPONSES_KEYS),
            ("anthropic", _ANTHROPIC_KEYS),
        )
        if keys & markers
    ]
    where = f"{prefix.rstrip('.')} " if prefix else ""
    if len(families) > 1:
        raise _invalid(
            f"the {where}object has keys of more than one provider's usage ("
            + ", ".join(sorted(keys & (_CHAT_KEYS | _RESPONSES_KEYS | _ANTHROPIC_KEYS)))
            + "): give it as the provider sent it",
            prefix.rstrip(".") or None,
        )
    if not families and not keys & {"input_tokens", "output_tokens"}:
        raise _invalid(
            f"the {where}object matches neither the OpenAI nor the Anthropic usage mapping "
            "(no prompt_tokens/completion_tokens, no input_tokens/output_tokens)",
            prefix.rstrip(".") or None,
        )
    if not families:  # a bare input/output pair: the Responses and Anthropic mappings agree
        return "responses" if usage_format == "openai" else "anthropic"
    shape = families[0]
    wanted = {"openai": ("chat", "responses"), "anthropic": ("anthropic",)}.get(usage_format)
    if wanted is not None and shape not in wanted:
        raise _invalid(
            f"the {where}object is {_SHAPE_NAMES[shape]} usage, not "
            + ("OpenAI's" if usage_format == "openai" else "Anthropic's"),
            prefix.rstrip(".") or None,
        )
    return shape


def litellm_usage_of(body: Any) -> Usage:
    """LiteLLM's usage (plain data): OpenAI's chat-completions shape for every provider,
    whose `prompt_tokens` includes the cache reads (`prompt_tokens_details.cached_tokens`)
    and, for Anthropic, the cache writes (`prompt_tokens_details.cache_creation_tokens`)."""
    if not isinstance(body, Mapping):
        raise _invalid(f"LiteLLM usage must be an object, got {type(body).__name__}")
    return _openai(
        body,
        "usage.",
        "prompt_tokens",
        "prompt_tokens_details",
        "completion_tokens",
        cache_write_key="cache_creation_tokens",
    )


def _openai(
    body: Mapping[str, Any],
    prefix: str,
    input_key: str,
    details_key: str,
    output_key: str,
    *,
    cache_write_key: str | None = None,
) -> Usage:
    prompt = _count(body, input_key, prefix, required=True)
    details = body.get(details_key)
    cached = cache_write = 0
    if details is not None:
        if not isinstance(details, Mapping):
            raise _invalid(f"{prefix}{details_key} must be an object", prefix + details_key)
        cached = _count(details, "cached_tokens", f"{prefix}{details_key}.")
        if cache_write_key is not None:
            cache_write = _count(details, cache_write_key, f"{prefix}{details_key}.")
    if cached + cache_write > prompt:
        field = f"{prefix}{details_key}.cached_tokens"
        raise _invalid(
            f"{field} ({cached}) is more than {prefix}{input_key} ({prompt}), which includes it"
            + (f" (with {cache_write} cache writes)" if cache_write else ""),
            field,
        )
    return Usage(
        uncached_input=prompt - cached - cache_write,
        cached_input=cached,
        cache_write_input=cache_write,
        output=_count(body, output_key, prefix, required=True),
        requests=1,
    )


def _anthropic(body: Mapping[str, Any], prefix: str) -> Usage:
    return Usage(
        uncached_input=_count(body, "input_tokens", prefix, required=True),
        cached_input=_count(body, "cache_read_input_tokens", prefix),
        cache_write_input=_count(body, "cache_creation_input_tokens", prefix),
        output=_count(body, "output_tokens", prefix, required=True),
        requests=1,
    )


def _count(body: Mapping[str, Any], key: str, prefix: str, *, required: bool = False) -> int:
    """A token count: an integer 0..10^12 (a bool or 1.0 is not one); absent or null is
    0 for an optional count and refused for a required one."""
    field = prefix + key
    value = body.get(key)
    if value is None:
        if required:
            raise _invalid(f"{field} is missing", field)
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{field} must be an integer token count, got {value!r}", field)
    if not 0 <= value <= TOKEN_COUNT_MAX:
        raise _invalid(
            f"{field} must be from 0 to {power_of_ten(TOKEN_COUNT_MAX)}, got {value}", field
        )
    return value


__all__ = [
    "USAGE_FORMATS",
    "Usage",
    "check_format",
    "litellm_usage_of",
    "parse_usage",
    "plain",
    "usage_of",
]
