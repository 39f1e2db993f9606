"""`log --run`, `--last`, `--follow` and its checked ranges (SPEC §7)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from quotaledger import Ledger
from tests.support import REPO, run_cli

T0 = "2026-11-29T14:00:00Z"


def _at(second: int) -> str:
    return f"2026-11-29T14:00:{second:02d}Z"


def _history(journal: str) -> None:
    with Ledger.open(journal) as ledger:
        ledger.configure(goal="g", max_active_cases=1, quota_tpm=100_000, at=_at(0))
        ledger.observe(goal="g", run="r1", uncached_input=10, cached_input=0, output=0, at=_at(1))
        ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=100, at=_at(2))
        ledger.admit(goal="g", run="r2", arm="baseline", forecast_tpm=100, at=_at(3))  # refused
        ledger.reject(goal="g", run="r1", at=_at(4))
        ledger.release(goal="g", run="r1", at=_at(5))
        ledger.observe(goal="g", uncached_input=1, cached_input=0, output=0, at=_at(6))


def _seqs(result: Any) -> list[int]:
    return [json.loads(line)["seq"] for line in result.stdout.splitlines()]


def test_log_run_keeps_the_events_that_name_the_run(journal_path: str) -> None:
    _history(journal_path)
    r1 = run_cli("log", "--journal", journal_path, "--run", "r1", "--json")
    assert r1.code == 0, r1.stderr
    kinds = [json.loads(line)["kind"] for line in r1.stdout.splitlines()]
    assert kinds == [
        "capacity.observed", "capacity.admitted", "capacity.rejected", "capacity.released"
    ]  # fmt: skip
    r2 = run_cli("log", "--journal", journal_path, "--run", "r2", "--json")
    assert [json.loads(line)["kind"] for line in r2.stdout.splitlines()] == ["capacity.refused"]
    bad = run_cli("log", "--journal", journal_path, "--run", "not a run", "--json")
    assert bad.code == 2 and bad.json["error"]["code"] == "invalid_identifier"


def test_log_last_n(journal_path: str) -> None:
    _history(journal_path)
    every = _seqs(run_cli("log", "--journal", journal_path, "--json"))
    last = run_cli("log", "--journal", journal_path, "--last", "2", "--json")
    assert last.code == 0 and _seqs(last) == every[-2:]
    first = run_cli("log", "--journal", journal_path, "--limit", "2", "--json")
    assert _seqs(first) == every[:2]
    filtered = run_cli(
        "log", "--journal", journal_path, "--kind", "capacity.admitted", "--last", "1"
    )
    assert filtered.code == 0 and "capacity.admitted" in filtered.stdout
    with Ledger.open(journal_path, write=False) as ledger:
        assert [e["seq"] for e in ledger.log(last=3)] == every[-3:]
        assert list(ledger.log(last=0)) == []


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--since", ""], "invalid_time"),
        (["--until", ""], "invalid_time"),
        (["--since", "yesterday"], "invalid_time"),
        (["--since", _at(5), "--until", _at(1)], "invalid_option"),
        (["--last", "-1"], "invalid_option"),
        (["--last", "1", "--limit", "1"], "invalid_option"),
    ],
)
def test_log_refuses_bad_ranges(args: list[str], code: str, journal_path: str) -> None:
    _history(journal_path)
    refused = run_cli("log", "--journal", journal_path, *args, "--json")
    assert refused.code == 2, refused.stdout
    assert refused.json["error"]["code"] == code
    text = run_cli("log", "--journal", journal_path, *args)
    assert text.code == 2 and text.stdout == "" and "Traceback" not in text.stderr


def test_log_text_says_how_many(journal_path: str) -> None:
    _history(journal_path)
    text = run_cli("log", "--journal", journal_path, "--run", "r2")
    lines = text.stdout.splitlines()
    assert lines[0] == "1 event"
    assert lines[1].split() == ["SEQ", "AT", "GOAL", "KIND", "DATA"]
    assert lines[2].split()[:4] == ["4", "2026-11-29T14:00:03.000000Z", "g", "capacity.refused"]


# -- follow ------------------------------------------------------------------------------


class _Stop(Exception):
    pass


def _next_record_bytes(journal: str, tmp_path: Path, action: Any) -> bytes:
    """The bytes a writer would append to `journal` for `action` (run on a copy)."""
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(journal, copy)
    with Ledger.open(str(copy)) as ledger:
        action(ledger)
    return copy.read_bytes()[os.path.getsize(journal) :]


def test_follow_never_reports_a_write_in_progress(journal_path: str, tmp_path: Path) -> None:
    _history(journal_path)
    line = _next_record_bytes(
        journal_path,
        tmp_path,
        lambda ledger: ledger.observe(
            goal="g", run="r9", uncached_input=5, cached_input=0, output=0, at=_at(7)
        ),
    )

    def append(data: bytes) -> None:
        with open(journal_path, "ab") as handle:
            handle.write(data)

    polls: list[str] = []

    steps = iter(
        [
            lambda: (append(line[:40]), polls.append("half")),  # a write in progress ...
            lambda: polls.append("still half"),
            lambda: (append(line[40:]), polls.append("whole")),  # ... that completes
            lambda: (append(b'{"v":1,"seq":9,"at":"20'), polls.append("torn")),
            lambda: _recovering_writer(journal_path, polls),
            lambda: (_ for _ in ()).throw(_Stop()),
        ]
    )
    seen: list[tuple[str, dict[str, Any]]] = []
    with Ledger.open(journal_path, write=False) as reader:
        events = reader.log(follow=True, run="r9", wait=lambda: next(steps)())
        with pytest.raises(_Stop):
            for event in events:
                seen.append((polls[-1] if polls else "initial", event))
    assert [(when, e["seq"], e["data"]["run"]) for when, e in seen] == [
        ("whole", 8, "r9"),
        ("recovered", 9, "r9"),
    ]
    assert polls == ["half", "still half", "whole", "torn", "recovered"]


def _recovering_writer(journal: str, polls: list[str]) -> None:
    with Ledger.open(journal) as writer:  # recovery moves the torn bytes aside
        writer.observe(goal="g", run="r9", uncached_input=1, cached_input=0, output=0, at=_at(8))
    polls.append("recovered")


class _Lines:
    """A child's stdout, line by line, read by a thread (a select() on a buffered
    pipe would miss lines already in the buffer); the timeout only guards a hung test."""

    def __init__(self, stream: Any) -> None:
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line)

    def next(self, timeout_s: float = 60) -> str:
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError("the follower printed nothing") from None


def test_follow_prints_what_a_writer_process_appends_until_interrupted(
    journal_path: str,
) -> None:
    _history(journal_path)
    follower = subprocess.Popen(
        [sys.executable, "-m", "quotaledger", "log", "--journal", journal_path, "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    lines = _Lines(follower.stdout)
    try:
        assert lines.next().split() == ["SEQ", "AT", "GOAL", "KIND", "DATA"]
        for seq in range(8):  # the barrier: the follower has listed what was there
            assert lines.next().split()[0] == str(seq)
        writer = run_cli(
            "observe", "--journal", journal_path, "--goal", "g", "--run", "r7",
            "--uncached-input", "3", "--cached-input", "0", "--output", "0", "--at", _at(9),
        )  # fmt: skip
        assert writer.code == 0, writer.stderr
        row = lines.next().split()
        assert row[:4] == ["8", "2026-11-29T14:00:09.000000Z", "g", "capacity.observed"]
        assert '"run":"r7"' in row[4]
    finally:
        follower.send_signal(signal.SIGINT)
        follower.wait(timeout=60)
    stderr = follower.stderr.read() if follower.stderr else ""
    assert follower.returncode == 0, stderr
    assert "Traceback" not in stderr
