"""The `demo` chapter on host continuation: a quota failure continued on its session.

A lane runs its first attempt, which fails with `quota_exhausted`. The dispatch gate
then refuses the lane (`lane_failed`) until an operator binds exactly that failure,
by the hash of its return event, to a new finite phase on the original session, with
a handoff file. The next attempt runs in the same session (attempt numbers go on);
the heartbeat presents the handoff until that attempt's completed return confirms
it. Nothing is erased: the failure stays the lane's last failure, now continued.

    summary = run(ledger, say, goal="demo-hosts")

`ledger` is an open, writable `quotaledger.Ledger`; `say(text)` narrates. The
continuation of a `quota_exhausted` failure needs the goal's capacity ready when the
goal has a token gate (`capacity_not_ready` otherwise): give a goal whose capacity
is ready, or one with no gate configured.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from typing import Any

LANE = "lane-1"
SESSION = "session-7f3a"
PROFILE = "default"
HANDOFF_TEXT = (
    "Resume at turn 7. The quota failure hit while evaluating case 12;\n"
    "cases 1-11 are scored and committed. Re-run the evaluator on case 12 only.\n"
)


def _expect(result: dict[str, Any], step: str) -> dict[str, Any]:
    if not result.get("ok"):
        raise RuntimeError(f"demo step {step!r} was refused: {result.get('reasons')}")
    return result


def run(ledger: Any, say: Callable[[str], None], goal: str) -> dict[str, Any]:
    """Run the scripted continuation; returns a JSON-ready summary."""
    common = {"goal": goal}
    bind, gate = _first_attempt_fails(ledger, say, common)
    continued, digest = _continue_on_the_session(ledger, common, bind)
    say(
        f"hosts: continued in phase {continued['phase']} (bound to the failure, deadline "
        f"{continued['deadline']}, handoff {digest[:12]}...)"
    )
    before, after = _second_attempt_completes(ledger, say, common)
    lane = ledger.host_status(**common, lane=LANE)["lanes"][LANE]
    return {
        "goal": goal,
        "lane": LANE,
        "bound_failure": bind,
        "gate_before_continue": gate.get("reasons"),
        "continued_phase": continued,
        "attempt_numbers": [a["number"] for a in lane["attempts"]],
        "handoff_before_completion": before["handoff"] is not None,
        "handoff_after_completion": after["handoff"] is not None,
        "last_failure": lane["last_failure"],
        "dispatchable": lane["dispatchable"],
    }


def _first_attempt_fails(
    ledger: Any, say: Callable[[str], None], common: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """Phase 1 and its attempt failing `quota_exhausted`: the failure's return hash, and
    the dispatch gate's refusal of the next attempt."""
    phase1 = _expect(
        ledger.host_phase(**common, lane=LANE, deadline="+2h", session=SESSION, profile=PROFILE),
        "host phase",
    )["phase"]
    say(f"hosts: {LANE} phase 1 until {phase1['deadline']} on session {SESSION}")
    _expect(
        ledger.host_start(
            **common, lane=LANE, attempt="attempt-1", session=SESSION, profile=PROFILE
        ),
        "host start attempt-1",
    )
    _expect(ledger.host_exit(**common, attempt="attempt-1", exit_code=75), "host exit")
    failed = _expect(
        ledger.host_return(
            **common,
            attempt="attempt-1",
            outcome="failed",
            failure="quota_exhausted",
            cursor="turn-7",
            detail="HTTP 429: subscription quota exhausted",
        ),
        "host return",
    )
    bind: str = failed["hash"]
    say(f"hosts: attempt-1 failed quota_exhausted at turn-7 (return {bind[:12]}...)")
    gate: dict[str, Any] = ledger.host_start(
        **common, lane=LANE, attempt="attempt-2", session=SESSION, profile=PROFILE
    )
    reasons = ", ".join(gate.get("reasons") or [])
    say(f"hosts: dispatch gate before continuing: REFUSED {reasons}")
    return bind, gate


def _continue_on_the_session(
    ledger: Any, common: dict[str, Any], bind: str
) -> tuple[dict[str, Any], str]:
    """The failure bound to a new phase with a handoff file: the phase, the file's digest."""
    with tempfile.TemporaryDirectory(prefix="quotaledger-demo-") as scratch:
        path = os.path.join(scratch, "handoff.txt")
        data = HANDOFF_TEXT.encode()
        with open(path, "wb") as handle:
            handle.write(data)
        digest = hashlib.sha256(data).hexdigest()
        continued: dict[str, Any] = _expect(
            ledger.host_continue(
                **common,
                lane=LANE,
                bind=bind,
                deadline="+1h",
                session=SESSION,
                profile=PROFILE,
                cursor="turn-7",
                handoff=path,
                handoff_sha256=digest,
            ),
            "host continue",
        )["phase"]
    return continued, digest


def _second_attempt_completes(
    ledger: Any, say: Callable[[str], None], common: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Attempt 2 on the same session, completed: the heartbeats before and after."""
    before = _expect(ledger.host_heartbeat(**common, lane=LANE, session=SESSION), "heartbeat")
    second = _expect(
        ledger.host_start(
            **common, lane=LANE, attempt="attempt-2", session=SESSION, profile=PROFILE
        ),
        "host start attempt-2",
    )["attempt"]
    say(f"hosts: attempt-2 started, number {second['number']}, same session {SESSION}")
    _expect(ledger.host_exit(**common, attempt="attempt-2", exit_code=0), "host exit")
    _expect(
        ledger.host_return(**common, attempt="attempt-2", outcome="completed", cursor="turn-9"),
        "host return",
    )
    after = _expect(ledger.host_heartbeat(**common, lane=LANE, session=SESSION), "heartbeat")
    say(
        "hosts: heartbeat presented the handoff before completion "
        f"({before['handoff'] is not None}) and not after ({after['handoff'] is not None})"
    )
    return before, after
