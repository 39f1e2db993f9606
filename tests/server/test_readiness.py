"""Issue 41, SPEC §11: `serve` creates its journal at start, before it is ready, and
says once, in one line on stderr, that it accepts and where (the port of
`--listen 127.0.0.1:0` included)."""

from __future__ import annotations

import http.client
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from quotaledger.journal.filecheck import holds_journal
from tests.support import REPO

READY = re.compile(r"^quotaledger: serving (?P<journal>.+) on http://127\.0\.0\.1:(?P<port>\d+)\n$")


def _first_line(proc: subprocess.Popen[bytes], timeout_s: float = 60) -> str:
    assert proc.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stderr, selectors.EVENT_READ)
    line = b""
    deadline = time.monotonic() + timeout_s
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        if selector.select(timeout=1):
            chunk = proc.stderr.read1(1)  # type: ignore[attr-defined]
            if not chunk:
                break
            line += chunk
    return line.decode()


def test_the_ready_line_comes_once_with_the_journal_created(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "quotaledger", "serve", "--journal", str(journal),
         "--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    try:
        line = _first_line(proc)
        found = READY.match(line)
        assert found, repr(line)
        assert found["journal"] == str(journal)
        assert holds_journal(str(journal))  # created before it said it was ready
        connection = http.client.HTTPConnection("127.0.0.1", int(found["port"]), timeout=30)
        connection.request("GET", "/readyz")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "serving" not in rest.decode()  # one ready line, not one per anything
