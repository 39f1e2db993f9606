"""SPEC §2.4: torn tails are cut and kept; mid-log corruption is refused; repair."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import msgspec
import pytest

from quotaledger.journal import InvalidInput, Journal, JournalCorrupt
from quotaledger.journal.clock import format_us, parse_at
from quotaledger.journal.record import encode_line
from tests.journal.independent_verifier import TOY_SCHEMAS, verify_strict
from tests.journal.journal_helpers import (
    engine_journal,
    flip_byte,
    line_offsets,
    notes_in,
    side_files,
    toy_fold,
    toy_journal,
)
from tests.support import run_cli, run_process
from tests.toyprojector import TOY, Note

NOTES = [5, 6, 7, 8, 9]


@pytest.mark.parametrize(
    "tail",
    [
        b"\x00" * 4096,
        b"\x00" * 10 + b"\n" + b"\x00" * 10,
        b'{"v":1,"seq":6,"at":"2026-11-29T',
        b"garbage\n\xff\xfe not json\n{}\n" + b"x" * 300,
    ],
    ids=["nul-run", "nul-lines", "partial-record", "garbage-lines"],
)
def test_nul_and_garbage_tails_are_torn_tails(tail: bytes, tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, NOTES).close()
    healthy = Path(path).read_bytes()
    with open(path, "ab") as handle:
        handle.write(tail)
    journal = Journal.open(path, TOY)
    try:
        assert journal.state == toy_fold(NOTES)
        assert len(journal.recovered) == 1
    finally:
        journal.close()
    assert Path(path).read_bytes() == healthy
    (torn,) = side_files(path, "torn")
    assert torn.read_bytes() == tail
    assert torn.name.startswith(f"j.jsonl.torn.{len(NOTES) + 1}.")


def _corrupt_middle(path: str) -> tuple[int, int]:
    """Flip a byte inside record 3 (records 4.. stay valid); its seq and offset."""
    offsets = line_offsets(Path(path).read_bytes())
    flip_byte(path, offsets[3] + 25)
    return 3, offsets[3]


def test_flipped_byte_mid_log_is_refused_and_the_file_is_untouched(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 5)
    seq, offset = _corrupt_middle(path)
    before = Path(path).read_bytes()
    for command in ("verify", "digest", "log", "checkpoint", "export"):
        extra = ["--to", str(tmp_path / "out.jsonl")] if command == "export" else []
        result = run_cli(command, "--journal", path, "--json", *extra)
        assert result.code == 3, (command, result.stdout)
        *listed, last = result.stdout.splitlines()
        if command == "log":  # the verified prefix, then the corruption (SPEC §2.4)
            assert [json.loads(line)["seq"] for line in listed] == list(range(seq))
        else:
            assert listed == []
        body = json.loads(last)
        error = body["error"]
        assert body["ok"] is False
        assert error["code"] == "journal_corrupt"
        assert (error["seq"], error["offset"]) == (seq, offset)
        assert error["reason"] == "hash does not match the line's bytes"
        assert "Traceback" not in result.stderr
        assert Path(path).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.jsonl"]


def test_corruption_through_a_real_process(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 4)
    seq, offset = _corrupt_middle(path)
    before = Path(path).read_bytes()
    result = run_process("checkpoint", "--journal", path, "--json")
    assert result.code == 3
    assert json.loads(result.stdout)["error"]["seq"] == seq
    human = run_process("verify", "--journal", path)
    assert human.code == 3
    assert f"corrupt at seq {seq} (byte {offset})" in human.stderr
    assert "Traceback" not in human.stderr and human.stdout == ""
    assert Path(path).read_bytes() == before


def test_api_readers_can_still_show_the_verified_prefix(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, NOTES).close()
    seq, offset = _corrupt_middle(path)
    with pytest.raises(JournalCorrupt) as refused:
        Journal.open(path, TOY)
    assert (refused.value.context["seq"], refused.value.context["offset"]) == (seq, offset)
    with pytest.raises(JournalCorrupt):
        Journal.open(path, TOY, write=False)
    reader = Journal.open(path, TOY, write=False, allow_corrupt=True)
    try:
        assert reader.corruption is not None and reader.corruption.seq == seq
        assert reader.state == toy_fold(NOTES[: seq - 1])
        seen = []
        with pytest.raises(JournalCorrupt):
            for record, _payload, _line in reader.records():
                seen.append(record.seq)
        assert seen == list(range(seq))
    finally:
        reader.close()
    # A writer opened with allow_corrupt (as repair is) may look, but never append.
    writer = Journal.open(path, TOY, allow_corrupt=True)
    try:
        with pytest.raises(JournalCorrupt), writer.transaction() as txn:
            txn.append("toy.note", "g", Note(n=1), txn.time_for("g"))
    finally:
        writer.close()


def test_a_complete_line_over_1_mib_that_verifies_is_corruption_not_a_torn_tail(
    tmp_path: Path,
) -> None:
    """No writer makes such a line, so one that chains and hashes was written on
    purpose: acknowledged bytes, never "torn" (SPEC §2.4). Without its newline it is
    an unacknowledged torn tail like any other."""
    path = tmp_path / "j.jsonl"
    engine_journal(str(path), 3)
    prefix = path.read_bytes()
    last = json.loads(prefix.splitlines()[-1])
    payload = msgspec.json.encode({"note": "x" * (1 << 20)})
    line, _ = encode_line(
        last["seq"] + 1, last["at"], "journal.repaired", None, payload, last["hash"]
    )
    assert len(line) > 1 << 20
    path.write_bytes(prefix + line)
    for command in ("verify", "checkpoint"):
        result = run_cli(command, "--journal", str(path), "--json")
        assert result.code == 3, (command, result.stdout)
        error = result.json["error"]
        assert error["code"] == "journal_corrupt" and error["seq"] == last["seq"] + 1
        assert "1 MiB" in error["reason"]
    assert path.read_bytes() == prefix + line and not side_files(str(path), "torn")

    garbage = b"x" * (1 << 20) + b"\n"  # complete, over 1 MiB, verifies as nothing
    path.write_bytes(prefix + garbage)
    assert run_cli("verify", "--journal", str(path), "--json").json["torn_tail"] is not None
    path.write_bytes(prefix + line[:-1])  # the same bytes, never acknowledged
    assert run_cli("checkpoint", "--journal", str(path), "--json").code == 0
    assert path.read_bytes() == prefix
    (torn,) = side_files(str(path), "torn")
    assert torn.read_bytes() == line[:-1]


def test_repair_quarantines_the_rest_and_is_idempotent(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 5)
    seq, offset = _corrupt_middle(path)
    before = Path(path).read_bytes()

    refused = run_cli("repair", "--truncate-after", "2", "--journal", path, "--json")
    assert refused.code == 2 and refused.json["error"]["code"] == "confirmation_required"
    beyond = run_cli("repair", "--truncate-after", "4", "--yes", "--journal", path, "--json")
    assert beyond.code == 2, beyond.stdout
    assert Path(path).read_bytes() == before

    result = run_cli(
        "repair", "--truncate-after", str(seq - 1), "--yes", "--journal", path, "--json"
    )
    assert result.code == 0, result.stdout + result.stderr
    body = result.json
    assert body["appended"] is True and body["truncated_after_seq"] == seq - 1
    (quarantine,) = side_files(path, "quarantine")
    assert quarantine.read_bytes() == before[offset:], "the quarantine keeps every byte"
    assert body["quarantine"] == str(quarantine)
    assert body["quarantined_bytes"] == len(before) - offset
    after = Path(path).read_bytes()
    assert after.startswith(before[:offset])
    records = verify_strict(after).records
    assert [r["seq"] for r in records] == list(range(seq + 1))
    logged = records[-1]
    assert logged["kind"] == "journal.repaired"
    assert logged["data"] == {
        "truncated_after_seq": seq - 1,
        "quarantine": quarantine.name,
        "quarantined_bytes": len(before) - offset,
        "quarantined_sha256": hashlib.sha256(before[offset:]).hexdigest(),
    }
    assert run_cli("verify", "--journal", path, "--json").code == 0

    assert body["event"] == {k: logged[k] for k in ("seq", "hash", "kind", "at")}

    again = run_cli(
        "repair", "--truncate-after", str(seq - 1), "--yes", "--journal", path, "--json"
    )
    assert again.code == 0
    assert again.json["appended"] is False and "event" not in again.json
    assert again.json["quarantine"] == str(quarantine)
    assert Path(path).read_bytes() == after
    assert side_files(path, "quarantine") == [quarantine]


def test_repair_records_an_explicit_time_and_refuses_one_before_what_it_keeps(
    tmp_path: Path,
) -> None:
    """SPEC §2.2: repair writes, so its --at must not go back; a refused time moves
    nothing aside."""
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 5)
    seq, _ = _corrupt_middle(path)
    before = Path(path).read_bytes()
    repair = ["repair", "--truncate-after", str(seq - 1), "--yes", "--journal", path, "--json"]

    # journal.repaired is a journal-level record: its time must not be before the last
    # journal-level record kept; the records moved aside (later ones) do not count.
    last_kept_at = json.loads(before.splitlines()[seq - 1])["at"]
    first_moved_at = json.loads(before.splitlines()[seq + 1])["at"]
    assert first_moved_at > last_kept_at
    early = run_cli(*repair, "--at", format_us(parse_at(last_kept_at) - 1))
    assert early.code == 2 and early.json["error"]["code"] == "time_regression", early.stdout
    assert "journal-level" in early.json["error"]["message"]
    malformed = run_cli(*repair, "--at", "2026-02-30T00:00:00Z")
    assert malformed.code == 2 and malformed.json["error"]["code"] == "invalid_time"
    assert Path(path).read_bytes() == before and not side_files(path, "quarantine")

    offset_form = last_kept_at.replace("Z", "+00:00")  # before the moved records: fine
    done = run_cli(*repair, "--at", offset_form)
    assert done.code == 0, done.stdout + done.stderr
    logged = verify_strict(Path(path).read_bytes()).records[-1]
    assert logged["kind"] == "journal.repaired" and logged["at"] == last_kept_at
    assert done.json["head"]["seq"] == logged["seq"]
    # SPEC §8: a writing command that appended names its event.
    assert done.json["event"] == {k: logged[k] for k in ("seq", "hash", "kind", "at")}
    again = run_cli(*repair, "--at", "2026-02-30T00:00:00Z")
    assert again.code == 2 and again.json["error"]["code"] == "invalid_time"


def test_a_repair_that_crashed_before_its_record_is_logged_when_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes were moved aside and the journal cut, then the process died before
    journal.repaired was durable: the same command completes the log."""
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 5)
    seq, offset = _corrupt_middle(path)
    before = Path(path).read_bytes()
    from quotaledger.journal.filestore import FileStore

    def crash(self: FileStore, records: object, offset: int) -> None:
        raise OSError("simulated crash before the repair's record was written")

    journal = Journal.open(path, TOY, allow_corrupt=True)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(FileStore, "append", crash)
            with pytest.raises(OSError, match="simulated crash"):
                journal.repair(seq - 1)
    finally:
        journal.close()
    (quarantine,) = side_files(path, "quarantine")
    assert Path(path).read_bytes() == before[:offset], "cut, but no record"

    repair = ["repair", "--truncate-after", str(seq - 1), "--yes", "--journal", path, "--json"]
    done = run_cli(*repair)
    assert done.code == 0, done.stdout
    assert done.json["appended"] is True and done.json["quarantine"] == str(quarantine)
    logged = verify_strict(Path(path).read_bytes()).records[-1]
    assert logged["seq"] == seq and logged["data"] == {
        "truncated_after_seq": seq - 1,
        "quarantine": quarantine.name,
        "quarantined_bytes": len(before) - offset,
        "quarantined_sha256": hashlib.sha256(before[offset:]).hexdigest(),
    }
    again = run_cli(*repair)
    assert again.code == 0 and again.json["appended"] is False
    assert side_files(path, "quarantine") == [quarantine]


def test_a_quarantine_file_older_than_the_journal_is_not_logged(tmp_path: Path) -> None:
    """A file left by an earlier journal at the same path is no crashed repair of this
    one: a repair with nothing to cut changes nothing."""
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 3)
    stale = Path(f"{path}.quarantine.4.{10**18}")  # cut in 2001, before this journal
    stale.write_bytes(b"bytes of another journal\n")
    before = Path(path).read_bytes()
    result = run_cli("repair", "--truncate-after", "3", "--yes", "--journal", path, "--json")
    assert result.code == 0 and result.json["appended"] is False
    assert result.json["quarantine"] is None
    assert Path(path).read_bytes() == before and stale.exists()


def test_a_long_lived_writer_notices_a_repair_by_another_process(tmp_path: Path) -> None:
    """Its folded state covers records the repair moved away: it must refold, not append
    after a prefix that no longer exists."""
    path = str(tmp_path / "j.jsonl")
    holder = toy_journal(path, NOTES)
    try:
        _corrupt_record(path, 3)  # repair only ever quarantines corruption
        repairer = Journal.open(path, TOY, allow_corrupt=True)
        try:
            repairer.repair(2)
        finally:
            repairer.close()
        with holder.transaction() as txn:
            txn.append("toy.note", "g", Note(n=50), txn.time_for("g"))
        assert holder.state.count == 3
        assert holder.state.total == NOTES[0] + NOTES[1] + 50
    finally:
        holder.close()
    assert notes_in(path) == [NOTES[0], NOTES[1], 50]
    verify_strict(Path(path).read_bytes(), TOY_SCHEMAS)


def test_repair_of_a_healthy_journal_and_of_nothing(tmp_path: Path) -> None:
    """Repair is the way out of corruption: on a journal that verifies after SEQ it
    refuses (a repeated command must never quarantine acknowledged records)."""
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, NOTES).close()
    before = Path(path).read_bytes()
    journal = Journal.open(path, TOY)
    try:
        nothing = journal.repair(len(NOTES))  # the last record: nothing after it
        assert nothing.appended is False and nothing.quarantine is None
        with pytest.raises(InvalidInput) as refused:
            journal.repair(3)
        assert refused.value.code == "journal_not_corrupt"
    finally:
        journal.close()
    assert Path(path).read_bytes() == before
    assert not list(tmp_path.glob("*.quarantine.*"))


def _corrupt_record(path: str, seq: int) -> None:
    """Flip one hex digit of record `seq`'s hash (it no longer self-verifies)."""
    lines = Path(path).read_bytes().split(b"\n")
    line = lines[seq]
    digit = line[-3:-2]
    lines[seq] = line[:-3] + (b"0" if digit != b"0" else b"1") + line[-2:]
    Path(path).write_bytes(b"\n".join(lines))
