"""Idempotent observations (SPEC §11): `observe` and `reject` take a `request_id`; a
repeat on the same goal within 900 s of log time of the first appends nothing and
answers the original event (`idempotent: true`), a repeat with another payload is
refused `request_id_conflict` (exit 1). The index is the fold's, kept incrementally,
bounded to 900 s of the goal's log time, and checkpointed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput, Journal
from quotaledger.journal.clock import US_PER_S, format_us
from quotaledger.projections import capacity as cap
from quotaledger.projections import reasons as R
from quotaledger.projections.ledger import PROJECTOR
from tests.capacity.capacity_helpers import BASE_US, Goal, at, race
from tests.support import run_cli

RID = "chatcmpl-AbC123"


def lines(journal: str, kind: str) -> list[dict[str, Any]]:
    with open(journal, "rb") as handle:
        records = [json.loads(line) for line in handle.read().splitlines()]
    return [r for r in records if r["kind"] == kind]


@pytest.fixture
def goal(cli: Any) -> Goal:
    g = Goal(cli)
    g.ok("configure", 0, quota_tpm=100_000)
    return g


# -- observe, on the command line -------------------------------------------------------


def test_a_repeated_observation_appends_nothing_and_answers_the_original(
    goal: Goal, journal_path: str
) -> None:
    first = goal.ok("observe", 1, run="r1", output=500, request_id=RID)
    assert (first["appended"], first["idempotent"], first["request_id"]) == (True, False, RID)
    size = Path(journal_path).stat().st_size
    again = goal.ok("observe", 30, run="r1", output=500, request_id=RID)
    assert (again["appended"], again["idempotent"], again["request_id"]) == (False, True, RID)
    assert again["event"] == first["event"]
    assert again["usage_tpm"] == 500  # counted once
    assert Path(journal_path).stat().st_size == size
    [event] = lines(journal_path, cap.OBSERVED)
    assert event["data"]["request_id"] == RID


def test_an_observation_without_a_request_id_is_recorded_as_before(
    goal: Goal, journal_path: str
) -> None:
    answer = goal.ok("observe", 1, output=500)
    assert "idempotent" not in answer and "request_id" not in answer
    goal.ok("observe", 2, output=500)
    observed = lines(journal_path, cap.OBSERVED)
    assert len(observed) == 2
    assert all("request_id" not in event["data"] for event in observed)
    payload = cap.CapacityObserved(
        run=None, uncached_input=0, cached_input=0, output=500, requests=None,
        coverage="measured", source=None,
    )  # fmt: skip
    assert msgspec.json.encode(payload) == (
        b'{"run":null,"uncached_input":0,"cached_input":0,"output":500,'
        b'"requests":null,"coverage":"measured","source":null}'
    )


def test_a_repeat_at_900_s_is_a_replay_and_after_it_counts_again(
    goal: Goal, journal_path: str
) -> None:
    goal.ok("observe", 0, output=100, request_id=RID)
    assert goal.ok("observe", 900, output=100, request_id=RID)["idempotent"] is True
    later = goal.ok("observe", 900.000001, output=100, request_id=RID)
    assert (later["appended"], later["idempotent"]) == (True, False)
    # The new event starts a window of its own.
    assert goal.ok("observe", 1000, output=100, request_id=RID)["idempotent"] is True
    assert len(lines(journal_path, cap.OBSERVED)) == 2


def test_a_repeat_with_another_payload_is_refused_request_id_conflict(
    goal: Goal, journal_path: str
) -> None:
    first = goal.ok("observe", 1, run="r1", output=500, request_id=RID)
    size = Path(journal_path).stat().st_size
    for changed in ({"output": 501}, {"run": "r2"}, {"coverage": "estimated"}, {"source": "x"}):
        body = goal.refused("observe", 2, **{"run": "r1", "output": 500, **changed}, request_id=RID)
        assert body["reasons"] == [R.REQUEST_ID_CONFLICT]
        assert (body["appended"], body["request_id"]) == (False, RID)
        assert body["event"] == first["event"]  # the event that holds the id
    assert Path(journal_path).stat().st_size == size


def test_the_same_id_on_another_goal_is_another_request(cli: Any, journal_path: str) -> None:
    a, b = Goal(cli, "a"), Goal(cli, "b")
    a.ok("configure", 0, quota_tpm=1000)
    b.ok("configure", 0, quota_tpm=1000)
    a.ok("observe", 1, output=1, request_id=RID)
    assert b.ok("observe", 1, output=1, request_id=RID)["appended"] is True
    assert len(lines(journal_path, cap.OBSERVED)) == 2


def test_a_replay_is_answered_even_when_its_explicit_time_is_behind_the_goal(
    goal: Goal, journal_path: str
) -> None:
    """A client retrying with the time it sent the first time, after other events: the
    answer is the original one, not time_regression."""
    first = goal.ok("observe", 1, output=7, request_id=RID)
    goal.ok("observe", 20, output=1)
    again = goal.ok("observe", 1, output=7, request_id=RID)
    assert (again["idempotent"], again["event"]) == (True, first["event"])


def test_the_same_headers_retried_later_are_the_same_payload(
    goal: Goal, journal_path: str, tmp_path: Path
) -> None:
    """A reset given as a duration is measured from the event's time: a retry at another
    time is compared as if it had been made at the original's time."""
    headers = tmp_path / "headers.txt"
    headers.write_text("x-ratelimit-limit-tokens: 1000\nx-ratelimit-reset-tokens: 6m0s\n")
    first = goal.ok("observe", 1, output=7, request_id=RID, provider_headers=str(headers))
    again = goal.ok("observe", 40, output=7, request_id=RID, provider_headers=str(headers))
    assert again["idempotent"] is True
    assert again["provider"] == first["provider"]


def test_the_text_of_a_replay_says_it_was_a_replay(goal: Goal, journal_path: str) -> None:
    goal.ok("observe", 1, output=7, request_id=RID)
    args = ["--journal", journal_path, "--goal", "g", "--request-id", RID, "--at", at(2)]
    counts = ["--uncached-input", "0", "--cached-input", "0", "--output", "7"]
    replay = run_cli("observe", *args, *counts)
    assert replay.code == 0
    assert replay.stdout.startswith(f"replay of request {RID}")
    assert "nothing appended" in replay.stdout
    counts[-1] = "8"
    conflict = run_cli("observe", *args, *counts)
    assert conflict.code == 1
    assert conflict.stdout.startswith("REFUSED observe g: request_id_conflict")


@pytest.mark.parametrize("bad", ["", "has space", "x" * 129, "a\n"])
def test_a_request_id_that_is_not_an_identifier_is_exit_2(
    goal: Goal, journal_path: str, bad: str
) -> None:
    size = Path(journal_path).stat().st_size
    result = goal("observe", 1, output=1, request_id=bad)
    assert result.code == 2, result.stdout
    assert result.json["error"]["code"] == "invalid_identifier"
    assert "--request-id" in result.json["error"]["message"]
    assert Path(journal_path).stat().st_size == size


# -- reject ------------------------------------------------------------------------------


def test_a_repeated_rejection_answers_the_original_cooldown(goal: Goal, journal_path: str) -> None:
    first = goal.ok("reject", 1, run="r1", retry_after_s=30, request_id="req_1")
    again = goal.ok("reject", 20, run="r1", retry_after_s=30, request_id="req_1")
    assert (again["appended"], again["idempotent"]) == (False, True)
    for key in ("event", "cooldown_s", "cooldown_until", "streak", "retry_after_s", "run"):
        assert again[key] == first[key]
    assert len(lines(journal_path, cap.REJECTED)) == 1
    assert goal.inspect(21)["cooldown_until"] == at(31)  # not pushed to t=50
    body = goal.refused("reject", 21, run="r1", retry_after_s=60, request_id="req_1")
    assert body["reasons"] == [R.REQUEST_ID_CONFLICT]
    # An observation naming a rejection's id is another payload too.
    assert goal.refused("observe", 22, request_id="req_1")["reasons"] == [R.REQUEST_ID_CONFLICT]
    assert len(lines(journal_path, cap.REJECTED)) == 1


def test_a_rejection_retried_with_an_http_date_is_the_same_payload(
    goal: Goal, tmp_path: Path
) -> None:
    headers = tmp_path / "headers.txt"
    headers.write_text("retry-after: Sun, 29 Nov 2026 14:01:00 GMT\n")
    first = goal.ok("reject", 10, request_id="req_2", provider_headers=str(headers))
    assert first["retry_after_s"] == 50
    again = goal.ok("reject", 15, request_id="req_2", provider_headers=str(headers))
    assert (again["idempotent"], again["retry_after_s"]) == (True, 50)


# -- the Python API ----------------------------------------------------------------------


def test_the_api_replays_and_refuses_as_the_cli_does(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
        first = ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=10, request_id=RID, at=at(1)
        )
        again = ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=10, request_id=RID, at=at(2)
        )
        assert (again["ok"], again["idempotent"], again["event"]) == (True, True, first["event"])
        refused = ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=11, request_id=RID, at=at(3)
        )
        assert (refused["ok"], refused["reasons"]) == (False, [R.REQUEST_ID_CONFLICT])
        rejected = ledger.reject(goal="g", request_id="req_9", retry_after_s=1.5, at=at(4))
        repeat = ledger.reject(goal="g", request_id="req_9", retry_after_s=1.5, at=at(5))
        assert (repeat["idempotent"], repeat["event"]) == (True, rejected["event"])
        assert rejected["request_id"] == "req_9"
        with pytest.raises(InvalidInput) as caught:
            ledger.observe(goal="g", uncached_input=0, cached_input=0, output=1, request_id=42)  # type: ignore[arg-type]
        assert caught.value.context["parameter"] == "request_id"
    assert len(lines(journal_path, cap.OBSERVED)) == 1
    assert len(lines(journal_path, cap.REJECTED)) == 1


def test_the_request_id_of_a_usage_body_or_its_headers_is_recorded(
    goal: Goal, journal_path: str, tmp_path: Path
) -> None:
    body = tmp_path / "body.json"
    body.write_text(
        json.dumps({"id": "chatcmpl-9", "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
    )
    headers = tmp_path / "headers.txt"
    headers.write_text("x-request-id: req_abc\nx-ratelimit-limit-tokens: 1000\n")
    by_usage = {"usage": str(body), "uncached_input": None, "cached_input": None, "output": None}
    assert goal.ok("observe", 1, **by_usage)["request_id"] == "chatcmpl-9"
    assert goal.ok("observe", 2, **by_usage)["idempotent"] is True
    # The body's id wins over the header's; an explicit one over both.
    both = goal.refused("observe", 3, **by_usage, provider_headers=str(headers))
    assert (both["request_id"], both["reasons"]) == ("chatcmpl-9", [R.REQUEST_ID_CONFLICT])
    only_headers = goal.ok("observe", 4, output=3, provider_headers=str(headers))
    assert (only_headers["request_id"], only_headers["appended"]) == ("req_abc", True)
    explicit = goal.ok("observe", 5, **by_usage, request_id="mine-1")
    assert explicit["request_id"] == "mine-1"
    recorded = [e["data"].get("request_id") for e in lines(journal_path, cap.OBSERVED)]
    assert recorded == ["chatcmpl-9", "req_abc", "mine-1"]


# -- the fold: bounded, checkpointed ---------------------------------------------------


def test_the_index_keeps_only_900_s_of_the_goals_log_time(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
        with ledger.journal.transaction() as txn:
            for second in range(1, 3001):
                payload = cap.CapacityObserved(
                    run=None, uncached_input=1, cached_input=0, output=0, requests=None,
                    coverage="measured", source=None, request_id=f"id-{second}",
                )  # fmt: skip
                txn.append(cap.OBSERVED, "g", payload, at(second))
        index = ledger.journal.state.capacity.goals["g"].request_ids
        # Entries older than 900 s of the goal's log time (t=3000) are gone.
        assert list(index) == [f"id-{second}" for second in range(2100, 3001)]
        assert ledger.observe(
            goal="g", uncached_input=1, cached_input=0, output=0, request_id="id-2100", at=at(3000)
        )["idempotent"]
        assert ledger.observe(
            goal="g", uncached_input=1, cached_input=0, output=0, request_id="id-2099", at=at(3000)
        )["appended"]


def test_the_index_survives_a_checkpoint(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=at(0))
        first = ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=5, request_id=RID, at=at(1)
        )
        ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=5, request_id="other", at=at(2)
        )
        ledger.checkpoint()
    with Journal.open(journal_path, PROJECTOR, write=False) as journal:
        assert journal.checkpoint_seq == first["event"]["seq"] + 1  # the state came from it
        from_checkpoint = PROJECTOR.dump(journal.state)
    with Journal.open(journal_path, PROJECTOR, write=False, use_checkpoint=False) as journal:
        assert PROJECTOR.dump(journal.state) == from_checkpoint
    with Ledger.open(journal_path) as ledger:
        again = ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=5, request_id=RID, at=at(3)
        )
        assert (again["idempotent"], again["event"]) == (True, first["event"])
        # The checkpointed index is trimmed as the fold goes on (its oldest entry first).
        ledger.observe(goal="g", uncached_input=0, cached_input=0, output=5, at=at(901.5))
        assert list(ledger.journal.state.capacity.goals["g"].request_ids) == ["other"]
        assert ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=5, request_id=RID, at=at(902)
        )["appended"]
    assert run_cli("verify", "--journal", journal_path).code == 0


def test_the_projection_version_names_the_new_state_shape() -> None:
    assert cap.VERSION != "3"
    assert "request_ids" in cap.GoalCapacity.__struct_fields__


# -- real processes ----------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_racing_the_same_request_id_record_one_event(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000)
    command = [
        "observe", "--goal", "g", "--request-id", RID, "--uncached-input", "100",
        "--cached-input", "0", "--output", "10",
    ]  # fmt: skip
    results = race(journal_path, [command, command])
    assert [code for code, _ in results] == [0, 0]
    assert sorted(body["appended"] for _, body in results) == [False, True]
    assert sorted(body["idempotent"] for _, body in results) == [False, True]
    assert results[0][1]["event"] == results[1][1]["event"]
    assert len(lines(journal_path, cap.OBSERVED)) == 1
    assert run_cli("verify", "--journal", journal_path).code == 0


def test_window_constant_is_900_s() -> None:
    assert cap.REQUEST_ID_WINDOW_US == 900 * US_PER_S
    assert format_us(BASE_US) == at(0)
