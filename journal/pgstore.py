"""The PostgreSQL store: the same records, bytes and hashes, shared across machines.

    --journal postgresql://user@db.example:5432/bench?schema=campaign_7

Layout (in the URL's schema; `?schema=`, else `options=-csearch_path=...`, else
`public`):

    quotaledger_events(seq bigint primary key, hash char(64) unique not null,
                     prev char(64) not null, kind text, goal text, at timestamptz,
                     line text not null)
    quotaledger_checkpoints(id = 1, seq, hash, projection_version, blob bytea, written_at)

The checkpoint row is a cache, written only under the journal's advisory lock and
trusted by writers only while its record matches; `verify` folds from genesis and
compares, and checks every row's columns against its line.

`line` holds the exact bytes of the JSON line (without its newline); the other
columns are an index for humans and SQL. Verification always reads `line`, so a
journal exported from here is byte-identical to the file it was imported from.

A writing command runs in one transaction: `pg_advisory_xact_lock(<journal key>)`
with a bounded wait (`lock_timeout`), read the records after the cached seq, fold,
decide, INSERT (COPY for large batches), COMMIT with `synchronous_commit = on`.
Nothing is acknowledged before COMMIT returns. A command of one event is three round
trips: BEGIN, the lock and the read of the tail (the cached head row and whether one
follows) as one simple query; the INSERT; the COMMIT. A trigger refuses UPDATE, DELETE and
TRUNCATE on the events table, so history cannot be edited through SQL without a
superuser disabling it first — and `verify` detects the edit then. An insert trigger
keeps the chain's shape and records `inserted_by` (journal/pgschema.py).

There are no torn tails here: every row was committed whole. A row that does not
verify is corruption; `repair` moves it and the rows after it to the quarantine
table, in the transaction that appends its record.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from quotaledger.journal import codes
from quotaledger.journal.checkpoint import Checkpoint, warn
from quotaledger.journal.errors import (
    InvalidInput,
    JournalCorrupt,
    JournalPoisoned,
    LockTimeout,
    StorageFailure,
)
from quotaledger.journal.limits import LOCK_TIMEOUT_S_DEFAULT
from quotaledger.journal.pgschema import (
    CHECK_QUERY,
    CHECKPOINTS_TABLE,
    EVENTS_TABLE,
    QUARANTINE_TABLE,
    check_parameters,
    schema_statements,
)
from quotaledger.journal.pgurl import first_line, lock_key, redact, split_url
from quotaledger.journal.sections import Damaged, Header, Section, SectionFile, layout
from quotaledger.journal.store import Inserter, PendingRecord, Tail

CONNECT_TIMEOUT_S = 5
PAGE_BYTES = 4 << 20
"""Bytes of lines fetched per query while folding (plus at most one line)."""
PAGE_ROWS_MIN = 64
PAGE_ROWS_MAX = 65_536
COPY_MIN_RECORDS = 8
"""Batches at least this large go through COPY; smaller ones through INSERT."""
COPY_BUFFER_BYTES = 8 << 20
ANALYZE_AFTER_RECORDS = 10_000
_CANNOT_WRITE_SQLSTATES = frozenset({"42501", "25006"})
"""insufficient_privilege (a role without INSERT) and read_only_sql_transaction (a
role or database with default_transaction_read_only): the journal cannot be written."""


def _copy_text(value: bytes) -> bytes:
    """A field in COPY's text format: backslash and line/field breaks escaped."""
    if b"\\" in value:
        value = value.replace(b"\\", b"\\\\")
    if b"\n" in value or b"\r" in value or b"\t" in value:
        value = value.replace(b"\n", b"\\n").replace(b"\r", b"\\r").replace(b"\t", b"\\t")
    return value


class PgStore:
    """One journal in one PostgreSQL schema. One per process or thread (one connection).

    The core `Store` and its `Checkpoints` (a row beside the events); not a `LocalFile`:
    every row was committed whole (a row that does not verify is corruption, never a
    torn tail), the append-only trigger refuses to cut rows, and a table is never
    unlinked from under a writer."""

    def __init__(self, url: str, *, create: bool) -> None:
        self.url = url
        self.target = redact(url)
        self.writable = create
        self.poisoned = False
        self.created = False
        self._locked = False
        self._commit_on_unlock = False
        self._conninfo, self.schema = split_url(url)
        self._events = sql.Identifier(self.schema, EVENTS_TABLE)
        self._checkpoints = sql.Identifier(self.schema, CHECKPOINTS_TABLE)
        self._quarantine = sql.Identifier(self.schema, QUARANTINE_TABLE)
        self._key = lock_key(self.schema)
        events = self._events.as_string()
        self._tail_sql = (
            f"SELECT seq, convert_to(line, 'UTF8') FROM {events} WHERE seq >= ",
            " ORDER BY seq LIMIT 2",
        )
        """The last record a handle folded and the one after it, if any: what tail_after
        answers from (the line as bytes, as line_ending_at reads it). ORDER BY + LIMIT
        keeps it an index scan in the generic plan of the prepared statement (EXISTS
        (... WHERE seq >= $1) is planned as a sequential scan: O(journal) per command)."""
        events = events.replace("%", "%%")  # in queries with parameters, % is a placeholder
        self._tail_query = self._tail_sql[0].replace("%", "%%") + "%s" + self._tail_sql[1]
        self._insert_query = (
            f"INSERT INTO {events} (seq, hash, prev, kind, goal, at, line)"
            " VALUES (%s, %s, %s, %s, %s, %s::timestamptz, %s)"
        )
        self._tail_seq = -1
        """The last record this handle knows the journal's head to be: what lock() reads
        the tail after, in the same round trip as the lock (a guess: tail_after asks
        again when the journal asks about another seq)."""
        self._prefetched: tuple[int, list[tuple[int, bytes]]] | None = None
        """(seq, rows of _tail_query) read under the lock the current transaction holds."""
        self._page_rows = 256
        self._locked_now_us = 0
        """clock_timestamp() of the server, in µs, read right after taking the lock."""
        self._lock_timeout_s = LOCK_TIMEOUT_S_DEFAULT
        self._ready = True
        """Whether the tables exist (a writer creates them on its first lock)."""
        self._conn = self._connect()
        self._cur = self._conn.cursor()
        """The hot path's statements (lock, tail, INSERT, COMMIT) reuse one cursor: a
        new one per statement costs as much client CPU as the statement's own work."""
        try:
            self._open(create)
        except BaseException:
            self._conn.close()
            raise

    # -- connecting and first use ------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        # Defaults only: what the URL says (connect_timeout, application_name...) wins.
        defaults: dict[str, Any] = {
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": "quotaledger",
        }
        try:
            given = conninfo_to_dict(self._conninfo)
        except psycopg.Error as exc:
            raise InvalidInput(
                f"{self.target} is not a PostgreSQL URL: {first_line(exc)}",
                code=codes.INVALID_JOURNAL_URL,
            ) from None
        try:
            return psycopg.connect(
                self._conninfo,
                autocommit=True,  # transactions are explicit: BEGIN in lock(), COMMIT in append()
                client_encoding="UTF8",  # lines are stored and read back as UTF-8 bytes
                **{k: v for k, v in defaults.items() if k not in given},
            )
        except psycopg.Error as exc:
            raise StorageFailure(
                f"cannot connect to PostgreSQL at {self.target}: {first_line(exc)}",
                code=codes.PG_UNREACHABLE,
            ) from None

    def _open(self, create: bool) -> None:
        with self._db("open"):
            row = self._conn.execute(CHECK_QUERY, check_parameters(self.schema)).fetchone()
        assert row is not None
        encoding, table, current = row
        if encoding not in ("UTF8", "SQL_ASCII"):
            raise StorageFailure(
                f"database of {self.target} uses encoding {encoding}; quotaledger stores UTF-8 "
                "lines byte for byte and needs a UTF8 database",
                code=codes.PG_ENCODING,
            )
        if table is None:
            if not create:
                raise JournalCorrupt(
                    f"no journal in schema {self.schema!r} of {self.target} "
                    "(a writing command creates it)",
                    code=codes.JOURNAL_NOT_FOUND,
                    path=self.target,
                )
            # Created by the first lock(): a command refused before it writes leaves
            # nothing behind (as with the file store).
            self._ready = False
        elif not current:
            if create:
                # An older version's table, or someone dropped or disabled a guard: put
                # this version's in place (idempotent).
                self._create_schema()
            else:
                warn(
                    f"the triggers of {self.schema}.{EVENTS_TABLE} are missing, disabled or of "
                    "an older version: rows can be edited or inserted off the chain; run "
                    "`quotaledger verify` (the next writing command upgrades them)"
                )

    def _create_schema(self) -> None:
        """Schema, tables and triggers, idempotently; concurrent first users serialise."""
        with self._db("create or upgrade the journal tables", writes=True):
            self._conn.execute("BEGIN")
            try:
                # IF NOT EXISTS alone races (two creators can both pass the check and one
                # fails on the catalog's unique index): serialise on a DDL lock.
                self._conn.execute(
                    "SELECT pg_advisory_xact_lock(%s)", (lock_key(self.schema, "ddl"),)
                )
                for statement in schema_statements(self.schema):
                    self._conn.execute(statement)
                self._commit()
            finally:
                self._rollback_quietly()

    # -- locking -----------------------------------------------------------------

    def lock(self, timeout_s: float, meanwhile: Callable[[], None] | None = None) -> None:
        """BEGIN and take the journal's advisory transaction lock, waiting <= timeout_s;
        then read the tail after the record this handle expects to be last, for
        tail_after. One round trip (the server waits: `meanwhile` is not run)."""
        self._begin_locked(timeout_s, prefetch=True)

    def _begin_locked(self, timeout_s: float, *, prefetch: bool) -> None:
        try:
            self._try_begin_locked(timeout_s, prefetch=prefetch)
        except StorageFailure as exc:
            # A connection that died idle (a restart, a failover, idle_session_timeout, a
            # pooler) held nothing unanswered: a new one loses nothing. Once only.
            dead = self._conn.closed or self._conn.broken
            if not (dead and isinstance(exc.__cause__, psycopg.OperationalError)):
                raise
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = self._connect()
            self._cur = self._conn.cursor()
            self.poisoned = False
            self._try_begin_locked(timeout_s, prefetch=prefetch)

    def _try_begin_locked(self, timeout_s: float, *, prefetch: bool) -> None:
        self._check_usable()
        self._lock_timeout_s = timeout_s  # for the checkpoint refresh after the commit
        self._prefetched = None
        if not self._ready:
            self._create_schema()
            self._ready = self.created = True
        timeout_ms = max(1, math.ceil(timeout_s * 1000))
        take = "pg_try_advisory_xact_lock" if timeout_s <= 0 else "pg_advisory_xact_lock"
        # READ COMMITTED whatever the server's default: every statement then reads a
        # snapshot taken when it starts, so the reads after the lock statement see
        # every row committed by the writer that held the lock before us (under
        # REPEATABLE READ the snapshot would date from the lock statement's start,
        # before the wait). SET LOCAL: both settings end with this transaction.
        statements = [
            "BEGIN ISOLATION LEVEL READ COMMITTED",
            f"SET LOCAL lock_timeout = {timeout_ms}",
            "SET LOCAL synchronous_commit = on",
            f"SELECT {take}({self._key})",
            # The server's clock, read once the lock is held (SPEC §2.2): every machine
            # stamps implicit times with this one clock, whatever its own says.
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
        ]
        tail_seq = self._tail_seq
        if prefetch:
            # Only integers are interpolated: the simple protocol takes no parameters.
            statements.append(f"{self._tail_sql[0]}{int(tail_seq)}{self._tail_sql[1]}")
        try:
            with self._db("lock"):
                cur = self._cur.execute("; ".join(statements), prepare=False)
                cur.set_result(3)
                row = cur.fetchone()
                if timeout_s <= 0 and (row is None or row[0] is not True):
                    raise psycopg.errors.LockNotAvailable("lock not available")
                cur.set_result(4)
                clock = cur.fetchone()
                assert clock is not None
                self._locked_now_us = int(clock[0])
                if prefetch:
                    cur.set_result(5)
                    self._prefetched = (tail_seq, cur.fetchall())
        except StorageFailure as exc:
            self._rollback_quietly()
            if isinstance(exc.__cause__, psycopg.errors.LockNotAvailable):
                raise self._lock_timeout(timeout_s) from None
            raise
        self._locked = True
        self._commit_on_unlock = False

    def locked_now_us(self) -> int | None:
        """The server's clock when the lock held now was taken (None without one)."""
        return self._locked_now_us if self._locked else None

    def _lock_timeout(self, timeout_s: float) -> LockTimeout:
        """What a timed-out waiter is told: which session holds the journal's advisory
        lock (from pg_locks, best effort), and what to do."""
        holder = self._lock_holder()
        who, pid = "another session", None
        if holder is not None:
            pid, application, client = holder
            who = f"backend pid {pid}"
            details = [part for part in (application, client) if part]
            if details:
                who += f" ({', '.join(details)})"
        hangs = ""
        if pid is not None:
            hangs = f", or end that session (SELECT pg_terminate_backend({pid})) if it hangs"
        return LockTimeout(
            lambda name: (
                f"journal {self.target} stayed locked by {who} for {timeout_s:g} s: retry "
                f"once it finishes, give it longer with {name}{hangs}"
            ),
            about="lock_timeout_s",
            lock_timeout_s=timeout_s,
            holder_pid=pid,
        )

    def _lock_holder(self) -> tuple[int, str | None, str | None] | None:
        # A bigint advisory key shows in pg_locks as classid (high 32 bits), objid (low
        # 32 bits) and objsubid 1.
        key = self._key & 0xFFFFFFFFFFFFFFFF
        try:
            row = self._conn.execute(
                "SELECT l.pid, a.application_name, a.client_addr::text FROM pg_locks l "
                "LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                "AND l.classid = %s AND l.objid = %s "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (key >> 32, key & 0xFFFFFFFF),
            ).fetchone()
            self._rollback_quietly()
        except psycopg.Error:
            self._rollback_quietly()
            return None
        if row is None:
            return None
        return int(row[0]), row[1] or None, row[2] or None

    def unlock(self) -> None:
        """End the transaction (releasing the lock): roll back anything not committed."""
        self._locked = False
        self._prefetched = None
        if self._conn.closed or not self._in_transaction():
            return
        if self._commit_on_unlock:
            self._commit_on_unlock = False
            try:
                with self._db("commit the checkpoint", writes=True):
                    self._commit()
            except StorageFailure as exc:
                warn(f"could not store the checkpoint: {exc.message}")
            return
        self._rollback_quietly()

    # -- reading -----------------------------------------------------------------

    def chunks(self, offset: int, next_seq: int) -> Iterator[bytes]:
        """Lines of records with seq >= next_seq, in seq order, each ending in a newline.

        Pages are seq ranges read through the primary key (a range keeps the plan an
        index scan even before the table has statistics) and cut at PAGE_BYTES (plus
        one line): a long journal is never loaded at once, and no cursor outlives a
        query. An empty range is not the end: rows may follow a gap (a row deleted
        behind the trigger), and the verifier must see them to report it.
        """
        page = sql.SQL(
            "SELECT convert_to(string_agg(line, E'\\n' ORDER BY seq) || E'\\n', 'UTF8'),"
            " max(seq), count(*)"
            " FROM (SELECT seq, line, sum(octet_length(line) + 1)"
            "        OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS upto"
            "       FROM {} WHERE seq >= %s AND seq < %s ORDER BY seq) page"
            " WHERE upto - octet_length(line) - 1 < %s"
        ).format(self._events)
        following = sql.SQL("SELECT min(seq) FROM {} WHERE seq >= %s").format(self._events)
        seq = next_seq
        while self._ready:
            with self._db("read"):
                cur = self._conn.cursor(binary=True)
                row = cur.execute(page, (seq, seq + self._page_rows, PAGE_BYTES)).fetchone()
                if row is None or row[1] is None:
                    after = cur.execute(following, (seq,)).fetchone()
                    if after is None or after[0] is None:
                        return
                    seq = after[0]
                    continue
            data, last_seq, count = bytes(row[0]), row[1], row[2]
            # About one page of rows next time: bounded server work per query.
            per_row = max(1, len(data) // max(1, count))
            self._page_rows = min(PAGE_ROWS_MAX, max(PAGE_ROWS_MIN, PAGE_BYTES // per_row))
            seq = last_seq + 1
            self._tail_seq = last_seq  # where the journal's head will be once it folded it
            yield data

    def size_hint(self, offset: int, next_seq: int) -> int | None:
        return None  # summing octet_length over the table is not cheap

    def tail_after(self, offset: int, seq: int, hash_hex: str) -> Tail:
        """One read: the row at `seq` and the one after it. Under the lock, what lock()
        read right after taking it, if it read after this `seq` (nothing can have
        changed since: every writer appends under the same lock)."""
        self._tail_seq = seq
        prefetched, self._prefetched = self._prefetched, None
        if prefetched is not None and prefetched[0] == seq and self._locked:
            rows = prefetched[1]
        elif self._ready:
            with self._db("read"):
                rows = self._cur.execute(self._tail_query, (seq,)).fetchall()
        else:
            rows = []
        return _tail(rows, seq, hash_hex)

    def line_ending_at(self, offset: int, seq: int) -> bytes | None:
        """The line stored at `seq` (without newline); the journal checks seq and hash."""
        if seq < 0 or not self._ready:
            return None
        with self._db("read"):
            row = (
                self._conn.cursor(binary=True)
                .execute(
                    sql.SQL("SELECT convert_to(line, 'UTF8') FROM {} WHERE seq = %s").format(
                        self._events
                    ),
                    (seq,),
                )
                .fetchone()
            )
        return bytes(row[0]) if row is not None else None

    # -- writing -----------------------------------------------------------------

    def append(self, records: Sequence[PendingRecord], offset: int) -> None:
        """INSERT (or COPY) every record and COMMIT; on any failure none is stored.

        COMMIT ends the transaction and so releases the advisory lock: one append per
        lock (the journal stages a new journal's genesis record with the first event).
        """
        self._check_usable()
        if not self._locked:
            raise StorageFailure("append outside a locked transaction", code=codes.NOT_LOCKED)
        if not records:
            return
        try:
            with self._db("append", writes=True):
                if len(records) < COPY_MIN_RECORDS:
                    self._insert(records)
                else:
                    self._copy(records)
                self._commit()
        except BaseException:
            self._rollback_quietly()
            raise
        finally:
            self._locked = self._commit_on_unlock = False
            self._prefetched = None
        self._tail_seq = records[-1].record.seq
        if len(records) >= ANALYZE_AFTER_RECORDS:
            self._analyze()

    def _analyze(self) -> None:
        """Fresh planner statistics after a bulk load (an import), before autovacuum's."""
        try:
            self._conn.execute(sql.SQL("ANALYZE {}").format(self._events))
        except psycopg.Error as exc:  # only an optimisation; the records are committed
            warn(f"ANALYZE of {self.schema}.{EVENTS_TABLE} failed: {first_line(exc)}")

    def _insert(self, records: Sequence[PendingRecord]) -> None:
        rows = [
            (r.record.seq, r.record.hash, r.record.prev, r.record.kind, r.record.goal,
             r.record.at, _line_text(r.line))
            for r in records
        ]  # fmt: skip
        if len(rows) == 1:  # a command's one event: executemany's pipeline costs more
            self._cur.execute(self._insert_query, rows[0])
            return
        with self._conn.cursor() as cur:
            cur.executemany(self._insert_query, rows)

    def _copy(self, records: Sequence[PendingRecord]) -> None:
        """COPY in text format, built as bytes: an import of 10^6 records in seconds."""
        statement = sql.SQL("COPY {} (seq, hash, prev, kind, goal, at, line) FROM STDIN").format(
            self._events
        )
        with self._conn.cursor() as cur, cur.copy(statement) as copy:
            buffer: list[bytes] = []
            size = 0
            for item in records:
                record = item.record
                line = item.line[:-1] if item.line.endswith(b"\n") else item.line
                _line_text(line)  # refuse what the text column cannot hold, clearly
                goal = b"\\N" if record.goal is None else _copy_text(record.goal.encode())
                row = b"\t".join(
                    (
                        str(record.seq).encode(),
                        record.hash.encode(),
                        record.prev.encode(),
                        _copy_text(record.kind.encode()),
                        goal,
                        record.at.encode(),
                        _copy_text(line),
                    )
                )
                buffer.append(row + b"\n")
                size += len(row) + 1
                if size >= COPY_BUFFER_BYTES:
                    copy.write(b"".join(buffer))
                    buffer.clear()
                    size = 0
            if buffer:
                copy.write(b"".join(buffer))

    def _commit(self) -> None:
        cur = self._cur.execute("COMMIT")
        # COMMIT of a transaction that failed earlier reports ROLLBACK, not an error.
        if cur.statusmessage != "COMMIT":
            raise psycopg.OperationalError(f"COMMIT answered {cur.statusmessage}")

    def load(self, records: Sequence[PendingRecord]) -> None:
        """One transaction: every row is committed, or none."""
        self.append(records, 0)

    # -- who inserted what -----------------------------------------------------------

    def inserted_by(self, first_seq: int, last_seq: int) -> dict[int, str | None]:
        """The role the insert trigger recorded for each row in the range."""
        query = sql.SQL("SELECT seq, inserted_by FROM {} WHERE seq BETWEEN %s AND %s")
        rows = self._attribution(query.format(self._events), (first_seq, last_seq))
        return {int(seq): role for seq, role in rows}

    def inserters(self) -> list[Inserter]:
        """Every inserting role (None: rows from before the column), with its rows."""
        query = sql.SQL(
            "SELECT inserted_by, count(*), min(seq), max(seq) FROM {}"
            " GROUP BY inserted_by ORDER BY min(seq)"
        )
        rows = self._attribution(query.format(self._events), ())
        return [Inserter(role, int(n), int(first), int(last)) for role, n, first, last in rows]

    def _attribution(self, query: sql.Composed, params: tuple[int, ...]) -> list[Any]:
        if not self._ready:
            return []
        try:
            with self._db("read who inserted the records"):
                return self._conn.execute(query, params).fetchall()
        except StorageFailure as exc:
            # A table of the previous version a reader opened (no writer upgraded it
            # yet): nobody recorded who inserted its rows.
            if isinstance(exc.__cause__, psycopg.errors.UndefinedColumn):
                return []
            raise

    # -- repair ----------------------------------------------------------------------

    def quarantine_after(self, next_seq: int) -> str:
        """Copy the rows from `next_seq` on to the quarantine table and delete them, in
        the locked transaction: the delete trigger admits a row only once this very
        transaction has copied it, and the repair's record commits both (SPEC §2.6)."""
        self._check_usable()
        if not self._locked:
            raise StorageFailure("quarantine outside a locked transaction", code=codes.NOT_LOCKED)
        columns = sql.SQL("seq, hash, prev, kind, goal, at, line, inserted_by")
        with self._db("quarantine", writes=True):
            self._conn.execute(
                sql.SQL(
                    "INSERT INTO {q} ({c}) SELECT {c} FROM {e} WHERE seq >= %s ORDER BY seq"
                ).format(q=self._quarantine, c=columns, e=self._events),
                (next_seq,),
            )
            self._conn.execute(
                sql.SQL("DELETE FROM {} WHERE seq >= %s").format(self._events), (next_seq,)
            )
        self._prefetched = None
        return f"{self.schema}.{QUARANTINE_TABLE}"

    # -- verification ----------------------------------------------------------------

    def verify_columns(self) -> None:
        """Refuse (`column_mismatch`, exit 3) a row whose seq, hash, prev, kind, goal or
        at column says something its line does not (SPEC §2.6): SQL readers query the
        columns, `verify` reads the lines. One query; the server compares."""
        if not self._ready:
            return
        checks = {
            "seq": "seq IS DISTINCT FROM (j->>'seq')::bigint",
            "hash": "hash::text IS DISTINCT FROM j->>'hash'",
            "prev": "prev::text IS DISTINCT FROM j->>'prev'",
            "kind": "kind IS DISTINCT FROM j->>'kind'",
            "goal": "goal IS DISTINCT FROM j->>'goal'",
            "at": "at IS DISTINCT FROM (j->>'at')::timestamptz",
        }
        # OFFSET 0 keeps the subquery whole: each line is parsed once, not per column.
        query = sql.SQL(
            "SELECT seq, (j->>'seq')::bigint, " + ", ".join(checks.values()) + " FROM"
            " (SELECT seq, hash, prev, kind, goal, at, line::jsonb AS j FROM {} OFFSET 0) r"
            " WHERE " + " OR ".join(checks.values()) + " ORDER BY seq LIMIT 1"
        ).format(self._events)
        try:
            with self._db("verify the columns"):
                row = self._conn.execute(query).fetchone()
        except StorageFailure as exc:
            if not isinstance(exc.__cause__, psycopg.errors.DataException):
                raise
            # A line that is not JSON, added after the chain was read: corruption.
            raise JournalCorrupt(
                f"a row of {self.schema}.{EVENTS_TABLE} holds a line that does not parse: "
                f"{first_line(exc.__cause__)}",
                reason="line does not parse",
            ) from None
        if row is None:
            return
        row_seq, line_seq = row[0], row[1]
        columns = [name for name, differs in zip(checks, row[2:], strict=True) if differs]
        where = f"seq {line_seq}" + ("" if row_seq == line_seq else f" (seq column {row_seq})")
        raise JournalCorrupt(
            f"record {where} in {self.schema}.{EVENTS_TABLE}: column {', '.join(columns)} "
            "disagrees with its line (edited behind the append-only trigger?); SQL readers "
            "of the columns would see what the journal does not say",
            code=codes.COLUMN_MISMATCH,
            seq=line_seq,
            columns=columns,
        )

    def make_durable(self) -> None:
        """Nothing to do: a reader sees only committed rows, and a commit is durable
        (synchronous_commit) before it becomes visible."""

    # -- checkpoints ---------------------------------------------------------------

    def load_checkpoint(self) -> Checkpoint | None:
        """The shared checkpoint row, or None; the journal validates it before use."""
        if not self._ready:
            return None
        try:
            with self._db("read the checkpoint"):
                row = (
                    self._conn.cursor(binary=True)
                    .execute(sql.SQL("SELECT blob FROM {} WHERE id = 1").format(self._checkpoints))
                    .fetchone()
                )
        except StorageFailure as exc:
            if isinstance(exc.__cause__, psycopg.errors.UndefinedTable):
                return None
            raise
        if row is None:
            return None
        try:
            return Checkpoint(SectionFile(bytes(row[0])))
        except Damaged as exc:
            warn(f"ignoring the checkpoint in {self.schema}.{CHECKPOINTS_TABLE}: {exc}")
            return None

    def peek_checkpoint(self) -> tuple[int, str] | None:  # the row's columns, not its blob
        query = sql.SQL("SELECT seq, projection_version FROM {} WHERE id = 1")
        try:
            with self._db("read the checkpoint's seq"):
                row = self._conn.execute(query.format(self._checkpoints)).fetchone()
        except StorageFailure:  # no table yet, or unreadable: the refresh writes one
            row = None
        return None if row is None else (int(row[0]), str(row[1]))

    keeps_deltas = False
    """One row holds the checkpoint (SPEC §2.6): each refresh writes a base, copying
    the unchanged goals' sections as stored (no decoding), the changed ones encoded."""

    def save_checkpoint(
        self, header: Header, sections: Iterable[Section], *, delta: bool
    ) -> SectionFile:
        """Upsert the one checkpoint row (the last writer wins).

        Replacing a newer checkpoint with a slightly older one only costs a few more
        records of folding, and an invalid row can never block valid ones. Inside a
        locked transaction it commits when the lock is released; outside, on its own.
        """
        if not self.writable:
            raise StorageFailure(f"{self.target} was opened read-only", code=codes.READ_ONLY)
        statement = sql.SQL(
            "INSERT INTO {t} (id, seq, hash, projection_version, blob)"
            " VALUES (1, %s, %s, %s, %s)"
            " ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,"
            "  projection_version = excluded.projection_version, blob = excluded.blob,"
            "  written_at = now()"
        ).format(t=self._checkpoints)
        if delta:
            raise ValueError("the PostgreSQL store keeps no delta")
        blob = b"".join(layout(header, sections))
        written = SectionFile(blob)
        params = (header.seq, header.hash, header.projection_version, blob)
        # A failure is a StorageFailure like any other (the journal's automatic refresh
        # warns and goes on: a checkpoint is only a cache).
        if self._in_transaction():  # inside a command's locked transaction: commit on unlock
            with self._db("store the checkpoint", writes=True):
                self._conn.execute(statement, params)
            self._commit_on_unlock = True
            return written
        # A writer's refresh after its commit released the lock: take it again, so the
        # row is written only under the journal's advisory lock (SPEC §2.5).
        self._begin_locked(self._lock_timeout_s, prefetch=False)
        try:
            with self._db("store the checkpoint", writes=True):
                self._conn.execute(statement, params)
                self._commit()
        finally:
            self._locked = False
            self._rollback_quietly()
        return written

    # -- plumbing ------------------------------------------------------------------

    @contextmanager
    def _db(self, what: str, *, writes: bool = False) -> Iterator[None]:
        """Translate database errors into the engine's: StorageFailure (exit 4).
        `writes`: the step writes, so a role that may not is `journal_read_only`."""
        try:
            yield
        except psycopg.Error as exc:
            if self._conn.closed or self._conn.broken:
                self.poisoned = True
            sqlstate = getattr(exc, "sqlstate", None)
            if writes and sqlstate in _CANNOT_WRITE_SQLSTATES:
                # A journal that can be read but not written: one code with the file
                # store's read-only filesystem (SPEC §8); readers and replays still answer.
                raise StorageFailure(
                    f"cannot write {self.target}: {first_line(exc)}; nothing was changed",
                    code=codes.JOURNAL_READ_ONLY,
                    sqlstate=sqlstate,
                ) from exc
            raise StorageFailure(
                f"PostgreSQL {what} failed on {self.target}: {first_line(exc)}"
                + ("; nothing was acknowledged" if what == "append" else ""),
                code=codes.PG_ERROR,
                sqlstate=getattr(exc, "sqlstate", None),
            ) from exc

    def _in_transaction(self) -> bool:
        return self._conn.pgconn.transaction_status != TransactionStatus.IDLE

    def _rollback_quietly(self) -> None:
        if self._conn.closed or not self._in_transaction():
            return
        try:
            self._conn.execute("ROLLBACK")
        except psycopg.Error:
            self.poisoned = self._conn.closed or self._conn.broken

    def _check_usable(self) -> None:
        if self.poisoned:
            raise JournalPoisoned(
                f"the connection to {self.target} broke during a command; open the journal again"
            )
        if not self.writable:
            raise StorageFailure(f"{self.target} was opened read-only", code=codes.READ_ONLY)

    def close(self) -> None:
        if self._conn.closed:
            return
        self.unlock()
        self._conn.close()


def _tail(rows: list[tuple[int, bytes]], seq: int, hash_hex: str) -> Tail:
    """What `rows` (from seq >= `seq`, at most two) say follows record `seq`."""
    if seq < 0:
        return "grew" if rows else "same"
    ending = f'"hash":"{hash_hex}"}}'.encode()
    if not rows or rows[0][0] != seq or not rows[0][1].endswith(ending):
        return "changed"  # the line is truth: a repair cut or replaced it
    return "grew" if len(rows) > 1 else "same"


def _line_text(line: bytes) -> str:
    if line.endswith(b"\n"):
        line = line[:-1]
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"a record is not valid UTF-8: {exc}", code=codes.INVALID_UTF8) from exc
    # Its text holds no NUL, its JSON (jsonb, read by the insert trigger) no \u0000 (an
    # import of an old file journal): refused clearly, not pg_error (exit 4, retried).
    if "\x00" in text or ("\\u0000" in text and _JSON_NUL.search(text)):
        raise InvalidInput("a record contains a NUL character", code=codes.INVALID_LINE)
    return text


_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # not after an escaped backslash
