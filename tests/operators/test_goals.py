"""`quotaledger goals` and `unknown_goal` (SPEC §7): a typo in a goal name must not
read as an empty, healthy goal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quotaledger import InvalidInput, Ledger
from tests.support import REPO, run_cli

T0 = "2026-11-29T14:00:00Z"
T1 = "2026-11-29T14:00:10Z"


def _empty(path: Path) -> str:
    """A journal holding its genesis record only."""
    genesis = (REPO / "fixtures" / "healthy.jsonl").read_bytes().split(b"\n", 1)[0]
    path.write_bytes(genesis + b"\n")
    return str(path)


def _history(journal: str) -> None:
    with Ledger.open(journal) as ledger:
        ledger.configure(goal="swe-bench", max_active_cases=2, quota_tpm=100_000, at=T0)
        ledger.observe(goal="swe-bench", uncached_input=1000, cached_input=0, output=0, at=T0)
        ledger.admit(goal="swe-bench", run="r1", arm="baseline", forecast_tpm=5000, at=T1)
        ledger.configure(goal="swe-lite", max_active_cases=1, at=T0)
        ledger.host_phase(goal="hosts", lane="l1", deadline="+1h", at=T0)
        ledger.budget_configure(goal="settle", allowed_units=100, window_hours=24, at=T0)


def test_goals_lists_every_goal_with_an_event(journal_path: str) -> None:
    _history(journal_path)
    with Ledger.open(journal_path, write=False) as ledger:
        listed = ledger.goals(at=T1)
    assert listed["ok"] is True
    goals = listed["goals"]
    assert list(goals) == ["hosts", "settle", "swe-bench", "swe-lite"]
    bench = goals["swe-bench"]
    assert bench["gates"] == {"cases": True, "tokens": True}
    assert bench["dimensions"] == ["tpm"]
    assert bench["active_runs"] == 1
    assert bench["last_event_at"] == "2026-11-29T14:00:10.000000Z"
    assert bench["admission_ready"] is True and bench["next_action"] == "backfill_to_target"
    assert bench["domains"] == ["capacity"]
    lite = goals["swe-lite"]
    assert lite["gates"] == {"cases": True, "tokens": False} and lite["dimensions"] == []
    assert goals["hosts"]["gates"] == {"cases": False, "tokens": False}
    assert goals["hosts"]["domains"] == ["host"]
    # A goal no capacity event names has nothing to configure (issue 41: `configure`
    # read as if its host or settlement work waited for a capacity configuration).
    assert goals["hosts"]["next_action"] is None
    assert goals["settle"]["domains"] == ["settlement"]
    assert goals["settle"]["next_action"] is None


def test_goals_as_text_is_a_summary_and_a_table(journal_path: str) -> None:
    _history(journal_path)
    text = run_cli("goals", "--journal", journal_path, "--at", T1)
    assert text.code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "4 goals"
    assert lines[1].split() == [
        "GOAL", "DOMAINS", "GATES", "DIMENSIONS", "ACTIVE", "LAST_EVENT", "READY", "NEXT_ACTION"
    ]  # fmt: skip
    assert lines[4].split() == [
        "swe-bench", "capacity", "cases,tokens", "tpm", "1", "2026-11-29T14:00:10.000000Z",
        "yes", "backfill_to_target",
    ]  # fmt: skip
    assert lines[2].split()[0] == "hosts" and lines[2].split()[-1] == "-"
    empty = _empty(Path(journal_path).with_name("empty.jsonl"))
    none = run_cli("goals", "--journal", empty)
    assert none.code == 0 and none.stdout == "no goals\n"


READERS = [
    ["inspect", "--goal", "swe-bnech"],
    ["metrics", "--goal", "swe-bnech"],
    ["whatif", "--goal", "swe-bnech", "--quota-tpm", "5"],
    ["audit", "--goal", "swe-bnech", "--run", "r1"],
    ["log", "--goal", "swe-bnech"],
    ["host", "status", "--goal", "swe-bnech"],
    ["turn", "status", "--goal", "swe-bnech"],
]


@pytest.mark.parametrize("args", READERS, ids=[" ".join(a[:2]) for a in READERS])
def test_a_goal_with_no_event_is_unknown_goal(args: list[str], journal_path: str) -> None:
    _history(journal_path)
    before = Path(journal_path).read_bytes()
    refused = run_cli(*args, "--journal", journal_path, "--json")
    assert refused.code == 2, refused.stdout + refused.stderr
    error = refused.json["error"]
    assert error["code"] == "unknown_goal", error
    assert error["goal"] == "swe-bnech"
    assert error["closest"][0] == "swe-bench"
    assert "swe-bench" in error["message"]
    text = run_cli(*args, "--journal", journal_path)
    assert text.code == 2 and "did you mean 'swe-bench'" in text.stderr, text.stderr
    assert "Traceback" not in text.stderr
    assert Path(journal_path).read_bytes() == before


def test_report_of_an_unknown_goal_writes_no_page(journal_path: str, tmp_path: Path) -> None:
    _history(journal_path)
    out = tmp_path / "report.html"
    refused = run_cli(
        "report", "--journal", journal_path, "--goal", "nope", "--out", str(out), "--json"
    )
    assert refused.code == 2 and refused.json["error"]["code"] == "unknown_goal"
    assert not out.exists() and os.listdir(tmp_path) == [Path(journal_path).name]


def test_without_a_close_match_the_known_goals_are_named(journal_path: str) -> None:
    _history(journal_path)
    refused = run_cli("inspect", "--journal", journal_path, "--goal", "zzzz", "--json")
    error = refused.json["error"]
    assert error["code"] == "unknown_goal" and error["closest"] == []
    assert "known goals: hosts, settle, swe-bench, swe-lite" in error["message"]
    empty = _empty(Path(journal_path).with_name("new.jsonl"))
    none = run_cli("inspect", "--journal", empty, "--goal", "g", "--json")
    assert none.code == 2 and "the journal has no goals yet" in none.json["error"]["message"]


def test_turn_resume_keeps_answering_idle_and_writers_create_goals(journal_path: str) -> None:
    _history(journal_path)
    idle = run_cli("turn", "resume", "--journal", journal_path, "--goal", "new", "--agent", "a")
    assert idle.code == 0 and "idle" in idle.stdout
    created = run_cli("configure", "--journal", journal_path, "--goal", "new", "--quota-tpm", "9")
    assert created.code == 0, created.stderr
    assert run_cli("inspect", "--journal", journal_path, "--goal", "new").code == 0


def test_a_long_lived_handle_sees_a_goal_created_after_it_opened(journal_path: str) -> None:
    _history(journal_path)
    with Ledger.open(journal_path, write=False) as reader:
        with pytest.raises(InvalidInput) as caught:
            reader.inspect(goal="later")
        assert caught.value.code == "unknown_goal"
        with Ledger.open(journal_path) as writer:
            writer.configure(goal="later", quota_tpm=10)
        assert "later" in reader.inspect(goal="later")["goals"]
        assert "later" in reader.goals()["goals"]
