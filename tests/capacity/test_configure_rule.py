"""configure changes only what it is given (SPEC §3.5); whatif applies the same rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from tests.capacity.capacity_helpers import at
from tests.support import run_cli


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "j.jsonl")


def _tokens(answer: dict[str, Any]) -> dict[str, Any]:
    return answer["config"]["tokens"]


def test_a_new_quota_keeps_the_reserves(path: str) -> None:
    """issue 19: `configure --quota-tpm 1000` silently reset the reserves to 0."""
    with Ledger.open(path) as ledger:
        ledger.configure(
            goal="swe", quota_tpm=2_000, evaluator_reserve_tpm=200, cold_start_reserve_tpm=100,
            cached_input_weight=0.5, at=at(0),
        )  # fmt: skip
        answer = ledger.configure(goal="swe", quota_tpm=1_000, at=at(1))
    tokens = _tokens(answer)
    assert (tokens["evaluator_reserve_tpm"], tokens["cold_start_reserve_tpm"]) == (200, 100)
    assert tokens["cached_input_weight"] == 0.5
    assert tokens["target_tpm"] == 900  # the default target follows its quota
    assert answer["changes"] == {"quota_tpm": [2_000, 1_000], "target_tpm": [1_800, 900]}


def test_an_explicit_target_stays_and_the_event_records_it(path: str) -> None:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=1_000, target_tpm=900, at=at(0))
        answer = ledger.configure(goal="g", quota_tpm=5_000, at=at(1))
        assert _tokens(answer)["target_tpm"] == 900  # set explicitly (equal to the default)
        assert answer["explicit"] == ["quota_tpm", "target_tpm"]
        assert answer["changes"] == {"quota_tpm": [1_000, 5_000]}
        ledger.configure(goal="g", max_active_cases=3, at=at(2))
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert lines[-1]["data"]["explicit"] == ["max_active_cases", "quota_tpm", "target_tpm"]


def test_case_defaults_follow_max_active_cases(path: str) -> None:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=3, reserved_test_cases=1, at=at(0))
        answer = ledger.configure(goal="g", max_active_cases=6, at=at(1))
        cases = answer["config"]["cases"]
        assert cases == {
            "max_active_cases": 6,
            "target_active_cases": 6,
            "max_baseline_cases": 5,
            "max_test_cases": 6,
            "reserved_test_cases": 1,
        }
        answer = ledger.configure(goal="g", target_active_cases=4, at=at(2))
        answer = ledger.configure(goal="g", max_active_cases=8, at=at(3))
        assert answer["config"]["cases"]["target_active_cases"] == 4  # explicit now
        assert answer["config"]["cases"]["max_test_cases"] == 8  # still a default


def test_a_dimension_target_follows_its_quota(path: str) -> None:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_rpm=100, evaluator_reserve_rpm=5, at=at(0))
        answer = ledger.configure(goal="g", quota_rpm=50, at=at(1))
    assert _tokens(answer)["limits"]["rpm"] == {
        "quota": 50,
        "target": 45,
        "evaluator_reserve": 5,
        "cold_start_reserve": 0,
    }


def test_a_config_recorded_without_explicit_keeps_a_target_that_is_not_the_default(
    path: str,
) -> None:
    """Journals written before `explicit` existed: a value its source would not give
    can only have been given."""
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=1_000, target_tpm=500, at=at(0))
    lines = Path(path).read_text().splitlines()
    # The same configure as the first version wrote it (no explicit member).
    with Ledger.open(str(Path(path).with_name("old.jsonl"))) as old:
        with old.journal.transaction() as txn:
            data = json.loads(lines[1])["data"]
            del data["explicit"]
            txn.append("capacity.configured", "g", json.dumps(data).encode(), at(0))
        answer = old.configure(goal="g", quota_tpm=2_000, at=at(1))
    assert _tokens(answer)["target_tpm"] == 500


def _whatif(path: str, *args: Any) -> dict[str, Any]:
    result = run_cli("whatif", "--journal", path, "--json", "--goal", "g", *map(str, args))
    assert result.code == 0, result.stdout
    return result.json


def test_whatif_more_slots_moves_the_default_target_and_caps(path: str) -> None:
    """issue 19: `whatif --max-active-cases 6` on a 3-slot goal found no flip."""
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=3, at=at(0))
        for number in range(5):
            ledger.admit(goal="g", run=f"r{number}", arm="treatment", at=at(1 + number))
    flips = _whatif(path, "--max-active-cases", 6)["flips"]
    assert [(f["run"], f["whatif_admitted"]) for f in flips] == [("r3", True), ("r4", True)]
    # an explicit target stays: with --target-active-cases 3 nothing flips
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", target_active_cases=3, at=at(10))
        for number in range(5, 7):
            ledger.admit(goal="g", run=f"r{number}", arm="control", at=at(11))
    later = _whatif(path, "--max-active-cases", 6, "--since", at(10))["flips"]
    assert later == []


def test_whatif_a_larger_quota_keeps_the_reserves(path: str) -> None:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=1_000, evaluator_reserve_tpm=500, at=at(0))
        ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=at(1))
        ledger.admit(goal="g", run="a", forecast_tpm=600, at=at(2))  # 600 > 900 - 500
    # 2000: target 1800; the reserve stays 500, so 600 fits (1300 available)
    flips = _whatif(path, "--quota-tpm", 2_000)["flips"]
    assert [(f["run"], f["whatif_admitted"]) for f in flips] == [("a", True)]
    assert _whatif(path, "--quota-tpm", 1_200)["flips"] == []  # 1080 - 500 < 600
