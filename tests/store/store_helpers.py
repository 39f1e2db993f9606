"""Fresh journal targets for the store contract suite: a file or a PostgreSQL schema.

The PostgreSQL targets use the `pg_server` fixture (skips locally when no server is
reachable, fails under CI=true) and a schema of their own, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager


def with_schema(url: str, schema: str) -> str:
    """`url` with `schema=` added to its query string (which it may already have)."""
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def fresh_schema(server_url: str) -> Iterator[str]:
    """A journal URL in a schema no one has used yet; the schema is dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex}"
    try:
        yield with_schema(server_url, schema)
    finally:
        drop_schema(server_url, schema)
