"""PostgreSQL journal URLs: the conninfo to connect with, the schema the journal uses,
the password hidden in messages, and the advisory lock key every machine derives.

    conninfo, schema = split_url("postgresql://runner@db/bench?schema=campaign_7")
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.pgschema import EVENTS_TABLE

DEFAULT_SCHEMA = "public"
_SCHEMA_OPTION = re.compile(r"(?:^|\s)(?:-c\s*|--)search_path\s*=\s*([^\s,]+)")


def split_url(url: str) -> tuple[str, str]:
    """The conninfo to connect with (without `schema=`) and the schema the journal uses.

    Only the `schema` parameter is removed; the rest of the query string is kept
    byte for byte (re-encoding could change what libpq sees, e.g. `+` in options).
    """
    base, has_query, query = url.partition("?")
    fragment = ""
    if "#" in query:
        query, _, fragment = query.partition("#")
        fragment = "#" + fragment
    kept: list[str] = []
    schema: str | None = None
    for item in query.split("&") if has_query else []:
        key, _, value = item.partition("=")
        if unquote(key) == "schema":
            schema = unquote(value)
        elif item:
            kept.append(item)
    conninfo = base + ("?" + "&".join(kept) if kept else "") + fragment
    if schema is None:
        try:
            options = conninfo_to_dict(conninfo).get("options") or ""
        except psycopg.Error as exc:
            raise InvalidInput(
                f"{redact(url)} is not a PostgreSQL URL: {first_line(exc)}",
                code=codes.INVALID_JOURNAL_URL,
            ) from None
        match = _SCHEMA_OPTION.search(str(options))
        schema = match.group(1).strip('"') if match else DEFAULT_SCHEMA
    if not schema or len(schema.encode()) > 63:
        raise InvalidInput(
            f"schema {schema!r} is not a PostgreSQL identifier (1-63 bytes)",
            code=codes.INVALID_JOURNAL_URL,
        )
    return conninfo, schema


def redact(url: str) -> str:
    """The URL with any password replaced, for messages."""
    return re.sub(r"(://[^:/@?#]*):[^@/?#]*@", r"\1:***@", url)


def lock_key(schema: str, purpose: str = "journal") -> int:
    """The advisory lock key (signed 64-bit) of one journal, the same on every machine."""
    digest = hashlib.sha256(f"quotaledger/{purpose}/{schema}.{EVENTS_TABLE}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (a psycopg error may span several)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
