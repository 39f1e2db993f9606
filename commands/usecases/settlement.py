"""Settlement use cases (SPEC §5): budget configure, turn open, writeback, spend,
resume, status.

A writer's answer starts with how it went (`SettlementWrite`: ok, reasons when
refused, appended, goal, at), then what its decision adds (the turn or turns that
decided it, the owed spend command, the budget window), then the event, the note on
the follow-up command's password, and last the request's own words (agent, turn, ...).
Where two outcomes order their keys differently, the answer is a union of Structs.
"""

from msgspec import UNSET, Struct, UnsetType

from quotaledger.usecases.decode import Answer, Event, Request
from quotaledger.usecases.fields import Effect, Identifier, Time, TokenCount, WindowHours

# -- requests --------------------------------------------------------------------------


class BudgetConfigureRequest(Request):
    """Set the goal's rolling budget: `turn open` is throttled while the units spent
    in the last `window_hours` reach `allowed_units` (0 pauses new turns)."""

    goal: Identifier
    allowed_units: TokenCount
    window_hours: WindowHours
    at: Time | None = None


class TurnOpenRequest(Request):
    """Open a turn of `agent` for `task`; refused while a spend is owed, a turn is
    in progress, or the goal's budget window is exhausted."""

    goal: Identifier
    agent: Identifier
    turn: Identifier
    task: Identifier
    at: Time | None = None


class TurnWritebackRequest(Request):
    """Record the verified writeback of an open turn: its spend becomes owed."""

    goal: Identifier
    agent: Identifier
    turn: Identifier
    amount: TokenCount
    at: Time | None = None


class TurnSpendRequest(Request):
    """Spend the owed quota of a verified writeback, exactly once."""

    goal: Identifier
    agent: Identifier
    turn: Identifier
    effect: Effect
    amount: TokenCount
    at: Time | None = None


class TurnResumeRequest(Request):
    """What re-entering `agent` must do next, from the fold alone (no lock):
    open -> writeback; spend_owed -> the exact spend command; settled -> skip."""

    goal: Identifier
    agent: Identifier
    at: Time | None = None
    """Evaluate as of this time (default: now)."""


class TurnStatusRequest(Request):
    """The goal's budget window and every agent's turns (or one agent's)."""

    goal: Identifier
    agent: Identifier | None = None
    at: Time | None = None
    """Evaluate as of this time (default: now)."""


# -- what the answers are made of -------------------------------------------------------


class RecordedTurn(Struct, kw_only=True):
    """A turn as the journal holds it; `command` (the owed spend) only while owed."""

    turn: str
    task: str
    effect: str
    phase: str
    opened_at: str
    amount: int | None
    writeback_at: str | None
    spent_at: str | None
    command: str | UnsetType = UNSET


class BudgetConfig(Struct, kw_only=True):
    allowed_units: int
    window_hours: float
    configured_at: str


class BudgetWindow(Struct, kw_only=True):
    """The goal's budget and where its rolling window stands."""

    budget: BudgetConfig | None
    window_spent_units: int | None
    throttled: bool
    reopens_at: str | None
    spent_total: int


class Budget(Struct, kw_only=True):
    """The budget `budget configure` was asked to set."""

    allowed_units: int
    window_hours: float


# -- writers' answers ---------------------------------------------------------------------


class SettlementWrite(Answer, kw_only=True):
    """How every settlement writer's answer starts."""

    ok: bool
    reasons: list[str] | UnsetType = UNSET
    """Only when refused."""
    appended: bool
    goal: str
    at: str


class BudgetConfigureAnswer(SettlementWrite, kw_only=True):
    idempotent: bool
    event: Event | UnsetType = UNSET
    budget: Budget


class TurnOpenAnswer(SettlementWrite, kw_only=True):
    """The turn(s) that decided it (and, while a spend is owed, its command), the
    budget window, or the opened turn's phase and effect."""

    turn_state: RecordedTurn | UnsetType = UNSET
    owed: RecordedTurn | UnsetType = UNSET
    in_progress: RecordedTurn | UnsetType = UNSET
    command: str | UnsetType = UNSET
    figures: BudgetWindow | UnsetType = UNSET
    phase: str | UnsetType = UNSET
    effect: str | UnsetType | None = UNSET
    idempotent: bool | UnsetType = UNSET
    event: Event | UnsetType = UNSET
    journal_password: str | UnsetType = UNSET
    agent: str
    turn: str
    task: str


class TurnWriteback(SettlementWrite, kw_only=True):
    """A writeback appended (effect, task, phase, command, idempotent) or refused
    (effect, task, turn_state, recorded_amount: when the turn exists)."""

    effect: str | UnsetType = UNSET
    task: str | UnsetType = UNSET
    turn_state: RecordedTurn | UnsetType = UNSET
    phase: str | UnsetType = UNSET
    command: str | UnsetType = UNSET
    idempotent: bool | UnsetType = UNSET
    recorded_amount: int | UnsetType | None = UNSET
    event: Event | UnsetType = UNSET
    journal_password: str | UnsetType = UNSET
    agent: str
    turn: str
    amount: int


class TurnWritebackReplay(SettlementWrite, kw_only=True):
    """A writeback repeated with the same amount: the turn as recorded, and its spend
    command while still owed."""

    effect: str
    task: str
    turn_state: RecordedTurn
    phase: str
    idempotent: bool
    command: str | UnsetType = UNSET
    journal_password: str | UnsetType = UNSET
    agent: str
    turn: str
    amount: int


TurnWritebackAnswer = TurnWriteback | TurnWritebackReplay


class TurnSpendAnswer(SettlementWrite, kw_only=True):
    """The owed turn and the named one, then the balance the spend moved (or, for a
    replay, the spend's seq)."""

    owed: RecordedTurn | UnsetType = UNSET
    turn_state: RecordedTurn | UnsetType = UNSET
    idempotent: bool | UnsetType = UNSET
    spend_seq: int | UnsetType | None = UNSET
    spent_before: int | UnsetType = UNSET
    spent_after: int | UnsetType = UNSET
    event: Event | UnsetType = UNSET
    journal_password: str | UnsetType = UNSET
    agent: str
    turn: str
    effect: str
    amount: int


# -- readers' answers ---------------------------------------------------------------------


class TurnResume(Answer, kw_only=True):
    """The agent's latest turn is open (next_step, turn, task, effect), settled
    (effective_action, turn, task, effect, amount, spent_at, spend_seq), or there is
    none (phase idle alone)."""

    ok: bool
    goal: str
    agent: str
    phase: str
    next_step: str | UnsetType = UNSET
    effective_action: str | UnsetType = UNSET
    turn: str | UnsetType = UNSET
    task: str | UnsetType = UNSET
    effect: str | UnsetType = UNSET
    amount: int | UnsetType = UNSET
    spent_at: str | UnsetType | None = UNSET
    spend_seq: int | UnsetType | None = UNSET


class TurnResumeOwed(Answer, kw_only=True):
    """The agent's latest turn owes its spend: the exact command to run once."""

    ok: bool
    goal: str
    agent: str
    phase: str
    command: str
    argv: list[str]
    effect: str
    amount: int
    turn: str
    task: str
    journal_password: str | UnsetType = UNSET


TurnResumeAnswer = TurnResume | TurnResumeOwed


class AgentStatus(Struct, kw_only=True):
    """One agent in `turn status`: what `turn resume` says of it, then its turns."""

    phase: str
    next_step: str | UnsetType = UNSET
    effective_action: str | UnsetType = UNSET
    turn: str | UnsetType = UNSET
    task: str | UnsetType = UNSET
    effect: str | UnsetType = UNSET
    amount: int | UnsetType = UNSET
    spent_at: str | UnsetType | None = UNSET
    spend_seq: int | UnsetType | None = UNSET
    turns: list[RecordedTurn]


class AgentStatusOwed(Struct, kw_only=True):
    phase: str
    command: str
    argv: list[str]
    effect: str
    amount: int
    turn: str
    task: str
    turns: list[RecordedTurn]


class TurnStatusAnswer(Answer, kw_only=True):
    ok: bool
    goal: str
    as_of: str
    budget: BudgetConfig | None
    window_spent_units: int | None
    throttled: bool
    reopens_at: str | None
    spent_total: int
    agents: dict[str, AgentStatus | AgentStatusOwed]
    journal_password: str | UnsetType = UNSET
