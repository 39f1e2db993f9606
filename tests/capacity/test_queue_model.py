"""The product's queue held against an independent model of SPEC §12.2
(tests/capacity/independent_queue.py) by a hypothesis state machine: every answer
(admitted, queued, refused, the runs promoted, position and estimate) is the model's,
and the journal it leaves holds the queue's invariants: admissions only in queue
order, never twice, never after expiry, never past the limit, and every estimate no
later than the actual start when nothing unforeseen was written."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput
from quotaledger.journal.clock import US_PER_S, parse_at
from tests.capacity.capacity_helpers import at
from tests.capacity.independent_queue import Model

RUNS = [f"r{i}" for i in range(8)]
LEASES_S: dict[str, int | None] = {
    "r0": None, "r1": 5, "r2": 20, "r3": 60, "r4": 5, "r5": 20, "r6": 60, "r7": None,
}  # fmt: skip
"""Each run always asks with the same request: its lease (None: no lease)..."""
FORECASTS = {"r0": 30, "r1": 60, "r2": 10, "r3": 50, "r4": 90, "r5": 20, "r6": 40, "r7": 30}
"""... and, on a token gate of target 100, its forecast."""
TTLS_S = (10, 30, 120)
TARGET_TPM = 100


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.ledger = Ledger.open(str(Path(self.dir.name) / "j.jsonl"))
        self.t_us = 0
        self.model = Model(capacity=1)
        self.tokens = False
        self.estimates: dict[str, tuple[int | None, bool]] = {}
        """Queued run -> (its estimate when queued, whether something unforeseen was
        written since: a release, a cancel)."""

    def teardown(self) -> None:
        self.ledger.close()
        self.dir.cleanup()

    def _at(self) -> str:
        return at(self.t_us / US_PER_S)

    def _now(self) -> int:
        return parse_at(self._at())

    @initialize(slots=st.integers(1, 3), tokens=st.booleans())
    def configure(self, slots: int, tokens: bool) -> None:
        self.tokens = tokens
        if tokens:  # usage stays 0: heartbeats, fresh for a day
            self.model = Model(capacity=TARGET_TPM)
            self.ledger.configure(
                goal="g",
                quota_tpm=TARGET_TPM,
                target_tpm=TARGET_TPM,
                max_observation_age_s=86_400,
                at=self._at(),
            )
            self.ledger.observe(goal="g", uncached_input=0, cached_input=0, output=0, at=self._at())
        else:
            self.model = Model(capacity=slots)
            self.ledger.configure(goal="g", max_active_cases=slots, at=self._at())

    @rule(seconds=st.sampled_from([0, 1, 4, 5, 15, 20, 31, 60]))
    def advance(self, seconds: int) -> None:
        self.t_us += seconds * US_PER_S
        # An entry that expires now missed its start only because nothing was written at
        # its estimate (a server's timer would have promoted it): the entries behind it
        # may now start before their estimates, which did not foresee that.
        now = self._now()
        order = [entry.run for entry in self.model.queue]
        expired = [i for i, entry in enumerate(self.model.queue) if entry.expires_us <= now]
        if expired:
            behind = set(order[expired[0] + 1 :])
            for run in behind & self.estimates.keys():
                self.estimates[run] = (self.estimates[run][0], True)

    def _check_promoted(self, answer: dict[str, Any], expected: list[str]) -> None:
        found = [p["run"] for p in answer.get("promoted", [])]
        assert found == expected, (found, expected)
        for run in expected:
            self._started(run)

    def _started(self, run: str) -> None:
        estimate, unforeseen = self.estimates.pop(run, (None, True))
        if estimate is not None and not unforeseen:
            assert estimate <= self._now(), (run, estimate, self._now())

    def _unforeseen(self) -> None:
        self.estimates = {run: (e, True) for run, (e, _) in self.estimates.items()}

    @rule(run=st.sampled_from(RUNS), queue=st.booleans(), ttl_s=st.sampled_from(TTLS_S))
    def admit(self, run: str, queue: bool, ttl_s: int) -> None:
        lease_s = LEASES_S[run]
        params: dict[str, Any] = {"lease_s": lease_s}
        size = 1
        if self.tokens:
            size = params["forecast_tpm"] = FORECASTS[run]
        else:
            params["arm"] = "baseline"
        if queue:
            params |= {"queue": True, "queue_ttl_s": ttl_s}
            if lease_s is None:
                with pytest.raises(InvalidInput):
                    self.ledger.admit(goal="g", run=run, at=self._at(), **params)
                return
        now = self._now()
        was_queued = self.model.queued(run) is not None
        lease_us = None if lease_s is None else lease_s * US_PER_S
        expected, promoted = self.model.admit(run, size, lease_us, queue, ttl_s * US_PER_S, now)
        answer = self.ledger.admit(goal="g", run=run, at=self._at(), **params)
        if expected == "idempotent":
            assert answer["admitted"] and answer["idempotent"] and not answer["appended"]
        elif expected == "admitted":
            assert answer["admitted"] is True, answer
        elif expected == "queued":
            assert answer["queued"] is True and answer["admitted"] is False, answer
            assert answer["position"] == self.model.position(run)
            estimate = self.model.estimates(now)[run]
            shown = answer["estimated_start_at"]
            assert (None if shown is None else parse_at(shown)) == estimate, (answer, estimate)
            if not was_queued:
                self.estimates[run] = (estimate, False)
        else:
            assert answer["ok"] is False and "queued" not in answer
            assert answer["reasons"][-1] == "queue_ahead" or not self.model.queue
        if expected == "admitted" and run not in promoted and not was_queued:
            self._unforeseen()  # an admission the queue did not order: not foreseen
        self._check_promoted(answer, promoted)

    @rule(run=st.sampled_from(RUNS))
    def release(self, run: str) -> None:
        expected, promoted = self.model.release(run, self._now())
        answer = self.ledger.release(goal="g", run=run, at=self._at())
        assert answer["released"] is (expected == "released")
        assert answer.get("dequeued", False) is (expected == "dequeued")
        if expected != "nothing":
            self._unforeseen()
            self.estimates.pop(run, None)
        self._check_promoted(answer, promoted)

    @rule(run=st.sampled_from(RUNS))
    def cancel(self, run: str) -> None:
        expected, promoted = self.model.cancel(run, self._now())
        answer = self.ledger.admit(goal="g", run=run, cancel=True, at=self._at())
        assert answer["cancelled"] is expected
        if expected:
            self._unforeseen()
            self.estimates.pop(run, None)
        self._check_promoted(answer, promoted)

    @rule()
    def observe(self) -> None:
        promoted = self.model.observe(self._now())
        answer = self.ledger.observe(
            goal="g", uncached_input=0, cached_input=0, output=0, at=self._at()
        )
        self._check_promoted(answer, promoted)

    @invariant()
    def the_journal_holds_the_queue_rules(self) -> None:
        check_journal(list(self.ledger.log(goal="g")), self.model.capacity, self.tokens)


def check_journal(events: list[dict[str, Any]], capacity: int, tokens: bool) -> None:
    """From the log alone: admissions in queue order (the goal's entries block the
    goal's later ones), none twice, none after expiry, none past the limit."""
    active: dict[str, tuple[int | None, int]] = {}
    waiting: dict[str, tuple[int, int]] = {}  # run -> (seq, expires)
    for event in events:
        t, kind, data = parse_at(event["at"]), event["kind"], event["data"]
        active = {r: h for r, h in active.items() if h[0] is None or h[0] > t}
        waiting = {r: w for r, w in waiting.items() if t < w[1]}
        if kind == "capacity.queued":
            run = data["request"]["run"]
            waiting[run] = (event["seq"], t + data["ttl_s"] * US_PER_S)
        elif kind == "capacity.admitted":
            run = data["request"]["run"]
            assert run not in active, f"{run} admitted twice"
            size = data["request"]["forecast_tpm"] if tokens else 1
            taken = sum(s for _, s in active.values())
            assert taken + size <= capacity, f"{run} admitted past the limit"
            queued = data.get("queued")
            if queued is None:
                assert not waiting, f"{run} jumped the queue"
            else:
                seq, expires = waiting.pop(run)
                assert queued["seq"] == seq and t < expires
                assert all(seq < other for other, _ in waiting.values()), f"{run} out of order"
            lease_s = data["request"].get("lease_s")
            active[run] = (None if lease_s is None else t + lease_s * US_PER_S, size)
        elif kind == "capacity.released":
            active.pop(data["run"], None)
        elif kind == "capacity.dequeued":
            waiting.pop(data["run"], None)


QueueMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_queue_against_its_model = QueueMachine.TestCase
