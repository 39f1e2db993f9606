"""`host continue` binds exactly one failure (SPEC §4.2): one test per refusal reason,
each proving that nothing was appended (line count and head hash unchanged)."""

from __future__ import annotations

import os
import stat

import pytest

from quotaledger.projections.limits import HANDOFF_BYTES_MAX
from tests.hosts.hosts_helpers import Lane, at, lane_with_failure, nothing_appended, ok, refused
from tests.support import run_process

pytestmark = pytest.mark.usefixtures("clock_far_ahead")


@pytest.fixture
def lane(journal_path, tmp_path) -> Lane:
    return Lane(journal_path, tmp_path)


@pytest.fixture
def bind(lane) -> str:
    """Lane l1's attempt a1 failed quota_exhausted (process exited, cursor c1)."""
    return lane_with_failure(lane)


def test_bound_event_not_found(lane, bind):
    with nothing_appended(lane.journal):
        refused(lane.cont("0" * 64), "bound_event_not_found")
        # A return of another lane is not found in this lane.
        other = Lane(lane.journal, lane.tmp, lane="l2")
        refused(other.cont(bind, lane="l2"), "bound_event_not_found")


def test_bound_event_not_found_on_an_empty_goal(lane):
    """Seed 001's missing source: an explicit continuation with nothing to bind."""
    ok(Lane(lane.journal, lane.tmp, goal="other").phase())
    with nothing_appended(lane.journal):
        refused(
            lane.cont("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            "bound_event_not_found",
        )


def test_bound_event_not_a_failure(lane):
    """Seed 001's empty source: the bound event exists but records no failure."""
    phase = ok(lane.phase())
    ok(lane.start("a1"))
    ok(lane.exit("a1", "--exit-code", "0"))
    completed = ok(lane.ret("a1", "completed"))["hash"]
    with nothing_appended(lane.journal):
        refused(lane.cont(completed), "bound_event_not_a_failure")
        refused(lane.cont(phase["phase"]["hash"]), "bound_event_not_a_failure")


def test_bound_failure_superseded(lane):
    ok(lane.phase())
    first = lane.failed_attempt("a1", failure="retryable")
    lane.failed_attempt("a2", failure="retryable")  # retried by a plain start
    with nothing_appended(lane.journal):
        refused(lane.cont(first), "bound_failure_superseded")


def test_process_not_exited(lane):
    ok(lane.phase())
    bind = lane.failed_attempt("a1", exited=False)
    with nothing_appended(lane.journal):
        refused(lane.cont(bind), "process_not_exited")


def test_session_mismatch(lane, bind):
    with nothing_appended(lane.journal):
        refused(lane.cont(bind, session="fresh-session"), "session_mismatch")


def test_profile_mismatch(lane, bind):
    with nothing_appended(lane.journal):
        refused(lane.cont(bind, profile="other-profile"), "profile_mismatch")


def test_history_changed(lane, bind):
    with nothing_appended(lane.journal):
        refused(lane.cont(bind, cursor="c2"), "history_changed")


def test_history_changed_when_no_cursor_was_recorded(lane):
    """A return without a cursor gives nothing to prove the history against."""
    ok(lane.phase())
    ok(lane.start("a1"))
    ok(lane.exit("a1", "--exit-code", "1"))
    bind = ok(lane.ret("a1", "failed", failure="quota_exhausted", cursor=None))["hash"]
    with nothing_appended(lane.journal):
        refused(lane.cont(bind, cursor="c1"), "history_changed")


@pytest.mark.parametrize("failure", ["output_budget_exhausted", "fatal"])
def test_failure_not_continuable(lane, failure):
    ok(lane.phase())
    bind = lane.failed_attempt("a1", failure=failure)
    with nothing_appended(lane.journal):
        refused(lane.cont(bind), "failure_not_continuable")
        refused(lane.start("a2"), "lane_failed")  # and it never dispatches either


def test_stop_requested(lane, bind):
    ok(lane.cli("host", "stop", "--goal", "g"))
    with nothing_appended(lane.journal):
        refused(lane.cont(bind), "stop_requested")


def test_replan_unsettled(lane, bind):
    ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--open"))
    with nothing_appended(lane.journal):
        refused(lane.cont(bind), "replan_unsettled")


def test_deadline_not_in_future(lane):
    ok(lane.phase("--at", at(0), deadline=at(60)))
    bind = lane.failed_attempt("a1")
    with nothing_appended(lane.journal):
        refused(lane.cont(bind, "--at", at(5), deadline=at(5)), "deadline_not_in_future")
        refused(lane.cont(bind, "--at", at(5), deadline=at(4)), "deadline_not_in_future")


def test_deadline_too_far(lane, bind):
    with nothing_appended(lane.journal):
        refused(lane.cont(bind, deadline="+8d"), "deadline_too_far")
        refused(lane.cont(bind, "--max-phase", "2h", deadline="+3h"), "deadline_too_far")
    ok(lane.cont(bind, deadline="+7d"))


def test_handoff_missing(lane, bind):
    with nothing_appended(lane.journal):
        refused(
            lane.cont(
                bind, "--handoff", str(lane.tmp / "absent.txt"), "--handoff-sha256", "a" * 64
            ),
            "handoff_missing",
        )


def test_handoff_not_regular_fifo_is_refused_without_blocking(lane, bind):
    """Seed 002: a FIFO handoff must never block. A real process with a timeout: a
    blocking open would hang until the timeout and fail the test."""
    fifo = lane.tmp / "handoff.fifo"
    os.mkfifo(fifo)
    with nothing_appended(lane.journal):
        result = run_process(
            "host",
            "continue",
            "--goal",
            "g",
            "--lane",
            "l1",
            "--bind",
            bind,
            "--deadline",
            "+1h",
            "--session",
            "s1",
            "--profile",
            "p1",
            "--cursor",
            "c1",
            "--handoff",
            str(fifo),
            "--handoff-sha256",
            "a" * 64,
            "--journal",
            lane.journal,
            "--json",
            timeout=20,
        )
        refused(result, "handoff_not_regular")
        # `host phase` reads its handoff the same way.
        other = Lane(lane.journal, lane.tmp, lane="l2")
        refused(
            other.phase("--handoff", str(fifo), "--handoff-sha256", "a" * 64), "handoff_not_regular"
        )
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("kind", ["directory", "symlink", "device"])
def test_handoff_not_regular(lane, bind, kind):
    path, digest = lane.handoff("real content")
    target = {
        "directory": str(lane.tmp),
        "device": os.devnull,
    }.get(kind)
    if kind == "symlink":
        target = str(lane.tmp / "link.txt")
        os.symlink(path, target)
    with nothing_appended(lane.journal):
        refused(
            lane.cont(bind, "--handoff", target, "--handoff-sha256", digest), "handoff_not_regular"
        )


def test_handoff_too_large(lane, bind):
    path, digest = lane.handoff(b"x" * (HANDOFF_BYTES_MAX + 1))
    with nothing_appended(lane.journal):
        refused(lane.cont(bind, "--handoff", path, "--handoff-sha256", digest), "handoff_too_large")
    # Exactly 256 KiB is allowed.
    path, digest = lane.handoff(b"y" * HANDOFF_BYTES_MAX, name="max.txt")
    assert ok(lane.cont(bind, "--handoff", path, "--handoff-sha256", digest))["appended"]


def test_handoff_digest_mismatch(lane, bind):
    """Seed 002: changed handoff bytes fail closed."""
    path, digest = lane.handoff("the reviewed handoff")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(" plus an edit")
    with nothing_appended(lane.journal):
        refused(
            lane.cont(bind, "--handoff", path, "--handoff-sha256", digest),
            "handoff_digest_mismatch",
        )


def test_non_utf8_handoff_is_invalid_input(lane, bind):
    path, digest = lane.handoff(b"\xff\xfe binary")
    with nothing_appended(lane.journal):
        result = lane.cont(bind, "--handoff", path, "--handoff-sha256", digest)
        assert result.code == 2 and result.json["error"]["code"] == "handoff_not_utf8"


def test_handoff_without_digest_is_invalid_input(lane, bind):
    path, _digest = lane.handoff("text")
    with nothing_appended(lane.journal):
        assert lane.cont(bind, "--handoff", path).code == 2
        assert lane.cont(bind, "--handoff", path, "--handoff-sha256", "xyz").code == 2
        assert lane.cont("not-a-hash").code == 2


def test_every_failing_reason_is_reported_in_spec_order(lane):
    ok(lane.phase("--at", at(0), deadline=at(60)))
    ok(lane.start("a1", "--at", at(1)))
    bind = ok(lane.ret("a1", "failed", "--at", at(2), failure="fatal", cursor="c1"))["hash"]
    ok(lane.cli("host", "stop", "--goal", "g", "--at", at(3)))
    ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r", "--open"))
    with nothing_appended(lane.journal):
        refused(
            lane.cont(
                bind,
                "--handoff",
                str(lane.tmp / "gone"),
                "--handoff-sha256",
                "b" * 64,
                "--at",
                at(10),
                deadline=at(9),
                session="s2",
                profile="p2",
                cursor="c2",
            ),
            "process_not_exited",
            "session_mismatch",
            "profile_mismatch",
            "history_changed",
            "failure_not_continuable",
            "stop_requested",
            "replan_unsettled",
            "deadline_not_in_future",
            "handoff_missing",
        )
