"""Time arithmetic of SPEC §3.2: the 60 s window, cached weighting, coverage and
staleness, cooldown streaks and clamps, lease expiry and renewal — all as pure
functions of event times, driven through the CLI with explicit `--at`.
"""

from __future__ import annotations

import pytest

from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import Goal, at

TOKENS = {"quota_tpm": 100_000, "target_tpm": 90_000}


@pytest.fixture
def goal(cli):
    return Goal(cli)


def test_a_sample_exactly_60_s_old_is_out_of_the_window(goal):
    goal.ok("configure", 0, **TOKENS, max_observation_age_s=3600)
    goal.ok("observe", 10, uncached_input=1_000, cached_input=200, output=30)
    assert goal.inspect(10)["usage_tpm"] == 1_230
    assert goal.inspect(69.999999)["usage_tpm"] == 1_230
    at_boundary = goal.inspect(70)
    assert at_boundary["usage_tpm"] == 0
    assert at_boundary["usage"] == {
        "uncached_input": 0,
        "cached_input": 0,
        "cache_write_input": 0,
        "output": 0,
    }


def test_window_decides_admission_at_the_boundary(goal):
    goal.ok("configure", 0, **TOKENS, max_observation_age_s=3600)
    goal.ok("observe", 0, uncached_input=90_000, cached_input=0, output=0)
    body = goal.refused("admit", 59.999999, run="r1", forecast_tpm=1, dry_run=True)
    assert body["reasons"] == [R.TOKEN_HEADROOM_EXHAUSTED]
    admitted = goal.ok("admit", 60, run="r1", forecast_tpm=1)
    assert admitted["receipt"]["usage_tpm"] == 0


def test_samples_accumulate_and_leave_one_by_one(goal):
    goal.ok("configure", 0, **TOKENS)
    for second, tokens in ((0, 100), (20, 200), (40, 400)):
        goal.ok("observe", second, uncached_input=tokens, cached_input=0, output=0)
    assert goal.inspect(59)["usage_tpm"] == 700
    assert goal.inspect(60)["usage_tpm"] == 600
    assert goal.inspect(80)["usage_tpm"] == 400
    assert goal.inspect(100)["usage_tpm"] == 0


def test_cached_input_weighting_is_fractional_and_parts_stay_raw(goal):
    goal.ok("configure", 0, **TOKENS, cached_input_weight=0.25)
    goal.ok("observe", 1, uncached_input=1_000, cached_input=3, output=7)
    view = goal.inspect(2)
    assert view["usage_tpm"] == 1_007.75
    assert view["usage"] == {
        "uncached_input": 1_000,
        "cached_input": 3,
        "cache_write_input": 0,
        "output": 7,
    }
    body = goal.ok("admit", 3, run="r1", forecast_tpm=500)
    assert body["receipt"]["usage_tpm"] == 1_007.75
    assert body["receipt"]["usage"]["cached_input"] == 3


def test_cached_weight_zero_ignores_cached_tokens(goal):
    goal.ok("configure", 0, **TOKENS, cached_input_weight=0)
    goal.ok("observe", 1, uncached_input=0, cached_input=1_000_000, output=0)
    assert goal.inspect(2)["usage_tpm"] == 0
    assert goal.reasons(3, "r1", forecast_tpm=90_000) == []


def test_observation_staleness_boundary(goal):
    goal.ok("configure", 0, **TOKENS, max_observation_age_s=30)
    goal.heartbeat(10)
    assert goal.refused("admit", 40.000001, run="r1", forecast_tpm=1, dry_run=True)["reasons"] == [
        R.USAGE_OBSERVATION_STALE
    ]
    assert goal.ok("admit", 40, run="r1", forecast_tpm=1, dry_run=True)["admitted"]


def test_estimated_coverage_counts_as_fresh(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.ok("observe", 1, uncached_input=500, cached_input=0, output=0, coverage="estimated")
    view = goal.inspect(2)
    assert view["coverage"] == "estimated"
    assert view["observation_stale"] is False
    assert goal.reasons(3, "r1", forecast_tpm=100) == []


def test_unmetered_sample_blocks_until_it_leaves_the_window(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.ok("observe", 0, uncached_input=5_000, cached_input=0, output=0, coverage="unmetered")
    goal.heartbeat(50)
    view = goal.inspect(59)
    assert view["coverage"] == "unmetered"
    assert view["usage_tpm"] == 5_000  # its counts still count
    assert view["next_action"] == "observe_usage"
    assert goal.reasons(59.5, "r1", forecast_tpm=100) == [R.USAGE_UNMETERED_IN_WINDOW]
    assert goal.inspect(60)["coverage"] == "measured"
    assert goal.reasons(60, "r1", forecast_tpm=100) == []


def test_unmetered_only_is_both_unmetered_and_stale(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.ok("observe", 0, coverage="unmetered")
    assert goal.reasons(1, "r1", forecast_tpm=100) == [
        R.USAGE_UNMETERED_IN_WINDOW,
        R.USAGE_OBSERVATION_STALE,
    ]


def test_zero_token_measured_heartbeat_makes_usage_known(goal):
    goal.ok("configure", 0, **TOKENS)
    assert goal.inspect(1)["next_action"] == "observe_usage"
    goal.heartbeat(2)
    view = goal.inspect(3)
    assert (view["coverage"], view["observation_stale"]) == ("measured", False)
    assert view["usage_tpm"] == 0
    assert view["admission_ready"] is True
    assert view["next_action"] == "backfill_to_target"


def test_cooldown_streak_doubles_restarts_and_clamps(goal):
    goal.ok("configure", 0, **TOKENS, cooldown_base_s=10, cooldown_max_s=60)
    first = goal.ok("reject", 0, run="r1", detail="HTTP 429")
    assert (first["streak"], first["cooldown_s"], first["clamped"]) == (1, 10, False)
    assert first["cooldown_until"] == at(10)
    second = goal.ok("reject", 5)  # before 10 + 60: the streak continues
    assert (second["streak"], second["cooldown_s"], second["cooldown_until"]) == (2, 20, at(25))
    third = goal.ok("reject", 30)
    assert (third["streak"], third["cooldown_s"], third["cooldown_until"]) == (3, 40, at(70))
    fourth = goal.ok("reject", 129.999999)  # still before 70 + 60
    assert (fourth["streak"], fourth["cooldown_s"], fourth["clamped"]) == (4, 60, True)
    assert fourth["cooldown_until"] == at(189.999999)
    fresh = goal.ok("reject", 249.999999)  # exactly 189.999999 + 60: a new streak
    assert (fresh["streak"], fresh["cooldown_s"], fresh["clamped"]) == (1, 10, False)


def test_retry_after_is_honoured_and_clamped(goal):
    goal.ok("configure", 0, **TOKENS, cooldown_base_s=10, cooldown_max_s=60)
    goal.heartbeat(0)
    short = goal.ok("reject", 1, retry_after_s=5)
    assert (short["cooldown_s"], short["clamped"], short["cooldown_until"]) == (5, False, at(6))
    long = goal.ok("reject", 2, retry_after_s=3600)
    assert (long["cooldown_s"], long["clamped"], long["retry_after_s"]) == (60, True, 3600)
    assert long["cooldown_until"] == at(62)
    # A shorter Retry-After never shortens a running cooldown.
    later = goal.ok("reject", 3, retry_after_s=1)
    assert later["cooldown_until"] == at(62)
    goal.heartbeat(61)
    assert goal.reasons(61.999999, "r1", forecast_tpm=1) == [R.CAPACITY_COOLDOWN_ACTIVE]
    assert goal.inspect(61.999999)["next_action"] == "wait_for_cooldown"
    assert goal.reasons(62, "r1", forecast_tpm=1) == []  # it ends at cooldown_until


def test_reject_does_not_release_the_run(goal):
    goal.ok("configure", 0, max_active_cases=2)
    goal.reasons(1, "r1", arm="baseline")
    goal.ok("reject", 2, run="r1")
    assert [r["run"] for r in goal.inspect(3)["active_runs"]] == ["r1"]


def test_lease_ends_at_admitted_at_plus_lease(goal):
    goal.ok("configure", 0, max_active_cases=1)
    receipt = goal.ok("admit", 0, run="r1", arm="baseline", lease_s=30)["receipt"]
    assert receipt["lease_until"] == at(30)
    assert goal.reasons(29.999999, "r2", arm="treatment") == [
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
    ]
    assert goal.reasons(30, "r2", arm="treatment") == []
    # The expired run is no longer active: releasing it changes nothing.
    body = goal.ok("release", 31, run="r1")
    assert (body["released"], body["reasons"]) == (False, [R.RUN_NOT_ACTIVE])


def test_observe_with_run_renews_the_lease(goal):
    goal.ok("configure", 0, max_active_cases=1)
    goal.ok("admit", 0, run="r1", arm="baseline", lease_s=30)
    renewed = goal.ok("observe", 20, run="r1", uncached_input=10, cached_input=0, output=0)
    assert renewed["lease_until"] == at(50)
    # A renewal never shortens the lease.
    goal.ok("observe", 21, run="r1")
    assert goal.inspect(22)["active_runs"][0]["lease_until"] == at(51)
    assert goal.reasons(50.999999, "r2", arm="treatment")[0] == R.TARGET_CAPACITY_EXHAUSTED
    assert goal.reasons(51, "r2", arm="treatment") == []


def test_observe_after_the_lease_ended_does_not_revive_it(goal):
    goal.ok("configure", 0, max_active_cases=1)
    goal.ok("admit", 0, run="r1", arm="baseline", lease_s=10)
    goal.ok("observe", 10, run="r1")  # the lease ended at 10: too late
    view = goal.inspect(11)
    assert view["active_runs"] == []
    # The same request again is a fresh admission, not an idempotent replay.
    again = goal.ok("admit", 12, run="r1", arm="baseline", lease_s=10)
    assert (again["idempotent"], again["appended"]) == (False, True)


def test_observe_without_lease_or_for_unknown_run_is_plain_usage(goal):
    goal.ok("configure", 0, max_active_cases=2, **TOKENS)
    goal.heartbeat(0)
    goal.ok("admit", 1, run="r1", arm="baseline", forecast_tpm=1)
    body = goal.ok("observe", 2, run="r1", uncached_input=5, cached_input=0, output=0)
    assert (body["lease_until"], body["usage_tpm"]) == (None, 5)
    body = goal.ok("observe", 3, run="someone-else", uncached_input=5, cached_input=0, output=0)
    assert (body["lease_until"], body["usage_tpm"]) == (None, 10)
