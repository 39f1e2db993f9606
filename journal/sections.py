"""The layout of a checkpoint file: the state in one section per goal, with an index.

    sections | bucket table | buckets | header | u32 header length | END

A section is one goal's state, encoded by the projector (`dump_section`); the index
hashes each goal into one of `buckets` buckets (crc32 of its UTF-8 name), each a
MessagePack list of entries `[goal, last_at, offset, length, crc32]`, found through
the table of the buckets' offsets (big-endian u64s, one more than there are buckets).
A command about one goal reads the header, one bucket and one section: its cost does
not grow with the number of other goals. The header (MessagePack) comes last, so a
file cut short has no END and is never trusted; each section's crc32 is checked
before it is decoded.

A delta is a file of the same layout whose header names its base (`base`, the base's
random `file_id`): its sections replace the base's, for the goals that changed since.
"""

import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import msgspec

END = b"\nQLCKEND"
"""The last bytes of every whole checkpoint file."""
TRAILER_BYTES = 4 + len(END)
GOALS_PER_BUCKET = 16
"""About this many index entries share a bucket: one bucket decode per lookup."""
_TABLE_ENTRY = struct.Struct(">Q")
_EARLIER_FORMAT_START = 0x87
"""Checkpoints before sections were one MessagePack map of seven fields."""


class Header(msgspec.Struct, forbid_unknown_fields=True):
    """What a checkpoint file says about itself (SPEC §2.5's fields, then the layout)."""

    seq: int
    hash: str
    offset: int
    journal_id: str
    projection_version: str
    file_id: str
    """Random: what a delta names its base by."""
    base: str | None
    """A delta: the `file_id` of the base it completes. A base: None."""
    null_goal_last_at: str | None
    """The time of the last journal-level event (goal null)."""
    latest_at: str | None
    """The latest time of any goal: whether the checkpoint is inside an `--at` prefix."""
    goals: int
    buckets: int
    index_crc: int
    """The crc32 of the bucket table and buckets, checked on open: an index is small
    beside the sections and every lookup trusts it."""
    table_at: int
    size: int


class Entry(NamedTuple):
    goal: str
    last_at: str | None
    """The goal's last event time (None: only journal-level events touched its state)."""
    offset: int
    length: int
    crc: int


class Damaged(Exception):
    """A checkpoint file that is not whole or not what it says: never trusted."""


_encode = msgspec.msgpack.Encoder().encode
_decode_header = msgspec.msgpack.Decoder(Header).decode
_decode_bucket = msgspec.msgpack.Decoder(list[Entry]).decode


def bucket_of(goal: str, buckets: int) -> int:
    return zlib.crc32(goal.encode("utf-8", "surrogatepass")) % buckets


def new_file_id() -> str:
    return os.urandom(16).hex()


Section = tuple[str, str | None, "bytes | memoryview", int | None]
"""(goal, last_at, its section's bytes, their crc32 if known: a section copied from
another file keeps the crc32 it was stored with, checked as it is copied)."""


def layout(header: Header, sections: Iterable[Section]) -> list[bytes | memoryview]:
    """The parts of a checkpoint file holding `sections` (each goal once), under
    `header` (whose layout fields this fills in)."""
    parts: list[bytes | memoryview] = []
    entries: list[Entry] = []
    at = 0
    for goal, last_at, blob, known_crc in sections:
        crc = zlib.crc32(blob)
        if known_crc is not None and crc != known_crc:
            raise Damaged(f"the section of goal {goal!r} fails its checksum")
        entries.append(Entry(goal, last_at, at, len(blob), crc))
        parts.append(blob)
        at += len(blob)
    buckets = max(1, len(entries) // GOALS_PER_BUCKET)
    grouped: list[list[Entry]] = [[] for _ in range(buckets)]
    for entry in entries:
        grouped[bucket_of(entry.goal, buckets)].append(entry)
    encoded = [_encode(bucket) for bucket in grouped]
    table_at = at
    bucket_at = table_at + _TABLE_ENTRY.size * (buckets + 1)
    table = bytearray()
    for blob in encoded:
        table += _TABLE_ENTRY.pack(bucket_at)
        bucket_at += len(blob)
    table += _TABLE_ENTRY.pack(bucket_at)
    header.goals, header.buckets, header.table_at = len(entries), buckets, table_at
    index_crc = zlib.crc32(table)
    for blob in encoded:
        index_crc = zlib.crc32(blob, index_crc)
    header.index_crc = index_crc
    header.size = 0
    head = _encode(header)
    # The size field is written last: its own encoding's width is part of the size.
    for _ in range(3):
        header.size = bucket_at + len(head) + TRAILER_BYTES
        head = _encode(header)
    if bucket_at + len(head) + TRAILER_BYTES != header.size:
        raise AssertionError("a checkpoint header of unstable size")
    return [*parts, bytes(table), *encoded, head, struct.pack(">I", len(head)), END]


class SectionFile:
    """One checkpoint file (base or delta), read lazily from `data` (a mapping of it)."""

    def __init__(self, data: Any) -> None:
        size = len(data)
        if size < TRAILER_BYTES or data[size - len(END) : size] != END:
            if size and data[0] == _EARLIER_FORMAT_START:
                raise Damaged("it is in an earlier version's format (one MessagePack map)")
            raise Damaged("it is cut short (no end marker)")
        (head_size,) = struct.unpack_from(">I", data, size - TRAILER_BYTES)
        head_at = size - TRAILER_BYTES - head_size
        if head_at < 0:
            raise Damaged("its header is cut short")
        try:
            header = _decode_header(data[head_at : size - TRAILER_BYTES])
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise Damaged(f"its header does not decode ({exc})") from exc
        if header.size != size or header.buckets < 1 or not 0 <= header.table_at <= head_at:
            raise Damaged(f"it holds {size} bytes where its header says {header.size}")
        if zlib.crc32(memoryview(data)[header.table_at : head_at]) != header.index_crc:
            raise Damaged("its index fails its checksum")
        self.data = data
        self.header = header
        self.head_at = head_at
        self._buckets: dict[int, dict[str, Entry]] = {}

    def bucket(self, number: int) -> dict[str, Entry]:
        found = self._buckets.get(number)
        if found is None:
            start, end = struct.unpack_from(
                ">QQ", self.data, self.header.table_at + _TABLE_ENTRY.size * number
            )
            if not self.header.table_at <= start <= end <= self.head_at:
                raise Damaged(f"bucket {number} is out of bounds")
            try:
                entries = _decode_bucket(self.data[start:end])
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise Damaged(f"bucket {number} does not decode ({exc})") from exc
            found = self._buckets[number] = {entry.goal: entry for entry in entries}
        return found

    def entry(self, goal: str) -> Entry | None:
        return self.bucket(bucket_of(goal, self.header.buckets)).get(goal)

    def entries(self) -> Iterator[Entry]:
        for number in range(self.header.buckets):
            yield from self.bucket(number).values()

    def section(self, entry: Entry) -> bytes:
        """The goal's section, checked whole against its crc32."""
        if not 0 <= entry.offset <= entry.offset + entry.length <= self.header.table_at:
            raise Damaged(f"the section of goal {entry.goal!r} is out of bounds")
        blob = bytes(self.data[entry.offset : entry.offset + entry.length])
        if zlib.crc32(blob) != entry.crc:
            raise Damaged(f"the section of goal {entry.goal!r} fails its checksum")
        return blob

    def raw(self, entry: Entry) -> memoryview:
        """The section's bytes as stored (copied into a new file without decoding)."""
        return memoryview(self.data)[entry.offset : entry.offset + entry.length]


def header_of_tail(tail: bytes) -> Header | None:
    """The header from a file's last bytes (None if they do not hold it whole)."""
    if len(tail) < TRAILER_BYTES or not tail.endswith(END):
        return None
    (head_size,) = struct.unpack_from(">I", tail, len(tail) - TRAILER_BYTES)
    head_at = len(tail) - TRAILER_BYTES - head_size
    if head_at < 0:
        return None
    try:
        return _decode_header(tail[head_at : len(tail) - TRAILER_BYTES])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
