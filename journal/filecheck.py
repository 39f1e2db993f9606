"""What a file at or beside a journal's path holds, and whether it may be trusted.

Outputs (`metrics --out`, `report --out`, `export --to`, a checkpoint) and the demo's
rotation must never destroy a journal (SPEC §7): they ask here whether a file holds one
and, for the demo, which one (its journal_id). Writers and checkpoint readers ask
whether a file's owner and mode let someone else forge it (SPEC §2.3).
"""

from __future__ import annotations

import os
import stat

import msgspec

from quotaledger.journal.record import GENESIS_KIND, JournalCreated, self_verify

GENESIS_PREFIX = b'{"v":1,"seq":0,'
"""How every journal's first line starts (the genesis record, canonical JSON)."""
_GENESIS_KIND_MEMBER = f'"kind":"{GENESIS_KIND}"'.encode()
_FIRST_LINE_BYTES = 4096
"""A genesis line is about 230 bytes: this much holds it whole."""
_decode_created = msgspec.json.Decoder(JournalCreated).decode


def first_line(path: str) -> bytes | None:
    """The first bytes of the file at `path` up to its first newline (without it), or
    None when it cannot be read (absent, a directory, a FIFO: never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        start = os.read(fd, _FIRST_LINE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return start.split(b"\n", 1)[0]


def starts_as_journal(line: bytes) -> bool:
    """Whether `line` looks like a genesis record, damaged or not: a file that starts
    so holds acknowledged history that nothing may replace."""
    return line.startswith(GENESIS_PREFIX) and _GENESIS_KIND_MEMBER in line


def holds_journal(path: str) -> bool:
    """Whether the file at `path` starts with a genesis record."""
    line = first_line(path)
    return line is not None and starts_as_journal(line)


def journal_id_of(path: str) -> str | None:
    """The journal_id of the journal at `path`: its first line is a genesis record
    whose hash matches; else None."""
    line = first_line(path)
    record = None if line is None else self_verify(line)
    if record is None or record.seq != 0 or record.kind != GENESIS_KIND:
        return None
    try:
        return _decode_created(record.data).journal_id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def insecure_reason(found: os.stat_result) -> str | None:
    """Why a journal, checkpoint or marker file with this status cannot be trusted, or
    None: others may write it, or this process runs as root and another user owns it.
    In a shared (1777) directory such a file may be truncated or forged by its owner at
    will (SPEC §2.3)."""
    if found.st_mode & stat.S_IWOTH:
        return f"others may write it (mode {stat.S_IMODE(found.st_mode):04o})"
    if os.geteuid() == 0 and found.st_uid != 0:
        return f"it is owned by uid {found.st_uid}, not by root, who runs this command"
    return None
