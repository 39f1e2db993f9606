"""`bench`'s daily-window figure (SPEC §9, §12.3): an event's in-process CPU with 10^6
observations in its goal's day beside the same with 10^3.

The goal's state is folded in memory (the projections' own `apply`, no journal: the
figure is the fold's and the decision's, not the disk's), its day filled evenly, then
each round folds one more observation and decides one admission against the tpd and
rpd limits, as a runner's `observe` and `admit` do. Target: ratio <= 1.2.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import msgspec

from quotaledger.journal.clock import US_PER_S, format_us, wall_us
from quotaledger.journal.record import Record
from quotaledger.projections import capacity as cap

DAY_SMALL = 1_000
DAY_LARGE = 1_000_000
EVENTS_PER_ROUND = 2_000
ROUNDS = 7
_NO_HASH = "0" * 64


def _record(seq: int, at_us: int, kind: str) -> Record:
    return Record(1, seq, format_us(at_us), kind, "bench", msgspec.Raw(b"{}"), _NO_HASH, _NO_HASH)


def day_goal(observations: int, end_us: int) -> tuple[cap.CapacityState, int]:
    """A goal with tpd and rpd limits and `observations` spread over the day before
    `end_us`; returns the state and the next seq."""
    state = cap.CapacityState()
    start_us = end_us - cap.DAY_US + US_PER_S
    tokens = cap.TokenConfig(
        quota_tpm=None,
        target_tpm=None,
        evaluator_reserve_tpm=0,
        cold_start_reserve_tpm=0,
        cached_input_weight=1.0,
        max_observation_age_s=60,
        cooldown_base_s=15,
        cooldown_max_s=300,
        limits={
            "tpd": cap.DimensionLimit(10**12, 10**12, 0, 0),
            "rpd": cap.DimensionLimit(10**12, 10**12, 0, 0),
        },
    )
    configured = cap.CapacityConfigured(cases=None, tokens=tokens)
    cap.apply(state, _record(1, start_us - 1, cap.CONFIGURED), configured)
    step_us = (end_us - start_us) // observations
    for i in range(observations):
        payload = _observation(i)
        cap.apply(state, _record(2 + i, start_us + i * step_us, cap.OBSERVED), payload)
    return state, 2 + observations


def _observation(i: int) -> cap.CapacityObserved:
    return cap.CapacityObserved(
        run=None,
        uncached_input=1_000 + i % 977,
        cached_input=0,
        output=200 + i % 313,
        requests=1,
        coverage="measured",
        source=None,
    )


_REQUEST = cap.AdmitRequest(
    run="bench-run",
    case=None,
    arm=None,
    run_class="solver",
    forecast_tpm=None,
    lease_s=None,
    forecast_tokens=10_000,
    forecast_requests=10,
)


def event_cpu_us(state: cap.CapacityState, seq: int, at_us: int) -> float:
    """In-process CPU per event: one more observation folded and one admission decided."""
    goal = state.goals["bench"]
    started = time.process_time()
    for i in range(EVENTS_PER_ROUND):
        now_us = at_us + i * 1_000
        cap.apply(state, _record(seq + i, now_us, cap.OBSERVED), _observation(i))
        cap.decide_admission(goal, _REQUEST, now_us)
    return (time.process_time() - started) * 1e6 / EVENTS_PER_ROUND


def measure_daily(events: int) -> dict[str, Any]:
    """The figure `daily_event_cpu_us`: its value with min(events, 10^6) observations in
    the day (judged at 10^6), its baseline with 10^3."""
    large = max(DAY_SMALL, min(events, DAY_LARGE))
    now_us = wall_us()
    small_state, small_seq = day_goal(DAY_SMALL, now_us)
    large_state, large_seq = day_goal(large, now_us)
    small: list[float] = []
    big: list[float] = []
    for r in range(ROUNDS):  # taking turns: a busy moment slows both sides alike
        at_us = now_us + r * EVENTS_PER_ROUND * 1_000
        small.append(event_cpu_us(small_state, small_seq + r * EVENTS_PER_ROUND, at_us))
        big.append(event_cpu_us(large_state, large_seq + r * EVENTS_PER_ROUND, at_us))
    value, baseline = statistics.median(big), statistics.median(small)
    return {
        "value": round(value, 3),
        "unit": "us/event",
        "baseline": round(baseline, 3),
        "ratio": round(value / baseline, 3),
        "observations": large,
    }
