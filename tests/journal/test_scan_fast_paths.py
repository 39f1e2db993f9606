"""The verifier's shortcuts (journal/chain.py `scan`) accept exactly what the full
checks accept: an `at` in the same second as the last canonical one skips the full
regex and range check, so malformed times around a valid one must still fail."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from quotaledger.journal.chain import Head, NotFolded, scan
from quotaledger.journal.fold import ENGINE_DECODERS
from quotaledger.journal.record import Record, encode_line, genesis_line
from quotaledger.projections.ledger import PROJECTOR
from tests.journal.journal_helpers import line_offsets, toy_journal
from tests.toyprojector import TOY

PAYLOAD = (
    b'{"run":"r","uncached_input":1,"cached_input":0,"output":1,"requests":1,'
    b'"coverage":"measured","source":"t"}'
)
SECOND = "2026-11-29T11:08:22."


def _scan_times(*times: str, genesis_at: str = SECOND + "000000Z") -> tuple[Head, str | None]:
    line, prev = genesis_line("a" * 32, genesis_at)
    buf = line
    for seq, at in enumerate(times, start=1):
        line, prev = encode_line(seq, at, "capacity.observed", "g", PAYLOAD, prev)
        buf += line
    head = Head()
    failure = scan(buf, head, PROJECTOR.decoder, None)
    return head, None if failure is None else failure.reason


@pytest.mark.parametrize(
    "bad",
    [
        SECOND + "12345Z",
        SECOND + "1234567Z",
        SECOND + "123456z",
        SECOND + "12345\u0661Z",  # a non-ASCII digit
        SECOND + "123456Z\n",
        SECOND + "123456ZZ",
        "-" + "a" * 19 + "123456Z",  # no valid second before it: must not pass either
        "1970-01-01T00:00:00.12345xZ",
    ],
)
def test_malformed_time_in_a_known_second_is_corrupt(bad: str) -> None:
    head, reason = _scan_times(SECOND + "000001Z", bad)
    assert reason is not None and "not a canonical UTC timestamp" in reason
    assert head.next_seq == 2  # genesis and the first event verified, not the bad one


def test_malformed_time_as_the_first_event_is_corrupt() -> None:
    head, reason = _scan_times("-" + "a" * 19 + "123456Z")
    assert reason is not None and "not a canonical UTC timestamp" in reason
    assert head.next_seq == 1


def test_times_in_one_second_and_shared_times_verify() -> None:
    times = [
        SECOND + "000001Z",
        SECOND + "000001Z",
        SECOND + "999999Z",
        "2026-11-29T11:08:23.000000Z",
    ]
    head, reason = _scan_times(*times)
    assert reason is None and head.next_seq == 5


@pytest.mark.parametrize(
    "text",
    [
        SECOND + "000002Z",
        SECOND + "12345Z",
        SECOND + "1234567Z",
        SECOND + "123456z",
        SECOND + "12345\u0661Z",  # a non-ASCII digit
        SECOND + "+12345Z",
        SECOND + "1_2345Z",
        SECOND + " 12345Z",
        SECOND + "123456Z\n",
        SECOND + "123456ZZ",
        SECOND + "123456+00:00",
        SECOND[:-1] + "Z",
        "2026-11-29T11:08:23.000000Z",
    ],
)
def test_parse_at_in_a_known_second_parses_what_the_full_path_parses(text: str) -> None:
    """parse_at skips the regex for a time in the second it parsed last: whatever that
    shortcut takes, the full parse must give the same microseconds or the same error."""
    from quotaledger.journal import clock

    def full(value: str) -> int | str:
        try:
            return clock._parse_any(value)
        except clock.InvalidInput as exc:
            return exc.code

    def shortcut(value: str) -> int | str:
        clock.parse_at(SECOND + "000001Z")  # the second is now the cached one
        try:
            return clock.parse_at(value)
        except clock.InvalidInput as exc:
            return exc.code

    assert shortcut(text) == full(text)


@pytest.mark.parametrize("failing", range(1, 6))
def test_a_record_of_a_transaction_that_does_not_fold_is_reported_where_it_starts(
    tmp_path: Path, failing: int
) -> None:
    """scan works out the offset of a transaction's record that does not fold only
    then, not along the fold: it must be where that record's line starts (seq 1 is
    the announcement, 2-5 its records)."""
    path = str(tmp_path / "t.jsonl")
    toy_journal(path, [1, 2, 3, 4], batch=4).close()
    data = Path(path).read_bytes()

    def visit(record: Record, payload: Any, line: bytes) -> None:
        if record.seq == failing:
            raise ValueError("cannot fold")

    head = Head()
    failure = scan(data, head, lambda kind: ENGINE_DECODERS.get(kind) or TOY.decoder(kind), visit)
    assert failure is not None and failure.reason.endswith("does not fold: cannot fold")
    assert failure.seq == failing
    assert failure.offset == line_offsets(data)[failing]
    assert (failure.cut_seq, failure.cut_offset) == (1, line_offsets(data)[1])
    assert head.next_seq == 1  # the whole transaction left unverified


@pytest.mark.parametrize("failing", range(2, 6))
def test_a_run_visitor_names_the_record_that_does_not_fold(tmp_path: Path, failing: int) -> None:
    """With a run visitor, a transaction's records after its announcement are folded
    in one call: the one it names (NotFolded's index) is reported as a visitor's would
    be, where its line starts."""
    path = str(tmp_path / "t.jsonl")
    toy_journal(path, [1, 2, 3, 4], batch=4).close()
    data = Path(path).read_bytes()
    runs: list[list[int]] = []

    def visit_run(items: Sequence[tuple[Record, Any, bytes]]) -> None:
        runs.append([record.seq for record, _, _ in items])
        for index, (record, _, _) in enumerate(items):
            if record.seq == failing:
                raise NotFolded(index, ValueError("cannot fold"))

    head = Head()
    decoders = lambda kind: ENGINE_DECODERS.get(kind) or TOY.decoder(kind)  # noqa: E731
    failure = scan(data, head, decoders, lambda r, p, line: None, visit_run=visit_run)
    assert runs == [[2, 3, 4, 5]]
    assert failure is not None and failure.reason.endswith("does not fold: cannot fold")
    assert failure.seq == failing
    assert failure.offset == line_offsets(data)[failing]
    assert (failure.cut_seq, failure.cut_offset) == (1, line_offsets(data)[1])
    assert head.next_seq == 1
