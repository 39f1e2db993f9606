"""The fold's trims leave nothing to trim at the goal's time (projections/capacity/fold.py).

`apply` runs the window's, the day's and the request ids' trims only when an event
moves its goal's time: an event at the time the goal's last one had skips them. That
is the same state only if, after every event, the trims would find nothing at the
goal's time. These folds check it after each event, on random streams of events that
share times, step a microsecond, a second, past the window or past the day, with and
without request ids and across the compaction thresholds.
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaledger.journal.clock import US_PER_S, format_us
from quotaledger.journal.record import FORMAT_VERSION, GENESIS_PREV, Record
from quotaledger.projections import capacity as cap
from quotaledger.projections.capacity.requests import REQUEST_ID_WINDOW_US
from tests.capacity.capacity_helpers import BASE_US, observed_data

STEPS_US = (0, 0, 0, 1, US_PER_S // 2, 30 * US_PER_S, 61 * US_PER_S, 901 * US_PER_S)
"""Mostly no step (a batch's shared time); now and then one past a window."""
DAY_STEP_US = cap.DAY_US + US_PER_S

_decode_observed = msgspec.json.Decoder(cap.CapacityObserved).decode


def _record(seq: int, at_us: int, goal: str, data: bytes) -> Record:
    return Record(
        FORMAT_VERSION,
        seq,
        format_us(at_us),
        cap.OBSERVED,
        goal,
        msgspec.Raw(data),
        GENESIS_PREV,
        f"{seq:064x}",
    )


def _assert_nothing_to_trim(goal: cap.GoalCapacity) -> None:
    last_us = goal.last_at_us
    samples, head = goal.samples, goal.head
    assert head == len(samples) or samples[head].at_us > last_us - cap.WINDOW_US
    seconds, day_head = goal.day_seconds, goal.day_head
    assert day_head == len(seconds) or seconds[day_head] * US_PER_S > last_us - cap.DAY_US
    ids = goal.request_ids
    assert not ids or next(iter(ids.values())).at_us >= last_us - REQUEST_ID_WINDOW_US


events = st.lists(
    st.tuples(
        st.sampled_from(("a", "b")),
        st.one_of(st.sampled_from(STEPS_US), st.just(DAY_STEP_US)),
        st.booleans(),  # with a request id
        st.integers(min_value=1, max_value=3),  # how many events at that time
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(events)
def test_after_every_event_the_trims_find_nothing(stream: list[tuple[str, int, bool, int]]) -> None:
    state = cap.CapacityState()
    at_us = {"a": BASE_US, "b": BASE_US}
    seq = 0
    for goal, step_us, with_id, repeat in stream:
        at_us[goal] += step_us
        for _ in range(repeat * 30):  # enough samples to cross COMPACT_MIN
            seq += 1
            request_id = f"resp-{seq}" if with_id else None
            data = msgspec.json.encode(observed_data(request_id=request_id))
            cap.apply(state, _record(seq, at_us[goal], goal, data), _decode_observed(data))
            _assert_nothing_to_trim(state.goals[goal])
