"""Quota settlement resumption (SPEC §5, seed 004): turns, writebacks and spends.

A turn of an agent goes through three phases, each one journaled event:

    turn.opened -> turn.writeback_verified -> quota.spent
       open            spend_owed               settled

A runtime can die right after its writeback became durable. Re-entering must then
get the *original* spend back from this fold alone (no other state is rebuilt),
spend it exactly once for the recorded identity and refuse any other identity. The
decision functions below are pure: state + request + time -> `Decision`.

Invariant the decisions keep: an agent has at most one unsettled turn per goal
(`turn open` refuses while one is open or owed), so "the agent's latest turn" is the
one a resume is about, and a newly opened turn can never displace an owed spend.

Units: `amount`, `allowed_units` and the `spent_*` figures are abstract quota units
(integers, 0..10^12); `window_hours` is the rolling budget window in hours.

Where SPEC §5 is silent, this module decides:
- Turn ids are unique per goal and agent (the effect hashes the identity, so a reused
  id would owe the same effect twice). Re-opening the open turn with the same task
  is an idempotent replay; with another task `turn_exists_with_different_task`; of
  a settled turn `turn_already_settled`; of an owed turn `settlement_owed`.
- A writeback repeated with another amount is refused `writeback_amount_conflict`
  (the first amount stands); with the same amount it is idempotent, also once settled.
- `turn spend` naming a turn the goal and agent never opened (foreign goal, agent or
  turn) is `spend_identity_mismatch`; a known turn without writeback is
  `writeback_not_verified` (plus the mismatch when the effect is not the turn's).
- The window holds the spends at s with t - window < s <= t; `allowed_units` 0
  pauses new turns; without `budget configure` nothing is throttled. Spends are
  never throttled: they settle work already done.
- `spent_before`/`spent_after` are the goal's cumulative spent units (a ledger
  balance that only grows), not the window's.
- The spend command is a function of the fold alone; the application adds the
  `--journal` it runs against (see `spend_command`).
"""

import bisect
from typing import Annotated, Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import parse_at
from quotaledger.journal.sha256 import sha256_hex
from quotaledger.projections.decision import Decision
from quotaledger.projections.reasons import (
    QUOTA_THROTTLED,
    SETTLEMENT_OWED,
    SPEND_IDENTITY_MISMATCH,
    TURN_ALREADY_SETTLED,
    TURN_EXISTS_WITH_DIFFERENT_TASK,
    TURN_IN_PROGRESS,
    TURN_NOT_OPEN,
    WRITEBACK_AMOUNT_CONFLICT,
    WRITEBACK_NOT_VERIFIED,
)
from quotaledger.projections.types import Identifier, Payload, StateStruct, TokenCount

VERSION = "1"

EFFECT_HEX_CHARS = 32
US_PER_HOUR = 3600 * 1_000_000
WINDOW_HOURS_MAX = 24 * 366 * 10
"""The longest budget window accepted: ten years."""

EffectHex = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}\Z")]
WindowHours = Annotated[float, msgspec.Meta(gt=0, le=WINDOW_HOURS_MAX)]
SpentUnits = Annotated[int, msgspec.Meta(ge=0)]
"""The goal's cumulative spent units (a sum of amounts: may exceed one amount's cap)."""

# Phases of a turn (and of an agent, through its latest turn).
OPEN = "open"
SPEND_OWED = "spend_owed"
SETTLED = "settled"
IDLE = "idle"

# -- events ---------------------------------------------------------------------------


class BudgetConfigured(Payload, frozen=True):
    allowed_units: TokenCount
    window_hours: WindowHours


class TurnOpened(Payload, frozen=True):
    agent: Identifier
    turn: Identifier
    task: Identifier


class TurnWritebackVerified(Payload, frozen=True):
    agent: Identifier
    turn: Identifier
    effect: EffectHex
    amount: TokenCount


class QuotaSpent(Payload, frozen=True):
    agent: Identifier
    turn: Identifier
    effect: EffectHex
    amount: TokenCount
    spent_before: SpentUnits
    spent_after: SpentUnits


BUDGET_CONFIGURED = "budget.configured"
TURN_OPENED = "turn.opened"
TURN_WRITEBACK_VERIFIED = "turn.writeback_verified"
QUOTA_SPENT = "quota.spent"

EVENTS: dict[str, type[Payload]] = {
    BUDGET_CONFIGURED: BudgetConfigured,
    TURN_OPENED: TurnOpened,
    TURN_WRITEBACK_VERIFIED: TurnWritebackVerified,
    QUOTA_SPENT: QuotaSpent,
}
"""Event kind -> payload Struct."""


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
        turn = _turn(book, payload.agent, payload.turn)
        if turn is not None:
            turn.amount = payload.amount
            turn.writeback_at = record.at
            turn.writeback_seq = record.seq
    elif isinstance(payload, QuotaSpent):
        turn = _turn(book, payload.agent, payload.turn)
        if turn is not None:
            turn.spent_at = record.at
            turn.spend_seq = record.seq
            turn.spend_hash = record.hash
        book.spend_at_us.append(parse_at(record.at))
        book.spend_units.append(payload.amount)
        book.spent_total += payload.amount


def _turn(book: GoalSettlement, agent: str, turn: str) -> Turn | None:
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


# -- decisions ------------------------------------------------------------------------


class BudgetFigures(msgspec.Struct, frozen=True):
    """The goal's budget and where its rolling window stands at one time."""

    budget: Budget | None
    window_spent_units: int | None
    """None without a budget."""
    throttled: bool
    reopens_at_us: int | None
    """When a throttled window re-opens by itself (None: not throttled, or never)."""
    spent_total: int


def budget_figures(book: GoalSettlement | None, at_us: int) -> BudgetFigures:
    if book is None or book.budget is None:
        spent_total = 0 if book is None else book.spent_total
        return BudgetFigures(None, None, False, None, spent_total)
    spent = window_spent_units(book, at_us)
    assert spent is not None
    throttled = spent >= book.budget.allowed_units
    return BudgetFigures(
        book.budget, spent, throttled, reopens_at_us(book, at_us), book.spent_total
    )


class TurnDetail(msgspec.Struct, frozen=True, kw_only=True):
    """What a turn decision found, for the application's answer."""

    turn: Turn | None = None
    """The turn the request names, as the journal holds it (None: never opened, or a
    turn not opened yet)."""
    owed: Turn | None = None
    """The agent's latest turn while its spend is owed (it blocks a new turn)."""
    in_progress: Turn | None = None
    """The agent's latest turn while it awaits its writeback (it blocks a new turn)."""
    figures: BudgetFigures | None = None
    """`turn open`: the goal's budget window at the decision's time."""
    effect: str | None = None
    """The named turn's effect id (None when the turn is unknown)."""


TurnDecision = Decision[TurnDetail]
BudgetDecision = Decision[None]


def decide_budget(
    state: SettlementState, goal: str, allowed_units: int, window_hours: float
) -> BudgetDecision:
    """`budget configure`: the same budget again changes nothing."""
    book = state.goals.get(goal)
    current = None if book is None else book.budget
    if (
        current is not None
        and current.allowed_units == allowed_units
        and current.window_hours == window_hours
    ):
        return Decision(idempotent=True, detail=None)
    payload = BudgetConfigured(allowed_units=allowed_units, window_hours=window_hours)
    return Decision(kind=BUDGET_CONFIGURED, payload=payload, detail=None)


def decide_open(
    state: SettlementState, goal: str, agent: str, turn: str, task: str, at_us: int
) -> TurnDecision:
    """`turn open`: a new turn only once the agent's previous turn is settled and the
    goal's rolling window has units left. Reopening the same open turn is a replay."""
    book = state.goals.get(goal) or GoalSettlement()
    turns = book.agents.get(agent) or AgentTurns()
    existing = turns.turns.get(turn)
    if existing is not None:
        return _reopen(existing, task)
    reasons: list[str] = []
    owed = in_progress = None
    latest = turns.turns.get(turns.latest) if turns.latest is not None else None
    if latest is not None and latest.phase == SPEND_OWED:
        reasons.append(SETTLEMENT_OWED)
        owed = latest
    elif latest is not None and latest.phase == OPEN:
        reasons.append(TURN_IN_PROGRESS)
        in_progress = latest
    figures = budget_figures(book, at_us)
    if figures.throttled:
        reasons.append(QUOTA_THROTTLED)
    detail = TurnDetail(
        owed=owed,
        in_progress=in_progress,
        figures=figures,
        effect=effect_of(goal, agent, task, turn),
    )
    if reasons:
        return Decision(reasons=tuple(reasons), detail=detail)
    payload = TurnOpened(agent=agent, turn=turn, task=task)
    return Decision(kind=TURN_OPENED, payload=payload, detail=detail)


def _reopen(existing: Turn, task: str) -> TurnDecision:
    detail = TurnDetail(turn=existing, effect=existing.effect)
    if existing.task != task:
        return Decision(reasons=(TURN_EXISTS_WITH_DIFFERENT_TASK,), detail=detail)
    if existing.phase == SPEND_OWED:
        # The re-entering runner learns what it still owes, exactly as for a new turn.
        return Decision(reasons=(SETTLEMENT_OWED,), detail=detail)
    if existing.phase == SETTLED:
        return Decision(reasons=(TURN_ALREADY_SETTLED,), detail=detail)
    return Decision(idempotent=True, detail=detail)


def decide_writeback(
    state: SettlementState, goal: str, agent: str, turn: str, amount: int
) -> TurnDecision:
    """`turn writeback`: records the amount the turn's effect owes, once."""
    book = state.goals.get(goal)
    existing = None if book is None else _turn(book, agent, turn)
    if existing is None:
        return Decision(reasons=(TURN_NOT_OPEN,), detail=TurnDetail())
    detail = TurnDetail(turn=existing, effect=existing.effect)
    if existing.phase == OPEN:
        payload = TurnWritebackVerified(
            agent=agent, turn=turn, effect=existing.effect, amount=amount
        )
        return Decision(kind=TURN_WRITEBACK_VERIFIED, payload=payload, detail=detail)
    if existing.amount != amount:
        return Decision(reasons=(WRITEBACK_AMOUNT_CONFLICT,), detail=detail)
    return Decision(idempotent=True, detail=detail)


def decide_spend(
    state: SettlementState, goal: str, agent: str, turn: str, effect: str, amount: int
) -> TurnDecision:
    """`turn spend`: debit the recorded identity exactly once.

    A turn the goal and agent never opened is a foreign identity
    (`spend_identity_mismatch`); a known turn without writeback is
    `writeback_not_verified` (plus the mismatch if the effect is not the turn's);
    a verified turn must match on effect and amount. A settled turn with the same
    identity is a replay: ok, nothing appended.
    """
    book = state.goals.get(goal) or GoalSettlement()
    existing = _turn(book, agent, turn)
    owed = _owed_turn(book, agent)
    if existing is None:
        return Decision(reasons=(SPEND_IDENTITY_MISMATCH,), detail=TurnDetail(owed=owed))
    detail = TurnDetail(turn=existing, owed=owed, effect=existing.effect)
    if existing.phase == OPEN:
        reasons = [WRITEBACK_NOT_VERIFIED]
        if existing.effect != effect:
            reasons.append(SPEND_IDENTITY_MISMATCH)
        return Decision(reasons=tuple(reasons), detail=detail)
    if existing.effect != effect or existing.amount != amount:
        return Decision(reasons=(SPEND_IDENTITY_MISMATCH,), detail=detail)
    if existing.phase == SETTLED:
        return Decision(idempotent=True, detail=detail)
    payload = QuotaSpent(
        agent=agent,
        turn=turn,
        effect=effect,
        amount=amount,
        spent_before=book.spent_total,
        spent_after=book.spent_total + amount,
    )
    return Decision(kind=QUOTA_SPENT, payload=payload, detail=detail)


def _owed_turn(book: GoalSettlement, agent: str) -> Turn | None:
    turns = book.agents.get(agent)
    if turns is None or turns.latest is None:
        return None
    latest = turns.turns[turns.latest]
    return latest if latest.phase == SPEND_OWED else None
