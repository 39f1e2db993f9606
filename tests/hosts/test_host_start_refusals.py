"""`host start` is the dispatch gate (SPEC §4.2): one test per refusal reason, each
proving that nothing was appended (line count and head hash unchanged)."""

from __future__ import annotations

import pytest

from tests.hosts.hosts_helpers import Lane, at, nothing_appended, ok, refused

pytestmark = pytest.mark.usefixtures("clock_far_ahead")


@pytest.fixture
def lane(journal_path, tmp_path) -> Lane:
    return Lane(journal_path, tmp_path)


@pytest.fixture
def ready(lane) -> Lane:
    """A lane with an open phase (session s1, profile p1) and no attempt yet."""
    ok(lane.phase())
    return lane


def test_no_open_phase(lane):
    ok(Lane(lane.journal, lane.tmp, lane="other").phase())  # another lane has one
    with nothing_appended(lane.journal):
        refused(lane.start("a1"), "no_open_phase")


def test_phase_deadline_passed(lane):
    ok(lane.phase("--at", at(0), deadline=at(30)))
    with nothing_appended(lane.journal):
        refused(lane.start("a1", "--at", at(30)), "phase_deadline_passed")
        refused(lane.start("a1", "--at", at(45)), "phase_deadline_passed")
    assert ok(lane.start("a1", "--at", at(29)))["attempt"]["number"] == 1


def test_stop_requested(ready):
    ok(ready.cli("host", "stop", "--goal", "g"))
    with nothing_appended(ready.journal):
        refused(ready.start("a1"), "stop_requested")
    ok(ready.cli("host", "stop", "--goal", "g", "--clear"))
    ok(ready.start("a1"))


def test_replan_unsettled(ready):
    ok(ready.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--open"))
    with nothing_appended(ready.journal):
        refused(ready.start("a1"), "replan_unsettled")
    ok(ready.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--settle"))
    ok(ready.start("a1"))


def test_session_mismatch(ready):
    with nothing_appended(ready.journal):
        refused(ready.start("a1", session="other"), "session_mismatch")


def test_profile_mismatch(ready):
    with nothing_appended(ready.journal):
        refused(ready.start("a1", profile="other"), "profile_mismatch")


def test_a_phase_without_session_takes_its_first_attempts_session(lane):
    ok(lane.phase(session=None, profile=None))
    ok(lane.start("a1", session="s7", profile="p7"))
    ok(lane.exit("a1", "--exit-code", "0"))
    ok(lane.ret("a1", "completed"))
    with nothing_appended(lane.journal):
        refused(lane.start("a2", session="s8", profile="p7"), "session_mismatch")


def test_attempt_in_flight_until_returned(ready):
    ok(ready.start("a1"))
    ok(ready.exit("a1", "--exit-code", "0"))
    with nothing_appended(ready.journal):
        refused(ready.start("a2"), "attempt_in_flight")


def test_attempt_in_flight_until_its_process_is_observed_exited(ready):
    ok(ready.start("a1"))
    ok(ready.ret("a1", "completed"))
    with nothing_appended(ready.journal):
        refused(ready.start("a2"), "attempt_in_flight")
    ok(ready.exit("a1", "--exit-code", "0"))
    ok(ready.start("a2"))


@pytest.mark.parametrize(
    ("outcome", "failure"),
    [
        ("failed", "quota_exhausted"),
        ("failed", "output_budget_exhausted"),
        ("failed", "fatal"),
        ("interrupted", None),
    ],
)
def test_lane_failed(ready, outcome, failure):
    ready.failed_attempt("a1", outcome=outcome, failure=failure)
    with nothing_appended(ready.journal):
        refused(ready.start("a2"), "lane_failed")
        # A new phase through `host phase` is refused too: only `continue` goes on.
        refused(ready.phase(deadline="+3h"), "lane_failed")


def test_retry_limit_reached(ready):
    for name in ("a1", "a2", "a3"):
        ready.failed_attempt(name, failure="retryable")
    with nothing_appended(ready.journal):
        refused(ready.start("a4"), "retry_limit_reached")
    # The limit is per phase and configurable.
    assert ok(ready.start("a4", "--max-attempts", "4"))["attempt"]["number"] == 4


def test_attempt_exists_with_different_request(ready):
    first = ok(ready.start("a1", "--pid", "10"))
    with nothing_appended(ready.journal):
        replay = ok(ready.start("a1", "--pid", "10"))
        assert replay["idempotent"] is True and replay["appended"] is False
        assert replay["attempt"]["started_at"] == first["attempt"]["started_at"]
        refused(ready.start("a1", "--pid", "11"), "attempt_exists_with_different_request")
    ok(ready.exit("a1", "--exit-code", "0"))
    with nothing_appended(ready.journal):
        # Starting a finished attempt again would be a blind replay.
        refused(ready.start("a1", "--pid", "10"), "attempt_already_finished")


def test_every_failing_reason_is_reported_in_spec_order(lane):
    ok(lane.phase("--at", at(0), deadline=at(10)))
    ok(lane.start("a1", "--at", at(1)))
    ok(lane.cli("host", "stop", "--goal", "g"))
    ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--open"))
    with nothing_appended(lane.journal):
        refused(
            lane.start("a2", "--at", at(20), session="x", profile="y"),
            "phase_deadline_passed",
            "stop_requested",
            "replan_unsettled",
            "session_mismatch",
            "profile_mismatch",
            "attempt_in_flight",
        )


def test_time_regression_exits_2_and_appends_nothing(lane):
    ready = lane
    ok(ready.phase("--at", at(0), deadline=at(60)))
    ok(ready.start("a1", "--at", at(10)))
    ok(ready.exit("a1", "--exit-code", "0", "--at", at(11)))
    with nothing_appended(ready.journal):
        result = ready.ret("a1", "completed", "--at", at(5))
        assert result.code == 2 and result.json["error"]["code"] == "time_regression"
