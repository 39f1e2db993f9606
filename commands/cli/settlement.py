"""Settlement commands (SPEC §5): `budget configure`, `turn open|writeback|resume|spend|status`."""

from typing import Annotated, Any

import typer

from quotaledger.cli.common import AtOpt, Ctx, GoalOpt, command
from quotaledger.cli.output import Output, render_text
from quotaledger.services.settlement import SettlementService

AgentOpt = Annotated[str, typer.Option("--agent", help="Agent (runtime) identifier.")]
TurnOpt = Annotated[str, typer.Option("--turn", help="Turn identifier (unique per agent).")]
AmountOpt = Annotated[int, typer.Option("--amount", help="Quota units the turn's effect costs.")]
ReadAtOpt = Annotated[
    str | None, typer.Option("--at", help="Evaluate as of this time (RFC 3339) [default: now].")
]


def register(app: typer.Typer) -> None:
    """Add this domain's commands to the quotaledger app."""
    budget = typer.Typer(help="The goal's rolling quota budget for turns.", no_args_is_help=True)
    turn = typer.Typer(
        help="Turns: open, verified writeback, exactly-once quota spend, resume after a crash.",
        no_args_is_help=True,
    )
    app.add_typer(budget, name="budget")
    app.add_typer(turn, name="turn")

    @command(
        budget,
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
    ) -> dict[str, Any]:
        """Set the rolling budget: `turn open` is refused quota_throttled while the units
        spent in the last H hours reach N. The same budget again appends nothing."""
        with ctx.service(SettlementService, write=True) as ledger:
            result: dict[str, Any] = ledger.budget_configure(
                goal=goal, allowed_units=allowed_units, window_hours=window_hours, at=at
            )
            return result

    @command(turn, "open", example="quotaledger turn open --goal g --agent a1 --turn t1 --task k1")
    def open_(
        ctx: Ctx,
        goal: GoalOpt,
        agent: AgentOpt,
        turn_id: TurnOpt,
        task: Annotated[str, typer.Option("--task", help="Task the turn works on.")],
        at: AtOpt = None,
    ) -> dict[str, Any]:
        """Open a turn. Refused settlement_owed (with the owed spend command) while the
        agent's previous turn owes its spend, turn_in_progress while it awaits its
        writeback, quota_throttled while the budget window is used up."""
        with ctx.service(SettlementService, write=True) as ledger:
            result: dict[str, Any] = ledger.turn_open(
                goal=goal, agent=agent, turn=turn_id, task=task, at=at
            )
            return result

    @command(
        turn,
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
    ) -> dict[str, Any]:
        """Record the turn's verified writeback: from now on its spend is owed and
        `turn resume` returns it. Repeating it with the same amount is idempotent."""
        with ctx.service(SettlementService, write=True) as ledger:
            result: dict[str, Any] = ledger.turn_writeback(
                goal=goal, agent=agent, turn=turn_id, amount=amount, at=at
            )
            return result

    @command(turn, "resume", example="quotaledger turn resume --goal g --agent a1")
    def resume(ctx: Ctx, goal: GoalOpt, agent: AgentOpt, at: ReadAtOpt = None) -> Output:
        """What a re-entering agent must do next, from the journal alone (no lock):
        phase open (write back), spend_owed (run the printed command once), settled
        (settled_skip) or idle."""
        with ctx.service(SettlementService, write=False) as ledger:
            result: dict[str, Any] = ledger.turn_resume(goal=goal, agent=agent, at=at)
        return Output(result, text=_resume_text(result))

    @command(
        turn,
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
    ) -> dict[str, Any]:
        """Spend the owed quota of a verified writeback exactly once. A replay is ok and
        appends nothing; any other identity is refused spend_identity_mismatch, a turn
        without writeback writeback_not_verified."""
        with ctx.service(SettlementService, write=True) as ledger:
            result: dict[str, Any] = ledger.turn_spend(
                goal=goal, agent=agent, turn=turn_id, effect=effect, amount=amount, at=at
            )
            return result

    @command(turn, "status", example="quotaledger turn status --goal g --agent a1")
    def status(
        ctx: Ctx,
        goal: GoalOpt,
        agent: Annotated[str | None, typer.Option("--agent", help="Only this agent.")] = None,
        at: ReadAtOpt = None,
    ) -> dict[str, Any]:
        """The goal's budget window (spent units, throttled, when it re-opens) and each
        agent's turns with their phases (no lock)."""
        with ctx.service(SettlementService, write=False) as ledger:
            result: dict[str, Any] = ledger.turn_status(goal=goal, agent=agent, at=at)
            return result


def _resume_text(result: dict[str, Any]) -> str:
    """Humans (and shell scripts) get the owed command alone on its own line."""
    if result.get("phase") == "spend_owed":
        password = " (the password comes from PGPASSWORD)" if "journal_password" in result else ""
        return (
            f"spend owed for turn {result['turn']} (effect {result['effect']}, "
            f"{result['amount']} units); run once{password}:\n{result['command']}"
        )
    return render_text(result)
