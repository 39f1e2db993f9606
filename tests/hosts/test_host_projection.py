"""The hosts projection: payload schemas, checkpoint round trip, pure decisions."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from quotaledger.api import Ledger
from quotaledger.projections import hosts
from quotaledger.projections.ledger import PROJECTOR
from quotaledger.tools.demo_host import run as run_demo
from tests.hosts.hosts_helpers import Lane, lane_with_failure, ok
from tests.support import run_cli

pytestmark = pytest.mark.usefixtures("clock_far_ahead")


@pytest.fixture
def lane(journal_path, tmp_path) -> Lane:
    return Lane(journal_path, tmp_path)


def decode(kind: str, data: dict) -> object:
    return msgspec.json.decode(msgspec.json.encode(data), type=hosts.EVENTS[kind])


def test_a_handoff_whose_content_does_not_match_its_digest_never_decodes():
    content = "notes"
    good = {"sha256": hashlib.sha256(content.encode()).hexdigest(), "bytes": 5, "content": content}
    phase = {
        "lane": "l",
        "phase": 2,
        "deadline": "2026-11-29T10:00:00.000000Z",
        "session": "s",
        "profile": "p",
        "basis": "failed_attempt",
        "bound": "a" * 64,
        "handoff": good,
    }
    decode("host.phase_appended", phase)
    for bad in ({**good, "content": "edited"}, {**good, "bytes": 6}):
        with pytest.raises(msgspec.ValidationError):
            decode("host.phase_appended", {**phase, "handoff": bad})
    with pytest.raises(msgspec.ValidationError):  # a continuation must bind a failure
        decode("host.phase_appended", {**phase, "bound": None})
    with pytest.raises(msgspec.ValidationError):  # unknown fields are refused
        decode("host.stop_requested", {"why": "x"})
    with pytest.raises(msgspec.ValidationError):  # a failed outcome needs its code
        decode(
            "host.attempt_returned",
            {"attempt": "a", "outcome": "failed", "failure": None, "cursor": None},
        )


def test_state_survives_a_checkpoint_and_reopening(lane):
    bind = lane_with_failure(lane)
    path, digest = lane.handoff("checkpointed handoff")
    ok(lane.cont(bind, "--handoff", path, "--handoff-sha256", digest))
    before = ok(lane.cli("host", "status", "--goal", "g"))["lanes"]
    with Ledger.open(lane.journal) as ledger:
        state = ledger.journal.state
        assert PROJECTOR.load(PROJECTOR.dump(state)) == state
    assert run_cli("checkpoint", "--journal", lane.journal, "--json").code == 0
    after = ok(lane.cli("host", "status", "--goal", "g"))["lanes"]
    assert after == before
    assert ok(lane.heartbeat())["handoff"]["content"] == "checkpointed handoff"


def test_decide_continue_replay_is_decided_before_any_hold():
    """Pure: a bound failure's replay is compared, never re-checked against holds."""
    goal = hosts.GoalHosts(stop=True)
    phase = hosts.PhaseState(
        phase=2,
        lane="l",
        deadline_us=100,
        session="s",
        profile="p",
        basis="failed_attempt",
        bound="b" * 64,
    )
    goal.lanes["l"] = hosts.LaneState(lane="l", phases=[phase], attempts=["a1"])
    goal.attempts["a1"] = hosts.AttemptState(
        attempt="a1",
        lane="l",
        phase=1,
        number=1,
        session="s",
        profile="p",
        returned=True,
        outcome="failed",
        failure_code="quota_exhausted",
        cursor="c",
        returned_hash="b" * 64,
    )
    goal.returns["b" * 64] = "a1"
    goal.bound["b" * 64] = ["l", 2]
    not_ready = hosts.Readiness(capacity_ready=False, has_token_gate=True)
    request = hosts.ContinueRequest(
        lane="l", bind="b" * 64, deadline_us=100, session="s", profile="p", cursor="c", handoff=None
    )
    decision = hosts.decide_continue(goal, request, 200, not_ready)
    assert decision.ok and decision.idempotent and decision.detail.phase is phase
    assert decision.kind is None and decision.payload is None
    longer = msgspec.structs.replace(request, deadline_us=101)
    assert hosts.decide_continue(goal, longer, 0, not_ready).reasons == (
        "phase_exists_with_different_request",
    )


def test_demo_chapter_continues_a_quota_failure_on_its_session(journal_path):
    lines: list[str] = []
    with Ledger.open(journal_path) as ledger:
        summary = run_demo(ledger, lines.append, goal="demo-hosts")
    assert summary["gate_before_continue"] == ["lane_failed"]
    assert summary["attempt_numbers"] == [1, 2]
    assert summary["handoff_before_completion"] is True
    assert summary["handoff_after_completion"] is False
    assert summary["last_failure"]["hash"] == summary["bound_failure"]
    assert summary["continued_phase"]["bound"] == summary["bound_failure"]
    assert summary["dispatchable"] is True
    assert any("continued in phase 2" in line for line in lines)
