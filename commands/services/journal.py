"""Journal-level use cases: verify, digest, repair, checkpoint, log, export, import."""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from quotaledger.journal import InvalidInput, Journal, JournalCorrupt, Record, StorageFailure, codes
from quotaledger.journal.chain import Head
from quotaledger.journal.clock import canonical_at
from quotaledger.journal.fsutil import FILE_MODE, fsync_dir, write_all
from quotaledger.journal.target import check_target, is_pg_url
from quotaledger.projections.ledger import EVENT_KINDS, PROJECTOR
from quotaledger.services.base import ServiceBase, check_identifier, event_json
from quotaledger.services.outfile import check_out_path

if TYPE_CHECKING:  # answer shapes are for mypy: building them costs each CLI call
    from quotaledger.services.answers_journal import (
        CheckpointAnswer,
        DigestAnswer,
        ExportAnswer,
        ImportAnswer,
        RecordJson,
        RepairAnswer,
        TornTailJson,
        VerifyAnswer,
        VerifyDigestPart,
    )

Progress = Callable[[int], None]


def parse_digest(text: str) -> tuple[int, str]:
    seq_text, _, hash_hex = text.partition(":")
    if not seq_text.isdigit() or len(hash_hex) != 64 or hash_hex.strip("0123456789abcdef"):
        raise InvalidInput(
            f"--digest {text!r} is not SEQ:HASH (a seq and 64 lowercase hex digits)",
            code=codes.INVALID_DIGEST,
        )
    return int(seq_text), hash_hex


class JournalService(ServiceBase):
    def verify(
        self, *, digest: str | None = None, progress: Progress | None = None
    ) -> VerifyAnswer:
        """Check the whole chain (and, on PostgreSQL, every row's columns against its
        line); with a digest, prove the journal only grew since it; with a checkpoint,
        that the fold from genesis gives its state (SPEC §2.5, §2.6)."""
        anchor = parse_digest(digest) if digest is not None else None
        seen: dict[str, str] = {}

        def remember(record: Record, payload: Any, line: bytes) -> None:
            if anchor is not None and record.seq == anchor[0]:
                seen["hash"] = record.hash

        head = self.journal.verify(progress=progress, visit=remember if anchor else None)
        torn = self.journal.torn_tail
        torn_json: TornTailJson | None = None
        if torn is not None:
            torn_json = {"seq": torn.seq, "offset": torn.offset, "reason": torn.reason}
        digest_part: VerifyDigestPart = {}
        if anchor is not None:
            seq, hash_hex = anchor
            if seq > head.seq:
                raise JournalCorrupt(
                    f"the journal ends at seq {head.seq}: it no longer holds digest seq {seq}",
                    code=codes.DIGEST_NOT_FOUND,
                    seq=seq,
                )
            if seen.get("hash") != hash_hex:
                raise JournalCorrupt(
                    f"record {seq} has hash {seen.get('hash')}, not the digest's {hash_hex}: "
                    "history was rewritten since the digest was taken",
                    code=codes.DIGEST_MISMATCH,
                    seq=seq,
                    expected=hash_hex,
                    found=seen.get("hash"),
                )
            digest_part = {"digest": {"seq": seq, "hash": hash_hex, "contained": True}}
        answer: VerifyAnswer = {
            "ok": True,
            "head": head.to_json(),
            "records": head.next_seq,
            "bytes": head.offset,
            "torn_tail": torn_json,
            **digest_part,
            # The checkpoint is a cache writers trust: the fold from genesis must agree.
            "checkpoint": self.journal.check_checkpoint(head),
        }
        return answer

    def digest(self) -> DigestAnswer:
        head = self.journal.head.to_json()
        if head["seq"] < 0:
            raise InvalidInput("the journal is empty", code=codes.EMPTY_JOURNAL)
        answer: DigestAnswer = {
            "ok": True,
            "seq": head["seq"],
            "hash": head["hash"],
            "journal_id": head["journal_id"],
            "digest": f"{head['seq']}:{head['hash']}",
        }
        return answer

    def repair(self, *, truncate_after: int, at: str | None = None) -> RepairAnswer:
        result = self.journal.repair(truncate_after, at)
        body: RepairAnswer = {
            "ok": True,
            "appended": result.appended,
            "truncated_after_seq": result.truncated_after_seq,
            "quarantine": result.quarantine,
            "quarantined_bytes": result.quarantined_bytes,
            "head": self.journal.head.to_json(),
        }
        if result.event is not None:
            body["event"] = event_json(result.event)
        return body

    def checkpoint(self) -> CheckpointAnswer:
        with self.journal.transaction():
            checkpoint = self.journal.write_checkpoint()
        answer: CheckpointAnswer = {
            "ok": True,
            "seq": checkpoint.seq,
            "hash": checkpoint.hash,
            "offset": checkpoint.offset,
            "projection_version": checkpoint.projection_version,
        }
        return answer

    def log(
        self,
        *,
        goal: str | None = None,
        run: str | None = None,
        kind: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        last: int | None = None,
        follow: bool = False,
        wait: Callable[[], None] | None = None,
    ) -> Iterator[RecordJson]:
        """Events in journal order, filtered (`kind` matches exactly or as a prefix;
        `run`: the events that name that run), the first `limit` or the `last` N.

        The filters are checked now (InvalidInput), the journal read as it is iterated;
        on a corrupt journal the verified prefix comes first, then JournalCorrupt.
        With `follow`, the iterator then waits (`wait()`, by default a short sleep) and
        yields what is appended, by the readers' rules, until the caller stops.
        """
        keep = LogFilter.of(
            goal=goal, run=run, kind=kind, since=since, until=until, limit=limit, last=last
        )
        if goal is not None:
            self.require_goal(goal)
        return self._log(keep, limit, last, follow, wait or _poll_wait)

    def _log(
        self,
        keep: LogFilter,
        limit: int | None,
        last: int | None,
        follow: bool,
        wait: Callable[[], None],
    ) -> Iterator[RecordJson]:
        head = Head()

        def appended() -> Iterator[Record]:
            for record, payload, _line in self.journal.records_after(head):
                if keep.matches(record, payload):
                    yield record

        matching = appended()
        if last is not None:  # only the last N of what is there now
            matching = iter(deque(matching, maxlen=last))
        count = 0
        while True:
            for record in matching:
                if limit is not None and count >= limit:
                    return
                count += 1
                yield record_json(record)
            if not follow or (limit is not None and count >= limit):
                return
            wait()
            matching = appended()

    def export(self, *, to: str, progress: Progress | None = None) -> ExportAnswer:
        """Write every verified record, byte for byte, to a new file (`-`: stdout)."""
        to_path = to
        if to_path == "-":
            records, size_bytes = self._export_to_stdout(progress)
        else:
            records, size_bytes = self._export_to_file(to_path, progress)
        answer: ExportAnswer = {
            "ok": True,
            "to": to_path,
            "records": records,
            "bytes": size_bytes,
            "head": self.journal.head.to_json(),
        }
        return answer

    def _export_to_file(self, to_path: str, progress: Progress | None) -> tuple[int, int]:
        check_out_path("--to", to_path)
        try:
            fd = os.open(
                to_path,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                FILE_MODE,
            )
        except FileExistsError:
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

    def import_(self, *, file: str, progress: Progress | None = None) -> ImportAnswer:
        """Load a verified JSONL journal into this (empty) journal, hashes preserved."""
        source_path = file
        check_import_source(source_path)
        source = Journal.open(source_path, PROJECTOR, write=False, use_checkpoint=False)
        try:
            last = self.journal.import_records(source, progress=progress)
        finally:
            source.close()
        answer: ImportAnswer = {
            "ok": True,
            "appended": True,
            "records": self.journal.head.next_seq,
            "head": self.journal.head.to_json(),
            "event": event_json(last),  # the last record loaded
        }
        return answer


def check_import_source(path: str) -> None:
    """Refuse (exit 2) an `import FILE` that names nothing to import: the advice a
    missing journal gets ("a writing command creates it") would be wrong here."""
    check_target(path, option="FILE")
    if not is_pg_url(path) and not os.path.lexists(path):
        raise InvalidInput(
            f"no file {path} to import", code=codes.IMPORT_SOURCE_NOT_FOUND, path=path
        )


class LogFilter(msgspec.Struct, frozen=True):
    """`log`'s filters, checked when built: input errors are exit 2 before any journal
    is read (the CLI builds one before it opens the journal)."""

    goal: str | None
    run: str | None
    kind: str | None  # without trailing dots: `capacity.` and `capacity` are one domain
    since_at: str | None
    until_at: str | None

    @classmethod
    def of(
        cls,
        *,
        goal: str | None = None,
        run: str | None = None,
        kind: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        last: int | None = None,
    ) -> LogFilter:
        if goal is not None:
            check_identifier("--goal", goal)
        if run is not None:
            check_identifier("--run", run)
        for option, count in (("--limit", limit), ("--last", last)):
            if count is not None and count < 0:
                raise InvalidInput(f"{option} must be >= 0", code=codes.INVALID_OPTION)
        if limit is not None and last is not None:
            raise InvalidInput(
                "give --limit N (the first N) or --last N (the last N), not both",
                code=codes.INVALID_OPTION,
            )
        wanted = None if kind is None else kind.rstrip(".")
        if wanted is not None and not any(_kind_matches(known, wanted) for known in EVENT_KINDS):
            raise InvalidInput(
                f"--kind {kind!r} names no event kind or domain "
                "(e.g. capacity, capacity.observed, journal)",
                code=codes.UNKNOWN_KIND,
            )
        # Checked like every time (SPEC §7): an empty --since is a mistake, not "all".
        since_at = None if since is None else _range_end("--since", since)
        until_at = None if until is None else _range_end("--until", until)
        if since_at is not None and until_at is not None and until_at < since_at:
            raise InvalidInput(
                f"--since {since_at} is after --until {until_at}", code=codes.INVALID_OPTION
            )
        return cls(goal, run, wanted, since_at, until_at)

    def matches(self, record: Record, payload: Any = None) -> bool:
        return (
            (self.goal is None or record.goal == self.goal)
            and (self.kind is None or _kind_matches(record.kind, self.kind))
            and (self.since_at is None or record.at >= self.since_at)
            and (self.until_at is None or record.at <= self.until_at)
            and (self.run is None or names_run(payload, self.run))
        )


def names_run(payload: Any, run: str) -> bool:
    """Whether an event's payload names `run`: its own `run` member (observed,
    rejected, released) or its request's (admitted, refused)."""
    if getattr(payload, "run", None) == run:
        return True
    request = getattr(payload, "request", None)
    return request is not None and getattr(request, "run", None) == run


def _range_end(option: str, text: str) -> str:
    try:
        return canonical_at(text)
    except InvalidInput as error:
        raise InvalidInput(f"{option}: {error.message}", code=error.code) from None


FOLLOW_POLL_S = 0.2
"""How often `log --follow` looks for appended records."""


def _poll_wait() -> None:
    time.sleep(FOLLOW_POLL_S)


def _kind_matches(kind: str, wanted: str) -> bool:
    return kind == wanted or kind.startswith(wanted + ".")


def record_json(record: Record) -> RecordJson:
    answer: RecordJson = {
        "seq": record.seq,
        "at": record.at,
        "kind": record.kind,
        "goal": record.goal,
        "data": msgspec.json.decode(record.data),
        "prev": record.prev,
        "hash": record.hash,
    }
    return answer
