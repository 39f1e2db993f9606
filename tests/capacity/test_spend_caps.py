"""Prices and spend caps (SPEC §12.4): exact dollars, the price in force, unpriced
tokens, caps reached and exceeded, and bad input refused with nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput
from quotaledger.projections import reasons as R
from quotaledger.services.operator import prometheus_text
from quotaledger.usecases.operator import MetricsAnswer
from tests.capacity.capacity_helpers import at
from tests.capacity.test_daily_spend_model import past_genesis
from tests.support import promtool_check


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    path = tmp_path / "j.jsonl"
    past_genesis(path, at(-10))
    with Ledger.open(str(path)) as opened:
        yield opened


def _spend(ledger: Any, t: float) -> dict[str, Any]:
    spend: dict[str, Any] = ledger.inspect(goal="g", at=at(t))["goals"]["g"]["spend"]
    return spend


def test_cached_and_cache_write_prices_default_to_the_input_price(ledger: Any) -> None:
    answer = ledger.price_set(model="m", input_usd_per_mtok=3, output_usd_per_mtok=15, at=at(0))
    assert answer["price"] == {
        "input_usd_per_mtok": 3.0,
        "cached_input_usd_per_mtok": 3.0,
        "cache_write_usd_per_mtok": 3.0,
        "output_usd_per_mtok": 15.0,
        "at": at(0),
        "seq": 1,
    }
    ledger.configure(goal="g", cap_usd=100, at=at(1))
    ledger.observe(
        goal="g",
        model="m",
        uncached_input=1_000,
        cached_input=2_000,
        cache_write_input=500,
        output=100,
        at=at(2),
    )
    # (1,000 + 2,000 + 500) x 3 + 100 x 15 = 12,000 dollars per million tokens
    assert _spend(ledger, 3)["usd"] == 0.012
    ledger.price_set(
        model="m",
        input_usd_per_mtok=3,
        output_usd_per_mtok=15,
        cached_input_usd_per_mtok=0.3,
        cache_write_usd_per_mtok=3.75,
        at=at(4),
    )
    ledger.observe(
        goal="g",
        model="m",
        uncached_input=1_000,
        cached_input=2_000,
        cache_write_input=500,
        output=100,
        at=at(5),
    )
    # 3,000 + 600 + 1,875 + 1,500 = 6,975 per million: 0.006975
    assert _spend(ledger, 6)["usd"] == pytest.approx(0.018975, abs=1e-9)
    assert ledger.prices()["prices"]["m"]["cached_input_usd_per_mtok"] == 0.3


def test_a_price_change_mid_run_applies_to_later_observations_only(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=1, output_usd_per_mtok=2, at=at(0))
    ledger.configure(goal="g", cap_usd=10, at=at(0))
    assert ledger.admit(goal="g", run="r", forecast_usd=0.5, at=at(1))["admitted"]
    ledger.observe(
        goal="g", run="r", model="m", uncached_input=100_000, cached_input=0, output=0, at=at(2)
    )  # 0.1
    ledger.price_set(model="m", input_usd_per_mtok=4, output_usd_per_mtok=8, at=at(3))
    ledger.observe(
        goal="g", run="r", model="m", uncached_input=100_000, cached_input=0, output=0, at=at(4)
    )  # 0.4
    spend = _spend(ledger, 5)
    assert spend["usd"] == 0.5
    assert spend["reserved_usd"] == 0.0  # its forecast is spent
    assert spend["remaining_usd"] == 9.5
    # An audit of a later decision replays the prices in force by seq.
    refused = ledger.admit(goal="g", run="r2", forecast_usd=9.6, at=at(6))
    assert refused["reasons"] == [R.SPEND_CAP_EXCEEDED]
    assert ledger.audit(goal="g", run="r2")["reproduced"] is True


def test_dollars_round_half_even_per_observation(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=0.5, output_usd_per_mtok=0, at=at(0))
    ledger.configure(goal="g", cap_usd=1, at=at(0))
    ledger.observe(
        goal="g", model="m", uncached_input=1, cached_input=0, output=0, at=at(1)
    )  # 0.0000005 -> 0
    assert _spend(ledger, 1)["usd"] == 0.0
    ledger.observe(
        goal="g", model="m", uncached_input=3, cached_input=0, output=0, at=at(2)
    )  # 0.0000015 -> 0.000002
    assert _spend(ledger, 2)["usd"] == 0.000002


def test_unpriced_tokens_are_shown_and_ask_for_prices(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=100_000, cap_usd=1, at=at(0))
    ledger.price_set(model="priced", input_usd_per_mtok=1, output_usd_per_mtok=1, at=at(0))
    ledger.observe(
        goal="g", model="priced", uncached_input=1_000, cached_input=0, output=0, at=at(1)
    )
    goal = ledger.inspect(goal="g", at=at(2))["goals"]["g"]
    assert goal["spend"]["unpriced_tokens"] == 0
    assert goal["next_action"] == "backfill_to_target"
    ledger.observe(goal="g", model="other", uncached_input=300, cached_input=0, output=20, at=at(3))
    ledger.observe(goal="g", uncached_input=5, cached_input=0, output=0, at=at(4))  # no model
    goal = ledger.inspect(goal="g", at=at(5))["goals"]["g"]
    assert goal["spend"]["unpriced_tokens"] == 325
    assert goal["spend"]["usd"] == 0.001
    assert goal["next_action"] == "price_models"
    # Once the unpriced observations are older than 60 s, observing with a price clears it.
    ledger.observe(
        goal="g", model="priced", uncached_input=1, cached_input=0, output=0, at=at(64.5)
    )
    assert ledger.inspect(goal="g", at=at(65))["goals"]["g"]["next_action"] == "backfill_to_target"


def test_the_observation_that_crosses_the_cap_reaches_it(ledger: Any) -> None:
    ledger.configure(goal="g", max_active_cases=10, cap_tokens=10_000, at=at(0))
    assert ledger.admit(goal="g", run="r1", arm="baseline", forecast_tokens=6_000, at=at(1))[
        "admitted"
    ]
    refused = ledger.admit(goal="g", run="r2", arm="baseline", forecast_tokens=5_000, at=at(2))
    assert refused["reasons"] == [R.SPEND_CAP_EXCEEDED]
    assert refused["figures"]["spend"] == {
        "tokens": {"spent": 0, "reserved": 6_000, "forecast": 5_000, "cap": 10_000}
    }
    ledger.observe(goal="g", run="r1", uncached_input=9_999, cached_input=0, output=0, at=at(3))
    assert _spend(ledger, 3)["remaining_tokens"] == 1
    assert ledger.inspect(goal="g", at=at(3))["goals"]["g"]["next_action"] != "spend_cap_reached"
    ledger.observe(
        goal="g", run="r1", uncached_input=0, cached_input=0, output=1, at=at(4)
    )  # crosses it
    goal = ledger.inspect(goal="g", at=at(5))["goals"]["g"]
    assert goal["next_action"] == "spend_cap_reached"
    assert goal["admission_ready"] is False
    assert goal["active_counts"]["total"] == 1  # a cap never stops a running run
    for t, run in ((6, "r3"), (7, "r4")):
        refused = ledger.admit(goal="g", run=run, arm="baseline", forecast_tokens=0, at=at(t))
        assert refused["reasons"] == [R.SPEND_CAP_REACHED]
        assert refused["figures"]["spend"]["tokens"] == {
            "spent": 10_000,
            "reserved": 0,
            "forecast": 0,
            "cap": 10_000,
        }
    # Raising the cap lets admissions start again.
    ledger.configure(goal="g", cap_tokens=20_000, at=at(8))
    assert ledger.admit(goal="g", run="r5", arm="baseline", forecast_tokens=1, at=at(9))["admitted"]


def test_tokens_reached_and_dollars_exceeded_give_both_reasons(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, at=at(0))
    ledger.configure(goal="g", cap_tokens=100, cap_usd=1, at=at(0))
    ledger.observe(goal="g", model="m", uncached_input=100, cached_input=0, output=0, at=at(1))
    reasons = ledger.admit(goal="g", run="r", forecast_usd=1, at=at(2))["reasons"]
    assert reasons == [R.SPEND_CAP_REACHED, R.SPEND_CAP_EXCEEDED]


def test_a_past_cap_since_counts_what_was_observed_since(ledger: Any) -> None:
    ledger.configure(goal="g", quota_tpm=10**9, at=at(0))
    for t in range(0, 500, 10):  # one every 10 s: most are older than the 60 s window
        ledger.observe(goal="g", uncached_input=100, cached_input=0, output=0, at=at(t))
    answer = ledger.configure(goal="g", cap_tokens=3_000, cap_since=at(250), at=at(500))
    assert answer["changes"]["cap_since"] == [None, at(250)]
    assert _spend(ledger, 500)["tokens"] == 25 * 100  # 250, 260, ..., 490
    ledger.observe(goal="g", uncached_input=100, cached_input=0, output=0, at=at(501))
    assert _spend(ledger, 501)["tokens"] == 2_600
    # Changing an amount keeps cap_since and the count; removing both caps ends them.
    ledger.configure(goal="g", cap_usd=5, at=at(502))
    assert _spend(ledger, 502)["tokens"] == 2_600
    ledger.configure(goal="g", remove_cap=["tokens", "usd"], at=at(503))
    assert _spend(ledger, 503)["since"] is None
    assert ledger.configure(goal="g", remove_cap=["tokens"], at=at(504))["appended"] is False


@pytest.mark.parametrize(
    ("call", "fields"),
    [
        ("configure", {"cap_usd": -1}),
        ("configure", {"cap_usd": 0.1234567}),
        ("configure", {"cap_tokens": -5}),
        ("configure", {"cap_tokens": 10, "cap_since": "2099-01-01T00:00:00Z"}),
        ("configure", {"cap_since": at(0)}),  # no cap
        ("configure", {"remove_cap": ["euros"]}),
        ("price_set", {"model": "m", "input_usd_per_mtok": -1, "output_usd_per_mtok": 1}),
        ("price_set", {"model": "x" * 129, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}),
        ("price_set", {"model": "a b", "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}),
        ("observe", {"model": "x" * 129, "uncached_input": 1}),
        ("admit", {"run": "r", "forecast_usd": -0.5}),
    ],
)
def test_bad_input_writes_nothing(tmp_path: Path, call: str, fields: dict[str, Any]) -> None:
    path = tmp_path / "j.jsonl"
    past_genesis(path, at(-10))
    with Ledger.open(str(path)) as ledger:
        ledger.configure(goal="g", max_active_cases=2, at=at(0))
        before = path.read_bytes()
        with pytest.raises(InvalidInput):
            getattr(ledger, call)(**({} if call == "price_set" else {"goal": "g"}), **fields)
        assert path.read_bytes() == before


def test_metrics_show_spend_caps_and_daily_load(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=2, output_usd_per_mtok=10, at=at(0))
    ledger.configure(goal="g", quota_tpd=100_000, cap_tokens=50_000, cap_usd=2.5, at=at(0))
    ledger.observe(goal="g", model="m", uncached_input=1_000, cached_input=0, output=100, at=at(1))
    answer = ledger.metrics(goal="g", at=at(2))
    promtool_check(prometheus_text(msgspec.convert(answer, MetricsAnswer)))
    samples = {
        (name, tuple(sorted(s["labels"].items()))): s["value"]
        for name, family in answer["metrics"].items()
        for s in family["samples"]
    }
    assert samples[("quotaledger_spend_tokens_total", (("goal", "g"),))] == 1_100
    assert samples[("quotaledger_spend_usd_total", (("goal", "g"),))] == 0.003
    assert samples[("quotaledger_spend_cap", (("goal", "g"), ("unit", "tokens")))] == 50_000
    assert samples[("quotaledger_spend_cap", (("goal", "g"), ("unit", "usd")))] == 2.5
    assert samples[("quotaledger_load", (("dimension", "tpd"), ("goal", "g")))] == 1_100


def test_whatif_replays_a_dollar_cap_and_audit_the_price_in_force(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=10, output_usd_per_mtok=10, at=at(0))
    ledger.configure(goal="g", max_active_cases=10, at=at(0))
    for i in range(4):  # each run spends 0.01 dollars
        t = 10 * i + 1
        assert ledger.admit(goal="g", run=f"r{i}", arm="baseline", forecast_usd=0.01, at=at(t))[
            "admitted"
        ]
        ledger.observe(
            goal="g",
            run=f"r{i}",
            model="m",
            uncached_input=1_000,
            cached_input=0,
            output=0,
            at=at(t + 1),
        )
        ledger.release(goal="g", run=f"r{i}", at=at(t + 2))
    answer = ledger.whatif(goal="g", cap_usd=0.025)
    assert answer["changes"] == {"cap_usd": 0.025}
    # r0 and r1 spend 0.02: r2's forecast of 0.01 more would pass 0.025; r2's usage was
    # still observed (what-if keeps the recorded usage), so r3 finds the cap reached.
    assert [(f["run"], f["whatif_reasons"]) for f in answer["flips"]] == [
        ("r2", [R.SPEND_CAP_EXCEEDED]),
        ("r3", [R.SPEND_CAP_REACHED]),
    ]
    with pytest.raises(InvalidInput):
        ledger.whatif(goal="g", cap_usd=-1)


def test_prices_ride_the_checkpoint_and_price_by_seq(tmp_path: Path) -> None:
    """A handle that loads goal g from the checkpoint folds g's newer records after the
    journal-level ones that followed them: each observation still takes the price
    before it by seq, as a fold from genesis does."""
    path = tmp_path / "j.jsonl"
    past_genesis(path, at(-10))
    with Ledger.open(str(path), checkpoint_every=10**9) as ledger:
        ledger.price_set(model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, at=at(0))
        ledger.configure(goal="g", cap_usd=100, at=at(0))
        ledger.configure(goal="h", cap_usd=100, at=at(0))
        ledger.observe(
            goal="g", model="m", uncached_input=1_000, cached_input=0, output=0, at=at(1)
        )
        ledger.checkpoint()
        ledger.observe(
            goal="g", model="m", uncached_input=1_000, cached_input=0, output=0, at=at(2)
        )  # at $1
        ledger.price_set(model="m", input_usd_per_mtok=5, output_usd_per_mtok=5, at=at(3))
        ledger.observe(
            goal="h", model="m", uncached_input=1_000, cached_input=0, output=0, at=at(4)
        )  # at $5
    with Ledger.open(str(path)) as reopened:  # from the checkpoint, goal by goal
        assert reopened.inspect(goal="g", at=at(5))["goals"]["g"]["spend"]["usd"] == 0.002
        assert reopened.inspect(goal="h", at=at(5))["goals"]["h"]["spend"]["usd"] == 0.005
        assert reopened.prices()["prices"]["m"]["input_usd_per_mtok"] == 5.0
        assert reopened.verify()["ok"] is True
    path.with_name(path.name + ".checkpoint").unlink()
    with Ledger.open(str(path)) as fresh:  # from genesis
        assert fresh.inspect(goal="g", at=at(5))["goals"]["g"]["spend"]["usd"] == 0.002
