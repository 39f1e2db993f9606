"""Trust boundaries of the PostgreSQL store, against the real server:
- SPEC §2.6: `verify` checks every row's seq, hash, prev, kind, goal and at columns
  against its line (SQL readers query the columns): an edit with triggers bypassed
  (`session_replication_role = replica`) is exit 3;
- SPEC §2.5: the checkpoint row is a cache: a forged one is found by `verify`, and
  `audit` (which never uses it) shows the decision made on it as not reproduced;
  the row is written only under the journal's advisory lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from quotaledger.api import Ledger
from quotaledger.journal.checkpoint import Checkpoint
from quotaledger.journal.pgstore import lock_key, split_url
from quotaledger.journal.sections import SectionFile, layout
from quotaledger.projections.ledger import LedgerState
from tests.checkpoint_files import forged_sections
from tests.pg.pg_helpers import connect, events_table, fresh_schema
from tests.support import run_cli

T = "2026-11-29T10:00:{:02d}Z"


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


def cli(journal: str, *args: str) -> object:
    return run_cli(*args, "--journal", journal, "--json")


def _setup(journal: str) -> None:
    steps = [
        ["configure", "--goal", "g", "--max-active-cases", "1", "--at", T.format(0)],
        ["admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--at", T.format(1)],
        ["observe", "--goal", "g", "--run", "r1", "--uncached-input", "5", "--cached-input", "0",
         "--output", "1", "--at", T.format(2)],
    ]  # fmt: skip
    for args in steps:
        result = run_cli(*args, "--journal", journal, "--json")
        assert result.code == 0, result.stdout


def _rows(journal: str) -> list[tuple[object, ...]]:
    with connect(journal) as conn:
        return conn.execute(f"SELECT * FROM {events_table(journal)} ORDER BY seq").fetchall()


EDITS = {
    "kind": "kind = 'capacity.released'",
    "goal": "goal = 'another-goal'",
    "goal null": "goal = NULL",
    "at": "at = at + interval '1 hour'",
    "hash": "hash = repeat('a', 64)",
    "prev": "prev = repeat('b', 64)",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_verify_refuses_a_column_that_disagrees_with_its_line(pg_journal: str, edit: str) -> None:
    _setup(pg_journal)
    assert cli(pg_journal, "verify").code == 0
    with connect(pg_journal, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # triggers bypassed
        conn.execute(f"UPDATE {events_table(pg_journal)} SET {EDITS[edit]} WHERE seq = 2")
    tampered = _rows(pg_journal)
    found = cli(pg_journal, "verify")
    assert found.code == 3, found.stdout
    error = found.json["error"]
    assert error["code"] == "column_mismatch" and error["seq"] == 2, error
    assert error["columns"] == [edit.split()[0]], error
    assert _rows(pg_journal) == tampered, "verify modifies nothing"


def test_verify_refuses_an_edited_seq_column(pg_journal: str) -> None:
    _setup(pg_journal)
    with connect(pg_journal, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(f"UPDATE {events_table(pg_journal)} SET seq = 10 WHERE seq = 3")
    found = cli(pg_journal, "verify")
    assert found.code == 3, found.stdout
    assert found.json["error"]["code"] in ("column_mismatch", "journal_corrupt")


def _checkpoint_blob(journal: str) -> bytes:
    with connect(journal) as conn:
        row = conn.execute(
            f'SELECT blob FROM "{split_url(journal)[1]}".quotaledger_checkpoints WHERE id = 1'
        ).fetchone()
    assert row is not None
    return bytes(row[0])


def test_a_forged_checkpoint_row_is_found_by_verify_and_its_decision_by_audit(
    pg_journal: str,
) -> None:
    _setup(pg_journal)
    assert cli(pg_journal, "checkpoint").code == 0
    checkpoint = Checkpoint(SectionFile(_checkpoint_blob(pg_journal)))

    def emptied(state: LedgerState) -> None:
        del state.capacity.goals["g"].runs["r1"]  # the full goal made to look empty

    forged = layout(checkpoint.top, forged_sections(checkpoint, emptied))
    with connect(pg_journal, autocommit=True) as conn:  # "a plain UPDATE away"
        conn.execute(
            f'UPDATE "{split_url(pg_journal)[1]}".quotaledger_checkpoints SET blob = %s',
            (b"".join(forged),),
        )
    over = cli(pg_journal, "admit", "--goal", "g", "--run", "r2", "--arm", "baseline",
               "--at", T.format(3))  # fmt: skip
    assert over.json["admitted"] is True, over.stdout  # the writer trusted it
    found = cli(pg_journal, "verify")
    assert found.code == 3, found.stdout
    assert found.json["error"]["code"] == "checkpoint_mismatch"
    assert found.json["error"]["seq"] == checkpoint.seq
    audit = cli(pg_journal, "audit", "--goal", "g", "--run", "r2")
    assert audit.code == 1 and audit.json["reproduced"] is False, audit.stdout


def test_checkpoint_rows_are_written_only_under_the_journal_lock(pg_journal: str) -> None:
    # The server itself checks every write of the row: a trigger refuses one whose
    # session does not hold the journal's advisory lock (pg_locks).
    _setup(pg_journal)
    schema = split_url(pg_journal)[1]
    key = lock_key(schema)
    classid, objid = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
    with connect(pg_journal, autocommit=True) as conn:
        conn.execute(
            f'CREATE FUNCTION "{schema}".require_journal_lock() RETURNS trigger '
            "LANGUAGE plpgsql AS $f$ BEGIN "
            "IF NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
            f"AND pid = pg_backend_pid() AND granted AND classid = {classid} "
            f"AND objid = {objid} AND objsubid = 1) THEN "
            "RAISE EXCEPTION 'checkpoint written without the journal lock'; END IF; "
            "RETURN NEW; END $f$"
        )
        conn.execute(
            f'CREATE TRIGGER require_journal_lock BEFORE INSERT OR UPDATE ON "{schema}".'
            "quotaledger_checkpoints FOR EACH ROW EXECUTE FUNCTION "
            f'"{schema}".require_journal_lock()'
        )
    # Writers refresh the checkpoint on their own once enough records are past it.
    with Ledger.open(pg_journal, checkpoint_every=2) as ledger:
        for n in range(5):
            ledger.observe(goal="g", uncached_input=n, cached_input=0, output=0)
        head = ledger.journal.head.seq
    first = Checkpoint(SectionFile(_checkpoint_blob(pg_journal)))
    assert first.seq >= head - 1, first.seq
    # And on demand.
    assert cli(pg_journal, "checkpoint").code == 0
    assert Checkpoint(SectionFile(_checkpoint_blob(pg_journal))).seq == head
    digest = hashlib.sha256(_checkpoint_blob(pg_journal)).hexdigest()
    assert cli(pg_journal, "verify").json["checkpoint"]["matches"] is True
    assert hashlib.sha256(_checkpoint_blob(pg_journal)).hexdigest() == digest
