"""The capacity commands a runner calls per event (SPEC §3.5): observe, admit, reject,
release, as typer commands: their options, made from their request types
(cli/request_options.py), and help; what they do and print is console/per_event.py's,
which a per-event call read by the generated grammar runs without this module
(quotaledger.lean.local).

They are a module of their own because a runner pays this module's import on every
call: `quotaledger observe` loads these four commands' options and nothing of
`configure`'s or `inspect`'s (cli/capacity.py, which lists them in its help in
SPEC order).
"""

from typing import Annotated

import typer

from quotaledger.cli.common import CommandTable, Ctx, duration_option
from quotaledger.cli.request_options import RequestOptions, request_options
from quotaledger.console import per_event
from quotaledger.journal.limits import WAIT_S_DEFAULT
from quotaledger.render.output import Output
from quotaledger.usecases.capacity import (
    AdmitRequest,
    ObserveRequest,
    RejectRequest,
    ReleaseRequest,
)

commands = CommandTable()


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands(
    "observe",
    example="quotaledger observe --goal g --run r1 --uncached-input 8000 --cached-input 2000 "
    "--output 1500 --requests 12",
)
@request_options(
    ObserveRequest,
    inputs=("usage", "provider_headers"),
    metavars={"request_id": "ID"},
    api_only=("provider",),
)
def observe(ctx: Ctx, options: RequestOptions) -> Output:
    """Record provider token usage; it counts for 60 seconds.

    Give the counts (--uncached-input, --cached-input, --output, zero included) or
    the provider's usage with --usage (OpenAI chat completions or Responses,
    Anthropic). A zero-token measured observation is a heartbeat. With --run, an
    active run's lease is renewed. --provider-headers records the rate limits the
    response reported.
    """
    return per_event.observe(ctx, options)


@commands(
    "admit",
    example="quotaledger admit --goal g --run r1 --case c7 --arm treatment --forecast-tpm 12000",
)
@request_options(AdmitRequest, api_only=("wait_s",))
def admit(
    ctx: Ctx,
    options: RequestOptions,
    *,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Queue, then poll until admitted or --wait-timeout-s is over (needs --lease-s).",
        ),
    ] = False,
    wait_timeout_s: Annotated[
        int | None,
        duration_option(
            "--wait-timeout-s",
            f"How long --wait waits [default: {WAIT_S_DEFAULT}].",
        ),
    ] = None,
) -> Output:
    """Ask whether a run may start now: take a case slot and a token reservation.

    Exit 0 admitted (an identical repeat returns the original receipt), exit 1
    refused (journaled as capacity.refused unless --dry-run). With --queue (and
    --lease-s), a refusal that time or a release can cure waits in the goal's queue
    (exit 1, its position and estimated start); asking again polls it; --cancel
    takes it out.
    """
    return per_event.admit(ctx, {**options, "wait": wait, "wait_timeout_s": wait_timeout_s})


@commands(
    "reject",
    example="quotaledger reject --goal g --run r1 --retry-after-s 30 --detail 'HTTP 429'",
)
@request_options(
    RejectRequest,
    inputs=("provider_headers",),
    metavars={"request_id": "ID"},
    api_only=("provider",),
)
def reject(ctx: Ctx, options: RequestOptions) -> Output:
    """Record a provider capacity rejection (HTTP 429) and start a bounded cooldown.

    It does not release the run. Without --retry-after-s, the Retry-After of
    --provider-headers (seconds, retry-after-ms, or an HTTP-date) is used.
    """
    return per_event.reject(ctx, options)


@commands("release", example="quotaledger release --goal g --run r1")
@request_options(ReleaseRequest)
def release(ctx: Ctx, options: RequestOptions) -> Output:
    """Release a run's case slot and token reservation.

    Releasing a run that is not active is not an error: released is false, reason
    run_not_active, nothing appended.
    """
    return per_event.release(ctx, options)
