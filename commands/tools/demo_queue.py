"""The queue part of `quotaledger demo` (SPEC §12.2): a run that waits in line with an
honest estimate and starts at it, and one a release lets in at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaledger.api import Ledger
from quotaledger.render.per_event import admit_text, promoted_text
from quotaledger.tools.demo_capacity import clock
from quotaledger.usecases.capacity import AdmitAnswer, ReleaseAnswer
from quotaledger.usecases.decode import typed

QUEUE_GOAL = "demo-queue"
SESSION_S = 45
"""The queue session's length: its last event is at t(45)."""


def run_queue(
    ledger: Ledger, say: Callable[[str], None], base_at: str | None = None
) -> dict[str, Any]:
    """One case slot: q-001 holds it on a 30 s lease; q-002 and q-003 queue behind it,
    each told when it starts (q-003 after q-002's 60 s lease); q-002 starts at its
    estimate, the end of q-001's lease, and its release at +45 s lets q-003 in then,
    before its estimate."""
    t = clock(ledger, QUEUE_GOAL, base_at)
    say(f"Goal {QUEUE_GOAL}: one case slot; runs queue instead of polling.")
    ledger.configure(goal=QUEUE_GOAL, max_active_cases=1, at=t(0))

    def admit(seconds: float, run_id: str, **request: Any) -> dict[str, Any]:
        result = ledger.admit(goal=QUEUE_GOAL, run=run_id, arm="baseline", at=t(seconds), **request)
        text = admit_text(typed(AdmitAnswer, result), run_id)
        say(f"  +{seconds:>3}s  " + text.replace("\n", "\n         "))
        return result

    admit(0, "q-001", lease_s=30)
    waiting = admit(2, "q-002", lease_s=60, queue=True)
    behind = admit(3, "q-003", lease_s=60, queue=True)
    say("  (each poll is a write on the goal: it promotes whatever now fits)")
    started = admit(30, "q-002", lease_s=60, queue=True)  # the lease ended: the poll admits it
    released = ledger.release(goal=QUEUE_GOAL, run="q-002", at=t(45))
    text = "released q-002" + promoted_text(typed(ReleaseAnswer, released).promoted)
    say("  + 45s  " + text.replace("\n", "\n         "))
    return {
        "goal": QUEUE_GOAL,
        "estimated_start_at": waiting["estimated_start_at"],
        "started_at": started["receipt"]["at"],
        "behind_estimate": behind["estimated_start_at"],
        "promoted_by_release": released.get("promoted", []),
    }
