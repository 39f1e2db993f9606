"""What the budget and turn commands print."""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from quotaledger.render.output import plural, table
from quotaledger.usecases.decode import Event
from quotaledger.usecases.settlement import (
    AgentStatus,
    AgentStatusOwed,
    BudgetConfigureAnswer,
    TurnOpenAnswer,
    TurnResumeAnswer,
    TurnResumeOwed,
    TurnSpendAnswer,
    TurnStatusAnswer,
    TurnWriteback,
    TurnWritebackAnswer,
)


def resume_text(answer: TurnResumeAnswer) -> str:
    """Humans (and shell scripts) get the owed command alone on its own line."""
    if isinstance(answer, TurnResumeOwed):
        password = (
            "" if answer.journal_password is UNSET else " (the password comes from PGPASSWORD)"
        )
        return (
            f"spend owed for turn {answer.turn} (effect {answer.effect}, "
            f"{answer.amount} units); run once{password}:\n{answer.command}"
        )
    if answer.phase == "open":
        return f"turn {answer.turn} of agent {answer.agent} is open: write back next"
    if answer.phase == "settled":
        return (
            f"turn {answer.turn} of agent {answer.agent} is settled "
            f"({answer.amount} units spent at {answer.spent_at}): settled_skip"
        )
    return f"agent {answer.agent} has no turn: idle"


def _seq(appended: bool, event: Event | UnsetType, idempotent: bool | UnsetType) -> str:
    if appended and isinstance(event, Event):
        return f" (seq {event.seq})"
    return " (replay: nothing appended)" if idempotent is True else ""


def _refused(what: str, reasons: list[str] | UnsetType, command: str | UnsetType) -> str:
    text = f"REFUSED {what}: {', '.join(reasons or [])}"
    if command:  # settlement_owed: what to run first, alone on its line
        text += f"\nrun once:\n{command}"
    return text


def budget_text(answer: BudgetConfigureAnswer) -> str:
    budget = answer.budget
    return (
        f"budget of goal {answer.goal}: {budget.allowed_units:,} units per "
        f"{budget.window_hours:g} h{_seq(answer.appended, answer.event, answer.idempotent)}"
    )


def open_text(answer: TurnOpenAnswer) -> str:
    if not answer.ok:
        return _refused(f"turn open {answer.turn}", answer.reasons, answer.command)
    return (
        f"opened turn {answer.turn} of agent {answer.agent} (task {answer.task}, "
        f"effect {answer.effect}){_seq(answer.appended, answer.event, answer.idempotent)}"
    )


def writeback_text(answer: TurnWritebackAnswer) -> str:
    if not answer.ok:
        return _refused(f"turn writeback {answer.turn}".rstrip(), answer.reasons, answer.command)
    event = answer.event if isinstance(answer, TurnWriteback) else UNSET
    seq = _seq(answer.appended, event, answer.idempotent)
    text = f"writeback of turn {answer.turn} verified: {answer.amount:,} units"
    if answer.command is UNSET:  # a replay on a turn already settled
        return text + seq
    return text + f" owed{seq}; spend it once:\n{answer.command}"


def spend_text(answer: TurnSpendAnswer) -> str:
    if not answer.ok:
        return _refused(f"turn spend {answer.turn}".rstrip(), answer.reasons, UNSET)
    if not answer.appended:
        return f"turn {answer.turn} was already spent: nothing appended"
    seq = _seq(answer.appended, answer.event, answer.idempotent)
    return (
        f"spent {answer.amount:,} units for turn {answer.turn} (spent "
        f"{answer.spent_before:,} -> {answer.spent_after:,}){seq}"
    )


def status_text(answer: TurnStatusAnswer) -> str:
    budget = answer.budget
    if budget is None:
        window = "no budget configured"
    else:
        window = (
            f"{answer.window_spent_units:,} of {budget.allowed_units:,} units spent in "
            f"the last {budget.window_hours:g} h"
        )
    if answer.throttled:
        window += f", throttled until {answer.reopens_at or '-'}"
    agents = answer.agents
    head = f"goal {answer.goal} as of {answer.as_of}: {window}; {plural(len(agents), 'agent')}"
    rows = [
        [
            name,
            str(len(view.turns)),
            view.turn or "-",
            view.phase,
            "-" if view.amount is UNSET else f"{view.amount:,}",
            _next(view),
        ]
        for name, view in agents.items()
    ]
    if not rows:
        return head
    text = head + "\n" + table(rows, ["AGENT", "TURNS", "LATEST", "PHASE", "AMOUNT", "NEXT"])
    for name, view in agents.items():
        if isinstance(view, AgentStatusOwed):  # the step, as `turn resume` prints it
            text += (
                f"\nspend owed by agent {name} for turn {view.turn} ({view.amount:,} units); "
                f"run once:\n{view.command}"
            )
    return text


def _next(view: AgentStatus | AgentStatusOwed) -> str:
    if isinstance(view, AgentStatusOwed):
        return "spend"
    return view.next_step or view.effective_action or "-"
