"""Checkpoints: the projection state after record N, stored beside the journal.

`<journal>.checkpoint` (msgspec MessagePack) is written atomically (temp file,
fsync, rename, fsync the directory) and used only after the record ending its
prefix is found in the log with exactly its seq and hash, and its projection
version matches the code. Anything else and it is ignored with a warning.
"""

import contextlib
import os
import sys

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.filecheck import holds_journal, insecure_reason
from quotaledger.journal.fsutil import create_temp_beside, fsync_dir, write_all


class JournalHeadState(msgspec.Struct, forbid_unknown_fields=True):
    """The journal's own fold: what the chain verifier needs to continue.

    MessagePack map keys cannot be null, so the last time of journal-level events
    (goal null) has its own field rather than a sentinel key that a goal could spell.
    """

    goal_last_at: dict[str, str]
    null_goal_last_at: str | None = None

    @classmethod
    def of(cls, goal_last_at: dict[str | None, str]) -> "JournalHeadState":
        return cls(
            goal_last_at={g: at for g, at in goal_last_at.items() if g is not None},
            null_goal_last_at=goal_last_at.get(None),
        )

    def goal_last_at_map(self) -> dict[str | None, str]:
        result: dict[str | None, str] = {g: at for g, at in self.goal_last_at.items()}
        if self.null_goal_last_at is not None:
            result[None] = self.null_goal_last_at
        return result


class Checkpoint(msgspec.Struct, forbid_unknown_fields=True):
    seq: int
    hash: str
    offset: int
    journal_id: str
    projection_version: str
    state: msgspec.Raw
    head: JournalHeadState


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Checkpoint).decode


def checkpoint_path(journal_path: str) -> str:
    return journal_path + ".checkpoint"


def write_checkpoint(path: str, checkpoint: Checkpoint) -> None:
    if holds_journal(path):  # a cache is never worth a journal that has its name (SPEC §7)
        raise InvalidInput(
            f"{path} holds a journal, not a checkpoint; no checkpoint replaces it: "
            "rename that journal",
            code=codes.OUT_IS_JOURNAL,
            path=path,
        )
    # Unique per writer: two handles (threads or processes) may refresh at once.
    fd, tmp = create_temp_beside(path)
    try:
        try:
            write_all(fd, _encode(checkpoint))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        # A failed checkpoint (a full disk, say) leaves no temp file behind.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path)


def read_checkpoint(path: str) -> Checkpoint | None:
    """The checkpoint at `path`, or None (with a warning) if it is missing or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        warn(f"ignoring checkpoint {path}: {exc.strerror}")
        return None
    try:
        insecure = insecure_reason(os.fstat(fd))
        if insecure is not None:  # a forged checkpoint could hand a writer a full slot
            warn(f"ignoring checkpoint {path}: {insecure}; folding from genesis")
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError as exc:  # a directory or another unreadable thing in its place
        warn(f"ignoring checkpoint {path}: {exc.strerror}")
        return None
    finally:
        os.close(fd)
    try:
        return _decode(b"".join(chunks))
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        warn(f"ignoring checkpoint {path}: it does not decode ({exc})")
        return None


PEEK_BYTES = 512
"""Enough for a checkpoint's first fields (seq, hash, offset, journal_id, version)."""


def peek_checkpoint(path: str) -> tuple[int, str] | None:
    """The seq and projection version of the checkpoint at `path`, from its first bytes
    alone (None: no checkpoint, or not one this can read): what a writer asks before
    refreshing a checkpoint another writer may have refreshed already, without reading
    a state that may weigh hundreds of MiB."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if insecure_reason(os.fstat(fd)) is not None:
            return None  # as read_checkpoint: writers refresh what no reader would trust
        head = os.read(fd, PEEK_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return peek_fields(head)


_MAP_OF_SEVEN = 0x87
"""A Checkpoint's MessagePack encoding opens with a map of its seven fields, in order."""


def peek_fields(data: bytes) -> tuple[int, str] | None:
    """(seq, projection_version) from the start of an encoded Checkpoint, or None."""
    if not data or data[0] != _MAP_OF_SEVEN:
        return None
    fields: dict[str, object] = {}
    at = 1
    try:
        while "projection_version" not in fields:
            key, at = _str_at(data, at)
            value: object
            if key in ("seq", "offset"):
                value, at = _uint_at(data, at)
            else:
                value, at = _str_at(data, at)
            fields[key] = value
    except (IndexError, ValueError):
        return None
    seq, version = fields.get("seq"), fields["projection_version"]
    return (seq, version) if isinstance(seq, int) and isinstance(version, str) else None


def _str_at(data: bytes, at: int) -> tuple[str, int]:
    tag = data[at]
    if 0xA0 <= tag <= 0xBF:
        size, at = tag - 0xA0, at + 1
    elif tag == 0xD9:
        size, at = data[at + 1], at + 2
    else:
        raise ValueError("not a short string")
    if at + size > len(data):
        raise ValueError("cut short")
    return data[at : at + size].decode(), at + size


def _uint_at(data: bytes, at: int) -> tuple[int, int]:
    tag = data[at]
    if tag < 0x80:
        return tag, at + 1
    widths = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
    width = widths.get(tag)
    if width is None or at + 1 + width > len(data):
        raise ValueError("not an unsigned integer")
    return int.from_bytes(data[at + 1 : at + 1 + width], "big"), at + 1 + width


def warn(message: str) -> None:
    print(f"quotaledger: warning: {message}", file=sys.stderr)
