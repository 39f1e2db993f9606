"""Every admission reason code of SPEC §3.3, produced through the CLI, alone and together.

Each test sets up a goal at explicit times and asserts the exact reason list (order
included) and that the refusal was journaled as `capacity.refused`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import Goal

TOKENS = {"quota_tpm": 100_000, "target_tpm": 90_000}


@pytest.fixture
def goal(cli):
    return Goal(cli)


def last_event(journal_path: str) -> dict:
    with open(journal_path, "rb") as handle:
        return json.loads(handle.read().splitlines()[-1])


def test_not_configured_is_the_only_reason(goal, journal_path):
    # A goal configured and then left with no gate (a never-configured goal is
    # unknown_goal, SPEC §8).
    goal.ok("configure", 0, max_active_cases=2)
    goal.ok("configure", 0, remove_gate="cases")
    body = goal.refused("admit", 0, run="r1", arm="treatment")
    assert body["reasons"] == [R.NOT_CONFIGURED]
    assert body["appended"] is True and body["event"]["kind"] == "capacity.refused"
    recorded = last_event(journal_path)
    assert recorded["kind"] == "capacity.refused"
    assert set(recorded["data"]) == {"request", "reasons", "figures"}
    assert recorded["data"]["reasons"] == [R.NOT_CONFIGURED]
    assert recorded["data"]["request"] == {
        "run": "r1",
        "case": None,
        "arm": "treatment",
        "class": "solver",
        "forecast_tpm": None,
        "lease_s": None,
    }


def test_target_capacity_exhausted_below_the_max(goal):
    goal.ok("configure", 0, max_active_cases=4, target_active_cases=2)
    assert goal.reasons(1, "r1", arm="baseline") == []
    assert goal.reasons(2, "r2", arm="treatment") == []
    assert goal.reasons(3, "r3", arm="control") == [R.TARGET_CAPACITY_EXHAUSTED]


def test_total_capacity_exhausted_comes_after_target(goal):
    goal.ok("configure", 0, max_active_cases=2)
    goal.reasons(1, "r1", arm="baseline")
    goal.reasons(2, "r2", arm="explore")
    assert goal.reasons(3, "r3", arm="treatment") == [
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
    ]


def test_baseline_capacity_exhausted(goal):
    goal.ok("configure", 0, max_active_cases=4, max_baseline_cases=1)
    assert goal.reasons(1, "b1", arm="baseline") == []
    assert goal.reasons(2, "b2", arm="baseline") == [R.BASELINE_CAPACITY_EXHAUSTED]
    assert goal.reasons(3, "t1", arm="treatment") == []  # the test group is not affected


def test_test_capacity_exhausted_counts_every_test_arm(goal):
    goal.ok("configure", 0, max_active_cases=4, max_test_cases=2)
    assert goal.reasons(1, "t1", arm="treatment") == []
    assert goal.reasons(2, "t2", arm="control") == []
    assert goal.reasons(3, "t3", arm="explore") == [R.TEST_CAPACITY_EXHAUSTED]
    assert goal.reasons(4, "b1", arm="baseline") == []


def test_reserved_test_capacity_keeps_slots_for_test_arms(goal):
    # target 4, 2 test slots reserved: baselines may take 2, the last 2 wait for tests.
    goal.ok("configure", 0, max_active_cases=4, max_baseline_cases=4, reserved_test_cases=2)
    assert goal.reasons(1, "b1", arm="baseline") == []
    assert goal.reasons(2, "b2", arm="baseline") == []
    assert goal.reasons(3, "b3", arm="baseline") == [R.RESERVED_TEST_CAPACITY]
    assert goal.reasons(4, "t1", arm="treatment") == []
    # One test run active: one reserved slot is still owed (target - (3+1) = 0 < 2 - 1).
    assert goal.reasons(5, "b3", arm="baseline") == [R.RESERVED_TEST_CAPACITY]
    goal.ok("release", 6, run="b1")
    # b2, t1 active: a third run still leaves the one slot owed to the test arms.
    assert goal.reasons(7, "b3", arm="baseline") == []
    assert goal.reasons(8, "b4", arm="baseline") == [R.RESERVED_TEST_CAPACITY]
    assert goal.reasons(9, "t2", arm="control") == []


def test_reserved_test_capacity_default_baseline_cap(goal):
    # Without --max-baseline-cases the baseline cap defaults to max - reserved.
    config = goal.ok("configure", 0, max_active_cases=3, reserved_test_cases=1)["config"]
    assert config["cases"] == {
        "max_active_cases": 3,
        "target_active_cases": 3,
        "max_baseline_cases": 2,
        "max_test_cases": 3,
        "reserved_test_cases": 1,
    }
    goal.reasons(1, "b1", arm="baseline")
    goal.reasons(2, "b2", arm="baseline")
    assert goal.reasons(3, "b3", arm="baseline") == [
        R.BASELINE_CAPACITY_EXHAUSTED,
        R.RESERVED_TEST_CAPACITY,
    ]
    assert goal.reasons(4, "t1", arm="explore") == []


def test_full_target_also_fails_the_reserved_formula_for_a_baseline(goal):
    # SPEC §3.3's formula taken literally: with the target full, target - (active+1) < 0
    # = max(0, reserved - active_test) even when nothing is reserved.
    goal.ok("configure", 0, max_active_cases=1)
    goal.reasons(1, "b1", arm="baseline")
    assert goal.reasons(2, "b2", arm="baseline") == [
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
        R.BASELINE_CAPACITY_EXHAUSTED,
        R.RESERVED_TEST_CAPACITY,
    ]


def test_case_arm_required_is_last_of_the_case_gate(goal):
    goal.ok("configure", 0, max_active_cases=1)
    assert goal.reasons(1, "r1", case="c1") == [R.CASE_ARM_REQUIRED]
    goal.reasons(2, "r1", case="c1", arm="baseline")
    assert goal.reasons(3, "r2") == [
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
        R.CASE_ARM_REQUIRED,
    ]


def test_token_forecast_required(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.heartbeat(1)
    assert goal.reasons(2, "r1") == [R.TOKEN_FORECAST_REQUIRED]
    assert goal.reasons(3, "r1", forecast_tpm=0) == []  # a zero forecast is a forecast


def test_forecast_exceeds_target_can_never_fit(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.heartbeat(1)
    # Every failing reason is collected: a forecast above target cannot fit the headroom.
    assert goal.reasons(2, "r1", forecast_tpm=90_001) == [
        R.FORECAST_EXCEEDS_TARGET,
        R.TOKEN_HEADROOM_EXHAUSTED,
    ]
    assert goal.reasons(3, "r1", forecast_tpm=90_000) == []


def test_capacity_cooldown_active(goal):
    goal.ok("configure", 0, **TOKENS, cooldown_base_s=10)
    goal.heartbeat(1)
    goal.ok("reject", 2, run="r0")
    assert goal.reasons(3, "r1", forecast_tpm=1000) == [R.CAPACITY_COOLDOWN_ACTIVE]
    goal.heartbeat(11)
    assert goal.reasons(12, "r1", forecast_tpm=1000) == []


def test_usage_unmetered_in_window(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.ok("observe", 1, uncached_input=100, cached_input=0, output=0, coverage="unmetered")
    goal.heartbeat(2)
    assert goal.reasons(3, "r1", forecast_tpm=1000) == [R.USAGE_UNMETERED_IN_WINDOW]


def test_usage_observation_stale_without_any_observation(goal):
    goal.ok("configure", 0, **TOKENS)
    assert goal.reasons(1, "r1", forecast_tpm=1000) == [R.USAGE_OBSERVATION_STALE]


def test_token_headroom_exhausted(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.ok("observe", 1, uncached_input=60_000, cached_input=10_000, output=10_000)
    body = goal.refused("admit", 2, run="r1", forecast_tpm=10_001)
    assert body["reasons"] == [R.TOKEN_HEADROOM_EXHAUSTED]
    figures = body["figures"]
    assert figures["usage_tpm"] == 80_000
    assert figures["load_tpm"] == 80_000
    assert figures["headroom_tpm"] == 10_000
    assert figures["target_tpm"] == 90_000
    assert goal.reasons(3, "r1", forecast_tpm=10_000) == []


def test_cold_start_reserve_is_kept_free(goal):
    goal.ok("configure", 0, **TOKENS, cold_start_reserve_tpm=5_000)
    goal.ok("observe", 1, uncached_input=80_000, cached_input=0, output=0)
    assert goal.reasons(2, "r1", forecast_tpm=5_001) == [R.TOKEN_HEADROOM_EXHAUSTED]
    assert goal.reasons(3, "r1", forecast_tpm=5_000) == []


def test_evaluator_reserve_protected_for_solvers_only(goal):
    goal.ok("configure", 0, **TOKENS, evaluator_reserve_tpm=10_000)
    goal.ok("observe", 1, uncached_input=70_000, cached_input=0, output=0)
    # 70000 + 15000 fits the target but not the target minus the evaluator reserve.
    assert goal.reasons(2, "s1", forecast_tpm=15_000) == [R.EVALUATOR_RESERVE_PROTECTED]
    assert goal.reasons(3, "e1", forecast_tpm=15_000, class_="evaluator") == []
    # load is still max(usage 70000, reserved 15000); beyond the target itself it is plain
    # headroom exhaustion, for either class.
    assert goal.reasons(4, "s2", forecast_tpm=20_001) == [R.TOKEN_HEADROOM_EXHAUSTED]
    assert goal.reasons(5, "e2", forecast_tpm=20_001, class_="evaluator") == [
        R.TOKEN_HEADROOM_EXHAUSTED
    ]


def test_reserved_forecasts_count_as_load(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.ok("observe", 1, uncached_input=10_000, cached_input=0, output=0)
    assert goal.reasons(2, "r1", forecast_tpm=50_000) == []
    # load = max(usage 10000, reserved 50000): no double counting of r1's own usage.
    body = goal.refused("admit", 3, run="r2", forecast_tpm=40_001)
    assert body["reasons"] == [R.TOKEN_HEADROOM_EXHAUSTED]
    assert body["figures"]["reserved_tpm"] == 50_000
    assert body["figures"]["load_tpm"] == 50_000
    assert goal.reasons(4, "r2", forecast_tpm=40_000) == []


def test_run_exists_with_different_request(goal, journal_path):
    goal.ok("configure", 0, max_active_cases=4)
    goal.reasons(1, "r1", arm="baseline", case="c1")
    body = goal.refused("admit", 2, run="r1", arm="treatment", case="c1")
    assert body["reasons"] == [R.RUN_EXISTS_WITH_DIFFERENT_REQUEST]
    assert body["appended"] is True
    assert last_event(journal_path)["kind"] == "capacity.refused"


def test_case_and_token_reasons_are_reported_together_in_order(goal):
    goal.ok("configure", 0, max_active_cases=2, **TOKENS, cooldown_base_s=60)
    goal.ok("observe", 1, uncached_input=85_000, cached_input=0, output=0)
    goal.reasons(2, "r1", arm="baseline", forecast_tpm=1_000)
    goal.reasons(3, "r2", arm="treatment", forecast_tpm=1_000)
    goal.ok("reject", 4)
    assert goal.reasons(5, "r3", arm="control", forecast_tpm=5_001) == [
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
        R.CAPACITY_COOLDOWN_ACTIVE,
        R.TOKEN_HEADROOM_EXHAUSTED,
    ]
    # Later, with the observation stale and an unmetered sample in the window.
    goal.ok("observe", 70, uncached_input=0, cached_input=0, output=0, coverage="unmetered")
    assert goal.reasons(71, "r3") == [
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
        R.CASE_ARM_REQUIRED,
        R.TOKEN_FORECAST_REQUIRED,
        R.USAGE_UNMETERED_IN_WINDOW,
        R.USAGE_OBSERVATION_STALE,
    ]


def test_refusal_counters_by_reason(goal):
    goal.ok("configure", 0, max_active_cases=1, **TOKENS)
    goal.reasons(1, "r1", arm="baseline", forecast_tpm=1)  # stale
    goal.reasons(2, "r2")  # arm, forecast, stale
    totals = goal.inspect()["totals"]
    assert totals["admissions"] == 0
    assert totals["refusals"] == 2
    assert totals["refusals_by_reason"] == {
        R.CASE_ARM_REQUIRED: 1,
        R.TOKEN_FORECAST_REQUIRED: 1,
        R.USAGE_OBSERVATION_STALE: 2,
    }


def test_every_reason_code_is_covered_by_these_tests():
    """Guards this folder: a new reason code must get a test."""
    here = Path(__file__).parent
    source = "".join(path.read_text(encoding="utf-8") for path in here.glob("test_*.py"))
    names = [n for n, v in vars(R).items() if isinstance(v, str) and n.isupper()]
    named = {getattr(R, n) for n in names}
    # The other dimensions' reasons are built from a table (R.DIMENSION_REASONS); each
    # is spelled out in the dimension tests.
    built = [r for r in R.CAPACITY_REASONS if r not in named]
    # Every code is listed by exactly one domain; the capacity ones are tested here.
    assert len(names) + len(built) == len(R.EVERY_REASON) == len(set(R.EVERY_REASON))
    capacity = [name for name in names if getattr(R, name) in R.CAPACITY_REASONS]
    assert len(capacity) + len(built) == len(R.CAPACITY_REASONS)
    assert [name for name in capacity if f"R.{name}" not in source] == []
    assert [reason for reason in built if f'"{reason}"' not in source] == []
