"""Settlement use cases (SPEC §5): budget, turn open/writeback/spend, resume, status.

Writers run one transaction each (lock -> catch up -> time -> pure decision in
`projections.settlement` -> append at most one event). Refusals append nothing.
Readers (`turn_resume`, `turn_status`) take no lock and answer from the fold alone,
as of `at` when given.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import canonical_at, format_us, parse_at, wall_us
from quotaledger.journal.target import follow_up_journal
from quotaledger.projections import settlement
from quotaledger.projections.settlement import Decision, SettlementState
from quotaledger.services.base import ServiceBase, check_identifier, check_tokens, event_json

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
    if not (math.isfinite(value) and 0 < value <= settlement.WINDOW_HOURS_MAX):
        raise InvalidInput(
            f"--window-hours must be a number > 0 and <= {settlement.WINDOW_HOURS_MAX}, "
            f"got {value}",
            code=codes.INVALID_WINDOW_HOURS,
            option="--window-hours",
        )
    return float(value)


class SettlementService(ServiceBase):
    # -- writers ----------------------------------------------------------------------

    def budget_configure(
        self, *, goal: str, allowed_units: int, window_hours: float, at: str | None = None
    ) -> dict[str, Any]:
        """Set the goal's rolling budget: `turn open` is throttled while the units spent
        in the last `window_hours` reach `allowed_units` (0 pauses new turns)."""
        check_identifier("--goal", goal)
        check_tokens("--allowed-units", allowed_units)
        window_hours = check_window_hours(window_hours)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.settlement
            decision = settlement.decide_budget(state, goal, allowed_units, window_hours)
            result = self._settlement_answer(txn, goal, event_at, decision)
        result["budget"] = {"allowed_units": allowed_units, "window_hours": window_hours}
        return result

    def turn_open(
        self, *, goal: str, agent: str, turn: str, task: str, at: str | None = None
    ) -> dict[str, Any]:
        """Open a turn of `agent` for `task`; refused while a spend is owed, a turn is
        in progress, or the goal's budget window is exhausted."""
        _check_ids(goal=goal, agent=agent, turn=turn, task=task)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.settlement
            decision = settlement.decide_open(state, goal, agent, turn, task, parse_at(event_at))
            result = self._settlement_answer(txn, goal, event_at, decision)
        return {**result, "agent": agent, "turn": turn, "task": task}

    def turn_writeback(
        self, *, goal: str, agent: str, turn: str, amount: int, at: str | None = None
    ) -> dict[str, Any]:
        """Record the verified writeback of an open turn: its spend becomes owed."""
        _check_ids(goal=goal, agent=agent, turn=turn)
        check_tokens("--amount", amount)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.settlement
            decision = settlement.decide_writeback(state, goal, agent, turn, amount)
            result = self._settlement_answer(txn, goal, event_at, decision)
        return {**result, "agent": agent, "turn": turn, "amount": amount}

    def turn_spend(
        self,
        *,
        goal: str,
        agent: str,
        turn: str,
        effect: str,
        amount: int,
        at: str | None = None,
    ) -> dict[str, Any]:
        """Spend the owed quota of a verified writeback, exactly once."""
        _check_ids(goal=goal, agent=agent, turn=turn)
        check_effect(effect)
        check_tokens("--amount", amount)
        with self.journal.transaction() as txn:
            event_at = txn.time_for(goal, at)
            state = txn.state.settlement
            decision = settlement.decide_spend(state, goal, agent, turn, effect, amount)
            result = self._settlement_answer(txn, goal, event_at, decision)
        return {**result, "agent": agent, "turn": turn, "effect": effect, "amount": amount}

    def _settlement_answer(
        self, txn: Any, goal: str, at: str, decision: Decision
    ) -> dict[str, Any]:
        """Append the decision's event (if any) and shape the JSON answer."""
        if not decision.ok:
            return self._naming_the_journal(
                {
                    "ok": False,
                    "reasons": list(decision.reasons),
                    "appended": False,
                    "goal": goal,
                    "at": at,
                    **decision.view,
                }
            )
        result: dict[str, Any] = {"ok": True, "appended": False, "goal": goal, "at": at}
        result.update(decision.view)
        if decision.kind is not None:
            pending = txn.append(decision.kind, goal, decision.payload, at)
            result["appended"] = True
            result["event"] = event_json(pending)
        return self._naming_the_journal(result)

    def _naming_the_journal(self, answer: dict[str, Any]) -> dict[str, Any]:
        """The follow-up commands in `answer` (the owed `turn spend`, as a line and as
        argv) with this journal's `--journal` (SPEC §8): pasted as printed, they must
        run against this journal, not the default one. The projection's line is a
        function of the fold alone; where it runs is the application's to say."""
        store = self.journal.store
        extra, password_removed = follow_up_journal(getattr(store, "url", store.target))
        if extra and _add_journal(answer, extra) and password_removed:
            answer["journal_password"] = PASSWORD_NOTE
        return answer

    # -- readers ----------------------------------------------------------------------

    def turn_resume(self, *, goal: str, agent: str, at: str | None = None) -> dict[str, Any]:
        """What re-entering `agent` must do next, from the fold alone (no lock):
        open -> writeback; spend_owed -> the exact spend command; settled -> skip."""
        _check_ids(goal=goal, agent=agent)
        state, _ = self._settlement_as_of(goal, at)
        view = settlement.resume_view(state, goal, agent)
        return self._naming_the_journal({"ok": True, "goal": goal, "agent": agent, **view})

    def turn_status(
        self, *, goal: str, agent: str | None = None, at: str | None = None
    ) -> dict[str, Any]:
        """The goal's budget window and every agent's turns (or one agent's)."""
        _check_ids(goal=goal, **({} if agent is None else {"agent": agent}))
        self.require_goal(goal)
        state, at_us = self._settlement_as_of(goal, at)
        book = state.goals.get(goal)
        figures = settlement.budget_view(book, at_us)
        agents: dict[str, Any] = {}
        for name, turns in sorted((book.agents if book is not None else {}).items()):
            if agent is not None and name != agent:
                continue
            agents[name] = {
                **settlement.resume_view(state, goal, name),
                "turns": [settlement.turn_view(goal, name, t) for t in turns.turns.values()],
            }
        if agent is not None and agent not in agents:
            agents[agent] = {"phase": settlement.IDLE, "turns": []}
        return self._naming_the_journal(
            {"ok": True, "goal": goal, "as_of": format_us(at_us), **figures, "agents": agents}
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
