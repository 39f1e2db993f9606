"""Times at and beyond the edges: a user's bad --at is exit 2 (never a traceback), and
a record whose time is impossible is corruption at its seq (exit 3), not a reader's
error."""

from __future__ import annotations

import json

import pytest

from quotaledger.journal.clock import AT_US_MAX, format_us, parse_at
from quotaledger.journal.record import encode_line
from tests.support import run_cli

OBSERVE = [
    "observe",
    "--goal",
    "g",
    "--uncached-input",
    "1",
    "--cached-input",
    "0",
    "--output",
    "0",
]


@pytest.mark.parametrize(
    "at",
    [
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "0999-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
        "2026-13-45T25:61:61.000000Z",
        "2026-02-30T00:00:00Z",
    ],
)
def test_an_unrepresentable_time_is_exit_2_and_writes_nothing(journal_path: str, at: str) -> None:
    result = run_cli(*OBSERVE, "--at", at, "--journal", journal_path, "--json")
    assert result.code == 2, result.stdout
    assert result.json["error"]["code"] == "invalid_time"
    assert "Traceback" not in result.stderr


def test_the_edges_of_the_range_round_trip() -> None:
    assert format_us(0) == "1970-01-01T00:00:00.000000Z"
    assert format_us(AT_US_MAX) == "9999-12-31T23:59:59.999999Z"
    assert parse_at(format_us(AT_US_MAX)) == AT_US_MAX


def _configure(path: str) -> None:
    """The goal OBSERVE writes to (capacity writers refuse an unknown goal, SPEC §8)."""
    assert run_cli("configure", "--goal", "g", "--quota-tpm", "1000", "--journal", path).code == 0


def _append_raw(path: str, at: str, kind: str, data: dict) -> None:
    with open(path, "rb") as handle:
        last = json.loads(handle.read().splitlines()[-1])
    body = json.dumps(data, separators=(",", ":")).encode()
    line, _ = encode_line(last["seq"] + 1, at, kind, "g", body, last["hash"])
    with open(path, "ab") as handle:
        handle.write(line)


def test_a_record_with_an_impossible_time_is_corruption_at_its_seq(journal_path: str) -> None:
    _configure(journal_path)
    assert run_cli(*OBSERVE, "--journal", journal_path, "--json").code == 0
    with open(journal_path, "rb") as handle:
        observed = json.loads(handle.read().splitlines()[-1])["data"]
    _append_raw(journal_path, "2026-13-45T25:61:61.000000Z", "capacity.observed", observed)
    for command in (["verify"], ["inspect"], OBSERVE):
        result = run_cli(*command, "--journal", journal_path, "--json")
        assert result.code == 3, (command, result.stdout)
        assert result.json["error"]["code"] == "journal_corrupt"
        assert result.json["error"]["seq"] == 3


def test_a_payload_time_that_cannot_be_folded_is_corruption(journal_path: str) -> None:
    _configure(journal_path)
    assert run_cli(*OBSERVE, "--journal", journal_path, "--json").code == 0
    with open(journal_path, "rb") as handle:
        at = json.loads(handle.read().splitlines()[-1])["at"]
    rejected = {
        "run": None,
        "retry_after_s": None,
        "cooldown_s": 15,
        "clamped": False,
        "cooldown_until": "2026-02-30T00:00:00.000000Z",  # matches the pattern, no such day
        "streak": 1,
        "detail": None,
    }
    _append_raw(journal_path, at, "capacity.rejected", rejected)
    # The payload's schema checks the date, not only the shape: verify and every
    # command that reads the record report corruption at that seq instead of exit 2.
    for command in (["verify"], ["inspect"], OBSERVE):
        result = run_cli(*command, "--journal", journal_path, "--json")
        assert result.code == 3, (command, result.stdout)
        assert result.json["error"]["seq"] == 3
        assert "cooldown_until" in result.json["error"]["reason"]
