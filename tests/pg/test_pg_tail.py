"""The PostgreSQL store reads the journal's tail in the lock's round trip (issue 20).

`lock()` takes the advisory lock and, in the same simple query, reads the rows after
the record the handle expects to be last; `tail_after` then answers from those rows.
That fast path must answer exactly what the query would, must be read after the lock
was granted (a writer that waited sees what the previous holder committed, whatever
the server's default isolation), and the read must stay an index scan.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from quotaledger.journal import Journal
from quotaledger.journal.limits import GENESIS_PREV
from quotaledger.journal.pgstore import PgStore
from quotaledger.journal.store import Tail
from tests.pg.pg_helpers import connect, fresh_schema
from tests.store.test_store_contract import ends, more_notes, new_chain
from tests.toyprojector import TOY, Note

LOCK_WAIT_S = 30


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


class CountingCursor:
    """The store's hot-path cursor, counting the statements sent through it."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.statements = 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.statements += 1
        return self.cursor.execute(*args, **kwargs)


def locked_tail(store: PgStore, cursor: CountingCursor, offset: int, seq: int, hash_hex: str):
    """tail_after inside a transaction, and how many statements it sent itself."""
    store.lock(5)
    try:
        before = cursor.statements
        tail = store.tail_after(offset, seq, hash_hex)
        return tail, cursor.statements - before
    finally:
        store.unlock()


def test_the_tail_read_with_the_lock_answers_what_the_query_answers(pg_journal: str) -> None:
    """Every (seq, hash) a journal may ask about, with 0, 1 or 2 rows appended by
    another handle since: the answer from the lock's read equals a reader's query."""
    first = new_chain(3)
    with _opened(pg_journal) as writer:
        cursor = CountingCursor(writer._cur)
        writer._cur = cursor
        end = _append(writer, first, 0)
        chain, offsets = list(first), ends(first)
        with _opened(pg_journal) as other, _opened(pg_journal, write=False) as reader:
            for grown in range(3):
                if grown:
                    more = more_notes(chain[-1], 1)
                    end = _append(other, more, end)
                    chain += more
                    offsets = ends(chain)
                asks = [(0, -1, GENESIS_PREV)] + [
                    (offsets[p.record.seq], p.record.seq, hash_hex)
                    for p in chain
                    for hash_hex in (p.record.hash, "f" * 64)
                ]
                asks.append((end + 100, chain[-1].record.seq + 1, "f" * 64))
                for offset, seq, hash_hex in asks:
                    expected: Tail = reader.tail_after(offset, seq, hash_hex)
                    writer.tail_after(offset, seq, hash_hex)  # what the next lock reads after
                    tail, sent = locked_tail(writer, cursor, offset, seq, hash_hex)
                    assert (tail, sent) == (expected, 0), (seq, hash_hex)
                    # Asked about another record than the one read with the lock: a query.
                    other_seq = seq + 1
                    writer.tail_after(offset, other_seq, hash_hex)
                    tail, sent = locked_tail(writer, cursor, offset, seq, hash_hex)
                    assert (tail, sent) == (expected, 1), (seq, hash_hex)


@pytest.mark.parametrize(
    "options",
    [
        "",
        "&options=-c%20default_transaction_isolation%3Drepeatable%5C%20read",
        "&options=-c%20default_transaction_isolation%3Dserializable",
    ],
    ids=["server-default", "repeatable-read", "serializable"],
)
def test_a_writer_that_waited_for_the_lock_chains_after_the_holder(
    pg_journal: str, options: str
) -> None:
    """Writer B asks for the lock while A holds it (forced: A appends only once
    pg_locks shows B waiting); B's read of the tail comes after the lock was granted,
    so it folds A's record and chains after it, whatever isolation the server
    defaults to (under REPEATABLE READ a snapshot taken at the lock statement's start
    would predate A's commit)."""
    url = pg_journal + options
    with Journal.open(url, TOY) as a:
        _note(a, 1)
        with Journal.open(url, TOY) as b:
            _race(a, b, pg_journal)
        records = [record for record, _payload, _line in a.records()]
    assert [r.seq for r in records] == [0, 1, 2, 3]
    assert records[3].prev == records[2].hash  # B chained after A's record


def _race(a: Journal, b: Journal, url: str) -> None:
    """A holds the lock; B asks for it; A appends once B waits; B then appends."""
    assert b.refresh().total == 1  # B has folded the journal: it expects seq 1 last
    b_pid = b.store._conn.info.backend_pid  # type: ignore[attr-defined]
    outcome: dict[str, Any] = {}

    def writer_b() -> None:
        try:
            _note(b, 10)
            outcome["total"] = b.state.total
        except BaseException as exc:  # reported by the main thread
            outcome["error"] = exc

    with a.transaction() as txn:
        thread = threading.Thread(target=writer_b)
        thread.start()
        _wait_until_waiting_for_the_lock(url, b_pid)
        txn.append("toy.note", "g", Note(n=100), txn.time_for("g"))
    thread.join(LOCK_WAIT_S)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["total"] == 111  # B folded A's record before appending its own


def test_the_tail_read_is_an_index_scan_in_the_generic_plan(pg_journal: str) -> None:
    """The prepared tail read must not scan the table: its cost would grow with the
    journal (an EXISTS over `seq >= $1` is planned as a sequential scan)."""
    with _opened(pg_journal) as store:
        _append(store, new_chain(300), 0)
        query = store._tail_query.replace("%s", "$1")
    with connect(pg_journal, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE tail(bigint) AS {query}")
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN EXECUTE tail(299)"))
    assert "Index Scan" in plan and "Seq Scan" not in plan, plan


# -- helpers -------------------------------------------------------------------------


class _opened:
    def __init__(self, url: str, *, write: bool = True) -> None:
        self.store = PgStore(url, create=write)

    def __enter__(self) -> PgStore:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def _append(store: PgStore, records: list[Any], offset: int) -> int:
    store.lock(5)
    try:
        store.append(records, offset)
    finally:
        store.unlock()
    return offset + sum(len(r.line) for r in records)


def _note(journal: Journal, n: int) -> bytes:
    with journal.transaction() as txn:
        txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))
    return txn.committed[-1].line


def _wait_until_waiting_for_the_lock(url: str, pid: int) -> None:
    """Block until backend `pid` waits for an advisory lock (a condition, not a sleep)."""
    with connect(url, autocommit=True) as conn:
        for _ in range(LOCK_WAIT_S * 100):
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE pid = %s AND locktype = 'advisory'"
                " AND NOT granted",
                (pid,),
            ).fetchone()
            if row is not None and row[0]:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError(f"backend {pid} never waited for the journal's lock")
