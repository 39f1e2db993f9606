"""A pooled goal's queue is its pool's (SPEC §12.2): one queue for every member, by
priority then seq; an entry blocks other goals' only on a pool-wide reason; every
write on a member or on the pool (`pool configure`) promotes across members."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from quotaledger import Ledger
from quotaledger.projections import reasons as R
from quotaledger.render.prometheus import prometheus_text
from quotaledger.usecases.operator import MetricsAnswer
from tests.capacity.capacity_helpers import at
from tests.support import promtool_check


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger.open(str(tmp_path / "j.jsonl")) as opened:
        opened.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=at(0))
        yield opened


def _join(ledger: Any, goal: str, t: float = 0, **terms: Any) -> None:
    ledger.configure(goal=goal, pool="org", pool_share=0.5, at=at(t), **terms)


def _admit(ledger: Any, goal: str, run: str, t: float, tpm: int, **more: Any) -> dict[str, Any]:
    answer: dict[str, Any] = ledger.admit(
        goal=goal, run=run, forecast_tpm=tpm, lease_s=60, at=at(t), **more
    )
    return answer


def test_one_queue_per_pool_by_priority_then_seq(ledger: Any) -> None:
    _join(ledger, "a")
    _join(ledger, "b", priority=5)
    assert _admit(ledger, "a", "r1", 1, 1000)["admitted"]  # the pool is full
    a2 = _admit(ledger, "a", "r2", 2, 500, queue=True)
    assert a2["queued"] is True and R.POOL_HEADROOM_EXHAUSTED in a2["reasons"]
    b3 = _admit(ledger, "b", "r3", 3, 500, queue=True)
    # b waits at priority 5: ahead of a's earlier entry, in the one queue of the pool.
    assert (b3["position"], b3["ahead"]) == (1, [])
    queue = ledger.inspect(goal="a", at=at(4))["goals"]["a"]["queue"]
    assert [(e["goal"], e["run"], e["priority"], e["position"]) for e in queue] == [
        ("b", "r3", 5, 1),
        ("a", "r2", 0, 2),
    ]
    assert queue == ledger.inspect(goal="b", at=at(4))["goals"]["b"]["queue"]
    # a's release frees the pool: it promotes b's entry first, then its own.
    released = ledger.release(goal="a", run="r1", at=at(10))
    assert released["promoted"] == [{"goal": "b", "run": "r3"}, {"goal": "a", "run": "r2"}]
    admitted = [e for e in ledger.log(kind="capacity.admitted") if e["data"].get("queued")]
    assert [(e["goal"], e["at"]) for e in admitted] == [("b", at(10)), ("a", at(10))]
    assert ledger.verify(decisions=True)["decisions"]["not_reproduced"] == []


def test_an_entry_held_by_its_own_goal_blocks_no_other_goal(ledger: Any) -> None:
    _join(ledger, "a", max_active_cases=1)
    _join(ledger, "b")
    assert _admit(ledger, "a", "r1", 1, 100, arm="baseline")["admitted"]
    held = _admit(ledger, "a", "r2", 2, 100, arm="baseline", queue=True)
    assert held["queued"] is True and R.TARGET_CAPACITY_EXHAUSTED in held["reasons"]
    # a's entry waits for a's own slot, not the pool: b is not kept out of its share.
    assert _admit(ledger, "b", "r3", 3, 100)["admitted"]
    # Once the pool is full, a's entry fails a pool-wide reason too: then it blocks b.
    assert _admit(ledger, "b", "r4", 4, 800)["admitted"]  # load 1000: full
    b5 = _admit(ledger, "b", "r5", 5, 100, queue=True)
    assert b5["reasons"] == [R.POOL_HEADROOM_EXHAUSTED, R.QUEUE_AHEAD]
    # Nothing of the pool's holds r6 (it forecasts 0): only the entries ahead do.
    b6 = _admit(ledger, "b", "r6", 6, 0, queue=True)
    assert b6["queued"] is True and b6["reasons"] == [R.QUEUE_AHEAD]
    assert b6["ahead"] == [{"goal": "a", "run": "r2"}, {"goal": "b", "run": "r5"}]
    # a's own slot frees: its release admits r2, and in the same write nothing else
    # fits the full pool.
    assert ledger.release(goal="a", run="r1", at=at(7))["promoted"] == [{"goal": "a", "run": "r2"}]


def test_pool_configure_promotes_the_pools_queue(ledger: Any) -> None:
    _join(ledger, "a")
    _join(ledger, "b")
    assert _admit(ledger, "a", "r1", 1, 1000)["admitted"]
    assert _admit(ledger, "b", "r2", 2, 500, queue=True)["queued"] is True
    raised = ledger.pool_configure(pool="org", quota_tpm=2000, target_tpm=2000, at=at(3))
    assert raised["promoted"] == [{"goal": "b", "run": "r2"}]
    assert raised["event"]["kind"] == "pool.configured"
    assert ledger.pool_configure(pool="org", quota_tpm=2000, at=at(4)).get("promoted") is None


def test_joining_a_pool_moves_a_goals_entries_out(ledger: Any) -> None:
    ledger.configure(goal="a", max_active_cases=1, at=at(0))
    ledger.admit(goal="a", run="r1", arm="baseline", lease_s=60, at=at(1))
    queued = ledger.admit(goal="a", run="r2", arm="baseline", lease_s=60, queue=True, at=at(2))
    assert queued["queued"] is True
    _join(ledger, "a", 3)
    dequeued = [e["data"] for e in ledger.log(goal="a", kind="capacity.dequeued")]
    assert dequeued == [{"run": "r2", "reason": "moved"}]


def test_metrics_label_a_pools_queue_by_the_pool(ledger: Any) -> None:
    _join(ledger, "a")
    _join(ledger, "b")
    assert _admit(ledger, "a", "r1", 1, 1000)["admitted"]
    _admit(ledger, "a", "r2", 2, 500, queue=True)
    _admit(ledger, "b", "r3", 3, 500, queue=True)
    answer = ledger.metrics(at=at(5))
    promtool_check(prometheus_text(msgspec.convert(answer, MetricsAnswer)))
    lengths = answer["metrics"]["quotaledger_queue_length"]["samples"]
    assert lengths == [{"labels": {"queue": "org"}, "value": 2}]
    oldest = answer["metrics"]["quotaledger_queue_oldest_seconds"]["samples"]
    assert oldest == [{"labels": {"queue": "org"}, "value": 3.0}]  # a's, from 2


def test_inspect_pool_shows_the_pools_queue_as_its_members_see_it(ledger: Any) -> None:
    _join(ledger, "a")
    _join(ledger, "b", priority=5)
    assert _admit(ledger, "a", "r1", 1, 1000)["admitted"]
    _admit(ledger, "a", "r2", 2, 500, queue=True)
    _admit(ledger, "b", "r3", 3, 500, queue=True)
    pool = ledger.inspect(pool="org", at=at(4))["pools"]["org"]
    assert pool["queue"] == ledger.inspect(goal="a", at=at(4))["goals"]["a"]["queue"]
    assert [(e["goal"], e["run"]) for e in pool["queue"]] == [("b", "r3"), ("a", "r2")]
    assert pool["queue_length"] == 2
    assert "queue" not in ledger.pools(at=at(4))["pools"]["org"]  # `pools` gives the count


def test_an_entry_held_by_its_own_goal_still_blocks_on_a_pool_wide_reason(
    ledger: Any,
) -> None:
    # a's second entry waits behind a's first (a's own slot), and would not fit the
    # pool either: it fails a pool-wide reason, so it holds back b's entry behind it
    # (SPEC §12.2: a held entry is still an entry that does not fit).
    _join(ledger, "a", max_active_cases=1)
    _join(ledger, "b")
    assert _admit(ledger, "a", "a1", 1, 100, arm="baseline")["admitted"]
    assert _admit(ledger, "b", "b1", 1, 400)["admitted"]
    x = _admit(ledger, "a", "x", 2, 100, arm="baseline", queue=True)
    assert x["queued"] is True and R.POOL_HEADROOM_EXHAUSTED not in x["reasons"]
    y = _admit(ledger, "a", "y", 3, 1000, arm="baseline", queue=True)
    assert y["queued"] is True and R.POOL_HEADROOM_EXHAUSTED in y["reasons"]
    z = _admit(ledger, "b", "z", 4, 100, queue=True)
    assert z["queued"] is True and z["reasons"] == [R.QUEUE_AHEAD], z
    assert "promoted" not in z
    assert z["ahead"] == [{"goal": "a", "run": "x"}, {"goal": "a", "run": "y"}]
    # A write on the pool promotes nothing: z waits behind y.
    assert "promoted" not in ledger.observe(
        goal="b", uncached_input=0, cached_input=0, output=0, at=at(5)
    )
    assert ledger.verify(decisions=True)["decisions"]["not_reproduced"] == []
    # a's slot frees at a1's lease end: x starts; y still does not fit, z waits on.
    released = ledger.release(goal="a", run="a1", at=at(10))
    assert released["promoted"] == [{"goal": "a", "run": "x"}]
    assert ledger.admit(goal="a", run="y", cancel=True, at=at(11))["promoted"] == [
        {"goal": "b", "run": "z"}
    ]
    assert ledger.verify(decisions=True)["decisions"]["not_reproduced"] == []
