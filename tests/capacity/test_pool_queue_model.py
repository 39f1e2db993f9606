"""A pool's queue held against an independent model of SPEC §12.2
(tests/capacity/independent_pool_queue.py) by a hypothesis state machine: three member
goals of one pool, with priorities, shares, borrowing and lending limits and case
gates of their own drawn; every answer (admitted, queued, refused, the runs promoted,
the position) is the model's. The journal it leaves, replayed into a fresh model,
holds the queue's invariants: admissions only in queue order (an entry blocks its
own goal's later entries always, other goals' only on a pool-wide reason), never
twice, never after expiry, never past a limit; and every estimate is no later than
the actual start when nothing unforeseen was written."""

from __future__ import annotations

import os
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput
from quotaledger.journal.clock import US_PER_S, format_us, parse_at, wall_us
from tests.capacity.independent_pool_queue import Active, Entry, PoolQueueModel, Terms

BASE_US = (wall_us() // US_PER_S - 10 * 86_400) * US_PER_S
"""Ten days ago, whole seconds: histories stay in the past (SPEC §2.2's bound)."""
TARGET = 1000
GOALS = ("g0", "g1", "g2")
RUNS: dict[str, tuple[str, int, int | None]] = {
    "r0": ("g0", 300, 20), "r1": ("g1", 200, 5), "r2": ("g2", 400, 60),
    "r3": ("g0", 600, 60), "r4": ("g1", 500, 20), "r5": ("g2", 100, 5),
    "r6": ("g0", 100, None), "r7": ("g1", 900, 60), "r8": ("g2", 700, 20),
}  # fmt: skip
"""Each run always asks with the same request: its goal, forecast_tpm, lease (None: no
lease)."""
TTLS_S = (10, 30, 120)


@st.composite
def terms(draw: Any) -> list[Terms]:
    found = []
    for _ in GOALS:
        share = draw(st.sampled_from([1, 2, 3]))  # tenths
        borrowing = draw(st.integers(0, 10 - share))
        lending = draw(st.integers(0, share))
        found.append(
            Terms(
                share=Fraction(share, 10),
                borrowing=Fraction(borrowing, 10),
                lending=Fraction(lending, 10),
                priority=draw(st.sampled_from([0, 0, 5])),
                slots=draw(st.sampled_from([None, 1, 1, 2])),
            )
        )
    return found


class PoolQueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.ledger = Ledger.open(str(Path(self.dir.name) / "j.jsonl"))
        self.t_us = BASE_US
        self.model: PoolQueueModel | None = None
        self.estimates: dict[str, tuple[int | None, bool]] = {}
        """Queued run -> (its estimate when queued, whether something unforeseen was
        written since)."""

    def teardown(self) -> None:
        self.ledger.close()
        self.dir.cleanup()

    def _at(self) -> str:
        return format_us(self.t_us)

    @initialize(members=terms())
    def configure(self, members: list[Terms]) -> None:
        self.ledger.pool_configure(pool="org", quota_tpm=TARGET, target_tpm=TARGET, at=self._at())
        for goal, found in zip(GOALS, members, strict=True):
            self.ledger.configure(
                goal=goal, pool="org", pool_share=float(found.share),
                pool_borrowing_limit=float(found.borrowing),
                pool_lending_limit=float(found.lending), priority=found.priority,
                max_active_cases=found.slots, at=self._at(),
            )  # fmt: skip
        self.model = PoolQueueModel(TARGET, dict(zip(GOALS, members, strict=True)))

    @property
    def m(self) -> PoolQueueModel:
        assert self.model is not None
        return self.model

    @rule(seconds=st.sampled_from([0, 1, 4, 5, 15, 20, 31, 60]))
    def advance(self, seconds: int) -> None:
        self.t_us += seconds * US_PER_S

    # -- estimates ------------------------------------------------------------------------

    def _settle(self) -> list[str]:
        """Time passes up to now: the queue's order, once the entries that expired are
        gone. An entry ahead that expired though it had an estimate before its expiry
        missed its start only because nothing was written then (the server's timer
        would have promoted it): the entries behind it did not foresee that."""
        before = [e.run for e in self.m.queue()]
        self.m.settle(self.t_us)
        for index, run in enumerate(before):
            if self.m.entry(run) is None:
                estimate, _ = self.estimates.pop(run, (None, True))
                if estimate is not None:
                    self._unforeseen(before[index + 1 :])
        return [e.run for e in self.m.queue()]

    def _unforeseen(self, runs: list[str] | None = None) -> None:
        for run, (estimate, _) in list(self.estimates.items()):
            if runs is None or run in runs:
                self.estimates[run] = (estimate, True)

    def _check_promoted(self, answer: dict[str, Any], expected: list[tuple[str, str]]) -> None:
        found = [(p["goal"], p["run"]) for p in answer.get("promoted", [])]
        assert found == expected, (found, expected)

    def _started(self, run: str, ahead: list[str]) -> None:
        """`run` starts now; the entries that were ahead of it did not foresee that."""
        estimate, unforeseen = self.estimates.pop(run, (None, True))
        if estimate is not None and not unforeseen:
            assert estimate <= self.t_us, (run, format_us(estimate), self._at())
        self._unforeseen(ahead)

    def _write(self, answer: dict[str, Any], order: list[str], promoted: Any) -> None:
        """Check a write's promotions against the model's; `order` is the queue's
        order before them."""
        self._check_promoted(answer, promoted)
        for _, run in promoted:
            self._started(run, order[: order.index(run)])

    # -- the writes -----------------------------------------------------------------------

    @rule(run=st.sampled_from(sorted(RUNS)), queue=st.booleans(), ttl_s=st.sampled_from(TTLS_S))
    def admit(self, run: str, queue: bool, ttl_s: int) -> None:
        goal, forecast, lease_s = RUNS[run]
        params: dict[str, Any] = {"forecast_tpm": forecast, "lease_s": lease_s}
        if self.m.members[goal].slots is not None:
            params["arm"] = "baseline"
        if queue:
            params |= {"queue": True, "queue_ttl_s": ttl_s}
            if lease_s is None:
                with pytest.raises(InvalidInput):
                    self.ledger.admit(goal=goal, run=run, at=self._at(), **params)
                return
        before = self._settle()
        was_queued = self.m.entry(run) is not None
        lease_us = None if lease_s is None else lease_s * US_PER_S
        expected, promoted = self.m.admit(
            goal, run, forecast, lease_us, queue, ttl_s * US_PER_S, self.t_us
        )
        answer = self.ledger.admit(goal=goal, run=run, at=self._at(), **params)
        if expected == "idempotent":
            assert answer["admitted"] and answer["idempotent"] and not answer["appended"]
        elif expected == "admitted":
            assert answer["admitted"] is True, (answer, expected)
        elif expected == "queued":
            assert answer["queued"] is True and answer["admitted"] is False, (answer, expected)
            assert answer["position"] == self.m.position(run), answer
            if not was_queued:
                shown = answer["estimated_start_at"]
                self.estimates[run] = (None if shown is None else parse_at(shown), False)
                after = [e.run for e in self.m.queue()]
                self._unforeseen(after[after.index(run) + 1 :])  # it waits ahead of these
        else:
            assert answer["ok"] is False and "queued" not in answer, (answer, expected)
        if expected == "admitted" and (goal, run) not in promoted and not was_queued:
            self._unforeseen()  # an admission the queue did not order: not foreseen
        self._write(answer, before, promoted)

    @rule(run=st.sampled_from(sorted(RUNS)))
    def release(self, run: str) -> None:
        goal = RUNS[run][0]
        before = self._settle()
        expected, promoted = self.m.release(run, self.t_us)
        answer = self.ledger.release(goal=goal, run=run, at=self._at())
        assert answer["released"] is (expected == "released"), (answer, expected)
        assert answer.get("dequeued", False) is (expected == "dequeued"), (answer, expected)
        if expected != "nothing":
            self._unforeseen()
            self.estimates.pop(run, None)
        self._write(answer, before, promoted)

    @rule(run=st.sampled_from(sorted(RUNS)))
    def cancel(self, run: str) -> None:
        goal = RUNS[run][0]
        before = self._settle()
        expected, promoted = self.m.cancel(run, self.t_us)
        answer = self.ledger.admit(goal=goal, run=run, cancel=True, at=self._at())
        assert answer["cancelled"] is expected, (answer, expected)
        if expected:
            self._unforeseen()
            self.estimates.pop(run, None)
        self._write(answer, before, promoted)

    @rule(goal=st.sampled_from(GOALS))
    def observe(self, goal: str) -> None:
        before = self._settle()
        promoted = self.m.observe(self.t_us)
        answer = self.ledger.observe(
            goal=goal, uncached_input=0, cached_input=0, output=0, at=self._at()
        )
        self._write(answer, before, promoted)

    @invariant()
    def the_journal_holds_the_queue_rules(self) -> None:
        if self.model is not None:
            check_journal(list(self.ledger.log()), self.m.members)


def check_journal(events: list[dict[str, Any]], members: dict[str, Terms]) -> None:
    """From the log alone, replayed into a fresh model: every admission fits the pool
    (never past a limit), none twice, a promotion only of a waiting entry before its
    expiry that nothing ahead of it blocks, an admission of a run not queued only when
    no entry holds it back (queue order)."""
    model = PoolQueueModel(TARGET, members)
    order: dict[int, int] = {}  # capacity.queued seq -> the model's queued order
    for event in events:
        t, kind, data, goal = parse_at(event["at"]), event["kind"], event["data"], event["goal"]
        if not kind.startswith("capacity."):
            continue  # a batch's record takes the wall clock's time, not the history's
        model.settle(t)
        if kind == "capacity.queued":
            request = data["request"]
            model.count += 1
            order[event["seq"]] = model.count
            expires_us = t + data["ttl_s"] * US_PER_S
            lease_us, forecast = request["lease_s"] * US_PER_S, request["forecast_tpm"]
            model.entries.append(
                Entry(goal, request["run"], model.count, t, expires_us, lease_us, forecast)
            )
        elif kind == "capacity.admitted":
            request = data["request"]
            run = request["run"]
            assert run not in model.active, f"{run} admitted twice"
            assert model.verdict(goal, request["forecast_tpm"]).fits, f"{run} past a limit"
            queued = data.get("queued")
            if queued is None:
                assert not model.jumped(goal), f"{run} jumped the queue"
            else:
                entry = model.entry(run)
                assert entry is not None, f"{run} admitted after its entry expired or left"
                assert order[queued["seq"]] == entry.order
                assert model.next_admission() == entry, f"{run} admitted out of queue order"
                model.entries.remove(entry)
            lease_s = request.get("lease_s")
            end_us = None if lease_s is None else t + lease_s * US_PER_S
            model.active[run] = Active(goal, end_us, request["forecast_tpm"])
        elif kind == "capacity.released":
            model.active.pop(data["run"], None)
        elif kind == "capacity.dequeued":
            entry = model.entry(data["run"])
            if entry is not None:
                model.entries.remove(entry)


PoolQueueMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("QUOTALEDGER_POOL_QUEUE_EXAMPLES", "40")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_pool_queue_against_its_model = PoolQueueMachine.TestCase
