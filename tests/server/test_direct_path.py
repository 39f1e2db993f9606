"""The writers taken straight from the parser (`server/direct.py`) answer exactly as
the ASGI path does: the same bytes, in request order on a connection, whatever the
client does meanwhile; and the runner's per-event requests do take that path.

Two servers on two copies of one new journal get the same requests at explicit times:
one as plain Content-Length bodies (the direct path), the other chunked (which the
direct path leaves to the ASGI one). Their answers must be the same bytes."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path

from quotaledger.api import Ledger
from tests.server.serving import (
    Server,
    admit,
    configure_and_observe,
    needs_strace,
    serving,
    strace,
)
from tests.support import hours_ahead_t0

JSON = b"Content-Type: application/json\r\n"


def _plain(path: str, body: bytes, extra: bytes = b"") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
        + JSON
        + extra
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def _chunked(path: str, body: bytes, extra: bytes = b"") -> bytes:
    half = len(body) // 2
    chunks = b"".join(
        f"{len(part):x}\r\n".encode() + part + b"\r\n"
        for part in (body[:half], body[half:])
        if part
    )
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
        + JSON
        + extra
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + chunks
        + b"0\r\n\r\n"
    )


class Reader:
    """Whole responses off one connection, as raw bytes (head and body)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def response(self) -> bytes:
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            self._more()
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
        self.buffer = rest[length:]
        return head + b"\r\n\r\n" + rest[:length]

    def closed(self) -> bool:
        return self.sock.recv(1) == b""

    def _more(self) -> None:
        data = self.sock.recv(65536)
        assert data, f"the connection closed mid-response: {self.buffer!r}"
        self.buffer += data


def _connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=60)


def _calls(t0: str) -> list[tuple[str, dict[str, object] | bytes]]:
    at = t0[:-10]  # "...T12:00:", then the seconds and their fraction

    def moment(second: int) -> str:
        return f"{at}{second:02d}.000000Z"

    return [
        ("configure", {"goal": "g", "quota_tpm": 100_000, "max_active_cases": 1, "at": t0}),
        ("observe", {"goal": "g", "uncached_input": 10, "cached_input": 0, "output": 5,
                     "at": moment(1)}),
        ("admit", {"goal": "g", "run": "r1", "at": moment(2)}),
        ("admit", {"goal": "g", "run": "r2", "at": moment(3)}),  # refused: the slot is held
        ("reject", {"goal": "g", "retry_after_s": 30, "at": moment(4)}),
        ("admit", {"goal": "g", "run": "r3", "at": moment(5)}),  # refused with Retry-After
        ("release", {"goal": "g", "run": "r1", "at": moment(6)}),
        ("observe", b"{not json"),
        ("observe", {"goal": "g", "uncached_input": -1, "cached_input": 0, "output": 0}),
        ("observe", {"goal": "g", "nonsense": 1}),
        ("observe", {"goal": "nope", "uncached_input": 1, "cached_input": 0, "output": 0}),
        ("admit", {"goal": "g", "run": "r4", "wait_s": 0, "lease_s": 60, "at": moment(40)}),
    ]  # fmt: skip


def _answers(server: Server, frame: object, calls: list[tuple[str, dict[str, object] | bytes]]):
    with _connect(server) as sock:
        reader = Reader(sock)
        answers = []
        for command, params in calls:
            body = params if isinstance(params, bytes) else json.dumps(params).encode()
            sock.sendall(frame(f"/v1/{command}", body))  # type: ignore[operator]
            answers.append(reader.response())
        sock.sendall(frame("/v1/observe", b'{"goal": "g"}', b"Connection: close\r\n"))  # type: ignore[operator]
        answers.append(reader.response())
        assert reader.closed()
    return answers


def test_direct_answers_are_the_asgi_path_s_bytes(tmp_path: Path) -> None:
    calls = _calls(hours_ahead_t0(-1))
    with Ledger.open(str(tmp_path / "direct.jsonl")) as ledger:
        ledger.journal.create()  # one genesis for both, so that their hashes agree
    shutil.copyfile(tmp_path / "direct.jsonl", tmp_path / "asgi.jsonl")
    with serving(tmp_path / "direct.jsonl") as direct, serving(tmp_path / "asgi.jsonl") as asgi:
        by_direct = _answers(direct, _plain, calls)
        by_asgi = _answers(asgi, _chunked, calls)
    assert len(by_direct) == len(calls) + 1
    for (command, params), one, other in zip(calls, by_direct, by_asgi, strict=False):
        assert one == other, (command, params)
    assert b"retry-after: 29\r\n" in by_direct[5]  # the reject's 30 s, 1 s later
    assert by_direct[-1].split(b"\r\n\r\n")[0].endswith(b"connection: close")
    statuses = [answer.split(b" ", 2)[1] for answer in by_direct]
    # Answers, a decode refusal, a value refused, an unknown key, the committer's
    # error (an unknown goal), the admit that may wait, the closing request's refusal.
    assert statuses == [b"200"] * 7 + [b"400"] * 4 + [b"200", b"400"]


def test_pipelined_requests_are_answered_in_their_order(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        assert server.post("configure", goal="g", quota_tpm=10**9).status == 200
        observe = (
            b'{"goal": "g", "run": "RUN", "uncached_input": 1, "cached_input": 0, "output": 0}'
        )
        requests = []
        for i in range(40):
            if i % 5 == 1:
                requests.append((b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", b'{"ok":true}'))
            elif i % 5 == 3:
                requests.append((_plain("/v1/observe", b"{not json"), b'"invalid_body"'))
            else:
                run = f"run-{i:02d}".encode()
                requests.append((_plain("/v1/observe", observe.replace(b"RUN", run)), run))
        with _connect(server) as sock:
            sock.sendall(b"".join(request for request, _ in requests))  # one write: pipelined
            reader = Reader(sock)
            for i, (_, mark) in enumerate(requests):
                assert mark in reader.response(), i
        logged = server.get("log").body.decode()
    assert [f"run-{i:02d}" for i in range(40) if i % 5 in (0, 2, 4)] == [
        json.loads(line)["data"]["run"]
        for line in logged.splitlines()
        if json.loads(line)["kind"] == "capacity.observed"
    ]


@needs_strace
def test_a_client_gone_before_its_answer_loses_nothing_and_stops_nothing(
    tmp_path: Path,
) -> None:
    # Each commit's fdatasync is held 300 ms, so the client is gone before its answer.
    prefix = strace("trace=fdatasync", "inject=fdatasync:delay_exit=300000")
    with serving(tmp_path / "j.jsonl", prefix=prefix) as server:
        assert server.post("configure", goal="g", quota_tpm=10**9).status == 200
        body = b'{"goal": "g", "run": "gone", "uncached_input": 1, "cached_input": 0, "output": 0}'
        with _connect(server) as sock:
            sock.sendall(_plain("/v1/observe", body))
        answer = server.post("observe", goal="g", run="after", uncached_input=1, cached_input=0,
                             output=0)  # fmt: skip
        assert answer.status == 200, answer.body
        runs = [
            json.loads(line).get("data", {}).get("run")
            for line in server.get("log").body.decode().splitlines()
        ]
    assert runs[-2:] == ["gone", "after"]


SPY = """
import sys
from quotaledger.server.app import Api

taken = []
original = Api.direct


def direct(self, cycle):
    taken.append(cycle.case.name)
    return original(self, cycle)


Api.direct = direct
from quotaledger.entry import main

try:
    main(sys.argv[sys.argv.index("serve"):])  # after the interpreter's own words
finally:
    sys.stderr.write("direct: " + ",".join(taken) + "\\n")
"""
"""The server, its `Api.direct` counted (and otherwise run as it is)."""


def test_the_runners_per_event_writers_take_the_direct_path(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl", prefix=(sys.executable, "-c", SPY)) as server:
        configure_and_observe(server)
        assert admit(server, "r").exit_code == 0
        assert server.post("release", goal="g", run="r").exit_code == 0
        waits = server.post(
            "admit", goal="g", run="w", arm="baseline", forecast_tpm=1, wait_s=0, lease_s=60
        )
        assert waits.exit_code == 0, waits.body  # then the ASGI path
        not_json = server.call(
            "POST", "/v1/observe", raw=b"{}", headers={"Content-Type": "text/plain"}
        )
        assert not_json.status == 415  # the ASGI path alone
        assert server.stop() == 0
        stderr = server.stderr()
    assert "direct: configure,observe,admit,release,admit\n" in stderr, stderr
