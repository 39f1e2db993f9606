"""The capacity commands a runner calls per event (SPEC §3.5): observe, admit, reject,
release, as typer commands: their options and help; what they do and print is
console/per_event.py's, which a per-event call read by the generated grammar runs
without this module (quotaledger.lean.local).

They are a module of their own because a runner pays this module's import on every
call: `quotaledger observe` loads these four commands' options and nothing of
`configure`'s or `inspect`'s (cli/capacity.py, which lists them in its help in
SPEC order).
"""

from typing import Annotated, Any

import typer

from quotaledger.adapters import USAGE_FORMATS
from quotaledger.cli.common import (
    AtOpt,
    CommandTable,
    Ctx,
    GoalOpt,
    choice_option,
    duration_option,
)
from quotaledger.console import per_event
from quotaledger.projections.capacity import ARMS, COVERAGES, RUN_CLASSES
from quotaledger.render.output import Output

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
    # Required without --usage (SPEC §3.5): checked by per_event.observe, since --usage
    # replaces them.
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
    return per_event.observe(ctx, locals())


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
    return per_event.admit(ctx, locals())


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
    return per_event.reject(ctx, locals())


@commands("release", example="quotaledger release --goal g --run r1")
def release(ctx: Ctx, goal: GoalOpt, run: RunOpt, at: AtOpt = None) -> Output:
    """Release a run's case slot and token reservation.

    Releasing a run that is not active is not an error: released is false, reason
    run_not_active, nothing appended.
    """
    return per_event.release(ctx, locals())
