"""The queue of a goal (SPEC §12.2) as exact-time examples: lease-, window-, cooldown-
and release-bound waits, expiry, cancel, no jumping, refusals that do not queue, a
promotion that refuses, and what a queued run is told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput
from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import at


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger.open(str(tmp_path / "j.jsonl")) as opened:
        yield opened


def _one_slot(ledger: Any) -> None:
    """A goal with one case slot, held by r1 on a 60 s lease from t=0."""
    ledger.configure(goal="g", max_active_cases=1, at=at(0))
    assert ledger.admit(goal="g", run="r1", arm="baseline", lease_s=60, at=at(0))["admitted"]


def _queue(ledger: Any, run: str, t: float, **more: Any) -> dict[str, Any]:
    params = {"arm": "baseline", "lease_s": 60, **more}
    answer: dict[str, Any] = ledger.admit(goal="g", run=run, queue=True, at=at(t), **params)
    return answer


def _kinds(ledger: Any) -> list[str]:
    return [e["kind"] for e in ledger.log(goal="g")]


def test_a_lease_bound_wait_is_estimated_at_the_lease_end_and_admitted_there(
    ledger: Any,
) -> None:
    _one_slot(ledger)
    queued = _queue(ledger, "r2", 1)
    assert queued["ok"] is False and queued["queued"] is True and queued["admitted"] is False
    assert queued["appended"] is True and queued["event"]["kind"] == "capacity.queued"
    assert queued["position"] == 1 and queued["ahead"] == []
    assert queued["queued_at"] == at(1)
    assert queued["expires_at"] == at(601)  # the default ttl: 600 s
    assert queued["estimated_start_at"] == at(60)
    assert R.TARGET_CAPACITY_EXHAUSTED in queued["reasons"]
    assert "figures" in queued
    # A poll before the estimate appends nothing and says the same.
    poll = _queue(ledger, "r2", 59)
    assert poll["appended"] is False and poll["queued"] is True
    assert poll["estimated_start_at"] == at(60)
    # At the estimate the poll promotes it: the receipt, idempotent (the poll appended
    # nothing of its own), and the admission names its queue entry.
    admitted = _queue(ledger, "r2", 60)
    assert admitted["ok"] is True and admitted["admitted"] is True
    assert admitted["idempotent"] is True and admitted["appended"] is False
    assert admitted["promoted"] == [{"goal": "g", "run": "r2"}]
    record = [e for e in ledger.log(goal="g") if e["kind"] == "capacity.admitted"][-1]
    assert record["seq"] == admitted["receipt"]["seq"]
    assert record["data"]["queued"] == {"seq": queued["event"]["seq"], "at": at(1)}
    # Asked again once admitted: the original receipt, nothing appended.
    again = _queue(ledger, "r2", 61)
    assert again["admitted"] is True and again["idempotent"] is True
    assert again["receipt"]["seq"] == record["seq"]


def test_a_window_bound_wait_ends_when_the_sample_leaves_the_window(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=1000, target_tpm=1000, at=at(0))
    ledger.observe(goal="g", uncached_input=900, cached_input=0, output=0, at=at(0))
    queued = ledger.admit(goal="g", run="r", forecast_tpm=200, lease_s=60, queue=True, at=at(1))
    assert queued["reasons"] == [R.TOKEN_HEADROOM_EXHAUSTED]
    assert queued["estimated_start_at"] == at(60)  # (t - 60 s, t]: out at exactly 60
    # The runner's heartbeat at 60 is a write on the goal: it promotes.
    observed = ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(60))
    assert observed["promoted"] == [{"goal": "g", "run": "r"}]
    assert _kinds(ledger)[-2:] == ["capacity.observed", "capacity.admitted"]


def test_a_cooldown_bound_wait_ends_with_the_cooldown(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=1000, at=at(0))
    ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(0))
    ledger.reject(goal="g", retry_after_s=30, at=at(0))
    queued = ledger.admit(goal="g", run="r", forecast_tpm=10, lease_s=60, queue=True, at=at(1))
    assert queued["reasons"] == [R.CAPACITY_COOLDOWN_ACTIVE]
    assert queued["estimated_start_at"] == at(30)
    assert ledger.admit(goal="g", run="r", forecast_tpm=10, lease_s=60, queue=True, at=at(30))[
        "admitted"
    ]


def test_a_staleness_only_wait_is_estimated_now(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=1000, at=at(0))
    queued = ledger.admit(goal="g", run="r", forecast_tpm=10, lease_s=60, queue=True, at=at(1))
    assert queued["reasons"] == [R.USAGE_OBSERVATION_STALE]
    assert queued["estimated_start_at"] == at(1)
    observed = ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(2))
    assert observed["promoted"] == [{"goal": "g", "run": "r"}]


def test_a_release_bound_wait_has_no_estimate_and_the_release_promotes(ledger: Any) -> None:
    ledger.configure(goal="g", max_active_cases=1, at=at(0))
    ledger.admit(goal="g", run="r1", arm="baseline", at=at(0))  # no lease: no end by time
    queued = _queue(ledger, "r2", 1)
    assert queued["estimated_start_at"] is None
    released = ledger.release(goal="g", run="r1", at=at(5))
    assert released["released"] is True and released["event"]["kind"] == "capacity.released"
    assert released["promoted"] == [{"goal": "g", "run": "r2"}]
    # The release's own event is the first of its transaction (a batch leads them).
    events = list(ledger.log(goal="g"))
    assert events[-2]["seq"] == released["event"]["seq"]
    assert events[-1]["kind"] == "capacity.admitted"


def test_entries_ahead_are_admitted_at_their_own_estimates(ledger: Any) -> None:
    _one_slot(ledger)
    _queue(ledger, "r2", 1)  # the slot from 60, for 60 s
    r3 = _queue(ledger, "r3", 2, lease_s=30)
    assert r3["position"] == 2 and r3["ahead"] == [{"goal": "g", "run": "r2"}]
    assert r3["reasons"][-1] == R.QUEUE_AHEAD
    assert r3["estimated_start_at"] == at(120)


def test_an_entry_expires_at_its_ttl_as_a_pure_function_of_time(ledger: Any) -> None:
    ledger.configure(goal="g", max_active_cases=1, at=at(0))
    ledger.admit(goal="g", run="r1", arm="baseline", at=at(0))
    queued = _queue(ledger, "r2", 1, queue_ttl_s=10)
    assert queued["expires_at"] == at(11)
    assert _queue(ledger, "r2", 10.999999)["appended"] is False  # still waiting
    released = ledger.release(goal="g", run="r1", at=at(11))
    assert "promoted" not in released  # expired at 11: never admitted
    assert ledger.admit(goal="g", run="r2", cancel=True, at=at(11))["cancelled"] is False


def test_an_estimate_at_or_after_the_expiry_is_null(ledger: Any) -> None:
    _one_slot(ledger)
    assert _queue(ledger, "r2", 1, queue_ttl_s=59)["estimated_start_at"] is None  # 60 >= 60


def test_cancel_takes_the_entry_out_and_lets_the_next_in(ledger: Any) -> None:
    _one_slot(ledger)
    _queue(ledger, "r2", 1)
    _queue(ledger, "r3", 2)
    cancelled = ledger.admit(goal="g", run="r2", cancel=True, at=at(3))
    assert cancelled["ok"] is True and cancelled["cancelled"] is True
    assert cancelled["appended"] is True and cancelled["event"]["kind"] == "capacity.dequeued"
    event = list(ledger.log(goal="g"))[-1]
    assert event["data"] == {"run": "r2", "reason": "cancelled"}
    again = ledger.admit(goal="g", run="r2", cancel=True, at=at(4))
    assert again["ok"] is True and again["cancelled"] is False
    assert again["reason"] == R.RUN_NOT_QUEUED and again["appended"] is False
    r3 = _queue(ledger, "r3", 4)
    assert r3["position"] == 1 and r3["estimated_start_at"] == at(60)


def test_release_of_a_queued_run_dequeues_it(ledger: Any) -> None:
    _one_slot(ledger)
    _queue(ledger, "r2", 1)
    released = ledger.release(goal="g", run="r2", at=at(2))
    assert released["ok"] is True and released["released"] is False
    assert released["dequeued"] is True and released["appended"] is True
    assert list(ledger.log(goal="g"))[-1]["data"] == {"run": "r2", "reason": "released"}
    assert ledger.release(goal="g", run="r2", at=at(3))["reasons"] == [R.RUN_NOT_ACTIVE]


def test_no_jumping_the_queue(ledger: Any) -> None:
    _one_slot(ledger)
    _queue(ledger, "r2", 1)
    # At 60 the slot is free, but r2 waits for it: a new run is refused queue_ahead
    # (last, and alone here), and the same transaction promotes r2.
    jumper = ledger.admit(goal="g", run="r3", arm="baseline", lease_s=60, at=at(60))
    assert jumper["ok"] is False and jumper["reasons"] == [R.QUEUE_AHEAD]
    assert jumper["event"]["kind"] == "capacity.refused"
    assert jumper["promoted"] == [{"goal": "g", "run": "r2"}]
    # A dry run says the same and appends nothing.
    _queue(ledger, "r4", 61)
    dry = ledger.admit(goal="g", run="r5", arm="baseline", dry_run=True, at=at(62))
    assert dry["reasons"][-1] == R.QUEUE_AHEAD and dry["appended"] is False


def test_a_refusal_that_time_cannot_cure_is_not_queued(ledger: Any) -> None:
    ledger.configure(goal="g", max_active_cases=1, at=at(0))
    refused = ledger.admit(goal="g", run="r", lease_s=60, queue=True, at=at(1))  # no --arm
    assert refused["reasons"] == [R.CASE_ARM_REQUIRED]
    assert "queued" not in refused and refused["event"]["kind"] == "capacity.refused"


def test_a_queue_needs_a_lease_and_bad_options_write_nothing(ledger: Any) -> None:
    ledger.configure(goal="g", max_active_cases=1, at=at(0))
    before = _kinds(ledger)
    cases = [
        ({"queue": True}, "lease_required"),
        ({"wait_s": 5}, "lease_required"),
        ({"queue_ttl_s": 10, "lease_s": 60}, "invalid_option"),
        ({"queue": True, "lease_s": 60, "queue_ttl_s": 0}, "invalid_duration"),
        ({"queue": True, "lease_s": 60, "queue_ttl_s": 86_401}, "invalid_duration"),
        ({"queue": True, "lease_s": 60, "queue_ttl_s": 10, "wait_s": 20}, "invalid_option"),
        ({"cancel": True, "queue": True}, "invalid_option"),
    ]
    for params, code in cases:
        with pytest.raises(InvalidInput) as raised:
            ledger.admit(goal="g", run="r", arm="baseline", at=at(1), **params)
        assert raised.value.code == code, params
    assert _kinds(ledger) == before


def test_a_change_that_makes_an_entry_unqueueable_dequeues_it_as_refused(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=1000, target_tpm=1000, at=at(0))
    ledger.observe(goal="g", uncached_input=900, cached_input=0, output=0, at=at(0))
    ledger.admit(goal="g", run="r", forecast_tpm=200, lease_s=60, queue=True, at=at(1))
    configured = ledger.configure(goal="g", target_tpm=100, at=at(2))
    assert "promoted" not in configured
    event = list(ledger.log(goal="g"))[-1]
    assert event["kind"] == "capacity.dequeued"
    assert event["data"] == {
        "run": "r",
        "reason": "refused",
        "reasons": [R.FORECAST_EXCEEDS_TARGET, R.TOKEN_HEADROOM_EXHAUSTED],
    }
    assert _queue(ledger, "x", 3, arm=None, forecast_tpm=1)["position"] == 1


def test_a_poll_with_another_request_is_refused(ledger: Any) -> None:
    _one_slot(ledger)
    _queue(ledger, "r2", 1)
    other = _queue(ledger, "r2", 2, lease_s=30)
    assert other["reasons"] == [R.RUN_EXISTS_WITH_DIFFERENT_REQUEST]
    assert _queue(ledger, "r2", 3)["position"] == 1  # the entry stays


def test_validity_counts_the_wait(ledger: Any) -> None:
    _one_slot(ledger)
    _queue(ledger, "r2", 1)
    _queue(ledger, "r2", 60)
    rows = {row["run"]: row for row in ledger.validity(goal="g")["runs"]}
    assert rows["r2"]["queued_at"] == at(1)
    assert rows["r2"]["admitted_at"] == at(60)
    assert rows["r2"]["waited_s"] == 59


def test_verify_reproduces_queued_decisions_and_promotions(ledger: Any) -> None:
    _one_slot(ledger)
    _queue(ledger, "r2", 1)
    ledger.admit(goal="g", run="r3", arm="baseline", lease_s=60, at=at(60))
    assert ledger.verify(decisions=True)["decisions"]["not_reproduced"] == []


def test_two_entries_start_at_one_estimate_when_both_fit_then(ledger: Any) -> None:
    ledger.configure(goal="g", max_active_cases=2, at=at(0))
    ledger.admit(goal="g", run="a", arm="baseline", lease_s=30, at=at(0))
    ledger.admit(goal="g", run="b", arm="baseline", lease_s=30, at=at(0))
    assert _queue(ledger, "r1", 1)["estimated_start_at"] == at(30)
    # r2 waits behind r1: from r1's estimate, when both slots are free.
    assert _queue(ledger, "r2", 2)["estimated_start_at"] == at(30)
    observed = ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(30))
    assert observed["promoted"] == [{"goal": "g", "run": "r1"}, {"goal": "g", "run": "r2"}]
