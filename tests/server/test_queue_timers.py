"""The server's timers (SPEC §12.2, §11): one per queue it serves, at the queue's
earliest estimate. A pool is one queue, however many of its members wait in it: one
timer, and one promotion transaction when it fires, not one per waiting goal."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, wall_us
from quotaledger.server.queue_timers import QueueTimers
from quotaledger.services.capacity import CapacityService
from quotaledger.usecases.capacity import AdmitRequest
from quotaledger.usecases.decode import API, decode

LEASE_S = 60
DUE_S = 0.5
"""The blocker's lease ends this long after the test starts: the queue's estimate."""


def _queued(ledger: Ledger, goal: str, run: str, at: str) -> Any:
    """A typed queued answer, as the server's committer hands it to the timers."""
    fields = {"goal": goal, "run": run, "forecast_tpm": 300, "lease_s": LEASE_S}
    answer = ledger.answer("admit", decode(AdmitRequest, {**fields, "queue": True, "at": at}, API))
    assert getattr(answer, "queued", None) is True, answer
    return answer


def _pool_with_waiters(ledger: Ledger, start_us: int) -> list[Any]:
    """A full pool of three members (the blocker's lease ends at `start_us` +
    LEASE_S), and one entry of each member waiting behind it, all at explicit times
    in the past (the decisions do not depend on the machine's speed)."""

    def t(seconds: float) -> str:
        return format_us(start_us + round(seconds * US_PER_S))

    ledger.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=t(0))
    for goal in ("a", "b", "c"):
        ledger.configure(goal=goal, pool="org", pool_share=0.3, at=t(0))
    blocker = ledger.admit(goal="a", run="blocker", forecast_tpm=1000, lease_s=LEASE_S, at=t(0))
    assert blocker["admitted"] is True
    return [_queued(ledger, goal, f"w-{goal}", t(1)) for goal in ("a", "b", "c")]


def test_a_pool_with_several_waiting_members_has_one_timer(tmp_path: Path) -> None:
    start_us = wall_us() - LEASE_S * US_PER_S + round(DUE_S * US_PER_S)
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        answers = _pool_with_waiters(ledger, start_us)
        estimate = format_us(start_us + LEASE_S * US_PER_S)
        assert [a.estimated_start_at for a in answers] == [estimate] * 3

        async def scenario() -> tuple[list[str], int, list[Any]]:
            promotions: list[str] = []
            done = asyncio.Event()
            outcomes: list[Any] = []

            async def promote(name: str) -> Any:
                promotions.append(name)
                outcome = CapacityService(ledger.journal).promote_queue(name)
                outcomes.append(outcome)
                if len(outcome.admitted) == 3:
                    done.set()
                return outcome

            timers = QueueTimers(promote)
            for answer in answers:
                timers.note(answer)
            armed = len(timers)
            await asyncio.wait_for(done.wait(), 60)
            left = len(timers)
            timers.cancel()
            assert left == 0  # the queue is empty: nothing to look at again
            return promotions, armed, outcomes

        promotions, armed, outcomes = asyncio.run(scenario())
    # One queue (the pool's), one timer, one promotion transaction admitting all three.
    assert armed == 1
    assert promotions == ["org"]
    (outcome,) = outcomes
    assert outcome.queue == "org"
    assert [a.receipt.run for a in outcome.admitted] == ["w-a", "w-b", "w-c"]
    assert outcome.next_estimate_us is None
