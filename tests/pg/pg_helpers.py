"""Helpers for the PostgreSQL-specific tests (the contract suite lives in tests/store/)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))

from store_helpers import drop_schema, fresh_schema, with_schema

from quotaledger.journal.pgstore import split_url


def connect(journal_url: str, **options: Any) -> Any:
    """A plain psycopg connection to the journal's database (what an operator would use)."""
    import psycopg

    conninfo, _schema = split_url(journal_url)
    return psycopg.connect(conninfo, connect_timeout=5, **options)


def events_table(journal_url: str) -> str:
    return f'"{split_url(journal_url)[1]}".quotaledger_events'


__all__ = ["connect", "drop_schema", "events_table", "fresh_schema", "with_schema"]
