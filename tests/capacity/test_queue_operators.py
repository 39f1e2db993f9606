"""The queue as operators see it (SPEC §12.2): `inspect`'s queue and `next_action`
`wait_in_queue`, the queue's metrics (checked by promtool), `goals`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from quotaledger.api import Ledger
from quotaledger.journal.errors import Error
from quotaledger.projections import reasons as R
from quotaledger.render.prometheus import prometheus_text
from quotaledger.usecases.operator import MetricsAnswer
from tests.capacity.capacity_helpers import at
from tests.operators.operators_helpers import rewrite
from tests.support import promtool_check


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger.open(str(tmp_path / "j.jsonl")) as opened:
        yield opened


def _two_waiting(ledger: Any) -> None:
    """One slot, held by r1 until 60; r2 and r3 wait behind it from 1 and 2."""
    ledger.configure(goal="g", max_active_cases=1, at=at(0))
    ledger.admit(goal="g", run="r1", arm="baseline", lease_s=60, at=at(0))
    for run, t in (("r2", 1), ("r3", 2)):
        queued = ledger.admit(goal="g", run=run, arm="baseline", lease_s=30, queue=True, at=at(t))
        assert queued["queued"] is True


HELD = [
    R.TARGET_CAPACITY_EXHAUSTED,
    R.TOTAL_CAPACITY_EXHAUSTED,
    R.BASELINE_CAPACITY_EXHAUSTED,
    R.RESERVED_TEST_CAPACITY,
]
"""One slot taken: a baseline run's case reasons."""


def test_inspect_shows_the_queue_and_wait_in_queue(ledger: Any) -> None:
    _two_waiting(ledger)
    goal = ledger.inspect(goal="g", at=at(10))["goals"]["g"]
    assert goal["next_action"] == "wait_in_queue"
    assert goal["queue"] == [
        {
            "goal": "g",
            "run": "r2",
            "priority": 0,
            "position": 1,
            "queued_at": at(1),
            "expires_at": at(601),
            "estimated_start_at": at(60),
            "reasons": HELD,
        },
        {
            "goal": "g",
            "run": "r3",
            "priority": 0,
            "position": 2,
            "queued_at": at(2),
            "expires_at": at(602),
            "estimated_start_at": at(90),  # r2 admitted at 60 on a 30 s lease
            "reasons": [*HELD, R.QUEUE_AHEAD],
        },
    ]
    assert ledger.goals(at=at(10))["goals"]["g"]["next_action"] == "wait_in_queue"
    # Past the last expiry nothing waits: the queue is empty, no wait_in_queue.
    later = ledger.inspect(goal="g", at=at(700))["goals"]["g"]
    assert later["queue"] == [] and later["next_action"] != "wait_in_queue"


def test_a_goal_that_never_queued_shows_an_empty_queue(ledger: Any) -> None:
    ledger.configure(goal="g", max_active_cases=1, at=at(0))
    goal = ledger.inspect(goal="g", at=at(1))["goals"]["g"]
    assert goal["queue"] == [] and goal["next_action"] == "backfill_to_target"
    names = ledger.metrics(goal="g", at=at(1))["metrics"]["quotaledger_queue_length"]["samples"]
    assert names == []  # no queue ever: no series


def _samples(answer: dict[str, Any]) -> dict[tuple[str, tuple[tuple[str, str], ...]], Any]:
    return {
        (name + s.get("suffix", ""), tuple(sorted(s["labels"].items()))): s["value"]
        for name, family in answer["metrics"].items()
        for s in family["samples"]
    }


def test_metrics_count_the_queue_and_its_waits(ledger: Any) -> None:
    _two_waiting(ledger)
    # The lease ends at 60: a heartbeat there promotes r2 (it waited 59 s).
    beat = ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(60))
    assert beat["promoted"] == [{"goal": "g", "run": "r2"}]
    answer = ledger.metrics(goal="g", at=at(70))
    promtool_check(prometheus_text(msgspec.convert(answer, MetricsAnswer)))
    samples = _samples(answer)
    queue = (("queue", "g"),)
    assert samples[("quotaledger_queue_length", queue)] == 1  # r3
    assert samples[("quotaledger_queue_oldest_seconds", queue)] == 68.0  # r3, from 2
    assert samples[("quotaledger_queue_wait_seconds_count", queue)] == 1
    assert samples[("quotaledger_queue_wait_seconds_sum", queue)] == 59.0
    bucket = "quotaledger_queue_wait_seconds_bucket"
    assert samples[(bucket, (("le", "15"), ("queue", "g")))] == 0
    assert samples[(bucket, (("le", "60"), ("queue", "g")))] == 1
    assert samples[(bucket, (("le", "+Inf"), ("queue", "g")))] == 1
    text = prometheus_text(msgspec.convert(answer, MetricsAnswer))
    assert 'quotaledger_queue_wait_seconds_bucket{queue="g",le="+Inf"} 1' in text
    assert "# TYPE quotaledger_queue_wait_seconds histogram" in text


def test_verify_decisions_refuses_an_admission_out_of_queue_order(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    with Ledger.open(path) as ledger:
        _two_waiting(ledger)
        released = ledger.release(goal="g", run="r1", at=at(10))
        assert released["promoted"] == [{"goal": "g", "run": "r2"}]
        assert ledger.verify(decisions=True)["decisions"]["not_reproduced"] == []
        queued = {
            e["data"]["request"]["run"]: e for e in ledger.log(goal="g", kind="capacity.queued")
        }
    r3 = queued["r3"]

    def r3_first(event: dict[str, Any]) -> dict[str, Any] | None:
        """The promotion admits r3, which waits behind r2, instead of r2."""
        data = event["data"]
        if event["kind"] != "capacity.admitted" or "queued" not in data:
            return None
        data["request"]["run"] = data["receipt"]["run"] = "r3"
        data["queued"] = {"seq": r3["seq"], "at": r3["at"]}
        return event

    rewrite(path, r3_first)
    with Ledger.open(path) as ledger:
        assert ledger.verify()["ok"] is True  # well chained
        with pytest.raises(Error) as refused:
            ledger.verify(decisions=True)
    assert refused.value.code == "decision_not_reproduced"
    (found,) = refused.value.context["not_reproduced"]
    assert found["run"] == "r3" and found["kind"] == "capacity.admitted"


def test_audit_explains_a_wait_freed_by_a_release_and_one_freed_by_time(ledger: Any) -> None:
    _two_waiting(ledger)
    released = ledger.release(goal="g", run="r1", at=at(10))
    assert released["promoted"] == [{"goal": "g", "run": "r2"}]
    # r3's estimate was 90 (r2 admitted at its own 60); r2 started at 10, so r3 at 40.
    polled = ledger.admit(goal="g", run="r3", arm="baseline", lease_s=30, queue=True, at=at(40))
    assert polled["admitted"] is True
    events = {(e["kind"], e["data"].get("request", {}).get("run")): e for e in ledger.log(goal="g")}
    queued_r2 = ledger.audit(seq=events[("capacity.queued", "r2")]["seq"])
    assert queued_r2["ok"] is True and queued_r2["recorded"]["admitted"] is False
    wait = queued_r2["explanation"]["queue"]
    assert wait == {
        "queued_at": at(1),
        "position": 1,
        "estimated_start_at": at(60),
        "admitted_at": at(10),
        "waited_s": 9.0,
        "held_by": HELD,
        "freed_by": {"seq": released["event"]["seq"], "kind": "capacity.released"},
        "started_after_estimate_s": -50.0,
        "left": None,
        "decisions": [
            {
                "seq": events[("capacity.queued", "r2")]["seq"],
                "kind": "capacity.queued",
                "reproduced": True,
                "reasons": HELD,
                "differences": [],
            },
            {
                "seq": events[("capacity.admitted", "r2")]["seq"],
                "kind": "capacity.admitted",
                "reproduced": True,
                "reasons": [],
                "differences": [],
            },
        ],
    }
    # The promotion's audit tells the same wait; r3's was freed by time (a poll).
    promoted_r2 = ledger.audit(seq=events[("capacity.admitted", "r2")]["seq"])
    assert promoted_r2["ok"] is True and promoted_r2["explanation"]["queue"] == wait
    r3 = ledger.audit(seq=events[("capacity.admitted", "r3")]["seq"])["explanation"]["queue"]
    assert (r3["position"], r3["estimated_start_at"], r3["admitted_at"]) == (2, at(90), at(40))
    assert r3["freed_by"] is None and r3["started_after_estimate_s"] == -50.0
    assert r3["held_by"] == [*HELD, R.QUEUE_AHEAD]


def test_the_report_marks_waits(ledger: Any, tmp_path: Path) -> None:
    _two_waiting(ledger)
    ledger.release(goal="g", run="r1", at=at(10))
    out = tmp_path / "report.html"
    ledger.report(goal="g", out=str(out), since=at(0), until=at(20))
    page = out.read_text()
    assert page.count('<tr class="refusal queued"') == 2  # r2 and r3 were queued
    assert '<tr class="admission promoted">' in page
    assert "waited 9 s in the queue" in page  # r2: queued at 1, promoted at 10
