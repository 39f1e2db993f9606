"""Host gates and the goal's capacity (SPEC §4.2 with §3.5's `admission_ready`):
`host start` refuses `capacity_not_ready` whenever the goal's admission is not ready;
`host continue` of a `quota_exhausted` failure does so when the goal has a token gate.
A goal with no gate configured does not block host work."""

from __future__ import annotations

import pytest

from tests.hosts.hosts_helpers import Lane, lane_with_failure, nothing_appended, ok, refused

pytestmark = pytest.mark.usefixtures("clock_far_ahead")


@pytest.fixture
def lane(journal_path, tmp_path) -> Lane:
    return Lane(journal_path, tmp_path)


def configure_tokens(lane: Lane) -> None:
    ok(lane.cli("configure", "--goal", "g", "--quota-tpm", "100000", "--target-tpm", "90000"))


def observe(lane: Lane, output: int = 100) -> None:
    ok(
        lane.cli(
            "observe",
            "--goal",
            "g",
            "--uncached-input",
            "0",
            "--cached-input",
            "0",
            "--output",
            str(output),
        )
    )


def admission_ready(lane: Lane) -> bool:
    return ok(lane.cli("inspect", "--goal", "g"))["goals"]["g"]["admission_ready"]


def test_quota_exhausted_with_a_token_gate_not_ready_is_capacity_not_ready(lane):
    bind = lane_with_failure(lane)
    configure_tokens(lane)  # no usage observed yet: the token gate is stale, not ready
    assert admission_ready(lane) is False
    with nothing_appended(lane.journal):
        refused(lane.cont(bind), "capacity_not_ready")
        assert lane.status()["reasons"] == ["lane_failed", "capacity_not_ready"]
    observe(lane)  # the quota was repaired and usage is observed fresh
    assert admission_ready(lane) is True
    assert ok(lane.cont(bind))["phase"]["bound"] == bind
    ok(lane.start("a2"))


def test_host_start_refuses_while_admission_is_not_ready(lane):
    ok(lane.phase())
    configure_tokens(lane)
    with nothing_appended(lane.journal):
        refused(lane.start("a1"), "capacity_not_ready")
        assert lane.status()["reasons"] == ["capacity_not_ready"]
    observe(lane)
    ok(lane.start("a1"))


def test_a_full_case_gate_blocks_start_but_not_a_continue_without_token_gate(lane):
    bind = lane_with_failure(lane)
    ok(lane.cli("configure", "--goal", "g", "--max-active-cases", "1"))
    ok(lane.cli("admit", "--goal", "g", "--run", "r1", "--arm", "baseline"))
    assert admission_ready(lane) is False
    ok(lane.cont(bind))  # no token gate: a quota failure is not held by the case gate
    with nothing_appended(lane.journal):
        refused(lane.start("a2"), "capacity_not_ready")
    ok(lane.cli("release", "--goal", "g", "--run", "r1"))
    ok(lane.start("a2"))


@pytest.mark.parametrize("outcome,failure", [("interrupted", None), ("failed", "retryable")])
def test_capacity_holds_only_quota_failures_at_continue(lane, outcome, failure):
    ok(lane.phase())
    bind = lane.failed_attempt("a1", outcome=outcome, failure=failure)
    configure_tokens(lane)
    assert ok(lane.cont(bind))["appended"] is True


def test_a_stop_arriving_after_capacity_was_observed_still_refuses(lane):
    """Seed 001's counterexample: capacity was ready, then a Stop arrived."""
    bind = lane_with_failure(lane)
    configure_tokens(lane)
    observe(lane)
    assert admission_ready(lane) is True
    ok(lane.cli("host", "stop", "--goal", "g"))
    with nothing_appended(lane.journal):
        refused(lane.cont(bind), "stop_requested")
    ok(lane.cli("host", "stop", "--goal", "g", "--clear"))
    ok(lane.cont(bind))
    ok(lane.cli("host", "stop", "--goal", "g"))
    with nothing_appended(lane.journal):
        refused(lane.start("a2"), "stop_requested")


def test_status_reports_the_goals_capacity_readiness(lane):
    ok(lane.phase())
    assert ok(lane.cli("host", "status", "--goal", "g"))["capacity_ready"] is True
    configure_tokens(lane)
    assert ok(lane.cli("host", "status", "--goal", "g"))["capacity_ready"] is False
