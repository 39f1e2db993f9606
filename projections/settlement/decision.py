"""The settlement decisions (SPEC §5): budget, open, writeback, spend."""

import msgspec

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
from quotaledger.projections.settlement.events import (
    BUDGET_CONFIGURED,
    OPEN,
    QUOTA_SPENT,
    SETTLED,
    SPEND_OWED,
    TURN_OPENED,
    TURN_WRITEBACK_VERIFIED,
    BudgetConfigured,
    QuotaSpent,
    TurnOpened,
    TurnWritebackVerified,
)
from quotaledger.projections.settlement.fold import (
    AgentTurns,
    Budget,
    GoalSettlement,
    SettlementState,
    Turn,
    effect_of,
    reopens_at_us,
    turn_of,
    window_spent_units,
)

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
    existing = None if book is None else turn_of(book, agent, turn)
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
    existing = turn_of(book, agent, turn)
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
