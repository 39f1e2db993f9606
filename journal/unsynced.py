"""`<journal>.unsynced`: where a journal file stops being known durable (SPEC §2.3).

A writer whose `fdatasync` failed cuts the file back to its size before the
transaction. If that cut fails too, the bytes after that offset may be in the file
now and gone from the disk after a power loss (the kernel may have dropped the pages
and marked them clean: a later fdatasync "succeeds" without them, fsyncgate). So the
writer leaves this marker, and every later open refuses (`unsynced_tail`, exit 3):
no answer may stand on those bytes. `repair --truncate-after SEQ --yes`, cutting at
or before the offset, is the way out; it removes the marker last.
"""

import contextlib
import os

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.errors import JournalCorrupt
from quotaledger.journal.fsutil import create_temp_beside, fsync_dir, write_all

SUFFIX = ".unsynced"


class Unsynced(msgspec.Struct, forbid_unknown_fields=True):
    offset: int
    """The journal's size before the transaction whose fdatasync failed."""
    size: int
    """The journal's size when the marker was written."""


_decode = msgspec.json.Decoder(Unsynced).decode
_encode = msgspec.json.Encoder().encode


def marker_path(journal_path: str) -> str:
    return journal_path + SUFFIX


def mark(journal_path: str, offset: int, size: int) -> str:
    """Leave the marker (atomically, durably: fsync, not fdatasync, and the directory);
    its path. Raises OSError if it cannot be written either."""
    path = marker_path(journal_path)
    fd, temp = create_temp_beside(path)
    try:
        try:
            write_all(fd, _encode(Unsynced(offset=offset, size=size)) + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_dir(path)
    return path


def unsynced_offset(journal_path: str) -> int | None:
    """The offset the marker names, or None when there is no marker. A marker that
    cannot be read or decoded names offset 0: nothing is known durable."""
    path = marker_path(journal_path)
    try:
        with open(path, "rb") as f:
            return _decode(f.read(4096)).offset
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return 0


def refuse_if_marked(journal_path: str) -> None:
    """Raise `unsynced_tail` (exit 3) while the marker is there."""
    offset = unsynced_offset(journal_path)
    if offset is None:
        return
    raise JournalCorrupt(
        f"an fdatasync of {journal_path} failed and the bytes after byte {offset} could not "
        f"be cut back ({marker_path(journal_path)}): they may never reach the disk. Nothing "
        "is answered from them: run `quotaledger repair --truncate-after SEQ --yes` with the "
        "last record before that byte",
        code=codes.UNSYNCED_TAIL,
        path=journal_path,
        offset=offset,
    )


def clear(journal_path: str) -> None:
    """Remove the marker once the journal is durable up to its offset (a repair)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(marker_path(journal_path))
        fsync_dir(journal_path)
