"""A pool's spend caps (SPEC §12.1, §12.4): the pool's spend is the sum of its members'
observations since `cap_since` while they are members (tokens with the pool's
cached-input weight, dollars by the price in force per model), what its members'
active runs may still spend is reserved, and `pool_spend_cap_reached` (not queueable)
and `pool_spend_cap_exceeded` (queueable) follow the goal's own caps and the pool's
other reasons, with `figures.pool.spend`. The property test holds the pool's spend to
an independent sum over the journal's log."""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from quotaledger import Error, Ledger
from quotaledger.journal.clock import parse_at
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


def obs(ledger: Any, goal: str, t: float, tokens: int = 0, **fields: Any) -> None:
    fields.setdefault("cached_input", 0)
    fields.setdefault("output", 0)
    ledger.observe(goal=goal, uncached_input=tokens, at=at(t), **fields)


def pool_spend(ledger: Any, t: float) -> dict[str, Any]:
    spend: dict[str, Any] = ledger.inspect(pool="org", at=at(t))["pools"]["org"]["spend"]
    return spend


def test_the_observation_that_crosses_the_pools_cap_reaches_it(ledger: Any) -> None:
    ledger.pool_configure(pool="org", cap_tokens=10_000, at=at(0))
    ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(0))
    ledger.configure(goal="b", pool="org", pool_share=0.5, at=at(0))
    assert ledger.admit(goal="a", run="r1", forecast_tokens=6_000, at=at(1))["admitted"]
    refused = ledger.admit(goal="b", run="r2", forecast_tokens=5_000, at=at(2))
    assert refused["reasons"] == [R.POOL_SPEND_CAP_EXCEEDED]
    assert "spend" not in refused["figures"]  # b has no cap of its own
    assert refused["figures"]["pool"]["spend"] == {
        "tokens": {"spent": 0, "reserved": 6_000, "forecast": 5_000, "cap": 10_000}
    }
    obs(ledger, "a", 3, 9_000, run="r1")
    obs(ledger, "b", 4, 999)
    spend = pool_spend(ledger, 4)
    assert spend == {
        "since": at(0),
        "tokens": 9_999,
        "usd": 0.0,
        "unpriced_tokens": 9_999,
        "cap_tokens": 10_000,
        "cap_usd": None,
        "reserved_tokens": 0,  # r1 observed 9,000 of its 6,000
        "reserved_usd": 0.0,
        "remaining_tokens": 1,
        "remaining_usd": None,
    }
    assert ledger.inspect(goal="b", at=at(4))["goals"]["b"]["next_action"] != "spend_cap_reached"
    obs(ledger, "b", 5, 0, output=1)  # crosses it
    assert pool_spend(ledger, 5)["remaining_tokens"] == 0
    for goal in ("a", "b"):
        view = ledger.inspect(goal=goal, at=at(6))["goals"][goal]
        assert view["next_action"] == "spend_cap_reached"
        assert view["admission_ready"] is False
    assert ledger.goals(at=at(6))["goals"]["b"]["next_action"] == "spend_cap_reached"
    for t, goal, run in ((6, "a", "r3"), (7, "b", "r4")):
        refused = ledger.admit(goal=goal, run=run, forecast_tokens=0, at=at(t))
        assert refused["reasons"] == [R.POOL_SPEND_CAP_REACHED]
        assert refused["figures"]["pool"]["spend"]["tokens"] == {
            "spent": 10_000,
            "reserved": 0,
            "forecast": 0,
            "cap": 10_000,
        }
    # Reached is not queueable: refused, not queued.
    queued = ledger.admit(goal="b", run="r5", forecast_tokens=0, lease_s=60, queue=True, at=at(8))
    assert queued["reasons"] == [R.POOL_SPEND_CAP_REACHED]
    assert not queued.get("queued")
    # Raising the pool's cap lets admissions start again.
    ledger.pool_configure(pool="org", cap_tokens=20_000, at=at(9))
    assert ledger.admit(goal="b", run="r6", forecast_tokens=1, at=at(10))["admitted"]


def test_dollars_and_tokens_with_the_members_own_caps(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=1, output_usd_per_mtok=3, at=at(0))
    ledger.pool_configure(pool="org", quota_tpm=10**8, cached_input_weight=0.5, cap_usd=2, at=at(0))
    ledger.configure(goal="a", pool="org", pool_share=0.5, cap_usd=1, at=at(0))
    ledger.configure(goal="b", pool="org", pool_share=0.5, at=at(0))
    # 1,000,000 uncached + 200,000 cached at $1 + 100,000 output at $3 = $1.5
    obs(ledger, "a", 1, 1_000_000, cached_input=200_000, output=100_000, model="m")
    # a's own cap is reached; the pool's is not: a's own reason alone.
    refused = ledger.admit(goal="a", run="ra", forecast_tpm=1, forecast_usd=0.5, at=at(2))
    assert refused["reasons"] == [R.SPEND_CAP_REACHED]
    assert refused["figures"]["spend"]["usd"]["spent"] == 1.5
    assert refused["figures"]["pool"]["spend"] == {
        "usd": {"spent": 1.5, "reserved": 0.0, "forecast": 0.5, "cap": 2.0}
    }
    # b's forecast would take the pool past its cap: exceeded, queueable.
    refused = ledger.admit(goal="b", run="rb", forecast_tpm=1, forecast_usd=0.500001, at=at(3))
    assert refused["reasons"] == [R.POOL_SPEND_CAP_EXCEEDED]
    admitted = ledger.admit(goal="b", run="rb", forecast_tpm=1, forecast_usd=0.5, at=at(4))
    assert admitted["admitted"]
    assert admitted["receipt"]["pool"]["spend"]["usd"] == {
        "spent": 1.5,
        "reserved": 0.0,
        "forecast": 0.5,
        "cap": 2.0,
    }
    # A token cap too, counted with the pool's weight: 1,000,000 + 0.5 x 200,000 +
    # 100,000 = 1,200,000 spent, reached; dollars 1.5 + 0.5 reserved + 0.1 > 2.
    ledger.pool_configure(pool="org", cap_tokens=1_200_000, at=at(5))
    spend = pool_spend(ledger, 5)
    assert spend["tokens"] == 1_200_000
    assert spend["reserved_usd"] == 0.5
    assert spend["remaining_usd"] == 0.0
    assert spend["since"] == at(0)  # the first cap's time stays while any cap does
    refused = ledger.admit(goal="b", run="rc", forecast_tpm=1, forecast_usd=0.1, at=at(6))
    assert refused["reasons"] == [R.POOL_SPEND_CAP_REACHED, R.POOL_SPEND_CAP_EXCEEDED]
    # The goal's caps come before the pool's other reasons, which come before its caps.
    refused = ledger.admit(goal="a", run="rd", forecast_usd=0.1, at=at(7))
    assert refused["reasons"] == [
        R.SPEND_CAP_REACHED,
        R.POOL_FORECAST_REQUIRED,
        R.POOL_SPEND_CAP_REACHED,
        R.POOL_SPEND_CAP_EXCEEDED,
    ]
    ledger.pool_configure(pool="org", remove_cap=["tokens", "usd"], at=at(8))
    assert pool_spend(ledger, 8)["since"] is None
    assert ledger.admit(goal="b", run="re", forecast_tpm=1, forecast_usd=9, at=at(9))["admitted"]


def test_a_past_cap_since_counts_members_observations_while_members(ledger: Any) -> None:
    ledger.price_set(model="m", input_usd_per_mtok=2, output_usd_per_mtok=2, at=at(0))
    ledger.pool_configure(pool="org", quota_tpm=10**9, at=at(0))
    ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(0))
    ledger.configure(goal="c", quota_tpm=10**9, at=at(0))
    obs(ledger, "c", 0, 7)  # not a member yet: never counts
    for t in range(0, 300, 10):  # most are older than the 60 s window
        obs(ledger, "a", t, 1_000, model="m")
    ledger.configure(goal="c", pool="org", pool_share=0.25, at=at(300))
    obs(ledger, "c", 310, 500)  # unpriced
    ledger.configure(goal="a", leave_pool=True, at=at(320))
    obs(ledger, "a", 330, 10**6, model="m")  # after leaving: not the pool's
    answer = ledger.pool_configure(pool="org", cap_tokens=20_000, cap_since=at(150), at=at(400))
    assert answer["changes"]["cap_since"] == [None, at(150)]
    spend = pool_spend(ledger, 400)
    assert spend["tokens"] == 15 * 1_000 + 500  # a at 150, 160, ..., 290; c at 310
    assert spend["usd"] == 0.03
    assert spend["unpriced_tokens"] == 500
    assert spend["remaining_tokens"] == 4_500
    # The running total after it, whoever joins or leaves.
    obs(ledger, "c", 401, 1_000)
    ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(402))
    obs(ledger, "a", 403, 1_000, model="m")
    ledger.configure(goal="c", leave_pool=True, at=at(404))
    obs(ledger, "c", 405, 10**6)
    spend = pool_spend(ledger, 405)
    assert spend["tokens"] == 17_500
    assert spend["usd"] == 0.032
    # Changing an amount keeps cap_since and the count.
    ledger.pool_configure(pool="org", cap_tokens=30_000, at=at(406))
    assert pool_spend(ledger, 406)["tokens"] == 17_500
    assert ledger.pools(at=at(406))["pools"]["org"]["spend"]["tokens"] == 17_500


def test_a_release_promotes_what_the_pools_cap_held(ledger: Any) -> None:
    ledger.pool_configure(pool="org", cap_tokens=10_000, at=at(0))
    ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(0))
    ledger.configure(goal="b", pool="org", pool_share=0.5, at=at(0))
    assert ledger.admit(goal="a", run="r1", forecast_tokens=6_000, lease_s=600, at=at(1))[
        "admitted"
    ]
    queued = ledger.admit(
        goal="b", run="r2", forecast_tokens=5_000, lease_s=600, queue=True, at=at(2)
    )
    assert queued["queued"] and queued["reasons"] == [R.POOL_SPEND_CAP_EXCEEDED]
    obs(ledger, "a", 3, 2_000, run="r1")
    released = ledger.release(goal="a", run="r1", at=at(4))
    assert released["promoted"] == [{"goal": "b", "run": "r2"}]
    assert pool_spend(ledger, 4)["reserved_tokens"] == 5_000


def test_audit_whatif_and_metrics_of_a_pool_cap(ledger: Any) -> None:
    ledger.pool_configure(pool="org", cap_tokens=1_000, at=at(0))
    ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(0))
    obs(ledger, "a", 1, 900)
    refused = ledger.admit(goal="a", run="r1", forecast_tokens=200, at=at(2))
    assert refused["reasons"] == [R.POOL_SPEND_CAP_EXCEEDED]
    audit = ledger.audit(goal="a", run="r1")
    assert audit["reproduced"] is True
    assert audit["explanation"]["pool"]["spend"]["tokens"]["spent"] == 900
    assert ledger.verify(decisions=True)["ok"]
    answer = ledger.metrics(at=at(3))
    promtool_check(prometheus_text(msgspec.convert(answer, MetricsAnswer)))
    samples = {
        (name, tuple(sorted(s["labels"].items()))): s["value"]
        for name, family in answer["metrics"].items()
        for s in family["samples"]
    }
    assert samples[("quotaledger_pool_spend_tokens_total", (("pool", "org"),))] == 900
    assert samples[("quotaledger_pool_spend_usd_total", (("pool", "org"),))] == 0
    cap_key = ("quotaledger_pool_spend_cap", (("pool", "org"), ("unit", "tokens")))
    assert samples[cap_key] == 1_000


def test_pool_cap_since_after_the_configure_is_refused(ledger: Any) -> None:
    ledger.pool_configure(pool="org", quota_tpm=1000, at=at(0))
    before = len(list(ledger.log()))
    with pytest.raises(Error) as caught:
        ledger.pool_configure(pool="org", cap_tokens=10, cap_since=at(5), at=at(1))
    assert caught.value.exit_code == 2
    assert len(list(ledger.log())) == before


# -- the property: the pool's spend is an independent sum over the log -----------------

MODELS = ("m1", "m2")
step = st.one_of(
    st.tuples(st.just("obs"), st.sampled_from("abc"), st.integers(0, 3_000),
              st.integers(0, 3_000), st.integers(0, 500), st.sampled_from((*MODELS, None))),
    st.tuples(st.just("price"), st.sampled_from(MODELS), st.decimals(0, 20, places=6),
              st.decimals(0, 50, places=6)),
    st.tuples(st.just("join"), st.sampled_from("abc")),
    st.tuples(st.just("leave"), st.sampled_from("abc")),
    st.tuples(st.just("cap"), st.integers(0, 40)),
)  # fmt: skip


def independent_spend(events: list[dict[str, Any]], pool: str) -> tuple[Decimal, Decimal, int]:
    """(tokens, dollars, unpriced tokens) the pool spent since its cap_since, from the
    log alone: each member observation while a member, priced by the latest price of
    its model before it (SPEC §12.4), dollars rounded half-even to 10^-6 each."""
    prices: dict[str, tuple[Decimal, ...]] = {}
    members: set[str] = set()
    weight = Decimal(1)
    since = None
    seen: list[tuple[str, dict[str, Any]]] = []
    for event in events:
        data = event["data"]
        if event["kind"] == "price.set":
            prices[data["model"]] = tuple(
                Decimal(str(data[k]))
                for k in (
                    "input_usd_per_mtok",
                    "cached_input_usd_per_mtok",
                    "cache_write_usd_per_mtok",
                    "output_usd_per_mtok",
                )
            )
        elif event["kind"] == "pool.configured" and event["goal"] == pool:
            weight = Decimal(str(data["cached_input_weight"]))
            since = data.get("cap_since")
        elif event["kind"] == "pool.membership" and event["goal"] == pool:
            if data.get("left"):
                members.discard(data["goal"])
            else:
                members.add(data["goal"])
        elif event["kind"] == "capacity.observed" and event["goal"] in members:
            price = prices.get(data.get("model") or "")
            seen.append((event["at"], {**data, "price": price}))
    tokens = usd = Decimal(0)
    unpriced = 0
    for when, data in seen:
        if since is not None and when < since:
            continue
        counts = (
            data["uncached_input"],
            data["cached_input"],
            data.get("cache_write_input", 0),
            data["output"],
        )
        tokens += counts[0] + weight * counts[1] + counts[2] + counts[3]
        price = data["price"]
        if price is None:
            unpriced += sum(counts)
        else:
            exact = sum((Decimal(c) * p for c, p in zip(counts, price, strict=True)), Decimal(0))
            usd += (exact / 10**6).quantize(Decimal("0.000001"), rounding="ROUND_HALF_EVEN")
    return tokens, usd, unpriced


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(steps=st.lists(step, min_size=1, max_size=25))
def test_pool_spend_is_the_sum_of_priced_member_observations(steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j.jsonl"
        past_genesis(path, at(-10))
        with Ledger.open(str(path)) as ledger:
            ledger.pool_configure(pool="org", quota_tpm=10**9, cached_input_weight=0.25, at=at(0))
            for goal in "abc":
                ledger.configure(goal=goal, quota_tpm=10**9, at=at(0))
            t = 0.0
            for one in steps:
                t += 7.5
                kind = one[0]
                if kind == "obs":
                    _, goal, uncached, cached, output, model = one
                    ledger.observe(
                        goal=goal,
                        uncached_input=uncached,
                        cached_input=cached,
                        output=output,
                        model=model,
                        at=at(t),
                    )
                elif kind == "price":
                    _, model, input_, output = one
                    ledger.price_set(
                        model=model,
                        input_usd_per_mtok=float(input_),
                        output_usd_per_mtok=float(output),
                    )  # now: priced by seq, whatever the time
                elif kind == "join":
                    ledger.configure(goal=one[1], pool="org", pool_share=0.3, at=at(t))
                elif kind == "leave":
                    ledger.configure(goal=one[1], leave_pool=True, at=at(t))
                else:
                    since = at(max(0.0, t - 7.5 * one[1]))
                    ledger.pool_configure(pool="org", cap_tokens=10**9, cap_since=since, at=at(t))
                # Now, not as of at(t): the prices are stamped now (priced by seq).
                spend = ledger.inspect(pool="org")["pools"]["org"]["spend"]
                tokens, usd, unpriced = independent_spend(list(ledger.log()), "org")
                assert Decimal(str(spend["tokens"])) == tokens
                assert Decimal(str(spend["usd"])) == usd
                assert spend["unpriced_tokens"] == unpriced
                assert parse_at(at(t)) >= parse_at(spend["since"] or at(0))
