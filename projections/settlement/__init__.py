"""Quota settlement resumption (SPEC §5, seed 004): turns, writebacks and spends.

A turn of an agent goes through three phases, each one journaled event:

    turn.opened -> turn.writeback_verified -> quota.spent
       open            spend_owed               settled

A runtime can die right after its writeback became durable. Re-entering must then
get the *original* spend back from this fold alone (no other state is rebuilt),
spend it exactly once for the recorded identity and refuse any other identity. The
decision functions are pure: state + request + time -> `Decision`.

Invariant the decisions keep: an agent has at most one unsettled turn per goal
(`turn open` refuses while one is open or owed), so "the agent's latest turn" is the
one a resume is about, and a newly opened turn can never displace an owed spend.

Units: `amount`, `allowed_units` and the `spent_*` figures are abstract quota units
(integers, 0..10^12); `window_hours` is the rolling budget window in hours.

Where SPEC §5 is silent, this package decides:
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

The package by job: `events` (phases, payloads), `fold` (the state, `apply` and the
derived figures) and `decision`; every public name is re-exported here.
"""

from quotaledger.projections.settlement.decision import (
    BudgetDecision,
    BudgetFigures,
    TurnDecision,
    TurnDetail,
    budget_figures,
    decide_budget,
    decide_open,
    decide_spend,
    decide_writeback,
)
from quotaledger.projections.settlement.events import (
    BUDGET_CONFIGURED,
    EFFECT_HEX_CHARS,
    EVENTS,
    IDLE,
    OPEN,
    QUOTA_SPENT,
    SETTLED,
    SPEND_OWED,
    TURN_OPENED,
    TURN_WRITEBACK_VERIFIED,
    US_PER_HOUR,
    BudgetConfigured,
    EffectHex,
    QuotaSpent,
    SpentUnits,
    TurnOpened,
    TurnWritebackVerified,
    WindowHours,
)
from quotaledger.projections.settlement.fold import (
    VERSION,
    AgentTurns,
    Budget,
    GoalSettlement,
    SettlementState,
    Turn,
    apply,
    effect_of,
    reopens_at_us,
    spend_argv,
    spend_command,
    turn_of,
    window_spent_units,
)

__all__ = [
    "BUDGET_CONFIGURED",
    "EFFECT_HEX_CHARS",
    "EVENTS",
    "IDLE",
    "OPEN",
    "QUOTA_SPENT",
    "SETTLED",
    "SPEND_OWED",
    "TURN_OPENED",
    "TURN_WRITEBACK_VERIFIED",
    "US_PER_HOUR",
    "VERSION",
    "AgentTurns",
    "Budget",
    "BudgetConfigured",
    "BudgetDecision",
    "BudgetFigures",
    "EffectHex",
    "GoalSettlement",
    "QuotaSpent",
    "SettlementState",
    "SpentUnits",
    "Turn",
    "TurnDecision",
    "TurnDetail",
    "TurnOpened",
    "TurnWritebackVerified",
    "WindowHours",
    "apply",
    "budget_figures",
    "decide_budget",
    "decide_open",
    "decide_spend",
    "decide_writeback",
    "effect_of",
    "reopens_at_us",
    "spend_argv",
    "spend_command",
    "turn_of",
    "window_spent_units",
]
