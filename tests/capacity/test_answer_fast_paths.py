"""The durable appends' short cuts give what the long way gives (issue 20).

`window_range` looks where the window nearly always is (at `head`, up to the last
sample) before it bisects, and `observe` answers from the window's usage alone
instead of the goal's whole evaluation. Both must agree with the plain computation
on every input, not only on the ones a benchmark feeds them.
"""

from __future__ import annotations

import bisect
import tempfile
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaledger.api import Ledger
from quotaledger.projections import capacity as cap
from tests.capacity.capacity_helpers import BASE_US, at


def _bisected(goal: cap.GoalCapacity, at_us: int) -> tuple[int, int]:
    """The window by two bisections from `head`, as window_range always found it."""
    times = [sample.at_us for sample in goal.samples]
    start = bisect.bisect_right(times, at_us - cap.WINDOW_US, lo=goal.head)
    return start, bisect.bisect_right(times, at_us, lo=start)


@settings(max_examples=400, deadline=None)
@given(
    gaps=st.lists(st.sampled_from([0, 1, 10_000_000]) | st.integers(0, 30_000_000), max_size=40),
    head=st.integers(0, 45),
    offset_us=st.integers(-100_000_000, 200_000_000),
)
def test_window_range_is_the_two_bisections(gaps: list[int], head: int, offset_us: int) -> None:
    goal = cap.GoalCapacity()
    t = BASE_US
    for gap in gaps:
        t += gap
        goal.samples.append(
            cap.Sample(at_us=t, uncached_input=1, cached_input=0, output=0, coverage="measured")
        )
    goal.head = min(head, len(goal.samples))
    moments = {t + offset_us, t, t - 1, t + 1, BASE_US + offset_us}
    for sample in goal.samples[:8]:  # a window edge exactly on a sample, and beside it
        edge_us = sample.at_us + cap.WINDOW_US
        moments |= {edge_us - 1, edge_us, edge_us + 1}
    for at_us in moments:
        assert cap.window_range(goal, at_us) == _bisected(goal, at_us)


def test_the_window_of_a_command_starts_at_head_and_ends_at_the_last_sample(
    tmp_path: Path,
) -> None:
    """What the fast path relies on, checked on a folded goal: after each event the
    fold leaves `head` at the first sample inside the latest event's window."""
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.configure(goal="g", quota_tpm=10**9, max_active_cases=4, at=at(0))
        for i in range(300):
            ledger.observe(goal="g", uncached_input=i, cached_input=0, output=1, at=at(i * 0.7))
            goal = cap.goal_of(ledger.journal.state.capacity, "g")
            assert cap.window_range(goal, goal.last_at_us) == (goal.head, len(goal.samples))
            assert cap.window_range(goal, goal.last_at_us) == _bisected(goal, goal.last_at_us)


@settings(max_examples=40, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.integers(0, 5_000),
            st.integers(0, 5_000),
            st.sampled_from(["measured", "estimated", "unmetered"]),
            st.floats(0, 40),
            st.booleans(),
        ),
        min_size=1,
        max_size=25,
    ),
    weight=st.sampled_from([1.0, 0.5, 0.1]),
)
def test_observe_answers_the_usage_of_the_whole_evaluation(
    events: list[tuple[int, int, str, float, bool]], weight: float
) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        Ledger.open(f"{directory}/j.jsonl") as ledger,
    ):
        ledger.configure(
            goal="g", quota_tpm=10**9, max_active_cases=4, cached_input_weight=weight, at=at(0)
        )
        ledger.admit(goal="g", run="r", arm="baseline", forecast_tpm=10, lease_s=30, at=at(0))
        t = 0.0
        for uncached, cached, coverage, gap, leased in events:
            t += gap
            answer = ledger.observe(
                goal="g",
                run="r" if leased else None,
                uncached_input=uncached,
                cached_input=cached,
                output=1,
                coverage=coverage,
                provider={"tpm": {"limit": 10**6, "remaining": 10**5, "reset_at": None}},
                at=at(t),
            )
            goal = cap.goal_of(ledger.journal.state.capacity, "g")
            ev = cap.evaluate(goal, goal.last_at_us)
            assert answer["usage_tpm"] == ev.usage.usage_tpm
            assert list(answer["usage"].items()) == list(
                msgspec.to_builtins(ev.usage.parts).items()
            )
            assert answer["coverage"] == ev.usage.coverage


@settings(max_examples=300, deadline=None)
@given(
    usage=st.integers(0, 10**6) | st.floats(0, 10**6, allow_nan=False),
    reserved=st.integers(0, 10**6),
    target=st.integers(1, 10**6),
    evaluator_reserve=st.integers(0, 1000),
    cold_start_reserve=st.integers(0, 1000),
    remaining=st.none() | st.integers(0, 10**6),
    run_class=st.sampled_from(cap.RUN_CLASSES),
    forecast=st.none() | st.integers(0, 10**6),
)
def test_a_decisions_dimension_figures_are_the_dimensions_own_numbers(
    usage: float,
    reserved: int,
    target: int,
    evaluator_reserve: int,
    cold_start_reserve: int,
    remaining: int | None,
    run_class: str,
    forecast: int | None,
) -> None:
    """The figures compute the load once for both the load and the headroom."""
    report = cap.ProviderState(
        at_us=BASE_US, seq=1, limit=10**6, remaining=remaining, reset_at_us=None,
        totals=cap.ZERO_TOTALS,
    )  # fmt: skip
    limit = cap.Limit(target * 2, target, evaluator_reserve, cold_start_reserve)
    for view in (None, cap.ProviderView(report, True, 5), cap.ProviderView(report, False, 5)):
        state = cap.DimensionState("tpm", limit, usage, reserved, view)
        figures = cap.dimension_figures(state, forecast, run_class)
        assert figures.headroom == state.headroom(run_class)
        assert (figures.load, figures.provider_used) == (state.load, state.provider_used)


def test_release_finds_a_run_as_the_active_runs_list_does(tmp_path: Path) -> None:
    """decide_release looks the run up by name instead of scanning the active runs:
    the same verdict for runs active, released, past their lease, not yet admitted
    at the time asked, and never admitted."""
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.configure(goal="g", max_active_cases=8, at=at(0))
        for i, lease_s in enumerate([None, 5, 60, None, 30]):
            ledger.admit(goal="g", run=f"r{i}", arm="baseline", lease_s=lease_s, at=at(i))
        ledger.release(goal="g", run="r3", at=at(6))
        goal = cap.goal_of(ledger.journal.state.capacity, "g")
    for t in (0, 1.5, 4, 7, 20, 40, 100):
        at_us = BASE_US + int(t * 1_000_000)
        active = {r.request.run for r in cap.active_runs_at(goal, at_us)}
        for run in ("r0", "r1", "r2", "r3", "r4", "nobody"):
            decision = cap.decide_release(goal, run, at_us)
            assert decision.ok == (run in active), (t, run)


FORECASTS = {
    "tpm": "forecast_tpm",
    "itpm": "forecast_itpm",
    "otpm": "forecast_otpm",
    "rpm": "forecast_rpm",
    "tpd": "forecast_tokens",
    "rpd": "forecast_requests",
}


@settings(max_examples=40, deadline=None)
@given(
    configured=st.sets(st.sampled_from(cap.DIMENSIONS)),
    reported=st.sets(st.sampled_from(cap.MINUTE_DIMENSIONS)),
    forecast=st.sets(st.sampled_from(cap.DIMENSIONS)),
    gaps=st.lists(st.floats(0, 50_000), min_size=1, max_size=6),
)
def test_an_evaluation_builds_the_configured_dimensions_as_every_dimension_does(
    configured: set[str], reported: set[str], forecast: set[str], gaps: list[float]
) -> None:
    """`evaluate` builds tpm and the configured dimensions only: each must be what the
    whole list (`every_dimension`, for the views of every provider report) has."""
    with (
        tempfile.TemporaryDirectory() as directory,
        Ledger.open(f"{directory}/j.jsonl") as ledger,
    ):
        quotas = {f"quota_{d}": 10**6 for d in configured}
        ledger.configure(goal="g", max_active_cases=50, **quotas, at=at(0))
        report = {d: {"limit": 10**6, "remaining": 10**5, "reset_at": None} for d in reported}
        t = 0.0
        for i, gap in enumerate(gaps):
            t += gap
            ledger.observe(
                goal="g", uncached_input=i * 7, cached_input=3, output=i, provider=report, at=at(t)
            )
            forecasts = {FORECASTS[d]: 10 + i for d in forecast}
            ledger.admit(goal="g", run=f"r{i}", arm="baseline", **forecasts, at=at(t))
        goal = cap.goal_of(ledger.journal.state.capacity, "g")
    for at_us in (goal.last_at_us, goal.last_at_us + 30_000_000, goal.last_at_us + 10**11):
        ev = cap.evaluate(goal, at_us)
        every = cap.every_dimension(goal, at_us)
        assert list(every) == list(cap.DIMENSIONS)
        assert ev.tpm == every["tpm"]
        assert ev.dimensions == {d: s for d, s in every.items() if s.limit is not None}
        assert list(ev.dimensions) == [d for d in cap.DIMENSIONS if d in ev.dimensions]
