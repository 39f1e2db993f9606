"""Settlement through the CLI (in-process): lifecycle, idempotency, every refusal code
appending nothing, the rolling budget window with explicit times, readers as of T."""

from __future__ import annotations

import pytest

from quotaledger.api import Ledger
from quotaledger.cli.main import app
from tests.settlement.settlement_helpers import (
    T0,
    Snapshot,
    assert_refused,
    budget_args,
    effect,
    events,
    minutes_after,
    open_args,
    run_printed,
    spend_args,
    spend_line,
    writeback_args,
)
from tests.support import run_cli

G, A = "goal-1", "agent-1"


def at(minutes: float) -> str:
    """T0 + minutes, as an explicit --at."""
    return minutes_after(T0, minutes)


@pytest.fixture
def owed(cli, journal_path):
    """Agent A's turn t1 (task k1) written back for 40 units, spend not yet made."""
    assert cli(*open_args(G, A, "t1", "k1", "--at", at(0))).code == 0
    result = cli(*writeback_args(G, A, "t1", 40, "--at", at(1)))
    assert result.code == 0, result.stdout
    return effect(G, A, "k1", "t1")


def test_full_lifecycle_resume_spend_once_and_replay(cli, journal_path) -> None:
    """open -> writeback -> resume hands back the exact spend line -> it spends once ->
    its replay is ok with appended false -> resume says settled_skip."""
    # Readers need an existing journal (a missing one is journal_not_found, exit 3).
    assert cli(*budget_args(G, 1000, 24)).code == 0
    assert cli("turn", "resume", "--goal", G, "--agent", A).json == {
        "ok": True,
        "goal": G,
        "agent": A,
        "phase": "idle",
    }
    opened = cli(*open_args(G, A, "t1", "k1"))
    assert opened.code == 0 and opened.json["appended"] is True
    assert opened.json["event"]["kind"] == "turn.opened"
    resumed = cli("turn", "resume", "--goal", G, "--agent", A).json
    assert (resumed["phase"], resumed["next_step"]) == ("open", "writeback")

    wb = cli(*writeback_args(G, A, "t1", 40))
    eff = effect(G, A, "k1", "t1")
    assert wb.code == 0 and wb.json["appended"] is True and wb.json["effect"] == eff
    resumed = cli("turn", "resume", "--goal", G, "--agent", A).json
    assert resumed["phase"] == "spend_owed"
    assert resumed["command"] == spend_line(G, A, "t1", eff, 40, journal=journal_path)
    assert (resumed["effect"], resumed["amount"]) == (eff, 40)

    spent = run_printed(resumed["command"], journal_path)
    assert spent.code == 0 and spent.json["appended"] is True
    assert spent.json["event"]["kind"] == "quota.spent"
    [record] = events(journal_path, "quota.spent")
    assert record["goal"] == G
    assert record["data"] == {
        "agent": A,
        "turn": "t1",
        "effect": eff,
        "amount": 40,
        "spent_before": 0,
        "spent_after": 40,
    }

    snap = Snapshot(journal_path)
    replay = run_printed(resumed["command"], journal_path)
    assert replay.code == 0 and replay.json["ok"] is True and replay.json["appended"] is False
    assert "event" not in replay.json
    snap.assert_unchanged()
    settled = cli("turn", "resume", "--goal", G, "--agent", A).json
    assert (settled["phase"], settled["effective_action"]) == ("settled", "settled_skip")
    assert cli("turn", "status", "--goal", G).json["spent_total"] == 40


def test_writeback_replay_same_amount_is_idempotent(cli, journal_path, owed) -> None:
    snap = Snapshot(journal_path)
    again = cli(*writeback_args(G, A, "t1", 40))
    assert again.code == 0 and again.json["appended"] is False and again.json["idempotent"]
    assert again.json["command"] == spend_line(G, A, "t1", owed, 40, journal=journal_path)
    snap.assert_unchanged()


def test_turn_open_replay_of_the_open_turn_is_idempotent(cli, journal_path) -> None:
    args = open_args(G, A, "t1", "k1")
    assert cli(*args).json["appended"] is True
    snap = Snapshot(journal_path)
    again = cli(*args)
    assert again.code == 0 and again.json["appended"] is False and again.json["idempotent"]
    snap.assert_unchanged()


def test_spend_refusals_append_nothing(cli, journal_path, owed) -> None:
    """Every foreign part of the identity is refused; so is a spend before writeback."""
    base = {"--goal": G, "--agent": A, "--turn": "t1", "--effect": owed, "--amount": "40"}
    foreign = {
        "--goal": "goal-2",
        "--agent": "agent-2",
        "--turn": "t9",
        "--effect": "f" * 32,
        "--amount": "41",
    }
    for option, value in foreign.items():
        args = [x for k, v in {**base, option: value}.items() for x in (k, v)]
        assert_refused(cli, journal_path, ["spend_identity_mismatch"], "turn", "spend", *args)
    # A turn the agent opened but did not write back yet.
    assert cli(*open_args(G, "agent-2", "t2", "k2")).code == 0
    e2 = effect(G, "agent-2", "k2", "t2")
    assert_refused(
        cli, journal_path, ["writeback_not_verified"], *spend_args(G, "agent-2", "t2", e2, 40)
    )
    assert_refused(
        cli,
        journal_path,
        ["writeback_not_verified", "spend_identity_mismatch"],
        *spend_args(G, "agent-2", "t2", owed, 40),
    )
    # None of that touched the owed spend.
    assert cli("turn", "resume", "--goal", G, "--agent", A).json["command"] == spend_line(
        G, A, "t1", owed, 40, journal=journal_path
    )


def test_open_and_writeback_refusals_append_nothing(cli, journal_path, owed) -> None:
    owed_line = spend_line(G, A, "t1", owed, 40, journal=journal_path)
    for turn, task in (("t2", "k2"), ("t1", "k1")):
        body = assert_refused(cli, journal_path, ["settlement_owed"], *open_args(G, A, turn, task))
        assert body["command"] == owed_line
    assert_refused(
        cli, journal_path, ["turn_exists_with_different_task"], *open_args(G, A, "t1", "k2")
    )
    assert_refused(
        cli, journal_path, ["writeback_amount_conflict"], *writeback_args(G, A, "t1", 41)
    )
    for goal, agent, turn in ((G, A, "t9"), (G, "agent-2", "t1"), ("goal-2", A, "t1")):
        assert_refused(cli, journal_path, ["turn_not_open"], *writeback_args(goal, agent, turn, 40))
    assert run_printed(owed_line, journal_path).code == 0
    assert_refused(cli, journal_path, ["turn_already_settled"], *open_args(G, A, "t1", "k1"))
    assert cli(*open_args(G, A, "t2", "k2")).json["appended"] is True
    assert_refused(cli, journal_path, ["turn_in_progress"], *open_args(G, A, "t3", "k3"))
    # A settled turn's writeback replay stays idempotent; a different amount does not.
    again = cli(*writeback_args(G, A, "t1", 40))
    assert again.code == 0 and again.json["appended"] is False
    assert_refused(
        cli, journal_path, ["writeback_amount_conflict"], *writeback_args(G, A, "t1", 39)
    )


def test_new_turn_for_another_task_is_never_selected_while_spend_owed(
    cli, journal_path, owed
) -> None:
    """Other agents go on; this agent's resume keeps returning the original spend."""
    line = spend_line(G, A, "t1", owed, 40, journal=journal_path)
    for turn, task in (("t2", "k2"), ("t3", "k3")):
        cli(*open_args(G, A, turn, task))
        assert cli("turn", "resume", "--goal", G, "--agent", A).json["command"] == line
    assert cli(*open_args(G, "agent-2", "t2", "k2")).json["appended"] is True
    assert cli("turn", "resume", "--goal", G, "--agent", A).json["command"] == line
    assert [e["data"]["agent"] for e in events(journal_path, "turn.opened")] == [A, "agent-2"]


def test_rolling_window_spends_leaving_it_reopen_turns(cli, journal_path) -> None:
    """Throttled while the window's spent units reach the allowance; spends leaving the
    window (explicit --at times) re-open turn open."""
    assert cli(*budget_args(G, 100, 1, "--at", at(0))).code == 0

    def settle(turn: str, units: int, minute: float) -> None:
        e = effect(G, A, "k", turn)
        for args in (
            open_args(G, A, turn, "k"),
            writeback_args(G, A, turn, units),
            spend_args(G, A, turn, e, units),
        ):
            result = cli(*args, "--at", at(minute))
            assert result.code == 0 and result.json["appended"], result.stdout

    settle("t1", 60, 1)
    settle("t2", 50, 2)  # 60 < 100 when t2 opened
    throttled = ["quota_throttled"]
    body = assert_refused(cli, journal_path, throttled, *open_args(G, A, "t3", "k", "--at", at(10)))
    figures = body["figures"]
    assert figures["window_spent_units"] == 110 and figures["throttled"] is True
    assert figures["reopens_at"] == at(61)
    # One microsecond before t1's spend leaves: still throttled.
    just_before = at(61 - 1 / 60_000_000)
    assert_refused(cli, journal_path, throttled, *open_args(G, A, "t3", "k", "--at", just_before))
    # Readers evaluate as of T.
    status = cli("turn", "status", "--goal", G, "--at", at(30)).json
    assert (status["window_spent_units"], status["throttled"]) == (110, True)
    assert cli("turn", "status", "--goal", G, "--at", at(61)).json["throttled"] is False
    assert cli("turn", "status", "--goal", G, "--at", at(1.5)).json["window_spent_units"] == 60
    opened = cli(*open_args(G, A, "t3", "k", "--at", at(61)))
    assert opened.code == 0 and opened.json["appended"] is True
    assert opened.json["figures"]["window_spent_units"] == 50


def test_budget_reconfigure_and_zero_allowance(cli, journal_path, owed) -> None:
    run_printed(spend_line(G, A, "t1", owed, 40, journal=journal_path), journal_path)
    assert cli(*budget_args(G, 0, 2)).json["appended"] is True
    snap = Snapshot(journal_path)
    again = cli(*budget_args(G, 0, 2))
    assert again.code == 0 and again.json["appended"] is False
    snap.assert_unchanged()
    body = assert_refused(cli, journal_path, ["quota_throttled"], *open_args(G, A, "t2", "k2"))
    assert body["figures"]["reopens_at"] is None
    assert cli(*budget_args(G, 41, 2)).json["appended"] is True
    assert cli(*open_args(G, A, "t2", "k2")).code == 0


def test_readers_as_of_time_show_each_phase(cli, journal_path, owed) -> None:
    run_printed(
        spend_line(G, A, "t1", owed, 40, journal=journal_path) + f" --at {at(2)}", journal_path
    )
    phases = {
        m: cli("turn", "resume", "--goal", G, "--agent", A, "--at", at(m)).json["phase"]
        for m in (-1, 0, 1, 2)
    }
    assert phases == {-1: "idle", 0: "open", 1: "spend_owed", 2: "settled"}
    status = cli("turn", "status", "--goal", G, "--agent", A, "--at", at(1)).json
    assert status["agents"][A]["phase"] == "spend_owed"
    assert status["agents"][A]["turns"][0]["effect"] == owed
    # An agent with no turn: turn resume answers idle, turn status refuses (SPEC §8).
    assert cli("turn", "resume", "--goal", G, "--agent", "nobody").json["phase"] == "idle"
    unknown = cli("turn", "status", "--goal", G, "--agent", "nobody")
    assert (unknown.code, unknown.json["error"]["code"]) == (2, "unknown_agent")


@pytest.mark.parametrize(
    "args",
    [
        budget_args(G, -1, 1),
        budget_args(G, 10**12 + 1, 1),
        budget_args(G, 1, 0),
        budget_args(G, 1, -2),
        budget_args(G, 1, "nan"),
        budget_args(G, 1, "inf"),
        budget_args(G, "x", 1),
        open_args("bad goal", A, "t", "k"),
        open_args(G, "a;rm", "t", "k"),
        open_args(G, A, "t" * 129, "k"),
        open_args(G, A, "t", ""),
        writeback_args(G, A, "t1", -1),
        spend_args(G, A, "t1", "F" * 32, 40),
        spend_args(G, A, "t1", "abc", 40),
        spend_args(G, A, "t1", "0" * 32, "1e3"),
        open_args(G, A, "t9", "k", "--at", "yesterday"),
        open_args(G, A, "t9", "k", "--at", "2026-11-29T10:00:00"),
        ("turn", "resume", "--goal", G, "--agent", "a b"),
        ("turn", "status", "--goal", G, "--at", "soon"),
    ],
)
def test_invalid_input_exits_2_and_writes_nothing(cli, journal_path, owed, args) -> None:
    snap = Snapshot(journal_path)
    result = cli(*args)
    assert result.code == 2, result.stdout + result.stderr
    assert result.json["ok"] is False and "code" in result.json["error"]
    assert "Traceback" not in result.stderr
    snap.assert_unchanged()


def test_explicit_time_before_the_goals_last_event_is_time_regression(
    cli, journal_path, owed
) -> None:
    snap = Snapshot(journal_path)
    result = cli(*spend_args(G, A, "t1", owed, 40, "--at", at(0)))
    assert result.code == 2 and result.json["error"]["code"] == "time_regression"
    snap.assert_unchanged()


def test_identifiers_with_leading_dash_round_trip_through_the_printed_line(
    cli, journal_path
) -> None:
    """The charset lets an identifier start with '-': the printed line still parses."""
    agent, turn = "-agent:x@y/z", "-t.1_"
    cli(*open_args(G, agent, turn, "k"))
    cli(*writeback_args(G, agent, turn, 3))
    line = cli("turn", "resume", "--goal", G, "--agent", agent).json["command"]
    assert line == spend_line(G, agent, turn, effect(G, agent, "k", turn), 3, journal=journal_path)
    spent = run_printed(line, journal_path)
    assert spent.code == 0 and spent.json["appended"] is True, spent.stdout


def test_human_resume_prints_the_command_on_its_own_line(journal_path, owed) -> None:
    out = run_cli("turn", "resume", "--goal", G, "--agent", A, "--journal", journal_path)
    assert out.code == 0
    assert out.stdout.splitlines()[-1] == spend_line(G, A, "t1", owed, 40, journal=journal_path)


def test_python_api_matches_the_cli(journal_path, owed) -> None:
    with Ledger.open(journal_path) as ledger:
        resumed = ledger.turn_resume(goal=G, agent=A)
        assert resumed["command"] == spend_line(G, A, "t1", owed, 40, journal=journal_path)
        assert (
            ledger.turn_spend(goal=G, agent=A, turn="t1", effect=owed, amount=40)["appended"]
            is True
        )
        assert (
            ledger.turn_spend(goal=G, agent=A, turn="t1", effect=owed, amount=40)["appended"]
            is False
        )
        assert ledger.turn_resume(goal=G, agent=A)["phase"] == "settled"


def test_every_settlement_command_has_help_with_an_example() -> None:
    for group, names in (
        ("budget", ["configure"]),
        ("turn", ["open", "writeback", "resume", "spend", "status"]),
    ):
        for name in names:
            result = run_cli(group, name, "--help")
            assert result.code == 0 and "Example:" in result.stdout, (group, name)
            assert f"quotaledger {group} {name}" in result.stdout
    assert {g.name for g in app.registered_groups} >= {"budget", "turn"}
