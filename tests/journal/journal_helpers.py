"""Helpers for the journal-engine tests: toy journals, engine-kind journals, byte surgery."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from quotaledger.journal import Journal
from quotaledger.journal.record import REPAIRED_KIND, JournalRepaired
from tests.toyprojector import TOY, Note, ToyState

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"


def manifest() -> dict[str, Any]:
    result: dict[str, Any] = json.loads((FIXTURES / "manifest.json").read_text())
    return result


def toy_journal(path: str, notes: list[int], *, batch: int = 1, goal: str = "g") -> Journal[Any]:
    """A toy journal holding `notes` (one toy.note per value), `batch` per transaction."""
    journal = Journal.open(path, TOY)
    for start in range(0, len(notes), batch):
        with journal.transaction() as txn:
            for n in notes[start : start + batch]:
                txn.append("toy.note", goal, Note(n=n, text=f"note {n}"), txn.time_for(goal))
    return journal


def toy_fold(notes: list[int]) -> ToyState:
    """What the toy projection must be after exactly these notes (seq 1..len)."""
    return ToyState(count=len(notes), total=sum(notes), last_seq=len(notes) if notes else -1)


def notes_in(path: str) -> list[int]:
    """The toy notes of a journal file, read with the independent verifier."""
    from tests.journal.independent_verifier import TOY_SCHEMAS, verify

    result = verify(Path(path).read_bytes(), TOY_SCHEMAS)
    assert result.corrupt is None, result.corrupt
    return [r["data"]["n"] for r in result.records if r["kind"] == "toy.note"]


def repaired_payload(i: int) -> JournalRepaired:
    return JournalRepaired(
        truncated_after_seq=i,
        quarantine=f"filler.{i}",
        quarantined_bytes=i,
        quarantined_sha256=hashlib.sha256(str(i).encode()).hexdigest(),
    )


def engine_journal(path: str, count: int) -> None:
    """A journal the real CLI verifies whatever domains exist: genesis + `count`
    `journal.repaired` records (the engine's own kind), one transaction each."""
    from quotaledger.projections.ledger import PROJECTOR

    journal = Journal.open(path, PROJECTOR)
    try:
        for i in range(count):
            with journal.transaction() as txn:
                txn.append(REPAIRED_KIND, None, repaired_payload(i), txn.time_for(None))
    finally:
        journal.close()


def line_offsets(data: bytes) -> list[int]:
    """Start offset of every complete line, plus the end of the last one."""
    offsets = [0]
    for index, byte in enumerate(data):
        if byte == 0x0A:
            offsets.append(index + 1)
    return offsets


def side_files(path: str, label: str) -> list[Path]:
    """`<journal>.<label>.*` files beside the journal, oldest name first."""
    base = Path(path)
    return sorted(base.parent.glob(f"{base.name}.{label}.*"))


def flip_byte(path: str, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0x01]))


def sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def listing(directory: str) -> list[str]:
    return sorted(os.listdir(directory))
