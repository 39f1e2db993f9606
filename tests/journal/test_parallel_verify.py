"""The parallel verify (journal/fanout.py) gives exactly the sequential scan's answer.

Journals are written line by line with the record encoder, so a test can place a
time regression, a seq gap or a payload that does not decode anywhere, with valid
hashes; segments are made small so such a record falls on, just after and far from a
segment boundary. Each outcome is compared with the sequential scan of the same file.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from journal import Journal, fanout
from journal.clock import format_us
from journal.errors import JournalCorrupt
from journal.record import encode_line, genesis_line
from projections.ledger import PROJECTOR

START_US = 1_780_000_000_000_000
GOALS = ["a", "b", "c"]


def observed(i: int) -> bytes:
    return msgspec.json.encode(
        {
            "run": f"run-{i % 7}",
            "uncached_input": i,
            "cached_input": 0,
            "output": 1,
            "requests": 1,
            "coverage": "measured",
            "source": None,
        }
    )


def write_journal(path: Path, events: list[tuple[str, int, bytes]]) -> list[bytes]:
    """A chained journal of `capacity.observed` events (goal, at_us, payload); its lines."""
    line, prev = genesis_line("0" * 32, format_us(START_US))
    lines = [line]
    for seq, (goal, at_us, data) in enumerate(events, start=1):
        line, prev = encode_line(seq, format_us(at_us), "capacity.observed", goal, data, prev)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    return lines


def regular_events(count: int) -> list[tuple[str, int, bytes]]:
    return [(GOALS[i % 3], START_US + 1000 * (i + 1), observed(i)) for i in range(count)]


def outcome(path: Path, *, parallel: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `verify` answers for `path`, forced sequential or parallel."""
    monkeypatch.setattr(fanout, "PARALLEL_VERIFY_BYTES_MIN", 0 if parallel else 1 << 62)
    journal = Journal.open(str(path), PROJECTOR, write=False, allow_corrupt=True)
    try:
        if parallel:  # the fan-out must really have run, not fallen back
            size = path.stat().st_size
            assert fanout.verify_file(str(path), size, journal.decoder) is not None
        try:
            head = journal.verify()
        except JournalCorrupt as exc:
            return {"corrupt": {"message": exc.message, **exc.context}}
        torn = journal.torn_tail
        return {
            "head": (head.next_seq, head.prev_hash, head.offset, head.journal_id),
            "goal_last_at": dict(head.goal_last_at),
            "torn": None if torn is None else (torn.seq, torn.offset, torn.reason),
        }
    finally:
        journal.close()


@pytest.fixture
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    # About 40 segments for a 3,000-event journal: boundaries land everywhere.
    monkeypatch.setattr(fanout, "SEGMENTS_PER_WORKER", 20)


def same_answer(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    sequential = outcome(path, parallel=False, monkeypatch=monkeypatch)
    parallel = outcome(path, parallel=True, monkeypatch=monkeypatch)
    assert parallel == sequential
    return sequential


def test_clean_journal_same_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None
) -> None:
    path = tmp_path / "j.jsonl"
    write_journal(path, regular_events(3000))
    answer = same_answer(path, monkeypatch)
    assert answer["head"][0] == 3001 and answer["torn"] is None
    assert set(answer["goal_last_at"]) == {None, *GOALS}


@pytest.mark.parametrize("index", [1, 2, 37, 38, 39, 1500, 2999])
def test_time_regression_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None, index: int
) -> None:
    # Goal "z" appears twice: at `index` with a time earlier than its first event.
    events = regular_events(3000)
    events[0] = ("z", START_US + 10_000_000, observed(0))
    events[index] = ("z", START_US + 5_000_000, events[index][2])
    path = tmp_path / "j.jsonl"
    write_journal(path, events)
    answer = same_answer(path, monkeypatch)
    assert answer["corrupt"]["seq"] == index + 1
    assert "earlier than the goal's previous event" in answer["corrupt"]["reason"]


def boundary_events(tmp_path: Path, count: int) -> list[int]:
    """Indexes (into the event list) of the events whose lines start a segment."""
    base = tmp_path / "base.jsonl"
    lines = write_journal(base, regular_events(count))
    workers = min(len(os.sched_getaffinity(0)), 8)
    bounds = fanout._segment_bounds(
        str(base), base.stat().st_size, workers * fanout.SEGMENTS_PER_WORKER
    )
    assert bounds is not None and len(bounds) > 20
    starts = {0}
    offset = 0
    for line in lines:
        offset += len(line)
        starts.add(offset)
    assert set(bounds) <= starts
    line_starts = sorted(starts)
    return [line_starts.index(cut) - 1 for cut in bounds[1:-1]]


@pytest.mark.parametrize("after", [0, 1, 3])
def test_time_regression_just_after_each_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None, after: int
) -> None:
    """A goal's first record in a segment goes back in time: the segment's first line
    (the parent's chain check) or a later one (the goal's first time in the segment)."""
    for index in boundary_events(tmp_path, 1200)[::5]:
        events = regular_events(1200)
        events[0] = ("late", START_US + 60_000_000, observed(0))
        events[index + after] = ("late", START_US + 30_000_000, events[index + after][2])
        path = tmp_path / f"j{index}.jsonl"
        write_journal(path, events)
        answer = same_answer(path, monkeypatch)
        assert answer["corrupt"]["seq"] == index + after + 1


def test_time_is_checked_before_the_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None
) -> None:
    """One record both goes back in time and does not decode: the time is reported."""
    for index in boundary_events(tmp_path, 1200)[::5]:
        events = regular_events(1200)
        events[0] = ("late", START_US + 60_000_000, observed(0))
        events[index + 2] = ("late", START_US + 30_000_000, b'{"run":"bad run!"}')
        path = tmp_path / f"j{index}.jsonl"
        write_journal(path, events)
        answer = same_answer(path, monkeypatch)
        assert "earlier than the goal's previous event" in answer["corrupt"]["reason"]


def test_gap_or_repeat_at_each_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None
) -> None:
    path = tmp_path / "j.jsonl"
    for index in boundary_events(tmp_path, 1200)[::5]:
        lines = write_journal(path, regular_events(1200))
        path.write_bytes(b"".join(lines[: index + 1] + lines[index + 2 :]))
        gap = same_answer(path, monkeypatch)
        assert gap["corrupt"]["seq"] == index + 1, gap
        path.write_bytes(b"".join(lines[: index + 1] + lines[index:]))
        repeat = same_answer(path, monkeypatch)
        assert repeat["corrupt"]["seq"] == index + 1, repeat


@pytest.mark.parametrize("index", [0, 1, 38, 1499, 2998])
def test_missing_or_repeated_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None, index: int
) -> None:
    path = tmp_path / "j.jsonl"
    lines = write_journal(path, regular_events(3000))
    gap = lines[: index + 1] + lines[index + 2 :]
    path.write_bytes(b"".join(gap))
    assert same_answer(path, monkeypatch)["corrupt"]["seq"] == index + 1
    repeated = lines[: index + 2] + lines[index + 1 :]
    path.write_bytes(b"".join(repeated))
    assert same_answer(path, monkeypatch)["corrupt"]["seq"] == index + 2


@pytest.mark.parametrize("index", [1, 38, 1500, 2999])
def test_payload_that_does_not_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None, index: int
) -> None:
    events = regular_events(3000)
    goal, at_us, _ = events[index]
    events[index] = (goal, at_us, b'{"run":"bad run!","uncached_input":1}')
    path = tmp_path / "j.jsonl"
    write_journal(path, events)
    answer = same_answer(path, monkeypatch)
    assert answer["corrupt"]["seq"] == index + 1
    assert "does not decode" in answer["corrupt"]["reason"]


def test_flipped_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None
) -> None:
    source = tmp_path / "source.jsonl"
    write_journal(source, regular_events(2000))
    data = source.read_bytes()
    rng = random.Random(8)
    for n in range(12):
        position = rng.randrange(len(data))
        flipped = bytearray(data)
        flipped[position] ^= 1 << rng.randrange(8)
        path = tmp_path / f"flip{n}.jsonl"
        path.write_bytes(bytes(flipped))
        assert "corrupt" in same_answer(path, monkeypatch) or flipped[position] == 0x0A


@pytest.mark.parametrize(
    "tail", [b'{"v":1,"seq":3001,"at"', b"\x00" * 5000, b"garbage\n" * 3, b"\n"]
)
def test_torn_or_garbage_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: None, tail: bytes
) -> None:
    path = tmp_path / "j.jsonl"
    lines = write_journal(path, regular_events(3000))
    path.write_bytes(b"".join(lines) + tail)
    answer = same_answer(path, monkeypatch)
    torn = answer.get("torn")
    assert torn is not None and torn[0] == 3001


def test_cli_verifies_a_large_journal_on_every_core(tmp_path: Path) -> None:
    """Above the real threshold, through the CLI, with a regression in the last third."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: verify stays sequential")
    count = fanout.PARALLEL_VERIFY_BYTES_MIN // 330 + 1000
    events = regular_events(count)
    events[0] = ("late", START_US + 10**11, observed(0))
    index = count * 2 // 3
    events[index] = ("late", START_US + 5 * 10**10, events[index][2])
    path = tmp_path / "big.jsonl"
    write_journal(path, events)
    assert path.stat().st_size > fanout.PARALLEL_VERIFY_BYTES_MIN
    args = [sys.executable, "-m", "commands", "verify", "--journal", str(path), "--json"]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 3, done.stderr
    report = msgspec.json.decode(done.stdout)
    assert report["error"]["seq"] == index + 1, report
