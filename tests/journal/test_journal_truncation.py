"""SPEC §10: a journal cut at every byte offset inside its last three records."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quotaledger.journal import Journal
from tests.journal.independent_verifier import TOY_SCHEMAS, verify_strict
from tests.journal.journal_helpers import (
    engine_journal,
    line_offsets,
    side_files,
    toy_fold,
    toy_journal,
)
from tests.support import run_cli
from tests.toyprojector import TOY

NOTES = [3, 1, 4, 1, 5, 9, 2]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = str(tmp_path_factory.mktemp("source") / "j.jsonl")
    toy_journal(path, NOTES).close()
    return Path(path).read_bytes()


def _cut_points(data: bytes) -> list[int]:
    offsets = line_offsets(data)
    start = offsets[-4]  # the first byte of the third record from the end
    return list(range(start, len(data)))  # every cut that tears one of the last three


def test_every_cut_recovers_exactly_the_complete_records(source: bytes, tmp_path: Path) -> None:
    offsets = line_offsets(source)
    cuts = _cut_points(source)
    assert len(cuts) > 3 * 150
    for cut in cuts:
        directory = tmp_path / str(cut)
        directory.mkdir()
        path = str(directory / "j.jsonl")
        Path(path).write_bytes(source[:cut])
        complete = max(o for o in offsets if o <= cut)
        records = offsets.index(complete)  # complete lines before the cut (genesis included)

        journal = Journal.open(path, TOY)
        try:
            assert journal.head.next_seq == records, cut
            assert journal.head.offset == complete
            assert journal.state == toy_fold(NOTES[: records - 1]), cut
        finally:
            journal.close()
        assert Path(path).read_bytes() == source[:complete]
        torn = side_files(path, "torn")
        if cut == complete:
            assert torn == [], cut
        else:
            assert len(torn) == 1, cut
            assert torn[0].read_bytes() == source[complete:cut], cut
            assert torn[0].name.startswith(f"j.jsonl.torn.{records}.")
            assert os.stat(torn[0]).st_mode & 0o777 == 0o600

        # Recovery is idempotent, and the recovered journal accepts new appends.
        journal = Journal.open(path, TOY)
        try:
            assert len(side_files(path, "torn")) == len(torn)
            with journal.transaction() as txn:
                txn.append("toy.note", "g", b'{"n":100}', txn.time_for("g"))
            assert journal.state == toy_fold([*NOTES[: records - 1], 100])
        finally:
            journal.close()
        verify_strict(Path(path).read_bytes(), TOY_SCHEMAS)
        for leftover in directory.iterdir():
            leftover.unlink()
        directory.rmdir()


def test_readers_see_the_complete_prefix_and_change_nothing(source: bytes, tmp_path: Path) -> None:
    offsets = line_offsets(source)
    path = str(tmp_path / "j.jsonl")
    for cut in _cut_points(source)[::7]:
        Path(path).write_bytes(source[:cut])
        complete = max(o for o in offsets if o <= cut)
        journal = Journal.open(path, TOY, write=False)
        try:
            assert journal.head.offset == complete
            records = list(journal.records())
            assert len(records) == offsets.index(complete)
            assert (journal.torn_tail is None) == (cut == complete)
            assert journal.verify().offset == complete
        finally:
            journal.close()
        assert Path(path).read_bytes() == source[:cut]
        assert side_files(path, "torn") == []


def test_cuts_through_the_cli(tmp_path: Path) -> None:
    """A handful of cuts recovered by a real writing command (`checkpoint`)."""
    base = str(tmp_path / "base.jsonl")
    engine_journal(base, 4)
    data = Path(base).read_bytes()
    offsets = line_offsets(data)
    last = offsets[-2]
    for cut in (last + 1, last + 100, len(data) - 1, offsets[-3] + 50):
        path = tmp_path / f"cut-{cut}.jsonl"
        path.write_bytes(data[:cut])
        complete = max(o for o in offsets if o <= cut)
        verified = run_cli("verify", "--journal", path, "--json")
        assert verified.code == 0
        assert verified.json["torn_tail"]["offset"] == complete
        assert path.read_bytes() == data[:cut], "verify is a reader: it never modifies"

        result = run_cli("checkpoint", "--journal", path, "--json")
        assert result.code == 0, result.stdout + result.stderr
        assert result.json["seq"] == offsets.index(complete) - 1
        assert result.json["offset"] == complete
        assert "torn tail" in result.stderr
        assert path.read_bytes() == data[:complete]
        (torn,) = side_files(str(path), "torn")
        assert torn.read_bytes() == data[complete:cut]
        verified = run_cli("verify", "--journal", path, "--json")
        assert verified.json["torn_tail"] is None
