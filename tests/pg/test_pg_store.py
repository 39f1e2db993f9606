"""What only the PostgreSQL store has: the append-only trigger, the table's columns,
URLs, one transaction per command, a shared checkpoint row, server failures.

Every test here needs the real server (`pg_server`: skips locally when unreachable,
fails under CI=true). The store contract shared with the file store is in tests/store/.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from quotaledger.journal import Journal, JournalCorrupt, JournalPoisoned, StorageFailure, pgstore
from quotaledger.journal.clock import format_us, parse_at
from quotaledger.journal.pgstore import PgStore, lock_key, redact, split_url
from quotaledger.journal.record import encode_line, encode_payload, genesis_line
from quotaledger.projections.ledger import PROJECTOR
from quotaledger.services.journal import JournalService
from quotaledger.usecases.journal import VerifyRequest
from tests.pg.pg_helpers import connect, events_table, fresh_schema
from tests.support import run_cli, run_process
from tests.toyprojector import TOY, Note

TRICKY = 'tab\t back\\slash \\N nl\n quote" é 中 \\.'


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


def cli(target: str, *args: str):
    return run_cli(*args, "--journal", target, "--json")


def configure_budget(target: str, units: int, *extra: str):
    return cli(
        target, "budget", "configure", "--goal", "g", "--allowed-units", str(units),
        "--window-hours", "1", *extra,
    )  # fmt: skip


def budget_args(units: int) -> list[str]:
    return ["budget", "configure", "--goal", "g", "--allowed-units", str(units),
            "--window-hours", "1", "--json"]  # fmt: skip


def rows(url: str, columns: str = "seq, line") -> list[tuple]:
    with connect(url) as conn:
        return conn.execute(f"SELECT {columns} FROM {events_table(url)} ORDER BY seq").fetchall()


def ledger_file(path: Path, events: int) -> bytes:
    """A verifying ledger journal of `events` events over a few goals, as a file."""
    with Journal.open(str(path), PROJECTOR) as journal:
        for batch_start in range(0, events, 500):
            with journal.transaction() as txn:
                for i in range(batch_start, min(events, batch_start + 500)):
                    goal = f"goal-{i % 7}"
                    payload = json.dumps({"allowed_units": i, "window_hours": 1 + i % 5}).encode()
                    txn.append("budget.configured", goal, payload, txn.time_for(goal))
    probe = run_cli(
        "probe", "run", "--journal", str(path), "--json", "--goal", "goal-0", "--",
        "/bin/true", TRICKY,
    )  # fmt: skip
    assert probe.code == 0, probe.stdout + probe.stderr
    return path.read_bytes()


# -- URLs (no server needed) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "conninfo", "schema"),
    [
        ("postgresql://u@h:5/d?schema=s1", "postgresql://u@h:5/d", "s1"),
        (
            "postgresql://h/d?sslmode=disable&schema=x&application_name=a%20b",
            "postgresql://h/d?sslmode=disable&application_name=a%20b",
            "x",
        ),
        ("postgresql://h/d?options=-csearch_path%3Dfoo", None, "foo"),
        ("postgresql://h/d?options=-c%20search_path%3Dbar,public", None, "bar"),
        ("postgresql://h/d?options=-csearch_path%3Dfoo&schema=wins", None, "wins"),
        ("postgres://h/d", None, "public"),
    ],
)
def test_schema_comes_from_the_url_and_is_removed_before_connecting(
    url: str, conninfo: str | None, schema: str
) -> None:
    got_conninfo, got_schema = split_url(url)
    assert got_schema == schema
    assert got_conninfo == (conninfo if conninfo is not None else url.replace("&schema=wins", ""))


def test_passwords_never_reach_messages() -> None:
    assert redact("postgresql://bob:s3cret@db:5432/x?schema=a") == (
        "postgresql://bob:***@db:5432/x?schema=a"
    )
    result = run_cli(
        "verify", "--journal", "postgresql://bob:s3cret@127.0.0.1:1/x", "--json"
    )  # port 1: refused at once
    assert result.code == 4
    assert "s3cret" not in result.stdout + result.stderr


# -- the table ---------------------------------------------------------------------


def test_the_trigger_refuses_update_delete_and_truncate(pg_journal: str) -> None:
    for units in (1, 2, 3):
        assert configure_budget(pg_journal, units).code == 0
    before = rows(pg_journal)
    table = events_table(pg_journal)
    attempts = [
        f"UPDATE {table} SET line = replace(line, '\"allowed_units\":2', '\"allowed_units\":9')",
        f"UPDATE {table} SET goal = 'other' WHERE seq = 1",
        f"DELETE FROM {table} WHERE seq = 3",
        f"DELETE FROM {table}",
        f"TRUNCATE {table}",
    ]
    for statement in attempts:
        with connect(pg_journal) as conn, pytest.raises(psycopg.Error, match="append-only"):
            conn.execute(statement)
    assert rows(pg_journal) == before
    assert cli(pg_journal, "verify").json["records"] == 4


def test_columns_index_the_exact_lines(pg_journal: str, tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    ledger_file(source, 40)
    assert run_cli("import", "--journal", pg_journal, "--json", str(source)).code == 0
    stored = rows(pg_journal, "seq, hash, prev, kind, goal, at, line")
    lines = source.read_bytes().splitlines()
    assert len(stored) == len(lines) == 43  # genesis, the batch's announcement, 40, the probe
    assert json.loads(lines[1])["kind"] == "journal.batch"
    for (seq, hash_hex, prev, kind, goal, at, line), raw in zip(stored, lines, strict=True):
        record = json.loads(raw)
        assert line.encode() == raw
        assert (seq, hash_hex, prev, kind, goal) == (
            record["seq"], record["hash"], record["prev"], record["kind"], record["goal"],
        )  # fmt: skip
        at_us = round((at - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1e6)
        assert format_us(at_us) == record["at"]


def test_batches_with_awkward_text_go_through_copy_intact(pg_journal: str, tmp_path: Path) -> None:
    # Appends take only identifiers for goals, but a journal an older version wrote may
    # hold any goal, and importing it (COPY) must escape that column too.
    goal = "a\\b\tc\\N"
    source = tmp_path / "old.jsonl"
    line, prev = genesis_line("0" * 32, "2026-01-01T00:00:00.000000Z")
    lines = [line]
    for seq in range(1, 11):
        data = encode_payload(Note(n=seq, text=TRICKY))
        line, prev = encode_line(seq, "2026-01-01T00:00:01.000000Z", "toy.note", goal, data, prev)
        lines.append(line)
    source.write_bytes(b"".join(lines))
    with Journal.open(pg_journal, TOY) as into, Journal.open(str(source), TOY, write=False) as old:
        into.import_records(old)
    assert rows(pg_journal, "goal, line") == [
        (None if seq == 0 else goal, line[:-1].decode()) for seq, line in enumerate(lines)
    ]
    with Journal.open(pg_journal, TOY) as journal, journal.transaction() as txn:
        for n in range(30):
            txn.append("toy.note", "g", Note(n=n, text=TRICKY), txn.time_for("g"))
    written = [p.line[:-1] for p in txn.committed[1:]]  # after the announcement
    stored = rows(pg_journal, "goal, line")[12:]
    assert [line.encode() for _goal, line in stored] == written
    with Journal.open(pg_journal, TOY, write=False) as reader:
        assert reader.verify().seq == 41


# -- round trip, import size ---------------------------------------------------------


def test_file_to_postgresql_to_file_is_byte_identical(pg_journal: str, tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    original = ledger_file(source, 3000)
    started = time.monotonic()
    imported = run_process("import", "--journal", pg_journal, "--json", str(source))
    import_s = time.monotonic() - started
    assert imported.code == 0, imported.stdout + imported.stderr
    assert imported.json["records"] == original.count(b"\n")  # 3000, 6 announcements, 2
    copy = tmp_path / "copy.jsonl"
    exported = run_process("export", "--journal", pg_journal, "--json", "--to", str(copy))
    assert exported.code == 0, exported.stdout + exported.stderr
    assert copy.read_bytes() == original
    assert exported.json["head"] == imported.json["head"]
    assert import_s < 60  # COPY, not 3000 round trips; generous for a loaded CI box


# -- transactions, locks, checkpoints ------------------------------------------------


def test_a_command_is_one_transaction_even_the_first(pg_journal: str) -> None:
    assert configure_budget(pg_journal, 10).code == 0  # writes genesis + the event
    assert configure_budget(pg_journal, 20).code == 0
    xids = [xmin for (xmin,) in rows(pg_journal, "xmin::text::bigint")]
    assert xids[0] == xids[1] != xids[2]


def test_the_lock_is_the_documented_advisory_key(pg_journal: str) -> None:
    """Another machine holding the journal's advisory lock blocks writers, not readers."""
    assert configure_budget(pg_journal, 10).code == 0
    _conninfo, schema = split_url(pg_journal)
    with connect(pg_journal) as other:
        other.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        blocked = configure_budget(pg_journal, 20, "--lock-timeout-s", "0.3")
        assert blocked.code == 4 and blocked.json["error"]["code"] == "lock_timeout"
        assert cli(pg_journal, "verify").code == 0
    assert configure_budget(pg_journal, 20, "--lock-timeout-s", "5").code == 0


def test_the_checkpoint_row_is_shared_and_checked(pg_journal: str) -> None:
    for units in (1, 2, 3):
        assert configure_budget(pg_journal, units).code == 0
    assert cli(pg_journal, "checkpoint").json["seq"] == 3
    with connect(pg_journal) as conn:
        (seq,) = conn.execute(
            f'SELECT seq FROM "{split_url(pg_journal)[1]}".quotaledger_checkpoints'
        ).fetchone()
    assert seq == 3
    # Another process (machine) folds from it.
    probe = (
        "import sys; from journal import Journal; from projections.ledger import PROJECTOR;"
        "j = Journal.open(sys.argv[1], PROJECTOR, write=False); print(j.checkpoint_seq)"
    )
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", probe, pg_journal], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "3"


def test_readers_never_create_and_an_empty_store_is_an_empty_journal(pg_journal: str) -> None:
    missing = cli(pg_journal, "verify")
    assert missing.code == 3 and missing.json["error"]["code"] == "journal_not_found"
    _conninfo, schema = split_url(pg_journal)
    with connect(pg_journal) as conn:
        assert conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone() == (None,)
    store = PgStore(pg_journal, create=True)
    store.lock(1)  # a writer's first lock creates schema, tables and triggers
    store.unlock()
    store.close()
    empty = cli(pg_journal, "verify")  # nothing to vouch for: as digest says (issue 41)
    assert empty.code == 2 and empty.json["error"]["code"] == "empty_journal"
    assert cli(pg_journal, "digest").json["error"]["code"] == "empty_journal"


@pytest.mark.slow
def test_concurrent_first_users_create_the_schema_once(pg_server: str) -> None:
    import subprocess
    import sys

    with fresh_schema(pg_server) as url:
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "quotaledger", *budget_args(units), "--journal", url],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).resolve().parents[2],
            )
            for units in range(1, 5)
        ]
        results = [(p.wait(timeout=60), p.communicate()) for p in procs]
        assert all(code == 0 for code, _out in results), results
        assert cli(url, "verify").json["records"] == 5  # one genesis record, four events


# -- failures ------------------------------------------------------------------------


def test_an_unreachable_server_is_exit_4_with_a_json_error() -> None:
    url = "postgresql://postgres@127.0.0.1:1/test?schema=x"
    for args in (["verify"], ["budget", "configure", "--goal", "g", "--allowed-units", "1",
                              "--window-hours", "1"]):  # fmt: skip
        result = run_process(*args, "--journal", url, "--json")
        assert result.code == 4, result.stdout + result.stderr
        error = result.json["error"]
        assert error["code"] == "pg_unreachable"
        assert "127.0.0.1:1" in error["message"]
        assert "Traceback" not in result.stderr


def test_a_row_edited_behind_the_trigger_fails_verify(pg_journal: str) -> None:
    for units in (11, 12, 13, 14):
        assert configure_budget(pg_journal, units).code == 0
    assert cli(pg_journal, "checkpoint").code == 0  # a checkpoint does not hide the edit
    table = events_table(pg_journal)
    with connect(pg_journal) as conn:  # a superuser, in one transaction
        conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        conn.execute(
            f"UPDATE {table} SET line = replace(line, '\"allowed_units\":12', "
            "'\"allowed_units\":99') WHERE seq = 2"
        )
        conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    result = run_process("verify", "--journal", pg_journal, "--json")
    assert result.code == 3, result.stdout
    error = result.json["error"]
    assert error["code"] == "journal_corrupt" and error["seq"] == 2
    assert "hash" in error["reason"]


def test_repair_moves_postgresql_rows_that_do_not_verify_to_quarantine(pg_journal: str) -> None:
    for units in (1, 2):
        assert configure_budget(pg_journal, units).code == 0
    before = rows(pg_journal)
    refused = cli(pg_journal, "repair", "--truncate-after", "0", "--yes")
    # A healthy journal has nothing to repair, whichever the store.
    assert refused.code == 2 and refused.json["error"]["code"] == "journal_not_corrupt"
    assert rows(pg_journal) == before
    # Rows whose lines no longer verify move to the quarantine table (SPEC §2.6), in
    # the transaction that appends the journal.repaired record.
    with connect(pg_journal, autocommit=True) as admin:
        admin.execute("SET session_replication_role = replica")
        admin.execute(
            f"UPDATE {events_table(pg_journal)} SET line = replace(line, "
            "'\"allowed_units\":2', '\"allowed_units\":3') WHERE seq = 2"
        )
    tampered = rows(pg_journal)
    repaired = cli(pg_journal, "repair", "--truncate-after", "1", "--yes")
    assert repaired.code == 0 and repaired.json["appended"] is True, repaired.stdout
    assert rows(pg_journal)[:2] == tampered[:2]
    assert [row[0] for row in rows(pg_journal)] == [0, 1, 2]  # seq 2: the repair record
    quarantine = events_table(pg_journal).replace("quotaledger_events", "quotaledger_quarantine")
    with connect(pg_journal) as conn:
        moved = conn.execute(f"SELECT seq, line FROM {quarantine}").fetchall()
    assert moved == [(2, tampered[2][-1])]
    assert cli(pg_journal, "verify").code == 0


def test_a_connection_lost_mid_command_acknowledges_nothing(pg_journal: str) -> None:
    journal = Journal.open(pg_journal, TOY)
    with journal.transaction() as txn:
        txn.append("toy.note", "g", Note(n=1), txn.time_for("g"))
    store = journal.store
    assert isinstance(store, PgStore)
    txn = journal.transaction()
    txn.__enter__()
    txn.append("toy.note", "g", Note(n=2), txn.time_for("g"))
    with connect(pg_journal, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (store._conn.info.backend_pid,))
    with pytest.raises(StorageFailure):
        txn.__exit__(None, None, None)
    assert store.poisoned
    with pytest.raises(JournalPoisoned), journal.transaction():
        pass
    journal.close()
    with Journal.open(pg_journal, TOY, write=False) as reader:
        assert reader.verify().seq == 1 and reader.state.total == 1


def test_existing_query_parameters_are_kept(pg_server: str) -> None:
    with fresh_schema(pg_server) as url:
        schema = split_url(url)[1]
        separator = "&" if "?" in pg_server else "?"
        named = f"{pg_server}{separator}application_name=rl-test&schema={schema}"
        store = PgStore(named, create=True)
        try:
            assert store.schema == schema
            row = store._conn.execute("SHOW application_name").fetchone()
            assert row == ("rl-test",)
        finally:
            store.close()


def test_search_path_option_names_the_schema(pg_server: str) -> None:
    with fresh_schema(pg_server) as url:
        schema = split_url(url)[1]
        base = url.split("?")[0]
        via_options = f"{base}?options=-csearch_path%3D{schema}"
        assert configure_budget(via_options, 5).code == 0
        assert cli(url, "verify").json["records"] == 2  # the same journal


def test_at_column_parses_the_canonical_time(pg_journal: str) -> None:
    assert configure_budget(pg_journal, 5, "--at", "2026-02-03T04:05:06.789012+02:00").code == 0
    ((at,),) = rows(pg_journal, "at")[1:]
    assert at == datetime(2026, 2, 3, 2, 5, 6, 789012, tzinfo=UTC)
    assert parse_at("2026-02-03T02:05:06.789012Z") == round(at.timestamp() * 1e6)


def test_rows_deleted_behind_the_trigger_are_found(
    pg_journal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gap (wider than a read page) is reported where it starts; a cut tail is caught
    by a digest taken before the cut."""
    monkeypatch.setattr(pgstore, "PAGE_ROWS_MAX", pgstore.PAGE_ROWS_MIN)  # 64-row pages
    with Journal.open(pg_journal, TOY) as journal:
        for start in range(0, 900, 300):
            with journal.transaction() as txn:
                for n in range(start, start + 300):
                    txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))
        digest = f"{journal.head.seq}:{journal.head.prev_hash}"
    table = events_table(pg_journal)

    def delete(where: str) -> None:
        with connect(pg_journal) as conn:
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            conn.execute(f"DELETE FROM {table} WHERE {where}")
            conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")

    # Each transaction of 300 is led by its journal.batch record: seqs 1, 302 and 603.
    delete("seq > 850")  # inside the third: committed rows never lack part of one
    with (
        Journal.open(pg_journal, TOY, write=False, allow_corrupt=True) as reader,
        pytest.raises(JournalCorrupt) as partial,
    ):
        reader.verify()
    assert partial.value.context["seq"] == 603
    assert "incomplete transaction" in partial.value.context["reason"]
    delete("seq > 602")  # a whole transaction gone: the chain just ends earlier
    with Journal.open(pg_journal, TOY, write=False) as reader:
        assert reader.verify().seq == 602
        with pytest.raises(JournalCorrupt) as cut:
            JournalService(reader).verify(VerifyRequest(digest=digest))
    assert cut.value.code == "digest_not_found"

    delete("seq BETWEEN 100 AND 499")  # rows 500-602 follow the gap
    reader = Journal.open(pg_journal, TOY, write=False, allow_corrupt=True)
    with reader, pytest.raises(JournalCorrupt) as gap:
        reader.verify()
    assert gap.value.context["seq"] == 100, gap.value.context
    assert "500" in gap.value.context["reason"]


def test_an_import_into_postgresql_leaves_a_checkpoint(pg_journal: str, tmp_path: Path) -> None:
    """`metrics` right after an import read every row (2.4 s on 10^5 events) until the
    next writer's refresh: an import past the threshold writes the checkpoint row."""
    from quotaledger import Ledger

    source = tmp_path / "source.jsonl"
    with Ledger.open(str(source)) as ledger:
        ledger.configure(goal="g", quota_tpm=1000)
        for i in range(6):
            ledger.observe(goal="g", uncached_input=i, cached_input=0, output=0)
    with Ledger.open(pg_journal, checkpoint_every=5) as ledger:
        loaded = ledger.import_(file=str(source))
        checkpoint = ledger.journal.store.load_checkpoint()
    assert checkpoint is not None
    assert (checkpoint.seq, checkpoint.hash) == (loaded["head"]["seq"], loaded["head"]["hash"])
    assert cli(pg_journal, "verify").code == 0  # and it matches a fold from genesis
