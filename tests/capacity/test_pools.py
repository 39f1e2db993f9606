"""Pools (SPEC §12.1): configure rules, one name space, one clock, the fold and the
decision with exact figures, each reason alone and together, every dimension, the
pool's cooldown. The property test against an independent model is
test_pool_model.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotaledger import Error, Ledger
from quotaledger.journal.clock import US_PER_S, format_us, wall_us
from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import at

ZERO = {"uncached_input": 0, "cached_input": 0, "output": 0}


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger.open(str(tmp_path / "j.jsonl")) as opened:
        yield opened


def pool_of(ledger: Any, t: float = 0, **limits: Any) -> None:
    ledger.pool_configure(pool="org", at=at(t), **limits)


def join(ledger: Any, goal: str, share: float, t: float = 0, **terms: Any) -> dict[str, Any]:
    return ledger.configure(goal=goal, pool="org", pool_share=share, at=at(t), **terms)


def admit(ledger: Any, goal: str, run: str, t: float, **forecasts: Any) -> dict[str, Any]:
    return ledger.admit(goal=goal, run=run, at=at(t), **forecasts)


def pool_dim(answer: dict[str, Any], dimension: str = "tpm") -> dict[str, Any]:
    figures = answer["receipt"] if answer["admitted"] else answer["figures"]
    return figures["pool"]["dimensions"][dimension]


# -- configure -------------------------------------------------------------------------


def test_pool_configure_follows_configures_rule(ledger: Any) -> None:
    first = ledger.pool_configure(pool="org", quota_tpm=1000, at=at(0))
    assert first["config"]["limits"] == {"tpm": {"quota": 1000, "target": 900}}
    assert first["explicit"] == ["quota_tpm"]
    assert first["event"]["kind"] == "pool.configured"
    # The target never set explicitly follows its quota; a no-op appends nothing.
    second = ledger.pool_configure(pool="org", quota_tpm=2000, at=at(1))
    assert second["changes"] == {"quota_tpm": [1000, 2000], "target_tpm": [900, 1800]}
    again = ledger.pool_configure(pool="org", quota_tpm=2000, at=at(2))
    assert again["appended"] is False and again["changes"] == {}
    pinned = ledger.pool_configure(pool="org", target_tpm=1500, quota_rpm=100, at=at(3))
    assert pinned["explicit"] == ["quota_tpm", "target_tpm", "quota_rpm"]
    assert ledger.pool_configure(pool="org", quota_tpm=3000, at=at(4))["config"]["limits"][
        "tpm"
    ] == {"quota": 3000, "target": 1500}
    removed = ledger.pool_configure(pool="org", remove_limit=["rpm"], at=at(5))
    assert "rpm" not in removed["config"]["limits"]
    assert removed["explicit"] == ["quota_tpm", "target_tpm"]
    capped = ledger.pool_configure(pool="org", cap_tokens=10**6, at=at(6))
    assert capped["config"]["cap_since"] == at(6)
    assert capped["changes"]["cap_tokens"] == [None, 10**6]


def test_membership_is_recorded_on_both_streams(ledger: Any) -> None:
    pool_of(ledger, quota_tpm=1000)
    answer = join(ledger, "a", 0.33, priority=5)
    assert answer["config"]["pool"] == {
        "name": "org",
        "share": 0.33,
        "borrowing_limit": 0.67,
        "lending_limit": 0.33,
    }
    assert answer["config"]["priority"] == 5
    events = list(ledger.log(goal="org"))
    assert [e["kind"] for e in events] == ["pool.configured", "pool.membership"]
    assert events[1]["data"] == {
        "goal": "a",
        "share": 0.33,
        "borrowing_limit": 0.67,
        "lending_limit": 0.33,
        "priority": 5,
    }
    # The same terms again append nothing; leaving appends {goal, left: true}.
    assert join(ledger, "a", 0.33, priority=5)["appended"] is False
    left = ledger.configure(goal="a", leave_pool=True, at=at(1))
    assert left["changes"]["pool"][1] is None
    assert list(ledger.log(goal="org"))[-1]["data"] == {"goal": "a", "left": True}


def test_shares_are_exact_in_units_of_ten_thousandths(ledger: Any) -> None:
    pool_of(ledger, quota_tpm=10_000, target_tpm=10_000)
    join(ledger, "a", 0.33)
    join(ledger, "b", 0.56)
    join(ledger, "c", 0.11)  # 0.33 + 0.56 + 0.11 is exactly 1
    with pytest.raises(Error) as raised:
        join(ledger, "d", 0.0001)
    assert raised.value.code == "pool_overcommitted"
    assert "a=0.33" in raised.value.message and "d=0.0001" in raised.value.message


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("configure", {"goal": "a", "pool": "nope", "pool_share": 0.1}, "unknown_pool"),
    ("configure", {"goal": "a", "pool": "org", "pool_share": 0.6}, "pool_overcommitted"),
    ("configure", {"goal": "a", "pool": "org", "pool_share": 1.00001}, "invalid_pool_share"),
    ("configure", {"goal": "a", "pool": "org", "pool_share": 0.12345}, "invalid_pool_share"),
    ("configure", {"goal": "a", "pool": "org", "pool_share": -0.1}, "invalid_pool_share"),
    # Both overcommitted and invalid: invalid_pool_share wins.
    (
        "configure",
        {"goal": "a", "pool": "org", "pool_share": 0.6, "pool_borrowing_limit": 0.5},
        "invalid_pool_share",
    ),
    (
        "configure",
        {"goal": "a", "pool": "org", "pool_share": 0.3, "pool_lending_limit": 0.4},
        "invalid_pool_share",
    ),
    ("configure", {"goal": "a", "pool": "org"}, "invalid_pool_share"),
    ("configure", {"goal": "a", "pool_share": 0.1}, "invalid_pool_share"),
    ("configure", {"goal": "a", "priority": 1001, "max_active_cases": 1}, "invalid_config"),
    ("configure", {"goal": "a", "priority": -1001, "max_active_cases": 1}, "invalid_config"),
    ("configure", {"goal": "org", "max_active_cases": 1}, "name_taken"),
    ("budget_configure", {"goal": "org", "allowed_units": 1, "window_hours": 1}, "name_taken"),
    ("turn_open", {"goal": "org", "agent": "a", "turn": "t", "task": "x"}, "name_taken"),
    ("host_phase", {"goal": "org", "lane": "l", "deadline": "+1h"}, "name_taken"),
    ("pool_configure", {"pool": "taken", "quota_tpm": 10}, "name_taken"),
    ("pool_configure", {"pool": "p2", "target_tpm": 10}, "invalid_config"),
    ("pool_configure", {"pool": "p2", "quota_tpm": 10, "target_tpm": 11}, "invalid_config"),
    ("pool_configure", {"pool": "p2"}, "invalid_config"),
    (
        "configure",
        {"goal": "a", "pool": "org", "pool_share": 0.1, "at": at(-10)},
        "time_regression",
    ),
]


@pytest.mark.parametrize(("call", "kwargs", "code"), BAD)
def test_bad_input_is_exit_2_and_writes_nothing(
    ledger: Any, tmp_path: Path, call: str, kwargs: dict[str, Any], code: str
) -> None:
    pool_of(ledger, quota_tpm=1000)
    join(ledger, "b", 0.5)
    ledger.configure(goal="taken", max_active_cases=1, at=at(0))
    before = (tmp_path / "j.jsonl").read_bytes()
    with pytest.raises(Error) as raised:
        getattr(ledger, call)(**kwargs)
    assert raised.value.code == code
    assert raised.value.exit_code == 2
    assert (tmp_path / "j.jsonl").read_bytes() == before


def test_bad_input_through_the_cli_writes_nothing(cli: Any, journal_path: str) -> None:
    assert cli("pool", "configure", "--pool", "org", "--quota-tpm", "100").code == 0
    before = Path(journal_path).read_bytes()
    for args, code in (
        (["configure", "--goal", "g", "--pool", "org", "--pool-share", "1.00001"], "invalid_pool_share"),  # noqa: E501
        (["configure", "--goal", "g", "--pool", "orgg", "--pool-share", "0.5"], "unknown_pool"),
        (["configure", "--goal", "org", "--max-active-cases", "1"], "name_taken"),
        (["configure", "--goal", "g", "--priority", "5000"], "invalid_config"),
    ):  # fmt: skip
        done = cli(*args)
        assert done.code == 2 and done.json["error"]["code"] == code, done.stdout
    assert "did you mean 'org'" in cli(*args[:0], "configure", "--goal", "g", "--pool", "orgg",
                                       "--pool-share", "0.5").json["error"]["message"]  # fmt: skip
    assert Path(journal_path).read_bytes() == before


def test_pool_cooldowns_take_durations_as_a_goals_do(cli: Any, journal_path: str) -> None:
    done = cli("pool", "configure", "--pool", "org", "--cooldown-base-s", "1m",
               "--cooldown-max-s", "1h", "--quota-tpm", "100")  # fmt: skip
    assert done.code == 0, done.stdout
    assert done.json["changes"]["cooldown_base_s"] == [None, 60]
    assert done.json["changes"]["cooldown_max_s"] == [None, 3600]
    before = Path(journal_path).read_bytes()
    half = cli("pool", "configure", "--pool", "org", "--cooldown-base-s", "1.5s")
    assert half.code == 2 and half.json["error"]["code"] == "invalid_duration", half.stdout
    assert Path(journal_path).read_bytes() == before


# -- one clock per pool ------------------------------------------------------------------


def test_a_pooled_goal_shares_the_pools_clock(ledger: Any) -> None:
    pool_of(ledger, quota_tpm=1000)
    join(ledger, "a", 0.5)
    join(ledger, "b", 0.5, t=10)
    # b's event at 10 s: a's explicit time before it is a time regression.
    with pytest.raises(Error) as raised:
        ledger.observe(goal="a", **ZERO, at=at(5))
    assert raised.value.code == "time_regression"
    assert ledger.observe(goal="a", **ZERO, at=at(10))["ok"]


def test_an_unlocked_dry_run_decides_on_the_pools_clock(tmp_path: Path) -> None:
    """A read-only handle's `admit --dry-run` takes the time a real admit would: the
    pool's clock (SPEC §12.1), not the goal's own last event."""
    path = str(tmp_path / "j.jsonl")
    ahead = format_us(wall_us() + 120 * US_PER_S)  # within the clock-skew bound
    with Ledger.open(path) as writer:
        pool_of(writer, quota_tpm=1000)
        join(writer, "a", 0.5)
        join(writer, "b", 0.5)
        assert writer.admit(goal="a", run="r1", forecast_tpm=100, at=ahead)["admitted"]
        with pytest.raises(Error) as locked:
            writer.admit(goal="b", run="r2", forecast_tpm=100, dry_run=True, at=at(5))
        assert locked.value.code == "time_regression"
    with Ledger.open(path, write=False) as reader:
        with pytest.raises(Error) as unlocked:
            reader.admit(goal="b", run="r2", forecast_tpm=100, dry_run=True, at=at(5))
        assert unlocked.value.code == "time_regression"
        dry = reader.admit(goal="b", run="r2", forecast_tpm=100, dry_run=True)
        assert dry["admitted"] and dry["at"] == ahead


# -- the decision: every reason, alone and together -----------------------------------------


def two_goals(ledger: Any, **limits: Any) -> None:
    """a (share 0.5, lending 0.5) and b (share 0.5, lending 0.1), target 1000 each dim."""
    pool_of(ledger, **limits)
    join(ledger, "a", 0.5)
    join(ledger, "b", 0.5, pool_lending_limit=0.1)


def test_borrowing_up_to_the_protected_share_exactly(ledger: Any) -> None:
    two_goals(ledger, quota_tpm=1000, target_tpm=1000)
    # b is idle: 500 unused, of which it lends 0.1 x 1000 = 100: 400 guaranteed.
    first = admit(ledger, "a", "r1", 1, forecast_tpm=600)
    assert first["admitted"], first
    assert pool_dim(first) == {
        "usage": 0,
        "reserved": 0,
        "provider_used": None,
        "load": 0,
        "target": 1000,
        "forecast": 600,
        "share": 500,
        "goal_load": 0,
        "borrowed": 0,
        "protected_others": 400,
        "headroom": 600,
    }
    # At the bound exactly: 600 + 0 + 400 = 1000 (fits); one token more does not.
    refused = admit(ledger, "a", "r2", 2, forecast_tpm=1)
    assert refused["reasons"] == [R.POOL_SHARE_PROTECTED]
    assert pool_dim(refused)["borrowed"] == 100
    assert pool_dim(refused)["headroom"] == 0
    # b takes its own share: its guarantee is its own to use.
    assert admit(ledger, "b", "r3", 3, forecast_tpm=400)["admitted"]


def test_headroom_and_borrowing_limit(ledger: Any) -> None:
    pool_of(ledger, quota_rpm=100, target_rpm=100)
    join(ledger, "a", 0.3, pool_borrowing_limit=0.2, pool_lending_limit=0.3)
    join(ledger, "b", 0.7)
    # a may hold at most (0.3 + 0.2) x 100 = 50.
    assert admit(ledger, "a", "r1", 1, forecast_rpm=50)["admitted"]
    limited = admit(ledger, "a", "r2", 2, forecast_rpm=1)
    assert limited["reasons"] == [R.POOL_BORROWING_LIMIT]
    assert pool_dim(limited, "rpm")["headroom"] == 0
    assert admit(ledger, "b", "r3", 3, forecast_rpm=50)["admitted"]
    both = admit(ledger, "a", "r4", 4, forecast_rpm=10)
    assert both["reasons"] == [R.POOL_HEADROOM_EXHAUSTED, R.POOL_BORROWING_LIMIT]
    assert pool_dim(both, "rpm")["load"] == 100


def test_forecasts_required_and_impossible(ledger: Any) -> None:
    two_goals(ledger, quota_itpm=1000, target_itpm=1000, quota_otpm=500, target_otpm=500)
    missing = admit(ledger, "a", "r1", 1, forecast_itpm=10)
    assert missing["reasons"] == [R.POOL_FORECAST_REQUIRED]
    assert missing["figures"]["pool"]["binding_dimension"] == "otpm"
    # (0.5 + 0.5) x 500 = 500 is a's ceiling: 501 can never fit (and takes more).
    never = admit(ledger, "a", "r2", 2, forecast_itpm=10, forecast_otpm=501)
    assert never["reasons"] == [
        R.POOL_FORECAST_EXCEEDS_TARGET,
        R.POOL_HEADROOM_EXHAUSTED,
        R.POOL_BORROWING_LIMIT,
    ]
    assert never["figures"]["pool"]["binding_dimension"] == "otpm"


def test_daily_dimensions_count_in_the_pool(ledger: Any) -> None:
    two_goals(ledger, quota_tpd=10_000, target_tpd=10_000, quota_rpd=100, target_rpd=100)
    ledger.observe(goal="b", uncached_input=3000, cached_input=0, output=1000, at=at(1))
    ok = admit(ledger, "a", "r1", 2, forecast_tokens=2000, forecast_requests=10)
    assert ok["admitted"]
    assert pool_dim(ok, "tpd")["load"] == 4000 and pool_dim(ok, "rpd")["load"] == 1
    # The run's observations reduce its reservation: load = usage + remaining.
    ledger.observe(goal="a", run="r1", uncached_input=500, cached_input=0, output=0, at=at(3))
    after = admit(ledger, "b", "r2", 4, forecast_tokens=6000, forecast_requests=1)
    assert pool_dim(after, "tpd")["load"] == 4000 + 500 + 1500
    assert after["reasons"] == [R.POOL_HEADROOM_EXHAUSTED]


def test_the_pools_weight_counts_cached_input(ledger: Any) -> None:
    pool_of(ledger, quota_tpm=1000, target_tpm=1000, cached_input_weight=0.5)
    join(ledger, "a", 1)
    ledger.observe(goal="a", uncached_input=100, cached_input=300, output=0, at=at(1))
    answer = admit(ledger, "a", "r1", 2, forecast_tpm=1)
    assert pool_dim(answer)["usage"] == 250


def test_a_member_reject_cools_the_pool_down_with_a_shared_streak(ledger: Any) -> None:
    pool_of(ledger, quota_tpm=1000, cooldown_base_s=10, cooldown_max_s=100)
    join(ledger, "a", 0.5)
    join(ledger, "b", 0.5)
    ledger.reject(goal="a", at=at(1))
    ledger.reject(goal="b", at=at(2))  # the streak continues across members: 20 s
    cooldowns = [e["data"] for e in ledger.log(goal="org") if e["kind"] == "pool.cooldown"]
    assert [(c["goal"], c["streak"], c["cooldown_s"]) for c in cooldowns] == [
        ("a", 1, 10),
        ("b", 2, 20),
    ]
    assert cooldowns[1]["cooldown_until"] == at(22)
    refused = admit(ledger, "a", "r1", 21, forecast_tpm=1)
    assert refused["reasons"] == [R.POOL_COOLDOWN_ACTIVE]
    assert refused["figures"]["pool"]["binding_dimension"] is None
    assert admit(ledger, "a", "r1", 22, forecast_tpm=1)["admitted"]


def test_provider_reports_count_at_the_pool_once(ledger: Any) -> None:
    two_goals(ledger, quota_tpm=1000, target_tpm=1000)
    report = {"tpm": {"limit": 2000, "remaining": 1300, "reset_at": at(30)}}
    ledger.observe(goal="b", **ZERO, provider=report, at=at(1))
    ledger.observe(goal="a", uncached_input=100, cached_input=0, output=0, at=at(2))
    answer = admit(ledger, "a", "r1", 3, forecast_tpm=301)
    dim = pool_dim(answer)
    assert (dim["provider_used"], dim["load"], dim["usage"]) == (700, 700, 100)
    # remaining 1300 - 100 used since = 1200 >= 301; the target is what refuses.
    assert answer["reasons"] == [R.POOL_HEADROOM_EXHAUSTED]
    # Nowhere in the goal's own dimensions.
    assert answer["figures"]["dimensions"] == {}
    # A tighter report: 250 left, less 100 used since.
    tight = {"tpm": {"limit": 2000, "remaining": 250, "reset_at": at(30)}}
    ledger.observe(goal="a", **ZERO, provider=tight, at=at(4))
    low = admit(ledger, "b", "r2", 5, forecast_tpm=300)
    assert low["reasons"] == [R.POOL_HEADROOM_EXHAUSTED, R.POOL_PROVIDER_EXHAUSTED]
    assert admit(ledger, "b", "r2", 35, forecast_tpm=300)["admitted"]  # the report lapsed


def test_every_reason_at_once_each_once(ledger: Any) -> None:
    pool_of(ledger, quota_tpm=100, target_tpm=100, quota_otpm=100, target_otpm=100,
            quota_rpm=100, target_rpm=100, quota_tpd=1000, target_tpd=1000)  # fmt: skip
    join(ledger, "a", 0.05, pool_borrowing_limit=0.1)  # may hold (0.05 + 0.1) x 100 = 15
    join(ledger, "b", 0.95, pool_lending_limit=0)  # idle and lending nothing: 95 guaranteed
    report = {"otpm": {"limit": 100, "remaining": 5, "reset_at": at(50)}}
    ledger.observe(goal="b", **ZERO, provider=report, at=at(2))
    ledger.reject(goal="b", at=at(3))
    # tpm: over the target and a's ceiling; otpm: the provider's 5 left; rpm: 10 fits
    # the pool but takes b's guarantee; tpd: no forecast.
    answer = admit(ledger, "a", "r1", 4, forecast_tpm=101, forecast_otpm=10, forecast_rpm=10)
    assert answer["reasons"] == list(R.POOL_REASONS)
    assert answer["figures"]["pool"]["binding_dimension"] == "tpm"
    assert pool_dim(answer, "otpm")["provider_used"] == 95
    assert pool_dim(answer, "rpm")["protected_others"] == 95


def test_a_goal_in_a_pool_keeps_its_own_gates_first(ledger: Any) -> None:
    pool_of(ledger, quota_tpm=1000, target_tpm=1000)
    join(ledger, "a", 0.5)
    ledger.configure(goal="a", max_active_cases=1, at=at(0))
    assert admit(ledger, "a", "r1", 1, arm="baseline", forecast_tpm=10)["admitted"]
    second = admit(ledger, "a", "r2", 2, arm="baseline", forecast_tpm=2000)
    assert second["reasons"] == [
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
        R.BASELINE_CAPACITY_EXHAUSTED,
        R.RESERVED_TEST_CAPACITY,
        R.POOL_FORECAST_EXCEEDS_TARGET,
        R.POOL_HEADROOM_EXHAUSTED,
        R.POOL_BORROWING_LIMIT,
    ]


def test_verify_decisions_reproduces_pooled_decisions(ledger: Any, tmp_path: Path) -> None:
    two_goals(ledger, quota_tpm=1000, target_tpm=1000)
    admit(ledger, "a", "r1", 1, forecast_tpm=600)
    admit(ledger, "a", "r2", 2, forecast_tpm=1)
    ledger.reject(goal="b", at=at(3))
    admit(ledger, "b", "r3", 4, forecast_tpm=1)
    checked = ledger.verify(decisions=True)
    assert checked["ok"], checked
