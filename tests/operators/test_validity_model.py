"""SPEC §13.2's rows, a second time: an independent reading of the text, written
per question ("was the run active when this 429 came?") by looking back over the
events, where the product folds forward once. Hypothesis holds the product's fold to
it on random histories of admissions (with and without leases), observations, 429s
and releases (the lanes are the exact examples' business: tests/operators/test_validity.py).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from quotaledger.journal.clock import format_us, parse_at
from quotaledger.projections.audit import Validity

T0_US = parse_at("2026-11-29T14:00:00Z")
US = 1_000_000
RUNS = ("a", "b", "c")


def event(kind: str, run: str, lease_s: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "run": run, "lease_s": lease_s}


events = st.one_of(
    st.builds(
        event,
        st.just("capacity.admitted"),
        st.sampled_from(RUNS),
        st.one_of(st.none(), st.integers(1, 20)),
    ),
    st.builds(event, st.just("capacity.refused"), st.sampled_from(RUNS)),
    st.builds(event, st.just("capacity.observed"), st.sampled_from(RUNS)),
    st.builds(event, st.just("capacity.rejected"), st.sampled_from(RUNS)),
    st.builds(event, st.just("capacity.released"), st.sampled_from(RUNS)),
)
histories = st.lists(st.tuples(st.integers(0, 8), events), max_size=30)


def timed(history: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each event at its predecessor's time plus its gap (seconds), as a journal has them."""
    t, out = 0, []
    for gap, ev in history:
        t += gap
        out.append({**ev, "t": t})
    return out


# -- the independent reading ---------------------------------------------------------------


def lease_end(evs: list[dict[str, Any]], run: str, admitted: int, before: int) -> int | None:
    """The end of the lease taken at index `admitted`, as the observations of the run
    up to index `before` renewed it (an observation while the lease runs renews it to
    its time plus lease_s); None: no lease."""
    lease_s = evs[admitted]["lease_s"]
    if lease_s is None:
        return None
    end = evs[admitted]["t"] + lease_s
    for ev in evs[admitted + 1 : before]:
        if ev["run"] == run and ev["kind"] == "capacity.observed" and ev["t"] < end:
            end = max(end, ev["t"] + lease_s)
    return end


def last_admission(evs: list[dict[str, Any]], run: str, before: int) -> int | None:
    found = [
        i for i in range(before) if evs[i]["run"] == run and evs[i]["kind"] == "capacity.admitted"
    ]
    return found[-1] if found else None


def released_between(evs: list[dict[str, Any]], run: str, start: int, end: int) -> int | None:
    for i in range(start + 1, end):
        if evs[i]["run"] == run and evs[i]["kind"] == "capacity.released":
            return i
    return None


def active_at(evs: list[dict[str, Any]], run: str, index: int) -> bool:
    """Whether `run` held an admission when event `index` came."""
    admitted = last_admission(evs, run, index)
    if admitted is None or released_between(evs, run, admitted, index) is not None:
        return False
    end = lease_end(evs, run, admitted, index)
    return end is None or evs[index]["t"] < end


def model_row(evs: list[dict[str, Any]], run: str, now: int) -> dict[str, Any]:
    named = [i for i, ev in enumerate(evs) if ev["run"] == run]
    admissions = [i for i in named if evs[i]["kind"] == "capacity.admitted"]
    rejections = sum(
        1 for i in named if evs[i]["kind"] == "capacity.rejected" and active_at(evs, run, i)
    )
    released = None
    if admissions:
        last = admissions[-1]
        release = released_between(evs, run, last, len(evs))
        end = lease_end(evs, run, last, len(evs) if release is None else release)
        if release is not None:
            released = evs[release]["t"] if end is None else min(evs[release]["t"], end)
        elif end is not None and end <= now:
            released = end
    verdict = "never_admitted" if not admissions else "throttled" if rejections else "clean"
    return {
        "run": run,
        "first": evs[named[0]]["t"],
        "admitted": evs[admissions[0]]["t"] if admissions else None,
        "released": released,
        "rejections": rejections,
        "observed": sum(1 for i in named if evs[i]["kind"] == "capacity.observed"),
        "verdict": verdict,
    }


# -- the product ---------------------------------------------------------------------------


def product_rows(evs: list[dict[str, Any]], now: int) -> list[dict[str, Any]]:
    validity = Validity("g")
    for seq, ev in enumerate(evs, start=1):
        record = SimpleNamespace(
            goal="g", kind=ev["kind"], seq=seq, at=format_us(T0_US + ev["t"] * US)
        )
        request = SimpleNamespace(run=ev["run"], case=None, arm="baseline", lease_s=ev["lease_s"])
        payload = SimpleNamespace(
            request=request,
            run=ev["run"],
            uncached_input=1,
            cached_input=0,
            cache_write_input=0,
            output=0,
        )
        validity.feed(record, payload)  # type: ignore[arg-type]

    def seconds(at_us: int | None) -> int | None:
        return None if at_us is None else (at_us - T0_US) // US

    return [
        {
            "run": row.history.run,
            "first": seconds(row.history.first_at_us),
            "admitted": seconds(row.history.admitted_at_us),
            "released": seconds(row.history.released_at_us),
            "rejections": row.history.rejections,
            "observed": row.history.tokens[0],
            "verdict": row.verdict,
        }
        for row in validity.rows(None, T0_US + now * US)
    ]


@settings(max_examples=400, deadline=None)
@given(histories, st.integers(0, 300))
def test_the_fold_agrees_with_the_text(
    history: list[tuple[int, dict[str, Any]]], later: int
) -> None:
    evs = timed(history)
    now = (evs[-1]["t"] if evs else 0) + later
    runs_in_order = list(dict.fromkeys(ev["run"] for ev in evs))
    assert product_rows(evs, now) == [model_row(evs, run, now) for run in runs_in_order]
