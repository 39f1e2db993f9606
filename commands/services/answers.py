"""The public answer shapes (SPEC §8), typed so mypy catches a renamed public key.

An answer is the JSON object a writer returns and `--json` prints. Each TypedDict
lists its keys in the order the answer is built, which is the order they are printed
(that order is public too). A key every answer has but that is set after keys some
answers lack is `NotRequired` only where the build order demands it; mypy still
checks its name everywhere it is written.

Nested objects that stay `dict[str, Any]` (figures, receipts, usage) are msgspec
Structs turned into builtins: their keys are the Structs' fields, checked there.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

Number = int | float


class EventJson(TypedDict):
    """The event a writer appended."""

    seq: int
    hash: str
    kind: str
    at: str


# -- settlement (SPEC §5) -------------------------------------------------------------


class TurnJson(TypedDict):
    """A turn as recorded; `command` (the owed spend) only while its spend is owed."""

    turn: str
    task: str
    effect: str
    phase: str
    opened_at: str
    amount: int | None
    writeback_at: str | None
    spent_at: str | None
    command: NotRequired[str]


class BudgetConfigJson(TypedDict):
    allowed_units: int
    window_hours: float
    configured_at: str


class BudgetJson(TypedDict):
    """The goal's budget and where the rolling window stands."""

    budget: BudgetConfigJson | None
    window_spent_units: int | None
    throttled: bool
    reopens_at: str | None
    spent_total: int


class ResumeView(TypedDict):
    """What an agent's latest turn needs next. The keys after `phase` depend on it,
    each phase in its own order: open (next_step, turn, task, effect), spend_owed
    (command, argv, effect, amount, turn, task), settled (effective_action, turn,
    task, effect, amount, spent_at, spend_seq), idle (none)."""

    phase: str
    next_step: NotRequired[str]
    effective_action: NotRequired[str]
    command: NotRequired[str]
    argv: NotRequired[list[str]]
    turn: NotRequired[str]
    task: NotRequired[str]
    effect: NotRequired[str]
    amount: NotRequired[int]
    spent_at: NotRequired[str | None]
    spend_seq: NotRequired[int | None]


class AgentStatusJson(ResumeView):
    turns: list[TurnJson]


class BudgetView(TypedDict):
    idempotent: bool


class OpenView(TypedDict, total=False):
    """`turn open`: the blocking turn(s), the owed command, the window, or the turn."""

    turn_state: TurnJson
    owed: TurnJson
    in_progress: TurnJson
    command: str
    figures: BudgetJson
    phase: str
    effect: str | None
    idempotent: bool


class WritebackView(TypedDict, total=False):
    """`turn writeback`: effect, task, then phase, command, idempotent (appended) or
    turn_state, then recorded_amount (refused) or phase, idempotent, command (repeat)."""

    effect: str
    task: str
    phase: str
    command: str
    idempotent: bool
    turn_state: TurnJson
    recorded_amount: int | None


class SpendView(TypedDict, total=False):
    owed: TurnJson
    turn_state: TurnJson
    idempotent: bool
    spend_seq: int | None
    spent_before: int
    spent_after: int


SettlementView = BudgetView | OpenView | WritebackView | SpendView


class SettlementHead(TypedDict):
    """How every settlement writer's answer starts."""

    ok: bool
    reasons: NotRequired[list[str]]
    appended: bool
    goal: str
    at: str


class EventPart(TypedDict, total=False):
    event: EventJson


class JournalNote(TypedDict, total=False):
    """Present when the printed commands' `--journal` URL had its password removed."""

    journal_password: str


class BudgetAnswer(TypedDict):
    ok: bool
    reasons: NotRequired[list[str]]
    appended: bool
    goal: str
    at: str
    idempotent: bool
    event: NotRequired[EventJson]
    journal_password: NotRequired[str]
    budget: dict[str, Number]


class TurnOpenAnswer(TypedDict):
    ok: bool
    reasons: NotRequired[list[str]]
    appended: bool
    goal: str
    at: str
    turn_state: NotRequired[TurnJson]
    owed: NotRequired[TurnJson]
    in_progress: NotRequired[TurnJson]
    command: NotRequired[str]
    figures: NotRequired[BudgetJson]
    phase: NotRequired[str]
    effect: NotRequired[str | None]
    idempotent: NotRequired[bool]
    event: NotRequired[EventJson]
    journal_password: NotRequired[str]
    agent: str
    turn: str
    task: str


class TurnWritebackAnswer(TypedDict):
    ok: bool
    reasons: NotRequired[list[str]]
    appended: bool
    goal: str
    at: str
    effect: NotRequired[str]
    task: NotRequired[str]
    phase: NotRequired[str]
    command: NotRequired[str]
    idempotent: NotRequired[bool]
    turn_state: NotRequired[TurnJson]
    recorded_amount: NotRequired[int | None]
    event: NotRequired[EventJson]
    journal_password: NotRequired[str]
    agent: str
    turn: str
    amount: int


class TurnSpendAnswer(TypedDict):
    ok: bool
    reasons: NotRequired[list[str]]
    appended: bool
    goal: str
    at: str
    owed: NotRequired[TurnJson]
    turn_state: NotRequired[TurnJson]
    idempotent: NotRequired[bool]
    spend_seq: NotRequired[int | None]
    spent_before: NotRequired[int]
    spent_after: NotRequired[int]
    event: NotRequired[EventJson]
    journal_password: NotRequired[str]
    agent: str
    turn: str
    effect: str
    amount: int


class TurnResumeAnswer(ResumeView):
    """`ok`, `goal`, `agent` come first, then the resume view, then the note."""

    ok: bool
    goal: str
    agent: str
    journal_password: NotRequired[str]


class TurnStatusAnswer(TypedDict):
    ok: bool
    goal: str
    as_of: str
    budget: BudgetConfigJson | None
    window_spent_units: int | None
    throttled: bool
    reopens_at: str | None
    spent_total: int
    agents: dict[str, AgentStatusJson]
    journal_password: NotRequired[str]
