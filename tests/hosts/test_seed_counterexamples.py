"""The review counterexamples of seeds 001 and 002, replayed against the CLI.

Each test is one counterexample a reviewer reproduced against the original pull
request, restated in quotaledger's terms (SPEC §4) and replayed the way an operator
would: `quotaledger host ...` with `--json`, in-process for speed, as real processes
(`python -m commands`) for the FIFO, crash and live-process cases. Every refusal is
checked for its exit code, its exact reasons, the SPEC §8 JSON shape, and that the
journal did not change (line count, `quotaledger digest`, and bytes).

Seed 001 (explicit continuation of a quota failure on its original session):
  1. missing source: a well-formed `--bind` naming nothing must not produce a
     dispatchable phase;
  2. empty source: a `--bind` naming an event that records no failure (an initial
     state) must not either;
  3. partial same-phase replay: a replay carrying only some of the bound phase's
     facts is refused alone, and a crash-torn phase record is not a phase;
  4. repeated request after a later failure: the replay keeps the later failure and
     the attempt count; only a continuation bound to the new failure goes on;
  5. Stop (or an exhausted deadline) arriving after capacity was observed refuses.
Seed 002 (interrupted attempt, handoff bound to its phase):
  6. FIFO handoff: refused without blocking;
  7. changed handoff bytes: refused, the phase keeps its original content; an
     unused pre-dispatch phase cannot be swapped for another handoff or more time;
  8. uncertain delivery keeps presenting the handoff; a completed same-session
     return confirms it; a later phase may bind a new one;
  9. live process, changed session/profile/history, unsettled replan: refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, CliResult, line_count, run_cli, run_process

pytestmark = pytest.mark.usefixtures("clock_far_ahead")

G = "seed-goal"
L = "lane-1"
S = "sess-A"
P = "prof-1"

PHASE_KEYS = {"phase", "lane", "deadline", "session", "profile", "basis", "bound", "handoff_sha256"}
LANE_KEYS = {"phases", "attempts", "stop", "replans", "last_failure", "dispatchable", "reasons"}


# -- an operator's view of the CLI -------------------------------------------------------


class Operator:
    """Runs `quotaledger host ...` on one journal, in-process or as real processes."""

    def __init__(self, journal: str, tmp: Path, *, real: bool = False) -> None:
        self.journal = journal
        self.tmp = tmp
        self.real = real

    def run(self, *args: str) -> CliResult:
        argv = (*args, "--journal", self.journal, "--json")
        return run_process(*argv, timeout=30) if self.real else run_cli(*argv)

    def ok(self, *args: str) -> dict[str, Any]:
        result = self.run(*args)
        assert result.code == 0, result.stdout + result.stderr
        assert "Traceback" not in result.stderr
        body = result.json
        assert body["ok"] is True
        return body

    def refused(self, *args: str, reasons: list[str]) -> dict[str, Any]:
        """Exit 1, exactly these reasons, nothing appended (bytes, lines, digest)."""
        before = self.snapshot()
        result = self.run(*args)
        assert result.code == 1, result.stdout + result.stderr
        assert "Traceback" not in result.stderr
        body = result.json
        assert body["ok"] is False
        assert body["reasons"] == reasons
        assert body.get("appended", False) is False
        assert self.snapshot() == before
        return body

    def snapshot(self) -> tuple[int, str, bytes]:
        if not os.path.exists(self.journal) or os.path.getsize(self.journal) == 0:
            return (0, "", b"")
        digest = run_cli("digest", "--journal", self.journal, "--json")
        assert digest.code == 0, digest.stdout + digest.stderr
        return (line_count(self.journal), json.dumps(digest.json), Path(self.journal).read_bytes())

    # -- the commands ------------------------------------------------------------------

    def phase_args(self, deadline: str = "+2h", *extra: str, lane: str = L) -> list[str]:
        return [
            "host",
            "phase",
            "--goal",
            G,
            "--lane",
            lane,
            "--deadline",
            deadline,
            "--session",
            S,
            "--profile",
            P,
            *extra,
        ]

    def start_args(self, attempt: str, *extra: str, session: str = S) -> list[str]:
        return [
            "host",
            "start",
            "--goal",
            G,
            "--lane",
            L,
            "--attempt",
            attempt,
            "--session",
            session,
            "--profile",
            P,
            *extra,
        ]

    def continue_args(
        self,
        bind: str,
        deadline: str,
        *extra: str,
        session: str = S,
        profile: str = P,
        cursor: str = "turn-7",
    ) -> list[str]:
        return [
            "host",
            "continue",
            "--goal",
            G,
            "--lane",
            L,
            "--bind",
            bind,
            "--deadline",
            deadline,
            "--session",
            session,
            "--profile",
            profile,
            "--cursor",
            cursor,
            *extra,
        ]

    def fail(
        self,
        attempt: str,
        failure: str | None = "quota_exhausted",
        *,
        cursor: str = "turn-7",
        outcome: str = "failed",
    ) -> str:
        """Start `attempt`, observe its process exit, return it failed; the return hash."""
        self.ok(*self.start_args(attempt))
        self.ok("host", "exit", "--goal", G, "--attempt", attempt, "--exit-code", "1")
        args = ["host", "return", "--goal", G, "--attempt", attempt, "--outcome", outcome]
        if failure is not None:
            args += ["--failure", failure]
        returned = self.ok(*args, "--cursor", cursor)
        assert returned["hash"] == self.last_record()["hash"]
        assert returned["appended"] is True
        return str(returned["hash"])

    def complete(self, attempt: str) -> str:
        self.ok(*self.start_args(attempt))
        self.ok("host", "exit", "--goal", G, "--attempt", attempt, "--exit-code", "0")
        args = ["host", "return", "--goal", G, "--attempt", attempt, "--outcome", "completed"]
        return str(self.ok(*args, "--cursor", "done")["hash"])

    def status(self) -> dict[str, Any]:
        body = self.ok("host", "status", "--goal", G)
        lane = body["lanes"][L]
        assert set(lane) >= LANE_KEYS
        if lane["last_failure"] is not None:
            assert set(lane["last_failure"]) >= {"hash", "code", "attempt"}
        return lane

    def heartbeat(self, session: str = S) -> dict[str, Any]:
        result = self.run("host", "heartbeat", "--goal", G, "--lane", L, "--session", session)
        body = result.json
        assert {"ok", "phase", "handoff"} <= set(body)
        if body["handoff"] is not None:
            assert set(body["handoff"]) == {"sha256", "content"}
        return body

    def handoff(self, content: bytes, name: str = "handoff.md") -> tuple[str, str]:
        path = self.tmp / name
        path.write_bytes(content)
        return str(path), hashlib.sha256(content).hexdigest()

    def last_record(self) -> dict[str, Any]:
        lines = Path(self.journal).read_bytes().splitlines()
        return dict(json.loads(lines[-1]))

    def records(self, kind: str) -> list[dict[str, Any]]:
        lines = Path(self.journal).read_bytes().splitlines()
        return [r for r in map(json.loads, lines) if r["kind"] == kind]


def phase_result(body: dict[str, Any], *, appended: bool, idempotent: bool) -> dict[str, Any]:
    """The SPEC §8 shape of `host continue` / `host phase`."""
    assert {"ok", "appended", "idempotent", "phase"} <= set(body)
    assert body["ok"] is True
    assert body["appended"] is appended
    assert body["idempotent"] is idempotent
    assert set(body["phase"]) >= PHASE_KEYS
    return dict(body["phase"])


def absolute(hours: float) -> str:
    """An absolute RFC 3339 deadline `hours` from now (whole seconds)."""
    from quotaledger.journal.clock import US_PER_S, format_us, wall_us

    return format_us((wall_us() // US_PER_S + int(hours * 3600)) * US_PER_S)


@pytest.fixture
def op(journal_path, tmp_path) -> Operator:
    return Operator(journal_path, tmp_path)


@pytest.fixture
def real(journal_path, tmp_path) -> Operator:
    return Operator(journal_path, tmp_path, real=True)


def quota_failure(op: Operator) -> str:
    """A lane with one phase whose attempt a1 failed quota_exhausted (process exited).
    Set up in-process even for a real-process operator: the replay is what matters."""
    fast = Operator(op.journal, op.tmp)
    phase_result(fast.ok(*fast.phase_args()), appended=True, idempotent=False)
    return fast.fail("a1")


# -- seed 001 / 1: missing source --------------------------------------------------------


def test_missing_source_on_a_journal_that_holds_nothing_dispatches_nothing(op):
    """A well-formed --bind on a journal that has no record at all."""
    bind = hashlib.sha256(b"a state file that does not exist").hexdigest()
    op.refused(*op.continue_args(bind, "+1h"), reasons=["bound_event_not_found"])
    assert op.snapshot() == (0, "", b"")  # no record was written, not even genesis
    op.refused(*op.start_args("a1"), reasons=["no_open_phase"])
    assert op.snapshot() == (0, "", b"")


def test_missing_source_next_to_a_real_failure_dispatches_nothing(op):
    failure = quota_failure(op)
    missing = failure[:-1] + ("0" if failure[-1] != "0" else "1")  # well formed, unknown
    body = op.refused(*op.continue_args(missing, "+1h"), reasons=["bound_event_not_found"])
    assert body["bind"] == missing
    op.refused(*op.start_args("a2"), reasons=["lane_failed"])
    lane = op.status()
    assert [p["phase"] for p in lane["phases"]] == [1]
    assert lane["dispatchable"] is False and lane["reasons"] == ["lane_failed"]
    assert lane["last_failure"] == {**lane["last_failure"], "hash": failure, "attempt": "a1"}
    assert lane["last_failure"]["code"] == "quota_exhausted"


# -- seed 001 / 2: empty source ----------------------------------------------------------


def test_empty_source_binding_an_initial_state_is_not_a_failure(op):
    """The reviewer bound a state holding only `{}`: here the lane's initial phase,
    the goal-less genesis record, a completed return. None is a failure to continue."""
    initial = phase_result(op.ok(*op.phase_args()), appended=True, idempotent=False)
    genesis = json.loads(Path(op.journal).read_bytes().splitlines()[0])["hash"]
    op.refused(*op.continue_args(initial["hash"], "+1h"), reasons=["bound_event_not_a_failure"])
    op.refused(*op.continue_args(genesis, "+1h"), reasons=["bound_event_not_found"])
    completed = op.complete("a1")
    op.refused(*op.continue_args(completed, "+1h"), reasons=["bound_event_not_a_failure"])
    lane = op.status()
    assert [p["basis"] for p in lane["phases"]] == ["initial"]  # no phase was prepared
    assert lane["last_failure"] is None


def test_empty_source_on_a_lane_with_no_history_prepares_no_phase(op):
    other_lane = quota_failure(op)  # lane-1 failed; lane-2 has nothing at all
    args = op.continue_args(other_lane, "+1h")
    args[args.index("--lane") + 1] = "lane-2"
    op.refused(*args, reasons=["bound_event_not_found"])
    start = op.start_args("b1")
    start[start.index("--lane") + 1] = "lane-2"
    op.refused(*start, reasons=["no_open_phase"])


# -- seed 001 / 3: partial same-phase replay ----------------------------------------------


@pytest.fixture
def bound(op) -> dict[str, Any]:
    """a1 failed quota_exhausted and was continued once, with every fact given."""
    failure = quota_failure(op)
    path, digest = op.handoff(b"# resume from turn 7\n")
    deadline = absolute(3)
    handoff = ["--handoff", path, "--handoff-sha256", digest]
    phase = phase_result(
        op.ok(*op.continue_args(failure, deadline, *handoff)), appended=True, idempotent=False
    )
    assert phase["phase"] == 2 and phase["bound"] == failure
    assert phase["basis"] == "failed_attempt"
    assert phase["session"] == S and phase["profile"] == P
    assert phase["handoff_sha256"] == digest
    return {"failure": failure, "deadline": deadline, "handoff": handoff, "phase": phase}


@pytest.mark.parametrize(
    "change",
    ["later_deadline", "earlier_deadline", "relative", "profile", "cursor", "no_handoff"],
)
def test_partial_replay_is_refused_with_the_single_reason(op, bound, change):
    from quotaledger.journal.clock import format_us, parse_at

    deadline, handoff = bound["deadline"], bound["handoff"]
    kwargs: dict[str, str] = {}
    if change == "later_deadline":
        deadline = format_us(parse_at(deadline) + 3600 * 1_000_000)
    elif change == "earlier_deadline":
        deadline = format_us(parse_at(deadline) - 1_000_000)
    elif change == "relative":
        deadline = "+3h"
    elif change == "no_handoff":
        handoff = []
    else:
        kwargs[change] = "other"
    body = op.refused(
        *op.continue_args(bound["failure"], deadline, *handoff, **kwargs),
        reasons=["phase_exists_with_different_request"],
    )
    assert body["existing_phase"]["hash"] == bound["phase"]["hash"]
    assert body["existing_phase"]["deadline"] == bound["deadline"]  # never more time


def test_full_replay_returns_the_same_phase_and_appends_nothing(op, bound):
    before = op.snapshot()
    body = op.ok(*op.continue_args(bound["failure"], bound["deadline"], *bound["handoff"]))
    phase = phase_result(body, appended=False, idempotent=True)
    assert phase["hash"] == bound["phase"]["hash"] and phase["deadline"] == bound["deadline"]
    assert op.snapshot() == before


def test_a_crash_torn_phase_record_is_not_a_phase(real):
    """The continuation's record cut mid-line by a crash: the phase was never
    acknowledged, so nothing may dispatch on it; the same explicit request, made
    again, appends it exactly once (real processes)."""
    failure = quota_failure(real)
    deadline = absolute(2)
    phase = phase_result(
        real.ok(*real.continue_args(failure, deadline)), appended=True, idempotent=False
    )
    data = Path(real.journal).read_bytes()
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    assert json.loads(last)["hash"] == phase["hash"]
    Path(real.journal).write_bytes(data[: len(data) - len(last) // 2])  # torn inside it

    lane = real.status()  # a reader: no lock, no repair, the verified prefix only
    assert [p["phase"] for p in lane["phases"]] == [1]
    assert lane["dispatchable"] is False and lane["reasons"] == ["lane_failed"]
    result = real.run(*real.start_args("a2"))  # a writer: recovers, then refuses
    assert result.code == 1 and result.json["reasons"] == ["lane_failed"], result.stdout
    assert list(Path(real.journal).parent.glob("*.torn.*")), "torn bytes are preserved"

    again = phase_result(
        real.ok(*real.continue_args(failure, deadline)), appended=True, idempotent=False
    )
    assert again["phase"] == 2 and again["deadline"] == deadline and again["bound"] == failure
    replay = real.ok(*real.continue_args(failure, deadline))
    phase_result(replay, appended=False, idempotent=True)
    assert len(real.records("host.phase_appended")) == 2
    assert real.ok(*real.start_args("a2"))["attempt"]["number"] == 2
    verify = run_process("verify", "--journal", real.journal, "--json")
    assert verify.code == 0, verify.stdout


# -- seed 001 / 4: repeated request after a later failure ---------------------------------


def test_repeated_request_after_a_later_failure_keeps_it(op):
    first = quota_failure(op)
    deadline = absolute(4)
    phase2 = phase_result(
        op.ok(*op.continue_args(first, deadline)), appended=True, idempotent=False
    )
    second = op.fail("a2", cursor="turn-9")  # phase 2 failed again

    before = op.snapshot()
    replay = op.ok(*op.continue_args(first, deadline))
    assert phase_result(replay, appended=False, idempotent=True)["hash"] == phase2["hash"]
    assert replay["last_failure"]["hash"] == second  # reported, not erased
    assert op.snapshot() == before
    op.refused(*op.start_args("a3"), reasons=["lane_failed"])
    op.refused(*op.phase_args(), reasons=["lane_failed"])
    lane = op.status()
    assert lane["last_failure"]["hash"] == second and lane["last_failure"]["attempt"] == "a2"
    assert [(a["attempt"], a["number"]) for a in lane["attempts"]] == [("a1", 1), ("a2", 2)]
    assert [a["failure"]["code"] for a in lane["attempts"]] == ["quota_exhausted"] * 2

    # The first failure is superseded; only a continuation bound to the new one goes on.
    op.refused(
        *op.continue_args(first, absolute(5)), reasons=["phase_exists_with_different_request"]
    )
    phase3 = phase_result(
        op.ok(*op.continue_args(second, deadline, cursor="turn-9")),
        appended=True,
        idempotent=False,
    )
    assert (phase3["phase"], phase3["bound"]) == (3, second)
    assert op.ok(*op.start_args("a3"))["attempt"]["number"] == 3  # never reset


def test_no_automatic_retry_of_a_quota_failure(op):
    """The default path: nothing but an explicit continuation goes on after a quota
    failure; a retryable failure is retried only up to --max-attempts."""
    quota_failure(op)
    op.refused(*op.start_args("a2"), reasons=["lane_failed"])
    op.refused(*op.phase_args("+3h"), reasons=["lane_failed"])


def test_retry_limit_is_not_reset_by_replays(op):
    phase_result(op.ok(*op.phase_args()), appended=True, idempotent=False)
    op.fail("a1", "retryable")
    op.fail("a2", "retryable")
    op.refused(*op.start_args("a3", "--max-attempts", "2"), reasons=["retry_limit_reached"])
    op.refused(*op.start_args("a3", "--max-attempts", "2"), reasons=["retry_limit_reached"])
    lane = op.ok("host", "status", "--goal", G, "--max-attempts", "2")["lanes"][L]
    assert lane["reasons"] == ["retry_limit_reached"]
    assert op.ok(*op.start_args("a3"))["attempt"]["number"] == 3  # default limit 3


@pytest.mark.parametrize("failure", ["output_budget_exhausted", "fatal"])
def test_no_blind_replay_of_an_exhausted_output_budget(op, failure):
    phase_result(op.ok(*op.phase_args()), appended=True, idempotent=False)
    bind = op.fail("a1", failure)
    op.refused(*op.continue_args(bind, "+1h"), reasons=["failure_not_continuable"])
    op.refused(*op.start_args("a2"), reasons=["lane_failed"])


# -- seed 001 / 5: Stop after capacity was observed; deadline exhausted --------------------


def _token_gate_ready(op: Operator) -> None:
    op.ok("configure", "--goal", G, "--quota-tpm", "100000", "--target-tpm", "90000")
    op.ok(
        "observe",
        "--goal",
        G,
        "--uncached-input",
        "10",
        "--cached-input",
        "0",
        "--output",
        "5",
    )
    assert op.ok("inspect", "--goal", G)["goals"][G]["admission_ready"] is True


def test_stop_arriving_after_capacity_was_observed_refuses_continue_and_start(op):
    failure = quota_failure(op)
    _token_gate_ready(op)
    op.ok("host", "stop", "--goal", G)
    op.refused(*op.continue_args(failure, "+1h"), reasons=["stop_requested"])
    op.refused(*op.start_args("a2"), reasons=["stop_requested", "lane_failed"])
    op.ok("host", "stop", "--goal", G, "--clear")
    deadline = absolute(1)
    phase_result(op.ok(*op.continue_args(failure, deadline)), appended=True, idempotent=False)
    op.ok("host", "stop", "--goal", G)  # Stop after the phase was prepared
    op.refused(*op.start_args("a2"), reasons=["stop_requested"])
    lane = op.status()
    assert lane["stop"] is True and lane["dispatchable"] is False
    assert lane["reasons"] == ["stop_requested"]


def test_capacity_not_ready_refuses_a_quota_continuation(op):
    failure = quota_failure(op)
    op.ok("configure", "--goal", G, "--quota-tpm", "100000", "--target-tpm", "90000")
    # No observation yet: usage is stale, admission is not ready.
    op.refused(*op.continue_args(failure, "+1h"), reasons=["capacity_not_ready"])


def test_deadline_exhausted_before_the_continuation_refuses(op):
    from tests.hosts.hosts_helpers import at

    op.ok(*op.phase_args(at(120), "--at", at(0)))
    op.ok(*op.start_args("a1", "--at", at(1)))
    op.ok("host", "exit", "--goal", G, "--attempt", "a1", "--signal", "9", "--at", at(2))
    args = ["host", "return", "--goal", G, "--attempt", "a1", "--outcome", "interrupted"]
    bind = op.ok(*args, "--cursor", "turn-7", "--at", at(3))["hash"]
    op.refused(*op.continue_args(bind, at(10), "--at", at(10)), reasons=["deadline_not_in_future"])
    op.refused(
        *op.continue_args(bind, at(60 * 24 * 8), "--at", at(10)), reasons=["deadline_too_far"]
    )
    op.refused(
        *op.continue_args(bind, at(60 * 5), "--at", at(10), "--max-phase", "4h"),
        reasons=["deadline_too_far"],
    )
    phase = phase_result(
        op.ok(*op.continue_args(bind, at(70), "--at", at(10))), appended=True, idempotent=False
    )
    assert phase["basis"] == "interrupted_attempt"
    # The continued phase ran out before an attempt started: no dispatch on it.
    op.refused(*op.start_args("a2", "--at", at(71)), reasons=["phase_deadline_passed"])
    # ... and its replay cannot buy more time.
    op.refused(
        *op.continue_args(bind, at(200), "--at", at(72)),
        reasons=["phase_exists_with_different_request"],
    )


@pytest.mark.slow
def test_stop_racing_a_continuation_never_lets_an_attempt_start(real):
    """Real processes: `host stop` and `host continue` race for the lock. Whichever
    wins, no attempt starts afterwards and the chain verifies."""
    failure = quota_failure(real)
    deadline = absolute(1)
    base = [sys.executable, "-m", "quotaledger"]
    tail = ["--journal", real.journal, "--json"]
    procs = [
        subprocess.Popen(
            [*base, *args, *tail], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for args in (
            ["host", "stop", "--goal", G],
            real.continue_args(failure, deadline),
        )
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert procs[0].returncode == 0, outs[0]
    assert procs[1].returncode in (0, 1), outs[1]
    if procs[1].returncode == 1:  # the stop won: no phase, the lane stays failed
        assert json.loads(outs[1][0])["reasons"] == ["stop_requested"]
        real.refused(*real.start_args("a2"), reasons=["stop_requested", "lane_failed"])
    else:  # the continuation won: its phase exists, the stop holds it
        real.refused(*real.start_args("a2"), reasons=["stop_requested"])
    assert run_process("verify", "--journal", real.journal, "--json").code == 0


# -- seed 002 / 6: FIFO handoff ----------------------------------------------------------


def test_fifo_handoff_is_refused_without_blocking(real):
    """A FIFO with no writer: a blocking open would hang the process (timeout)."""
    failure = quota_failure(real)
    fifo = real.tmp / "handoff.fifo"
    os.mkfifo(fifo)
    handoff = ["--handoff", str(fifo), "--handoff-sha256", "0" * 64]
    real.refused(*real.continue_args(failure, "+1h", *handoff), reasons=["handoff_not_regular"])
    real.refused(*real.phase_args("+1h", *handoff, lane="lane-2"), reasons=["handoff_not_regular"])
    # Checked first: even a replay of an existing phase reads (and refuses) it.
    deadline = absolute(1)
    real.ok(*real.continue_args(failure, deadline))
    real.refused(*real.continue_args(failure, deadline, *handoff), reasons=["handoff_not_regular"])


# -- seed 002 / 7: changed handoff bytes -------------------------------------------------


def test_changed_handoff_bytes_are_refused_and_the_phase_keeps_its_content(op, bound):
    path = bound["handoff"][1]
    original = Path(path).read_bytes()
    Path(path).write_bytes(original + b"edited after binding\n")
    # Same file, same recorded digest: the bytes no longer match it.
    op.refused(
        *op.continue_args(bound["failure"], bound["deadline"], *bound["handoff"]),
        reasons=["handoff_digest_mismatch"],
    )
    # The edited bytes with their own digest: a different request.
    new_digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    op.refused(
        *op.continue_args(
            bound["failure"], bound["deadline"], "--handoff", path, "--handoff-sha256", new_digest
        ),
        reasons=["phase_exists_with_different_request"],
    )
    beat = op.heartbeat()
    assert beat["ok"] is True and beat["phase"]["hash"] == bound["phase"]["hash"]
    assert beat["handoff"] == {
        "sha256": hashlib.sha256(original).hexdigest(),
        "content": original.decode(),
    }


def test_an_unused_pre_dispatch_phase_cannot_swap_its_handoff_or_gain_time(op):
    path, digest = op.handoff(b"pre-dispatch brief v1\n")
    deadline = absolute(2)
    handoff = ["--handoff", path, "--handoff-sha256", digest]
    first = phase_result(op.ok(*op.phase_args(deadline, *handoff)), appended=True, idempotent=False)
    same = phase_result(op.ok(*op.phase_args(deadline, *handoff)), appended=False, idempotent=True)
    assert same["hash"] == first["hash"]
    new_path, new_digest = op.handoff(b"pre-dispatch brief v2\n", name="v2.md")
    for args in (
        op.phase_args(deadline, "--handoff", new_path, "--handoff-sha256", new_digest),
        op.phase_args(deadline),
        op.phase_args(absolute(5), *handoff),
    ):
        body = op.refused(*args, reasons=["phase_exists_with_different_request"])
        assert body["existing_phase"]["hash"] == first["hash"]
    Path(path).write_bytes(b"pre-dispatch brief v1, edited\n")
    op.refused(*op.phase_args(deadline, *handoff), reasons=["handoff_digest_mismatch"])
    beat = op.heartbeat()
    assert beat["handoff"] == {"sha256": digest, "content": "pre-dispatch brief v1\n"}
    # After a completed attempt a further phase may bind another handoff.
    op.complete("a1")
    later = phase_result(
        op.ok(*op.phase_args(absolute(3), "--handoff", new_path, "--handoff-sha256", new_digest)),
        appended=True,
        idempotent=False,
    )
    assert later["phase"] == 2 and later["handoff_sha256"] == new_digest


# -- seed 002 / 8: handoff presentation and confirmation ----------------------------------


def test_uncertain_delivery_keeps_the_handoff_until_a_completed_same_session_return(op):
    phase_result(op.ok(*op.phase_args()), appended=True, idempotent=False)
    started = op.ok(*op.start_args("a1"))
    assert started["attempt"]["number"] == 1
    op.ok("host", "exit", "--goal", G, "--attempt", "a1", "--signal", "15")
    interrupted = op.ok(
        "host",
        "return",
        "--goal",
        G,
        "--attempt",
        "a1",
        "--outcome",
        "interrupted",
        "--cursor",
        "turn-3",
    )["hash"]
    path, digest = op.handoff("état: reprendre au tour 3 ✓\n".encode())
    handoff = ["--handoff", path, "--handoff-sha256", digest]
    phase = phase_result(
        op.ok(*op.continue_args(interrupted, absolute(2), *handoff, cursor="turn-3")),
        appended=True,
        idempotent=False,
    )
    assert phase["basis"] == "interrupted_attempt" and phase["handoff_sha256"] == digest
    expected = {"sha256": digest, "content": "état: reprendre au tour 3 ✓\n"}
    assert op.heartbeat()["handoff"] == expected
    wrong = op.heartbeat(session="sess-B")  # never handed to another session
    assert wrong["ok"] is False and wrong["handoff"] is None

    # A retryable failure in the phase is an uncertain delivery: still presented.
    op.fail("a2", "retryable", cursor="turn-4")
    assert op.heartbeat()["handoff"] == expected
    op.complete("a3")  # a completed return in the same session and phase confirms it
    beat = op.heartbeat()
    assert beat["ok"] is True and beat["handoff"] is None
    assert beat["phase"]["hash"] == phase["hash"]
    # The confirmed handoff stays in its phase (immutable): status still shows it.
    assert op.status()["phases"][1]["handoff_sha256"] == digest


def test_a_later_phase_binds_a_new_handoff_and_the_earlier_one_is_unchanged(op):
    failure = quota_failure(op)
    p1, d1 = op.handoff(b"first\n", "h1.md")
    op.ok(*op.continue_args(failure, absolute(2), "--handoff", p1, "--handoff-sha256", d1))
    second = op.fail("a2", cursor="turn-8")
    p2, d2 = op.handoff(b"second\n", "h2.md")
    later = op.ok(
        *op.continue_args(
            second, absolute(2), "--handoff", p2, "--handoff-sha256", d2, cursor="turn-8"
        )
    )
    assert phase_result(later, appended=True, idempotent=False)["handoff_sha256"] == d2
    assert op.heartbeat()["handoff"] == {"sha256": d2, "content": "second\n"}
    records = op.records("host.phase_appended")
    assert [r["data"]["handoff"] and r["data"]["handoff"]["content"] for r in records] == [
        None,
        "first\n",
        "second\n",
    ]


# -- seed 002 / 9: live process, changed identity or history, unsettled replan -------------


def test_a_live_process_must_be_observed_exited_before_a_continuation(real):
    """A real worker process: while it lives (no `host exit`) nothing continues."""
    phase_result(real.ok(*real.phase_args()), appended=True, idempotent=False)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        real.ok(*real.start_args("a1", "--pid", str(worker.pid)))
        ret = ["host", "return", "--goal", G, "--attempt", "a1", "--outcome", "failed"]
        bind = real.ok(*ret, "--failure", "quota_exhausted", "--cursor", "turn-7")["hash"]
        real.refused(*real.continue_args(bind, "+1h"), reasons=["process_not_exited"])
        real.refused(*real.start_args("a2"), reasons=["attempt_in_flight", "lane_failed"])
        worker.kill()
        assert worker.wait(timeout=30) == -9
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    real.ok("host", "exit", "--goal", G, "--attempt", "a1", "--signal", "9")
    phase_result(real.ok(*real.continue_args(bind, "+1h")), appended=True, idempotent=False)
    attempt = real.ok(*real.start_args("a2"))["attempt"]
    assert (attempt["number"], attempt["session"], attempt["phase"]) == (2, S, 2)


def test_changed_session_profile_or_history_is_refused_with_every_reason(op):
    failure = quota_failure(op)
    op.refused(
        *op.continue_args(failure, "+1h", session="sess-B", profile="prof-2", cursor="turn-8"),
        reasons=["session_mismatch", "profile_mismatch", "history_changed"],
    )
    phase_result(op.ok(*op.continue_args(failure, "+1h")), appended=True, idempotent=False)
    op.refused(*op.start_args("a2", session="sess-B"), reasons=["session_mismatch"])


def test_an_unsettled_replan_holds_the_lane_before_and_after_the_phase(op):
    failure = quota_failure(op)
    op.ok("host", "replan", "--goal", G, "--lane", L, "--replan", "r1", "--open")
    op.refused(*op.continue_args(failure, "+1h"), reasons=["replan_unsettled"])
    op.ok("host", "replan", "--goal", G, "--lane", L, "--replan", "r1", "--settle")
    phase_result(op.ok(*op.continue_args(failure, "+1h")), appended=True, idempotent=False)
    op.ok("host", "replan", "--goal", G, "--lane", L, "--replan", "r2", "--open")
    op.refused(*op.start_args("a2"), reasons=["replan_unsettled"])
    lane = op.status()
    assert [r["replan"] for r in lane["replans"] if r["open"]] == ["r2"]
    assert lane["reasons"] == ["replan_unsettled"]


def test_every_continue_reason_at_once_in_spec_order(op):
    """A failure that fails every check but the binding itself."""
    phase_result(op.ok(*op.phase_args()), appended=True, idempotent=False)
    op.ok(*op.start_args("a1"))
    ret = ["host", "return", "--goal", G, "--attempt", "a1", "--outcome", "failed"]
    bind = op.ok(*ret, "--failure", "fatal", "--cursor", "turn-7")["hash"]
    op.ok("host", "stop", "--goal", G)
    op.ok("host", "replan", "--goal", G, "--lane", L, "--replan", "r1", "--open")
    path, _ = op.handoff(b"x")
    op.refused(
        *op.continue_args(
            bind,
            "+0s",
            "--handoff",
            path,
            "--handoff-sha256",
            "f" * 64,
            session="s9",
            profile="p9",
            cursor="turn-0",
        ),
        reasons=[
            "process_not_exited",
            "session_mismatch",
            "profile_mismatch",
            "history_changed",
            "failure_not_continuable",
            "stop_requested",
            "replan_unsettled",
            "deadline_not_in_future",
            "handoff_digest_mismatch",
        ],
    )


def test_a_long_lived_api_handle_sees_a_confirmation_made_by_another_process(op):
    """A runner holding the Python API across other processes' appends: its heartbeat
    must not present a handoff another process's completed return already confirmed."""
    from quotaledger.api import Ledger

    path, digest = op.handoff(b"brief\n")
    op.ok(*op.phase_args("+2h", "--handoff", path, "--handoff-sha256", digest))
    op.ok(*op.start_args("a1"))
    with Ledger.open(op.journal) as held:
        beat = held.host_heartbeat(goal=G, lane=L, session=S)
        assert beat["handoff"] == {"sha256": digest, "content": "brief\n"}
        real = Operator(op.journal, op.tmp, real=True)
        real.ok("host", "exit", "--goal", G, "--attempt", "a1", "--exit-code", "0")
        real.ok("host", "return", "--goal", G, "--attempt", "a1", "--outcome", "completed")
        assert held.host_heartbeat(goal=G, lane=L, session=S)["handoff"] is None
        lane = held.host_status(goal=G)["lanes"][L]
        assert [a["outcome"] for a in lane["attempts"]] == ["completed"]
        assert lane["dispatchable"] is True
