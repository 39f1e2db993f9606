"""Every fixed-length answer leaves the server in one write (SPEC §9's server CPU and
p99 targets): its head and its body together, on a kept-alive connection, whether it
is an answer, an HTTP-level refusal, a HEAD (the head alone) or a route outside /v1.
strace records the server's writes; the connection's socket is the one the answers
go to."""

from __future__ import annotations

import http.client
import re
import time
from pathlib import Path

from tests.server.serving import needs_strace, serving, strace

SOCKET_WRITES = "trace=write,writev,sendto,sendmsg"
WRITE = re.compile(r"^\d+\s+(write|writev|sendto|sendmsg)\((\d+),(.*)$")
CALLS = [
    ("POST", "/v1/configure", b'{"goal": "g", "quota_tpm": 100000}'),
    (
        "POST",
        "/v1/observe",
        b'{"goal": "g", "uncached_input": 10, "cached_input": 0, "output": 10}',
    ),
    ("GET", "/v1/inspect?goal=g", None),
    ("HEAD", "/v1/inspect?goal=g", None),
    ("GET", "/v1/nope", None),
    ("POST", "/v1/observe", b"{not json"),
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
]


def _connection_writes(trace: Path, start: int, expected: int) -> list[str]:
    """The writes after byte `start` of the trace to the one socket that answers went
    to, once `expected` are in (strace writes each line as its call returns)."""
    deadline = time.monotonic() + 30
    while True:
        found: dict[str, list[str]] = {}
        for line in trace.read_bytes()[start:].decode(errors="replace").splitlines():
            match = WRITE.match(line)
            if match:
                found.setdefault(match[2], []).append(match[3])
        answered = [fd for fd, writes in found.items() if any("HTTP/1.1 " in w for w in writes)]
        assert len(answered) <= 1, f"answers went to several sockets: {answered}"
        writes = found[answered[0]] if answered else []
        if len(writes) >= expected or time.monotonic() > deadline:
            return writes
        time.sleep(0.05)


@needs_strace
def test_each_answer_is_one_write_on_a_kept_alive_connection(tmp_path: Path) -> None:
    trace = tmp_path / "writes.txt"
    with serving(tmp_path / "j.jsonl", prefix=strace(SOCKET_WRITES, output=str(trace))) as server:
        start = trace.stat().st_size  # after the readiness checks' connections
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        statuses = []
        for method, path, body in CALLS:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
        connection.close()
        assert statuses == [200, 200, 200, 200, 404, 400, 200, 200]
        writes = _connection_writes(trace, start, len(CALLS))
    assert len(writes) == len(CALLS), "\n".join(writes)
    assert all("HTTP/1.1 " in write[:32] for write in writes), "\n".join(writes)
