"""`metrics --listen` under connections that misbehave (SPEC §7, §11's machinery):
idle connections hold up no scrape, a reset connection prints nothing, and SIGTERM
in the middle of a scrape stops the server cleanly (exit 0, no traceback)."""

from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest

from quotaledger import Ledger
from tests.support import REPO


@pytest.fixture
def listening(journal_path: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=2, quota_tpm=10_000)
    server = subprocess.Popen(
        [sys.executable, "-m", "quotaledger", "metrics", "--journal", journal_path,
         "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    assert server.stderr is not None
    found = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", server.stderr.readline())
    assert found, "no listening line"
    try:
        yield server, int(found.group(1))
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=30)


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return str(response.read().decode())


def test_idle_connections_hold_up_no_scrape(listening: tuple[subprocess.Popen[str], int]) -> None:
    server, port = listening
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    try:
        idle[0].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # a head never finished
        for _ in range(3):
            assert 'goal="g"' in _scrape(port)
    finally:
        for sock in idle:
            sock.close()
    assert server.poll() is None


def test_a_reset_connection_prints_nothing(listening: tuple[subprocess.Popen[str], int]) -> None:
    server, port = listening
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        # SO_LINGER 0: close() sends RST, possibly while the answer is being written.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    assert 'goal="g"' in _scrape(port)
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0
    assert server.stderr is not None
    assert "Traceback" not in server.stderr.read()


def test_sigterm_during_a_scrape_exits_0_without_a_traceback(
    listening: tuple[subprocess.Popen[str], int],
) -> None:
    server, port = listening
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0
    sock.close()
    assert server.stderr is not None
    assert "Traceback" not in server.stderr.read()
