"""Helpers for the PostgreSQL-specific tests (the contract suite lives in tests/store/)."""

from __future__ import annotations

from typing import Any

from quotaledger.journal.pgstore import split_url
from tests.store.store_helpers import drop_schema, fresh_schema, with_schema


def connect(journal_url: str, **options: Any) -> Any:
    """A plain psycopg connection to the journal's database (what an operator would use)."""
    import psycopg

    conninfo, _schema = split_url(journal_url)
    return psycopg.connect(conninfo, connect_timeout=5, **options)


def events_table(journal_url: str) -> str:
    return f'"{split_url(journal_url)[1]}".quotaledger_events'


__all__ = ["connect", "drop_schema", "events_table", "fresh_schema", "with_schema"]
