"""Full verification of a large journal file on every core.

Verification is the one read that needs no state: each record is checked against
its own bytes, its neighbour and its goal's previous time. So the file is cut at
line boundaries into segments; worker processes `scan` them independently, each
trusting its segment's first record for seq and prev; then the parent walks the
segments in order and checks what a worker could not see: that each segment's
first record chains to the end of the one before, and that each goal's first time
in a segment is not before its last time in the segments before. The first failure
found that way is exactly the one a sequential scan would report.
"""

import os
import threading
from collections.abc import Callable

import msgspec

from quotaledger.journal.chain import (
    Failure,
    FirstAt,
    Head,
    PayloadDecoder,
    chain_problem,
    scan,
    why_not_self_verifying,
)
from quotaledger.journal.limits import LINE_BYTES_MAX
from quotaledger.journal.record import self_verify

Decoders = Callable[[str], PayloadDecoder | None]
Progress = Callable[[int], None]

PARALLEL_VERIFY_BYTES_MIN = 32 << 20
"""Below this, starting worker processes costs more than it saves."""
SEGMENTS_PER_WORKER = 4
"""More segments than workers, so progress moves and an uneven segment evens out."""
SEGMENT_BYTES_MAX = 64 << 20
"""A worker holds its segment in memory: more segments for a larger file."""


class Segment(msgspec.Struct):
    """What a worker found in bytes [start, end) of the journal."""

    start: int
    first_line: bytes  # the segment's first line (no newline), checked by the parent
    head: Head  # after the last record of the segment that verified
    first_at: dict[str | None, FirstAt]
    failure: Failure | None
    batches: list[tuple[int, int]]  # (announcement seq, last seq) of each transaction


_decoders: Decoders | None = None
"""The payload decoders, inherited by forked workers (they are not picklable)."""


def verify_file(
    fd: int, size_bytes: int, decoders: Decoders, progress: Progress | None = None
) -> tuple[Head, Failure | None] | None:
    """Verify bytes [0, size_bytes) of the journal file open as `fd` in parallel: the
    head of the verified prefix and the first failure, or None when a sequential scan
    is the better tool. Workers read through the same descriptor (inherited by the
    fork), never by path, so they read the file the store checked when it opened it."""
    workers = min(len(os.sched_getaffinity(0)), 8)
    if workers < 2 or size_bytes < PARALLEL_VERIFY_BYTES_MIN:
        return None
    if threading.active_count() > 1:
        return None  # a fork copies only this thread, and any lock another one holds
    # Imported only here: every CLI command imports this module, few need a pool.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    count = max(workers * SEGMENTS_PER_WORKER, -(-size_bytes // SEGMENT_BYTES_MAX))
    bounds = _segment_bounds(fd, size_bytes, count)
    if bounds is None:
        return None
    global _decoders
    _decoders = decoders
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            starts, ends = bounds[:-1], bounds[1:]
            head = Head()
            batches: list[tuple[int, int]] = []
            failure: Failure | None = None
            for segment in pool.map(_verify_segment, [fd] * len(starts), starts, ends):
                if progress is not None:
                    progress(segment.head.offset - segment.start)
                batches += segment.batches
                failure = _join(head, segment)
                if failure is not None:
                    # Drop the segments not started; wait for the running ones (at
                    # most one per worker), so no pool thread outlives this call.
                    pool.shutdown(wait=True, cancel_futures=True)
                    break
            if _ends_inside_a_transaction(batches, head, failure):
                return None  # the sequential scan says where that transaction's tail begins
            return head, failure
    finally:
        _decoders = None


def _ends_inside_a_transaction(
    batches: list[tuple[int, int]], head: Head, failure: Failure | None
) -> bool:
    """Whether the verified prefix the segments found ends inside a transaction (or
    transactions overlap): workers check records one by one, and only the sequential
    scan keeps a transaction whole."""
    end_seq = failure.seq if failure is not None else head.next_seq
    previous_last = -1
    for first, last in batches:
        if first <= previous_last or first < end_seq <= last:
            return True
        previous_last = last
    return False


def _segment_bounds(fd: int, size_bytes: int, count: int) -> list[int] | None:
    """Offsets that cut the file into `count` segments, each just after a newline."""
    bounds = [0]
    for i in range(1, count):
        target = size_bytes * i // count
        if target <= bounds[-1]:
            continue
        window = os.pread(fd, LINE_BYTES_MAX + 1, target - 1)
        nl = window.find(b"\n")
        if nl < 0:
            return None  # no line ends near here: the sequential scan explains why
        cut = target + nl
        if cut >= size_bytes:
            break
        if cut > bounds[-1]:
            bounds.append(cut)
    bounds.append(size_bytes)
    return bounds


def _read(fd: int, start: int, end: int) -> bytes:
    parts = []
    while start < end:
        part = os.pread(fd, end - start, start)
        if not part:
            break  # the file is shorter than it was: the scan reports where it ends
        parts.append(part)
        start += len(part)
    return b"".join(parts)


def _verify_segment(fd: int, start: int, end: int) -> Segment:
    """Worker: scan [start, end), trusting the first record for seq and prev."""
    assert _decoders is not None
    data = _read(fd, start, end)
    head = Head(offset=start)
    first_at: dict[str | None, FirstAt] = {}
    nl = data.find(b"\n")
    first_line = data[:nl] if nl >= 0 else data
    if start > 0:
        record = self_verify(first_line) if nl >= 0 else None
        if record is None:
            # The parent reports it at the seq the segment before ends with.
            reason = why_not_self_verifying(first_line) if nl >= 0 else "unterminated last line"
            unchained = Failure(-1, start, reason, False)
            return Segment(start, first_line, head, first_at, unchained, [])
        head.next_seq, head.prev_hash = record.seq, record.prev
    batches: list[tuple[int, int]] = []
    failure = scan(
        data,
        head,
        _decoders,
        None,
        first_at=first_at if start > 0 else None,
        transactions=False,
        batches=batches,
    )
    if failure is None and head.offset < end:
        failure = Failure(head.next_seq, head.offset, "unterminated last line", False, True)
    return Segment(start, first_line, head, first_at, failure, batches)


def _join(head: Head, segment: Segment) -> Failure | None:
    """Extend `head` (the end of the segments before) by `segment`; the first failure."""
    if segment.start == 0:
        _take(head, segment.head)
        return segment.failure
    failure = segment.failure
    if failure is not None and failure.seq < 0:
        return Failure(head.next_seq, segment.start, failure.reason, False)
    record = self_verify(segment.first_line)
    assert record is not None  # the worker verified it
    reason = chain_problem(record, head.next_seq, head.prev_hash, head.goal_last_at)
    if reason is not None:
        return Failure(head.next_seq, segment.start, reason, True)
    # A goal's first time in this segment must not be before its last time so far; of
    # those that are, and the worker's own failure, the earliest record is the answer
    # (on a tie the time is checked first, as the sequential scan does).
    earliest: tuple[FirstAt, str] | None = None
    for goal, first in segment.first_at.items():
        last = head.goal_last_at.get(goal)
        if last is None or first.at >= last:
            continue
        if earliest is None or first.seq < earliest[0].seq:
            earliest = first, f"at {first.at} is earlier than the goal's previous event ({last})"
    if earliest is not None and (failure is None or earliest[0].seq <= failure.seq):
        first, why = earliest
        head.next_seq, head.prev_hash, head.offset = first.seq, first.prev_hash, first.offset
        return Failure(first.seq, first.offset, why, True)
    _take(head, segment.head)
    return failure


def _take(head: Head, after: Head) -> None:
    head.next_seq, head.prev_hash, head.offset = after.next_seq, after.prev_hash, after.offset
    head.goal_last_at.update(after.goal_last_at)
    if after.journal_id is not None:
        head.journal_id = after.journal_id
