"""The six capacity commands (SPEC §3.5, §8): JSON shapes, idempotency, dry runs, time
rules, configuration rules, goal isolation, human text and the Python API."""

from __future__ import annotations

import json

import pytest

from quotaledger.api import Ledger
from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import Goal, at, flags
from tests.support import line_count, run_cli

TOKENS = {"quota_tpm": 100_000, "target_tpm": 90_000}


@pytest.fixture
def goal(cli):
    return Goal(cli)


def head(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read().splitlines()[-1]


# -- admit ---------------------------------------------------------------------------


def test_admit_json_shape_and_receipt(goal):
    goal.ok("configure", 0, max_active_cases=4, **TOKENS)
    goal.ok("observe", 1, uncached_input=1_000, cached_input=500, output=250)
    body = goal.ok(
        "admit", 2, run="r1", case="c7", arm="treatment", forecast_tpm=12_000, lease_s=600
    )
    assert {"ok", "admitted", "idempotent", "appended", "receipt", "event"} <= set(body)
    assert (body["ok"], body["admitted"], body["idempotent"], body["appended"]) == (
        True,
        True,
        False,
        True,
    )
    receipt, event = body["receipt"], body["event"]
    assert set(event) == {"seq", "hash", "kind", "at"}
    assert event["kind"] == "capacity.admitted"
    assert (receipt["run"], receipt["seq"], receipt["hash"], receipt["at"]) == (
        "r1",
        event["seq"],
        event["hash"],
        at(2),
    )
    assert receipt["usage_tpm"] == 1_750
    assert receipt["usage"] == {
        "uncached_input": 1_000,
        "cached_input": 500,
        "cache_write_input": 0,
        "output": 250,
    }
    assert (receipt["reserved_tpm"], receipt["load_tpm"], receipt["target_tpm"]) == (
        0,
        1_750,
        90_000,
    )
    assert receipt["headroom_tpm"] == 90_000 - 1_750
    assert (receipt["forecast_tpm"], receipt["coverage"], receipt["cooldown_until"]) == (
        12_000,
        "measured",
        None,
    )
    assert receipt["active_cases"] == {"total": 0, "baseline": 0, "test": 0}
    assert (receipt["cases"], receipt["tokens"], receipt["lease_until"]) == (
        "slot_taken",
        "reserved",
        at(602),
    )


def test_identical_admit_is_an_idempotent_replay(goal, journal_path):
    goal.ok("configure", 0, max_active_cases=2)
    first = goal.ok("admit", 1, run="r1", arm="baseline", case="c1")
    lines, last = line_count(journal_path), head(journal_path)
    replay = goal("admit", 5, run="r1", arm="baseline", case="c1")
    assert replay.code == 0
    body = replay.json
    assert (body["admitted"], body["idempotent"], body["appended"], body["event"]) == (
        True,
        True,
        False,
        None,
    )
    assert body["receipt"] == first["receipt"]  # the original receipt, seq and hash included
    assert line_count(journal_path) == lines and head(journal_path) == last


def test_replay_without_explicit_time_is_idempotent_too(cli, journal_path):
    goal = Goal(cli)
    goal.ok("configure", None, max_active_cases=1)
    first = goal.ok("admit", None, run="r1", arm="explore")
    lines = line_count(journal_path)
    assert goal.ok("admit", None, run="r1", arm="explore")["receipt"] == first["receipt"]
    assert line_count(journal_path) == lines


def test_different_request_for_an_active_run_is_refused(goal):
    goal.ok("configure", 0, max_active_cases=2, **TOKENS)
    goal.heartbeat(0)
    goal.ok("admit", 1, run="r1", arm="baseline", forecast_tpm=1_000)
    body = goal.refused("admit", 2, run="r1", arm="baseline", forecast_tpm=2_000)
    assert body["reasons"] == [R.RUN_EXISTS_WITH_DIFFERENT_REQUEST]
    assert body["figures"]["reserved_tpm"] == 1_000
    # After release the run may be admitted again, with a new request.
    goal.ok("release", 3, run="r1")
    assert goal.ok("admit", 4, run="r1", arm="baseline", forecast_tpm=2_000)["appended"]


def test_dry_run_appends_nothing(goal, journal_path):
    goal.ok("configure", 0, max_active_cases=1)
    lines, last = line_count(journal_path), head(journal_path)
    would = goal.ok("admit", 1, run="r1", arm="baseline", dry_run=True)
    assert (would["admitted"], would["appended"], would["dry_run"], would["event"]) == (
        True,
        False,
        True,
        None,
    )
    assert would["receipt"]["seq"] is None
    goal.ok("admit", 2, run="r1", arm="baseline")
    lines, last = line_count(journal_path), head(journal_path)
    refused = goal.refused("admit", 3, run="r2", arm="baseline", dry_run=True)
    assert refused["appended"] is False and refused["reasons"][0] == R.TARGET_CAPACITY_EXHAUSTED
    assert line_count(journal_path) == lines and head(journal_path) == last


def test_dry_run_never_creates_a_journal(tmp_path):
    path = tmp_path / "none.jsonl"
    result = run_cli("admit", "--journal", path, "--json", "--goal", "g", "--run", "r", "--dry-run")
    assert result.code == 3 and result.json["error"]["code"] == "journal_not_found"
    assert not path.exists()


@pytest.mark.parametrize(
    "command, options",
    [
        ("configure", {"max_active_cases": 2}),
        ("observe", {"uncached_input": 1}),
        ("admit", {"run": "r9", "arm": "baseline"}),
        ("admit", {"run": "r9", "arm": "baseline", "dry_run": True}),
        ("reject", {"retry_after_s": 5}),
        ("release", {"run": "r1"}),
    ],
)
def test_explicit_backwards_time_is_refused_and_writes_nothing(
    goal, journal_path, command, options
):
    goal.ok("configure", 0, max_active_cases=2)
    goal.ok("admit", 10, run="r1", arm="baseline")
    lines, last = line_count(journal_path), head(journal_path)
    result = goal(command, 9.999999, **options)
    assert result.code == 2
    assert result.json["error"]["code"] == "time_regression"
    assert line_count(journal_path) == lines and head(journal_path) == last


def test_time_is_per_goal(cli):
    a, b = Goal(cli, "a"), Goal(cli, "b")
    a.ok("configure", 100, max_active_cases=1)
    b.ok("configure", 0, max_active_cases=1)  # another goal's clock is its own
    assert b.ok("admit", 1, run="r1", arm="baseline")["admitted"]


# -- release, reject -----------------------------------------------------------------


def test_release_json_and_release_of_inactive_run(goal, journal_path):
    goal.ok("configure", 0, max_active_cases=1)
    goal.ok("admit", 1, run="r1", arm="baseline")
    body = goal.ok("release", 2, run="r1")
    assert {"ok", "released", "appended", "reasons", "event"} <= set(body)
    assert (body["released"], body["appended"], body["reasons"]) == (True, True, [])
    assert body["event"]["kind"] == "capacity.released"
    lines = line_count(journal_path)
    for run in ("r1", "never-admitted"):
        again = goal("release", 3, run=run)
        assert again.code == 0
        assert again.json == {
            "ok": True,
            "goal": "g",
            "run": run,
            "released": False,
            "appended": False,
            "reasons": [R.RUN_NOT_ACTIVE],
        }
    assert line_count(journal_path) == lines
    assert goal.ok("admit", 4, run="r2", arm="baseline")["admitted"]


def test_reject_payload_keys(goal, journal_path):
    goal.ok("configure", 0, quota_tpm=1000)
    goal.ok("reject", 0, run="r1", retry_after_s=20, detail="HTTP 429 Too Many Requests")
    with open(journal_path, "rb") as handle:
        data = json.loads(handle.read().splitlines()[-1])["data"]
    assert data == {
        "run": "r1",
        "retry_after_s": 20,
        "cooldown_s": 20,
        "clamped": False,
        "cooldown_until": at(20),
        "streak": 1,
        "detail": "HTTP 429 Too Many Requests",
    }


# -- configure -----------------------------------------------------------------------


def test_configure_with_one_gate_keeps_the_other(goal):
    goal.ok("configure", 0, max_active_cases=3, quota_tpm=100_000, evaluator_reserve_tpm=1_000)
    tokens_only = goal.ok("configure", 1, quota_tpm=50_000)["config"]
    assert tokens_only["cases"]["max_active_cases"] == 3
    assert tokens_only["tokens"]["quota_tpm"] == 50_000
    assert tokens_only["tokens"]["target_tpm"] == 45_000  # a default follows its quota
    assert tokens_only["tokens"]["evaluator_reserve_tpm"] == 1_000  # only what is given changes
    cases_only = goal.ok("configure", 2, max_active_cases=5)["config"]
    assert cases_only["tokens"] == tokens_only["tokens"]
    assert cases_only["cases"]["max_active_cases"] == 5
    assert goal.inspect(3)["config"] == cases_only


def test_token_config_defaults(goal):
    config = goal.ok("configure", 0, quota_tpm=1_000)["config"]
    assert config == {
        "cases": None,
        "tokens": {
            "quota_tpm": 1_000,
            "target_tpm": 900,
            "evaluator_reserve_tpm": 0,
            "cold_start_reserve_tpm": 0,
            "cached_input_weight": 1.0,
            "max_observation_age_s": 60,
            "cooldown_base_s": 15,
            "cooldown_max_s": 300,
            "limits": {},
        },
    }


@pytest.mark.parametrize(
    "options",
    [
        {"max_active_cases": 0},
        {"max_active_cases": 1025},
        {"max_active_cases": 4, "target_active_cases": 5},
        {"max_active_cases": 4, "max_baseline_cases": 5},
        {"max_active_cases": 4, "max_test_cases": 5},
        {"max_active_cases": 4, "max_test_cases": 2, "reserved_test_cases": 3},
        {"max_active_cases": 4, "reserved_test_cases": 5},
        {"max_active_cases": 4, "max_baseline_cases": 1, "max_test_cases": 2},
        {"target_active_cases": 5},
        {"quota_tpm": 0},
        {"quota_tpm": 10**12 + 1},
        {"quota_tpm": 1_000, "target_tpm": 1_001},
        {"quota_tpm": 1_000, "evaluator_reserve_tpm": 500, "cold_start_reserve_tpm": 401},
        {"quota_tpm": 1_000, "cached_input_weight": 1.5},
        {"quota_tpm": 1_000, "cached_input_weight": -0.1},
        {"quota_tpm": 1_000, "cooldown_max_s": 86_401},
        {"quota_tpm": 1_000, "cooldown_base_s": -1},
        {"target_tpm": 1_000},
        {},
    ],
)
def test_invalid_config_is_exit_2_and_writes_nothing(goal, journal_path, options):
    goal.ok("configure", 0, max_active_cases=2)
    lines = line_count(journal_path)
    result = goal("configure", 1, **options)
    assert result.code == 2, result.stdout
    error = result.json["error"]
    # Every bad value of a config field is invalid_config, a negative number of seconds
    # (which is not a duration at all) included: one code per option (SPEC §8).
    assert error["code"] == "invalid_config"
    assert error["message"]
    assert line_count(journal_path) == lines


def test_invalid_config_message_names_the_rule(journal_path):
    result = run_cli(
        "configure", "--journal", journal_path, "--goal", "g", "--max-active-cases", "4",
        "--target-active-cases", "6",
    )  # fmt: skip
    assert result.code == 2
    assert "--target-active-cases (6) must be <= --max-active-cases (4)" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_below_occupancy(goal, journal_path):
    goal.ok("configure", 0, max_active_cases=4)
    runs = [("b1", "baseline"), ("t1", "treatment"), ("t2", "control")]
    for second, (run, arm) in enumerate(runs, start=1):
        goal.ok("admit", second, run=run, arm=arm)
    lines = line_count(journal_path)
    for options in (
        {"max_active_cases": 2},
        {"max_active_cases": 4, "max_test_cases": 1},
        {"max_active_cases": 4, "max_baseline_cases": 0},
    ):
        body = goal.refused("configure", 5, **options)
        assert body["reasons"] == [R.CONFIG_BELOW_OCCUPANCY]
        assert body["appended"] is False
    assert line_count(journal_path) == lines
    # A target below occupancy is allowed: runs drain, and inspect says to release.
    goal.ok("configure", 6, max_active_cases=4, target_active_cases=2)
    view = goal.inspect(7)
    assert [r["run"] for r in view["active_runs"]] == ["b1", "t1", "t2"]
    assert view["next_action"] == "release_runs"
    goal.ok("configure", 8, max_active_cases=3)  # exactly at occupancy is fine


def test_bad_inputs_are_exit_2(goal, journal_path):
    goal.ok("configure", 0, max_active_cases=2, **TOKENS)
    lines = line_count(journal_path)
    bad = [
        ("admit", {"run": "bad run"}),
        ("admit", {"run": "r", "arm": "placebo"}),
        ("admit", {"run": "r", "class_": "judge"}),
        ("admit", {"run": "r", "forecast_tpm": -1}),
        ("admit", {"run": "r", "lease_s": 0}),
        ("admit", {"run": "r", "case": "x" * 129}),
        ("observe", {"coverage": "guessed"}),
        ("observe", {"output": 10**12 + 1}),
        ("observe", {"source": "s" * 5000}),
        ("observe", {"source": "bytes \udcff from argv"}),
        ("reject", {"detail": "\udcfe"}),
        ("reject", {"retry_after_s": -1}),
        ("release", {"run": "r/../\n"}),
        ("inspect", {"seq": 10**6}),
    ]
    for command, options in bad:
        result = goal(command, None, **options)
        assert result.code == 2, (command, options, result.stdout)
        assert "error" in result.json
    bad_time = run_cli("admit", "--journal", journal_path, "--json", "--goal", "g", "--run", "r",
                       "--at", "2026-11-29T14:00:00")  # fmt: skip
    assert bad_time.code == 2 and bad_time.json["error"]["code"] == "invalid_time"
    assert line_count(journal_path) == lines


# -- goals ---------------------------------------------------------------------------


def test_goals_are_isolated(cli):
    a, b = Goal(cli, "a"), Goal(cli, "b")
    a.ok("configure", 0, max_active_cases=1, **TOKENS)
    b.ok("configure", 0, max_active_cases=1, **TOKENS)
    a.ok("observe", 1, uncached_input=89_000, cached_input=0, output=0)
    b.heartbeat(1)
    a.ok("reject", 2)
    assert a.reasons(3, "r1", arm="baseline", forecast_tpm=5_000) == [
        R.CAPACITY_COOLDOWN_ACTIVE,
        R.TOKEN_HEADROOM_EXHAUSTED,
    ]
    assert b.reasons(3, "r1", arm="baseline", forecast_tpm=5_000) == []  # same run id, other goal
    # SPEC §7: a goal no event names is unknown_goal, never an empty, healthy goal.
    assert cli("inspect", "--goal", "c").json["error"]["code"] == "unknown_goal"
    both = a.ok("inspect", None)  # --goal a only
    assert list(both["goals"]) == ["a"]
    everything = cli("inspect").json["goals"]
    assert sorted(everything) == ["a", "b"]


def test_case_only_goal_needs_no_token_options(goal):
    goal.ok("configure", 0, max_active_cases=2)
    plain = goal.ok("admit", 1, run="r1", arm="baseline")
    assert (plain["receipt"]["tokens"], plain["receipt"]["target_tpm"]) == ("not_configured", None)
    with_forecast = goal.ok("admit", 2, run="r2", arm="treatment", forecast_tpm=10**9)
    assert with_forecast["receipt"]["tokens"] == "not_configured"  # recorded, not enforced
    view = goal.inspect(3)
    assert view["reserved_tpm"] == 10**9
    assert view["headroom_tpm"] == {"solver": None, "evaluator": None}
    assert view["next_action"] == "hold_at_target"
    assert view["admission_ready"] is False


def test_token_only_goal_needs_no_arm(goal):
    goal.ok("configure", 0, **TOKENS)
    goal.heartbeat(0)
    body = goal.ok("admit", 1, run="r1", forecast_tpm=100)
    assert body["receipt"]["cases"] == "not_configured"


# -- inspect -------------------------------------------------------------------------


def test_inspect_shape_and_next_actions(cli, goal):
    stopped = cli("host", "stop", "--goal", "g", "--at", "2026-11-29T14:00:00Z")
    assert stopped.code == 0, stopped.stdout  # goal g has an event, and no gate yet
    assert goal.inspect(0)["next_action"] == "configure"
    goal.ok("configure", 0, max_active_cases=2, **TOKENS, evaluator_reserve_tpm=5_000)
    assert goal.inspect(0)["next_action"] == "observe_usage"
    goal.ok("observe", 1, uncached_input=10_000, cached_input=2_000, output=1_000)
    goal.ok("admit", 2, run="r1", case="c1", arm="baseline", forecast_tpm=20_000, lease_s=60)
    view = goal.inspect(3)
    assert set(view) >= {
        "config", "usage_tpm", "usage", "reserved_tpm", "load_tpm", "headroom_tpm", "coverage",
        "cooldown_until", "active_runs", "active_counts", "admission_ready", "next_action",
    }  # fmt: skip
    assert view["usage_tpm"] == 13_000
    assert (view["reserved_tpm"], view["load_tpm"]) == (20_000, 20_000)
    assert view["headroom_tpm"] == {"solver": 65_000, "evaluator": 70_000}
    assert view["active_counts"] == {"total": 1, "baseline": 1, "test": 0}
    assert view["active_runs"] == [
        {
            "run": "r1",
            "case": "c1",
            "arm": "baseline",
            "class": "solver",
            "forecast_tpm": 20_000,
            "forecasts": {
                "tpm": 20_000,
                "itpm": None,
                "otpm": None,
                "rpm": None,
                "tpd": None,
                "rpd": None,
            },
            "admitted_at": at(2),
            "lease_until": at(62),
            "seq": view["active_runs"][0]["seq"],
        }
    ]
    assert (view["admission_ready"], view["next_action"]) == (True, "backfill_to_target")
    goal.ok("admit", 4, run="r2", arm="treatment", forecast_tpm=1)
    assert goal.inspect(5)["next_action"] == "hold_at_target"
    goal.ok("configure", 6, quota_tpm=20_000, target_tpm=15_000)  # below reservations
    assert goal.inspect(7)["next_action"] == "release_runs"


def test_inspect_as_of_time_and_record(goal):
    goal.ok("configure", 0, max_active_cases=2)
    first = goal.ok("admit", 10, run="r1", arm="baseline")
    goal.ok("admit", 20, run="r2", arm="baseline")
    before = goal.inspect(15)
    assert [r["run"] for r in before["active_runs"]] == ["r1"]
    assert before["at"] == at(15)
    by_seq = goal.ok("inspect", None, seq=first["event"]["seq"])["goals"]["g"]
    assert [r["run"] for r in by_seq["active_runs"]] == ["r1"]
    assert by_seq["at"] == at(10)
    both = goal("inspect", 15, seq=1)
    assert both.code == 2


def test_inspect_takes_no_lock(goal, journal_path):
    goal.ok("configure", 0, max_active_cases=1)
    with Ledger.open(journal_path) as holder, holder.journal.transaction():
        result = run_cli("inspect", "--journal", journal_path, "--json", "--lock-timeout-s", "0")
        assert result.code == 0 and "g" in result.json["goals"]


# -- human text ----------------------------------------------------------------------


def test_human_text_is_concise(journal_path):
    def text(*args):
        result = run_cli(*args, "--journal", journal_path)
        return result.code, result.stdout

    base = ["--goal", "g"]
    # Explicit times throughout: an observation at a fixed time is only fresh for a
    # decision taken at a fixed time after it, whatever the wall clock says.
    code, out = text("configure", *base, *flags(max_active_cases=4, quota_tpm=100_000, at=at(0)))
    assert code == 0 and out.startswith("configured g: cases target 4/max 4")
    code, _ = text(
        "observe", *base, *flags(uncached_input=12_000, cached_input=0, output=0, at=at(1))
    )
    assert code == 0
    code, out = text("admit", *base, *flags(run="r1", arm="baseline", forecast_tpm=5_000, at=at(2)))
    assert (code, out.strip()) == (0, "admitted r1 (slot 1/4, load 12000/90000 TPM, forecast 5000)")
    code, out = text(
        "admit", *base, *flags(run="r2", arm="baseline", forecast_tpm=90_000, at=at(3))
    )
    assert code == 1 and out.startswith("REFUSED r2: token_headroom_exhausted\n")
    assert "headroom" in out and "Traceback" not in out
    code, out = text("inspect", "--at", at(4))
    assert code == 0 and "next action" in out and "r1" in out


# -- the Python API ------------------------------------------------------------------


def test_python_api_round_trip(journal_path):
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=2, quota_tpm=10_000, at=at(0))
        ledger.observe(goal="g", uncached_input=1_000, cached_input=0, output=0, at=at(1))
        admitted = ledger.admit(goal="g", run="r1", arm="control", forecast_tpm=4_000, at=at(2))
        assert admitted["admitted"] and admitted["appended"]
        refused = ledger.admit(goal="g", run="r2", arm="control", forecast_tpm=5_001, at=at(3))
        assert refused["ok"] is False
        assert refused["reasons"] == [R.TOKEN_HEADROOM_EXHAUSTED]
        replay = ledger.admit(goal="g", run="r1", arm="control", forecast_tpm=4_000, at=at(4))
        assert replay["idempotent"] and replay["receipt"] == admitted["receipt"]
        assert ledger.release(goal="g", run="r1", at=at(5))["released"]
        view = ledger.inspect(goal="g", at=at(6))["goals"]["g"]
        assert view["active_runs"] == [] and view["usage_tpm"] == 1_000
    # A second handle (another runner) sees the same journal.
    with Ledger.open(journal_path, write=False) as reader:
        assert reader.inspect(goal="g")["goals"]["g"]["config"]["tokens"]["quota_tpm"] == 10_000
