"""SPEC §2.4 item 5: a transaction of several records is all or nothing after a crash.

The format says where one ends: a leading `journal.batch` record announces how many
records follow. A crash that cuts the transaction's one large write between its lines
leaves complete, self-verifying lines of a transaction that never committed: recovery
cuts them all, the announcement included, as a torn tail.

The crash is real and exact: the writer runs under RLIMIT_FSIZE, so the kernel writes
a prefix of its batch and returns a short count, and strace SIGKILLs it on entry to the
ftruncate that would roll the short write back.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput, Journal
from quotaledger.journal.record import BATCH_KIND, REPAIRED_KIND
from quotaledger.projections.ledger import PROJECTOR
from tests.journal.independent_verifier import verify as independent_verify
from tests.journal.journal_helpers import engine_journal, line_offsets, repaired_payload, side_files
from tests.support import REPO, run_cli

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(
    STRACE is None and os.environ.get("CI") != "true", reason="needs strace (CI installs it)"
)
EVENTS = 20_000
"""A large transaction: megabytes in one write."""

WRITER = """
import sys
from quotaledger.journal import Journal
from quotaledger.journal.record import REPAIRED_KIND, JournalRepaired
from quotaledger.projections.ledger import PROJECTOR
journal = Journal.open(sys.argv[1], PROJECTOR)
with journal.transaction() as txn:
    at = txn.time_for(None)
    for i in range(int(sys.argv[3])):
        payload = JournalRepaired(
            truncated_after_seq=i, quarantine="x", quarantined_bytes=i,
            quarantined_sha256="0" * 64,
        )
        txn.append(REPAIRED_KIND, None, payload, at)
print("committed", flush=True)
"""


def _kill_inside_the_write(path: Path, limit_bytes: int) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=ftruncate"),
            *("-e", "inject=ftruncate:signal=SIGKILL", sys.executable, "-c", WRITER),
            *(str(path), str(REPO / "tests" / "journal"), str(EVENTS)),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        preexec_fn=limit,
    )


@pytest.fixture(scope="module")
def batch_layout(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """The journal before the transaction, and the bytes the transaction appends (the
    same in every run: fixed-width times, the same seqs and payloads)."""
    path = tmp_path_factory.mktemp("layout") / "j.jsonl"
    engine_journal(str(path), 3)
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(path), str(REPO / "tests" / "journal"), str(EVENTS)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0 and "committed" in done.stdout, done.stderr
    return before, path.read_bytes()[len(before) :]


def test_a_transaction_of_several_records_is_announced(batch_layout: tuple[bytes, bytes]) -> None:
    before, written = batch_layout
    lines = written.splitlines()
    marker = json.loads(lines[0])
    assert marker["kind"] == BATCH_KIND and marker["goal"] is None
    assert marker["data"] == {"records": EVENTS} and len(lines) == EVENTS + 1
    assert (
        marker["seq"] == before.count(b"\n")
        and marker["prev"] == json.loads(before.splitlines()[-1])["hash"]
    )
    result = independent_verify(before + written)
    assert result.corrupt is None and result.torn is None
    assert len(result.records) == before.count(b"\n") + EVENTS + 1


def _cuts(written: bytes) -> dict[str, int]:
    offsets = line_offsets(written)
    return {
        "inside the announcement": 20,
        "right after the announcement": offsets[1],
        "mid-line": offsets[EVENTS // 2] + 17,
        "at a line boundary": offsets[EVENTS // 2],
        "one line short": offsets[EVENTS],
        "inside the last line": len(written) - 2,
    }


CUTS = [
    "inside the announcement",
    "right after the announcement",
    "mid-line",
    "at a line boundary",
    "one line short",
    "inside the last line",
]


@pytest.mark.slow
@needs_strace
@pytest.mark.parametrize("cut_name", CUTS)
def test_a_kill_inside_a_large_transaction_keeps_none_of_it(
    cut_name: str, batch_layout: tuple[bytes, bytes], tmp_path: Path
) -> None:
    before, written = batch_layout
    cut = _cuts(written)[cut_name]
    path = tmp_path / "j.jsonl"
    path.write_bytes(before)
    killed = _kill_inside_the_write(path, len(before) + cut)
    assert killed.returncode in (-9, 137), (killed.returncode, killed.stderr)
    assert "committed" not in killed.stdout
    crashed = path.read_bytes()
    # The premise: a prefix of the write landed (the same layout; its times are this run's).
    assert len(crashed) == len(before) + cut and crashed.startswith(before)
    assert crashed.count(b"\n") == (before + written[:cut]).count(b"\n")

    # A reader sees the transaction as a torn tail, announcement included.
    read = run_cli("verify", "--journal", str(path), "--json")
    assert read.code == 0, read.stdout
    assert read.json["records"] == before.count(b"\n")
    assert read.json["torn_tail"]["offset"] == len(before), read.json
    assert path.read_bytes() == crashed
    independent = independent_verify(crashed)
    assert independent.torn is not None and independent.torn.offset == len(before)
    assert len(independent.records) == before.count(b"\n")

    # A writer's recovery cuts all of it and keeps the bytes beside the journal.
    with Journal.open(str(path), PROJECTOR) as journal:
        assert journal.head.next_seq == before.count(b"\n")
    assert path.read_bytes() == before
    [torn] = side_files(str(path), "torn")
    assert torn.read_bytes() == crashed[len(before) :]


def test_a_reader_whose_snapshot_ends_inside_a_transaction_shows_none_of_it(
    batch_layout: tuple[bytes, bytes], tmp_path: Path
) -> None:
    before, written = batch_layout
    path = tmp_path / "j.jsonl"
    path.write_bytes(before + written[: line_offsets(written)[100]])
    with Journal.open(str(path), PROJECTOR, write=False) as journal:
        assert journal.head.next_seq == before.count(b"\n")
        assert journal.torn_tail is not None and journal.torn_tail.offset == len(before)
        records = list(journal.records())
        assert len(records) == before.count(b"\n")


def test_a_single_event_transaction_has_no_announcement(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    engine_journal(str(path), 2)  # genesis + first event share a write: still no announcement
    kinds = [json.loads(line)["kind"] for line in path.read_bytes().splitlines()]
    assert kinds == ["journal.created", REPAIRED_KIND, REPAIRED_KIND]


def test_committed_lists_the_records_as_written(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    engine_journal(str(path), 1)
    with Journal.open(str(path), PROJECTOR) as journal:
        with journal.transaction() as txn:
            at = txn.time_for(None)
            staged = [txn.append(REPAIRED_KIND, None, repaired_payload(i), at) for i in range(3)]
        written = [json.loads(line) for line in path.read_bytes().splitlines()[-4:]]
        assert [p.record.hash for p in txn.committed] == [w["hash"] for w in written]
        # What append returned is provisional once a second event makes it a batch: the
        # later events carry their final seq; `committed` is the record of what was written.
        assert [s.record.seq for s in staged[1:]] == [w["seq"] for w in written[2:]]
        assert journal.head.prev_hash == written[-1]["hash"]


def test_repair_refuses_to_cut_inside_a_transaction(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    engine_journal(str(path), 2)
    with Journal.open(str(path), PROJECTOR) as journal, journal.transaction() as txn:
        at = txn.time_for(None)
        for i in range(3):
            txn.append(REPAIRED_KIND, None, repaired_payload(i), at)
    # seq 3 announces records 4-6; damage the last so a repair is wanted.
    data = path.read_bytes()
    offsets = line_offsets(data)
    path.write_bytes(
        data[: offsets[6]] + b"x" + data[offsets[6] + 1 :] + data[offsets[1] : offsets[2]]
    )
    before = path.read_bytes()
    repair = ["repair", "--journal", str(path), "--json", "--yes", "--truncate-after"]
    for seq in (3, 4, 5):
        refused = run_cli(*repair, str(seq))
        assert refused.code == 2, refused.stdout
        assert refused.json["error"]["code"] == "repair_inside_transaction", refused.stdout
        assert path.read_bytes() == before
    repaired = run_cli(*repair, "2")
    assert repaired.code == 0, repaired.stdout


def test_a_user_cannot_append_a_batch_record(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    engine_journal(str(path), 1)
    with (
        Journal.open(str(path), PROJECTOR) as journal,
        pytest.raises(InvalidInput),
        journal.transaction() as txn,
    ):
        txn.append(BATCH_KIND, None, {"records": 2}, txn.time_for(None))


IMPORTER = """
import sys
from quotaledger.entry import main
sys.exit(main(["import", sys.argv[1], "--journal", sys.argv[2], "--json"]))
"""


@pytest.mark.slow
@needs_strace
def test_an_import_killed_before_its_rename_leaves_no_journal(
    batch_layout: tuple[bytes, bytes], tmp_path: Path
) -> None:
    before, written = batch_layout
    source = tmp_path / "source.jsonl"
    source.write_bytes(before + written)
    target = tmp_path / "target.jsonl"
    killed = subprocess.run(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename,renameat"),
            *("-e", "inject=rename,renameat,renameat2:signal=SIGKILL"),
            *(sys.executable, "-c", IMPORTER, str(source), str(target)),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert killed.returncode in (-9, 137), (killed.returncode, killed.stdout, killed.stderr)
    # The path names no journal with part of the records: none, or an empty one.
    assert not target.exists() or target.stat().st_size == 0
    again = run_cli("import", str(source), "--journal", str(target), "--json")
    assert again.code == 0, again.stdout
    assert target.read_bytes() == source.read_bytes()


def test_an_import_that_fails_leaves_nothing_behind(
    batch_layout: tuple[bytes, bytes], tmp_path: Path
) -> None:
    before, written = batch_layout
    source = tmp_path / "source.jsonl"
    source.write_bytes(before + written)
    target = tmp_path / "target.jsonl"
    limit = len(source.read_bytes()) // 2

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    failed = subprocess.run(
        [sys.executable, "-c", IMPORTER, str(source), str(target)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        preexec_fn=small_files,
    )
    assert failed.returncode == 4, (failed.stdout, failed.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.jsonl"]


def test_the_api_sees_a_transaction_whole(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Ledger.open(str(path)) as ledger:
        ledger.configure(goal="g", max_active_cases=3)
        with ledger.journal.transaction() as txn:
            at = txn.time_for("g")
            for i in range(3):
                payload = {
                    **{"run": None, "uncached_input": i, "cached_input": 0, "output": 0},
                    **{"requests": None, "coverage": "measured", "source": None},
                }
                txn.append("capacity.observed", "g", payload, at)
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[-4])["kind"] == BATCH_KIND
    assert run_cli("verify", "--journal", str(path), "--json").json["records"] == len(lines)
