"""Settlement commands (SPEC §5): `budget configure`, `turn open|writeback|resume|spend|status`.

Each command decodes its request once the journal is open: a journal that cannot be
read stays exit 3 ahead of a bad amount, effect or window (exit 2), as it always was
(the command wrapper has checked identifiers and `--at` before either)."""

from typing import Annotated

import typer

from quotaledger.cli.common import AtOpt, CommandTable, Ctx, GoalOpt
from quotaledger.render.answers import output_of
from quotaledger.render.output import Output
from quotaledger.services.settlement import SettlementService
from quotaledger.usecases.decode import CLI, decode
from quotaledger.usecases.settlement import (
    BudgetConfigureRequest,
    TurnOpenRequest,
    TurnResumeRequest,
    TurnSpendRequest,
    TurnStatusRequest,
    TurnWritebackRequest,
)

AgentOpt = Annotated[str, typer.Option("--agent", help="Agent (runtime) identifier.")]
TurnOpt = Annotated[str, typer.Option("--turn", help="Turn identifier (unique per agent).")]
AmountOpt = Annotated[int, typer.Option("--amount", help="Quota units the turn's effect costs.")]
ReadAtOpt = Annotated[
    str | None, typer.Option("--at", help="Evaluate as of this time (RFC 3339) [default: now].")
]


budget_commands = CommandTable()
turn_commands = CommandTable()


def register(app: typer.Typer) -> None:
    """Add this domain's commands to the quotaledger app."""
    budget = typer.Typer(help="The goal's rolling quota budget for turns.", no_args_is_help=True)
    turn = typer.Typer(
        help="Turns: open, verified writeback, exactly-once quota spend, resume after a crash.",
        no_args_is_help=True,
    )
    app.add_typer(budget, name="budget")
    app.add_typer(turn, name="turn")
    budget_commands.add_to(budget)
    turn_commands.add_to(turn)


@budget_commands(
    "configure",
    example="quotaledger budget configure --goal g --allowed-units 1000 --window-hours 24",
)
def configure(
    ctx: Ctx,
    goal: GoalOpt,
    allowed_units: Annotated[
        int,
        typer.Option(
            "--allowed-units",
            help="Units the goal may spend per window (0..10^12; 0 pauses new turns).",
        ),
    ],
    window_hours: Annotated[
        float, typer.Option("--window-hours", help="Rolling window length in hours (> 0).")
    ],
    at: AtOpt = None,
) -> Output:
    """Set the rolling budget: `turn open` is refused quota_throttled while the units
    spent in the last H hours reach N. The same budget again appends nothing."""
    values = {"goal": goal, "allowed_units": allowed_units, "window_hours": window_hours, "at": at}
    with ctx.service(SettlementService, write=True) as ledger:
        request = decode(BudgetConfigureRequest, values, CLI)
        answer = ledger.budget_configure(request)
    return output_of("budget_configure", request, answer, ctx.shown())


@turn_commands("open", example="quotaledger turn open --goal g --agent a1 --turn t1 --task k1")
def open_(
    ctx: Ctx,
    goal: GoalOpt,
    agent: AgentOpt,
    turn_id: TurnOpt,
    task: Annotated[str, typer.Option("--task", help="Task the turn works on.")],
    at: AtOpt = None,
) -> Output:
    """Open a turn. Refused settlement_owed (with the owed spend command) while the
    agent's previous turn owes its spend, turn_in_progress while it awaits its
    writeback, quota_throttled while the budget window is used up."""
    values = {"goal": goal, "agent": agent, "turn": turn_id, "task": task, "at": at}
    with ctx.service(SettlementService, write=True) as ledger:
        request = decode(TurnOpenRequest, values, CLI)
        answer = ledger.turn_open(request)
    return output_of("turn_open", request, answer, ctx.shown())


@turn_commands(
    "writeback",
    example="quotaledger turn writeback --goal g --agent a1 --turn t1 --amount 120",
)
def writeback(
    ctx: Ctx,
    goal: GoalOpt,
    agent: AgentOpt,
    turn_id: TurnOpt,
    amount: AmountOpt,
    at: AtOpt = None,
) -> Output:
    """Record the turn's verified writeback: from now on its spend is owed and
    `turn resume` returns it. Repeating it with the same amount is idempotent."""
    values = {"goal": goal, "agent": agent, "turn": turn_id, "amount": amount, "at": at}
    with ctx.service(SettlementService, write=True) as ledger:
        request = decode(TurnWritebackRequest, values, CLI)
        answer = ledger.turn_writeback(request)
    return output_of("turn_writeback", request, answer, ctx.shown())


@turn_commands("resume", example="quotaledger turn resume --goal g --agent a1")
def resume(ctx: Ctx, goal: GoalOpt, agent: AgentOpt, at: ReadAtOpt = None) -> Output:
    """What a re-entering agent must do next, from the journal alone (no lock):
    phase open (write back), spend_owed (run the printed command once), settled
    (settled_skip) or idle."""
    with ctx.service(SettlementService, write=False) as ledger:
        request = decode(TurnResumeRequest, {"goal": goal, "agent": agent, "at": at}, CLI)
        answer = ledger.turn_resume(request)
    return output_of("turn_resume", request, answer, ctx.shown())


@turn_commands(
    "spend",
    example="quotaledger turn spend --goal g --agent a1 --turn t1 "
    "--effect 3f0c9a1e5b7d2c4a6e8f0b1d3c5a7e9f --amount 120",
)
def spend(
    ctx: Ctx,
    goal: GoalOpt,
    agent: AgentOpt,
    turn_id: TurnOpt,
    effect: Annotated[
        str, typer.Option("--effect", help="Effect id of the verified writeback (32 hex).")
    ],
    amount: AmountOpt,
    at: AtOpt = None,
) -> Output:
    """Spend the owed quota of a verified writeback exactly once. A replay is ok and
    appends nothing; any other identity is refused spend_identity_mismatch, a turn
    without writeback writeback_not_verified."""
    values = {"goal": goal, "agent": agent, "turn": turn_id, "effect": effect}
    with ctx.service(SettlementService, write=True) as ledger:
        request = decode(TurnSpendRequest, {**values, "amount": amount, "at": at}, CLI)
        answer = ledger.turn_spend(request)
    return output_of("turn_spend", request, answer, ctx.shown())


@turn_commands("status", example="quotaledger turn status --goal g --agent a1")
def status(
    ctx: Ctx,
    goal: GoalOpt,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent.")] = None,
    at: ReadAtOpt = None,
) -> Output:
    """The goal's budget window (spent units, throttled, when it re-opens) and each
    agent's turns with their phases (no lock)."""
    with ctx.service(SettlementService, write=False) as ledger:
        request = decode(TurnStatusRequest, {"goal": goal, "agent": agent, "at": at}, CLI)
        answer = ledger.turn_status(request)
    return output_of("turn_status", request, answer, ctx.shown())
