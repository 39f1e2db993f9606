"""The capacity commands a runner calls per event (SPEC §3.5): observe, admit, reject,
release.

They are a module of their own because a runner pays this module's import on every
call: `quotaledger observe` loads these four commands' options and nothing of
`configure`'s or `inspect`'s (cli/capacity.py, which lists them in its help in
SPEC order).
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer
from msgspec import UnsetType

from quotaledger.adapters import USAGE_FORMATS
from quotaledger.cli import readable
from quotaledger.cli.common import (
    AtOpt,
    CommandTable,
    Ctx,
    GoalOpt,
    choice_option,
    duration_option,
    request_of,
)
from quotaledger.cli.output import Output, Shown
from quotaledger.client.inputs import check_observe_counts, read_input
from quotaledger.projections import capacity as cap
from quotaledger.projections import reasons as R
from quotaledger.projections.capacity import ARMS, COVERAGES, RUN_CLASSES
from quotaledger.services.capacity import CapacityService
from quotaledger.usecases.capacity import (
    AdmitAnswer,
    AdmitRequest,
    ObserveAnswer,
    ObserveRequest,
    RejectAnswer,
    RejectRequest,
    ReleaseAnswer,
    ReleaseRequest,
)

if TYPE_CHECKING:  # inspect's views: a runner's per-event command never loads them
    from quotaledger.usecases.capacity_state import DimensionView, GoalView

RunOpt = Annotated[str, typer.Option("--run", help="Run identifier.")]
ProviderHeadersOpt = Annotated[
    str | None,
    typer.Option(
        "--provider-headers",
        metavar="FILE|-",
        help="The response's HTTP headers (Name: value lines, or a JSON object); - reads "
        "stdin. Rate-limit and Retry-After headers are recorded, others ignored.",
    ),
]
OptionalRunOpt = Annotated[str | None, typer.Option("--run", help="Run identifier.")]
RequestIdOpt = Annotated[
    str | None,
    typer.Option(
        "--request-id",
        metavar="ID",
        help="The provider's response id (chatcmpl-..., msg_...) or x-request-id: a repeat "
        "within 900 s appends nothing [default: the --usage body's id, else the "
        "--provider-headers' request id].",
        show_default=False,
    ),
]


def _int_opt(flag: str, text: str) -> Any:
    """An optional integer option whose default is described in its help text."""
    return typer.Option(flag, help=text, show_default=False)


UncachedInputOpt = Annotated[int | None, _int_opt("--uncached-input", "Uncached input tokens.")]
CachedInputOpt = Annotated[int | None, _int_opt("--cached-input", "Cached input tokens.")]
OutputOpt = Annotated[int | None, _int_opt("--output", "Output tokens.")]
CacheWriteInputOpt = Annotated[
    int | None, _int_opt("--cache-write-input", "Tokens written to a prompt cache [default: 0].")
]
RequestsOpt = Annotated[
    int | None, _int_opt("--requests", "Provider requests these tokens came from.")
]
UsageOpt = Annotated[
    str | None,
    typer.Option(
        "--usage",
        metavar="FILE|-",
        help="The provider's usage object or whole response body (JSON) instead of "
        "the count flags; - reads stdin. One request.",
    ),
]
UsageFormatOpt = Annotated[
    str,
    choice_option("--usage-format", USAGE_FORMATS, "Whose usage --usage holds [default: auto]."),
]
CoverageOpt = Annotated[
    str, choice_option("--coverage", COVERAGES, "How the counts were obtained.")
]
SourceOpt = Annotated[str | None, typer.Option("--source", help="Where the numbers come from.")]


commands = CommandTable()


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands(
    "observe",
    example="quotaledger observe --goal g --run r1 --uncached-input 8000 --cached-input 2000 "
    "--output 1500 --requests 12",
)
def observe(
    ctx: Ctx,
    goal: GoalOpt,
    # Required without --usage (SPEC §3.5): checked below, since --usage replaces them.
    uncached_input: UncachedInputOpt = None,
    cached_input: CachedInputOpt = None,
    output: OutputOpt = None,
    cache_write_input: CacheWriteInputOpt = None,
    run: OptionalRunOpt = None,
    request_id: RequestIdOpt = None,
    requests: RequestsOpt = None,
    usage: UsageOpt = None,
    usage_format: UsageFormatOpt = "auto",
    provider_headers: ProviderHeadersOpt = None,
    coverage: CoverageOpt = "measured",
    source: SourceOpt = None,
    at: AtOpt = None,
) -> Output:
    """Record provider token usage; it counts for 60 seconds.

    Give the counts (--uncached-input, --cached-input, --output, zero included) or
    the provider's usage with --usage (OpenAI chat completions or Responses,
    Anthropic). A zero-token measured observation is a heartbeat. With --run, an
    active run's lease is renewed. --provider-headers records the rate limits the
    response reported.
    """
    options = dict(locals())
    check_observe_counts(options)
    request = request_of(
        ObserveRequest,
        options,
        usage=read_input("--usage", usage),
        provider_headers=read_input("--provider-headers", provider_headers),
    )
    with ctx.service(CapacityService, write=True) as ledger:
        answer = ledger.observe(request)
    return observe_output(request, answer, ctx.shown())


@commands(
    "admit",
    example="quotaledger admit --goal g --run r1 --case c7 --arm treatment --forecast-tpm 12000",
)
def admit(
    ctx: Ctx,
    goal: GoalOpt,
    run: RunOpt,
    case: Annotated[str | None, typer.Option("--case", help="Case identifier.")] = None,
    arm: Annotated[
        str | None,
        choice_option("--arm", ARMS, "The run's arm (baseline group, or a test arm)."),
    ] = None,
    class_: Annotated[
        str, choice_option("--class", RUN_CLASSES, "The run's class [default: solver].")
    ] = "solver",
    forecast_tpm: Annotated[
        int | None,
        _int_opt(
            "--forecast-tpm",
            "TPM this run will use (reserved) [default: itpm + otpm forecasts if both].",
        ),
    ] = None,
    forecast_itpm: Annotated[
        int | None, _int_opt("--forecast-itpm", "Input tokens per minute it will use.")
    ] = None,
    forecast_otpm: Annotated[
        int | None, _int_opt("--forecast-otpm", "Output tokens per minute it will use.")
    ] = None,
    forecast_rpm: Annotated[
        int | None, _int_opt("--forecast-rpm", "Requests per minute it will make.")
    ] = None,
    lease_s: Annotated[
        int | None,
        duration_option(
            "--lease-s", "The admission lapses after this long unless observed with --run."
        ),
    ] = None,
    at: AtOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Decide, but append nothing (for polling).")
    ] = False,
) -> Output:
    """Ask whether a run may start now: take a case slot and a token reservation.

    Exit 0 admitted (an identical repeat returns the original receipt), exit 1
    refused (journaled as capacity.refused unless --dry-run).
    """
    request = request_of(AdmitRequest, locals())
    with ctx.service(CapacityService, write=not dry_run) as ledger:
        answer = ledger.admit(request)
    return admit_output(request, answer, ctx.shown())


@commands(
    "reject",
    example="quotaledger reject --goal g --run r1 --retry-after-s 30 --detail 'HTTP 429'",
)
def reject(
    ctx: Ctx,
    goal: GoalOpt,
    run: OptionalRunOpt = None,
    retry_after_s: Annotated[
        float | None,
        duration_option(
            "--retry-after-s",
            "The provider's Retry-After, fractions allowed (clamped to the max cooldown).",
            whole=False,
        ),
    ] = None,
    detail: Annotated[str | None, typer.Option("--detail", help="What the provider said.")] = None,
    provider_headers: ProviderHeadersOpt = None,
    request_id: RequestIdOpt = None,
    at: AtOpt = None,
) -> Output:
    """Record a provider capacity rejection (HTTP 429) and start a bounded cooldown.

    It does not release the run. Without --retry-after-s, the Retry-After of
    --provider-headers (seconds, retry-after-ms, or an HTTP-date) is used.
    """
    request = request_of(
        RejectRequest,
        locals(),
        provider_headers=read_input("--provider-headers", provider_headers),
    )
    with ctx.service(CapacityService, write=True) as ledger:
        answer = ledger.reject(request)
    return reject_output(request, answer, ctx.shown())


@commands("release", example="quotaledger release --goal g --run r1")
def release(ctx: Ctx, goal: GoalOpt, run: RunOpt, at: AtOpt = None) -> Output:
    """Release a run's case slot and token reservation.

    Releasing a run that is not active is not an error: released is false, reason
    run_not_active, nothing appended.
    """
    request = request_of(ReleaseRequest, locals())
    with ctx.service(CapacityService, write=True) as ledger:
        answer = ledger.release(request)
    return release_output(request, answer, ctx.shown())


# -- human text ------------------------------------------------------------------------


def observe_output(request: ObserveRequest, answer: ObserveAnswer, shown: Shown) -> Output:
    return Output(answer, text=observe_text(answer))


def admit_output(request: AdmitRequest, answer: AdmitAnswer, shown: Shown) -> Output:
    return Output(answer, text=admit_text(answer, request.run))


def reject_output(request: RejectRequest, answer: RejectAnswer, shown: Shown) -> Output:
    return Output(answer, text=reject_text(answer))


def release_output(request: ReleaseRequest, answer: ReleaseAnswer, shown: Shown) -> Output:
    run = request.run
    if answer.released:
        text = f"released {run}"
    else:
        text = f"{run} is not active ({', '.join(answer.reasons)}); nothing appended"
    return Output(answer, text=text)


num = readable.num


def observe_text(answer: ObserveAnswer) -> str:
    window = f"usage {num(answer.usage_tpm)} TPM in the last 60 s ({answer.coverage})"
    if not answer.ok:
        return conflict_text("observe", answer.goal, answer.request_id, answer.event.seq)
    if answer.idempotent is True:
        text = (
            f"replay of request {answer.request_id} (seq {answer.event.seq}, observed at "
            f"{answer.event.at}); nothing appended: {window}"
        )
    else:
        text = f"observed {answer.goal}: {window}"
    if answer.provider:
        text += f"; provider reports {provider_summary(answer.provider)}"
    if answer.lease_until:
        text += f"; lease of {answer.run} until {answer.lease_until}"
    return text


def reject_text(answer: RejectAnswer) -> str:
    if not answer.ok:
        return conflict_text("reject", answer.goal, answer.request_id, answer.event.seq)
    cooldown = (
        f"cooldown {readable.duration_text(answer.cooldown_s)} until {answer.cooldown_until} "
        f"(streak {answer.streak}" + (", clamped" if answer.clamped else "") + ")"
    )
    if answer.idempotent is True:
        return (
            f"replay of request {answer.request_id} (seq {answer.event.seq}, rejected at "
            f"{answer.event.at}); nothing appended: {cooldown}"
        )
    return f"rejection recorded for {answer.goal}: {cooldown}"


def conflict_text(command: str, goal: str, request_id: Any, seq: int) -> str:
    return (
        f"REFUSED {command} {goal}: {R.REQUEST_ID_CONFLICT} (request {request_id} was "
        f"recorded at seq {seq} with another payload); nothing appended"
    )


def provider_summary(provider: cap.ProviderReport) -> str:
    """`rpm 499/500 left, tpm 150000/200000 left`: what each reported dimension has left."""
    return ", ".join(
        f"{dimension} {num(report.remaining)}/{num(report.limit)} left"
        for dimension, report in provider.items()
    )


def coverage_text(
    figures: "cap.Figures | GoalView | Mapping[str, Any]", *, with_last: bool = False
) -> str:
    """Coverage as people read it: a goal never observed has no stale observation,
    it has none at all (what usage_observation_stale then means). A mapping: the
    three values picked out of an answer that may lack them (audit's explanation)."""
    if isinstance(figures, Mapping):
        last, coverage = figures["last_observation_at"], figures["coverage"]
        stale = figures["observation_stale"]
    else:
        last, coverage = figures.last_observation_at, figures.coverage
        stale = figures.observation_stale
    if last is None:
        return "no usage observed yet (observe before admitting)"
    text = f"coverage {coverage}" + (" (stale)" if stale else "")
    return text + (f", last observation {last}" if with_last else "")


def admit_text(answer: AdmitAnswer, run: str) -> str:
    prefix = "would be " if answer.dry_run else ""
    if answer.admitted:
        receipt = answer.receipt
        assert not isinstance(receipt, UnsetType)
        cases = receipt.active_cases
        bits = []
        if receipt.target_active_cases is not None:
            bits.append(f"slot {cases.total + 1}/{receipt.target_active_cases}")
        if receipt.target_tpm is not None:
            bits.append(
                f"load {num(receipt.load_tpm)}/{receipt.target_tpm} TPM, "
                f"forecast {num(receipt.forecast_tpm)}"
            )
        detail = ", ".join(bits) or "no gate limits it"
        if answer.idempotent:
            return f"admitted {run} again (replay of seq {receipt.seq}; nothing appended)"
        return f"{prefix}admitted {run} ({detail})"
    assert not isinstance(answer.figures, UnsetType) and not isinstance(answer.reasons, UnsetType)
    head = f"{'WOULD BE ' if prefix else ''}REFUSED {run}: {', '.join(answer.reasons)}"
    return head + "\n  " + figures_text(answer.figures)


def figures_text(figures: cap.Figures) -> str:
    cases = figures.active_cases
    lines = []
    if figures.max_active_cases is not None:
        lines.append(
            f"cases: {cases.total} active (baseline {cases.baseline}, test "
            f"{cases.test}) of target {figures.target_active_cases}, max "
            f"{figures.max_active_cases}"
        )
    if figures.dimensions:
        lines += [
            readable.dimension_line(
                name,
                d,
                binding=name == figures.binding_dimension,
                forecast=d.forecast,
                cold_start=figures.cold_start_reserve_tpm if name == "tpm" else 0,
                evaluator_reserve=figures.evaluator_reserve_tpm if name == "tpm" else 0,
            )
            for name, d in figures.dimensions.items()
        ]
    elif figures.target_tpm is not None:  # figures recorded before dimensions existed
        lines.append(
            f"tpm: load {num(figures.load_tpm)} (usage {num(figures.usage_tpm)}, "
            f"reserved {figures.reserved_tpm}) + forecast {num(figures.forecast_tpm)} "
            f"vs target {figures.target_tpm}; headroom {num(figures.headroom_tpm)} TPM"
        )
    if figures.target_tpm is not None or figures.dimensions:
        lines.append(
            coverage_text(figures, with_last=True)
            + f", cooldown until {figures.cooldown_until or '-'}"
        )
    return "\n  ".join(lines) if lines else "no gate configured"


def dimension_lines(
    dimensions: "Mapping[cap.Dimension, cap.DimensionFigures] | Mapping[str, DimensionView]",
    binding: str | None,
) -> list[str]:
    """One line per configured dimension (tpm included)."""
    return [
        readable.dimension_line(name, d, binding=name == binding) for name, d in dimensions.items()
    ]
