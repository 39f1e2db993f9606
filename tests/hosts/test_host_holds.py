"""Stop and unsettled replans hold a lane (SPEC §4.2, seed 001): they block both
`host start` and `host continue`, before and after a continuation phase is prepared,
and release it again once cleared or settled."""

from __future__ import annotations

import pytest

from tests.hosts.hosts_helpers import Lane, lane_with_failure, nothing_appended, ok, refused

pytestmark = pytest.mark.usefixtures("clock_far_ahead")


@pytest.fixture
def lane(journal_path, tmp_path) -> Lane:
    return Lane(journal_path, tmp_path)


def hold(lane: Lane, kind: str) -> tuple[str, ...]:
    if kind == "stop":
        ok(lane.cli("host", "stop", "--goal", "g"))
        return ("stop_requested",)
    ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--open"))
    return ("replan_unsettled",)


def release(lane: Lane, kind: str) -> None:
    if kind == "stop":
        ok(lane.cli("host", "stop", "--goal", "g", "--clear"))
    else:
        ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--settle"))


@pytest.mark.parametrize("kind", ["stop", "replan"])
def test_hold_before_the_phase_is_prepared_blocks_continue_and_start(lane, kind):
    bind = lane_with_failure(lane)
    reasons = hold(lane, kind)
    with nothing_appended(lane.journal):
        refused(lane.cont(bind), *reasons)
        refused(lane.start("a2"), *reasons, "lane_failed")
    release(lane, kind)
    ok(lane.cont(bind))
    ok(lane.start("a2"))


@pytest.mark.parametrize("kind", ["stop", "replan"])
def test_hold_after_the_phase_is_prepared_blocks_start(lane, kind):
    """The seed's counterexample: a Stop arriving after the continuation was prepared
    (capacity already observed ready) still stops the next dispatch."""
    bind = lane_with_failure(lane)
    ok(lane.cont(bind))
    reasons = hold(lane, kind)
    with nothing_appended(lane.journal):
        refused(lane.start("a2"), *reasons)
        status = lane.status()
        assert status["dispatchable"] is False and status["reasons"] == list(reasons)
    release(lane, kind)
    assert lane.status()["dispatchable"] is True
    ok(lane.start("a2"))


@pytest.mark.parametrize("kind", ["stop", "replan"])
def test_hold_after_a_continued_phase_failed_again_blocks_the_next_continue(lane, kind):
    bind = lane_with_failure(lane)
    ok(lane.cont(bind))
    second = lane.failed_attempt("a2")
    reasons = hold(lane, kind)
    with nothing_appended(lane.journal):
        refused(lane.cont(second), *reasons)


def test_a_replan_holds_only_its_own_lane(lane):
    ok(lane.phase())
    other = Lane(lane.journal, lane.tmp, lane="l2")
    ok(other.phase())
    ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l2", "--replan", "r1", "--open"))
    ok(lane.start("a1"))
    with nothing_appended(lane.journal):
        refused(other.start("b1"), "replan_unsettled")
    status = ok(lane.cli("host", "status", "--goal", "g"))["lanes"]
    assert status["l2"]["replans"][0]["open"] is True
    assert status["l1"]["replans"] == []


def test_a_stop_holds_every_lane_of_its_goal_only(lane):
    ok(lane.phase())
    elsewhere = Lane(lane.journal, lane.tmp, goal="g2")
    ok(elsewhere.phase())
    ok(lane.cli("host", "stop", "--goal", "g"))
    with nothing_appended(lane.journal):
        refused(lane.start("a1"), "stop_requested")
    ok(elsewhere.start("a1"))
