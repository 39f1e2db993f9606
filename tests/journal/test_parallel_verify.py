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
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from quotaledger.journal import Journal, fanout
from quotaledger.journal.clock import format_us
from quotaledger.journal.record import encode_line, genesis_line
from quotaledger.projections.ledger import PROJECTOR

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


SEGMENTS_PER_WORKER = 20
"""About 40 segments for a 3,000-event journal on two cores: boundaries land everywhere."""
OUTCOMES = Path(__file__).with_name("fanout_outcomes.py")


def outcomes(paths: list[Path], mode: str) -> list[dict[str, Any]]:
    """What `verify` answers for each path, in a fresh one-thread process (a test
    worker has threads of its own, and verify never forks a threaded process)."""
    args = [sys.executable, str(OUTCOMES), mode, str(SEGMENTS_PER_WORKER), *map(str, paths)]
    done = subprocess.run(args, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result: list[dict[str, Any]] = msgspec.json.decode(done.stdout)
    return result


def same_answers(paths: list[Path], mode: str = "parallel") -> list[dict[str, Any]]:
    sequential = outcomes(paths, "sequential")
    assert outcomes(paths, mode) == sequential
    return sequential


def same_answer(path: Path) -> dict[str, Any]:
    return same_answers([path])[0]


def test_clean_journal_same_head(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_journal(path, regular_events(3000))
    answer = same_answer(path)
    assert answer["head"][0] == 3001 and answer["torn"] is None
    assert set(answer["goal_last_at"]) == {"None", *GOALS}


def test_time_regression_anywhere(tmp_path: Path) -> None:
    # Goal "z" appears twice: at `index` with a time earlier than its first event.
    indexes = [1, 2, 37, 38, 39, 1500, 2999]
    paths = []
    for index in indexes:
        events = regular_events(3000)
        events[0] = ("z", START_US + 10_000_000, observed(0))
        events[index] = ("z", START_US + 5_000_000, events[index][2])
        paths.append(tmp_path / f"j{index}.jsonl")
        write_journal(paths[-1], events)
    for index, answer in zip(indexes, same_answers(paths), strict=True):
        assert answer["corrupt"]["seq"] == index + 1
        assert "earlier than the goal's previous event" in answer["corrupt"]["reason"]


def boundary_events(tmp_path: Path, count: int) -> list[int]:
    """Indexes (into the event list) of every fifth event whose line starts a segment."""
    base = tmp_path / "base.jsonl"
    lines = write_journal(base, regular_events(count))
    workers = min(len(os.sched_getaffinity(0)), 8)
    fd = os.open(base, os.O_RDONLY)
    try:
        bounds = fanout._segment_bounds(fd, base.stat().st_size, workers * SEGMENTS_PER_WORKER)
    finally:
        os.close(fd)
    assert bounds is not None and len(bounds) > 20
    starts = {0}
    offset = 0
    for line in lines:
        offset += len(line)
        starts.add(offset)
    assert set(bounds) <= starts
    line_starts = sorted(starts)
    return [line_starts.index(cut) - 1 for cut in bounds[1:-1:5]]


def test_time_regression_just_after_each_boundary(tmp_path: Path) -> None:
    """A goal's first record in a segment goes back in time: the segment's first line
    (the parent's chain check) or a later one (the goal's first time in the segment)."""
    cases, paths = [], []
    for index in boundary_events(tmp_path, 1200):
        for after in (0, 1, 3):
            events = regular_events(1200)
            events[0] = ("late", START_US + 60_000_000, observed(0))
            events[index + after] = ("late", START_US + 30_000_000, events[index + after][2])
            paths.append(tmp_path / f"j{index}-{after}.jsonl")
            write_journal(paths[-1], events)
            cases.append(index + after)
    for index, answer in zip(cases, same_answers(paths), strict=True):
        assert answer["corrupt"]["seq"] == index + 1


def test_time_is_checked_before_the_payload(tmp_path: Path) -> None:
    """One record both goes back in time and does not decode: the time is reported."""
    paths = []
    for index in boundary_events(tmp_path, 1200):
        events = regular_events(1200)
        events[0] = ("late", START_US + 60_000_000, observed(0))
        events[index + 2] = ("late", START_US + 30_000_000, b'{"run":"bad run!"}')
        paths.append(tmp_path / f"j{index}.jsonl")
        write_journal(paths[-1], events)
    for answer in same_answers(paths):
        assert "earlier than the goal's previous event" in answer["corrupt"]["reason"]


def test_gap_or_repeat_at_each_boundary(tmp_path: Path) -> None:
    lines = write_journal(tmp_path / "source.jsonl", regular_events(1200))
    cases, paths = [], []
    for index in boundary_events(tmp_path, 1200):
        for name, changed in (
            ("gap", lines[: index + 1] + lines[index + 2 :]),
            ("repeat", lines[: index + 1] + lines[index:]),
        ):
            paths.append(tmp_path / f"{name}{index}.jsonl")
            paths[-1].write_bytes(b"".join(changed))
            cases.append(index)
    for index, answer in zip(cases, same_answers(paths), strict=True):
        assert answer["corrupt"]["seq"] == index + 1, answer


def test_missing_or_repeated_line(tmp_path: Path) -> None:
    lines = write_journal(tmp_path / "source.jsonl", regular_events(3000))
    cases, paths = [], []
    for index in (0, 1, 38, 1499, 2998):
        for seq, changed in (
            (index + 1, lines[: index + 1] + lines[index + 2 :]),
            (index + 2, lines[: index + 2] + lines[index + 1 :]),
        ):
            paths.append(tmp_path / f"j{index}-{seq}.jsonl")
            paths[-1].write_bytes(b"".join(changed))
            cases.append(seq)
    for seq, answer in zip(cases, same_answers(paths), strict=True):
        assert answer["corrupt"]["seq"] == seq


def test_payload_that_does_not_decode(tmp_path: Path) -> None:
    indexes = [1, 38, 1500, 2999]
    paths = []
    for index in indexes:
        events = regular_events(3000)
        goal, at_us, _ = events[index]
        events[index] = (goal, at_us, b'{"run":"bad run!","uncached_input":1}')
        paths.append(tmp_path / f"j{index}.jsonl")
        write_journal(paths[-1], events)
    for index, answer in zip(indexes, same_answers(paths), strict=True):
        assert answer["corrupt"]["seq"] == index + 1
        assert "does not decode" in answer["corrupt"]["reason"]


def test_flipped_bytes(tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    write_journal(source, regular_events(2000))
    data = source.read_bytes()
    rng = random.Random(8)
    paths, newline = [], []
    for n in range(16):
        position = rng.randrange(len(data))
        flipped = bytearray(data)
        flipped[position] ^= 1 << rng.randrange(8)
        paths.append(tmp_path / f"flip{n}.jsonl")
        paths[-1].write_bytes(bytes(flipped))
        newline.append(0x0A in (data[position], flipped[position]))
    for answer, touches_newline in zip(same_answers(paths), newline, strict=True):
        assert "corrupt" in answer or touches_newline


def test_torn_or_garbage_tail(tmp_path: Path) -> None:
    lines = write_journal(tmp_path / "source.jsonl", regular_events(3000))
    tails = [b'{"v":1,"seq":3001,"at"', b"\x00" * 5000, b"garbage\n" * 3, b"\n"]
    paths = []
    for n, tail in enumerate(tails):
        paths.append(tmp_path / f"j{n}.jsonl")
        paths[-1].write_bytes(b"".join(lines) + tail)
    for answer in same_answers(paths):
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
    args = [sys.executable, "-m", "quotaledger", "verify", "--journal", str(path), "--json"]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 3, done.stderr
    report = msgspec.json.decode(done.stdout)
    assert report["error"]["seq"] == index + 1, report


def test_a_process_with_other_threads_verifies_on_one_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork copies only the calling thread, with any lock another thread holds."""
    path = tmp_path / "j.jsonl"
    write_journal(path, regular_events(300))
    monkeypatch.setattr(fanout, "PARALLEL_VERIFY_BYTES_MIN", 0)
    journal = Journal.open(str(path), PROJECTOR, write=False)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        fd = journal.store.local_fd()
        assert fd is not None
        assert fanout.verify_file(fd, path.stat().st_size, journal.decoder) is None
        assert journal.verify().next_seq == 301  # sequential, same answer
    finally:
        stop.set()
        other.join()
        journal.close()


def write_batched_journal(path: Path, count: int, batch: int) -> list[bytes]:
    """Like write_journal, but in transactions of `batch` events, each led by its
    journal.batch record (SPEC §2.4 item 5); its lines."""
    line, prev = genesis_line("0" * 32, format_us(START_US))
    lines, seq = [line], 1
    events = regular_events(count)
    for start in range(0, count, batch):
        group = events[start : start + batch]
        announce = msgspec.json.encode({"records": len(group)})
        line, prev = encode_line(seq, format_us(group[0][1]), "journal.batch", None, announce, prev)
        lines.append(line)
        seq += 1
        for goal, at_us, data in group:
            line, prev = encode_line(seq, format_us(at_us), "capacity.observed", goal, data, prev)
            lines.append(line)
            seq += 1
    path.write_bytes(b"".join(lines))
    return lines


def test_transactions_across_segment_boundaries_same_head(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_batched_journal(path, 3000, 37)
    answer = same_answer(path)
    assert answer["head"][0] == 1 + 3000 + -(-3000 // 37) and answer["torn"] is None


def test_a_journal_ending_inside_a_transaction_same_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    lines = write_batched_journal(path, 3000, 37)
    # 3000 = 81 x 37 + 3: the last transaction is its journal.batch record and 3 events;
    # it loses 2 of them.
    path.write_bytes(path.read_bytes()[: -sum(map(len, lines[-2:]))])
    answer = same_answers([path], "fallback")[0]
    announced = len(lines) - 4
    assert answer["torn"][:2] == [announced, sum(map(len, lines[:announced]))], answer


def test_corruption_inside_a_transaction_same_answer(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    lines = write_batched_journal(path, 3000, 37)
    data = bytearray(path.read_bytes())
    offset = sum(map(len, lines[:1500])) + 30
    data[offset] ^= 1
    path.write_bytes(bytes(data))
    answer = same_answers([path], "fallback")[0]
    assert answer["corrupt"]["seq"] == 1500, answer
