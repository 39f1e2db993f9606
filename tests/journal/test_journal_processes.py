"""Real processes: concurrent appenders, and kill -9 in the middle of appends."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quotaledger.journal import Journal
from tests.journal.independent_verifier import TOY_SCHEMAS, verify_strict
from tests.journal.journal_helpers import toy_fold
from tests.support import REPO
from tests.toyprojector import TOY

# A child: appends `count` notes (forever if count < 0), one transaction each, and after
# each transaction RETURNS writes "seq hash n" to its side channel, flushed. Only then
# is the append acknowledged, so every line there must survive anything.
CHILD = """
import sys
from quotaledger.journal import Journal
from tests.toyprojector import TOY, Note
child, count, path, acks = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
journal = Journal.open(path, TOY, checkpoint_every=25)
with open(acks, "a", buffering=1) as side:
    i = 0
    while count < 0 or i < count:
        n = child * 1_000_000 + i
        with journal.transaction() as txn:
            pending = txn.append("toy.note", f"child-{child}", Note(n=n, text="x" * (i % 50)),
                                 txn.time_for(f"child-{child}"))
        side.write(f"{pending.record.seq} {pending.record.hash} {n}\\n")
        side.flush()
        i += 1
"""


def _spawn(child: int, count: int, path: str, acks: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(child), str(count), path, acks],
        cwd=REPO,  # `python -c` puts its working directory first on sys.path: tests.*
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _acks(path: Path) -> list[tuple[int, str, int]]:
    if not path.exists():
        return []
    result = []
    for line in path.read_text().split("\n")[:-1]:  # a line cut by the kill is not one
        seq, digest, n = line.split()
        result.append((int(seq), digest, int(n)))
    return result


@pytest.mark.slow
def test_concurrent_appenders_leave_one_contiguous_chain(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    children, per_child = 6, 40
    procs = [_spawn(c, per_child, path, str(tmp_path / f"acks-{c}")) for c in range(children)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    data = Path(path).read_bytes()
    # Every line parses and verifies on its own, seq is contiguous, prev chains: no
    # interleaved or lost lines.
    records = verify_strict(data, TOY_SCHEMAS).records
    assert [r["seq"] for r in records] == list(range(children * per_child + 1))
    by_seq = {r["seq"]: r for r in records}
    for c in range(children):
        acks = _acks(tmp_path / f"acks-{c}")
        assert [n for _, _, n in acks] == [c * 1_000_000 + i for i in range(per_child)]
        for seq, digest, n in acks:
            assert by_seq[seq]["hash"] == digest and by_seq[seq]["data"]["n"] == n
            assert by_seq[seq]["goal"] == f"child-{c}"
    journal = Journal.open(path, TOY, write=False)
    try:
        assert journal.state.count == children * per_child
        assert journal.state.total == sum(
            c * 1_000_000 + i for c in range(children) for i in range(per_child)
        )
    finally:
        journal.close()


@pytest.mark.slow
def test_kill_9_during_appends_loses_no_acknowledged_event(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    rng = random.Random(20261129)
    for round_ in range(3):
        procs = {
            c: _spawn(round_ * 10 + c, -1, path, str(tmp_path / f"acks-{round_}-{c}"))
            for c in range(4)
        }
        # Wait until every child is appending in earnest, then kill at random moments.
        deadline = time.monotonic() + 60
        while any(len(_acks(tmp_path / f"acks-{round_}-{c}")) < 3 for c in procs):
            assert time.monotonic() < deadline, "the children never started appending"
            time.sleep(0.02)
        time.sleep(rng.random() * 0.2)
        for proc in procs.values():
            time.sleep(rng.random() * 0.05)  # at a random moment of each child's work
            os.kill(proc.pid, signal.SIGKILL)
        for proc in procs.values():
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL

        journal = Journal.open(path, TOY)  # a writer: recovery runs
        try:
            records = {
                record.seq: (record.hash, payload.n)
                for record, payload, _ in journal.records()
                if record.kind == "toy.note"
            }
            assert journal.state == toy_fold([n for _, n in records.values()])
        finally:
            journal.close()
        acknowledged = [ack for c in range(4) for ack in _acks(tmp_path / f"acks-{round_}-{c}")]
        assert len(acknowledged) >= 12
        for seq, digest, n in acknowledged:
            assert records.get(seq) == (digest, n), f"acknowledged seq {seq} was lost"
        verify_strict(Path(path).read_bytes(), TOY_SCHEMAS)
