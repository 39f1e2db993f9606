"""Window sums are incremental (SPEC §9, issue 20): work counted, not timed.

The goal's samples are swapped for a list that counts every element read. Asking
about a full window (usage, an admission decision) reads a logarithmic number of
samples, the same whether the window holds 500 or 8,000; a report's timeline reads
each sample a bounded number of times over the whole journal (O(events)), where it
used to re-read the whole window after every event (O(events x window)).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.clock import format_us
from quotaledger.projections import audit as au
from quotaledger.projections import capacity as cap
from tests.capacity.capacity_helpers import BASE_US, observed_data


class CountingList(list):  # type: ignore[type-arg]
    """A list that counts the elements read (bisect reads a list subclass's items
    through __getitem__)."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        CountingList.reads += len(got) if isinstance(index, slice) else 1
        return got

    def __iter__(self) -> Any:
        for item in super().__iter__():
            CountingList.reads += 1
            yield item


def _journal(path: str, samples: int, spacing_us: int) -> None:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=10**9, max_active_cases=4, at=format_us(BASE_US))
        with ledger.journal.transaction() as txn:
            for i in range(samples):
                at = format_us(BASE_US + 1 + i * spacing_us)
                txn.append(cap.OBSERVED, "g", observed_data(), at)


def _questions_reads(tmp_path: Path, samples: int) -> int:
    path = str(tmp_path / f"w{samples}.jsonl")
    _journal(path, samples, 50_000_000 // samples)  # all within the last 50 s
    with Ledger.open(path, write=False) as ledger:
        goal = cap.goal_of(ledger.journal.state.capacity, "g")
    assert len(cap.window_samples(goal, goal.last_at_us)) == samples
    goal.samples = CountingList(goal.samples)
    request = cap.AdmitRequest(
        run="r", case=None, arm="control", run_class="solver", forecast_tpm=5, lease_s=None
    )
    CountingList.reads = 0
    for step_us in (0, 1, 10_000_000, 30_000_000):  # now, and as time passes
        at_us = goal.last_at_us + step_us
        assert cap.evaluate(goal, at_us).usage.usage_tpm > 0
        assert cap.decide_admission(goal, request, at_us).ok
    return CountingList.reads


def test_a_full_window_costs_a_logarithmic_number_of_reads(tmp_path: Path) -> None:
    small = _questions_reads(tmp_path, 500)
    large = _questions_reads(tmp_path, 8_000)
    # 4 evaluations + 4 decisions, each two bisections and the totals at both ends;
    # summing the window would read 8,000 samples per question
    bound = 8 * (2 * math.ceil(math.log2(8_000)) + 6)
    assert large <= bound and small <= bound
    assert large - small <= 8 * 2 * 5  # log2(8000) - log2(500) = 4 more reads per bisection


def test_folding_an_observation_into_a_full_window_is_amortised_constant(tmp_path: Path) -> None:
    path = str(tmp_path / "fold.jsonl")
    _journal(path, 6_000, 10_000)  # 100 per second: a full 60 s window
    with Ledger.open(path, write=False) as ledger:
        state = ledger.journal.state.capacity
        records = list(ledger.journal.records())[-2_000:]
    goal = state.goals["g"]
    goal.samples = CountingList(goal.samples)
    CountingList.reads = 0
    last = goal.last_at_us
    for i, (record, payload, _line) in enumerate(records):
        moved = record.__class__(**{**_fields(record), "at": format_us(last + (i + 1) * 10_000)})
        cap.apply(state, moved, payload)
    # each event prunes about one sample: a bisection over the window, nothing per sample
    assert CountingList.reads <= len(records) * (math.ceil(math.log2(6_000)) + 3)


def _fields(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__struct_fields__}


def test_the_report_timeline_reads_each_sample_a_bounded_number_of_times(tmp_path: Path) -> None:
    path = str(tmp_path / "timeline.jsonl")
    events = 3_000
    _journal(path, events, 10_000)  # the whole history inside one window
    timeline = au.Timeline("g")
    with Ledger.open(path, write=False) as ledger:
        records = list(ledger.journal.records())
    for record, payload, _line in records[:3]:
        timeline.feed(record, payload)
    goal = timeline.goal_state
    goal.samples = CountingList(goal.samples)
    CountingList.reads = 0
    for record, payload, _line in records[3:]:
        timeline.feed(record, payload)
    timeline.finish()
    # O(events): a few reads per event and per change point (each sample leaves once);
    # re-reading the window per event would be about events^2 / 2 = 4.5 million.
    assert CountingList.reads <= 60 * events
    assert len(timeline.points) >= events
