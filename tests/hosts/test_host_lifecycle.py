"""Host continuation end to end (SPEC §4): phase -> attempt -> quota failure -> continue
on the same session with a handoff -> attempt -> completion confirming the handoff."""

from __future__ import annotations

import json

import pytest

from tests.hosts.hosts_helpers import Lane, at, lane_with_failure, nothing_appended, ok, refused
from tests.support import run_cli, run_process

pytestmark = pytest.mark.usefixtures("clock_far_ahead")

PAYLOAD_KEYS = {
    "host.phase_appended": [
        "lane",
        "phase",
        "deadline",
        "session",
        "profile",
        "basis",
        "bound",
        "handoff",
    ],
    "host.attempt_started": ["lane", "phase", "attempt", "number", "session", "profile", "pid"],
    "host.process_exited": ["attempt", "exit_code", "signal"],
    "host.attempt_returned": ["attempt", "outcome", "failure", "cursor"],
    "host.stop_requested": [],
    "host.stop_cleared": [],
    "host.replan_opened": ["lane", "replan"],
    "host.replan_settled": ["lane", "replan"],
}


@pytest.fixture
def lane(journal_path, tmp_path) -> Lane:
    return Lane(journal_path, tmp_path)


def records(journal_path: str) -> list[dict]:
    with open(journal_path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_full_lifecycle_continues_on_the_same_session_and_confirms_the_handoff(lane):
    """The issue's lifecycle, checking every output a runner and an operator rely on."""
    phase1 = ok(lane.phase())
    assert phase1["appended"] is True and phase1["idempotent"] is False
    assert phase1["phase"]["basis"] == "initial" and phase1["phase"]["bound"] is None
    started = ok(lane.start("a1", "--pid", "4242"))
    assert started["attempt"]["number"] == 1 and started["event"]["kind"] == "host.attempt_started"
    ok(lane.exit("a1", "--exit-code", "1"))
    returned = ok(lane.ret("a1", "failed", failure="quota_exhausted", cursor="turn-7"))
    bind = returned["hash"]
    assert bind == returned["event"]["hash"]

    status = lane.status()
    assert status["dispatchable"] is False and status["reasons"] == ["lane_failed"]
    assert status["last_failure"]["hash"] == bind
    assert status["last_failure"]["code"] == "quota_exhausted"
    assert status["last_failure"]["attempt"] == "a1"

    path, digest = lane.handoff("resume from turn 7: rerun the evaluator on case 12\n")
    cont = ok(lane.cont(bind, "--handoff", path, "--handoff-sha256", digest, cursor="turn-7"))
    phase2 = cont["phase"]
    assert set(phase2) >= {
        "phase",
        "lane",
        "deadline",
        "session",
        "profile",
        "basis",
        "bound",
        "handoff_sha256",
    }
    assert phase2["phase"] == 2 and phase2["basis"] == "failed_attempt"
    assert phase2["bound"] == bind and phase2["session"] == "s1"
    assert phase2["handoff_sha256"] == digest

    beat = ok(lane.heartbeat())
    assert beat["phase"]["phase"] == 2
    assert beat["handoff"] == {
        "sha256": digest,
        "content": "resume from turn 7: rerun the evaluator on case 12\n",
    }

    second = ok(lane.start("a2"))
    assert second["attempt"]["number"] == 2 and second["attempt"]["phase"] == 2
    # Not confirmed yet: the handoff is presented until a completed return.
    assert ok(lane.heartbeat())["handoff"] is not None
    ok(lane.exit("a2", "--exit-code", "0"))
    ok(lane.ret("a2", "completed", cursor="turn-9"))
    after = ok(lane.heartbeat())
    assert after["handoff"] is None and after["phase"]["handoff_confirmed"] is True

    final = lane.status()
    assert final["dispatchable"] is True and final["reasons"] == []
    assert [a["number"] for a in final["attempts"]] == [1, 2]
    assert [p["phase"] for p in final["phases"]] == [1, 2]
    # The failure is never erased: it stays the lane's last failure, now continued.
    assert final["last_failure"]["hash"] == bind
    assert final["last_failure"]["continued_by_phase"] == 2

    verified = run_cli("verify", "--journal", lane.journal, "--json")
    assert verified.code == 0, verified.stdout


def test_events_carry_exactly_the_spec_payload_keys_and_the_goal(lane):
    lane_with_failure(lane)
    ok(lane.cli("host", "stop", "--goal", "g"))
    ok(lane.cli("host", "stop", "--goal", "g", "--clear"))
    ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--open"))
    ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--settle"))
    seen = set()
    for record in records(lane.journal)[1:]:
        assert record["goal"] == "g"
        assert list(record["data"]) == PAYLOAD_KEYS[record["kind"]], record["kind"]
        seen.add(record["kind"])
    assert seen == set(PAYLOAD_KEYS) - set()  # every host event kind was written
    returned = next(r for r in records(lane.journal) if r["kind"] == "host.attempt_returned")
    assert returned["data"]["failure"] == {"code": "quota_exhausted", "detail": None}


def test_attempt_numbers_continue_across_phases_and_after_completed_attempts(lane):
    ok(lane.phase())
    for name in ("a1", "a2"):
        ok(lane.start(name))
        ok(lane.exit(name, "--exit-code", "0"))
        ok(lane.ret(name, "completed"))
    ok(lane.phase(deadline="+3h"))  # a further phase after a completed attempt
    third = ok(lane.start("a3"))
    assert third["attempt"]["number"] == 3 and third["attempt"]["phase"] == 2


def test_interrupted_attempt_is_continued_with_basis_interrupted_attempt(lane):
    ok(lane.phase())
    bind = lane.failed_attempt("a1", outcome="interrupted", cursor="c9")
    refused(lane.start("a2"), "lane_failed")
    phase = ok(lane.cont(bind, cursor="c9"))["phase"]
    assert phase["basis"] == "interrupted_attempt" and phase["bound"] == bind
    assert ok(lane.start("a2"))["attempt"]["number"] == 2


def test_retryable_failure_is_retried_by_a_plain_start_below_the_limit(lane):
    ok(lane.phase())
    lane.failed_attempt("a1", failure="retryable")
    assert ok(lane.start("a2"))["attempt"]["number"] == 2


def test_a_later_phase_binds_a_new_handoff_without_changing_the_earlier_one(lane):
    bind1 = lane_with_failure(lane)
    path1, digest1 = lane.handoff("first handoff", name="h1.txt")
    ok(lane.cont(bind1, "--handoff", path1, "--handoff-sha256", digest1))
    bind2 = lane.failed_attempt("a2")
    path2, digest2 = lane.handoff("second handoff", name="h2.txt")
    ok(lane.cont(bind2, "--handoff", path2, "--handoff-sha256", digest2))
    beat = ok(lane.heartbeat())
    assert beat["handoff"] == {"sha256": digest2, "content": "second handoff"}
    phases = lane.status()["phases"]
    assert [p["handoff_sha256"] for p in phases] == [None, digest1, digest2]
    stored = [r["data"]["handoff"] for r in records(lane.journal) if r["data"].get("handoff")]
    assert [h["content"] for h in stored] == ["first handoff", "second handoff"]
    assert [h["bytes"] for h in stored] == [13, 14]


def test_readers_evaluate_the_state_as_of_at(lane):
    ok(lane.phase("--at", at(0), deadline=at(60)))
    ok(lane.start("a1", "--at", at(1)))
    ok(lane.exit("a1", "--exit-code", "1", "--at", at(2)))
    bind = ok(lane.ret("a1", "failed", "--at", at(3), failure="quota_exhausted"))["hash"]
    with nothing_appended(lane.journal):
        before = lane.status("--at", at(1.5))
        assert before["attempts"][0]["returned"] is False
        assert before["reasons"] == ["attempt_in_flight"]
        assert lane.status("--at", at(3))["last_failure"]["hash"] == bind
        # As of a time past the phase deadline, the deadline has passed too.
        assert "phase_deadline_passed" in lane.status("--at", at(61))["reasons"]
        assert ok(lane.heartbeat("--at", at(0.5)))["phase"]["phase"] == 1


def test_host_stop_and_replan_replays_append_nothing(lane):
    ok(lane.cli("host", "stop", "--goal", "g"))
    with nothing_appended(lane.journal):
        again = ok(lane.cli("host", "stop", "--goal", "g"))
        assert again["appended"] is False and again["stop"] is True
    ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--open"))
    with nothing_appended(lane.journal):
        ok(lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r1", "--open"))
        refused(
            lane.cli("host", "replan", "--goal", "g", "--lane", "l1", "--replan", "r9", "--settle"),
            "replan_not_open",
        )


def test_exit_and_return_are_recorded_once(lane):
    ok(lane.phase())
    ok(lane.start("a1"))
    ok(lane.exit("a1", "--signal", "9"))
    first = ok(lane.ret("a1", "failed", failure="fatal", cursor="c1"))
    with nothing_appended(lane.journal):
        assert ok(lane.exit("a1", "--signal", "9"))["idempotent"] is True
        refused(lane.exit("a1", "--exit-code", "0"), "exit_exists_with_different_request")
        replay = ok(lane.ret("a1", "failed", failure="fatal", cursor="c1"))
        assert replay["idempotent"] is True and replay["hash"] == first["hash"]
        refused(
            lane.ret("a1", "failed", failure="retryable", cursor="c1"),
            "return_exists_with_different_request",
        )
        refused(lane.exit("nope", "--exit-code", "0"), "attempt_not_found")
        refused(lane.ret("nope", "completed"), "attempt_not_found")


@pytest.mark.parametrize(
    "args",
    [
        ["--outcome", "failed"],  # no failure code
        ["--outcome", "completed", "--failure", "fatal"],
        ["--outcome", "failed", "--failure", "quota"],  # not a code
        ["--outcome", "done"],
    ],
)
def test_invalid_return_arguments_exit_2_and_append_nothing(lane, args):
    ok(lane.phase())
    ok(lane.start("a1"))
    with nothing_appended(lane.journal):
        result = lane.cli("host", "return", "--goal", "g", "--attempt", "a1", *args)
        assert result.code == 2 and result.json["ok"] is False


def test_host_commands_work_as_real_processes(journal_path, tmp_path):
    """The same gate through `python -m commands`: a refusal exits 1 with one JSON object."""
    common = ["--journal", journal_path, "--json"]
    result = run_process(
        "host",
        "start",
        "--goal",
        "g",
        "--lane",
        "l1",
        "--attempt",
        "a1",
        "--session",
        "s1",
        "--profile",
        "p1",
        *common,
    )
    assert result.code == 1
    assert json.loads(result.stdout)["reasons"] == ["no_open_phase"]
    for cmd in (
        "phase",
        "start",
        "exit",
        "return",
        "continue",
        "heartbeat",
        "stop",
        "replan",
        "status",
    ):
        shown = run_cli("host", cmd, "--help")
        assert shown.code == 0 and "Example:" in shown.stdout, cmd
