"""Settlement use cases (SPEC §5): budget, turn open/writeback/spend, resume, status.

Writers run one transaction each (lock -> catch up -> time -> pure decision in
`projections.settlement` -> `conclude`: append at most one event). Refusals append
nothing. Readers (`turn_resume`, `turn_status`) take no lock and answer from the fold
alone, as of `at` when given. The answers are built here, from the decisions' typed
detail: the projection holds no answer shapes.
"""

from __future__ import annotations

import shlex
from typing import Any, TypedDict

from msgspec import UNSET, UnsetType

from quotaledger.journal import codes
from quotaledger.journal.clock import canonical_at, format_us, format_us_or_none, parse_at, wall_us
from quotaledger.journal.target import follow_up_journal
from quotaledger.projections import settlement
from quotaledger.projections.decision import Decision
from quotaledger.projections.reasons import SETTLEMENT_OWED
from quotaledger.projections.settlement import (
    OPEN,
    SETTLED,
    SPEND_OWED,
    BudgetFigures,
    QuotaSpent,
    SettlementState,
    Turn,
    TurnDecision,
)
from quotaledger.services.base import ServiceBase, conclude, unknown_name
from quotaledger.services.pools import require_not_pool
from quotaledger.usecases.decode import Answer, builtins, event_or_unset
from quotaledger.usecases.settlement import (
    AgentStatus,
    AgentStatusOwed,
    Budget,
    BudgetConfig,
    BudgetConfigureAnswer,
    BudgetConfigureRequest,
    BudgetWindow,
    RecordedTurn,
    TurnOpenAnswer,
    TurnOpenRequest,
    TurnResume,
    TurnResumeAnswer,
    TurnResumeOwed,
    TurnResumeRequest,
    TurnSpendAnswer,
    TurnSpendRequest,
    TurnStatusAnswer,
    TurnStatusRequest,
    TurnWriteback,
    TurnWritebackAnswer,
    TurnWritebackReplay,
    TurnWritebackRequest,
)

PASSWORD_NOTE = (
    "removed from the command's --journal URL: it reads the password from PGPASSWORD "
    "(or ~/.pgpass), like any libpq client"
)


class FollowUp:
    """Where the `quotaledger turn spend ...` commands an answer prints for the user
    run (SPEC §8): pasted as printed, they must run against this journal, not the
    default one. The projection's line is a function of the fold alone; where it
    runs is the application's to say."""

    __slots__ = ("extra", "password_removed", "printed")

    def __init__(self, extra: list[str], password_removed: bool) -> None:
        self.extra = extra
        """This journal's `--journal` words (none for the default journal)."""
        self.password_removed = password_removed
        self.printed = False

    def line(self, goal: str, agent: str, turn: str, effect: str, amount: int) -> str:
        self.printed = True
        line = settlement.spend_command(goal, agent, turn, effect, amount)
        return f"{line} {shlex.join(self.extra)}" if self.extra else line

    def argv(self, goal: str, agent: str, turn: str, effect: str, amount: int) -> list[str]:
        self.printed = True
        return [*settlement.spend_argv(goal, agent, turn, effect, amount), *self.extra]

    def note(self) -> str | UnsetType:
        """The answer's `journal_password`: present when a printed command's URL had
        its password removed."""
        return PASSWORD_NOTE if self.printed and self.password_removed else UNSET


class SettlementService(ServiceBase):
    # -- writers ----------------------------------------------------------------------

    def budget_configure(self, request: BudgetConfigureRequest) -> BudgetConfigureAnswer:
        """Set the goal's rolling budget: `turn open` is throttled while the units spent
        in the last `window_hours` reach `allowed_units` (0 pauses new turns)."""
        goal = request.goal
        with self.journal.transaction() as txn:
            require_not_pool(txn.state, goal)  # one space of names (SPEC §12.1)
            at = txn.time_for(goal, request.at)
            state = txn.state.settlement
            decision = settlement.decide_budget(
                state, goal, request.allowed_units, request.window_hours
            )
            answer = budget_answer(request, at, decision)
            answer.event = event_or_unset(conclude(txn, goal, at, decision))
        return answer

    def turn_open(self, request: TurnOpenRequest) -> TurnOpenAnswer:
        """Open a turn of `agent` for `task`; refused while a spend is owed, a turn is
        in progress, or the goal's budget window is exhausted."""
        goal = request.goal
        with self.journal.transaction() as txn:
            require_not_pool(txn.state, goal)  # one space of names (SPEC §12.1)
            at = txn.time_for(goal, request.at)
            state = txn.state.settlement
            decision = settlement.decide_open(
                state, goal, request.agent, request.turn, request.task, parse_at(at)
            )
            # Before the append: its fold moves the decision's turns on.
            answer = open_answer(request, at, decision, self._follow_up())
            answer.event = event_or_unset(conclude(txn, goal, at, decision))
        return answer

    def turn_writeback(self, request: TurnWritebackRequest) -> TurnWritebackAnswer:
        """Record the verified writeback of an open turn: its spend becomes owed."""
        goal = request.goal
        with self.journal.transaction() as txn:
            at = txn.time_for(goal, request.at)
            state = txn.state.settlement
            decision = settlement.decide_writeback(
                state, goal, request.agent, request.turn, request.amount
            )
            answer = writeback_answer(request, at, decision, self._follow_up())
            pending = conclude(txn, goal, at, decision)
        if pending is not None:
            assert isinstance(answer, TurnWriteback)  # a replay appends nothing
            answer.event = event_or_unset(pending)
        return answer

    def turn_spend(self, request: TurnSpendRequest) -> TurnSpendAnswer:
        """Spend the owed quota of a verified writeback, exactly once."""
        goal = request.goal
        with self.journal.transaction() as txn:
            at = txn.time_for(goal, request.at)
            state = txn.state.settlement
            decision = settlement.decide_spend(
                state, goal, request.agent, request.turn, request.effect, request.amount
            )
            answer = spend_answer(request, at, decision, self._follow_up())
            answer.event = event_or_unset(conclude(txn, goal, at, decision))
        return answer

    def _follow_up(self) -> FollowUp:
        store = self.journal.store
        extra, password_removed = follow_up_journal(getattr(store, "url", store.target))
        return FollowUp(extra, password_removed)

    # -- readers ----------------------------------------------------------------------

    def turn_resume(self, request: TurnResumeRequest) -> TurnResumeAnswer:
        """What re-entering `agent` must do next, from the fold alone (no lock):
        open -> writeback; spend_owed -> the exact spend command; settled -> skip."""
        state, _ = self._settlement_as_of(request.goal, request.at)
        return resume_answer(state, request.goal, request.agent, self._follow_up())

    def turn_status(self, request: TurnStatusRequest) -> TurnStatusAnswer:
        """The goal's budget window and every agent's turns (or one agent's)."""
        goal, agent = request.goal, request.agent
        self.require_goal(goal)
        state, at_us = self._settlement_as_of(goal, request.at)
        book = state.goals.get(goal)
        window = budget_window(settlement.budget_figures(book, at_us))
        follow = self._follow_up()
        agents: dict[str, AgentStatus | AgentStatusOwed] = {}
        for name, turns in sorted((book.agents if book is not None else {}).items()):
            if agent is not None and name != agent:
                continue
            recorded = [recorded_turn(goal, name, turn, follow) for turn in turns.turns.values()]
            agents[name] = agent_status(resume_answer(state, goal, name, follow), recorded)
        if agent is not None and agent not in agents:
            # An agent with no turn in the goal refuses (SPEC §8): an idle row would read
            # as an agent between turns. `turn resume` answers such an agent `idle`.
            known = sorted(book.agents) if book is not None else []
            raise unknown_name("agent", agent, goal, known, code=codes.UNKNOWN_AGENT)
        return TurnStatusAnswer(
            ok=True,
            goal=goal,
            as_of=format_us(at_us),
            budget=window.budget,
            window_spent_units=window.window_spent_units,
            throttled=window.throttled,
            reopens_at=window.reopens_at,
            spent_total=window.spent_total,
            agents=agents,
            journal_password=follow.note(),
        )

    def _settlement_as_of(self, goal: str, at: str | None) -> tuple[SettlementState, int]:
        """The settlement state and the evaluation time (µs): as of `at`, else the time
        a writer would use now (never before the goal's last event, SPEC §2.2)."""
        if at is not None:
            at = canonical_at(at)
            return self._state_as_of(at=at).settlement, parse_at(at)
        # A long-lived API handle may lag behind other processes: catch up first.
        state = self.journal.refresh().settlement
        last = self.journal.head.goal_last_at.get(goal)
        now_us = wall_us()
        return state, now_us if last is None else max(now_us, parse_at(last))


# -- the answers ------------------------------------------------------------------------


class Head(TypedDict):
    """How a settlement writer's answer starts (`SettlementWrite`'s fields)."""

    ok: bool
    reasons: list[str] | UnsetType
    appended: bool
    goal: str
    at: str


def _head(goal: str, at: str, decision: Decision[Any]) -> Head:
    """A refusal names its reasons. The answer is made before the append, whose fold
    moves the decision's turns on; `event` is set after it (`conclude` appends when
    the decision names an event kind)."""
    reasons: list[str] | UnsetType = UNSET if decision.ok else list(decision.reasons)
    return {
        "ok": decision.ok,
        "reasons": reasons,
        "appended": decision.kind is not None,
        "goal": goal,
        "at": at,
    }


def recorded_turn(goal: str, agent: str, turn: Turn, follow: FollowUp) -> RecordedTurn:
    command: str | UnsetType = UNSET
    if turn.phase == SPEND_OWED:
        assert turn.amount is not None  # a writeback always records the amount
        command = follow.line(goal, agent, turn.turn, turn.effect, turn.amount)
    return RecordedTurn(
        turn=turn.turn,
        task=turn.task,
        effect=turn.effect,
        phase=turn.phase,
        opened_at=turn.opened_at,
        amount=turn.amount,
        writeback_at=turn.writeback_at,
        spent_at=turn.spent_at,
        command=command,
    )


def _recorded_or_unset(
    goal: str, agent: str, turn: Turn | None, follow: FollowUp
) -> RecordedTurn | UnsetType:
    return UNSET if turn is None else recorded_turn(goal, agent, turn, follow)


def budget_window(figures: BudgetFigures) -> BudgetWindow:
    """The goal's budget and where the rolling window stands."""
    budget = figures.budget
    return BudgetWindow(
        budget=None
        if budget is None
        else BudgetConfig(
            allowed_units=budget.allowed_units,
            window_hours=budget.window_hours,
            configured_at=budget.configured_at,
        ),
        window_spent_units=figures.window_spent_units,
        throttled=figures.throttled,
        reopens_at=format_us_or_none(figures.reopens_at_us),
        spent_total=figures.spent_total,
    )


def budget_answer(
    request: BudgetConfigureRequest,
    at: str,
    decision: Decision[None],
) -> BudgetConfigureAnswer:
    return BudgetConfigureAnswer(
        **_head(request.goal, at, decision),
        idempotent=decision.idempotent,
        budget=Budget(allowed_units=request.allowed_units, window_hours=request.window_hours),
    )


def open_answer(
    request: TurnOpenRequest,
    at: str,
    decision: TurnDecision,
    follow: FollowUp,
) -> TurnOpenAnswer:
    """The turn that blocks a new one (with the owed spend command), the budget
    window, or the opened turn's phase and effect."""
    goal, agent, detail = request.goal, request.agent, decision.detail
    turn_state = _recorded_or_unset(goal, agent, detail.turn, follow)
    owed = _recorded_or_unset(goal, agent, detail.owed, follow)
    command: str | UnsetType = UNSET
    if SETTLEMENT_OWED in decision.reasons:
        # What the runner must run first: the owed spend, alone at the top.
        blocking = owed if isinstance(owed, RecordedTurn) else turn_state
        assert isinstance(blocking, RecordedTurn)
        command = blocking.command
    went_ahead = decision.ok
    return TurnOpenAnswer(
        **_head(goal, at, decision),
        turn_state=turn_state,
        owed=owed,
        in_progress=_recorded_or_unset(goal, agent, detail.in_progress, follow),
        command=command,
        figures=UNSET if detail.figures is None else budget_window(detail.figures),
        phase=OPEN if went_ahead else UNSET,
        effect=detail.effect if went_ahead else UNSET,
        idempotent=decision.idempotent if went_ahead else UNSET,
        journal_password=follow.note(),
        agent=agent,
        turn=request.turn,
        task=request.task,
    )


def writeback_answer(
    request: TurnWritebackRequest,
    at: str,
    decision: TurnDecision,
    follow: FollowUp,
) -> TurnWritebackAnswer:
    """The turn's identity, then the owed spend command (or, for a repeat, the turn
    as recorded)."""
    goal, agent, turn = request.goal, request.agent, decision.detail.turn
    if turn is not None and decision.ok and decision.kind is None:
        recorded = recorded_turn(goal, agent, turn, follow)
        return TurnWritebackReplay(
            **_head(goal, at, decision),
            effect=turn.effect,
            task=turn.task,
            turn_state=recorded,
            phase=turn.phase,
            idempotent=True,
            command=recorded.command,
            journal_password=follow.note(),
            agent=agent,
            turn=request.turn,
            amount=request.amount,
        )
    effect: str | UnsetType = UNSET
    task: str | UnsetType = UNSET
    turn_state: RecordedTurn | UnsetType = UNSET
    phase: str | UnsetType = UNSET
    command: str | UnsetType = UNSET
    idempotent: bool | UnsetType = UNSET
    recorded_amount: int | UnsetType | None = UNSET
    if turn is not None:
        effect, task = turn.effect, turn.task
        if decision.kind is not None:
            phase, idempotent = SPEND_OWED, False
            command = follow.line(goal, agent, turn.turn, turn.effect, request.amount)
        else:
            turn_state, recorded_amount = recorded_turn(goal, agent, turn, follow), turn.amount
    return TurnWriteback(
        **_head(goal, at, decision),
        effect=effect,
        task=task,
        turn_state=turn_state,
        phase=phase,
        command=command,
        idempotent=idempotent,
        recorded_amount=recorded_amount,
        journal_password=follow.note(),
        agent=agent,
        turn=request.turn,
        amount=request.amount,
    )


def spend_answer(
    request: TurnSpendRequest,
    at: str,
    decision: TurnDecision,
    follow: FollowUp,
) -> TurnSpendAnswer:
    """The owed turn and the named one, then the balance it moved."""
    goal, agent, detail = request.goal, request.agent, decision.detail
    idempotent: bool | UnsetType = UNSET
    spend_seq: int | UnsetType | None = UNSET
    spent_before: int | UnsetType = UNSET
    spent_after: int | UnsetType = UNSET
    if detail.turn is not None and decision.ok:
        idempotent = decision.idempotent
        if decision.idempotent:
            spend_seq = detail.turn.spend_seq
        else:
            assert isinstance(decision.payload, QuotaSpent)
            spent_before = decision.payload.spent_before
            spent_after = decision.payload.spent_after
    return TurnSpendAnswer(
        **_head(goal, at, decision),
        owed=_recorded_or_unset(goal, agent, detail.owed, follow),
        turn_state=_recorded_or_unset(goal, agent, detail.turn, follow),
        idempotent=idempotent,
        spend_seq=spend_seq,
        spent_before=spent_before,
        spent_after=spent_after,
        journal_password=follow.note(),
        agent=agent,
        turn=request.turn,
        effect=request.effect,
        amount=request.amount,
    )


def resume_answer(
    state: SettlementState, goal: str, agent: str, follow: FollowUp
) -> TurnResumeAnswer:
    """`turn resume`: what the agent's latest turn needs next, from the fold alone."""
    book = state.goals.get(goal)
    turns = None if book is None else book.agents.get(agent)
    if turns is None or turns.latest is None:
        return TurnResume(ok=True, goal=goal, agent=agent, phase=settlement.IDLE)
    turn = turns.turns[turns.latest]
    if turn.phase == OPEN:
        return TurnResume(
            ok=True,
            goal=goal,
            agent=agent,
            phase=OPEN,
            next_step="writeback",
            turn=turn.turn,
            task=turn.task,
            effect=turn.effect,
        )
    assert turn.amount is not None
    if turn.phase == SPEND_OWED:
        return TurnResumeOwed(
            ok=True,
            goal=goal,
            agent=agent,
            phase=SPEND_OWED,
            command=follow.line(goal, agent, turn.turn, turn.effect, turn.amount),
            argv=follow.argv(goal, agent, turn.turn, turn.effect, turn.amount),
            effect=turn.effect,
            amount=turn.amount,
            turn=turn.turn,
            task=turn.task,
            journal_password=follow.note(),
        )
    return TurnResume(
        ok=True,
        goal=goal,
        agent=agent,
        phase=SETTLED,
        effective_action="settled_skip",
        turn=turn.turn,
        task=turn.task,
        effect=turn.effect,
        amount=turn.amount,
        spent_at=turn.spent_at,
        spend_seq=turn.spend_seq,
    )


def agent_status(
    resume: TurnResumeAnswer, turns: list[RecordedTurn]
) -> AgentStatus | AgentStatusOwed:
    """One agent in `turn status`: its resume answer's phase and keys, then its turns."""
    if isinstance(resume, TurnResumeOwed):
        return AgentStatusOwed(
            phase=resume.phase,
            command=resume.command,
            argv=resume.argv,
            effect=resume.effect,
            amount=resume.amount,
            turn=resume.turn,
            task=resume.task,
            turns=turns,
        )
    return AgentStatus(
        phase=resume.phase,
        next_step=resume.next_step,
        effective_action=resume.effective_action,
        turn=resume.turn,
        task=resume.task,
        effect=resume.effect,
        amount=resume.amount,
        spent_at=resume.spent_at,
        spend_seq=resume.spend_seq,
        turns=turns,
    )


# -- what an audit shows ------------------------------------------------------------------


def decision_view(goal: str, payload: Any, decision: Decision[Any]) -> dict[str, Any]:
    """What a settlement decision adds to its command's answer, for the request a
    journaled event records (an audit shows it): the answer's keys between its head
    (`at`) and its event. An audit prints no command to run: no `--journal` is added."""
    follow = FollowUp([], False)
    answer: Answer
    if isinstance(payload, settlement.BudgetConfigured):
        request = BudgetConfigureRequest(
            goal=goal, allowed_units=payload.allowed_units, window_hours=payload.window_hours
        )
        answer = budget_answer(request, "", decision)
    elif isinstance(payload, settlement.TurnOpened):
        opened = TurnOpenRequest(
            goal=goal, agent=payload.agent, turn=payload.turn, task=payload.task
        )
        answer = open_answer(opened, "", decision, follow)
    elif isinstance(payload, settlement.TurnWritebackVerified):
        written = TurnWritebackRequest(
            goal=goal, agent=payload.agent, turn=payload.turn, amount=payload.amount
        )
        answer = writeback_answer(written, "", decision, follow)
    else:
        assert isinstance(payload, QuotaSpent)
        spent = TurnSpendRequest(
            goal=goal,
            agent=payload.agent,
            turn=payload.turn,
            effect=payload.effect,
            amount=payload.amount,
        )
        answer = spend_answer(spent, "", decision, follow)
    fields = type(answer).__struct_fields__
    end = min(fields.index(key) for key in ("event", "journal_password") if key in fields)
    body = builtins(answer)
    return {key: body[key] for key in fields[fields.index("at") + 1 : end] if key in body}
