"""Times inside payloads name real moments, or the payload does not decode.

msgspec's pattern checks a time's shape only (it accepts 2026-02-30); a record whose
payload folds to an error must not verify (SPEC §2.4), so Payload.__post_init__
checks the date of every CanonicalAt field, on decode and when a payload is built.
(tests/journal/test_time_edges.py checks that verify reports such a record.)
"""

from __future__ import annotations

import msgspec
import pytest

from quotaledger.journal.errors import InvalidInput
from quotaledger.projections import capacity, hosts, probes, settlement
from quotaledger.projections.types import _checked_fields

ALL_EVENTS = {**capacity.EVENTS, **hosts.EVENTS, **settlement.EVENTS, **probes.EVENTS}
IMPOSSIBLE = [
    "2026-02-30T00:00:00.000000Z",
    "2026-13-01T00:00:00.000000Z",
    "2026-11-29T24:00:00.000000Z",
    "1969-12-31T23:59:59.000000Z",
]


def test_every_time_field_is_found() -> None:
    found = {kind: _checked_fields(t)[1] for kind, t in ALL_EVENTS.items()}
    assert {kind: names for kind, names in found.items() if names} == {
        "capacity.configured": ("cap_since",),
        "capacity.rejected": ("cooldown_until",),
        "host.phase_appended": ("deadline",),
    }
    # Nested in capacity.admitted and capacity.refused.
    assert _checked_fields(capacity.Receipt)[1] == (
        "last_observation_at",
        "cooldown_until",
        "at",
        "lease_until",
    )


def rejected(cooldown_until: str) -> bytes:
    return msgspec.json.encode(
        {
            "run": None,
            "retry_after_s": None,
            "cooldown_s": 30,
            "clamped": False,
            "cooldown_until": cooldown_until,
            "streak": 1,
            "detail": None,
        }
    )


DECODE_REJECTED = msgspec.json.Decoder(capacity.CapacityRejected).decode


@pytest.mark.parametrize("text", IMPOSSIBLE)
def test_an_impossible_time_is_refused_when_decoding_and_when_building(text: str) -> None:
    with pytest.raises(msgspec.ValidationError, match="is not a real time"):
        DECODE_REJECTED(rejected(text))
    fields = msgspec.json.decode(rejected("2026-11-29T10:00:00.000000Z"))
    with pytest.raises(InvalidInput) as refused:
        capacity.CapacityRejected(**{**fields, "cooldown_until": text})
    assert refused.value.code == "invalid_time"


def test_a_real_time_decodes() -> None:
    leap_day = DECODE_REJECTED(rejected("2028-02-29T23:59:59.999999Z"))
    assert leap_day.cooldown_until == "2028-02-29T23:59:59.999999Z"
