"""The pure settlement fold and decisions (projections/settlement/), no I/O."""

from __future__ import annotations

import shlex

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaledger.journal import Record
from quotaledger.journal.clock import format_us, parse_at
from quotaledger.projections import reasons as R
from quotaledger.projections import settlement as s
from quotaledger.projections.ledger import PROJECTOR
from quotaledger.projections.limits import WINDOW_HOURS_MAX
from quotaledger.projections.types import IDENTIFIER_PATTERN, Payload
from quotaledger.services.settlement import FollowUp, resume_answer
from quotaledger.usecases.decode import builtins
from tests.settlement.settlement_helpers import effect, spend_line

HOUR_US = 3600 * 1_000_000


def resume_view(state: s.SettlementState, goal: str, agent: str) -> dict:
    """`turn resume`'s answer without its ok/goal/agent head, on the default journal."""
    answer = builtins(resume_answer(state, goal, agent, FollowUp([], False)))
    return {key: value for key, value in answer.items() if key not in ("ok", "goal", "agent")}


T0_US = parse_at("2026-11-29T10:00:00Z")


class Folder:
    """Feeds payloads through `settlement.apply` the way the journal would."""

    def __init__(self, goal: str = "g") -> None:
        self.goal = goal
        self.state = s.SettlementState()
        self.seq = 0

    def add(self, payload: Payload, at_us: int) -> None:
        self.seq += 1
        kind = {cls: k for k, cls in s.EVENTS.items()}[type(payload)]
        record = Record(
            1,
            self.seq,
            format_us(at_us),
            kind,
            self.goal,
            msgspec.Raw(msgspec.json.encode(payload)),
            "0" * 64,
            f"{self.seq:064x}",
        )
        s.apply(self.state, record, payload)

    def settle(self, agent: str, turn: str, task: str, amount: int, at_us: int) -> None:
        eff = s.effect_of(self.goal, agent, task, turn)
        self.add(s.TurnOpened(agent=agent, turn=turn, task=task), at_us)
        self.add(s.TurnWritebackVerified(agent=agent, turn=turn, effect=eff, amount=amount), at_us)
        book = self.state.goals[self.goal]
        self.add(
            s.QuotaSpent(
                agent=agent,
                turn=turn,
                effect=eff,
                amount=amount,
                spent_before=book.spent_total,
                spent_after=book.spent_total + amount,
            ),
            at_us,
        )


def test_effect_is_first_32_hex_of_sha256_of_nul_joined_identity() -> None:
    assert s.effect_of("g", "a", "k", "t") == effect("g", "a", "k", "t")
    assert len(s.effect_of("g", "a", "k", "t")) == 32
    # The NUL separators keep shifted boundaries apart.
    assert s.effect_of("g", "ab", "k", "t") != s.effect_of("g", "a", "bk", "t")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.from_regex(IDENTIFIER_PATTERN, fullmatch=True), min_size=3, max_size=3),
    st.integers(0, 10**12),
)
def test_spend_command_needs_no_quoting_and_round_trips(ids: list[str], amount: int) -> None:
    """Identifiers never contain shell metacharacters: the line is SPEC's exact form and a
    shell split gives back every value unchanged (leading dashes included)."""
    goal, agent, turn = ids
    eff = "0123456789abcdef0123456789abcdef"
    line = s.spend_command(goal, agent, turn, eff, amount)
    assert line == spend_line(goal, agent, turn, eff, amount)
    assert shlex.split(line) == s.spend_argv(goal, agent, turn, eff, amount)


def test_rolling_window_is_half_open_and_spends_leave_it() -> None:
    """A spend at s counts in the window at t while t - window < s <= t."""
    f = Folder()
    f.add(s.BudgetConfigured(allowed_units=100, window_hours=1.0), T0_US)
    f.settle("a", "t1", "k1", 60, T0_US + 60_000_000)
    f.settle("a", "t2", "k2", 50, T0_US + 120_000_000)
    book = f.state.goals["g"]
    assert s.window_spent_units(book, T0_US + 120_000_000) == 110
    assert s.window_spent_units(book, T0_US + 60_000_000 + HOUR_US - 1) == 110
    assert s.window_spent_units(book, T0_US + 60_000_000 + HOUR_US) == 50
    assert s.window_spent_units(book, T0_US + 120_000_000 + HOUR_US) == 0
    # Throttled at 110 >= 100 until the 60-unit spend leaves; then 50 < 100.
    assert s.reopens_at_us(book, T0_US + 600_000_000) == T0_US + 60_000_000 + HOUR_US
    assert s.reopens_at_us(book, T0_US + 60_000_000 + HOUR_US) is None


def test_reopens_after_enough_old_spends_leave() -> None:
    f = Folder()
    f.add(s.BudgetConfigured(allowed_units=100, window_hours=2.0), T0_US)
    for i, units in enumerate((40, 40, 40)):
        f.settle("a", f"t{i}", "k", units, T0_US + i * HOUR_US // 2)
    book = f.state.goals["g"]
    at = T0_US + HOUR_US + 1
    assert s.window_spent_units(book, at) == 120
    # Dropping the first spend (at T0) leaves 80 < 100: re-opens at T0 + 2h.
    assert s.reopens_at_us(book, at) == T0_US + 2 * HOUR_US


def test_zero_allowance_pauses_new_turns_for_good() -> None:
    f = Folder()
    f.add(s.BudgetConfigured(allowed_units=0, window_hours=1.0), T0_US)
    d = s.decide_open(f.state, "g", "a", "t1", "k", T0_US)
    assert d.reasons == (R.QUOTA_THROTTLED,)
    assert d.detail.figures is not None and d.detail.figures.reopens_at_us is None


def test_no_budget_never_throttles() -> None:
    f = Folder()
    f.settle("a", "t1", "k", 10**12, T0_US)
    assert s.decide_open(f.state, "g", "a", "t2", "k", T0_US).ok


def test_decisions_follow_the_turn_lifecycle() -> None:
    f = Folder()
    eff = s.effect_of("g", "a", "k1", "t1")
    assert s.decide_writeback(f.state, "g", "a", "t1", 5).reasons == (R.TURN_NOT_OPEN,)
    assert s.decide_spend(f.state, "g", "a", "t1", eff, 5).reasons == (R.SPEND_IDENTITY_MISMATCH,)
    f.add(s.TurnOpened(agent="a", turn="t1", task="k1"), T0_US)
    assert s.decide_open(f.state, "g", "a", "t2", "k2", T0_US).reasons == (R.TURN_IN_PROGRESS,)
    assert s.decide_open(f.state, "g", "a", "t1", "k1", T0_US).idempotent is True
    assert s.decide_open(f.state, "g", "a", "t1", "k9", T0_US).reasons == (
        R.TURN_EXISTS_WITH_DIFFERENT_TASK,
    )
    assert s.decide_spend(f.state, "g", "a", "t1", eff, 5).reasons == (R.WRITEBACK_NOT_VERIFIED,)
    assert resume_view(f.state, "g", "a") == {
        "phase": "open",
        "next_step": "writeback",
        "turn": "t1",
        "task": "k1",
        "effect": eff,
    }
    f.add(s.TurnWritebackVerified(agent="a", turn="t1", effect=eff, amount=5), T0_US)
    resume = resume_view(f.state, "g", "a")
    assert resume["phase"] == "spend_owed"
    assert resume["command"] == spend_line("g", "a", "t1", eff, 5)
    assert (resume["effect"], resume["amount"]) == (eff, 5)
    assert s.decide_writeback(f.state, "g", "a", "t1", 5).idempotent is True
    assert s.decide_writeback(f.state, "g", "a", "t1", 6).reasons == (R.WRITEBACK_AMOUNT_CONFLICT,)
    assert s.decide_open(f.state, "g", "a", "t2", "k2", T0_US).reasons == (R.SETTLEMENT_OWED,)
    assert s.decide_open(f.state, "g", "b", "t2", "k2", T0_US).ok  # other agents go on
    for wrong in (
        ("g2", "a", "t1", eff, 5),
        ("g", "b", "t1", eff, 5),
        ("g", "a", "t2", eff, 5),
        ("g", "a", "t1", "f" * 32, 5),
        ("g", "a", "t1", eff, 6),
    ):
        assert s.decide_spend(f.state, *wrong).reasons == (R.SPEND_IDENTITY_MISMATCH,), wrong
    spend = s.decide_spend(f.state, "g", "a", "t1", eff, 5)
    assert spend.kind == s.QUOTA_SPENT and isinstance(spend.payload, s.QuotaSpent)
    assert (spend.payload.spent_before, spend.payload.spent_after) == (0, 5)
    f.add(spend.payload, T0_US)
    replay = s.decide_spend(f.state, "g", "a", "t1", eff, 5)
    assert replay.ok and replay.idempotent and replay.kind is None
    assert resume_view(f.state, "g", "a")["effective_action"] == "settled_skip"
    assert s.decide_open(f.state, "g", "a", "t1", "k1", T0_US).reasons == (R.TURN_ALREADY_SETTLED,)
    assert resume_view(f.state, "g", "nobody") == {"phase": "idle"}


def test_state_round_trips_through_the_checkpoint_codec() -> None:
    f = Folder()
    f.add(s.BudgetConfigured(allowed_units=100, window_hours=1.5), T0_US)
    f.settle("a", "t1", "k1", 60, T0_US)
    f.add(s.TurnOpened(agent="a", turn="t2", task="k2"), T0_US)
    ledger = PROJECTOR.initial()
    ledger.settlement = f.state
    assert PROJECTOR.load(PROJECTOR.dump(ledger)).settlement == f.state


@pytest.mark.parametrize("hours", [0.0, -1.0, WINDOW_HOURS_MAX * 2])
def test_budget_payload_rejects_bad_windows(hours: float) -> None:
    data = msgspec.json.encode({"allowed_units": 1, "window_hours": hours})
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(data, type=s.BudgetConfigured)
