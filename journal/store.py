"""The interface both stores (file, PostgreSQL) offer to the journal.

Positions are given twice: `offset`, the byte offset in the journal's JSON Lines
stream (meaningful for both stores: it is where the record ends in an export), and
`next_seq`. Each store uses whichever it indexes by.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from quotaledger.journal.checkpoint import Checkpoint
from quotaledger.journal.record import Record
from quotaledger.journal.sections import Header, Section, SectionFile


class PendingRecord(NamedTuple):
    """A record encoded, hashed and schema-checked, not yet durable.

    A NamedTuple rather than a frozen dataclass: batches build a thousand of these
    per transaction and a frozen dataclass's __init__ costs several times more.
    """

    record: Record
    payload: Any
    line: bytes  # with its newline


Tail = Literal["same", "grew", "changed"]
"""What follows the last record a handle folded, as the store sees it now: "same" (that
record is still last, nothing to fold), "grew" (it is intact and records follow it) or
"changed" (it is gone or different, e.g. after a repair: fold from scratch). Plain
strings, not an Enum: every transaction compares one, and an Enum member lookup costs
several times more."""


class Store(Protocol):
    """The core every store implements: what it is, lock, read, check the tail, append,
    load (an import), check its own columns, make durable, close. What only some stores
    offer stands apart: `LocalFile` (a file) and `Checkpoints`, asked for with
    `local_file_of` and `checkpoints_of`."""

    target: str
    poisoned: bool
    writable: bool

    def lock(self, timeout_s: float, meanwhile: Callable[[], None] | None = None) -> None:
        """Take the journal's exclusive lock, waiting at most `timeout_s` seconds. A
        store may run `meanwhile` while it waits (a file's wait is queued in the
        kernel, so the caller can work; PostgreSQL's is a statement on the one
        connection, so it does not)."""
        ...

    def unlock(self) -> None: ...

    def chunks(self, offset: int, next_seq: int) -> Iterator[bytes]:
        """Bytes of the stream after `offset`, in order, possibly split mid-line."""
        ...

    def size_hint(self, offset: int, next_seq: int) -> int | None:
        """Bytes after `offset` if cheaply known (for progress), else None."""
        ...

    def tail_after(self, offset: int, seq: int, hash_hex: str) -> Tail:
        """Whether the record ending at `offset` is still `seq` with `hash_hex`, and
        whether records follow it (`seq` -1, `offset` 0: an empty prefix). Every
        transaction asks this first, so a store answers it with one read."""
        ...

    def append(self, records: Sequence[PendingRecord], offset: int) -> None:
        """Make `records` durable after `offset` in one write, or raise and leave none.
        A new journal's directory entry is durable too once it returns."""
        ...

    def load(self, records: Sequence[PendingRecord]) -> None:
        """Fill this empty store with `records` (an import): all of them durable, or
        none and nothing left behind."""
        ...

    def verify_columns(self) -> None:
        """Raise JournalCorrupt if what the store indexes beside each line (PostgreSQL's
        seq, hash, prev, kind, goal, at columns) disagrees with it; a file has nothing."""
        ...

    def make_durable(self) -> None:
        """Make every byte of the journal this handle may have read durable (the file
        store's fdatasync; committed rows already are)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class LocalFile(Protocol):
    """What only a journal file offers (PostgreSQL does not: every row was committed
    whole, so a row that does not verify is corruption, never a torn tail; the
    append-only trigger refuses to cut rows; a table is never unlinked from under a
    writer): moving a torn tail or a corrupt rest aside, the files that did so,
    re-linking an empty file removed under a writer, a descriptor for the parallel
    verify."""

    def local_fd(self) -> int | None:
        """A descriptor of the journal's file opened for reading, for readers that can
        use it directly (a parallel verify); None before the file exists."""
        ...

    def cut_tail(self, offset: int, next_seq: int, label: str) -> str:
        """Preserve the bytes after `offset` beside the journal and truncate; the path."""
        ...

    def cut_files(self, next_seq: int, label: str) -> list[tuple[int, str]]:
        """The files cut_tail wrote for `next_seq`: (when, in µs since the epoch, path),
        oldest first."""
        ...

    def ensure_linked(self, timeout_s: float) -> bool:
        """Whether the last lock() found the empty file it held removed or replaced, and
        locked the file the path names now instead."""
        ...


@runtime_checkable
class Checkpoints(Protocol):
    """A store that keeps a checkpoint beside the journal (both stores do): the state
    after record N, trusted only if the journal still holds that record."""

    keeps_deltas: bool
    """Whether a refresh may store a delta beside the base (else it writes a base)."""

    def load_checkpoint(self) -> Checkpoint | None: ...

    def peek_checkpoint(self) -> tuple[int, str] | None:
        """The stored checkpoint's seq and projection version, read without its state
        (None: none stored, or unreadable)."""
        ...

    def save_checkpoint(
        self, header: Header, sections: Iterable[Section], *, delta: bool
    ) -> SectionFile:
        """Store a checkpoint file of `sections` under `header`, covering only durable
        records: a base, or a delta beside the stored base. The file as written."""
        ...

    def line_ending_at(self, offset: int, seq: int) -> bytes | None:
        """The line (without newline) of record `seq` ending at `offset`, if the
        journal has one there: what a checkpoint's record is checked against."""
        ...


class Inserter(NamedTuple):
    """One role that inserted records into a shared journal, and which."""

    role: str | None
    """None for rows inserted before the store recorded roles (unknown)."""
    records: int
    first_seq: int
    last_seq: int


@runtime_checkable
class Attribution(Protocol):
    """A store that records who inserted each record (PostgreSQL's `inserted_by`,
    forced by its insert trigger, SPEC §2.6): a forged but well-chained record names
    the role that wrote it."""

    def inserted_by(self, first_seq: int, last_seq: int) -> dict[int, str | None]:
        """The inserting role of each record from `first_seq` to `last_seq`."""
        ...

    def inserters(self) -> list[Inserter]:
        """Every role that inserted records, in the order of its first record."""
        ...


def attribution_of(store: Store) -> Attribution | None:
    """The who-inserted-what capability of `store`, if it has one (PostgreSQL)."""
    return store if isinstance(store, Attribution) else None


@runtime_checkable
class Quarantine(Protocol):
    """A store that moves rows aside inside its locked transaction (PostgreSQL, SPEC
    §2.6): `repair` there commits the move with its `journal.repaired` record."""

    def quarantine_after(self, next_seq: int) -> str:
        """Move every record from `next_seq` on to the quarantine, in the transaction
        the lock holds (committed by the next append, undone by unlock); where to."""
        ...


def quarantine_of(store: Store) -> Quarantine | None:
    """The in-transaction quarantine of `store`, if it has one (PostgreSQL)."""
    return store if isinstance(store, Quarantine) else None


@runtime_checkable
class ServerClock(Protocol):
    """A store whose server keeps the clock implicit time comes from (PostgreSQL, SPEC
    §2.2): runners on several machines then stamp with one clock, and one machine whose
    clock runs ahead cannot push a goal's events into the future."""

    def locked_now_us(self) -> int | None:
        """The server's clock, in µs since the epoch, as read in the round trip that
        took the lock held now; None when no lock is held."""
        ...


def server_clock_of(store: Store) -> ServerClock | None:
    """The server-clock capability of `store`, if it has one (PostgreSQL)."""
    return store if isinstance(store, ServerClock) else None


def local_file_of(store: Store) -> LocalFile | None:
    """The file-only capability of `store`, if it has it (a file)."""
    return store if isinstance(store, LocalFile) else None


def checkpoints_of(store: Store) -> Checkpoints | None:
    """The checkpoint capability of `store`, if it has it."""
    return store if isinstance(store, Checkpoints) else None


def rest_from(store: Store, offset: int, next_seq: int) -> bytes:
    """Every byte of the stream from `offset` to the end (to classify a failure, or to
    see what a repair would move)."""
    return b"".join(store.chunks(offset, next_seq))
