"""The store contract, written once and run against both stores (file and PostgreSQL).

Store-level tests drive the `Store` protocol itself, with records encoded here;
engine-level tests use the toy projector; end-to-end tests drive the real CLI.
`store_target` (below) is a fresh file path or a fresh schema URL.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest

from quotaledger.journal import (
    Journal,
    JournalCorrupt,
    LockTimeout,
    StorageFailure,
    TimeRegression,
    filestore,
    open_store,
    pgstore,
)
from quotaledger.journal.clock import format_us, parse_at
from quotaledger.journal.goalsources import WHOLE_KEY
from quotaledger.journal.limits import GENESIS_PREV
from quotaledger.journal.record import encode_line, encode_payload, genesis_line, self_verify
from quotaledger.journal.sections import Header, new_file_id
from quotaledger.journal.store import PendingRecord, Store, checkpoints_of, local_file_of
from tests.checkpoint_files import sections_of
from tests.store.store_helpers import fresh_schema
from tests.support import REPO, run_cli
from tests.toyprojector import TOY, Note

TRICKY = 'tab\t back\\slash nl\n quote" é 中 \u2028 \\u0000'


def append_notes(journal: Journal, values: list[int], goal: str = "g") -> list[bytes]:
    """One transaction appending a note per value; the lines written (no newline): a
    transaction of several is led by its journal.batch record."""
    with journal.transaction() as txn:
        for n in values:
            txn.append("toy.note", goal, Note(n=n, text=TRICKY), txn.time_for(goal))
    return [p.line[:-1] for p in txn.committed if p.record.seq != 0]  # not the genesis


def read_lines(target: str) -> list[bytes]:
    with Journal.open(target, TOY, write=False) as reader:
        return [line for _record, _payload, line in reader.records()]


def cli(target: str, *args: str) -> object:
    return run_cli(*args, "--journal", target, "--json")


def configure_budget(target: str, units: int, *extra: str):
    return cli(
        target, "budget", "configure", "--goal", "g", "--allowed-units", str(units),
        "--window-hours", "1", *extra,
    )  # fmt: skip


def tamper(target: str, seq: int, old: bytes, new: bytes) -> None:
    """Edit record `seq` behind quotaledger's back (a superuser, for PostgreSQL)."""
    if target.startswith("postgresql://"):
        import psycopg

        from quotaledger.journal.pgstore import split_url

        conninfo, schema = split_url(target)
        table = f'"{schema}".quotaledger_events'
        with psycopg.connect(conninfo) as conn:  # one transaction
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            cur = conn.execute(
                f"UPDATE {table} SET line = replace(line, %s, %s) WHERE seq = %s",
                (old.decode(), new.decode(), seq),
            )
            assert cur.rowcount == 1
            conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
        return
    data = Path(target).read_bytes()
    lines = data.split(b"\n")
    assert old in lines[seq]
    lines[seq] = lines[seq].replace(old, new, 1)
    Path(target).write_bytes(b"\n".join(lines))


def snapshot(target: str) -> list[bytes]:
    """Everything the store holds, without verifying it (to prove nothing changed)."""
    store = open_store(target, write=False)
    try:
        return list(store.chunks(0, 0))
    finally:
        store.close()


@pytest.fixture(params=["file", "pg"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A journal target no one has used yet: a file path or a postgresql:// URL."""
    if request.param == "file":
        yield str(tmp_path / "journal.jsonl")
        return
    with fresh_schema(request.getfixturevalue("pg_server")) as url:
        yield url


@pytest.fixture
def is_pg(store_target: str) -> bool:
    return store_target.startswith("postgresql://")


# -- the Store protocol itself (no Journal): what both stores promise ------------------

AT = "2026-01-01T00:00:00.000000Z"


def encoded(line: bytes) -> PendingRecord:
    record = self_verify(line[:-1])
    assert record is not None
    return PendingRecord(record, None, line)


def new_chain(notes: int) -> list[PendingRecord]:
    """A new journal's records as a writer encodes them: its genesis, then `notes`."""
    line, _ = genesis_line(uuid.uuid4().hex, AT)
    return [encoded(line), *more_notes(encoded(line), notes)]


def more_notes(after: PendingRecord, count: int) -> list[PendingRecord]:
    """`count` toy notes chained after `after` (TRICKY text: COPY's escaping too)."""
    chained, prev = [], after.record
    for _ in range(count):
        data = encode_payload(Note(n=prev.seq + 1, text=TRICKY))
        line, _digest = encode_line(prev.seq + 1, AT, "toy.note", "g", data, prev.hash)
        chained.append(encoded(line))
        prev = chained[-1].record
    return chained


def ends(records: list[PendingRecord], start: int = 0) -> list[int]:
    """The offset each record ends at in the stream."""
    found, offset = [], start
    for item in records:
        offset += len(item.line)
        found.append(offset)
    return found


@contextmanager
def opened(target: str, *, write: bool = True) -> Iterator[Store]:
    store = open_store(target, write=write)
    try:
        yield store
    finally:
        store.close()


def append(store: Store, records: list[PendingRecord], offset: int) -> int:
    """One locked append, as a transaction makes it; the offset the stream ends at."""
    store.lock(5)
    try:
        store.append(records, offset)
    finally:
        store.unlock()
    return ends(records, offset)[-1]


def stream(store: Store, offset: int = 0, next_seq: int = 0) -> bytes:
    return b"".join(store.chunks(offset, next_seq))


@contextmanager
def failing_midway(
    store: Store, records: list[PendingRecord], stored: list[PendingRecord]
) -> Iterator[list[PendingRecord]]:
    """`records` (to go after `stored`) made to fail after part of them reached the
    store, for real: a file whose size limit (RLIMIT_FSIZE, `ulimit -f`) cuts the write
    short inside the second record, or a PostgreSQL batch whose last row repeats the
    seq and hash of a first one (the server refuses it after the others were sent)."""
    if local_file_of(store) is None:
        yield [*records[:-1], (stored or records)[0]]
        return
    limit = sum(len(r.line) for r in stored) + len(records[0].line) + 5
    saved = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, saved[1]))
    try:
        yield records
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, saved)


def test_only_a_file_offers_the_local_file_capability(store_target: str, is_pg: bool) -> None:
    with opened(store_target) as store:
        assert (local_file_of(store) is None) == is_pg
        assert checkpoints_of(store) is store  # both keep checkpoints
        append(store, new_chain(1), 0)
        if not is_pg:
            local = local_file_of(store)
            assert local is store and local.local_fd() is not None


def test_tail_after_same_grew_changed(store_target: str) -> None:
    first = new_chain(2)
    more = more_notes(first[-1], 3)
    with opened(store_target) as writer:
        assert writer.tail_after(0, -1, GENESIS_PREV) == "same"  # empty: nothing follows
        end = append(writer, first, 0)
        last = first[-1].record
        with opened(store_target, write=False) as reader:
            assert reader.tail_after(end, last.seq, last.hash) == "same"
            grown = append(writer, more, end)  # another handle appends
            assert reader.tail_after(end, last.seq, last.hash) == "grew"
            assert reader.tail_after(0, -1, GENESIS_PREV) == "grew"
            newest = more[-1].record
            assert reader.tail_after(grown, newest.seq, newest.hash) == "same"
            # Not that record any more (another hash at its place), or no record there.
            assert reader.tail_after(end, last.seq, "f" * 64) == "changed"
            assert reader.tail_after(grown + 100, newest.seq + 1, "f" * 64) == "changed"


def test_a_cut_is_changed_for_every_handle(store_target: str, is_pg: bool) -> None:
    """What a repair or a torn-tail recovery does to a file, other handles see as
    "changed"; PostgreSQL has nothing to cut with (no local file)."""
    records = new_chain(4)
    with opened(store_target) as writer:
        offsets = ends(records)
        append(writer, records, 0)
        local = local_file_of(writer)
        if is_pg:
            assert local is None
            return
        assert local is not None
        with opened(store_target, write=False) as reader:
            writer.lock(5)
            try:
                kept = local.cut_tail(offsets[1], 2, "quarantine")
            finally:
                writer.unlock()
            last = records[-1].record
            assert reader.tail_after(offsets[-1], last.seq, last.hash) == "changed"
            assert reader.tail_after(offsets[1], 1, records[1].record.hash) == "same"
            assert stream(reader) == b"".join(r.line for r in records[:2])
        assert Path(kept).read_bytes() == b"".join(r.line for r in records[2:])
        assert [path for _us, path in local.cut_files(2, "quarantine")] == [kept]


def test_chunks_and_offsets_agree(store_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small reads and pages, so the stream comes in many chunks (split mid-line in a file).
    monkeypatch.setattr(filestore, "READ_CHUNK_BYTES", 700)
    monkeypatch.setattr(pgstore, "PAGE_BYTES", 700)
    records = new_chain(30)
    lines = [r.line for r in records]
    offsets = ends(records)
    with opened(store_target) as writer:
        append(writer, records[:10], 0)
        append(writer, records[10:], offsets[9])
    with opened(store_target, write=False) as store:
        assert len(list(store.chunks(0, 0))) > 1
        assert stream(store) == b"".join(lines)
        for seq in range(1, len(records)):
            start = offsets[seq - 1]
            assert stream(store, start, seq) == b"".join(lines[seq:])
            assert store.line_ending_at(offsets[seq], seq) == lines[seq][:-1]
            assert store.size_hint(start, seq) in (None, offsets[-1] - start)
        assert store.line_ending_at(0, -1) is None
        store.verify_columns()  # every column says what its line says
        store.make_durable()


@pytest.mark.parametrize("batch", [3, 12])  # PostgreSQL: INSERT, then COPY
def test_a_failed_append_leaves_nothing(store_target: str, batch: int) -> None:
    written = new_chain(2)
    records = more_notes(written[-1], batch)
    end = ends(written)[-1]
    last = written[-1].record
    with opened(store_target) as store:
        append(store, written, 0)
        before = stream(store)
        with failing_midway(store, records, written) as doomed, pytest.raises(StorageFailure):
            append(store, doomed, end)
    with opened(store_target) as store:  # a failed write poisons a file handle: reopen
        assert stream(store) == before
        assert store.tail_after(end, last.seq, last.hash) == "same"
        grown = append(store, records, end)  # the same records go in whole
        assert stream(store) == before + b"".join(r.line for r in records)
        assert store.tail_after(grown, records[-1].record.seq, records[-1].record.hash) == "same"


def test_load_fills_an_empty_store(store_target: str) -> None:
    records = new_chain(40)
    last = records[-1].record
    with opened(store_target) as store:
        store.lock(5)
        try:
            store.load(records)
        finally:
            store.unlock()
        assert store.tail_after(ends(records)[-1], last.seq, last.hash) == "same"
    with opened(store_target, write=False) as reader:
        assert stream(reader) == b"".join(r.line for r in records)


def test_a_failed_load_leaves_the_store_empty(store_target: str, tmp_path: Path) -> None:
    records = new_chain(12)
    with opened(store_target) as store:
        store.lock(5)
        try:
            with failing_midway(store, records, []) as doomed, pytest.raises(StorageFailure):
                store.load(doomed)
        finally:
            store.unlock()
    with opened(store_target) as store:
        assert stream(store) == b""
        assert store.tail_after(0, -1, GENESIS_PREV) == "same"
    assert list(tmp_path.iterdir()) == []  # no journal file, no temp file beside it


def test_checkpoint_round_trip(store_target: str) -> None:
    records = new_chain(3)
    last = records[-1].record
    with opened(store_target) as store:
        assert store.load_checkpoint() is None
        assert store.peek_checkpoint() is None
        end = append(store, records, 0)
        assert store.load_checkpoint() is None
        assert store.peek_checkpoint() is None
        saved = Header(
            seq=last.seq, hash=last.hash, offset=end, journal_id=uuid.uuid4().hex,
            projection_version="toy/1", file_id=new_file_id(), base=None,
            null_goal_last_at=AT, latest_at=AT, goals=0, buckets=0, table_at=0, size=0,
            index_crc=0,
        )  # fmt: skip
        state = msgspec.msgpack.encode({"count": 3})
        store.save_checkpoint(saved, [("*", None, state, None), ("g", AT, b"", None)], delta=False)
        loaded = store.load_checkpoint()  # outside a lock: the store took it
        assert loaded is not None and loaded.top == saved and loaded.delta is None
        whole, goal = loaded.entry("*"), loaded.entry("g")
        assert whole is not None and whole[0].section(whole[1]) == state
        assert goal is not None and goal[1].last_at == AT and loaded.entry("h") is None
        assert store.peek_checkpoint() == (last.seq, "toy/1")  # without reading the state
        newer = msgspec.structs.replace(saved, seq=2, hash=records[2].record.hash)
        store.lock(5)  # inside a locked transaction: PostgreSQL commits it on unlock
        try:
            store.save_checkpoint(newer, [("*", None, state, None)], delta=False)
        finally:
            store.unlock()
    with opened(store_target, write=False) as reader:
        found = reader.load_checkpoint()
        assert found is not None and found.top == newer  # the last one saved wins
        assert reader.peek_checkpoint() == (2, "toy/1")


# -- append, read, reopen ----------------------------------------------------------


def test_append_and_read_back(store_target: str) -> None:
    written: list[bytes] = []
    with Journal.open(store_target, TOY) as journal:
        for n in range(3):
            written += append_notes(journal, [n])
        written += append_notes(journal, list(range(10, 22)))  # a batch (COPY in PostgreSQL)
        assert journal.head.seq == 16  # genesis, 3 notes, the batch's announcement, 12 notes
        state = journal.state

    lines = read_lines(store_target)
    assert lines[1:] == written  # byte for byte, after the genesis record
    assert [json.loads(line)["seq"] for line in lines] == list(range(17))
    assert json.loads(lines[4])["kind"] == "journal.batch"
    assert json.loads(lines[5])["data"]["text"] == TRICKY
    with Journal.open(store_target, TOY, write=False) as reader:
        assert reader.state == state
        assert reader.state.count == 15 and reader.state.total == 3 + sum(range(10, 22))


def test_head_survives_reopen_and_the_chain_continues(store_target: str) -> None:
    with Journal.open(store_target, TOY) as journal:
        append_notes(journal, [1, 2, 3])
        append_notes(journal, [4])
        head = journal.head.copy()
    with Journal.open(store_target, TOY) as journal:
        assert journal.head == head
        assert journal.state.total == 10
        with journal.transaction() as txn:
            pending = txn.append("toy.note", "g", Note(n=5), txn.time_for("g"))
        assert pending.record.seq == head.seq + 1
        assert pending.record.prev == head.prev_hash
    with Journal.open(store_target, TOY, write=False) as reader:
        assert reader.verify().seq == head.seq + 1


def test_a_reader_never_creates_a_journal(store_target: str) -> None:
    result = cli(store_target, "verify")
    assert result.code == 3, result.stdout
    assert result.json["error"]["code"] == "journal_not_found"
    with pytest.raises(JournalCorrupt):
        Journal.open(store_target, TOY, write=False)
    # still nothing: a writer that never writes leaves nothing behind either
    Journal.open(store_target, TOY).close()
    assert cli(store_target, "digest").code == 3


def test_verify_digest_log_through_the_cli(store_target: str) -> None:
    for units in (100, 200, 300):
        assert configure_budget(store_target, units).code == 0
    verified = cli(store_target, "verify")
    assert verified.code == 0, verified.stdout
    body = verified.json
    assert body["ok"] is True and body["records"] == 4 and body["head"]["seq"] == 3
    digest = cli(store_target, "digest").json
    assert digest["digest"] == f"3:{body['head']['hash']}"
    assert configure_budget(store_target, 400).code == 0
    grown = cli(store_target, "verify", "--digest", digest["digest"])
    assert grown.code == 0 and grown.json["digest"]["contained"] is True
    log = run_cli("log", "--journal", store_target, "--json", "--kind", "budget")
    events = [json.loads(line) for line in log.stdout.splitlines()]
    assert [e["data"]["allowed_units"] for e in events] == [100, 200, 300, 400]
    # the byte count is the size of the same journal as a file
    assert body["bytes"] == sum(len(line) + 1 for line in read_lines_ledger(store_target)[:4])


def read_lines_ledger(target: str) -> list[bytes]:
    from quotaledger.projections.ledger import PROJECTOR

    with Journal.open(target, PROJECTOR, write=False) as reader:
        return [line for _record, _payload, line in reader.records()]


# -- checkpoints ---------------------------------------------------------------------


def test_checkpoint_is_used_and_validated(
    store_target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Journal.open(store_target, TOY) as journal:
        append_notes(journal, list(range(20)))
        checkpoint = journal.write_checkpoint()
        append_notes(journal, [100, 200])
        full_state = journal.state
    assert checkpoint.seq == 21  # genesis, the batch's announcement, 20 notes

    with Journal.open(store_target, TOY, write=False) as reader:
        assert reader.checkpoint_seq == 21
        assert reader.state == full_state
    assert "ignoring checkpoint" not in capsys.readouterr().err

    # Used, not just accepted: a checkpoint claiming another state at the same record
    # is the state the fold continues from.
    forged_state = msgspec.msgpack.encode(msgspec.structs.replace(TOY.initial(), count=1000))
    goals = [s for s in sections_of(checkpoint) if s[0] != WHOLE_KEY]
    forged = [*goals, (WHOLE_KEY, None, forged_state, None)]
    header = msgspec.structs.replace(checkpoint.top, base=None, file_id=new_file_id())
    with Journal.open(store_target, TOY) as journal:
        journal.store.save_checkpoint(header, forged, delta=False)
    with Journal.open(store_target, TOY, write=False) as reader:
        assert reader.checkpoint_seq == 21 and reader.state.count == 1002

    # A checkpoint that does not match the record at its seq is ignored, loudly.
    for bad in (
        msgspec.structs.replace(header, hash="f" * 64),
        msgspec.structs.replace(header, seq=22),  # record 22 has another hash
        msgspec.structs.replace(header, projection_version="toy/0"),
    ):
        with Journal.open(store_target, TOY) as journal:
            journal.store.save_checkpoint(bad, forged, delta=False)
        capsys.readouterr()
        with Journal.open(store_target, TOY, write=False) as reader:
            assert reader.checkpoint_seq == -1
            assert reader.state == full_state
        assert "ignoring checkpoint" in capsys.readouterr().err


def test_checkpoint_command(store_target: str) -> None:
    for units in (10, 20):
        assert configure_budget(store_target, units).code == 0
    made = cli(store_target, "checkpoint")
    assert made.code == 0, made.stdout
    assert made.json["seq"] == 2
    assert configure_budget(store_target, 30).code == 0
    after = cli(store_target, "verify")
    assert after.code == 0 and after.json["records"] == 4
    assert "ignoring checkpoint" not in after.stderr


# -- concurrency and locking ---------------------------------------------------------


@pytest.mark.slow
def test_processes_appending_concurrently_leave_a_contiguous_verifying_chain(
    store_target: str,
) -> None:
    workers, each = 4, 12
    # The store does not exist yet: the processes also race to create it.
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.store.appender", store_target, str(w), str(each)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    acknowledged: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        seqs = json.loads(out)
        assert seqs == sorted(seqs) and len(seqs) == each
        acknowledged += seqs
    assert sorted(acknowledged) == list(range(1, workers * each + 1))
    with Journal.open(store_target, TOY, write=False) as reader:
        head = reader.verify()
        assert head.seq == workers * each
        assert reader.state.count == workers * each
        assert reader.state.total == sum(w * 1000 + i for w in range(workers) for i in range(each))
        by_worker: dict[str | None, list[int]] = {}
        for record, payload, _line in reader.records():
            if record.kind == "toy.note":
                by_worker.setdefault(record.goal, []).append(payload.n)
    assert all(v == sorted(v) for v in by_worker.values())


def test_lock_timeout_is_exit_4_and_readers_do_not_wait(store_target: str) -> None:
    assert configure_budget(store_target, 10).code == 0
    holder = open_store(store_target, write=True)
    holder.lock(5)
    try:
        started = time.monotonic()
        blocked = configure_budget(store_target, 20, "--lock-timeout-s", "0.4")
        waited_s = time.monotonic() - started
        assert blocked.code == 4, blocked.stdout
        assert blocked.json["error"]["code"] == "lock_timeout"
        assert 0.35 <= waited_s < 4
        no_wait = configure_budget(store_target, 20, "--lock-timeout-s", "0")
        assert no_wait.code == 4 and no_wait.json["error"]["code"] == "lock_timeout"
        with pytest.raises(LockTimeout):
            Journal.open(store_target, TOY, lock_timeout_s=0.1).transaction().__enter__()
        reading = cli(store_target, "verify")  # readers take no lock
        assert reading.code == 0 and reading.json["records"] == 2
    finally:
        holder.unlock()
        holder.close()
    assert configure_budget(store_target, 20, "--lock-timeout-s", "1").code == 0
    assert cli(store_target, "verify").json["records"] == 3


def test_time_regression_in_the_engine(store_target: str) -> None:
    with Journal.open(store_target, TOY) as journal:
        append_notes(journal, [1])
        last_at = journal.head.goal_last_at["g"]
        earlier = format_us(parse_at(last_at) - 1_000_000)
        with pytest.raises(TimeRegression), journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=2), txn.time_for("g", earlier))
        assert journal.head.seq == 1
    assert len(read_lines(store_target)) == 2


def test_time_regression_through_the_cli(store_target: str) -> None:
    assert configure_budget(store_target, 10, "--at", "2026-01-01T00:00:00Z").code == 0
    refused = configure_budget(store_target, 20, "--at", "2025-12-31T23:59:59Z")
    assert refused.code == 2 and refused.json["error"]["code"] == "time_regression"
    lines = b"".join(snapshot(store_target)).splitlines()
    assert len(lines) == 2 and b'"at":"2026-01-01T00:00:00.000000Z"' in lines[-1]


# -- export and import ---------------------------------------------------------------


def test_export_import_round_trip_is_byte_identical(store_target: str, tmp_path: Path) -> None:
    source = str(tmp_path / "source.jsonl")
    for units in (5, 6, 7):
        assert configure_budget(source, units).code == 0
    probe = run_cli(
        "probe", "run", "--journal", source, "--json", "--goal", "g", "--", sys.executable,
        "-c", "pass", TRICKY,
    )  # fmt: skip
    assert probe.code == 0, probe.stdout + probe.stderr
    imported = run_cli("import", "--journal", store_target, "--json", source)
    assert imported.code == 0, imported.stdout
    assert imported.json["records"] == 5
    exported = tmp_path / "exported.jsonl"
    out = cli(store_target, "export", "--to", str(exported))
    assert out.code == 0, out.stdout
    assert exported.read_bytes() == Path(source).read_bytes()
    assert out.json["bytes"] == os.path.getsize(source)

    again = run_cli("import", "--journal", store_target, "--json", source)
    assert again.code == 2 and again.json["error"]["code"] == "journal_not_empty"
    # the imported chain continues
    next_event = configure_budget(store_target, 8)
    assert next_event.code == 0 and next_event.json["event"]["seq"] == 5
    assert cli(store_target, "verify").json["records"] == 6


# -- records that do not verify ------------------------------------------------------


def test_mid_log_edit_is_refused_and_nothing_changes(store_target: str) -> None:
    for units in (101, 102, 103):
        assert configure_budget(store_target, units).code == 0
    tamper(store_target, 2, b'"allowed_units":102', b'"allowed_units":902')
    before = snapshot(store_target)
    verified = cli(store_target, "verify")
    assert verified.code == 3, verified.stdout
    assert verified.json["error"]["code"] == "journal_corrupt"
    assert verified.json["error"]["seq"] == 2
    writer = configure_budget(store_target, 104)
    assert writer.code == 3 and writer.json["error"]["seq"] == 2
    assert snapshot(store_target) == before


def test_an_unverifiable_last_record(store_target: str, is_pg: bool) -> None:
    """A file can end in a torn write (never acknowledged): recovered. A committed
    PostgreSQL row cannot be torn: an edited last row is corruption."""
    for units in (201, 202):
        assert configure_budget(store_target, units).code == 0
    if is_pg:
        tamper(store_target, 2, b'"allowed_units":202', b'"allowed_units":209')
        assert cli(store_target, "verify").code == 3
        assert configure_budget(store_target, 203).code == 3
        return
    with open(store_target, "ab") as handle:
        handle.write(b'{"v":1,"seq":3,"at":"2030')  # a write cut short by a crash
    assert cli(store_target, "verify").json["torn_tail"]["seq"] == 3
    written = configure_budget(store_target, 203)
    assert written.code == 0 and written.json["event"]["seq"] == 3
    assert cli(store_target, "verify").json["torn_tail"] is None
