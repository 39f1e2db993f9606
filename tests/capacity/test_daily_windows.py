"""Daily windows (SPEC §12.3): tpd and rpd over the trailing day of whole seconds, a run's
reservation as what it may still spend, and the reasons after rpm."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import at

DAY = 86_400


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger.open(str(tmp_path / "j.jsonl")) as opened:
        yield opened


def _reasons(ledger: Any, t: float, **request: Any) -> list[str]:
    answer = ledger.admit(goal="g", dry_run=True, at=at(t), **{"run": "probe", **request})
    return answer.get("reasons", [])


def _tpd(ledger: Any, t: float) -> dict[str, Any]:
    dimension: dict[str, Any] = ledger.inspect(goal="g", at=at(t))["goals"]["g"]["dimensions"][
        "tpd"
    ]
    return dimension


def test_the_reservation_shrinks_as_the_run_observes(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpd=10_000, target_tpd=9_000, at=at(0))
    ledger.observe(goal="g", uncached_input=800, cached_input=0, output=200, at=at(1))
    admitted = ledger.admit(goal="g", run="r1", forecast_tokens=5_000, at=at(2))
    assert admitted["admitted"]
    assert admitted["receipt"]["dimensions"]["tpd"] == {
        "usage": 1_000,
        "reserved": 0,
        "provider_used": None,
        "load": 1_000,
        "target": 9_000,
        "headroom": 8_000,
        "forecast": 5_000,
    }
    tpd = _tpd(ledger, 3)
    assert (tpd["usage"], tpd["reserved"], tpd["load"]) == (1_000, 5_000, 6_000)
    # Observed with the run after its admission: its reservation shrinks by as much.
    ledger.observe(goal="g", run="r1", uncached_input=1_500, cached_input=0, output=500, at=at(4))
    tpd = _tpd(ledger, 5)
    assert (tpd["usage"], tpd["reserved"], tpd["load"]) == (3_000, 3_000, 6_000)
    # Beyond its forecast it reserves nothing more (never below zero).
    ledger.observe(goal="g", run="r1", uncached_input=4_000, cached_input=0, output=0, at=at(5))
    tpd = _tpd(ledger, 6)
    assert (tpd["usage"], tpd["reserved"], tpd["load"]) == (7_000, 0, 7_000)
    refused = ledger.admit(goal="g", run="r2", forecast_tokens=2_500, at=at(6))
    assert refused["reasons"] == ["tpd_headroom_exhausted"]
    assert refused["binding_dimension"] == "tpd"
    assert refused["figures"]["dimensions"]["tpd"]["headroom"] == 2_000


def test_a_run_observed_before_its_admission_reserves_its_whole_forecast(ledger: Any) -> None:
    ledger.configure(goal="g", quota_rpd=100, target_rpd=50, at=at(0))
    ledger.observe(
        goal="g", run="r1", uncached_input=5, cached_input=0, output=0, requests=3, at=at(1)
    )
    assert ledger.admit(goal="g", run="r1", forecast_requests=20, at=at(2))["admitted"]
    rpd = ledger.inspect(goal="g", at=at(2))["goals"]["g"]["dimensions"]["rpd"]
    assert (rpd["usage"], rpd["reserved"], rpd["load"]) == (3, 20, 23)
    ledger.observe(
        goal="g", run="r1", uncached_input=5, cached_input=0, output=0, requests=4, at=at(3)
    )
    rpd = ledger.inspect(goal="g", at=at(3))["goals"]["g"]["dimensions"]["rpd"]
    assert (rpd["usage"], rpd["reserved"], rpd["load"]) == (7, 16, 23)
    ledger.release(goal="g", run="r1", at=at(4))
    rpd = ledger.inspect(goal="g", at=at(4))["goals"]["g"]["dimensions"]["rpd"]
    assert (rpd["usage"], rpd["reserved"], rpd["load"]) == (7, 0, 7)


def test_a_sample_leaves_the_day_by_its_whole_second(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpd=10_000, target_tpd=9_000, at=at(0))
    ledger.observe(goal="g", uncached_input=2_000, cached_input=0, output=0, at=at(10.9))
    ledger.observe(goal="g", uncached_input=6_000, cached_input=0, output=0, at=at(20))
    assert _reasons(ledger, 30, forecast_tokens=2_000) == ["tpd_headroom_exhausted"]
    # At second 10 it counts while 10 > t - 86,400 s: until t = 86,410 s, not 86,410.9 s.
    assert _tpd(ledger, DAY + 10 - 0.000_001)["usage"] == 8_000
    assert _reasons(ledger, DAY + 10 - 0.000_001, forecast_tokens=2_000) != []
    assert _tpd(ledger, DAY + 10)["usage"] == 6_000
    assert _reasons(ledger, DAY + 10, forecast_tokens=2_000) == []
    assert _tpd(ledger, DAY + 20)["usage"] == 0


def test_a_forecast_over_the_target_or_missing(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpd=1_000, quota_rpd=10, at=at(0))
    assert _reasons(ledger, 1) == ["tpd_forecast_required", "rpd_forecast_required"]
    assert _reasons(ledger, 1, forecast_tokens=901, forecast_requests=10) == [
        "tpd_forecast_exceeds_target",
        "tpd_headroom_exhausted",
        "rpd_forecast_exceeds_target",
        "rpd_headroom_exhausted",
    ]
    assert _reasons(ledger, 1, forecast_tokens=900, forecast_requests=9) == []


def test_the_daily_reasons_come_after_rpm_and_the_evaluator_reserve_holds(ledger: Any) -> None:
    ledger.configure(
        goal="g",
        quota_rpm=10,
        target_rpm=2,
        quota_tpd=1_000,
        target_tpd=1_000,
        evaluator_reserve_tpd=300,
        at=at(0),
    )
    ledger.observe(goal="g", uncached_input=600, cached_input=0, output=0, at=at(1))
    assert _reasons(ledger, 2, forecast_rpm=3, forecast_tokens=200) == [
        "rpm_forecast_exceeds_target",
        "rpm_headroom_exhausted",
        "tpd_evaluator_reserve_protected",
    ]
    assert _reasons(ledger, 2, forecast_rpm=1, forecast_tokens=200, class_="evaluator") == []
    assert _reasons(ledger, 2, forecast_rpm=1, forecast_tokens=401, class_="evaluator") == [
        "tpd_headroom_exhausted"
    ]


def test_rpd_keeps_the_evaluator_reserve(ledger: Any) -> None:
    ledger.configure(goal="g", quota_rpd=100, target_rpd=100, evaluator_reserve_rpd=20, at=at(0))
    ledger.observe(goal="g", uncached_input=1, cached_input=0, output=0, requests=70, at=at(1))
    assert _reasons(ledger, 2, forecast_requests=11) == ["rpd_evaluator_reserve_protected"]
    assert _reasons(ledger, 2, forecast_requests=11, class_="evaluator") == []
    assert _reasons(ledger, 2, forecast_requests=31, class_="evaluator") == [
        "rpd_headroom_exhausted"
    ]


def test_a_gate_with_only_daily_dimensions_needs_no_observation_every_minute(
    ledger: Any,
) -> None:
    ledger.configure(goal="g", quota_tpd=1_000, at=at(0))
    assert _reasons(ledger, 1_000, forecast_tokens=10) == []
    goal = ledger.inspect(goal="g", at=at(1_000))["goals"]["g"]
    assert goal["admission_ready"] is True
    assert goal["next_action"] == "backfill_to_target"
    ledger.configure(goal="g", quota_tpm=1_000, at=at(1_001))
    assert _reasons(ledger, 1_002, forecast_tokens=10, forecast_tpm=10) == [
        R.USAGE_OBSERVATION_STALE
    ]


def test_the_day_is_counted_before_a_daily_limit_is_configured(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=100_000, cached_input_weight=0.5, at=at(0))
    ledger.observe(goal="g", uncached_input=100, cached_input=1_000, output=50, at=at(1))
    ledger.observe(goal="g", uncached_input=100, cached_input=0, output=0, requests=3, at=at(3_600))
    ledger.configure(goal="g", quota_tpd=5_000, quota_rpd=10, at=at(7_200))
    dims = ledger.inspect(goal="g", at=at(7_200))["goals"]["g"]["dimensions"]
    assert dims["tpd"]["usage"] == 750  # 100 + 1,000 x 0.5 + 50, then 100
    assert dims["rpd"]["usage"] == 4


def test_the_checkpoint_carries_the_day(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Ledger.open(str(path)) as ledger:
        ledger.configure(goal="g", quota_tpd=100_000, at=at(0))
        for second in range(1, 200):
            ledger.observe(
                goal="g", uncached_input=second, cached_input=0, output=0, at=at(second * 500)
            )
        ledger.admit(goal="g", run="r1", forecast_tokens=20_000, forecast_usd=1.5, at=at(99_600))
        ledger.observe(
            goal="g", run="r1", uncached_input=7, cached_input=0, output=0, at=at(99_601)
        )
        ledger.checkpoint()
        plain = tmp_path / "plain.jsonl"
        shutil.copyfile(path, plain)
        ledger.observe(
            goal="g", run="r1", uncached_input=11, cached_input=0, output=0, at=at(99_700)
        )
        with_checkpoint = ledger.inspect(goal="g", at=at(100_000))
    with Ledger.open(str(plain)) as fresh:
        fresh.observe(
            goal="g", run="r1", uncached_input=11, cached_input=0, output=0, at=at(99_700)
        )
        without = fresh.inspect(goal="g", at=at(100_000))
    assert with_checkpoint["goals"]["g"]["dimensions"] == without["goals"]["g"]["dimensions"]
    tpd = without["goals"]["g"]["dimensions"]["tpd"]
    # Seconds after 100,000 - 86,400 = 13,600: observations 28..199, then 7 and 11.
    assert tpd["usage"] == sum(range(28, 200)) + 7 + 11
    assert tpd["reserved"] == 20_000 - 18


def test_audit_finds_when_the_day_frees_room(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpd=10_000, target_tpd=9_000, at=at(0))
    ledger.observe(goal="g", uncached_input=5_000, cached_input=0, output=0, at=at(100.5))
    ledger.observe(goal="g", uncached_input=3_000, cached_input=0, output=0, at=at(200))
    refused = ledger.admit(goal="g", run="r", forecast_tokens=2_000, at=at(300))
    assert refused["reasons"] == ["tpd_headroom_exhausted"]
    audit = ledger.audit(goal="g", run="r")
    assert audit["reproduced"] is True
    assert audit["explanation"]["binding_dimension"] == "tpd"
    assert audit["explanation"]["shortfall"] == {"tpd": 1_000}
    # Second 100 leaves the day at 86,500 s: then 3,000 + 2,000 fit.
    assert audit["explanation"]["earliest_admissible_at"] == at(DAY + 100)
