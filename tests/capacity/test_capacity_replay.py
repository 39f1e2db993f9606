"""The fold and the decision are reproducible: an operator who rebuilds the state just
before any recorded decision and re-runs `decide_admission` with the recorded request
and time gets the recorded answer (what `audit` will rely on); a checkpointed state
equals the state folded from genesis; pure helpers never mutate the state.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaledger.api import Ledger
from quotaledger.journal import Error, Journal
from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections.ledger import PROJECTOR

BASE_US = parse_at("2026-11-29T14:00:00Z")
RUNS = [f"r{i}" for i in range(6)]
REQUEST_IDS = ["rq-a", "rq-b"]

step = st.one_of(
    st.tuples(
        st.just("observe"),
        st.integers(0, 40_000),
        st.integers(0, 20_000),
        st.integers(0, 10_000),
        st.sampled_from(["measured", "measured", "estimated", "unmetered"]),
        st.sampled_from([None, *RUNS]),
        st.sampled_from([None, None, *REQUEST_IDS]),
    ),
    st.tuples(
        st.just("admit"),
        st.sampled_from(RUNS),
        st.sampled_from([None, "baseline", "control", "treatment", "explore"]),
        st.sampled_from(["solver", "evaluator"]),
        st.sampled_from([None, 0, 5_000, 20_000, 60_000]),
        st.sampled_from([None, 20, 90]),
    ),
    st.tuples(
        st.just("reject"), st.sampled_from([None, 5, 400]), st.sampled_from([None, *REQUEST_IDS])
    ),
    st.tuples(st.just("release"), st.sampled_from(RUNS)),
    st.tuples(
        st.just("configure"),
        st.sampled_from([None, 2, 4]),
        st.sampled_from([None, 50_000, 100_000]),
        st.sampled_from([0.0, 0.5, 1.0]),
    ),
)
script = st.lists(st.tuples(st.integers(0, 45), step), min_size=5, max_size=30)


def check_request(
    seen: dict[str, tuple[int, tuple]], rid: str | None, t_us: int, key: tuple, answer: dict
) -> None:
    """SPEC §11 as a model: a request id seen at most 900 s before is a replay (the same
    payload) or a conflict (another), appending nothing; otherwise it is recorded."""
    if rid is None:
        assert answer["appended"] is True
        return
    first = seen.get(rid)
    if first is not None and t_us - first[0] <= 900 * US_PER_S:
        assert answer["appended"] is False
        assert answer["ok"] is answer["idempotent"] is (first[1] == key)
    else:
        assert answer["appended"] is True and answer["idempotent"] is False
        seen[rid] = (t_us, key)


def play(ledger: Ledger, steps: list) -> None:
    seen: dict[str, tuple[int, tuple]] = {}
    t_us = BASE_US
    ledger.configure(
        goal="g", max_active_cases=3, quota_tpm=100_000, evaluator_reserve_tpm=5_000,
        cold_start_reserve_tpm=1_000, at=format_us(t_us),
    )  # fmt: skip
    for gap_s, (name, *args) in steps:
        t_us += gap_s * US_PER_S
        at = format_us(t_us)
        try:
            if name == "observe":
                uncached, cached, output, coverage, run, rid = args
                answer = ledger.observe(
                    goal="g", uncached_input=uncached, cached_input=cached, output=output,
                    coverage=coverage, run=run, request_id=rid, at=at,
                )  # fmt: skip
                check_request(seen, rid, t_us, ("observe", *args[:-1]), answer)
            elif name == "admit":
                run, arm, run_class, forecast, lease_s = args
                ledger.admit(
                    goal="g", run=run, arm=arm, class_=run_class, forecast_tpm=forecast,
                    lease_s=lease_s, at=at,
                )  # fmt: skip
            elif name == "reject":
                retry_after_s, rid = args
                answer = ledger.reject(goal="g", retry_after_s=retry_after_s, request_id=rid, at=at)
                check_request(seen, rid, t_us, ("reject", retry_after_s), answer)
            elif name == "release":
                ledger.release(goal="g", run=args[0], at=at)
            else:
                cases, quota, weight = args
                ledger.configure(
                    goal="g", max_active_cases=cases, quota_tpm=quota,
                    cached_input_weight=weight if quota else None, at=at,
                )  # fmt: skip
        except Error as error:
            # Only "nothing to configure" (both gates omitted) is expected here.
            assert error.code == "invalid_config", error
    ledger.admit(goal="g", run="last", arm="treatment", forecast_tpm=1, at=format_us(t_us))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)  # fmt: skip
@given(script)
def test_every_recorded_decision_replays_identically(steps):
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "j.jsonl")
        with Ledger.open(path) as ledger:
            play(ledger, steps)
            journal = ledger.journal
            decisions = [
                (record, payload)
                for record, payload, _ in journal.records()
                if record.kind in cap.DECISION_KINDS
            ]
            assert decisions
            for record, payload in decisions:
                before, _ = journal.fold_as_of(seq=record.seq - 1)
                goal = cap.goal_of(before.capacity, "g")
                frozen = msgspec.msgpack.encode(goal)
                replayed = cap.decide_admission(goal, payload.request, parse_at(record.at))
                assert msgspec.msgpack.encode(goal) == frozen  # the decision is pure
                if record.kind == cap.ADMITTED:
                    assert replayed.ok and not replayed.idempotent
                    assert replayed.detail.receipt == payload.receipt
                    assert (replayed.kind, replayed.payload) == (record.kind, payload)
                else:
                    assert not replayed.ok
                    assert list(replayed.reasons) == payload.reasons
                    assert replayed.detail.figures == payload.figures
                    assert (replayed.kind, replayed.payload) == (record.kind, payload)
            # A fold from genesis, a checkpointed state and the live state all agree.
            live = PROJECTOR.dump(journal.state)
            journal.write_checkpoint()
        with Journal.open(path, PROJECTOR, write=False, use_checkpoint=False) as fresh:
            assert PROJECTOR.dump(fresh.state) == live
        with Journal.open(path, PROJECTOR, write=False) as from_checkpoint:
            assert from_checkpoint.checkpoint_seq >= 0
            assert PROJECTOR.dump(from_checkpoint.state) == live


def test_helpers_answer_as_of_a_time_without_mutating(journal_path):
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=2, quota_tpm=100_000, at=format_us(BASE_US))
        ledger.observe(
            goal="g", uncached_input=30_000, cached_input=0, output=0, at=format_us(BASE_US)
        )
        ledger.admit(
            goal="g", run="r1", arm="baseline", forecast_tpm=10_000, lease_s=30,
            at=format_us(BASE_US + US_PER_S),
        )  # fmt: skip
        goal = cap.goal_of(ledger.journal.state.capacity, "g")
    snapshot = copy.deepcopy(goal)
    t0 = BASE_US + US_PER_S
    assert cap.usage_at(goal, t0).usage_tpm == 30_000
    assert cap.usage_at(goal, BASE_US + 60 * US_PER_S).usage_tpm == 0
    assert [r.request.run for r in cap.active_runs_at(goal, t0 + 29 * US_PER_S)] == ["r1"]
    assert cap.active_runs_at(goal, t0 + 30 * US_PER_S) == []
    ev = cap.evaluate(goal, t0)
    assert (ev.reserved_tpm, ev.load_tpm, ev.headroom_tpm("solver")) == (10_000, 30_000, 60_000)
    # The times at which the goal changes by itself: the sample leaves, the lease ends.
    assert cap.change_points_after(goal, t0) == [t0 + 30 * US_PER_S, BASE_US + 60 * US_PER_S]
    big = cap.AdmitRequest(
        run="r2", case=None, arm="baseline", run_class="solver", forecast_tpm=70_000, lease_s=None
    )
    assert cap.decide_admission(goal, big, t0).reasons == ("token_headroom_exhausted",)
    # r1's lease ends at +31 s (load 30000 -> usage only); the sample leaves at +60 s.
    assert cap.earliest_admissible_us(goal, big, t0) == BASE_US + 60 * US_PER_S
    assert goal == snapshot
