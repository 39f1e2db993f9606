"""Settlement use cases (SPEC §5): budget, turn open/writeback/spend, resume, status.

Writers run one transaction each (lock -> catch up -> time -> pure decision in
`projections.settlement` -> `conclude`: append at most one event). Refusals append
nothing. Readers (`turn_resume`, `turn_status`) take no lock and answer from the fold
alone, as of `at` when given. The JSON answers are built here, from the decisions'
typed detail: the projection holds no JSON.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import TYPE_CHECKING, Any

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import canonical_at, format_us, format_us_or_none, parse_at, wall_us
from quotaledger.journal.store import PendingRecord
from quotaledger.journal.target import follow_up_journal
from quotaledger.projections import limits, settlement
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
from quotaledger.services.base import (
    ServiceBase,
    check_identifier,
    check_tokens,
    conclude,
    event_part,
)

if TYPE_CHECKING:  # answer shapes are for mypy: building them costs each CLI call
    from quotaledger.services.answers import (
        AgentStatusJson,
        BudgetAnswer,
        BudgetJson,
        BudgetView,
        JournalNote,
        OpenView,
        ResumeView,
        SettlementHead,
        SettlementView,
        SpendView,
        TurnJson,
        TurnOpenAnswer,
        TurnResumeAnswer,
        TurnSpendAnswer,
        TurnStatusAnswer,
        TurnWritebackAnswer,
        WritebackView,
    )

_EFFECT = re.compile(r"^[0-9a-f]{32}$")


def check_effect(value: str) -> str:
    if not _EFFECT.match(value):
        raise InvalidInput(
            f"--effect {value!r} is not an effect id (32 lowercase hex digits, as printed by "
            "`turn writeback` and `turn resume`)",
            code=codes.INVALID_EFFECT,
            option="--effect",
        )
    return value


def check_window_hours(value: float) -> float:
    if not (math.isfinite(value) and 0 < value <= limits.WINDOW_HOURS_MAX):
        raise InvalidInput(
            f"--window-hours must be a number > 0 and <= {limits.WINDOW_HOURS_MAX}, got {value}",
            code=codes.INVALID_WINDOW_HOURS,
            option="--window-hours",
        )
    return float(value)


class SettlementService(ServiceBase):
    # -- writers ----------------------------------------------------------------------

    def budget_configure(
        self, *, goal: str, allowed_units: int, window_hours: float, at: str | None = None
    ) -> BudgetAnswer:
        """Set the goal's rolling budget: `turn open` is throttled while the units spent
        in the last `window_hours` reach `allowed_units` (0 pauses new turns)."""
        check_identifier("--goal", goal)
        check_tokens("--allowed-units", allowed_units)
        window_hours = check_window_hours(window_hours)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.settlement
            decision = settlement.decide_budget(state, goal, allowed_units, window_hours)
            view = budget_view(decision)
            pending = conclude(txn, goal, event_at, decision)
        note = self._journal_note(view)
        return {
            **_head(goal, event_at, decision, pending),
            **view,
            **event_part(pending),
            **note,
            "budget": {"allowed_units": allowed_units, "window_hours": window_hours},
        }

    def turn_open(
        self, *, goal: str, agent: str, turn: str, task: str, at: str | None = None
    ) -> TurnOpenAnswer:
        """Open a turn of `agent` for `task`; refused while a spend is owed, a turn is
        in progress, or the goal's budget window is exhausted."""
        _check_ids(goal=goal, agent=agent, turn=turn, task=task)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.settlement
            decision = settlement.decide_open(state, goal, agent, turn, task, parse_at(event_at))
            view = open_view(goal, agent, decision)
            pending = conclude(txn, goal, event_at, decision)
        note = self._journal_note(view)
        return {
            **_head(goal, event_at, decision, pending),
            **view,
            **event_part(pending),
            **note,
            "agent": agent,
            "turn": turn,
            "task": task,
        }

    def turn_writeback(
        self, *, goal: str, agent: str, turn: str, amount: int, at: str | None = None
    ) -> TurnWritebackAnswer:
        """Record the verified writeback of an open turn: its spend becomes owed."""
        _check_ids(goal=goal, agent=agent, turn=turn)
        check_tokens("--amount", amount)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.settlement
            decision = settlement.decide_writeback(state, goal, agent, turn, amount)
            view = writeback_view(goal, agent, amount, decision)
            pending = conclude(txn, goal, event_at, decision)
        note = self._journal_note(view)
        return {
            **_head(goal, event_at, decision, pending),
            **view,
            **event_part(pending),
            **note,
            "agent": agent,
            "turn": turn,
            "amount": amount,
        }

    def turn_spend(
        self,
        *,
        goal: str,
        agent: str,
        turn: str,
        effect: str,
        amount: int,
        at: str | None = None,
    ) -> TurnSpendAnswer:
        """Spend the owed quota of a verified writeback, exactly once."""
        _check_ids(goal=goal, agent=agent, turn=turn)
        check_effect(effect)
        check_tokens("--amount", amount)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.settlement
            decision = settlement.decide_spend(state, goal, agent, turn, effect, amount)
            view = spend_view(goal, agent, decision)
            pending = conclude(txn, goal, event_at, decision)
        note = self._journal_note(view)
        return {
            **_head(goal, event_at, decision, pending),
            **view,
            **event_part(pending),
            **note,
            "agent": agent,
            "turn": turn,
            "effect": effect,
            "amount": amount,
        }

    def _journal_note(self, commands: object) -> JournalNote:
        """Give the follow-up commands in `commands` (the owed `turn spend`, as a line
        and as argv) this journal's `--journal` (SPEC §8): pasted as printed, they must
        run against this journal, not the default one. The projection's line is a
        function of the fold alone; where it runs is the application's to say. The
        note to print if the URL's password was removed."""
        store = self.journal.store
        extra, password_removed = follow_up_journal(getattr(store, "url", store.target))
        if extra and _add_journal(commands, extra) and password_removed:
            return {"journal_password": PASSWORD_NOTE}
        return {}

    # -- readers ----------------------------------------------------------------------

    def turn_resume(self, *, goal: str, agent: str, at: str | None = None) -> TurnResumeAnswer:
        """What re-entering `agent` must do next, from the fold alone (no lock):
        open -> writeback; spend_owed -> the exact spend command; settled -> skip."""
        _check_ids(goal=goal, agent=agent)
        state, _ = self._settlement_as_of(goal, at)
        view = resume_view(state, goal, agent)
        note = self._journal_note(view)
        return {"ok": True, "goal": goal, "agent": agent, **view, **note}

    def turn_status(
        self, *, goal: str, agent: str | None = None, at: str | None = None
    ) -> TurnStatusAnswer:
        """The goal's budget window and every agent's turns (or one agent's)."""
        _check_ids(goal=goal, **({} if agent is None else {"agent": agent}))
        self.require_goal(goal)
        state, at_us = self._settlement_as_of(goal, at)
        book = state.goals.get(goal)
        figures = budget_json(settlement.budget_figures(book, at_us))
        agents: dict[str, AgentStatusJson] = {}
        for name, turns in sorted((book.agents if book is not None else {}).items()):
            if agent is not None and name != agent:
                continue
            agents[name] = {
                **resume_view(state, goal, name),
                "turns": [turn_json(goal, name, t) for t in turns.turns.values()],
            }
        if agent is not None and agent not in agents:
            agents[agent] = {"phase": settlement.IDLE, "turns": []}
        note = self._journal_note(agents)
        return {
            "ok": True,
            "goal": goal,
            "as_of": format_us(at_us),
            **figures,
            "agents": agents,
            **note,
        }

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


def _head(
    goal: str, at: str, decision: Decision[Any], pending: PendingRecord | None
) -> SettlementHead:
    """How a settlement writer's answer starts: a refusal names its reasons."""
    if not decision.ok:
        return {
            "ok": False,
            "reasons": list(decision.reasons),
            "appended": False,
            "goal": goal,
            "at": at,
        }
    return {"ok": True, "appended": pending is not None, "goal": goal, "at": at}


# -- the JSON views -------------------------------------------------------------------


def turn_json(goal: str, agent: str, turn: Turn) -> TurnJson:
    view: TurnJson = {
        "turn": turn.turn,
        "task": turn.task,
        "effect": turn.effect,
        "phase": turn.phase,
        "opened_at": turn.opened_at,
        "amount": turn.amount,
        "writeback_at": turn.writeback_at,
        "spent_at": turn.spent_at,
    }
    if turn.phase == SPEND_OWED:
        assert turn.amount is not None  # a writeback always records the amount
        view["command"] = settlement.spend_command(goal, agent, turn.turn, turn.effect, turn.amount)
    return view


def resume_view(state: SettlementState, goal: str, agent: str) -> ResumeView:
    """`turn resume`: what the agent's latest turn needs next, from the fold alone."""
    book = state.goals.get(goal)
    turns = None if book is None else book.agents.get(agent)
    if turns is None or turns.latest is None:
        return {"phase": settlement.IDLE}
    turn = turns.turns[turns.latest]
    if turn.phase == OPEN:
        return {
            "phase": OPEN,
            "next_step": "writeback",
            "turn": turn.turn,
            "task": turn.task,
            "effect": turn.effect,
        }
    assert turn.amount is not None
    if turn.phase == SPEND_OWED:
        return {
            "phase": SPEND_OWED,
            "command": settlement.spend_command(goal, agent, turn.turn, turn.effect, turn.amount),
            "argv": settlement.spend_argv(goal, agent, turn.turn, turn.effect, turn.amount),
            "effect": turn.effect,
            "amount": turn.amount,
            "turn": turn.turn,
            "task": turn.task,
        }
    return {
        "phase": SETTLED,
        "effective_action": "settled_skip",
        "turn": turn.turn,
        "task": turn.task,
        "effect": turn.effect,
        "amount": turn.amount,
        "spent_at": turn.spent_at,
        "spend_seq": turn.spend_seq,
    }


def budget_json(figures: BudgetFigures) -> BudgetJson:
    """The goal's budget and where the rolling window stands."""
    budget = figures.budget
    return {
        "budget": None
        if budget is None
        else {
            "allowed_units": budget.allowed_units,
            "window_hours": budget.window_hours,
            "configured_at": budget.configured_at,
        },
        "window_spent_units": figures.window_spent_units,
        "throttled": figures.throttled,
        "reopens_at": format_us_or_none(figures.reopens_at_us),
        "spent_total": figures.spent_total,
    }


def budget_view(decision: Decision[None]) -> BudgetView:
    """`budget configure`: what the decision adds to the answer."""
    return {"idempotent": decision.idempotent}


def open_view(goal: str, agent: str, decision: TurnDecision) -> OpenView:
    """`turn open`: the turn that blocks a new one (with the owed spend command), the
    budget window, or the opened turn's phase and effect."""
    detail = decision.detail
    view: OpenView = {}
    if detail.turn is not None:
        view["turn_state"] = turn_json(goal, agent, detail.turn)
    if detail.owed is not None:
        view["owed"] = turn_json(goal, agent, detail.owed)
    if detail.in_progress is not None:
        view["in_progress"] = turn_json(goal, agent, detail.in_progress)
    if SETTLEMENT_OWED in decision.reasons:
        # What the runner must run first: the owed spend, alone at the top.
        view["command"] = (view.get("owed") or view["turn_state"])["command"]
    if detail.figures is not None:
        view["figures"] = budget_json(detail.figures)
    if decision.ok:
        view |= {"phase": OPEN, "effect": detail.effect, "idempotent": decision.idempotent}
    return view


def writeback_view(goal: str, agent: str, amount: int, decision: TurnDecision) -> WritebackView:
    """`turn writeback`: the turn's identity, then the owed spend command (or, for a
    repeat, the turn as recorded)."""
    turn = decision.detail.turn
    if turn is None:
        return {}
    view: WritebackView = {"effect": turn.effect, "task": turn.task}
    if decision.kind is not None:
        command = settlement.spend_command(goal, agent, turn.turn, turn.effect, amount)
        return view | {"phase": SPEND_OWED, "command": command, "idempotent": False}
    view["turn_state"] = turn_json(goal, agent, turn)
    if not decision.ok:
        return view | {"recorded_amount": turn.amount}
    view |= {"phase": turn.phase, "idempotent": True}
    if turn.phase == SPEND_OWED:
        view["command"] = view["turn_state"]["command"]
    return view


def spend_view(goal: str, agent: str, decision: TurnDecision) -> SpendView:
    """`turn spend`: the owed turn and the named one, then the balance it moved."""
    detail = decision.detail
    view: SpendView = {}
    if detail.owed is not None:
        view["owed"] = turn_json(goal, agent, detail.owed)
    if detail.turn is None:
        return view
    view["turn_state"] = turn_json(goal, agent, detail.turn)
    if not decision.ok:
        return view
    if decision.idempotent:
        return view | {"idempotent": True, "spend_seq": detail.turn.spend_seq}
    assert isinstance(decision.payload, QuotaSpent)
    spent = decision.payload
    return view | {
        "idempotent": False,
        "spent_before": spent.spent_before,
        "spent_after": spent.spent_after,
    }


def decision_view(goal: str, payload: Any, decision: Decision[Any]) -> SettlementView:
    """The view a settlement decision adds to its command's answer, for the request a
    journaled event records (an audit shows it)."""
    if isinstance(payload, settlement.BudgetConfigured):
        return budget_view(decision)
    if isinstance(payload, settlement.TurnOpened):
        return open_view(goal, payload.agent, decision)
    if isinstance(payload, settlement.TurnWritebackVerified):
        return writeback_view(goal, payload.agent, payload.amount, decision)
    assert isinstance(payload, QuotaSpent)
    return spend_view(goal, payload.agent, decision)


PASSWORD_NOTE = (
    "removed from the command's --journal URL: it reads the password from PGPASSWORD "
    "(or ~/.pgpass), like any libpq client"
)


def _add_journal(value: Any, extra: list[str]) -> bool:
    """Append `extra` to every printed `quotaledger ...` command ("command": a line,
    "argv": its words) inside `value`; whether there was one."""
    found = False
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "command" and isinstance(item, str) and item.startswith("quotaledger "):
                value[key] = f"{item} {shlex.join(extra)}"
                found = True
            elif key == "argv" and isinstance(item, list) and item[:1] == ["quotaledger"]:
                value[key] = [*item, *extra]
                found = True
            else:
                found = _add_journal(item, extra) or found
    elif isinstance(value, list):
        for item in value:
            found = _add_journal(item, extra) or found
    return found


def _check_ids(**identifiers: str) -> None:
    for name, value in identifiers.items():
        check_identifier(f"--{name}", value)
