"""A goal's settlement state (budget, turns, spends), its fold, and the figures
derived from it (the effect, the spend command, the window's spent units)."""

import bisect
from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import parse_at
from quotaledger.journal.sha256 import sha256_hex
from quotaledger.projections.settlement.events import (
    EFFECT_HEX_CHARS,
    OPEN,
    SETTLED,
    SPEND_OWED,
    US_PER_HOUR,
    BudgetConfigured,
    QuotaSpent,
    TurnOpened,
    TurnWritebackVerified,
)
from quotaledger.projections.types import StateStruct

VERSION = "1"

# -- state ----------------------------------------------------------------------------


class Budget(StateStruct):
    allowed_units: int = 0
    window_hours: float = 0.0
    configured_at: str = ""
    seq: int = -1


class Turn(StateStruct):
    turn: str = ""
    task: str = ""
    effect: str = ""
    opened_at: str = ""
    opened_seq: int = -1
    amount: int | None = None
    writeback_at: str | None = None
    writeback_seq: int | None = None
    spent_at: str | None = None
    spend_seq: int | None = None
    spend_hash: str | None = None

    @property
    def phase(self) -> str:
        if self.spent_at is not None:
            return SETTLED
        if self.writeback_at is not None:
            return SPEND_OWED
        return OPEN


class AgentTurns(StateStruct):
    turns: dict[str, Turn] = msgspec.field(default_factory=dict)
    latest: str | None = None
    """The turn id opened last; at most one turn of an agent is unsettled."""


class GoalSettlement(StateStruct):
    budget: Budget | None = None
    agents: dict[str, AgentTurns] = msgspec.field(default_factory=dict)
    spend_at_us: list[int] = msgspec.field(default_factory=list)
    """Times of every spend of the goal, non-decreasing (the journal keeps a goal's
    event times non-decreasing), so the rolling window is a bisect away."""
    spend_units: list[int] = msgspec.field(default_factory=list)
    spent_total: int = 0


class SettlementState(StateStruct):
    goals: dict[str, GoalSettlement] = msgspec.field(default_factory=dict)


# -- fold -----------------------------------------------------------------------------


def apply(state: SettlementState, record: Record, payload: Any) -> None:
    """Fold one event of this domain into the state."""
    goal = record.goal or ""
    book = state.goals.get(goal)
    if book is None:
        book = state.goals[goal] = GoalSettlement()
    if isinstance(payload, BudgetConfigured):
        book.budget = Budget(
            allowed_units=payload.allowed_units,
            window_hours=payload.window_hours,
            configured_at=record.at,
            seq=record.seq,
        )
    elif isinstance(payload, TurnOpened):
        agent = book.agents.get(payload.agent)
        if agent is None:
            agent = book.agents[payload.agent] = AgentTurns()
        agent.turns[payload.turn] = Turn(
            turn=payload.turn,
            task=payload.task,
            effect=effect_of(goal, payload.agent, payload.task, payload.turn),
            opened_at=record.at,
            opened_seq=record.seq,
        )
        agent.latest = payload.turn
    elif isinstance(payload, TurnWritebackVerified):
        turn = turn_of(book, payload.agent, payload.turn)
        if turn is not None:
            turn.amount = payload.amount
            turn.writeback_at = record.at
            turn.writeback_seq = record.seq
    elif isinstance(payload, QuotaSpent):
        turn = turn_of(book, payload.agent, payload.turn)
        if turn is not None:
            turn.spent_at = record.at
            turn.spend_seq = record.seq
            turn.spend_hash = record.hash
        book.spend_at_us.append(parse_at(record.at))
        book.spend_units.append(payload.amount)
        book.spent_total += payload.amount


def turn_of(book: GoalSettlement, agent: str, turn: str) -> Turn | None:
    turns = book.agents.get(agent)
    return None if turns is None else turns.turns.get(turn)


# -- derived figures ------------------------------------------------------------------


def effect_of(goal: str, agent: str, task: str, turn: str) -> str:
    """The effect id: first 32 hex of SHA-256 of `goal \\0 agent \\0 task \\0 turn`."""
    digest = sha256_hex("\0".join((goal, agent, task, turn)).encode())
    return digest[:EFFECT_HEX_CHARS]


def spend_argv(goal: str, agent: str, turn: str, effect: str, amount: int) -> list[str]:
    return [
        "quotaledger",
        "turn",
        "spend",
        "--goal",
        goal,
        "--agent",
        agent,
        "--turn",
        turn,
        "--effect",
        effect,
        "--amount",
        str(amount),
    ]


def spend_command(goal: str, agent: str, turn: str, effect: str, amount: int) -> str:
    """The exact `quotaledger turn spend ...` line a resume hands back.

    Identifiers are restricted to `A-Za-z0-9._:@/-`, none of which a POSIX shell
    treats specially, so `shlex.quote` leaves them unchanged and the line reads
    exactly like SPEC §5; quoting is kept only as a guard. The line is a function
    of the fold alone: the application layer appends the `--journal` of the journal
    it answered from (SPEC §8: quoted, a PostgreSQL URL without its password).
    """
    import shlex  # only a resume hands a command line back: no start-up cost

    return shlex.join(spend_argv(goal, agent, turn, effect, amount))


def window_spent_units(book: GoalSettlement, at_us: int) -> int | None:
    """Units spent in the rolling window (at - window, at]; None without a budget."""
    if book.budget is None:
        return None
    start = bisect.bisect_right(book.spend_at_us, at_us - _window_us(book.budget))
    end = bisect.bisect_right(book.spend_at_us, at_us)
    return sum(book.spend_units[start:end])


def reopens_at_us(book: GoalSettlement, at_us: int) -> int | None:
    """When the window's spent units drop below the allowance if nothing else is
    spent: the moment enough of the oldest spends have left the window. None when
    not throttled, or never (an allowance of 0 throttles forever)."""
    budget = book.budget
    spent = window_spent_units(book, at_us)
    if budget is None or spent is None or spent < budget.allowed_units:
        return None
    if budget.allowed_units == 0:
        return None
    window_us = _window_us(budget)
    start = bisect.bisect_right(book.spend_at_us, at_us - window_us)
    end = bisect.bisect_right(book.spend_at_us, at_us)
    for index in range(start, end):
        spent -= book.spend_units[index]
        # A spend at s is in the window at t while t - window < s, i.e. until s + window.
        if spent < budget.allowed_units:
            return book.spend_at_us[index] + window_us
    return None  # unreachable: once every spend has left, spent is 0 < allowed


def _window_us(budget: Budget) -> int:
    return round(budget.window_hours * US_PER_HOUR)
