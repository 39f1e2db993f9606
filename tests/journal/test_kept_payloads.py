"""A payload handed to `append` as its kind's own Struct is kept as built, not decoded
again from its bytes (journal/transaction.py): the same bytes are written and the fold
gets an equal value. Bytes and dicts from outside are still decoded and checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput, transaction
from quotaledger.journal.fold import ENGINE_DECODERS
from quotaledger.journal.record import GENESIS_KIND, JournalCreated, self_verify
from quotaledger.projections.capacity import events as cap
from quotaledger.projections.ledger import PROJECTOR
from tests.journal.journal_helpers import FIXTURES, toy_journal
from tests.toyprojector import Note

DECODERS = {**ENGINE_DECODERS, GENESIS_KIND: msgspec.json.Decoder(JournalCreated).decode}
counts = st.integers(min_value=0, max_value=10**12)


def _observed(draw: Any) -> cap.CapacityObserved:
    return cap.CapacityObserved(
        run=draw(st.none() | st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)),
        uncached_input=draw(counts),
        cached_input=draw(counts),
        output=draw(counts),
        requests=draw(st.integers(min_value=0, max_value=1000)),
        coverage="measured",
        source=draw(st.sampled_from(["cli", "api", "bench"])),
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_struct_and_its_bytes_write_the_same_record(tmp_path_factory: Any, data: Any) -> None:
    payload = _observed(data.draw)
    path = str(tmp_path_factory.mktemp("kept") / "j.jsonl")
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=4)
        written = []
        for handed in (payload, msgspec.json.encode(payload)):
            with ledger.journal.transaction() as txn:
                txn.append(cap.OBSERVED, "g", handed, txn.time_for("g"))
            (record,) = txn.committed
            written.append(record)
    kept, decoded = written
    assert bytes(kept.record.data) == bytes(decoded.record.data)
    assert kept.payload is payload
    assert kept.payload == decoded.payload


def test_every_fixture_payload_encodes_back_to_its_bytes() -> None:
    """What the shortcut rests on: a payload decoded from a journal encodes to the very
    bytes it came from, so a Struct kept and encoded once writes what one decoded and
    checked from those bytes would."""
    seen = 0
    for path in sorted(FIXTURES.glob("healthy*.jsonl")):
        for line in path.read_bytes().splitlines():
            record = self_verify(line)
            assert record is not None
            decode = DECODERS.get(record.kind) or PROJECTOR.decoder(record.kind)
            assert decode is not None
            assert msgspec.json.encode(decode(record.data)) == bytes(record.data)
            seen += 1
    assert seen > 0


def test_the_suite_check_catches_a_struct_its_decoding_would_change(tmp_path: Path) -> None:
    """A Struct's constructor does not check field types: such a payload would be kept
    wrong. The suite runs with CHECK_KEPT_PAYLOADS on, so no test could build one and
    pass unnoticed."""
    assert transaction.CHECK_KEPT_PAYLOADS
    journal = toy_journal(str(tmp_path / "j.jsonl"), [1])
    for wrong in (Note(n="2"), Note(n=2.0)):  # type: ignore[arg-type]
        with pytest.raises(AssertionError), journal.transaction() as txn:
            txn.append("toy.note", "g", wrong, txn.time_for("g"))
    assert journal.state.count == 1
    journal.close()


@pytest.mark.parametrize("payload", [b'{"n":"2"}', {"n": "2"}, b"not json"])
def test_bytes_and_dicts_from_outside_are_still_checked(tmp_path: Path, payload: Any) -> None:
    journal = toy_journal(str(tmp_path / "j.jsonl"), [1])
    with pytest.raises(InvalidInput) as raised, journal.transaction() as txn:
        txn.append("toy.note", "g", payload, txn.time_for("g"))
    assert raised.value.code == "invalid_payload"
    assert journal.state.count == 1
    journal.close()


def test_a_kept_payload_is_the_fold_s_value(tmp_path: Path) -> None:
    journal = toy_journal(str(tmp_path / "j.jsonl"), [1])
    note = Note(n=5, text="kept")
    with journal.transaction() as txn:
        pending = txn.append("toy.note", "g", note, txn.time_for("g"))
    assert pending.payload is note
    assert bytes(pending.record.data) == msgspec.json.encode(note)
    assert journal.state.total == 6
    journal.close()
