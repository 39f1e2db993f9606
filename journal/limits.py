"""Every limit the engine enforces, in one place (the domain's are projections/limits.py).

The relationships between them are checked once, at import, so a change to one
limit that breaks another fails loudly instead of corrupting a journal later.
"""

from __future__ import annotations

FORMAT = "quotaledger/1"
FORMAT_VERSION = 1

LINE_BYTES_MAX = 1 << 20
"""A journal line (including its newline) never exceeds 1 MiB."""

BATCH_EVENTS_MAX = 100_000
"""Events one transaction may append (one write, one fdatasync)."""

BATCH_BYTES_MAX = 256 << 20
"""Bytes one transaction may append."""

LOCK_TIMEOUT_S_DEFAULT = 30.0
LOCK_TIMEOUT_S_MAX = 86_400.0
"""A day: a bounded wait (PostgreSQL's lock_timeout tops out near 24.8 days)."""

CLOCK_SKEW_S_DEFAULT = 300
CLOCK_SKEW_S_MAX = 86_400
"""How far ahead of the wall clock an explicit time on a writer may be (SPEC §2.2;
env QUOTALEDGER_MAX_CLOCK_SKEW_S): one far-future event would stamp every later
event of its goal and freeze its 60 s window."""

CHECKPOINT_EVERY_EVENTS = 10_000
"""Writers refresh the checkpoint once this many records are past it."""

READ_CHUNK_BYTES = 8 << 20
"""Bytes read from a journal file at a time while folding."""

GENESIS_PREV = "0" * 64

assert BATCH_BYTES_MAX >= LINE_BYTES_MAX
assert READ_CHUNK_BYTES >= 2 * LINE_BYTES_MAX
assert LOCK_TIMEOUT_S_DEFAULT < LOCK_TIMEOUT_S_MAX
