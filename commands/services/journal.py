"""Journal-level use cases: verify, digest, repair, checkpoint, log, export, import."""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from quotaledger.journal import InvalidInput, Journal, JournalCorrupt, Record, StorageFailure, codes
from quotaledger.journal.chain import Head
from quotaledger.journal.clock import canonical_at
from quotaledger.journal.filestore import FileStore, open_for_read
from quotaledger.journal.fsutil import FILE_MODE, fsync_dir, write_all
from quotaledger.journal.limits import FOLLOW_POLL_S
from quotaledger.projections.ledger import PROJECTOR
from quotaledger.services.base import ServiceBase
from quotaledger.services.outfile import refuse_journal
from quotaledger.usecases.decode import event_of, event_or_unset
from quotaledger.usecases.journal import (
    CheckpointAnswer,
    CheckpointCheck,
    CheckpointRequest,
    DecisionsChecked,
    DigestAnswer,
    DigestContained,
    DigestRequest,
    ExportAnswer,
    ExportRequest,
    ImportAnswer,
    ImportRequest,
    InsertedBy,
    LogAnswer,
    LogRequest,
    NotReproducedDecision,
    RepairAnswer,
    RepairRequest,
    TornTail,
    VerifyAnswer,
    VerifyRequest,
    head_of,
    kind_matches,
    parse_digest,
)

Progress = Callable[[int], None]


class JournalService(ServiceBase):
    def verify(self, request: VerifyRequest, progress: Progress | None = None) -> VerifyAnswer:
        """Check the whole chain (and, on PostgreSQL, every row's columns against its
        line); with a digest, prove the journal only grew since it; with a checkpoint,
        that the fold from genesis gives its state (SPEC §2.5, §2.6)."""
        anchor = None if request.digest is None else parse_digest("digest", request.digest)
        seen: dict[str, str] = {}

        def remember(record: Record, payload: Any, line: bytes) -> None:
            if anchor is not None and record.seq == anchor[0]:
                seen["hash"] = record.hash

        head = self.journal.verify(progress=progress, visit=remember if anchor else None)
        torn = self.journal.torn_tail
        if head.next_seq == 0 and torn is None:
            # Nothing to vouch for: "OK" would read as a journal verified (`digest`
            # says the same of it).
            raise InvalidInput("the journal is empty: nothing to verify", code=codes.EMPTY_JOURNAL)
        torn_tail = None if torn is None else TornTail(torn.seq, torn.offset, torn.reason)
        contained: DigestContained | msgspec.UnsetType = msgspec.UNSET
        if anchor is not None:
            contained = _contained(anchor, head, seen.get("hash"))
        # The checkpoint is a cache writers trust: the fold from genesis must agree.
        check = self.journal.check_checkpoint(head)
        inserters = self.journal.inserters()
        decisions = _decisions_reproduced(self.journal) if request.decisions else msgspec.UNSET
        return VerifyAnswer(
            ok=True,
            head=head_of(head.to_json()),
            records=head.next_seq,
            bytes=head.offset,
            torn_tail=torn_tail,
            digest=contained,
            checkpoint=None if check is None else msgspec.convert(check, CheckpointCheck),
            inserted_by=msgspec.UNSET
            if inserters is None
            else [InsertedBy(*inserter) for inserter in inserters],
            decisions=decisions,
        )

    def digest(self, request: DigestRequest) -> DigestAnswer:
        head = head_of(self.journal.head.to_json())
        if head.seq < 0:
            raise InvalidInput("the journal is empty", code=codes.EMPTY_JOURNAL)
        return DigestAnswer(
            ok=True,
            seq=head.seq,
            hash=head.hash,
            journal_id=head.journal_id,
            digest=f"{head.seq}:{head.hash}",
        )

    def _require_file(self) -> None:
        """A command that works on an existing journal (checkpoint, repair) given a
        path where none is: `journal_not_found`, as readers say (SPEC §8), before its
        lock would create an empty file there."""
        store = self.journal.store
        if isinstance(store, FileStore) and store.local_fd() is None:
            os.close(open_for_read(store.path))  # raises journal_not_found

    def repair(self, request: RepairRequest) -> RepairAnswer:
        self._require_file()
        result = self.journal.repair(request.truncate_after, request.at)
        return RepairAnswer(
            ok=True,
            appended=result.appended,
            truncated_after_seq=result.truncated_after_seq,
            quarantine=result.quarantine,
            quarantined_bytes=result.quarantined_bytes,
            head=head_of(self.journal.head.to_json()),
            event=event_or_unset(result.event),
        )

    def checkpoint(self, request: CheckpointRequest) -> CheckpointAnswer:
        self._require_file()
        with self.journal.transaction():
            checkpoint = self.journal.write_checkpoint()
        return CheckpointAnswer(
            ok=True,
            seq=checkpoint.seq,
            hash=checkpoint.hash,
            offset=checkpoint.offset,
            projection_version=checkpoint.projection_version,
        )

    def log(
        self, request: LogRequest, wait: Callable[[], None] | None = None
    ) -> Iterator[LogAnswer]:
        """Events in journal order, as `request` filters them.

        The journal is read as it is iterated; on a corrupt journal the verified
        prefix comes first, then JournalCorrupt. With `follow`, the iterator then
        waits (`wait()`, by default a short sleep) and yields what is appended, by the
        readers' rules, until the caller stops.
        """
        keep = LogFilter.of(request)
        if request.goal is not None:
            self.require_goal(request.goal, pools_too=True)  # a pool's stream too
        return self._log(keep, request.limit, request.last, request.follow, wait or _poll_wait)

    def _log(
        self,
        keep: LogFilter,
        limit: int | None,
        last: int | None,
        follow: bool,
        wait: Callable[[], None],
    ) -> Iterator[LogAnswer]:
        head = Head()
        kept = _Kept(keep, follow)

        def answers() -> Iterator[LogAnswer]:
            matching = kept.records(self.journal.records_after(head))
            if last is not None:  # only the last N of what is there now
                # The journal cannot hold more than sys.maxsize records, and deque's
                # maxlen must fit one: `--last 10**20` means all of them.
                matching = iter(deque(matching, maxlen=min(last, sys.maxsize)))
            return _attributed(self.journal, matching)

        matching = answers()
        count = 0
        while True:
            for answer in matching:
                if limit is not None and count >= limit:
                    return
                count += 1
                yield answer
            kept.require_run()  # after the first pass, before anything was yielded
            if not follow or (limit is not None and count >= limit):
                return
            wait()
            matching = answers()

    def export(self, request: ExportRequest, progress: Progress | None = None) -> ExportAnswer:
        """Write every verified record, byte for byte, to a new file (`-`: stdout)."""
        to_path = request.to
        if to_path == "-":
            records, size_bytes = self._export_to_stdout(progress)
        else:
            records, size_bytes = self._export_to_file(to_path, progress)
        return ExportAnswer(
            ok=True,
            to=to_path,
            records=records,
            bytes=size_bytes,
            head=head_of(self.journal.head.to_json()),
        )

    def _export_to_file(self, to_path: str, progress: Progress | None) -> tuple[int, int]:
        try:
            fd = os.open(
                to_path,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                FILE_MODE,
            )
        except FileExistsError:
            refuse_journal("to", to_path)  # the sharper code when it holds a journal
            raise InvalidInput(
                f"{to_path} already exists; export never overwrites",
                code=codes.EXPORT_TARGET_EXISTS,
            ) from None
        except OSError as exc:
            raise StorageFailure(f"cannot create {to_path}: {exc.strerror}") from exc
        try:
            records, size_bytes = self._export_lines(lambda data: write_all(fd, data), progress)
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            os.unlink(to_path)
            raise StorageFailure(f"export to {to_path} failed: {exc.strerror}") from exc
        except BaseException:
            os.close(fd)
            os.unlink(to_path)
            raise
        os.close(fd)
        fsync_dir(to_path)
        return records, size_bytes

    def _export_lines(
        self, write: Callable[[bytes], int], progress: Progress | None
    ) -> tuple[int, int]:
        """Every verified record's line through `write`, in 4 MiB pieces; the counts."""
        records = size_bytes = 0
        buffer: list[bytes] = []
        buffered = 0
        for _record, _payload, line in self.journal.records(progress=progress):
            buffer.append(line + b"\n")
            buffered += len(line) + 1
            records += 1
            if buffered >= 1 << 22:
                size_bytes += write(b"".join(buffer))
                buffer.clear()
                buffered = 0
        size_bytes += write(b"".join(buffer))
        return records, size_bytes

    def _export_to_stdout(self, progress: Progress | None) -> tuple[int, int]:
        stdout = sys.stdout
        binary = getattr(stdout, "buffer", None)  # absent when stdout is a text buffer

        def write(data: bytes) -> int:
            if binary is not None:
                binary.write(data)
            else:
                stdout.write(data.decode())
            return len(data)

        stdout.flush()
        try:
            counts = self._export_lines(write, progress)
            stdout.flush()
        except OSError as exc:  # a broken pipe too: `export --to - | head`
            raise StorageFailure(f"export to stdout failed: {exc.strerror or exc}") from None
        return counts

    def import_(self, request: ImportRequest, progress: Progress | None = None) -> ImportAnswer:
        """Load a verified JSONL journal into this (empty) journal, hashes preserved."""
        source = Journal.open(request.file, PROJECTOR, write=False, use_checkpoint=False)
        try:
            if not request.allow_unreproduced:
                # A well-chained history no version of the rules could have produced is
                # refused before anything is loaded (SPEC §7).
                _decisions_reproduced(source, allow="allow_unreproduced")
            last = self.journal.import_records(source, progress=progress)
        finally:
            source.close()
        return ImportAnswer(
            ok=True,
            appended=True,
            records=self.journal.head.next_seq,
            head=head_of(self.journal.head.to_json()),
            event=event_of(last),  # the last record loaded
        )


def _decisions_reproduced(journal: Journal[Any], allow: str | None = None) -> DecisionsChecked:
    """Every recorded decision of `journal` re-taken on a fold of its own from genesis
    (SPEC §7); `decision_not_reproduced` (exit 3) naming those that were not, and the
    request's field that would `allow` them (each caller words it its own way)."""
    from quotaledger.projections.audit import check_decisions

    check = check_decisions(journal.records())
    found = [
        NotReproducedDecision(n.seq, n.hash, n.kind, n.goal, n.run, list(n.differences))
        for n in check.not_reproduced
    ]
    if found:
        seqs = ", ".join(str(n.seq) for n in found[:10]) + (", ..." if len(found) > 10 else "")
        text = (
            f"{len(found)} of {check.checked} recorded decisions of {journal.store.target} are "
            f"not reproduced by the rules on the state before them (seq {seqs}): the history "
            "was edited or forged, or the rules changed; `quotaledger audit --seq N` explains one"
        )
        raise JournalCorrupt(
            text if allow is None else lambda name: f"{text}; {name} imports it anyway",
            about=allow,
            code=codes.DECISION_NOT_REPRODUCED,
            checked=check.checked,
            not_reproduced=msgspec.to_builtins(found),
        )
    return DecisionsChecked(check.checked, [])


def _contained(anchor: tuple[int, str], head: Head, found: str | None) -> DigestContained:
    """The proof that the record at the digest's seq still has the digest's hash."""
    seq, hash_hex = anchor
    if seq > head.seq:
        raise JournalCorrupt(
            f"the journal ends at seq {head.seq}: it no longer holds digest seq {seq}",
            code=codes.DIGEST_NOT_FOUND,
            seq=seq,
        )
    if found != hash_hex:
        raise JournalCorrupt(
            f"record {seq} has hash {found}, not the digest's {hash_hex}: "
            "history was rewritten since the digest was taken",
            code=codes.DIGEST_MISMATCH,
            seq=seq,
            expected=hash_hex,
            found=found,
        )
    return DigestContained(seq, hash_hex, True)


class LogFilter(msgspec.Struct, frozen=True):
    """`log`'s filters, from a request its type has checked."""

    goal: str | None
    run: str | None
    kind: str | None
    since_at: str | None
    until_at: str | None

    @classmethod
    def of(cls, request: LogRequest) -> LogFilter:
        since, until = request.since, request.until
        return cls(
            request.goal,
            request.run,
            request.wanted_kind(),
            None if since is None else canonical_at(since),
            None if until is None else canonical_at(until),
        )

    def matches(self, record: Record, payload: Any = None) -> bool:
        return (
            (self.goal is None or record.goal == self.goal)
            and (self.kind is None or kind_matches(record.kind, self.kind))
            and (self.since_at is None or record.at >= self.since_at)
            and (self.until_at is None or record.at <= self.until_at)
            and (self.run is None or names_run(payload, self.run))
        )

    def in_scope(self, record: Record, payload: Any) -> bool:
        """Whether the record is of the goal and names the run, whatever its kind and
        time: a run no record names does not exist (`unknown_run`)."""
        return (self.goal is None or record.goal == self.goal) and (
            self.run is None or names_run(payload, self.run)
        )


class _Kept:
    """The records `log` keeps, and whether a pass met its run (`--run`)."""

    def __init__(self, keep: LogFilter, follow: bool) -> None:
        self.keep = keep
        # A run no record names is refused, unless followed: its first event may be
        # about to come (a runner not started yet), and following it is waiting for it.
        self.run_seen = keep.run is None or follow

    def records(self, read: Iterator[tuple[Record, Any, bytes]]) -> Iterator[Record]:
        for record, payload, _line in read:
            if self.keep.matches(record, payload):
                self.run_seen = True
                yield record
            elif not self.run_seen:
                self.run_seen = self.keep.in_scope(record, payload)

    def require_run(self) -> None:
        if not self.run_seen:
            raise unknown_run(self.keep.run, self.keep.goal)


def unknown_run(run: str | None, goal: str | None) -> InvalidInput:
    """`log` or `audit` of a run no event names (SPEC §8: exit 2, never an empty answer)."""
    where = "the journal" if goal is None else f"goal {goal!r}"
    return InvalidInput(
        f"no event of {where} names run {run!r}; quotaledger log"
        + ("" if goal is None else f" --goal {goal}")
        + " lists the events",
        code=codes.UNKNOWN_RUN,
        run=run,
    )


def names_run(payload: Any, run: str) -> bool:
    """Whether an event's payload names `run`: its own `run` member (observed,
    rejected, released) or its request's (admitted, refused)."""
    if getattr(payload, "run", None) == run:
        return True
    request = getattr(payload, "request", None)
    return request is not None and getattr(request, "run", None) == run


def _poll_wait() -> None:
    time.sleep(FOLLOW_POLL_S)


def log_answer(
    record: Record, inserted_by: str | msgspec.UnsetType | None = msgspec.UNSET
) -> LogAnswer:
    return LogAnswer(
        record.seq,
        record.at,
        record.kind,
        record.goal,
        msgspec.json.decode(record.data),
        record.prev,
        record.hash,
        inserted_by,
    )


LOG_ATTRIBUTION_BATCH = 256
"""Records whose inserting roles one query reads (PostgreSQL's `inserted_by`)."""


def _attributed(journal: Journal[Any], records: Iterator[Record]) -> Iterator[LogAnswer]:
    """Each record as `log` gives it; on a store that records who inserted it
    (PostgreSQL), with the role, read for a batch of records at a time. The records
    read before a failure (the verified prefix of a corrupt journal) come first."""
    if journal.inserted_by(0, -1) is None:  # a file: nobody to name
        for record in records:
            yield log_answer(record)
        return
    while True:
        batch, failure = _next_batch(records, LOG_ATTRIBUTION_BATCH)
        if batch:
            roles = journal.inserted_by(batch[0].seq, batch[-1].seq) or {}
            for record in batch:
                yield log_answer(record, roles.get(record.seq))
        if failure is not None:
            raise failure
        if len(batch) < LOG_ATTRIBUTION_BATCH:
            return


def _next_batch(records: Iterator[Record], size: int) -> tuple[list[Record], JournalCorrupt | None]:
    """Up to `size` records, and the corruption that ended them early, if any."""
    batch: list[Record] = []
    try:
        for record in records:
            batch.append(record)
            if len(batch) >= size:
                break
    except JournalCorrupt as exc:
        return batch, exc
    return batch, None
