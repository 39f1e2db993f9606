"""CapacityObserved's own __post_init__ (written out for the fold's and the batch's
sake) gives exactly the verdict of Payload.__post_init__'s generic loop over the
fields it finds, for any run, request id, model and source; and the identifiers the
checks remember as valid are only ever valid ones."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaledger.projections import capacity
from quotaledger.projections.types import (
    IDENTIFIER_PATTERN,
    IDENTIFIERS_KNOWN,
    Payload,
    _checked_fields,
)

RULE = re.compile(IDENTIFIER_PATTERN)
VALID = capacity.CapacityObserved(
    run="r", uncached_input=1, cached_input=0, output=1, requests=None,
    coverage="measured", source="s",
)  # fmt: skip

runs = st.one_of(
    st.none(),
    st.text(alphabet=st.sampled_from("aZ09._:@/-"), min_size=0, max_size=12),
    st.text(min_size=0, max_size=6),
)
sources = st.one_of(
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["a" * 4096, "a" * 4097, "é" * 2048, "é" * 2049, "😀" * 1025, "€" * 1366]),
)


def verdict(check: Any, payload: capacity.CapacityObserved) -> tuple[type, str] | None:
    try:
        check(payload)
    except Exception as exc:
        return type(exc), str(exc)
    return None


def test_the_written_out_check_covers_the_fields_the_generic_one_finds() -> None:
    assert _checked_fields(capacity.CapacityObserved) == (
        ("run", "request_id", "model"),
        (),
        ("source",),
    )


@settings(max_examples=500, deadline=None)
@given(runs, runs, runs, sources, st.booleans())
def test_the_written_out_check_agrees_with_the_generic_one(
    run: str | None,
    request_id: str | None,
    model: str | None,
    source: str | None,
    remembered_first: bool,
) -> None:
    payload = msgspec.structs.replace(VALID)
    # Set past __post_init__ (that is the check under test), then run both checks.
    msgspec.structs.force_setattr(payload, "run", run)
    msgspec.structs.force_setattr(payload, "request_id", request_id)
    msgspec.structs.force_setattr(payload, "model", model)
    msgspec.structs.force_setattr(payload, "source", source)
    if not remembered_first:
        IDENTIFIERS_KNOWN.clear()
    generic = verdict(Payload.__post_init__, payload)
    if not remembered_first:
        IDENTIFIERS_KNOWN.clear()
    written = verdict(capacity.CapacityObserved.__post_init__, payload)
    assert written == generic
    assert all(RULE.match(known) for known in IDENTIFIERS_KNOWN if known)


@pytest.mark.parametrize("run", ["a b", "run\n", "rün", "r+1"])
def test_a_bad_run_is_refused_every_time(run: str) -> None:
    data = msgspec.json.encode(msgspec.structs.asdict(VALID) | {"run": run})
    decode = msgspec.json.Decoder(capacity.CapacityObserved).decode
    for _ in range(3):  # never remembered: refused on the second decode as on the first
        with pytest.raises(msgspec.ValidationError, match="is not an identifier"):
            decode(data)
    assert run not in IDENTIFIERS_KNOWN
