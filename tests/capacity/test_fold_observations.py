"""A transaction's records folded at once give the state they give one by one.

The ledger's run visitor folds a run of observations of one goal at one time with
`capacity.fold_observations`, which sends only the first through `apply` and skips
`apply`'s trims, lease and queue checks for the rest (projections/capacity/fold.py).
These folds hold it to `apply`: on random streams of observations (shared times and
steps, two goals, an active leased run, request ids, priced and unpriced models, each
coverage, provider reports) split into random transactions, the state folded by the
run visitor encodes to the same bytes as the one folded record by record, and a
record that does not fold is named by its index.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaledger.api import Ledger
from quotaledger.journal.chain import NotFolded
from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from quotaledger.journal.record import FORMAT_VERSION, GENESIS_PREV, Record
from quotaledger.projections import capacity as cap
from quotaledger.projections.ledger import PROJECTOR, LedgerState

Folded = tuple[Record, Any, bytes]
STEPS_US = (0, 0, 0, 0, 1, US_PER_S, 30 * US_PER_S, 61 * US_PER_S)
_decode_observed = PROJECTOR.decoder(cap.OBSERVED)


def _prefix(path: Path) -> list[Folded]:
    """Goals a and b configured, model m priced, run r1 admitted on a with a lease."""
    with Ledger.open(str(path)) as ledger:
        for goal in ("a", "b"):
            ledger.configure(goal=goal, max_active_cases=4, quota_tpm=10**9)
        ledger.price_set(model="m", input_usd_per_mtok=2.5, output_usd_per_mtok=10)
        ledger.observe(goal="a", uncached_input=1, cached_input=0, output=1)
        admitted = ledger.admit(goal="a", run="r1", arm="baseline", forecast_tpm=1, lease_s=90)
        assert admitted["admitted"], admitted
        return list(ledger.journal.records())


PREFIX: list[Folded] = []


@pytest.fixture(scope="module", autouse=True)
def _made_prefix(tmp_path_factory: pytest.TempPathFactory) -> None:
    PREFIX[:] = _prefix(tmp_path_factory.mktemp("prefix") / "j.jsonl")


observation = st.fixed_dictionaries(
    {
        "uncached_input": st.integers(0, 5),
        "cached_input": st.integers(0, 2),
        "cache_write_input": st.integers(0, 2),
        "output": st.integers(0, 5),
        "requests": st.none() | st.integers(0, 2),
        "coverage": st.sampled_from(("measured", "estimated", "unmetered")),
        "run": st.sampled_from((None, "r1", "r2")),
        "request_id": st.none() | st.sampled_from(("q1", "q2", "q3")),
        "model": st.sampled_from((None, "m", "unpriced")),
        "source": st.none(),
        "provider": st.none() | st.just({"tpm": {"limit": 9, "remaining": 3, "reset_at": None}}),
    }
)
events = st.lists(
    st.tuples(st.sampled_from(("a", "b")), st.sampled_from(STEPS_US), observation),
    max_size=40,
)


def _stream(events: list[tuple[str, int, dict[str, Any]]]) -> list[Folded]:
    """The events as records after the prefix, each goal's time stepping as drawn."""
    seq = PREFIX[-1][0].seq
    times = {"a": _base_us(), "b": _base_us()}
    folded: list[Folded] = []
    for goal, step_us, fields in events:
        times[goal] += step_us
        seq += 1
        data = msgspec.json.encode(fields)
        record = Record(
            FORMAT_VERSION,
            seq,
            format_us(times[goal]),
            cap.OBSERVED,
            goal,
            msgspec.Raw(data),
            GENESIS_PREV,
            f"{seq:064x}",
        )
        folded.append((record, _decode_observed(data), b""))
    return folded


def _base_us() -> int:
    """A second after the prefix's last record: the stream's first time."""
    return parse_at(PREFIX[-1][0].at) + US_PER_S


def _one_by_one(records: list[Folded]) -> LedgerState:
    state = PROJECTOR.initial()
    visit = PROJECTOR.visitor(state)
    for record, payload, line in records:
        visit(record, payload, line)
    return state


def _in_runs(records: list[Folded], cuts: list[int]) -> LedgerState:
    """Folded by the run visitor, the records after the prefix split at `cuts`."""
    state = PROJECTOR.initial()
    visit, visit_run = PROJECTOR.visitor(state), PROJECTOR.run_visitor(state)
    for record, payload, line in PREFIX:
        visit(record, payload, line)
    rest = records[len(PREFIX) :]
    bounds = sorted({0, len(rest), *(cut % (len(rest) + 1) for cut in cuts)})
    for start, end in pairwise(bounds):
        visit_run(rest[start:end])
    return state


@settings(max_examples=150, deadline=None)
@given(events, st.lists(st.integers(0, 40), max_size=4))
def test_a_run_folds_as_its_records_one_by_one(
    drawn: list[tuple[str, int, dict[str, Any]]], cuts: list[int]
) -> None:
    records = PREFIX + _stream(drawn)
    expected, folded = _one_by_one(records), _in_runs(records, cuts)
    assert PROJECTOR.dump(folded) == PROJECTOR.dump(expected)


def test_the_run_fold_skips_work_that_matters_only_past_the_first() -> None:
    """The stream the hypothesis test needs to tell a broken shortcut: observations
    at one time after others, with the leased run, a request id and a price (its
    figures would differ if the run's totals, the day's last totals, the metered time,
    the run's observed totals or the request index were not carried on)."""
    base = _base_us()
    drawn = [
        ("a", 0, {"uncached_input": 3, "output": 1, "coverage": "unmetered", "run": "r1"}),
        ("a", 0, {"uncached_input": 2, "output": 4, "coverage": "measured", "run": "r1"}),
        ("a", 0, {"uncached_input": 1, "output": 0, "model": "m", "request_id": "q1"}),
    ]
    full = [
        (
            g,
            s,
            {
                "cached_input": 0,
                "requests": None,
                "source": None,
                "run": None,
                "coverage": "measured",
            }
            | f,
        )
        for g, s, f in drawn
    ]
    records = PREFIX + _stream(full)
    expected, folded = _one_by_one(records), _in_runs(records, [])
    assert PROJECTOR.dump(folded) == PROJECTOR.dump(expected)
    goal = folded.capacity.goals["a"]
    assert goal.last_metered_at_us == base and goal.day_totals[-1] == goal.totals
    assert goal.runs["r1"].observed[0] == 5 and "q1" in goal.request_ids


def test_a_record_that_does_not_fold_is_named_by_its_index() -> None:
    """A provider report's reset time that names no real moment ends a run (`apply`
    folds it, and raises): the run visitor says which record."""
    good = {"uncached_input": 1, "cached_input": 0, "output": 1, "requests": None, "run": None}
    good |= {"coverage": "measured", "source": None}
    bad = good | {"provider": {"tpm": {"limit": 9, "remaining": 3, "reset_at": None}}}
    records = _stream([("a", 0, good), ("a", 0, good), ("a", 0, bad)])
    # A time no writer would let in (the payload's check refuses it), set in place.
    msgspec.structs.force_setattr(records[2][1].provider["tpm"], "reset_at", "2026-02-30T00:00:00Z")
    state = PROJECTOR.initial()
    for record, payload, line in PREFIX:
        PROJECTOR.visitor(state)(record, payload, line)
    with pytest.raises(NotFolded) as raised:
        PROJECTOR.run_visitor(state)(records)
    assert raised.value.index == 2
    assert "not an RFC 3339 timestamp" in str(raised.value.error)
