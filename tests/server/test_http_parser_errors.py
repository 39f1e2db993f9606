"""Issue 41: a request the HTTP parser refuses (a garbage method, a malformed or
duplicated Content-Length, a TLS hello on a plain port) answers the documented JSON
error with `Quotaledger-Exit-Code: 2`, as every other HTTP-level refusal does (SPEC
§11), not the server library's text/plain 400."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.server.serving import serving
from tests.support import run_cli

TLS_CLIENT_HELLO = bytes.fromhex("16030100a5010000a10303") + b"\x00" * 32 + b"\x00\x00\x02\x13\x01"

MALFORMED = {
    "a garbage method": b"G\x01T /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    "a malformed Content-Length": (
        b"POST /v1/observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1x\r\n\r\n{}"
    ),
    "a duplicated Content-Length": (
        b"POST /v1/observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}"
    ),
    "a TLS hello on a plain port": TLS_CLIENT_HELLO,
}


def _exchange(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(raw)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_request_the_parser_refuses_answers_the_json_error(tmp_path: Path, kind: str) -> None:
    journal = tmp_path / "j.jsonl"
    run_cli("configure", "--goal", "g", "--quota-tpm", "1000", "--journal", journal)
    before = journal.read_bytes()
    with serving(journal) as server:
        answer = _exchange(server.port, MALFORMED[kind])
        head, _, body = answer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        assert lines[0].startswith("HTTP/1.1 400"), answer
        assert headers["content-type"] == "application/json"
        assert headers["quotaledger-exit-code"] == "2"
        error = json.loads(body)["error"]
        assert error["code"] == "invalid_request" and "\n" not in error["message"]
        assert server.call("GET", "/healthz").status == 200  # the server goes on
    assert journal.read_bytes() == before  # nothing written
