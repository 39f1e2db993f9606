"""Issue 41: the demo's scripted session is dated in the past, never ahead of the
wall clock (it was stamped about 60 s ahead: right after it, `--at now` on its goals
was `time_regression`). Its journal-level events (the genesis, a price) are dated
with it, so a price set now is no regression either."""

from __future__ import annotations

from pathlib import Path

from quotaledger import Error, Ledger
from quotaledger.journal.clock import format_us, wall_us
from quotaledger.tools.demo import run_demo

ZERO = {"uncached_input": 0, "cached_input": 0, "output": 0}


def test_after_the_demo_a_write_at_now_succeeds_on_every_goal(tmp_path: Path) -> None:
    journal = str(tmp_path / "d.jsonl")
    run_demo(journal, lambda line: None)
    now = format_us(wall_us())
    with Ledger.open(journal) as ledger:
        events = list(ledger.log())
        assert max(event["at"] for event in events) <= now
        goals = ledger.goals()["goals"]
        assert len(goals) >= 5
        for goal, summary in goals.items():
            if "capacity" in summary["domains"]:
                assert ledger.observe(goal=goal, **ZERO, at=now)["appended"], goal
            else:
                with ledger.journal.transaction() as txn:
                    assert txn.time_for(goal, now) == now, goal
        assert ledger.price_set(model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, at=now)[
            "appended"
        ]


def test_a_journal_created_ahead_of_the_clock_is_time_in_future(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    with Ledger.open(str(journal)) as ledger:
        try:
            ledger.journal.create(at="2999-01-01T00:00:00Z")
        except Error as error:
            assert error.code == "time_in_future"
        else:
            raise AssertionError("a genesis dated in 2999 was written")
        assert journal.stat().st_size == 0
        ledger.journal.create(at="2026-01-01T00:00:00Z")
        assert next(iter(ledger.log()))["at"] == "2026-01-01T00:00:00.000000Z"
