"""Verifying a byte stream of records against the chain, and classifying failures.

`scan` is the one loop every reader and writer uses: it checks each complete line
(self-verifying, seq contiguous, prev chained, `at` canonical and non-decreasing per
goal, payload decodes against its kind's schema) and hands verified records to a
visitor. On the first failure it stops and reports where; `classify_tail` then
decides whether the bytes from there on are a torn tail or mid-log corruption
(SPEC §2.4).
"""

import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import msgspec

from quotaledger.journal.clock import is_canonical_at
from quotaledger.journal.errors import Error
from quotaledger.journal.limits import FORMAT, FORMAT_VERSION, GENESIS_PREV, LINE_BYTES_MAX
from quotaledger.journal.record import (
    BATCH_KIND,
    GENESIS_KIND,
    HASH_MEMBER,
    SUFFIX_BYTES,
    JournalCreated,
    Record,
    decode_record,
    genesis_line,
    hash_matches,
)
from quotaledger.journal.sha256 import empty_sha256_for

PayloadDecoder = Callable[[bytes], Any]
Visitor = Callable[[Record, Any, bytes], None]
"""Called with each verified record, its decoded payload and its line (no newline)."""
RunVisitor = Callable[[Sequence[tuple[Record, Any, bytes]]], None]
"""Folds verified records in order in one call, as a Visitor would one by one (a
projector's `run_visitor`: a transaction's records share a goal and a time, and a
step that knows it looks them up once). A record that does not fold raises NotFolded."""
Noting = Callable[[str, int], None]
"""Told each folded record's goal key ("" for none) and seq (see Fold.dirty)."""

_decode_genesis = msgspec.json.Decoder(JournalCreated).decode


class NotFolded(Exception):
    """A RunVisitor's record at `index` (of the records it was given) does not fold:
    `error` is why (ValueError, OverflowError or a journal Error, as a Visitor's)."""

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


class Head(msgspec.Struct):
    """Where the verified prefix of a journal ends."""

    next_seq: int = 0
    prev_hash: str = GENESIS_PREV
    offset: int = 0
    journal_id: str | None = None
    goal_last_at: dict[str | None, str] = msgspec.field(default_factory=dict)

    @property
    def seq(self) -> int:
        """The seq of the last verified record (-1 for an empty journal)."""
        return self.next_seq - 1

    def copy(self) -> "Head":
        return Head(
            self.next_seq, self.prev_hash, self.offset, self.journal_id, dict(self.goal_last_at)
        )

    def to_json(self) -> dict[str, Any]:
        """The head as `verify` and `digest` print it: `{"seq", "hash", "journal_id"}`."""
        return {"seq": self.seq, "hash": self.prev_hash, "journal_id": self.journal_id}


class _Overlay(dict):  # type: ignore[type-arg]
    """The goal times inside a transaction being verified: its own, over the journal's.
    Not a copy of the journal's: that costs as much as there are goals, per transaction."""

    __slots__ = ("under",)

    def __init__(self, under: dict[str | None, str]) -> None:
        super().__init__()
        self.under = under

    def get(self, key: Any, default: Any = None) -> Any:
        found = dict.get(self, key, _MISSING)
        return self.under.get(key, default) if found is _MISSING else found


class FirstAt(NamedTuple):
    """A goal's first record in a segment of the journal: its time and position."""

    at: str
    seq: int
    offset: int
    prev_hash: str


class Failure(msgspec.Struct, frozen=True):
    """The first record that does not verify."""

    seq: int
    offset: int
    reason: str
    self_verifying: bool
    incomplete: bool = False
    """The snapshot ends inside this line (no newline yet) or inside this transaction:
    a write in progress, or a torn tail once the writer is gone. Never corruption
    (SPEC §2.3, §2.4)."""
    cut_seq: int = -1
    cut_offset: int = -1
    """For a failure inside a transaction: its journal.batch record, where a torn tail
    would begin (a transaction is kept whole or not at all)."""

    def torn_from(self) -> "Failure":
        """This failure placed where a torn tail beginning at it starts."""
        if self.cut_offset < 0:
            return self
        return Failure(self.cut_seq, self.cut_offset, self.reason, self.self_verifying, True)


# One loop on purpose (ruff's complexity limits waived for it alone): every record of
# every read passes through it, and a call per step would cost measurably (the fold's
# per-record budget is in docs/performance.md). record.self_verify states the same
# line rules plainly; tests/journal/test_self_verify_agreement.py keeps the two equal.
def scan(  # noqa: C901, PLR0912, PLR0915
    buf: bytes | memoryview,
    head: Head,
    decoders: Callable[[str], PayloadDecoder | None],
    visit: Visitor | None,
    *,
    stop_after_seq: int | None = None,
    first_at: dict[str | None, FirstAt] | None = None,
    transactions: bool = True,
    batches: list[tuple[int, int]] | None = None,
    visit_run: RunVisitor | None = None,
    _span: tuple[int, int] | None = None,
    _in_batch: bool = False,
    _staged: list[tuple[Record, Any, bytes]] | None = None,
) -> Failure | None:
    """Verify the complete lines of `buf` (which starts at `head.offset`) in order.

    `head` advances past every record that verifies; a trailing partial line, or a
    transaction whose records are not all in `buf`, is left for the caller. Returns
    the first failure, or None. A transaction (a journal.batch record and the records
    it announces) is verified whole before any of its records is visited or `head`
    moves past it; with `transactions` false (a parallel verify's segments) its
    records are checked one by one like any others. `batches` collects the
    (announcement seq, last seq) of every transaction seen. With `first_at`, a goal's
    first record that chains is noted there when `head` knows no time for the goal
    (a parallel verify checks those against the segment before; see journal.fanout).
    `visit_run`, if given, folds each verified transaction's records after its
    announcement in one call instead of `visit` one by one (the same fold).
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    pos, end = (0, len(data)) if _span is None else _span
    find, starts_at = data.find, data.startswith
    view = memoryview(data)  # hashed in place: no copy of each line's body
    empty_sha256 = empty_sha256_for(end - pos)
    goal_last_at = head.goal_last_at
    decoder_of: dict[str, PayloadDecoder | None] = {}
    decode_line = decode_record
    canonical_at = is_canonical_at
    stop = -1 if stop_after_seq is None else stop_after_seq
    # The last `at` found canonical, and its second ("2026-11-29T09:41:12."): a batch
    # shares one time, and an `at` in the same second is canonical iff its last seven
    # characters are six digits and Z (the range check depends on the second only).
    checked_at: str | None = None
    checked_second = _EPOCH_SECOND  # a real canonical second, so the rule holds from the start
    micros_z = _MICROS_Z
    # The head's position lives in locals while the loop runs (three attribute writes
    # per record cost as much as the chain check); `finally` writes it back however
    # the loop ends, so callers see the head after the last verified record.
    next_seq, prev_hash, offset = head.next_seq, head.prev_hash, head.offset
    # The goal of the record before and the time this scan gave it: most records name
    # the goal the one before did, whose last time is then known without a lookup (in
    # a transaction, `goal_last_at` is an _Overlay, whose `get` is a Python call).
    prev_goal: Any = _MISSING
    prev_goal_at: str | None = None
    try:
        while pos < end:
            if stop >= 0 and next_seq > stop:
                return None
            nl = find(b"\n", pos, pos + LINE_BYTES_MAX)
            if nl < 0:
                if end - pos >= LINE_BYTES_MAX:
                    return Failure(next_seq, offset, "line exceeds 1 MiB", False)
                return None  # a partial line: the caller decides what it means
            line = data[pos:nl]
            # Fast path (inlined self_verify; the hot loop of every fold and verify).
            # The suffix checks read `data` in place: `,"hash":"` then 64 bytes then `"}`.
            record = None
            body_end = nl - SUFFIX_BYTES
            if body_end > pos and starts_at(HASH_MEMBER, body_end) and starts_at(b'"}', nl - 2):
                try:
                    record = decode_line(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    record = None
                if record is not None:
                    digest = empty_sha256.copy()
                    digest.update(view[pos:body_end])
                    digest.update(b"}")
                    hex_digest = digest.hexdigest()
                    if (
                        record.hash != hex_digest
                        or not starts_at(hex_digest.encode(), nl - 66)
                        or record.v != FORMAT_VERSION
                    ):
                        record = None
            if record is None:
                if hash_matches(line):  # whole and hashed, yet not a record of ours
                    return Failure(next_seq, offset, why_not_a_record(line), True)
                return Failure(next_seq, offset, why_not_self_verifying(line), False)
            kind = record.kind
            at = record.at
            goal = record.goal
            last = prev_goal_at if goal == prev_goal else goal_last_at.get(goal)
            if (
                record.seq == next_seq
                and record.prev == prev_hash
                and next_seq != 0
                and kind != GENESIS_KIND
                and (
                    at == checked_at
                    or (at.startswith(checked_second) and micros_z(at, 20) is not None)
                    or canonical_at(at)
                )
                and (last is None or at >= last)
            ):
                reason = None  # chains: the common case, checked without a call
                if at != checked_at:
                    checked_at, checked_second = at, at[:20]
                if last is None and first_at is not None:
                    first_at[goal] = FirstAt(at, next_seq, offset, prev_hash)
            else:
                reason = chain_problem(record, next_seq, prev_hash, goal_last_at)
            payload: Any = None
            if reason is None:
                try:
                    if kind == GENESIS_KIND:
                        payload = _decode_genesis(record.data)
                        if payload.format != FORMAT:
                            reason = f"genesis declares format {payload.format!r}, not {FORMAT!r}"
                    else:
                        decode = decoder_of.get(kind, _MISSING)
                        if decode is _MISSING:
                            decode = decoder_of[kind] = decoders(kind)
                        if decode is None:
                            reason = f"unknown event kind {kind!r}"
                        else:
                            payload = decode(record.data)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    reason = f"payload of {kind} does not decode: {exc}"
            if reason is not None:
                return Failure(next_seq, offset, reason, True)
            if kind == BATCH_KIND:
                if _in_batch:
                    return Failure(
                        next_seq, offset, "a journal.batch record inside a transaction", True
                    )
                if batches is not None:
                    batches.append((next_seq, next_seq + payload.records))
                if transactions:
                    after = offset + nl + 1 - pos
                    found = _scan_transaction(
                        data,
                        (nl + 1, end),
                        record,
                        payload,
                        line,
                        offset,
                        after,
                        head.journal_id,
                        goal_last_at,
                        decoders,
                        (visit, visit_run),
                        stop,
                    )
                    if found is None or isinstance(found, Failure):
                        return found  # `head` stays before the announcement
                    goal_last_at.update(found.goal_last_at)
                    prev_goal = _MISSING  # the transaction's records moved goals' times
                    pos += found.offset - offset
                    next_seq, prev_hash, offset = found.next_seq, found.prev_hash, found.offset
                    continue
            if _staged is not None:  # inside a transaction: visited once all of it verifies
                _staged.append((record, payload, line))
            elif visit is not None:
                try:
                    visit(record, payload, line)
                except (ValueError, OverflowError, Error) as exc:
                    # A record that verifies but cannot be folded (an impossible time inside
                    # its payload, say) is corruption at this record, not a reader's error.
                    return Failure(next_seq, offset, f"{kind} does not fold: {exc}", True)
            if next_seq == 0:
                head.journal_id = payload.journal_id
            goal_last_at[goal] = at
            prev_goal, prev_goal_at = goal, at
            next_seq += 1
            prev_hash = record.hash
            offset += nl + 1 - pos
            pos = nl + 1
        return None
    finally:
        head.next_seq, head.prev_hash, head.offset = next_seq, prev_hash, offset


def _scan_transaction(
    data: bytes,
    span: tuple[int, int],
    marker: Record,
    announced: Any,
    marker_line: bytes,
    marker_offset: int,
    after_offset: int,
    journal_id: str | None,
    goal_last_at: dict[str | None, str],
    decoders: Callable[[str], PayloadDecoder | None],
    visitors: tuple[Visitor | None, RunVisitor | None],
    stop: int,
) -> Head | Failure | None:
    """The transaction a journal.batch record announces, verified whole before any
    record of it is visited (by the visitor, or the records after the announcement
    by the run visitor in one call): the head after it; None if `data` ends before
    its last record (the caller carries it, announcement included); or its first
    failure, whose torn tail would begin at the announcement."""
    visit, visit_run = visitors
    last_seq = marker.seq + announced.records
    stop_at = last_seq if stop < 0 else min(stop, last_seq)
    inner = Head(marker.seq + 1, marker.hash, after_offset, journal_id, _Overlay(goal_last_at))
    inner.goal_last_at[None] = marker.at
    staged: list[tuple[Record, Any, bytes]] | None = None if visit is None else []
    failure = scan(
        data,
        inner,
        decoders,
        None,
        stop_after_seq=stop_at,
        _span=span,
        _in_batch=True,
        _staged=staged,
    )
    if failure is not None:
        return msgspec.structs.replace(failure, cut_seq=marker.seq, cut_offset=marker_offset)
    if inner.next_seq <= stop_at:
        return None
    if visit is not None and staged is not None:
        record = marker
        try:
            visit(marker, announced, marker_line)
            if visit_run is not None:
                visit_run(staged)
            else:
                for record, payload, line in staged:
                    visit(record, payload, line)
        except NotFolded as exc:
            record = staged[exc.index][0]
            return _not_folded(record, exc.error, marker, marker_offset, marker_line, staged)
        except (ValueError, OverflowError, Error) as exc:
            return _not_folded(record, exc, marker, marker_offset, marker_line, staged)
    return inner


def _not_folded(
    record: Record,
    error: Exception,
    marker: Record,
    marker_offset: int,
    marker_line: bytes,
    staged: list[tuple[Record, Any, bytes]],
) -> Failure:
    """The failure of a transaction's `record` that verifies but does not fold."""
    reason = f"{record.kind} does not fold: {error}"
    at_offset = _offset_of(record, marker, marker_offset, marker_line, staged)
    return Failure(record.seq, at_offset, reason, True, False, marker.seq, marker_offset)


def _offset_of(
    record: Record,
    marker: Record,
    marker_offset: int,
    marker_line: bytes,
    staged: list[tuple[Record, Any, bytes]],
) -> int:
    """Where `record` (the announcement at `marker_offset`, or one of the `staged`
    records after it) starts: worked out for a record that does not fold, instead of
    counted along while every record of every transaction is folded."""
    if record is marker:
        return marker_offset
    at_offset = marker_offset + len(marker_line) + 1
    for before, _, line in staged:
        if before is record:
            break
        at_offset += len(line) + 1
    return at_offset


_MISSING: Any = object()
_MICROS_Z = re.compile(r"[0-9]{6}Z").fullmatch
_EPOCH_SECOND = "1970-01-01T00:00:00."


def chain_problem(
    record: Record, next_seq: int, prev_hash: str, goal_last_at: dict[str | None, str]
) -> str | None:
    if record.seq != next_seq:
        return f"seq {record.seq} where {next_seq} was expected"
    if record.prev != prev_hash:
        return "prev does not match the previous record's hash"
    if (record.seq == 0) != (record.kind == GENESIS_KIND) or (record.seq == 0) != (
        record.goal is None and record.prev == GENESIS_PREV
    ):
        return "only the first record is the genesis record"
    if not is_canonical_at(record.at):
        return f"at {record.at!r} is not a canonical UTC timestamp"
    last = goal_last_at.get(record.goal)
    if last is not None and record.at < last:
        return f"at {record.at} is earlier than the goal's previous event ({last})"
    return None


def why_not_self_verifying(line: bytes) -> str:
    if not line.strip(b"\x00"):
        return "NUL bytes"
    try:
        msgspec.json.decode(line)
    except msgspec.DecodeError:
        return "line does not parse"
    return "hash does not match the line's bytes"


def why_not_a_record(line: bytes) -> str:
    """Why a self-verifying line is not a record of this format (a newer version, or
    members the envelope does not have)."""
    found = msgspec.json.decode(line)
    version = found.get("v")
    if version != FORMAT_VERSION:
        return f"a self-verifying line of format version {version!r}, not {FORMAT_VERSION}"
    members = [name for name in found if name not in Record.__struct_fields__]
    missing = [name for name in Record.__struct_fields__ if name not in found]
    if members or missing:
        return (
            f"a self-verifying line whose members do not match the record envelope "
            f"(extra: {members}, missing: {missing})"
        )
    return "a self-verifying line that is not a valid record"


TailKind = Literal["torn", "corrupt", "not_a_journal"]


def classify_tail(rest: bytes, failure: Failure) -> TailKind:
    """Torn tail, mid-log corruption or not a journal, for the bytes from the failing
    record to the end of the caller's snapshot.

    Acknowledged bytes are never torn: a self-verifying line (whatever its version or
    members, and even over 1 MiB) that fails to chain, decode or be a record is
    corruption. Otherwise it is corruption only if some self-verifying line follows
    the failing one. A failure at the very first byte is the file's first line: unless
    that line is a genesis of this format (or the file is what a crash during creation
    leaves: NUL bytes, or a strict prefix of a genesis line) the file is not a journal.
    """
    if failure.offset == 0 and not_a_journal(rest):
        return "not_a_journal"
    if failure.incomplete:
        return "torn"
    if failure.self_verifying:
        return "corrupt"
    if b"\n" not in rest:
        return "torn"
    complete = rest.split(b"\n")[:-1]  # the failing line first, if it is complete
    if any(hash_matches(line) for line in complete):
        return "corrupt"
    return "torn"


def not_a_journal(start: bytes) -> bool:
    """Whether a file that begins with `start` (at least its first line, or all of it)
    is not a journal: not empty, not what a crash during creation leaves (NUL bytes, a
    strict prefix of a genesis line), and its first line is not a genesis record of
    this format (valid or not: a JSON object of kind journal.created whose data
    declares FORMAT)."""
    if not start.strip(b"\x00") or is_genesis_prefix(start):
        return False
    line = start.split(b"\n", 1)[0]
    try:
        found = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return True
    if not isinstance(found, dict) or found.get("kind") != GENESIS_KIND:
        return True
    data = found.get("data")
    return not (isinstance(data, dict) and data.get("format") == FORMAT)


def _genesis_template() -> bytes:
    """A genesis line with every variable byte replaced: `#` a digit, `%` a hex digit."""
    at = "2000-01-01T00:00:00.000000Z"
    line, digest = genesis_line("0" * 32, at)
    text = line[:-1].decode()
    masked_at = "".join("#" if c.isdigit() else c for c in at)
    text = text.replace(at, masked_at).replace('"' + "0" * 32 + '"', '"' + "%" * 32 + '"')
    return text.replace(digest, "%" * 64).encode()


_GENESIS_TEMPLATE = _genesis_template()
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdef")


def is_genesis_prefix(data: bytes) -> bool:
    """Whether `data` is a strict prefix of some genesis line of this format (what a
    crash while the journal was being created can leave)."""
    template = _GENESIS_TEMPLATE
    if not data or len(data) > len(template):  # the whole line would end with "\n"
        return False
    for byte, want in zip(data, template, strict=False):
        if want == 0x23:  # "#"
            if byte not in _DIGITS:
                return False
        elif want == 0x25:  # "%"
            if byte not in _HEX:
                return False
        elif byte != want:
            return False
    return True
