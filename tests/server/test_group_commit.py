"""Group commit (SPEC §11): concurrent requests are decided one after another in
arrival order and made durable together; the server and other writers share the
journal. Batches are forced, not hoped for: the server is stopped (SIGSTOP) while the
requests arrive, and strace holds its fdatasync so later ones wait for the next commit.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from pathlib import Path

import pytest

from tests.server.serving import (
    Answer,
    Server,
    admit,
    configure_and_observe,
    needs_strace,
    serving,
    strace,
)
from tests.support import run_cli


def _concurrently(
    server: Server, calls: list[tuple[str, dict[str, object]]], *, then: int = signal.SIGCONT
) -> list[Answer | None]:
    """Every call sent at once while the server is stopped, then answered (None: the
    connection failed, nothing was answered); `then` is sent before SIGCONT."""
    answers: list[Answer | None] = [None] * len(calls)
    sent = threading.Barrier(len(calls) + 1)

    def call(index: int, command: str, params: dict[str, object]) -> None:
        sent.wait()
        with contextlib.suppress(OSError):  # never answered: nothing acknowledged
            answers[index] = server.post(command, **params)

    server.proc.send_signal(signal.SIGSTOP)
    threads = [
        threading.Thread(target=call, args=(i, command, params))
        for i, (command, params) in enumerate(calls)
    ]
    for thread in threads:
        thread.start()
    sent.wait()
    _wait_connected(server, len(calls))
    if then != signal.SIGCONT:
        server.proc.send_signal(then)
    server.proc.send_signal(signal.SIGCONT)
    for thread in threads:
        thread.join(120)
    return answers


def _answered(answers: list[Answer | None]) -> list[Answer]:
    assert all(answer is not None for answer in answers)
    return [answer for answer in answers if answer is not None]


def _wait_connected(server: Server, count: int) -> None:
    """Until the kernel holds `count` connections to the stopped server (each request
    then sits whole in its socket buffer: sent before the server runs again)."""
    import subprocess
    import time

    for _ in range(600):
        listing = subprocess.run(
            ["ss", "-Htn", "state", "established", f"dport = :{server.port}"],
            capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        if len(listing.splitlines()) >= count:
            time.sleep(0.2)  # their request bytes follow their connect
            return
        time.sleep(0.05)
    raise AssertionError("the clients did not connect")


def _batches(server: Server) -> tuple[int, int]:
    """(commits, writer requests committed) from the server's own metrics."""
    text = server.call("GET", "/metrics").body.decode()
    count = re.search(r"^quotaledger_commit_batch_size_count ([0-9.e+]+)$", text, re.M)
    total = re.search(r"^quotaledger_commit_batch_size_sum ([0-9.e+]+)$", text, re.M)
    assert count and total
    return int(float(count.group(1))), int(float(total.group(1)))


@pytest.mark.slow
@needs_strace
def test_twelve_clients_racing_for_three_slots_admit_exactly_three_in_few_commits(
    tmp_path: Path,
) -> None:
    slow_sync = strace("trace=fdatasync", "inject=fdatasync:delay_enter=300000")
    with serving(tmp_path / "j.jsonl", prefix=slow_sync) as server:
        configure_and_observe(server)
        commits_before, _ = _batches(server)
        calls = [
            ("admit", {"goal": "g", "run": f"r{i}", "arm": "baseline", "forecast_tpm": 1000})
            for i in range(12)
        ]
        answers = _answered(_concurrently(server, calls))
        assert sorted(a.exit_code for a in answers) == [0] * 3 + [1] * 9
        commits, committed = _batches(server)
        assert committed >= 12 + 2  # configure and observe before
        assert commits - commits_before <= 3, "the twelve were not committed together"
        # Serial equivalence: each decision is what a fold of the journal before it
        # decides (audit re-decides it from the log alone).
        for answer in answers:
            seq = answer.json["event"]["seq"]
            audit = run_cli("audit", "--journal", server.journal, "--seq", str(seq), "--json")
            assert audit.code == 0 and audit.json["reproduced"] is True, audit.stdout


def test_the_server_and_a_cli_writer_share_the_journal(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        configure_and_observe(server)
        assert admit(server, "r1").exit_code == 0
        local = run_cli(
            "admit", "--goal", "g", "--run", "r2", "--arm", "baseline",
            "--forecast-tpm", "1000", "--journal", server.journal, "--json",
        )  # fmt: skip
        assert local.code == 0, local.stdout
        assert admit(server, "r3").exit_code == 0
        assert admit(server, "r4").exit_code == 1  # the CLI's admission took a slot
        assert server.post("release", goal="g", run="r2").exit_code == 0
        seen = server.get("inspect", "goal=g").json["goals"]["g"]["active_runs"]
        assert sorted(run["run"] for run in seen) == ["r1", "r3"]
    verified = run_cli("verify", "--journal", str(tmp_path / "j.jsonl"), "--json")
    assert verified.code == 0, verified.stdout


def test_sigterm_answers_what_waits_and_exits_0(tmp_path: Path) -> None:
    """SIGTERM arrives with six requests: those read are committed and answered, the
    rest are never answered (so never acknowledged); the server exits 0."""
    with serving(tmp_path / "j.jsonl") as server:
        configure_and_observe(server)
        calls = [
            ("observe", {"goal": "g", "uncached_input": 1, "cached_input": 0, "output": 1})
        ] * 6
        answers = _concurrently(server, calls, then=signal.SIGTERM)
        assert server.proc.wait(timeout=30) == 0
    answered = [a for a in answers if a is not None]
    assert {a.status for a in answered} <= {200, 503}
    acknowledged = sum(1 for a in answered if a.status == 200)
    lines = (tmp_path / "j.jsonl").read_bytes().count(b'"capacity.observed"')
    assert lines >= acknowledged + 1
    assert run_cli("verify", "--journal", str(tmp_path / "j.jsonl")).code == 0
