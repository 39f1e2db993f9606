"""`bench --compare postgresql URL`: durable appends on a PostgreSQL server against a raw
psycopg loop doing the same work per event on the same server.

The raw loop is what a careful user would write for a hash-chained table: per event,
BEGIN, `pg_advisory_xact_lock`, read the last row's hash, SHA-256 over it and the
payload, INSERT, COMMIT (synchronous commit). Both run in scratch schemas that are
dropped afterwards, taking turns in blocks, so they share the server's moments.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from quotaledger.tools.bench import Appender, measure_durable, observe_appender, payloads

RAW_LOCK_KEY = 0x5155_4F54  # any key: the raw loop's own advisory lock


def schema_url(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@contextmanager
def scratch_schemas(url: str, *names: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        try:
            yield admin
        finally:
            for name in names:
                admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@contextmanager
def raw_pg_appender(url: str, schema: str, data: list[bytes]) -> Iterator[Appender]:
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(
            f'CREATE TABLE "{schema}".events (seq bigint PRIMARY KEY, hash char(64) NOT NULL, '
            "prev char(64) NOT NULL, line text NOT NULL)"
        )
        conn.commit()
        insert = f'INSERT INTO "{schema}".events (seq, hash, prev, line) VALUES (%s, %s, %s, %s)'
        last = f'SELECT seq, hash FROM "{schema}".events ORDER BY seq DESC LIMIT 1'

        def append(i: int) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (RAW_LOCK_KEY,))
            row = conn.execute(last).fetchone()
            seq, prev = (row[0] + 1, row[1]) if row else (0, "0" * 64)
            digest = hashlib.sha256(prev.encode() + data[i]).hexdigest()
            conn.execute(insert, (seq, digest, prev, data[i].decode()))
            conn.commit()

        yield append


def measure_postgresql(url: str, events: int) -> tuple[float, float]:
    """Events/s of `observe` through the API (full window) and of the raw loop."""
    ours, raw = f"quotaledger_bench_{os.getpid()}", f"quotaledger_bench_raw_{os.getpid()}"
    data = list(payloads(events))
    with scratch_schemas(url, ours, raw), ExitStack() as stack:
        appenders = [
            (stack.enter_context(raw_pg_appender(url, raw, data)), events),
            (stack.enter_context(observe_appender(schema_url(url, ours))), events),
        ]
        raw_rate, ours_rate = measure_durable(appenders)
    return ours_rate.eps, raw_rate.eps
