"""The settlement events (SPEC §5): a turn's phases, the payloads and their kinds."""

from typing import Annotated

import msgspec

from quotaledger.projections.limits import WINDOW_HOURS_MAX
from quotaledger.projections.types import Identifier, Payload, TokenCount

EFFECT_HEX_CHARS = 32
US_PER_HOUR = 3600 * 1_000_000

EffectHex = Annotated[str, msgspec.Meta(pattern=rf"^[0-9a-f]{{{EFFECT_HEX_CHARS}}}\Z")]
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
