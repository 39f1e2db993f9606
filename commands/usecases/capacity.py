"""The capacity use cases a runner calls per event (SPEC §3.5): observe, admit, reject,
release. (configure and inspect: `usecases.capacity_state`, which a runner's every
call does not load.)

Answers nest the projection's own Structs where the JSON is theirs (figures, usage,
a provider report, a case config), so what they encode is what they always did.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, cast

import msgspec
from msgspec import UNSET, Meta, UnsetType

from quotaledger.adapters import USAGE_FORMATS
from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.projections import capacity as cap
from quotaledger.projections import limits
from quotaledger.usecases.decode import Answer, Event, Names, Request, plain_complaint
from quotaledger.usecases.fields import (
    EventTime,
    FreeText,
    Goal,
    Identifier,
    Rule,
    TokenCount,
    UsdAmount,
    choice,
)

Number = int | float

# -- value types -----------------------------------------------------------------------

if TYPE_CHECKING:
    from quotaledger.adapters.headers import HeaderSource
    from quotaledger.adapters.headers import ProviderHeaders as ReadHeaders

if TYPE_CHECKING:  # mypy reads a choice as the string it is
    Coverage = str
    UsageFormat = str
    Arm = str
    RunClass = str
else:
    Coverage = choice(cap.COVERAGES, "How the counts were obtained.")
    UsageFormat = choice(USAGE_FORMATS, "Whose usage `usage` holds.")
    Arm = choice(cap.ARMS, "The run's arm (baseline group, or a test arm).")
    RunClass = choice(cap.RUN_CLASSES, "The run's class.")


def _read_by_its_service(name: str, value: Any) -> object:
    return value  # the usage mapping or the header reader checks the document


UsageDocument = Annotated[Any, Rule(_read_by_its_service, code=codes.INVALID_USAGE)]
"""`usage`: read by the usage mapping; its one code is `invalid_usage` (a value JSON
cannot carry is refused with it where the request is decoded)."""
HeaderDocument = Annotated[Any, Rule(_read_by_its_service, code=codes.INVALID_PROVIDER_HEADERS)]
"""`provider_headers`: read by `adapters.headers`; its one code is
`invalid_provider_headers`."""


def seconds_rule(low: int, high: int, wording: str, *, whole: bool) -> Rule:
    """A number of seconds from `low` to `high`, worded by `wording` with `{name}`,
    `{low}`, `{high}` and `{value}`; `whole`: integers only. `invalid_duration`, the
    code the option's parser gives a malformed duration: one code per option (SPEC §8)."""
    kinds = int if whole else int | float

    def check(name: str, value: Any) -> object:
        number = isinstance(value, kinds) and not isinstance(value, bool)
        if number and not low <= value <= high:  # NaN fails this too
            raise InvalidInput(
                wording.format(name=name, low=low, high=high, value=value),
                code=codes.INVALID_DURATION,
                option=name,
            )
        return value

    return Rule(check, code=codes.INVALID_DURATION)


LeaseSeconds = Annotated[
    int,
    msgspec.Meta(ge=1, le=limits.LEASE_S_MAX, description="The admission lapses after this long"),
    seconds_rule(
        1,
        limits.LEASE_S_MAX,
        "{name} must be an integer from {low} to {high}, got {value}",
        whole=True,
    ),
]
QueueTtlSeconds = Annotated[
    int,
    msgspec.Meta(ge=1, le=limits.QUEUE_TTL_S_MAX, description="Seconds an entry may wait"),
    seconds_rule(
        1,
        limits.QUEUE_TTL_S_MAX,
        "{name} must be an integer from {low} to {high}, got {value}",
        whole=True,
    ),
]
WaitSeconds = Annotated[
    int,
    msgspec.Meta(ge=0, le=limits.WAIT_S_MAX, description="Seconds to wait for an admission"),
    seconds_rule(
        0,
        limits.WAIT_S_MAX,
        "{name} must be an integer from {low} to {high}, got {value}",
        whole=True,
    ),
]
RetryAfterSeconds = Annotated[
    float,
    msgspec.Meta(ge=0, le=limits.RETRY_AFTER_S_MAX, description="Seconds, fractions allowed"),
    seconds_rule(
        0,
        limits.RETRY_AFTER_S_MAX,
        "{name} must be from {low} to {high} seconds, got {value}",
        whole=False,
    ),
]
"""A Retry-After; a whole number of seconds is recorded as an integer (the service)."""


def provider_report_of(name: str, value: Any) -> cap.ProviderReport | None:
    """A provider report given as data, checked, its dimensions in the documented order
    (None when it reports none)."""
    unknown = [key for key in value if key not in cap.DIMENSIONS] if isinstance(value, dict) else []
    try:
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a dimension ({', '.join(cap.DIMENSIONS)})")
        report = msgspec.convert(value, cap.ProviderReport)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"{name}: not a report of {{dimension: {{limit, remaining, reset_at}}}} "
            f"({plain_complaint(str(exc))})",
            code=codes.INVALID_PROVIDER_REPORT,
            option=name,
        ) from None
    return {d: report[d] for d in cap.DIMENSIONS if d in report} or None


ProviderReport = Annotated[
    dict[str, Any],
    msgspec.Meta(description="{dimension: {limit, remaining, reset_at}}"),
    Rule(provider_report_of, code=codes.INVALID_PROVIDER_REPORT),
]
"""A provider's rate-limit report already resolved (the API's `provider`)."""

RequestId = Annotated[
    Identifier,
    msgspec.Meta(
        description="The provider's response id (chatcmpl-..., resp_..., msg_...) or its "
        "x-request-id: a repeat within 900 s counts once"
    ),
]
"""An observation's or a rejection's request id (SPEC §11 "Idempotent observations")."""
RequestIdField = Annotated[
    RequestId | None,
    Meta(
        description="The provider's response id (chatcmpl-..., msg_...) or x-request-id: a "
        "repeat within 900 s appends nothing [default: the usage body's id, else the provider "
        "headers' request id]."
    ),
]
ProviderHeaders = Annotated[
    Any,
    Meta(
        description="The response's HTTP headers (Name: value lines, or a JSON object). "
        "Rate-limit and Retry-After headers are recorded, others ignored."
    ),
]
"""Header text, a mapping (httpx.Headers, a dict) or (name, value) pairs: checked by
`adapters.headers`."""
ProviderReportField = Annotated[
    ProviderReport | None,
    Meta(
        description="The provider's rate-limit report already resolved: "
        '{dimension: {"limit", "remaining", "reset_at"}}.'
    ),
]

# -- requests --------------------------------------------------------------------------


class ObserveRequest(Request):
    """Record provider usage (a zero-token measured observation is a heartbeat).

    The counts come from the three count arguments, each given (zero included: a
    heartbeat states its zeros; an `unmetered` observation may leave them out, its
    tokens unknown), or from `usage`: the provider's usage object or a
    whole response body, as JSON text or a dict, mapped by `usage_format` (SPEC
    §3.6; one request); `cache_write_input` and `requests` are optional. `provider_headers` are the
    response's headers (text, or a mapping such as httpx.Headers): their
    rate-limit report is recorded, resets measured from the event's time.
    `provider` is such a report already resolved:
    `{dimension: {"limit", "remaining", "reset_at"}}`.

    `request_id` (by default the id of the `usage` response body, else the
    `x-request-id`/`request-id` of `provider_headers`): a repeat within 900 s of log
    time appends nothing and answers the first event (`idempotent: true`); one with
    another payload is refused `request_id_conflict`.
    """

    # The fields in the order `observe --help` lists their flags.
    goal: Goal
    uncached_input: Annotated[TokenCount | None, Meta(description="Uncached input tokens.")] = None
    cached_input: Annotated[TokenCount | None, Meta(description="Cached input tokens.")] = None
    output: Annotated[TokenCount | None, Meta(description="Output tokens.")] = None
    cache_write_input: Annotated[
        TokenCount | None, Meta(description="Tokens written to a prompt cache [default: 0].")
    ] = None
    run: Annotated[
        Identifier | None, Meta(description="Run identifier: an active run's lease is renewed.")
    ] = None
    request_id: RequestIdField = None
    requests: Annotated[
        TokenCount | None, Meta(description="Provider requests these tokens came from.")
    ] = None
    usage: Annotated[
        UsageDocument,
        Meta(
            description="The provider's usage object or whole response body (JSON) instead of "
            "the counts. One request."
        ),
    ] = None
    """JSON text, a mapping or an SDK object (`adapters.usage.plain`): checked by the
    usage mapping, which knows the provider formats."""
    usage_format: Annotated[UsageFormat, Meta(description="Whose usage the usage body holds.")] = (
        "auto"
    )
    provider_headers: ProviderHeaders = None
    coverage: Annotated[Coverage, Meta(description="How the counts were obtained.")] = "measured"
    source: Annotated[FreeText | None, Meta(description="Where the numbers come from.")] = None
    model: Annotated[
        Identifier | None,
        Meta(
            description="The model that answered: its price (price set) gives the dollars "
            "[default: the usage body's model]."
        ),
    ] = None
    provider: ProviderReportField = None
    at: EventTime = None

    def check(self, names: Names) -> None:
        # Every face alike (SPEC §3.5 lists the three counts as required): a count left
        # out of a measured or estimated observation is a forgotten argument, never a
        # zero that would refresh the freshness gate as a heartbeat. An unmetered one
        # may leave them out: its tokens are unknown ("its token counts, if any", §3.2)
        # and it refreshes nothing. The CLI says so before it reads any input
        # (console.inputs.check_observe_counts), in these words.
        if self.usage is not None or self.coverage == "unmetered":
            return
        counts = ("uncached_input", "cached_input", "output")
        missing = [names(name) for name in counts if getattr(self, name) is None]
        if missing:
            raise InvalidInput(
                f"observe needs {names('uncached_input')}, {names('cached_input')} and "
                f"{names('output')} (zero included) or {names('usage')}; missing "
                + ", ".join(missing),
                code=codes.USAGE,
            )

    def check_contents(self) -> None:
        observed_counts(self)
        provider_headers_of(self.provider_headers, self.provider)


class AdmitRequest(Request):
    """Decide whether `run` may start now; journal the admission or the refusal."""

    goal: Goal
    run: Annotated[Identifier, Meta(description="Run identifier.")]
    case: Annotated[Identifier | None, Meta(description="Case identifier.")] = None
    arm: Annotated[
        Arm | None, Meta(description="The run's arm (baseline group, or a test arm).")
    ] = None
    class_: Annotated[RunClass, Meta(description="The run's class.")] = "solver"
    forecast_tpm: Annotated[
        TokenCount | None,
        Meta(
            description="TPM this run will use (reserved) [default: itpm + otpm forecasts if both]."
        ),
    ] = None
    forecast_itpm: Annotated[
        TokenCount | None, Meta(description="Input tokens per minute it will use.")
    ] = None
    forecast_otpm: Annotated[
        TokenCount | None, Meta(description="Output tokens per minute it will use.")
    ] = None
    forecast_rpm: Annotated[
        TokenCount | None, Meta(description="Requests per minute it will make.")
    ] = None
    forecast_tokens: Annotated[
        TokenCount | None,
        Meta(description="Tokens the whole run will use: its tpd reservation and cap forecast."),
    ] = None
    forecast_requests: Annotated[
        TokenCount | None,
        Meta(description="Requests the whole run will make: its rpd reservation."),
    ] = None
    forecast_usd: Annotated[
        UsdAmount | None,
        Meta(description="US dollars the whole run will spend: reserved against the dollar cap."),
    ] = None
    lease_s: Annotated[
        LeaseSeconds | None,
        Meta(description="The admission lapses after this long unless observed with its run."),
    ] = None
    at: EventTime = None
    dry_run: Annotated[bool, Meta(description="Decide, but append nothing (for polling).")] = False
    queue: Annotated[
        bool,
        Meta(
            description="If refused for a reason time or a release can cure, wait in the "
            "queue (needs a lease)."
        ),
    ] = False
    queue_ttl_s: Annotated[
        QueueTtlSeconds | None,
        Meta(
            description="How long the entry may wait in the queue [default: 600; with a "
            "wait, the wait + 60 s]."
        ),
    ] = None
    wait_s: Annotated[
        WaitSeconds | None,
        Meta(
            description="Queue, then wait up to this long to be admitted (polling at most "
            "1 s apart, or at the estimate)."
        ),
    ] = None
    cancel: Annotated[
        bool, Meta(description="Take the run's entry out of the queue (nothing else given).")
    ] = False

    def payload(self) -> cap.AdmitRequest:
        """What the admission event records of the request: its fields of the same
        names, and the class (which the event calls `run_class`, `class` in JSON).
        Spelled out rather than copied by name (`_ADMIT_PAYLOAD_FIELDS`): an admit's
        every call makes one, and a test checks that every field is copied."""
        return cap.AdmitRequest(
            run=self.run,
            case=self.case,
            arm=self.arm,  # type: ignore[arg-type]  # a choice: mypy reads a str
            run_class=self.class_,  # type: ignore[arg-type]
            forecast_tpm=self.forecast_tpm,
            lease_s=self.lease_s,
            forecast_itpm=self.forecast_itpm,
            forecast_otpm=self.forecast_otpm,
            forecast_rpm=self.forecast_rpm,
            forecast_tokens=self.forecast_tokens,
            forecast_requests=self.forecast_requests,
            forecast_usd=self.forecast_usd,
        )


class RejectRequest(Request):
    """Record a provider capacity rejection (HTTP 429) and start the bounded cooldown.

    `retry_after_s` may be fractional; without it, the Retry-After of
    `provider_headers` (seconds, milliseconds or an HTTP-date measured from the
    event's time) is used. `provider_headers`, `provider` and `request_id` as for
    `observe` (a replay answers the first rejection's cooldown).
    """

    goal: Goal
    run: Annotated[Identifier | None, Meta(description="Run identifier.")] = None
    retry_after_s: Annotated[
        RetryAfterSeconds | None,
        Meta(
            description="The provider's Retry-After, fractions allowed (clamped to the max "
            "cooldown)."
        ),
    ] = None
    detail: Annotated[FreeText | None, Meta(description="What the provider said.")] = None
    provider_headers: ProviderHeaders = None
    provider: ProviderReportField = None
    request_id: RequestIdField = None
    at: EventTime = None

    def check_contents(self) -> None:
        provider_headers_of(self.provider_headers, self.provider)


class ReleaseRequest(Request):
    """Release a run's case slot and token reservation."""

    goal: Goal
    run: Annotated[Identifier, Meta(description="Run identifier.")]
    at: EventTime = None


class RunRef(msgspec.Struct):
    """A run of a goal: an entry ahead in the queue, or one a writer's transaction
    admitted from it (`promoted`, SPEC §12.2)."""

    goal: str
    run: str


_ADMIT_PAYLOAD_FIELDS = tuple(
    name for name in cap.AdmitRequest.__struct_fields__ if name != "run_class"
)
assert set(_ADMIT_PAYLOAD_FIELDS) < set(AdmitRequest.__struct_fields__), (
    "admit journals its own fields"
)

# -- answers ---------------------------------------------------------------------------


class ObserveAnswer(Answer, kw_only=True):
    """`observe`: the window's usage after it. With a request id: `idempotent` (a
    replay appends nothing; `event` is the first one), or the refusal
    `request_id_conflict` (`event`: the event that holds the id)."""

    ok: bool
    goal: str
    run: str | None
    request_id: str | UnsetType = UNSET
    appended: bool
    idempotent: bool | UnsetType = UNSET
    reasons: list[str] | UnsetType = UNSET
    usage_tpm: Number
    usage: cap.UsageParts
    coverage: str
    provider: cap.ProviderReport | None
    lease_until: str | None
    event: Event
    promoted: list[RunRef] | UnsetType = UNSET


class ReceiptView(cap.Receipt, frozen=True, kw_only=True):
    """An admission's receipt and the event that recorded it (none on a dry run)."""

    seq: int | None
    hash: str | None

    def __post_init__(self) -> None:
        """A view of a receipt already checked when it was made."""


class AdmitAnswer(Answer, kw_only=True):
    """`admit`: the receipt on admission, reasons and figures on refusal (SPEC §8)."""

    ok: bool
    goal: str
    at: str
    admitted: bool
    idempotent: bool
    appended: bool
    dry_run: bool
    receipt: ReceiptView | UnsetType = UNSET
    reasons: list[str] | UnsetType = UNSET
    figures: cap.Figures | UnsetType = UNSET
    binding_dimension: str | UnsetType | None = UNSET
    event: Event | None
    queued: bool | UnsetType = UNSET
    """A queued answer (SPEC §12.2): `queued` true, where the run stands."""
    position: int | UnsetType = UNSET
    ahead: list[RunRef] | UnsetType = UNSET
    queued_at: str | UnsetType = UNSET
    expires_at: str | UnsetType = UNSET
    estimated_start_at: str | UnsetType | None = UNSET
    run: str | UnsetType = UNSET
    cancelled: bool | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    """`admit --cancel` of a run that waits in no queue: `run_not_queued`."""
    promoted: list[RunRef] | UnsetType = UNSET


class RejectAnswer(Answer, kw_only=True):
    """`reject`: the recorded rejection's fields (`provider` only when reported). With a
    request id, as `observe`'s: a replay or a conflict shows the first rejection."""

    ok: bool
    goal: str
    appended: bool
    idempotent: bool | UnsetType = UNSET
    reasons: list[str] | UnsetType = UNSET
    run: str | None
    request_id: str | UnsetType = UNSET
    retry_after_s: Number | None
    cooldown_s: Number
    clamped: bool
    cooldown_until: str
    streak: int
    detail: str | None
    provider: cap.ProviderReport | UnsetType = UNSET
    event: Event
    promoted: list[RunRef] | UnsetType = UNSET


class ReleaseAnswer(Answer):
    ok: bool
    goal: str
    run: str
    released: bool
    appended: bool
    reasons: list[str]
    event: Event | UnsetType = UNSET
    dequeued: bool | UnsetType = UNSET
    """`release` of a queued run takes it out of the queue (SPEC §12.2)."""
    promoted: list[RunRef] | UnsetType = UNSET


# -- what the service reads of a request (a client of a server checks it before sending)


OBSERVED_COUNTS = ("uncached_input", "cached_input", "cache_write_input", "output", "requests")
"""The count arguments of `observe`, which `usage` gives instead."""


def observed_counts(request: ObserveRequest) -> dict[str, Any]:
    """An observation's counters: from a provider's usage body, or from the count
    arguments (absent ones 0; `requests` stays null, SPEC §3.6), never both."""
    usage = request.usage
    if usage is None:  # a runner's every call: the counts as given, nothing to look up
        return {
            "uncached_input": request.uncached_input or 0,
            "cached_input": request.cached_input or 0,
            "cache_write_input": request.cache_write_input or 0,
            "output": request.output or 0,
            "requests": request.requests,
        }
    # The provider formats load only when used: `admit` and a plain `observe` (a
    # runner's every call) never pay for them.
    from quotaledger.adapters.usage import parse_usage, plain, usage_of

    given = tuple(name for name in OBSERVED_COUNTS if getattr(request, name) is not None)
    if given:
        raise InvalidInput(
            lambda names: (
                f"{names('usage')} gives the counts: leave out " + ", ".join(map(names, given))
            ),
            code=codes.USAGE,
            about=("usage", *given),
            option="--usage",
        )
    usage_format = request.usage_format
    mapped = (
        parse_usage(usage, usage_format)
        if isinstance(usage, str)
        else usage_of(plain(usage), usage_format)
    )
    return cast("dict[str, Any]", mapped)


def provider_headers_of(
    source: "HeaderSource | None", provider: Mapping[str, Any] | None
) -> "ReadHeaders | None":
    """The recognised, checked headers of `--provider-headers` (exit 2 before the
    journal is touched), or None when none were given."""
    if source is None:
        return None
    from quotaledger.adapters.headers import parse_provider_headers

    if provider is not None:
        raise InvalidInput(
            lambda names: (
                f"give {names('provider_headers')} or a resolved provider report "
                f"({names('provider')}), not both"
            ),
            code=codes.INVALID_OPTION,
            about=("provider_headers", "provider"),
            option="--provider-headers",
        )
    if not isinstance(source, str | Mapping | list | tuple):
        raise InvalidInput(
            lambda name: (
                f"{name} must be header text or a mapping of names to values, "
                f"got {type(source).__name__}"
            ),
            code=codes.INVALID_PROVIDER_HEADERS,
            about="provider_headers",
            option="--provider-headers",
        )
    headers = parse_provider_headers(source)
    return None if headers.empty else headers


class QueueEntryView(Answer):
    """An entry of the queue a goal waits in (SPEC §12.2), in queue order."""

    goal: str
    run: str
    priority: int
    position: int
    queued_at: str
    expires_at: str
    estimated_start_at: str | None
    reasons: list[str]
    """What holds it now."""


class SpendView(Answer):
    """A goal's spend (SPEC §12.4): since `cap_since` (its whole history without a cap)."""

    since: str | None
    tokens: Number
    usd: float
    unpriced_tokens: int
    cap_tokens: int | None
    cap_usd: float | None
    reserved_tokens: Number
    reserved_usd: float
    remaining_tokens: Number | None
    remaining_usd: float | None
