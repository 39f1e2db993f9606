"""Identifiers in payloads follow exactly IDENTIFIER_PATTERN (SPEC §8), checked without `re`.

Payload identifiers are length-checked by msgspec and character-checked by
Payload.__post_init__; these tests hold that pair to the regular expression the
CLI uses, for every identifier field of every event kind.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaledger.journal.errors import InvalidInput
from quotaledger.projections import capacity, hosts, probes, settlement
from quotaledger.projections.types import IDENTIFIER_PATTERN, _checked_fields
from tests.capacity.capacity_helpers import observed_data

RULE = re.compile(IDENTIFIER_PATTERN)
ALL_EVENTS = {**capacity.EVENTS, **hosts.EVENTS, **settlement.EVENTS, **probes.EVENTS}

# Every identifier field, as the payload types declare them (29 fields in 20 types).
EXPECTED = {
    "capacity.observed": ("run", "request_id", "model"),
    "capacity.rejected": ("run", "request_id"),
    "capacity.released": ("run",),
    "capacity.dequeued": ("run",),
    "price.set": ("model",),
    "host.phase_appended": ("lane", "session", "profile"),
    "host.attempt_started": ("lane", "attempt", "session", "profile"),
    "host.process_exited": ("attempt",),
    "host.attempt_returned": ("attempt",),
    "host.replan_opened": ("lane", "replan"),
    "host.replan_settled": ("lane", "replan"),
    "turn.opened": ("agent", "turn", "task"),
    "turn.writeback_verified": ("agent", "turn"),
    "quota.spent": ("agent", "turn"),
}


def test_every_identifier_field_is_found() -> None:
    found = {kind: _checked_fields(t)[0] for kind, t in ALL_EVENTS.items()}
    assert {kind: names for kind, names in found.items() if names} == EXPECTED
    assert _checked_fields(capacity.AdmitRequest)[0] == ("run", "case")
    assert _checked_fields(capacity.Receipt)[0] == ("run",)


def observed(run: Any) -> bytes:
    return msgspec.json.encode(observed_data(run=run))


DECODE_OBSERVED = msgspec.json.Decoder(capacity.CapacityObserved).decode

candidates = st.one_of(
    st.text(alphabet=st.sampled_from("aZ09._:@/-"), min_size=0, max_size=130),
    st.text(min_size=0, max_size=8),
    st.text(alphabet=st.sampled_from("ab\n\t -é+"), min_size=0, max_size=6),
)


@settings(max_examples=400, deadline=None)
@given(candidates)
def test_decoding_accepts_exactly_the_pattern(text: str) -> None:
    try:
        DECODE_OBSERVED(observed(text))
        accepted = True
    except msgspec.ValidationError:
        accepted = False
    assert accepted == (RULE.match(text) is not None), text


@pytest.mark.parametrize(
    "text", ["", "a" * 129, "run 1", "run\n", "\nrun", "rün", "run+1", "run\x00"]
)
def test_bad_identifiers_are_refused_when_decoding_and_when_building(text: str) -> None:
    with pytest.raises(msgspec.ValidationError):
        DECODE_OBSERVED(observed(text))
    if text and len(text) <= 128:  # length is msgspec's check, on decode only
        with pytest.raises(InvalidInput):
            capacity.CapacityObserved(
                run=text,
                uncached_input=1,
                cached_input=0,
                output=1,
                requests=None,
                coverage="measured",
                source=None,
            )


def test_nested_identifiers_are_checked() -> None:
    request = {"run": "r1", "case": "has space", "arm": None, "class": "solver"}
    request |= {"forecast_tpm": None, "lease_s": None}
    with pytest.raises(msgspec.ValidationError, match="case 'has space' is not an identifier"):
        msgspec.json.decode(msgspec.json.encode(request), type=capacity.AdmitRequest)
    request["case"] = "c-1"
    assert msgspec.json.decode(msgspec.json.encode(request), type=capacity.AdmitRequest).case
