"""`whatif`'s price flags (SPEC §12.5: "whatif takes the pool, cap and price flags"):
`--price-model M --input-usd-per-mtok X --output-usd-per-mtok X
[--cached-input-usd-per-mtok X] [--cache-write-usd-per-mtok X]` replay the decisions
as if M had been priced so from the start of the replay; `whatif --pool P --cap-usd X
/ --cap-tokens N` with the pool's caps. And `price set --at` (SPEC §12.4): before that
model's latest price it is `time_regression`; a batch never moves the journal-level
clock, so a past time after the last journal-level event is taken."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotaledger import Error, Ledger
from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import at
from tests.capacity.test_daily_spend_model import past_genesis


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    path = tmp_path / "j.jsonl"
    past_genesis(path, at(-10))
    with Ledger.open(str(path)) as opened:
        yield opened


def spend_runs(ledger: Any, goal: str) -> None:
    """Four runs, each asking to start forecasting $0.01, observing 1,000 input tokens
    of m (a refused one too: its usage is observed all the same)."""
    for i in range(4):
        t = 10 * i + 1
        ledger.admit(goal=goal, run=f"r{i}", forecast_usd=0.01, at=at(t))
        ledger.observe(
            goal=goal,
            run=f"r{i}",
            model="m",
            uncached_input=1_000,
            cached_input=0,
            output=0,
            at=at(t + 1),
        )
        if ledger.inspect(goal=goal, at=at(t + 1))["goals"][goal]["active_runs"]:
            ledger.release(goal=goal, run=f"r{i}", at=at(t + 2))


def test_a_what_if_price_flips_a_dollar_cap(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, at=at(0))
    ledger.configure(goal="g", cap_usd=0.025, at=at(0))
    spend_runs(ledger, "g")  # each run spends $0.001: the cap is far
    assert ledger.whatif(goal="g")["flips"] == []
    answer = ledger.whatif(goal="g", price_model="m", input_usd_per_mtok=10, output_usd_per_mtok=30)
    assert answer["changes"] == {
        "price_model": "m",
        "input_usd_per_mtok": 10.0,
        "cached_input_usd_per_mtok": 10.0,
        "cache_write_usd_per_mtok": 10.0,
        "output_usd_per_mtok": 30.0,
    }
    # At $10 per million each run spends 0.01: r2's forecast would pass 0.025, and
    # r2's observed usage (kept as recorded) reaches it for r3.
    assert [(f["run"], f["whatif_reasons"]) for f in answer["flips"]] == [
        ("r2", [R.SPEND_CAP_EXCEEDED]),
        ("r3", [R.SPEND_CAP_REACHED]),
    ]
    assert any("price_model=m" in note for note in answer["assumptions"])


def test_a_what_if_price_overrides_later_recorded_prices(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=10, output_usd_per_mtok=10, at=at(0))
    ledger.configure(goal="g", cap_usd=0.025, at=at(0))
    spend_runs(ledger, "g")
    recorded = ledger.whatif(goal="g")
    assert recorded["flips"] == []  # r2 and r3 were refused as recorded
    cheap = ledger.whatif(goal="g", price_model="m", input_usd_per_mtok=1, output_usd_per_mtok=1)
    assert [(f["run"], f["whatif_admitted"]) for f in cheap["flips"]] == [
        ("r2", True),
        ("r3", True),
    ]


def test_a_pools_cap_and_price_replayed(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, at=at(0))
    ledger.pool_configure(pool="org", cap_usd=1, at=at(0))
    ledger.configure(goal="g", pool="org", pool_share=0.5, at=at(0))
    spend_runs(ledger, "g")  # each run spends $0.001
    assert ledger.whatif(pool="org")["flips"] == []
    capped = ledger.whatif(pool="org", cap_usd=0.025)
    assert capped["changes"] == {"cap_usd": 0.025}
    assert capped["flips"] == []
    priced = ledger.whatif(
        pool="org", cap_usd=0.025, price_model="m", input_usd_per_mtok=10, output_usd_per_mtok=1
    )
    assert priced["changes"]["price_model"] == "m"
    assert [(f["run"], f["whatif_reasons"]) for f in priced["flips"]] == [
        ("r2", [R.POOL_SPEND_CAP_EXCEEDED]),
        ("r3", [R.POOL_SPEND_CAP_REACHED]),
    ]
    tokens = ledger.whatif(pool="org", cap_tokens=2_000)
    assert [(f["run"], f["whatif_reasons"]) for f in tokens["flips"]] == [
        ("r2", [R.POOL_SPEND_CAP_REACHED]),
        ("r3", [R.POOL_SPEND_CAP_REACHED]),
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {"input_usd_per_mtok": 1},  # a price flag without --price-model
        {"price_model": "m", "input_usd_per_mtok": 1},  # no output price
        {"price_model": "m", "input_usd_per_mtok": -1, "output_usd_per_mtok": 1},
        {"price_model": "m", "input_usd_per_mtok": 0.1234567, "output_usd_per_mtok": 1},
        {"price_model": "a b", "input_usd_per_mtok": 1, "output_usd_per_mtok": 1},
    ],
)
def test_bad_price_flags_exit_2(ledger: Any, fields: dict[str, Any]) -> None:
    ledger.configure(goal="g", cap_usd=1, at=at(0))
    with pytest.raises(Error) as caught:
        ledger.whatif(goal="g", **fields)
    assert caught.value.exit_code == 2


def test_price_set_at_after_a_batch_and_before_a_models_latest_price(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, at=at(0))
    ledger.pool_configure(pool="org", quota_tpm=1_000, at=at(0))
    ledger.configure(goal="g", pool="org", pool_share=0.5, at=at(1))  # a batch of two
    # The batch did not move the journal-level clock to now: a past time is taken.
    assert ledger.price_set(model="m", input_usd_per_mtok=2, output_usd_per_mtok=2, at=at(5))[
        "appended"
    ]
    before = len(list(ledger.log()))
    with pytest.raises(Error) as caught:
        ledger.price_set(model="m", input_usd_per_mtok=3, output_usd_per_mtok=3, at=at(4))
    assert caught.value.exit_code == 2
    assert caught.value.code == "time_regression"
    assert "model 'm'" in caught.value.message
    assert len(list(ledger.log())) == before
    # Another model at a time after m's latest price is taken.
    assert ledger.price_set(model="n", input_usd_per_mtok=1, output_usd_per_mtok=1, at=at(6))[
        "appended"
    ]
