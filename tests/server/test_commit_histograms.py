"""The commit histograms, counted in plain Python on the committer's thread, render
as the Prometheus library's own `Histogram` renders the same observations (only the
`_created` timestamps differ: each is when its histogram was made)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from quotaledger.server.telemetry import BATCH_SIZES, COMMIT_SECONDS, Telemetry

_CREATED = re.compile(rb"^(\w+_created) \S+$", re.MULTILINE)


def _library(observed: list[tuple[int, float]]) -> bytes:
    registry = CollectorRegistry(auto_describe=True)
    batch = Histogram(
        "quotaledger_commit_batch_size",
        "Writer requests committed together by one write and fdatasync (or COMMIT).",
        buckets=BATCH_SIZES,
        registry=registry,
    )
    seconds = Histogram(
        "quotaledger_commit_seconds",
        "Time of one group commit: lock, decisions, write and fdatasync (or COMMIT).",
        buckets=COMMIT_SECONDS,
        registry=registry,
    )
    for size, spent in observed:
        batch.observe(size)
        seconds.observe(spent)
    return generate_latest(registry)


def _ours(observed: list[tuple[int, float]]) -> bytes:
    telemetry = Telemetry(lambda: 0, frozenset())
    for size, spent in observed:
        telemetry.commit(size, spent)
    text = telemetry.exposition()
    start = text.index(b"# HELP quotaledger_commit_batch_size ")
    end = text.index(b"# HELP quotaledger_requests_waiting ")
    return text[start:end]


@given(
    st.lists(
        st.tuples(
            st.integers(1, 3000) | st.sampled_from(BATCH_SIZES),
            st.floats(0, 5, allow_nan=False) | st.sampled_from(COMMIT_SECONDS),
        ),
        max_size=40,
    )
)
def test_the_commit_histograms_render_as_the_librarys(observed: list[tuple[int, float]]) -> None:
    ours, library = _ours(observed), _library(observed)
    assert _CREATED.sub(rb"\1 T", ours) == _CREATED.sub(rb"\1 T", library)
    assert len(_CREATED.findall(ours)) == 2
