"""The limits providers enforce (SPEC §3.6): tpm, itpm, otpm and rpm, and provider reports."""

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


def _reasons(ledger: Any, t: float, **request: Any) -> list[str]:
    answer = ledger.admit(goal="g", dry_run=True, at=at(t), **{"run": "probe", **request})
    return answer.get("reasons", [])


def test_rpm_refuses_while_tpm_has_headroom(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=100_000, quota_rpm=10, target_rpm=3, at=at(0))
    for t in (1, 2, 3):  # three requests in the window: rpm at its target
        ledger.observe(goal="g", uncached_input=100, cached_input=0, output=10, at=at(t))
    refused = ledger.admit(goal="g", run="r1", forecast_tpm=1_000, forecast_rpm=1, at=at(4))
    assert refused["reasons"] == ["rpm_headroom_exhausted"]
    assert refused["binding_dimension"] == "rpm"
    dims = refused["figures"]["dimensions"]
    assert dims["tpm"]["headroom"] > 80_000
    assert dims["rpm"] == {
        "usage": 3,
        "reserved": 0,
        "provider_used": None,
        "load": 3,
        "target": 3,
        "headroom": 0,
        "forecast": 1,
    }
    assert refused["figures"]["binding_dimension"] == "rpm"
    # 60 s after the first request it leaves the window: room for one more
    assert ledger.admit(goal="g", run="r1", forecast_tpm=1_000, forecast_rpm=1, at=at(61))[
        "admitted"
    ]


def test_requests_default_to_one_per_observation_with_tokens(ledger: Any) -> None:
    ledger.configure(goal="g", quota_rpm=100, at=at(0))
    ledger.observe(goal="g", uncached_input=5, cached_input=0, output=0, at=at(1))  # one request
    ledger.observe(
        goal="g", uncached_input=0, cached_input=0, output=0, at=at(2)
    )  # a zero-token heartbeat: none
    ledger.observe(
        goal="g", uncached_input=0, cached_input=0, output=1, requests=4, at=at(3)
    )  # as given
    ledger.observe(
        goal="g", uncached_input=0, cached_input=0, output=0, requests=2, at=at(4)
    )  # given, even without tokens
    rpm = ledger.inspect(goal="g", at=at(5))["goals"]["g"]["dimensions"]["rpm"]
    assert rpm["usage"] == 7


def test_itpm_and_otpm_usage(ledger: Any) -> None:
    ledger.configure(goal="g", quota_itpm=1_000, quota_otpm=500, cached_input_weight=0.5, at=at(0))
    ledger.observe(
        goal="g", uncached_input=100, cached_input=40, cache_write_input=30, output=7, at=at(1)
    )
    goal = ledger.inspect(goal="g", at=at(2))["goals"]["g"]
    assert goal["dimensions"]["itpm"]["usage"] == 150  # 100 + 30 + 40 x 0.5
    assert goal["dimensions"]["otpm"]["usage"] == 7
    assert goal["usage_tpm"] == 157 and "tpm" not in goal["dimensions"]
    assert goal["config"]["tokens"]["quota_tpm"] is None


def test_each_configured_dimension_needs_its_forecast(ledger: Any) -> None:
    ledger.configure(goal="g", quota_itpm=1_000, quota_otpm=1_000, quota_rpm=10, at=at(0))
    ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(1))
    assert _reasons(ledger, 2) == [
        "itpm_forecast_required",
        "otpm_forecast_required",
        "rpm_forecast_required",
    ]
    assert _reasons(ledger, 2, forecast_itpm=10, forecast_otpm=10, forecast_rpm=1) == []


def test_forecast_tpm_defaults_to_input_plus_output(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=1_000, target_tpm=100, at=at(0))
    ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(1))
    assert _reasons(ledger, 2, forecast_itpm=60) == [R.TOKEN_FORECAST_REQUIRED]
    assert _reasons(ledger, 2, forecast_itpm=60, forecast_otpm=50) == [
        R.FORECAST_EXCEEDS_TARGET,
        R.TOKEN_HEADROOM_EXHAUSTED,
    ]
    admitted = ledger.admit(goal="g", run="r", forecast_itpm=60, forecast_otpm=40, at=at(3))
    assert admitted["receipt"]["forecast_tpm"] == 100
    assert ledger.inspect(goal="g", at=at(4))["goals"]["g"]["reserved_tpm"] == 100


def test_reasons_of_every_dimension_in_the_documented_order(ledger: Any) -> None:
    ledger.configure(
        goal="g",
        quota_tpm=100,
        target_tpm=50,
        quota_itpm=100,
        target_itpm=50,
        evaluator_reserve_itpm=10,
        quota_otpm=100,
        target_otpm=50,
        quota_rpm=10,
        target_rpm=5,
        at=at(0),
    )
    ledger.reject(goal="g", retry_after_s=100, at=at(1))  # cooldown; never observed: stale
    reasons = _reasons(
        ledger, 2, forecast_tpm=60, forecast_itpm=45, forecast_otpm=60, forecast_rpm=6
    )
    assert reasons == [
        R.FORECAST_EXCEEDS_TARGET,
        R.CAPACITY_COOLDOWN_ACTIVE,
        R.USAGE_OBSERVATION_STALE,
        R.TOKEN_HEADROOM_EXHAUSTED,
        "itpm_evaluator_reserve_protected",
        "otpm_forecast_exceeds_target",
        "otpm_headroom_exhausted",
        "rpm_forecast_exceeds_target",
        "rpm_headroom_exhausted",
    ]
    # the gate-wide reasons keep their place without tpm
    ledger.configure(goal="g", remove_limit=["tpm"], at=at(3))
    assert _reasons(ledger, 4, forecast_itpm=1, forecast_otpm=1, forecast_rpm=1) == [
        R.CAPACITY_COOLDOWN_ACTIVE,
        R.USAGE_OBSERVATION_STALE,
    ]


def test_an_evaluator_may_use_the_reserve(ledger: Any) -> None:
    ledger.configure(goal="g", quota_otpm=100, target_otpm=100, evaluator_reserve_otpm=30, at=at(0))
    ledger.observe(goal="g", uncached_input=0, cached_input=0, output=50, at=at(1))
    assert _reasons(ledger, 2, forecast_otpm=30) == ["otpm_evaluator_reserve_protected"]
    assert _reasons(ledger, 2, forecast_otpm=30, class_="evaluator") == []
    assert _reasons(ledger, 2, forecast_otpm=60, class_="evaluator") == ["otpm_headroom_exhausted"]


def test_reserved_forecasts_count_per_dimension(ledger: Any) -> None:
    ledger.configure(goal="g", quota_itpm=1_000, target_itpm=1_000, at=at(0))
    ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(1))
    assert ledger.admit(goal="g", run="a", forecast_itpm=700, at=at(2))["admitted"]
    assert _reasons(ledger, 3, forecast_itpm=301) == ["itpm_headroom_exhausted"]
    ledger.release(goal="g", run="a", at=at(4))
    assert _reasons(ledger, 5, forecast_itpm=301) == []


OUTSIDE = {"limit": 10_000, "remaining": 2_000}


def test_a_live_provider_report_joins_the_load_and_refuses_beyond_remaining(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=10_000, target_tpm=10_000, at=at(0))
    report = {"tpm": {**OUTSIDE, "reset_at": at(30)}}
    # our own call used 100: the organisation has used 8000 (outside traffic)
    ledger.observe(
        goal="g", uncached_input=100, cached_input=0, output=0, provider=report, at=at(1)
    )
    ledger.observe(
        goal="g", uncached_input=500, cached_input=0, output=0, at=at(2)
    )  # after the report
    goal = ledger.inspect(goal="g", at=at(3))["goals"]["g"]
    assert goal["load_tpm"] == 8_000
    assert goal["dimensions"]["tpm"]["provider_used"] == 8_000
    assert goal["provider"]["tpm"]["live"] is True
    assert goal["provider"]["tpm"]["headroom"] == 1_500  # 2000 remaining - 500 since
    refused = ledger.admit(goal="g", run="r", forecast_tpm=1_600, at=at(3))
    assert refused["reasons"] == [R.TPM_PROVIDER_EXHAUSTED]
    assert refused["binding_dimension"] == "tpm"
    assert ledger.admit(goal="g", run="r", forecast_tpm=1_500, at=at(3))["admitted"]


def test_a_provider_report_lapses_at_its_reset_or_after_60_s(ledger: Any) -> None:
    ledger.configure(goal="g", quota_rpm=100, target_rpm=100, at=at(0))
    ledger.observe(
        goal="g",
        uncached_input=0,
        cached_input=0,
        output=1,
        provider={"rpm": {**OUTSIDE, "reset_at": at(5)}},
        at=at(1),
    )
    view = ledger.inspect(goal="g", at=at(4.999999))["goals"]["g"]["provider"]["rpm"]
    assert view["live"] is True
    assert ledger.inspect(goal="g", at=at(5))["goals"]["g"]["provider"]["rpm"]["live"] is False
    ledger.observe(
        goal="g",
        uncached_input=0,
        cached_input=0,
        output=1,
        provider={"rpm": {**OUTSIDE, "reset_at": None}},
        at=at(6),
    )
    assert ledger.inspect(goal="g", at=at(66))["goals"]["g"]["provider"]["rpm"]["live"] is True
    assert (
        ledger.inspect(goal="g", at=at(66.000001))["goals"]["g"]["provider"]["rpm"]["live"] is False
    )


def test_every_dimension_can_be_provider_exhausted(ledger: Any) -> None:
    ledger.configure(goal="g", quota_itpm=10**6, quota_otpm=10**6, quota_rpm=10**6, at=at(0))
    report = {
        d: {"limit": 100, "remaining": 5, "reset_at": at(30)} for d in ("itpm", "otpm", "rpm")
    }
    ledger.reject(goal="g", retry_after_s=0, provider=report, at=at(1))
    ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(1))
    assert _reasons(ledger, 2, forecast_itpm=6, forecast_otpm=6, forecast_rpm=6) == [
        "itpm_provider_exhausted",
        "otpm_provider_exhausted",
        "rpm_provider_exhausted",
    ]
    assert _reasons(ledger, 2, forecast_itpm=5, forecast_otpm=5, forecast_rpm=5) == []


def test_config_above_provider_limit(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=50_000, quota_rpm=10, at=at(0))
    ledger.observe(
        goal="g",
        uncached_input=1,
        cached_input=0,
        output=0,
        provider={
            "tpm": {"limit": 30_000, "remaining": 29_000, "reset_at": at(2)},
            "rpm": {"limit": 60, "remaining": 59, "reset_at": at(2)},
            "otpm": {"limit": 1, "remaining": 1, "reset_at": at(2)},  # not configured
        },
        at=at(1),
    )
    provider = ledger.inspect(goal="g", at=at(1.5))["goals"]["g"]["provider"]
    assert provider["tpm"]["config_above_provider_limit"] is True
    assert provider["rpm"]["config_above_provider_limit"] is False
    assert provider["otpm"]["config_above_provider_limit"] is False


def test_audit_explains_the_binding_dimension_and_its_shortfall(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=100_000, quota_rpm=10, target_rpm=2, at=at(0))
    ledger.observe(goal="g", uncached_input=10, cached_input=0, output=0, requests=1, at=at(1))
    ledger.observe(goal="g", uncached_input=10, cached_input=0, output=0, requests=1, at=at(2))
    refused = ledger.admit(goal="g", run="r", forecast_tpm=10, forecast_rpm=2, at=at(3))
    explanation = ledger.audit(seq=refused["event"]["seq"])["explanation"]
    assert explanation["binding_dimension"] == "rpm"
    assert explanation["binding_constraint"] == "rpm_headroom_exhausted"
    assert explanation["shortfall"] == {"rpm": 2}
    # both samples must leave the window: the second at 62 s
    assert explanation["earliest_admissible_at"] == at(62)


def test_the_provider_report_lapsing_is_a_change_point(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=10_000, target_tpm=10_000, at=at(0))
    report = {"tpm": {"limit": 10_000, "remaining": 100, "reset_at": at(20)}}
    ledger.observe(goal="g", uncached_input=1, cached_input=0, output=0, provider=report, at=at(1))
    refused = ledger.admit(goal="g", run="r", forecast_tpm=500, at=at(2))
    explanation = ledger.audit(seq=refused["event"]["seq"])["explanation"]
    assert explanation["shortfall"] == {"tpm": 400}  # 500 - 100 remaining (nothing since)
    assert explanation["earliest_admissible_at"] == at(20)


def test_remove_limit_and_remove_gate(ledger: Any) -> None:
    ledger.configure(goal="g", max_active_cases=2, quota_tpm=1_000, quota_rpm=10, at=at(0))
    answer = ledger.configure(goal="g", remove_limit=["rpm"], at=at(1))
    assert answer["config"]["tokens"]["limits"] == {}
    assert answer["changes"]["quota_rpm"] == [10, None]
    with pytest.raises(InvalidInput, match="remove_gate=tokens"):
        ledger.configure(goal="g", remove_limit=["tpm"], at=at(2))
    answer = ledger.configure(goal="g", remove_gate=["tokens"], at=at(2))
    assert answer["config"]["tokens"] is None and answer["config"]["cases"] is not None
    assert "quota_tpm" not in answer["explicit"]
    with pytest.raises(InvalidInput):
        ledger.configure(goal="g", remove_limit=["tpw"], at=at(3))
    with pytest.raises(InvalidInput):  # a field of a dimension being removed
        ledger.configure(goal="g", remove_gate=["cases"], max_active_cases=3, at=at(3))


def test_metrics_per_dimension(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=1_000, quota_rpm=10, at=at(0))
    report = {
        "rpm": {"limit": 10, "remaining": 4, "reset_at": at(30)},
        "otpm": {"limit": 90, "remaining": 80, "reset_at": at(30)},  # not configured
    }
    ledger.observe(goal="g", uncached_input=10, cached_input=0, output=0, provider=report, at=at(1))
    families = ledger.metrics(goal="g", at=at(2))["metrics"]

    def series(name: str) -> dict[str, Any]:
        return {s["labels"]["dimension"]: s["value"] for s in families[name]["samples"]}

    assert series("quotaledger_load") == {"tpm": 10, "rpm": 6}  # rpm: the provider's 6 used
    assert series("quotaledger_target") == {"tpm": 900, "rpm": 9}
    assert series("quotaledger_provider_remaining") == {"otpm": 80, "rpm": 4}


@pytest.mark.parametrize(
    ("dimension", "names"),
    [
        (
            "itpm",
            ["itpm_forecast_required", "itpm_forecast_exceeds_target", "itpm_headroom_exhausted",
             "itpm_evaluator_reserve_protected", "itpm_provider_exhausted"],
        ),
        (
            "otpm",
            ["otpm_forecast_required", "otpm_forecast_exceeds_target", "otpm_headroom_exhausted",
             "otpm_evaluator_reserve_protected", "otpm_provider_exhausted"],
        ),
        (
            "rpm",
            ["rpm_forecast_required", "rpm_forecast_exceeds_target", "rpm_headroom_exhausted",
             "rpm_evaluator_reserve_protected", "rpm_provider_exhausted"],
        ),
    ],
)  # fmt: skip
def test_every_reason_of_a_dimension(ledger: Any, dimension: str, names: list[str]) -> None:
    required, exceeds, headroom, protected, provider = names
    limit = {f"quota_{dimension}": 100, f"target_{dimension}": 50}
    ledger.configure(goal="g", **limit, **{f"evaluator_reserve_{dimension}": 10}, at=at(0))
    ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(1))

    def reasons(forecast: int | None) -> list[str]:
        return _reasons(ledger, 2, **{f"forecast_{dimension}": forecast})

    assert reasons(None) == [required]
    assert reasons(60) == [exceeds, headroom]
    assert reasons(45) == [protected]
    assert reasons(40) == []
    # no limit reported: nothing joins the load, the remaining still bounds the forecast
    report = {dimension: {"limit": None, "remaining": 5, "reset_at": at(30)}}
    ledger.reject(goal="g", retry_after_s=0, provider=report, at=at(2))
    assert reasons(6) == [provider]
    assert reasons(5) == []


def test_report_draws_one_usage_chart_per_configured_dimension(ledger: Any, tmp_path: Path) -> None:
    ledger.configure(goal="g", quota_tpm=1_000, quota_rpm=10, quota_otpm=500, at=at(0))
    ledger.observe(goal="g", uncached_input=10, cached_input=0, output=5, requests=3, at=at(1))
    out = tmp_path / "r.html"
    ledger.report(goal="g", out=str(out))
    page = out.read_text()
    assert 'data-dimension="tpm"' in page and "TPM: all tokens per minute" in page
    assert 'data-dimension="otpm"' in page and "OTPM: output tokens per minute" in page
    assert 'data-dimension="rpm"' in page and "RPM: requests per minute" in page
    assert 'data-dimension="itpm"' not in page  # not configured
