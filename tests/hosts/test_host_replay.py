"""Replaying `host continue` (SPEC §4.2, seed 001): the same request returns the same
phase and appends nothing; any difference is refused with
`phase_exists_with_different_request` alone; a replay never extends time and never
erases a later failure."""

from __future__ import annotations

import pytest

from tests.hosts.hosts_helpers import Lane, at, lane_with_failure, nothing_appended, ok, refused

pytestmark = pytest.mark.usefixtures("clock_far_ahead")


def _days_from_now(days: int, offset_s: int = 0) -> str:
    from quotaledger.journal.clock import US_PER_S, format_us, wall_us

    whole_s = wall_us() // US_PER_S + days * 86400 + offset_s
    return format_us(whole_s * US_PER_S)


DEADLINE = _days_from_now(3)
"""An absolute deadline within --max-phase (7d) of the tests' implicit, wall-clock time."""


@pytest.fixture
def lane(journal_path, tmp_path) -> Lane:
    return Lane(journal_path, tmp_path)


@pytest.fixture
def continued(lane) -> tuple[str, dict, list[str]]:
    """a1 failed quota_exhausted and was continued once, with a handoff and an absolute
    deadline; returns the bound hash, the phase, and the handoff arguments."""
    bind = lane_with_failure(lane)
    path, digest = lane.handoff("handoff v1")
    handoff = ["--handoff", path, "--handoff-sha256", digest]
    phase = ok(lane.cont(bind, *handoff, deadline=DEADLINE))["phase"]
    return bind, phase, handoff


def test_same_request_returns_the_same_phase_idempotent(lane, continued):
    bind, phase, handoff = continued
    with nothing_appended(lane.journal):
        replay = ok(lane.cont(bind, *handoff, deadline=DEADLINE))
        assert replay["idempotent"] is True and replay["appended"] is False
        assert replay["phase"] == phase
        # The same absolute deadline written another way is the same deadline.
        other_zone = DEADLINE.replace(".000000Z", "+00:00")
        again = ok(lane.cont(bind, *handoff, deadline=other_zone))
        assert again["phase"]["hash"] == phase["hash"]


@pytest.mark.parametrize(
    "change",
    [
        {"deadline": _days_from_now(3, 1)},  # later: would extend time
        {"deadline": _days_from_now(3, -1)},
        {"session": "s2"},
        {"profile": "p2"},
        {"cursor": "c2"},
    ],
)
def test_any_difference_is_refused_with_the_single_reason(lane, continued, change):
    bind, _phase, handoff = continued
    request = {"deadline": DEADLINE, **change}
    with nothing_appended(lane.journal):
        body = refused(lane.cont(bind, *handoff, **request), "phase_exists_with_different_request")
        assert body["existing_phase"]["deadline"] == DEADLINE


def test_a_different_or_missing_handoff_is_a_different_request(lane, continued):
    bind, _phase, _handoff = continued
    path, digest = lane.handoff("handoff v2", name="v2.txt")
    with nothing_appended(lane.journal):
        refused(
            lane.cont(bind, "--handoff", path, "--handoff-sha256", digest, deadline=DEADLINE),
            "phase_exists_with_different_request",
        )
        refused(lane.cont(bind, deadline=DEADLINE), "phase_exists_with_different_request")


def test_changed_handoff_bytes_are_checked_before_the_replay_comparison(lane, continued):
    """Seed 002: the file is read first; changed bytes under the original digest fail
    closed with the handoff's own reason, not as a replay."""
    bind, _phase, handoff = continued
    with open(handoff[1], "w", encoding="utf-8") as handle:
        handle.write("handoff v1, edited")
    with nothing_appended(lane.journal):
        refused(lane.cont(bind, *handoff, deadline=DEADLINE), "handoff_digest_mismatch")


def test_a_relative_deadline_cannot_be_replayed_into_more_time(lane):
    """`+1h` resolves against each command's own time: the replay would end later, so
    it is refused — replays never extend time."""
    ok(lane.phase("--at", at(0), deadline=at(60)))
    bind = lane.failed_attempt("a1")
    first = ok(lane.cont(bind, "--at", at(10), deadline="+1h"))
    assert first["phase"]["deadline"] == at(70)
    with nothing_appended(lane.journal):
        refused(
            lane.cont(bind, "--at", at(20), deadline="+1h"), "phase_exists_with_different_request"
        )
        # Given as the absolute deadline it resolved to, the replay is idempotent.
        assert ok(lane.cont(bind, "--at", at(20), deadline=at(70)))["idempotent"] is True


def test_a_replay_keeps_the_later_failure_and_only_a_new_continuation_opens_a_phase(lane):
    """Seed 001's worst regression: a repeated request must not erase a later failure."""
    first_failure = lane_with_failure(lane)
    request = {"deadline": DEADLINE}
    phase2 = ok(lane.cont(first_failure, **request))["phase"]
    second_failure = lane.failed_attempt("a2", cursor="c2")  # phase 2 failed again
    with nothing_appended(lane.journal):
        replay = ok(lane.cont(first_failure, **request))
        assert replay["idempotent"] is True and replay["phase"]["hash"] == phase2["hash"]
        assert replay["last_failure"]["hash"] == second_failure
        assert replay["last_failure"]["attempt"] == "a2"
        refused(lane.start("a3"), "lane_failed")
        status = lane.status()
        assert status["last_failure"]["hash"] == second_failure
        assert status["reasons"] == ["lane_failed"]
        assert [a["number"] for a in status["attempts"]] == [1, 2]
    phase3 = ok(lane.cont(second_failure, cursor="c2", **request))["phase"]
    assert phase3["phase"] == 3 and phase3["bound"] == second_failure
    assert ok(lane.start("a3"))["attempt"]["number"] == 3


def test_a_replay_while_stopped_appends_nothing_and_reports_the_existing_phase(lane):
    """Only a failure with no phase bound to it goes through the checks; a replay
    dispatches nothing, so a stop does not turn it into a refusal."""
    bind = lane_with_failure(lane)
    phase = ok(lane.cont(bind, deadline=DEADLINE))["phase"]
    ok(lane.cli("host", "stop", "--goal", "g"))
    with nothing_appended(lane.journal):
        replay = ok(lane.cont(bind, deadline=DEADLINE))
        assert replay["phase"]["hash"] == phase["hash"]
        refused(lane.start("a2"), "stop_requested")


def test_host_phase_replay_is_idempotent_until_an_attempt_starts(lane):
    first = ok(lane.phase(deadline=DEADLINE))
    with nothing_appended(lane.journal):
        again = ok(lane.phase(deadline=DEADLINE))
        assert again["idempotent"] is True and again["phase"]["hash"] == first["phase"]["hash"]
