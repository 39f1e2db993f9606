"""The capacity use cases a runner calls per event (SPEC §3.5): observe, admit, reject,
release. (configure and inspect: `usecases.capacity_state`, which a runner's every
call does not load.)

Answers nest the projection's own Structs where the JSON is theirs (figures, usage,
a provider report, a case config), so what they encode is what they always did.
"""

from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from quotaledger.adapters import USAGE_FORMATS
from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.projections import capacity as cap
from quotaledger.projections import limits
from quotaledger.usecases.decode import Answer, Event, Request, plain_complaint
from quotaledger.usecases.fields import FreeText, Identifier, Rule, Time, TokenCount, choice

Number = int | float

# -- value types -----------------------------------------------------------------------

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

# -- requests --------------------------------------------------------------------------


class ObserveRequest(Request):
    """Record provider usage (a zero-token measured observation is a heartbeat).

    The counts come from the count arguments (absent ones are 0) or from `usage`:
    the provider's usage object or a whole response body, as JSON text or a dict,
    mapped by `usage_format` (SPEC §3.6; one request). `provider_headers` are the
    response's headers (text, or a mapping such as httpx.Headers): their
    rate-limit report is recorded, resets measured from the event's time.
    `provider` is such a report already resolved:
    `{dimension: {"limit", "remaining", "reset_at"}}`.

    `request_id` (by default the id of the `usage` response body, else the
    `x-request-id`/`request-id` of `provider_headers`): a repeat within 900 s of log
    time appends nothing and answers the first event (`idempotent: true`); one with
    another payload is refused `request_id_conflict`.
    """

    goal: Identifier
    uncached_input: TokenCount | None = None
    cached_input: TokenCount | None = None
    output: TokenCount | None = None
    cache_write_input: TokenCount | None = None
    run: Identifier | None = None
    requests: TokenCount | None = None
    coverage: Coverage = "measured"
    source: FreeText | None = None
    usage: Any = None
    """JSON text, a mapping or an SDK object (`adapters.usage.plain`): checked by the
    usage mapping, which knows the provider formats."""
    usage_format: UsageFormat = "auto"
    provider_headers: Any = None
    """Header text, a mapping (httpx.Headers, a dict) or (name, value) pairs: checked
    by `adapters.headers`."""
    provider: ProviderReport | None = None
    request_id: RequestId | None = None
    at: Time | None = None


class AdmitRequest(Request):
    """Decide whether `run` may start now; journal the admission or the refusal."""

    goal: Identifier
    run: Identifier
    case: Identifier | None = None
    arm: Arm | None = None
    class_: RunClass = "solver"
    forecast_tpm: TokenCount | None = None
    forecast_itpm: TokenCount | None = None
    forecast_otpm: TokenCount | None = None
    forecast_rpm: TokenCount | None = None
    lease_s: LeaseSeconds | None = None
    at: Time | None = None
    dry_run: bool = False

    def payload(self) -> cap.AdmitRequest:
        """What the admission event records of the request."""
        return cap.AdmitRequest(
            run=self.run,
            case=self.case,
            arm=self.arm,  # type: ignore[arg-type]  # the request's choice
            run_class=self.class_,  # type: ignore[arg-type]
            forecast_tpm=self.forecast_tpm,
            lease_s=self.lease_s,
            forecast_itpm=self.forecast_itpm,
            forecast_otpm=self.forecast_otpm,
            forecast_rpm=self.forecast_rpm,
        )


class RejectRequest(Request):
    """Record a provider capacity rejection (HTTP 429) and start the bounded cooldown.

    `retry_after_s` may be fractional; without it, the Retry-After of
    `provider_headers` (seconds, milliseconds or an HTTP-date measured from the
    event's time) is used. `provider_headers`, `provider` and `request_id` as for
    `observe` (a replay answers the first rejection's cooldown).
    """

    goal: Identifier
    run: Identifier | None = None
    retry_after_s: RetryAfterSeconds | None = None
    detail: FreeText | None = None
    provider_headers: Any = None
    provider: ProviderReport | None = None
    request_id: RequestId | None = None
    at: Time | None = None


class ReleaseRequest(Request):
    """Release a run's case slot and token reservation."""

    goal: Identifier
    run: Identifier
    at: Time | None = None


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


class ReleaseAnswer(Answer):
    ok: bool
    goal: str
    run: str
    released: bool
    appended: bool
    reasons: list[str]
    event: Event | UnsetType = UNSET
