"""quotaledger and an independent implementation of SPEC §2.1 read each other's journals."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from quotaledger.journal import Journal
from quotaledger.journal.record import REPAIRED_KIND
from tests.journal.independent_verifier import (
    TOY_SCHEMAS,
    Writer,
    parse_self_verifying,
    verify_strict,
)
from tests.journal.journal_helpers import engine_journal, repaired_payload
from tests.support import run_cli
from tests.toyprojector import TOY, Note


def test_quotaledger_journals_verify_independently(tmp_path: Path) -> None:
    """Genesis, batches, several goals, non-ASCII text, a repair record, checkpoints."""
    path = str(tmp_path / "j.jsonl")
    journal = Journal.open(path, TOY, checkpoint_every=4)
    try:
        for i in range(12):
            with journal.transaction() as txn:
                goal = f"goal-{i % 3}"
                for k in range(1 + i % 4):
                    text = 'naïve ✓ "quoted" \\ back\nslash\x01' if k == 1 else ""
                    txn.append("toy.note", goal, Note(n=i * 10 + k, text=text), txn.time_for(goal))
        with journal.transaction() as txn:
            txn.append(REPAIRED_KIND, None, repaired_payload(7), txn.time_for(None))
        head = journal.head
    finally:
        journal.close()
    data = Path(path).read_bytes()
    result = verify_strict(data, TOY_SCHEMAS)
    assert len(result.records) == head.next_seq
    assert result.head_hash == head.prev_hash
    assert result.verified_bytes == len(data) == head.offset
    assert result.records[0]["data"]["format"] == "quotaledger/1"
    assert {r["goal"] for r in result.records} == {None, "goal-0", "goal-1", "goal-2"}
    texts = [r["data"].get("text") for r in result.records if r["kind"] == "toy.note"]
    assert 'naïve ✓ "quoted" \\ back\nslash\x01' in texts


def test_the_cli_writes_journals_that_verify_independently(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 5)
    digest = run_cli("digest", "--journal", path, "--json").json
    result = verify_strict(Path(path).read_bytes())
    assert len(result.records) == 6
    assert digest["digest"] == f"5:{result.head_hash}"


def _independent_journal(path: Path, *, ensure_ascii: bool) -> Writer:
    writer = Writer("a0b1c2d3e4f54a6b8c7d9e0f1a2b3c4d", "2026-11-29T10:00:00.000000Z")
    writer.ensure_ascii = ensure_ascii
    for i in range(1, 6):
        writer.append(
            "journal.repaired",
            None,
            {
                "truncated_after_seq": i,
                "quarantine": f"q-é-{i}",
                "quarantined_bytes": i,
                "quarantined_sha256": hashlib.sha256(bytes([i])).hexdigest(),
            },
            f"2026-11-29T10:00:0{i}.000000Z",
        )
    path.write_bytes(writer.bytes())
    return writer


def test_independently_written_journals_verify_with_quotaledger(tmp_path: Path) -> None:
    for ensure_ascii in (True, False):  # \u00e9 escapes or raw UTF-8: the bytes are the truth
        path = tmp_path / f"independent-{ensure_ascii}.jsonl"
        writer = _independent_journal(path, ensure_ascii=ensure_ascii)
        verified = run_cli("verify", "--journal", path, "--json")
        assert verified.code == 0, verified.stdout
        assert verified.json["head"] == {
            "seq": 5,
            "hash": writer.prev,
            "journal_id": "a0b1c2d3e4f54a6b8c7d9e0f1a2b3c4d",
        }
        assert verified.json["torn_tail"] is None
        logged = [line for line in run_cli("log", "--journal", path, "--json").stdout.splitlines()]
        assert len(logged) == 6
        assert msgspec.json.decode(logged[3])["data"]["quarantine"] == "q-é-3"


def test_quotaledger_appends_to_an_independent_journal(tmp_path: Path) -> None:
    """A quotaledger writer continues the chain; the independent verifier checks the result."""
    path = tmp_path / "independent.jsonl"
    writer = _independent_journal(path, ensure_ascii=True)
    original = path.read_bytes()
    journal = Journal.open(str(path), TOY)
    try:
        assert journal.head.seq == 5 and journal.head.prev_hash == writer.prev
        with journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=1), txn.time_for("g"))
            txn.append(REPAIRED_KIND, None, repaired_payload(1), txn.time_for(None))
    finally:
        journal.close()
    data = path.read_bytes()
    assert data.startswith(original), "appending never rewrites earlier bytes"
    result = verify_strict(data, TOY_SCHEMAS)
    # A transaction of two events: a journal.batch record announces them.
    assert [r["seq"] for r in result.records] == list(range(9))
    assert result.records[6]["kind"] == "journal.batch"
    assert result.records[6]["data"] == {"records": 2}
    assert result.records[8]["at"] >= result.records[5]["at"]


def test_the_independent_verifier_is_strict(tmp_path: Path) -> None:
    """It rejects what quotaledger rejects: a check that cannot fail proves nothing."""
    path = tmp_path / "j.jsonl"
    writer = _independent_journal(path, ensure_ascii=True)
    line = writer.lines[2].rstrip(b"\n")
    assert parse_self_verifying(line)[0] is not None
    assert parse_self_verifying(line.replace(b'"v":1', b'"v": 1'))[0] is None
    assert parse_self_verifying(line[:-3] + b'0"}')[0] is None
    # Re-hashed but with the envelope's fields out of order: not the canonical form.
    body = line[: line.index(b',"hash":"')] + b"}"
    swapped = body.replace(b'{"v":1,"seq":2,', b'{"seq":2,"v":1,')
    resealed = swapped[:-1] + b',"hash":"' + hashlib.sha256(swapped).hexdigest().encode() + b'"}'
    assert parse_self_verifying(resealed)[0] is None
