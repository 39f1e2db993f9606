"""The record format "quotaledger/1": one canonical JSON line per event.

A line is ``body[:-1] + ',"hash":"' + sha256(body).hex + '"}' + "\\n"`` where body
is the msgspec encoding of the envelope without its hash. Verification slices the
bytes on disk and never re-encodes, so a future encoder cannot break old hashes.
"""

from typing import Annotated, Any

import msgspec

from quotaledger.journal.limits import (
    BATCH_EVENTS_MAX,
    FORMAT,
    FORMAT_VERSION,
    GENESIS_PREV,
    LINE_BYTES_MAX,
)
from quotaledger.journal.sha256 import empty_sha256_for

HASH_MEMBER = b',"hash":"'
# Without its newline a line ends with ,"hash":"<64 hex>"} — a fixed-size suffix.
SUFFIX_BYTES = len(HASH_MEMBER) + 64 + 2


class Envelope(msgspec.Struct, forbid_unknown_fields=True):
    """The hashed part of a record, fields in their canonical order."""

    v: int
    seq: int
    at: str
    kind: str
    goal: str | None
    data: msgspec.Raw
    prev: str


class Record(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One verified journal record; `data` stays raw until a projection decodes it.

    Untracked by the cycle collector: it holds only ints, strings and raw bytes."""

    v: int
    seq: int
    at: str
    kind: str
    goal: str | None
    data: msgspec.Raw
    prev: str
    hash: str


class JournalCreated(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Payload of the genesis record."""

    journal_id: str
    format: str


class JournalRepaired(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Payload of the record `repair` appends after moving records to quarantine."""

    truncated_after_seq: int
    quarantine: str
    quarantined_bytes: int
    quarantined_sha256: str


class JournalBatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Payload of the record that leads a transaction of several records: how many
    records follow it, all of them part of that transaction (SPEC §2.4 item 5).

    The newline ends one record; this says where a transaction ends. Recovery treats
    a transaction whose records are not all there (a crash cut its one large write
    between lines) as a torn tail, announcement included: all or nothing."""

    records: Annotated[int, msgspec.Meta(ge=1, le=BATCH_EVENTS_MAX)]


GENESIS_KIND = "journal.created"
REPAIRED_KIND = "journal.repaired"
BATCH_KIND = "journal.batch"

_encode = msgspec.json.Encoder().encode
decode_record = msgspec.json.Decoder(Record).decode
_decode_any = msgspec.json.Decoder().decode


def encode_payload(payload: Any) -> bytes:
    return _encode(payload)


def encode_line(
    seq: int, at: str, kind: str, goal: str | None, data: bytes | msgspec.Raw, prev: str
) -> tuple[bytes, str]:
    """The complete line (with newline) for an event, and its hash. `data`: the
    payload's bytes, or a Raw of them (a staged record's)."""
    body = _encode(Envelope(FORMAT_VERSION, seq, at, kind, goal, msgspec.Raw(data), prev))
    hasher = empty_sha256_for(len(body)).copy()
    hasher.update(body)
    digest = hasher.hexdigest()
    line = b"".join((body[:-1], HASH_MEMBER, digest.encode(), b'"}\n'))
    return line, digest


def genesis_line(journal_id: str, at: str) -> tuple[bytes, str]:
    data = _encode(JournalCreated(journal_id=journal_id, format=FORMAT))
    return encode_line(0, at, GENESIS_KIND, None, data, GENESIS_PREV)


def hash_matches(line: bytes) -> bool:
    """Whether `line` (newline excluded) is self-verifying in the SPEC §2.4 sense: it
    ends with a hash member whose value is the SHA-256 of the rest and it parses as a
    JSON object, whatever its `v` or its other members. Such a line was written whole,
    on purpose (a torn write does not hash), so if it is not a valid record of this
    format it is corruption, never a torn tail: an older binary must not cut a newer
    journal."""
    if len(line) < SUFFIX_BYTES or line[-2:] != b'"}' or line[-SUFFIX_BYTES:-66] != HASH_MEMBER:
        return False
    digest = empty_sha256_for(len(line)).copy()
    digest.update(memoryview(line)[:-SUFFIX_BYTES])
    digest.update(b"}")
    if line[-66:-2] != digest.hexdigest().encode():
        return False
    try:
        return isinstance(_decode_any(line), dict)
    except msgspec.DecodeError:
        return False


def self_verify(line: bytes) -> Record | None:
    """The record if `line` (newline excluded) is self-verifying, else None.

    Self-verifying means: it parses as a record and its hash matches its bytes.
    Chaining and payload schemas are checked by the caller. This is the hot loop of
    every fold and verify, so it hashes a view of the line instead of a copy.
    """
    if len(line) >= LINE_BYTES_MAX:
        return None
    return self_verify_any_size(line)


def self_verify_any_size(line: bytes) -> Record | None:
    """self_verify without the 1 MiB limit. No writer makes a longer line, so one that
    verifies was written on purpose: recovery must not take it for a torn tail."""
    if len(line) < SUFFIX_BYTES:
        return None
    if line[-2:] != b'"}' or line[-SUFFIX_BYTES:-66] != HASH_MEMBER:
        return None
    try:
        record = decode_record(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    digest = empty_sha256_for(len(line)).copy()
    digest.update(memoryview(line)[:-SUFFIX_BYTES])
    digest.update(b"}")
    hex_digest = digest.hexdigest()
    # The decoded hash and the bytes in the suffix must both be this digest: the hash
    # member is the line's last, written exactly once, never escaped.
    if record.hash != hex_digest or line[-66:-2] != hex_digest.encode():
        return None
    if record.v != FORMAT_VERSION:
        return None
    return record
