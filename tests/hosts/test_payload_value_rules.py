"""Payloads with their own `__post_init__` keep the shared value rules (SPEC §8).

A payload type that checks something of its own must still have its identifiers'
characters, its times' dates and its texts' sizes checked, on decode as on build:
a record that breaks them does not verify (SPEC §2.4).
"""

from __future__ import annotations

import msgspec
import pytest

from quotaledger.projections import hosts, probes

SHA = "a" * 64
AT = "2026-12-01T00:00:00.000000Z"
LONG_TEXT = "é" * 2049  # 2,049 characters (msgspec allows them), 4,098 UTF-8 bytes


def _phase(**change: object) -> dict[str, object]:
    phase = {"lane": "l1", "phase": 1, "deadline": AT, "session": "s1", "profile": "p1"}
    return {**phase, "basis": "initial", "bound": None, "handoff": None, **change}


CASES = [
    (hosts.PhaseAppended, _phase(lane="a b")),
    (hosts.PhaseAppended, _phase(session="a b")),
    (hosts.PhaseAppended, _phase(deadline="2026-02-30T00:00:00.000000Z")),
    (hosts.ProcessExited, {"attempt": "a b", "exit_code": 0, "signal": None}),
    (
        hosts.AttemptReturned,
        {"attempt": "a b", "outcome": "completed", "failure": None, "cursor": None},
    ),
    (
        hosts.AttemptReturned,
        {"attempt": "a1", "outcome": "completed", "failure": None, "cursor": LONG_TEXT},
    ),
    (probes.Sidecar, {"status": "unavailable", "error": LONG_TEXT}),
]


@pytest.mark.parametrize(("kind", "payload"), CASES)
def test_a_payload_breaking_a_shared_rule_does_not_decode(kind: type, payload: dict) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(msgspec.json.encode(payload), type=kind)


@pytest.mark.parametrize(("kind", "payload"), CASES)
def test_the_same_payload_with_valid_values_decodes(kind: type, payload: dict) -> None:
    fixed = {
        key: ("a1" if value == "a b" else AT if value == "2026-02-30T00:00:00.000000Z" else value)
        for key, value in payload.items()
    }
    fixed = {key: ("short" if value == LONG_TEXT else value) for key, value in fixed.items()}
    msgspec.json.decode(msgspec.json.encode(fixed), type=kind)
