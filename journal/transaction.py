"""A transaction: one locked read-decide-append cycle, committed on a clean exit.

    with journal.transaction() as txn:           # lock, catch up, sample time
        at = txn.time_for("goal-a", explicit_at=None)
        decision = decide(txn.state, ...)        # pure
        txn.append("capacity.admitted", "goal-a", payload, at)
    # committed: one write, one fdatasync, then the lock is released

A transaction of several events is led by a journal.batch record that announces how
many follow (SPEC §2.4: all or nothing after a crash). What a transaction needs of its
journal is `Host` (the engine's `Fold` is one).
"""

from __future__ import annotations

import uuid
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.chain import Head, PayloadDecoder
from quotaledger.journal.clock import (
    canonical_at,
    check_not_in_future,
    event_time,
    format_us,
    is_canonical_at,
    max_clock_skew_us,
)
from quotaledger.journal.errors import Error, InvalidInput, StorageFailure, TimeRegression
from quotaledger.journal.identifier import is_identifier, not_an_identifier
from quotaledger.journal.limits import (
    BATCH_BYTES_MAX,
    BATCH_EVENTS_MAX,
    FORMAT_VERSION,
    LINE_BYTES_MAX,
)
from quotaledger.journal.record import (
    BATCH_KIND,
    JournalBatch,
    JournalCreated,
    Record,
    encode_line,
    encode_payload,
    genesis_line,
    self_verify,
)
from quotaledger.journal.store import PendingRecord

S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)
_decode_genesis = msgspec.json.Decoder(JournalCreated).decode
_Raw = msgspec.Raw
_new_pending = tuple.__new__
"""Builds a PendingRecord without the NamedTuple's Python-level __new__ (every append)."""
_NOTHING_CHECKED: tuple[str | None, object] = (None, object())  # no string is this time
_NO_DECODER: tuple[object, PayloadDecoder, type | None] = (object(), bytes, None)  # no kind
CHECK_KEPT_PAYLOADS = False
"""Whether `append` decodes a payload it keeps as built all the same, and fails unless
that gives back an equal value that encodes to the same bytes. The test suite turns it
on (tests/conftest.py): every payload any test appends proves the shortcut exact."""


class Host(Protocol[S_co]):
    """What a transaction needs of its journal: to begin (the lock taken, the state
    caught up) and end (the lock released), the head and state, each kind's decoder,
    to commit the records (folded, then durable), to make what it folded durable when
    it appends nothing, and to hear once the lock is released after a commit."""

    @property
    def head(self) -> Head: ...

    @property
    def state(self) -> S_co: ...

    def begin(self) -> None: ...

    def end(self) -> None: ...

    def now_us(self) -> int: ...

    def clock_name(self) -> str: ...

    def check_poisoned(self) -> None: ...

    def decoder_for(self, kind: str) -> PayloadDecoder: ...

    def commit(self, pending: list[PendingRecord]) -> None: ...

    def make_durable(self, end: int) -> None: ...

    def committed(self) -> None: ...


def payload_type(decode: PayloadDecoder) -> type | None:
    """The Struct type a kind's decoder makes, when it is a msgspec Decoder's (which
    knows its type): a payload handed as an instance of it is kept as built."""
    found = getattr(getattr(decode, "__self__", None), "type", None)
    if isinstance(found, type) and issubclass(found, msgspec.Struct):
        return found
    return None


def decode_checked(kind: str, data: bytes, decode: PayloadDecoder) -> Any:
    """A payload from outside (bytes, a dict) decoded against its kind's schema right
    before it is written: one that did not decode would make the journal corrupt for
    every later reader."""
    try:
        return decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInput(
            f"payload of {kind} is invalid: {exc}", code=codes.INVALID_PAYLOAD
        ) from exc


def check_kept(kind: str, payload: Any, data: bytes, decode: PayloadDecoder) -> None:
    """Fail unless `payload`, kept as built, is what decoding its bytes gives: an equal
    value (no list for a tuple, no dict for a Struct) that encodes to the same bytes
    (no int for a float). For CHECK_KEPT_PAYLOADS."""
    try:
        again = decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AssertionError(f"a {kind} payload kept as built does not decode: {exc}") from exc
    if again != payload or encode_payload(again) != data:
        raise AssertionError(f"a {kind} payload kept as built differs from its decoding")


def genesis_record(at: str) -> PendingRecord:
    """The genesis record of a new journal. A transaction stages it in front of its
    first event, so genesis and that event share one write and one fdatasync, and a
    transaction that appends nothing (a refused or invalid command) writes nothing."""
    line, _ = genesis_line(uuid.uuid4().hex, at)
    record = self_verify(line[:-1])
    assert record is not None
    return PendingRecord(record, _decode_genesis(record.data), line)


class Transaction(Generic[S]):
    """One locked read-decide-append cycle; commits on a clean exit."""

    __slots__ = (
        "_checked",
        "_decoder",
        "_goal_last_at",
        "_host",
        "_latest",
        "_more",
        "_pending",
        "_pending_bytes",
        "committed",
        "wall_us",
    )

    def __init__(self, host: Host[S]) -> None:
        self._host = host
        self._pending: list[PendingRecord] = []
        """Staged and encoded: the genesis record of a new journal, the first event."""
        self._more: list[PendingRecord] = []
        """The events after the first, as `append` returned them (their final seq, no
        prev or hash yet): encoded at commit behind the journal.batch record that leads
        a transaction of several, their records completed in place (_final)."""
        self.committed: list[PendingRecord] = []
        """The records the transaction wrote, as written, once it has committed."""
        self._pending_bytes = 0
        self._goal_last_at: dict[str | None, str] = {}
        self._checked: tuple[str | None, object] = _NOTHING_CHECKED
        """A goal and a time known canonical and not before the goal's last event."""
        self._decoder: tuple[object, PayloadDecoder, type | None] = _NO_DECODER
        """The last kind appended (the very string), its decoder and the Struct type
        it decodes to (see payload_type): a batch's kinds repeat."""
        self.wall_us = 0
        self._latest: str | None = None
        """The latest time an event may have (the clock-skew bound past `wall_us`), as
        canonical text: a batch of explicit times (an import, a window built at once)
        compares each with it instead of parsing it (canonical times sort as text)."""

    def __enter__(self) -> Transaction[S]:
        self._host.begin()
        # Time is sampled only now, under the lock (SPEC §2.2, seed 000).
        self.wall_us = self._host.now_us()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        host = self._host
        pending = self._pending
        try:
            if pending and exc_type is None:
                pending = self.to_write()
                host.commit(pending)
                self.committed = pending
            else:
                self._pending = []
                # Nothing appended: the answer (an idempotent replay, a refusal, an
                # input error judged against the state) stands on bytes folded from
                # others, which must be durable before it is given.
                if exc_type is None or (
                    issubclass(exc_type, Error) and not issubclass(exc_type, StorageFailure)
                ):
                    host.make_durable(host.head.offset)
        finally:
            host.end()
        if exc_type is None and pending:
            host.committed()

    @property
    def state(self) -> S:
        self._host.check_poisoned()
        return self._host.state

    @property
    def head(self) -> Head:
        self._host.check_poisoned()
        return self._host.head

    def last_at(self, goal: str | None) -> str | None:
        staged = self._goal_last_at.get(goal)
        if staged is not None:
            return staged
        head = self._host.head
        if goal is None and head.next_seq == 0:
            return format_us(self.wall_us)  # the genesis record this transaction will stage
        return head.goal_last_at.get(goal)

    def time_for(
        self, goal: str | None, explicit_at: str | None = None, clock: tuple[str, ...] = ()
    ) -> str:
        """The event time for `goal`: implicit never goes back; explicit must not.
        `clock`: other streams that share the goal's clock (a pool and its members):
        the time is not before the latest event of any of them either."""
        if goal is not None and not is_identifier(goal):
            raise not_an_identifier("goal", goal, about=True)
        last = self.last_at(goal)
        for name in clock:
            other = self.last_at(name)
            if other is not None and (last is None or other > last):
                last = other
        at = event_time(goal, last, self.wall_us, explicit_at, self._host.clock_name())
        self._checked = (goal, at)  # so append need not check this time again
        return at

    def _check_event(self, goal: str | None, at: str) -> None:
        """An event's goal and time, when they are not what time_for gave: the goal an
        identifier (or None: journal-level), the time canonical, not before the goal's
        last event, not beyond the clock-skew bound."""
        if goal is not None and not is_identifier(goal):
            raise not_an_identifier("goal", goal, about=True)
        if not isinstance(at, str) or not is_canonical_at(at):
            raise InvalidInput(
                lambda name: f"{name} {at!r} is not a canonical event time (see time_for)",
                code=codes.INVALID_TIME,
                about="at",
            )
        last = self.last_at(goal)
        if last is not None and at < last:
            raise TimeRegression(
                lambda name: f"{name} {at} is earlier than {last}",
                about="at",
                at=at,
                last_at=last,
            )
        latest = self._latest
        if latest is None:  # once per transaction: the bound as an `at`, compared as text
            latest = self._latest = format_us(self.wall_us + max_clock_skew_us())
        if at > latest and (last is None or at > last):
            check_not_in_future(at, self.wall_us, last, self._host.clock_name())  # refuses

    def append(self, kind: str, goal: str | None, payload: Any, at: str) -> PendingRecord:
        """Stage one event; it becomes durable when the transaction commits.

        The record returned is final for a transaction of one event. Once a second is
        staged, a journal.batch record will lead them and every seq and hash shifts:
        `committed` holds the records as written after the commit."""
        checked_goal, checked_at = self._checked
        same_time = at is checked_at and goal == checked_goal
        if not same_time:
            self._check_event(goal, at)  # not what time_for gave, nor a batch's shared one
        host = self._host
        decoder_kind, decode, own_type = self._decoder
        if kind is not decoder_kind:
            decode = host.decoder_for(kind)
            own_type = payload_type(decode)
            self._decoder = (kind, decode, own_type)
        if type(payload) is own_type:
            # The kind's own Struct, built by the caller: its __post_init__ (and each
            # nested Struct's) checked it then, so it is kept as the decoded value
            # instead of being decoded again from its bytes (14 nested Structs for a
            # Receipt). Payload Structs are frozen and nothing mutates their
            # containers, so the state may hold the caller's object.
            data = encode_payload(payload)
            decoded = payload
            if CHECK_KEPT_PAYLOADS:
                check_kept(kind, payload, data, decode)
        else:
            data = payload if isinstance(payload, bytes) else encode_payload(payload)
            decoded = decode_checked(kind, data, decode)
        if kind == BATCH_KIND:
            raise InvalidInput(
                "journal.batch records are the journal's own", code=codes.RESERVED_KIND
            )
        staged = self._pending
        if staged and staged[-1].record.seq != 0:  # a first event is staged: this follows
            return self._stage_more(kind, goal, data, at, decoded, same_time)
        seq, prev, genesis = self._first_position()
        line, digest = encode_line(seq, at, kind, goal, data, prev)
        size = len(line)
        if size > LINE_BYTES_MAX:
            raise InvalidInput(
                f"event of {size} bytes exceeds the 1 MiB line limit", code=codes.LINE_TOO_LARGE
            )
        pending_bytes = self._pending_bytes + size
        if len(staged) >= BATCH_EVENTS_MAX or pending_bytes > BATCH_BYTES_MAX:
            raise InvalidInput("too many events in one transaction", code=codes.BATCH_TOO_LARGE)
        record = Record(FORMAT_VERSION, seq, at, kind, goal, _Raw(data), prev, digest)
        pending = _new_pending(PendingRecord, (record, decoded, line))
        if genesis is not None:
            staged.append(genesis)
            pending_bytes += len(genesis.line)
            self._goal_last_at[None] = genesis.record.at
        staged.append(pending)
        self._pending_bytes = pending_bytes
        self._goal_last_at[goal] = at
        self._checked = (goal, at)  # the goal's last time now: the next event may share it
        return pending

    def create(self, at: str | None = None) -> None:
        """Stage the genesis record alone on a new journal (written on commit), where
        it would otherwise wait for the first event; nothing on one that has records.
        `at`: the journal's creation time when it is not now (a scripted session dated
        in the past, whose journal-level events must not precede it); never ahead of
        the clock-skew bound."""
        if self._pending or self._host.head.next_seq != 0:
            return
        if at is None:
            at = format_us(self.wall_us)
        else:
            at = canonical_at(at)
            check_not_in_future(at, self.wall_us, clock=self._host.clock_name())
        genesis = genesis_record(at)
        self._pending.append(genesis)
        self._pending_bytes += len(genesis.line)
        self._goal_last_at[None] = genesis.record.at

    def _first_position(self) -> tuple[int, str, PendingRecord | None]:
        """The seq and prev of the transaction's first event, and the genesis record
        staged before it on a new journal (only once that event is accepted)."""
        staged, head = self._pending, self._host.head
        if staged:  # a genesis record alone (seq 0): the first event follows it
            previous = staged[-1].record
            return previous.seq + 1, previous.hash, None
        if head.next_seq == 0:
            genesis = genesis_record(format_us(self.wall_us))
            return 1, genesis.record.hash, genesis
        return head.next_seq, head.prev_hash, None

    def to_write(self) -> list[PendingRecord]:
        """The records this transaction's one write would hold, were it to commit now."""
        return self._final() if self._more else self._pending

    def _stage_more(
        self, kind: str, goal: str | None, data: bytes, at: str, decoded: Any, same_time: bool
    ) -> PendingRecord:
        """Stage an event after the first: the transaction is one of several records,
        so a journal.batch record will lead them, and every seq and hash shifts; they
        are encoded once, at commit. What this returns has the event's final seq but
        no prev or hash until the transaction commits (or `to_write` is called)."""
        more = self._more
        events = len(more) + 2
        # A line is its payload plus an envelope of at most this many bytes (the exact
        # size is checked when it is encoded).
        size = len(data) + len(kind) * 6 + len(goal or "") * 6 + 256
        pending_bytes = self._pending_bytes + size
        if events > BATCH_EVENTS_MAX or pending_bytes > BATCH_BYTES_MAX:
            raise InvalidInput("too many events in one transaction", code=codes.BATCH_TOO_LARGE)
        if len(data) >= LINE_BYTES_MAX:
            raise InvalidInput(
                f"event of {len(data)} bytes exceeds the 1 MiB line limit",
                code=codes.LINE_TOO_LARGE,
            )
        self._pending_bytes = pending_bytes
        self._goal_last_at[goal] = at
        if not same_time:  # else `_checked` holds this goal and time already
            self._checked = (goal, at)
        seq = self._pending[-1].record.seq + events  # the announcement takes the first's
        record = Record(FORMAT_VERSION, seq, at, kind, goal, _Raw(data), "", "")
        pending = _new_pending(PendingRecord, (record, decoded, b""))
        more.append(pending)
        return pending

    def _final(self) -> list[PendingRecord]:
        """The records a transaction of several events writes: a journal.batch record
        announcing how many follow, then the events, chained as usual (SPEC §2.4: all
        or nothing after a crash). The events after the first are the very records
        `append` returned, their prev and hash filled in here (each call chains them
        anew), not built again per event."""
        *genesis, first = self._pending
        staged = first.record  # final for a lone event: its copy moves one seq on
        moved = Record(
            FORMAT_VERSION, staged.seq + 1, staged.at, staged.kind, staged.goal, staged.data, "", ""
        )
        events = [_new_pending(PendingRecord, (moved, first.payload, b"")), *self._more]
        base = genesis[0].record.at if genesis else self._host.head.goal_last_at.get(None)
        # A journal-level time: not before the last journal-level event, nor after a
        # journal-level event of this transaction (times never go back per goal). The
        # last journal-level event's own time when there is one: a batch never moves the
        # journal-level clock, so a price may still be stamped at a past time after it
        # (SPEC §12.4: only that model's latest price, and §2's rule, bound it).
        at = min(
            [base if base is not None else event_time(None, base, self.wall_us, None)]
            + [event.record.at for event in events if event.record.goal is None]
        )
        seq, prev = staged.seq, staged.prev
        announced = JournalBatch(records=len(events))
        data = encode_payload(announced)
        line, digest = encode_line(seq, at, BATCH_KIND, None, data, prev)
        record = Record(FORMAT_VERSION, seq, at, BATCH_KIND, None, _Raw(data), prev, digest)
        written = [*genesis, PendingRecord(record, announced, line)]
        for record, payload, _ in events:
            prev = digest
            line, digest = encode_line(
                record.seq, record.at, record.kind, record.goal, record.data, prev
            )
            if len(line) > LINE_BYTES_MAX:
                raise InvalidInput(
                    f"event of {len(line)} bytes exceeds the 1 MiB line limit",
                    code=codes.LINE_TOO_LARGE,
                )
            record.prev = prev
            record.hash = digest
            written.append(_new_pending(PendingRecord, (record, payload, line)))
        return written
