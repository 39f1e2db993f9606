"""Capacity commands (SPEC §3.5): configure and inspect here; observe, admit, reject and
release, which a runner calls per event, in cli/runner.py (listed here in SPEC order)."""

from typing import Annotated, Any

import typer

from quotaledger.cli import runner
from quotaledger.cli.common import (
    AtOpt,
    CommandTable,
    Ctx,
    GoalOpt,
    choice_option,
    request_of,
)
from quotaledger.cli.config_options import (
    CapTokensOpt,
    CapUsdOpt,
    ConfigOptions,
    config_options,
)
from quotaledger.projections.capacity import CAP_UNITS, DIMENSIONS
from quotaledger.render.answers import output_of
from quotaledger.render.output import Output
from quotaledger.services.capacity_state import CapacityStateService
from quotaledger.usecases.capacity_state import (
    ConfigureRequest,
    InspectRequest,
)

commands = CommandTable()


def _option(flag: str, text: str) -> Any:
    return typer.Option(flag, help=text, show_default=False)


PoolOpt = Annotated[str | None, _option("--pool", "Join this pool (pool configure made it).")]
PoolShareOpt = Annotated[
    float | None,
    _option("--pool-share", "Fraction of every pool target the goal is owed, 0-1 (4 places)."),
]
PoolBorrowingOpt = Annotated[
    float | None,
    _option("--pool-borrowing-limit", "How much beyond its share it may use [1 - share]."),
]
PoolLendingOpt = Annotated[
    float | None,
    _option("--pool-lending-limit", "How much of its share others may borrow [share]."),
]
PriorityOpt = Annotated[int | None, _option("--priority", "Queue priority, -1000-1000 [0].")]
LeavePoolOpt = Annotated[bool, _option("--leave-pool", "Leave the goal's pool.")]


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands(
    "configure",
    example="quotaledger configure --goal g --max-active-cases 4 --quota-tpm 100000 "
    "--target-tpm 90000 --evaluator-reserve-tpm 10000",
)
@config_options(show_defaults=True)
def configure(
    ctx: Ctx,
    goal: GoalOpt,
    config: ConfigOptions,
    remove_limit: Annotated[
        list[str] | None,
        choice_option(
            "--remove-limit", DIMENSIONS, "Remove a dimension of the token gate (repeatable)."
        ),
    ] = None,
    remove_gate: Annotated[
        list[str] | None,
        choice_option("--remove-gate", ("cases", "tokens"), "Remove a gate (repeatable)."),
    ] = None,
    cap_tokens: CapTokensOpt = None,
    cap_usd: CapUsdOpt = None,
    cap_since: Annotated[
        str | None,
        typer.Option(
            "--cap-since",
            help="Caps count from this time (RFC 3339; a past one counts what was "
            "observed since) [default: when the first cap was configured].",
            show_default=False,
        ),
    ] = None,
    remove_cap: Annotated[
        list[str] | None,
        choice_option("--remove-cap", CAP_UNITS, "Remove a spend cap (repeatable)."),
    ] = None,
    pool: PoolOpt = None,
    pool_share: PoolShareOpt = None,
    pool_borrowing_limit: PoolBorrowingOpt = None,
    pool_lending_limit: PoolLendingOpt = None,
    priority: PriorityOpt = None,
    leave_pool: LeavePoolOpt = False,
    at: AtOpt = None,
) -> Output:
    """Change a goal's case gate, token gate and spend caps: only the flags given change.

    A default never set explicitly follows its source (a target its quota, the case
    target and caps --max-active-cases); the answer lists every change. A spend cap
    stops new admissions once spent, never a running run.
    """
    options = dict(locals())
    request = request_of(
        ConfigureRequest,
        {**options.pop("config"), **options},
        remove_limit=remove_limit or [],
        remove_gate=remove_gate or [],
        remove_cap=remove_cap or [],
    )
    with ctx.service(CapacityStateService, write=True) as ledger:
        answer = ledger.configure(request)
    return output_of("configure", request, answer, ctx.shown())


commands.include(runner.commands)  # observe ... release, in their SPEC §3.5 place


@commands("inspect", example="quotaledger inspect --goal g --at 2026-11-29T14:02:00Z")
def inspect(
    ctx: Ctx,
    goal: Annotated[str | None, typer.Option("--goal", help="Only this goal.")] = None,
    at: Annotated[
        str | None, typer.Option("--at", help="Show the state as of this time (RFC 3339).")
    ] = None,
    seq: Annotated[
        int | None,
        typer.Option(
            "--seq",
            help="Show the state as of this record (each goal at its last event up to it).",
        ),
    ] = None,
    pool: Annotated[
        str | None, typer.Option("--pool", help="A pool instead: its members and loads.")
    ] = None,
) -> Output:
    """Show each goal's config, usage, reservations, active runs and what to do next.

    On a corrupt journal, --seq N before the corrupt record still answers.
    """
    request = request_of(InspectRequest, locals())
    with ctx.service(CapacityStateService, write=False, allow_corrupt=seq is not None) as ledger:
        answer = ledger.inspect(request)
    return output_of("inspect", request, answer, ctx.shown())


# -- human text ------------------------------------------------------------------------
