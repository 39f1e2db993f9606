"""Settlement commands (SPEC §5): `budget configure`, `turn open|writeback|resume|spend|status`."""

from typing import Annotated, Any

import typer

from quotaledger.cli.common import AtOpt, CommandTable, Ctx, GoalOpt
from quotaledger.cli.output import Output, plural, table
from quotaledger.services.settlement import SettlementService

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
    with ctx.service(SettlementService, write=True) as ledger:
        result: dict[str, Any] = ledger.budget_configure(
            goal=goal, allowed_units=allowed_units, window_hours=window_hours, at=at
        )
    return Output(result, text=_budget_text(result))


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
    with ctx.service(SettlementService, write=True) as ledger:
        result: dict[str, Any] = ledger.turn_open(
            goal=goal, agent=agent, turn=turn_id, task=task, at=at
        )
    return Output(result, text=_open_text(result))


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
    with ctx.service(SettlementService, write=True) as ledger:
        result: dict[str, Any] = ledger.turn_writeback(
            goal=goal, agent=agent, turn=turn_id, amount=amount, at=at
        )
    return Output(result, text=_writeback_text(result))


@turn_commands("resume", example="quotaledger turn resume --goal g --agent a1")
def resume(ctx: Ctx, goal: GoalOpt, agent: AgentOpt, at: ReadAtOpt = None) -> Output:
    """What a re-entering agent must do next, from the journal alone (no lock):
    phase open (write back), spend_owed (run the printed command once), settled
    (settled_skip) or idle."""
    with ctx.service(SettlementService, write=False) as ledger:
        result: dict[str, Any] = ledger.turn_resume(goal=goal, agent=agent, at=at)
    return Output(result, text=_resume_text(result))


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
    with ctx.service(SettlementService, write=True) as ledger:
        result: dict[str, Any] = ledger.turn_spend(
            goal=goal, agent=agent, turn=turn_id, effect=effect, amount=amount, at=at
        )
    return Output(result, text=_spend_text(result))


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
        result: dict[str, Any] = ledger.turn_status(goal=goal, agent=agent, at=at)
    return Output(result, text=_status_text(result))


def _resume_text(result: dict[str, Any]) -> str:
    """Humans (and shell scripts) get the owed command alone on its own line."""
    if result.get("phase") == "spend_owed":
        password = " (the password comes from PGPASSWORD)" if "journal_password" in result else ""
        return (
            f"spend owed for turn {result['turn']} (effect {result['effect']}, "
            f"{result['amount']} units); run once{password}:\n{result['command']}"
        )
    phase = result.get("phase")
    if phase == "open":
        return f"turn {result['turn']} of agent {result['agent']} is open: write back next"
    if phase == "settled":
        return (
            f"turn {result['turn']} of agent {result['agent']} is settled "
            f"({result['amount']} units spent at {result['spent_at']}): settled_skip"
        )
    return f"agent {result['agent']} has no turn: idle"


def _seq(result: dict[str, Any]) -> str:
    if result.get("appended") and result.get("event"):
        return f" (seq {result['event']['seq']})"
    return " (replay: nothing appended)" if result.get("idempotent") else ""


def _refused(what: str, result: dict[str, Any]) -> str:
    text = f"REFUSED {what}: {', '.join(result['reasons'])}"
    if result.get("command"):  # settlement_owed: what to run first, alone on its line
        text += f"\nrun once:\n{result['command']}"
    return text


def _budget_text(result: dict[str, Any]) -> str:
    budget = result["budget"]
    return (
        f"budget of goal {result['goal']}: {budget['allowed_units']:,} units per "
        f"{budget['window_hours']:g} h{_seq(result)}"
    )


def _open_text(result: dict[str, Any]) -> str:
    if not result["ok"]:
        return _refused(f"turn open {result['turn']}", result)
    return (
        f"opened turn {result['turn']} of agent {result['agent']} (task {result['task']}, "
        f"effect {result['effect']}){_seq(result)}"
    )


def _writeback_text(result: dict[str, Any]) -> str:
    if not result["ok"]:
        return _refused(f"turn writeback {result.get('turn', '')}".rstrip(), result)
    text = f"writeback of turn {result['turn']} verified: {result['amount']:,} units"
    if result.get("command") is None:  # a replay on a turn already settled
        return text + _seq(result)
    return text + f" owed{_seq(result)}; spend it once:\n{result['command']}"


def _spend_text(result: dict[str, Any]) -> str:
    if not result["ok"]:
        return _refused(f"turn spend {result.get('turn', '')}".rstrip(), result)
    if not result["appended"]:
        return f"turn {result['turn']} was already spent: nothing appended"
    return (
        f"spent {result['amount']:,} units for turn {result['turn']} (spent "
        f"{result['spent_before']:,} -> {result['spent_after']:,}){_seq(result)}"
    )


def _status_text(result: dict[str, Any]) -> str:
    budget = result["budget"]
    if budget is None:
        window = "no budget configured"
    else:
        window = (
            f"{result['window_spent_units']:,} of {budget['allowed_units']:,} units spent in "
            f"the last {budget['window_hours']:g} h"
        )
    if result["throttled"]:
        window += f", throttled until {result['reopens_at'] or '-'}"
    agents = result["agents"]
    head = (
        f"goal {result['goal']} as of {result['as_of']}: {window}; {plural(len(agents), 'agent')}"
    )
    rows = [
        [
            name,
            str(len(view["turns"])),
            view.get("turn") or "-",
            view["phase"],
            "-" if view.get("amount") is None else f"{view['amount']:,}",
            view.get("next_step") or view.get("effective_action") or "-",
        ]
        for name, view in agents.items()
    ]
    if not rows:
        return head
    return head + "\n" + table(rows, ["AGENT", "TURNS", "LATEST", "PHASE", "AMOUNT", "NEXT"])
