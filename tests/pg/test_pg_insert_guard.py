"""SPEC §2.6 (issue 27 item 6): the database keeps the chain's shape.

- The insert trigger refuses a row whose seq is not the head's + 1, whose prev is not
  the head's hash, or whose hash and columns disagree with its line: no role that may
  insert can wedge every writer with a gap (seq 999999).
- It records the inserting role in `inserted_by` (forced, whatever the INSERT says):
  a forged but well-chained row from a role with INSERT only names who wrote it
  (`log` and `verify` show it). The role is a real second PostgreSQL role.
- `repair --truncate-after SEQ --yes` works on PostgreSQL: the rows after SEQ move to
  `quotaledger_quarantine` in one transaction with the `journal.repaired` record.
- A table created by the previous version (no `inserted_by`, no insert trigger) is
  upgraded by the next writer; its old rows keep `inserted_by` NULL (unknown).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import psycopg
import pytest

from quotaledger.journal.pgstore import split_url
from quotaledger.journal.record import encode_line, genesis_line
from tests.pg.pg_helpers import connect, events_table, fresh_schema
from tests.support import CliResult, run_cli

pytestmark = pytest.mark.pg

T = "2026-11-29T10:00:{:02d}.000000Z"


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


def cli(journal: str, *args: str) -> CliResult:
    return run_cli(*args, "--journal", journal, "--json")


def _setup(journal: str) -> None:
    steps = [
        ["configure", "--goal", "g", "--max-active-cases", "1", "--at", T.format(0)],
        ["admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--at", T.format(1)],
    ]
    for args in steps:
        result = cli(journal, *args)
        assert result.code == 0, result.stdout + result.stderr


def _head(journal: str) -> tuple[int, str]:
    with connect(journal) as conn:
        row = conn.execute(
            f"SELECT seq, hash FROM {events_table(journal)} ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def _release_line(seq: int, prev: str, at: str = T.format(5)) -> tuple[bytes, str]:
    """A well-formed, correctly hashed `capacity.released` of run r1."""
    data = msgspec.json.encode({"run": "r1"})
    return encode_line(seq, at, "capacity.released", "g", data, prev)


def _insert_sql(journal: str) -> str:
    return (
        f"INSERT INTO {events_table(journal)} (seq, hash, prev, kind, goal, at, line)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)"
    )


def _row(seq: int, line: bytes, digest: str, prev: str) -> tuple[Any, ...]:
    return (seq, digest, prev, "capacity.released", "g", T.format(5), line.decode()[:-1])


def _rows(journal: str) -> list[tuple[Any, ...]]:
    with connect(journal) as conn:
        return conn.execute(
            f"SELECT seq, inserted_by FROM {events_table(journal)} ORDER BY seq"
        ).fetchall()


@pytest.fixture
def insert_only_role(pg_journal: str) -> Iterator[str]:
    """A real second role with USAGE on the schema and INSERT on the events table only."""
    role = f"forger_{uuid.uuid4().hex[:12]}"
    _setup(pg_journal)
    schema = split_url(pg_journal)[1]
    with connect(pg_journal, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
        conn.execute(f"GRANT INSERT ON {events_table(pg_journal)} TO {role}")
    try:
        yield role
    finally:
        with connect(pg_journal, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_a_forged_but_chained_row_names_the_role_that_inserted_it(
    pg_journal: str, insert_only_role: str
) -> None:
    seq, prev = _head(pg_journal)
    line, digest = _release_line(seq + 1, prev)
    conninfo, _schema = split_url(pg_journal)
    with psycopg.connect(conninfo, user=insert_only_role, autocommit=True) as forger:
        # The INSERT also claims to be someone else: the trigger decides.
        forger.execute(
            _insert_sql(pg_journal)
            .replace("(seq,", "(inserted_by, seq,")
            .replace("VALUES (", "VALUES ('postgres', "),
            _row(seq + 1, line, digest, prev),
        )
    rows = _rows(pg_journal)
    assert rows[-1] == (seq + 1, insert_only_role), rows
    assert {by for _, by in rows[:-1]} == {"postgres"}, rows
    log = cli(pg_journal, "log")
    assert log.code == 0, log.stderr
    events = [msgspec.json.decode(text) for text in log.stdout.splitlines()]
    assert events[-1]["inserted_by"] == insert_only_role, events[-1]
    table = run_cli("log", "--journal", pg_journal)
    assert "INSERTED BY" in table.stdout and insert_only_role in table.stdout, table.stdout
    verified = cli(pg_journal, "verify")
    assert verified.code == 0, verified.stdout  # well chained: only the role tells
    assert verified.json["inserted_by"] == [
        {"role": "postgres", "records": seq + 1, "first_seq": 0, "last_seq": seq},
        {"role": insert_only_role, "records": 1, "first_seq": seq + 1, "last_seq": seq + 1},
    ]


def test_a_row_off_the_chain_is_refused_whoever_inserts_it(
    pg_journal: str, insert_only_role: str
) -> None:
    seq, prev = _head(pg_journal)
    conninfo, _schema = split_url(pg_journal)
    gap_line, gap_hash = _release_line(999999, prev)
    wrong_prev_line, wrong_prev_hash = _release_line(seq + 1, "b" * 64)
    good_line, good_hash = _release_line(seq + 1, prev)
    bad_rows = {
        "gap": _row(999999, gap_line, gap_hash, prev),
        "prev": _row(seq + 1, wrong_prev_line, wrong_prev_hash, "b" * 64),
        "hash": _row(seq + 1, good_line, "c" * 64, prev),
        "kind column": (
            *_row(seq + 1, good_line, good_hash, prev)[:3],
            "capacity.admitted",
            *_row(seq + 1, good_line, good_hash, prev)[4:],
        ),
        "at column": (
            *_row(seq + 1, good_line, good_hash, prev)[:5],
            T.format(9),
            _row(seq + 1, good_line, good_hash, prev)[6],
        ),
        "genesis again": (0, *_row(seq + 1, good_line, good_hash, prev)[1:]),
    }
    for user in (insert_only_role, None):  # None: the superuser that owns the table
        options = {} if user is None else {"user": user}
        for name, row in bad_rows.items():
            with psycopg.connect(conninfo, autocommit=True, **options) as conn:
                with pytest.raises(psycopg.Error) as refused:
                    conn.execute(_insert_sql(pg_journal), row)
                assert "quotaledger" in str(refused.value), (name, refused.value)
    assert _head(pg_journal) == (seq, prev)
    # Every writer still writes.
    released = cli(pg_journal, "release", "--goal", "g", "--run", "r1", "--at", T.format(6))
    assert released.code == 0, released.stdout + released.stderr


def test_the_first_row_must_be_a_genesis(pg_server: str) -> None:
    with fresh_schema(pg_server) as journal:
        assert cli(journal, "configure", "--goal", "g", "--max-active-cases", "1").code == 0
        with connect(journal, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {events_table(journal)} DISABLE TRIGGER USER")
            conn.execute(f"DELETE FROM {events_table(journal)}")
            conn.execute(f"ALTER TABLE {events_table(journal)} ENABLE TRIGGER USER")
            for seq, prev in ((5, "0" * 64), (0, "d" * 64)):
                line, digest = _release_line(seq, prev)
                with pytest.raises(psycopg.Error, match="quotaledger"):
                    conn.execute(_insert_sql(journal), _row(seq, line, digest, prev))


def _wedge(journal: str) -> None:
    """A row at seq 999999 as the previous version let any inserting role write it
    (here: with the triggers bypassed, as that version had none to check)."""
    _seq, prev = _head(journal)
    line, digest = _release_line(999999, prev)
    with connect(journal, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(_insert_sql(journal), _row(999999, line, digest, prev))


def test_repair_on_postgresql_moves_the_rows_after_seq_to_quarantine(pg_journal: str) -> None:
    _setup(pg_journal)
    seq, _prev = _head(pg_journal)
    _wedge(pg_journal)
    wedged = cli(pg_journal, "release", "--goal", "g", "--run", "r1", "--at", T.format(6))
    assert wedged.code == 3, wedged.stdout + wedged.stderr
    repaired = cli(pg_journal, "repair", "--truncate-after", str(seq), "--yes")
    assert repaired.code == 0, repaired.stdout + repaired.stderr
    answer = repaired.json
    assert answer["appended"] is True and answer["truncated_after_seq"] == seq, answer
    schema = split_url(pg_journal)[1]
    assert answer["quarantine"] == f"{schema}.quotaledger_quarantine", answer
    with connect(pg_journal) as conn:
        moved = conn.execute(
            f'SELECT seq, quarantined_at IS NOT NULL FROM "{schema}".quotaledger_quarantine'
        ).fetchall()
    assert moved == [(999999, True)]
    rows = _rows(pg_journal)
    assert [s for s, _ in rows] == list(range(seq + 2)), rows  # the repair record follows
    assert cli(pg_journal, "verify").code == 0
    again = cli(pg_journal, "repair", "--truncate-after", str(seq), "--yes")
    assert again.code == 0 and again.json["appended"] is False, again.stdout
    released = cli(pg_journal, "release", "--goal", "g", "--run", "r1", "--at", T.format(7))
    assert released.code == 0, released.stdout + released.stderr
    # Outside a repair, the quarantine and the journal stay append-only.
    with connect(pg_journal, autocommit=True) as conn:
        for table in (events_table(pg_journal), f'"{schema}".quotaledger_quarantine'):
            with pytest.raises(psycopg.Error, match="append-only"):
                conn.execute(f"DELETE FROM {table} WHERE seq = 999999 OR seq = 1")


def test_repair_on_postgresql_refuses_to_cut_records_that_verify(pg_journal: str) -> None:
    _setup(pg_journal)
    refused = cli(pg_journal, "repair", "--truncate-after", "1", "--yes")
    assert refused.code == 2 and refused.json["error"]["code"] == "journal_not_corrupt"
    assert [s for s, _ in _rows(pg_journal)] == [0, 1, 2]


PREVIOUS_VERSION_DDL = [
    'CREATE SCHEMA IF NOT EXISTS "{s}"',
    'CREATE TABLE "{s}".quotaledger_events (seq bigint PRIMARY KEY, hash char(64) UNIQUE NOT'
    " NULL, prev char(64) NOT NULL, kind text, goal text, at timestamptz, line text NOT NULL)",
    'CREATE TABLE "{s}".quotaledger_checkpoints (id smallint PRIMARY KEY CHECK (id = 1),'
    " seq bigint NOT NULL, hash char(64) NOT NULL, projection_version text NOT NULL,"
    " blob bytea NOT NULL, written_at timestamptz NOT NULL DEFAULT now())",
    'CREATE FUNCTION "{s}".quotaledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS'
    " $f$ BEGIN RAISE EXCEPTION 'quotaledger journal %.% is append-only: % refused',"
    " TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege'; END $f$",
    'CREATE TRIGGER quotaledger_events_append_only BEFORE UPDATE OR DELETE ON "{s}".'
    'quotaledger_events FOR EACH ROW EXECUTE FUNCTION "{s}".quotaledger_refuse_change()',
    'CREATE TRIGGER quotaledger_events_no_truncate BEFORE TRUNCATE ON "{s}".quotaledger_events'
    ' FOR EACH STATEMENT EXECUTE FUNCTION "{s}".quotaledger_refuse_change()',
]
"""What the previous version created (journal/pgstore.py before issue 27)."""


def test_a_table_of_the_previous_version_is_upgraded_by_the_next_writer(pg_journal: str) -> None:
    schema = split_url(pg_journal)[1]
    genesis, genesis_hash = genesis_line(uuid.uuid4().hex, T.format(0))
    with connect(pg_journal, autocommit=True) as conn:
        for statement in PREVIOUS_VERSION_DDL:
            conn.execute(statement.replace("{s}", schema))
        conn.execute(
            _insert_sql(pg_journal),
            (0, genesis_hash, "0" * 64, "journal.created", None, T.format(0),
             genesis.decode()[:-1]),
        )  # fmt: skip
    configured = cli(pg_journal, "configure", "--goal", "g", "--max-active-cases", "1")
    assert configured.code == 0, configured.stdout + configured.stderr
    assert _rows(pg_journal) == [(0, None), (1, "postgres")]
    assert cli(pg_journal, "verify").code == 0
    _wedge_attempt_refused(pg_journal)


def _wedge_attempt_refused(journal: str) -> None:
    _seq, prev = _head(journal)
    line, digest = _release_line(999999, prev)
    with connect(journal, autocommit=True) as conn, pytest.raises(psycopg.Error):
        conn.execute(_insert_sql(journal), _row(999999, line, digest, prev))
