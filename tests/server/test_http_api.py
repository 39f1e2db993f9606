"""The HTTP API of `quotaledger serve` (SPEC §11) against a real server on 127.0.0.1:
the body is what `--json` prints, the status follows the exit code, every HTTP-level
refusal is a JSON error with exit code 2, and nothing refused writes anything."""

from __future__ import annotations

import datetime as dt
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.serving import Server, admit, configure_and_observe, serving
from tests.support import hours_ahead_t0, promtool_check, run_cli

JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
DEEP_USAGE = b'{"goal": "g", "usage": ' + b"[" * 5000 + b"]" * 5000 + b"}"
DEEP_UNKNOWN = b'{"goal": "g", "bogus": ' + b"[" * 5000 + b"]" * 5000 + b"}"
BAD_ADMIT = b'{"goal":"g","run":"r","forecast_tpm":"2000"}'


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path / "j.jsonl") as running:
        configure_and_observe(running)
        yield running


def _journal_bytes(server: Server) -> bytes:
    return Path(server.journal).read_bytes()


def test_a_writer_answers_what_json_prints_with_its_exit_code(
    server: Server, tmp_path: Path
) -> None:
    answer = admit(server, "r1")
    assert (answer.status, answer.exit_code) == (200, 0)
    assert answer.json["admitted"] is True
    event = answer.json["event"]
    # The same admission made locally on a copy answers the same keys in the same order.
    local = run_cli("inspect", "--goal", "g", "--journal", server.journal, "--json").json
    assert [run["run"] for run in local["goals"]["g"]["active_runs"]] == ["r1"]
    assert list(answer.json) == [
        "ok", "goal", "at", "admitted", "idempotent", "appended", "dry_run", "receipt", "event",
    ]  # fmt: skip
    assert event["seq"] == json.loads(_journal_bytes(server).splitlines()[-1])["seq"]


def test_a_refusal_is_200_with_exit_code_1(server: Server) -> None:
    for run in ("r1", "r2", "r3"):
        assert admit(server, run).exit_code == 0
    refused = admit(server, "r4")
    assert (refused.status, refused.exit_code) == (200, 1)
    assert refused.json["ok"] is False
    assert "case_slots_full" in refused.json["reasons"] or refused.json["reasons"]


def test_a_cooldown_refusal_carries_retry_after(server: Server) -> None:
    # Explicit times, so the cooldown's end is 20 s after the refusal exactly.
    configured = server.post("configure", goal="c", quota_tpm=100_000, at=hours_ahead_t0(-1))
    assert configured.status == 200, configured.body
    t0 = configured.json["event"]["at"]
    rejected = server.post("reject", goal="c", retry_after_s=30, at=_plus_s(t0, 1))
    assert rejected.status == 200, rejected.body
    refused = server.post("admit", goal="c", run="r1", at=_plus_s(t0, 11))
    assert (refused.status, refused.exit_code) == (200, 1), refused.body
    assert refused.headers["retry-after"] == "20"
    assert "retry-after" not in admit(server, "r2").headers  # admitted: nothing to wait for


def _plus_s(at: str, seconds: int) -> str:
    moment = dt.datetime.fromisoformat(at.replace("Z", "+00:00")) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_reader_takes_its_parameters_from_the_query(server: Server) -> None:
    answer = server.get("inspect", "goal=g")
    assert (answer.status, answer.exit_code) == (200, 0)
    assert "g" in answer.json["goals"]
    log = server.get("log", "goal=g&last=1")
    assert log.status == 200
    lines = log.body.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["kind"] == "capacity.observed"


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status", "code"),
    [
        ("POST", "/v1/admit", b"{not json", JSON, 400, "invalid_body"),
        ("POST", "/v1/admit", b"[1,2]", JSON, 400, "invalid_body"),
        ("POST", "/v1/admit", b"\xff\xfe", JSON, 400, "invalid_body"),
        ("POST", "/v1/observe", DEEP_USAGE, JSON, 400, "invalid_body"),
        ("POST", "/v1/observe", DEEP_UNKNOWN, JSON, 400, "invalid_body"),
        ("POST", "/v1/admit", b'{"goal":"g","run":"r","bogus":1}', JSON, 400, "invalid_argument"),
        ("POST", "/v1/admit", BAD_ADMIT, JSON, 400, "invalid_argument"),
        ("POST", "/v1/admit", b"goal=g", FORM, 415, "not_json"),
        ("POST", "/v1/admit", b"x" * (1024 * 1024 + 1), JSON, 413, "body_too_large"),
        ("GET", "/v1/admit", None, {}, 405, "method_not_allowed"),
        ("POST", "/v1/inspect", b"{}", JSON, 405, "method_not_allowed"),
        ("POST", "/v1/probe_run", b"{}", JSON, 404, "unknown_command"),
        ("GET", "/v1/nonsense", None, {}, 404, "unknown_command"),
        ("GET", "/v1/inspect?goal=g&goal=h", None, {}, 400, "invalid_body"),
        ("GET", "/v1/inspect?goal=bad%20goal", None, {}, 400, "invalid_identifier"),
        ("GET", "/v1/metrics?out=/tmp/x.prom", None, {}, 400, "remote_not_served"),
    ],
)  # fmt: skip
def test_bad_requests_get_a_json_error_and_write_nothing(
    server: Server,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    before = _journal_bytes(server)
    answer = server.call(method, path, raw=body, headers=headers)
    assert (answer.status, answer.exit_code) == (status, 2), answer.body
    assert answer.json["ok"] is False
    assert answer.json["error"]["code"] == code
    assert _journal_bytes(server) == before


def test_a_request_head_over_16_kib_is_431(server: Server) -> None:
    before = _journal_bytes(server)
    answer = server.call("GET", "/v1/inspect?goal=g", headers={"X-Big": "y" * 17_000})
    assert (answer.status, answer.exit_code) == (431, 2)
    assert answer.json["error"]["code"] == "head_too_large"
    assert _journal_bytes(server) == before
    assert server.get("inspect", "goal=g").status == 200  # the server goes on


def test_health_readiness_openapi_metrics_and_report(server: Server) -> None:
    assert server.call("GET", "/healthz").status == 200
    assert server.call("GET", "/readyz").json == {"ok": True}
    document = server.call("GET", "/openapi.json").json
    assert document["openapi"].startswith("3.1")
    assert "post" in document["paths"]["/v1/admit"]
    assert "get" in document["paths"]["/v1/inspect"]
    metrics = server.call("GET", "/metrics")
    assert metrics.status == 200
    text = metrics.body.decode()
    assert 'quotaledger_http_requests_total{command="observe",status="200"} 1.0' in text
    assert 'quotaledger_http_requests_total{command="/readyz",status="200"} 1.0' in text
    assert "quotaledger_commit_batch_size_bucket" in text
    assert "quotaledger_commit_seconds_bucket" in text
    assert "quotaledger_requests_waiting" in text
    assert 'goal="g"' in text
    promtool_check(text)
    page = server.call("GET", "/report?goal=g")
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert b"<html" in page.body.lower()
    missing = server.call("GET", "/report?goal=nope")
    assert (missing.status, missing.json["error"]["code"]) == (400, "unknown_goal")


def test_log_follow_streams_records_as_they_commit(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"GET /v1/log?goal=g&follow=true HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while b"capacity.observed" not in received:
            received += sock.recv(65536)
        assert b"quotaledger-exit-code: 0" in received.lower()
        assert admit(server, "r9").exit_code == 0
        while b"capacity.admitted" not in received:
            chunk = sock.recv(65536)
            assert chunk, "the stream ended"
            received += chunk


def test_a_body_near_the_limit_is_read_whole(server: Server) -> None:
    padding = " " * (900 * 1024)
    raw = (
        '{"goal": "g", "uncached_input": 5, "cached_input": 0,' + padding + '"output": 5}'
    ).encode()
    answer = server.call("POST", "/v1/observe", raw=raw, headers=JSON)
    assert (answer.status, answer.exit_code) == (200, 0), answer.body[:200]
