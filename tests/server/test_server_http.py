"""`quotaledger serve` over real HTTP (SPEC §11): routes, statuses, exit codes, limits,
auth, and group commit's serial equivalence under concurrent clients."""

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.serving import Served, cli, free_port, records

CONFIG = {"goal": "g", "max_active_cases": 3, "quota_tpm": 1_000_000}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path / "j.jsonl")
    yield server
    assert server.stop() == 0


def _configured(served: Served) -> None:
    assert served.call("POST", "/v1/configure", CONFIG)[0] == 200
    observed = {"goal": "g", "uncached_input": 10, "output": 5}
    assert served.call("POST", "/v1/observe", observed)[0] == 200


def test_a_writer_answers_its_json_with_status_and_exit_code(served: Served) -> None:
    status, headers, body = served.call("POST", "/v1/configure", CONFIG)
    assert (status, headers["quotaledger-exit-code"], body["ok"]) == (200, "0", True)
    assert body["event"]["seq"] == 1 and records(served.journal)[0]["seq"] == 1
    refused = {"goal": "g", "run": "r1", "arm": "baseline", "forecast_tpm": 2000}
    status, headers, body = served.call("POST", "/v1/admit", refused)  # no observation yet
    assert (status, headers["quotaledger-exit-code"], body["ok"]) == (200, "1", False)
    status, headers, body = served.call("GET", "/v1/inspect?goal=g")
    assert status == 200 and body["ok"] is True
    status, headers, lines = served.call("GET", "/v1/log?last=1")
    assert status == 200 and [line["seq"] for line in lines] == [2]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/v1/probe_run", None, 404, "unknown_command"),
        ("GET", "/v1/nope", None, 404, "unknown_command"),
        ("GET", "/v1/admit", None, 405, "method_not_allowed"),
        ("POST", "/v1/inspect", {}, 405, "method_not_allowed"),
        ("POST", "/v1/configure", {"goal": "g", "bogus": 1}, 400, "invalid_argument"),
        ("POST", "/v1/configure", b"{not json", 400, "invalid_input"),
        ("POST", "/v1/configure", b"[1]", 400, "invalid_input"),
        ("POST", "/v1/configure", b"{" + b" " * (1024 * 1024 + 1) + b"}", 413, "body_too_large"),
        ("GET", "/v1/inspect?seq=x", None, 400, "invalid_argument"),
    ],
)
def test_refusals_are_json_errors_with_exit_code_2(
    served: Served, method: str, path: str, body: object, status: int, code: str
) -> None:
    got_status, headers, answer = served.call(method, path, body)
    assert (got_status, answer["ok"], answer["error"]["code"]) == (status, False, code)
    assert headers["quotaledger-exit-code"] == "2"
    assert len(records(served.journal)) == 0


def test_not_json_is_415_and_a_head_over_16_kib_is_431(served: Served) -> None:
    status, _, answer = served.call(
        "POST", "/v1/configure", b"goal=g", headers={"content-type": "text/plain"}
    )
    assert (status, answer["error"]["code"]) == (415, "unsupported_media_type")
    status, _, _ = served.call("GET", "/v1/inspect", headers={"x-big": "a" * 17_000})
    assert status == 431


def test_the_service_pages(served: Served) -> None:
    _configured(served)
    assert served.call("GET", "/readyz")[0] == 200
    status, headers, text = served.call("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    for family in (
        b"quotaledger_http_requests_total",
        b"quotaledger_commit_batch_size_bucket",
        b"quotaledger_commit_seconds_bucket",
        b"quotaledger_requests_waiting",
    ):
        assert family in text
    status, headers, page = served.call("GET", "/report?goal=g")
    assert status == 200 and b"<html" in page[:500].lower()
    status, _, document = served.call("GET", "/openapi.json")
    assert status == 200 and document["openapi"] == "3.1.0"
    assert "post" in document["paths"]["/v1/observe"]
    assert "get" in document["paths"]["/v1/inspect"]


def test_log_follow_streams_records_as_they_commit(served: Served) -> None:
    _configured(served)
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as follower:
        follower.sendall(
            b"GET /v1/log?follow=true&kind=capacity.released HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        time.sleep(0.5)
        admit = {"goal": "g", "run": "r1", "arm": "baseline", "forecast_tpm": 10}
        assert served.call("POST", "/v1/admit", admit)[2]["admitted"]
        assert served.call("POST", "/v1/release", {"goal": "g", "run": "r1"})[0] == 200
        seen = b""
        deadline = time.monotonic() + 20
        while b"capacity.released" not in seen and time.monotonic() < deadline:
            seen += follower.recv(65536)
        assert b"200 OK" in seen and b"capacity.released" in seen
        assert b"capacity.admitted" not in seen


def test_auth_refuses_without_writing(tmp_path: Path) -> None:
    (tmp_path / "write").write_text("s3cret-write\n")
    (tmp_path / "read").write_text("s3cret-read")
    server = Served(
        tmp_path / "j.jsonl",
        "--token-file",
        str(tmp_path / "write"),
        "--read-token-file",
        str(tmp_path / "read"),
    )
    try:
        assert server.call("GET", "/healthz")[0] == 200
        for token, status in ((None, 401), ("wrong", 401), ("s3cret-read", 403)):
            got, headers, answer = server.call("POST", "/v1/configure", CONFIG, token=token)
            assert (got, headers["quotaledger-exit-code"]) == (status, "2")
            assert "s3cret" not in json.dumps(answer)
        assert server.call("GET", "/readyz", token="s3cret-read")[0] == 200
        assert server.call("GET", "/v1/goals", token="s3cret-read")[0] == 200
        assert server.call("GET", "/v1/goals")[0] == 401
        assert len(records(tmp_path / "j.jsonl")) == 0
        assert server.call("POST", "/v1/configure", CONFIG, token="s3cret-write")[0] == 200
    finally:
        assert server.stop() == 0
    assert b"s3cret" not in server.process.stderr.read()  # type: ignore[union-attr]


def test_another_address_without_a_token_file_is_auth_required(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "quotaledger",
            "serve",
            "--journal",
            str(tmp_path / "j.jsonl"),
            "--listen",
            f"0.0.0.0:{free_port()}",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "auth_required"
    assert not (tmp_path / "j.jsonl").exists()


def _race(served: Served, bodies: list[dict[str, object]], path: str) -> list[dict[str, object]]:
    answers: list[dict[str, object]] = [{}] * len(bodies)
    start = threading.Barrier(len(bodies))

    def one(index: int) -> None:
        connection = served.connection()
        connection.connect()
        start.wait()
        status, _, answer = served.call("POST", path, bodies[index], connection=connection)
        assert status == 200
        answers[index] = answer

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


@pytest.mark.slow
def test_twelve_clients_racing_admit_for_three_slots_admit_exactly_three(
    served: Served,
) -> None:
    _configured(served)
    bodies: list[dict[str, object]] = [
        {"goal": "g", "run": f"r{i}", "arm": "baseline", "forecast_tpm": 10} for i in range(12)
    ]
    answers = _race(served, bodies, "/v1/admit")
    assert sum(1 for answer in answers if answer["admitted"]) == 3
    assert cli("verify", "--journal", str(served.journal)).returncode == 0


@pytest.mark.slow
def test_concurrent_observes_are_all_answered_in_one_contiguous_chain(served: Served) -> None:
    _configured(served)
    bodies: list[dict[str, object]] = [
        {"goal": "g", "run": f"r{i}", "output": 1} for i in range(24)
    ]
    answers = _race(served, bodies, "/v1/observe")
    seqs = sorted(int(answer["event"]["seq"]) for answer in answers)  # type: ignore[index]
    assert seqs == list(range(3, 27))
    assert [r["seq"] for r in records(served.journal)] == list(range(1, 27))
    assert cli("verify", "--journal", str(served.journal)).returncode == 0


def test_a_client_that_never_finishes_its_head_delays_no_one(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port)) as slow:
        slow.sendall(b"POST /v1/observe HTTP/1.1\r\nHost: x\r\nContent-")
        started = time.monotonic()
        assert served.call("POST", "/v1/configure", CONFIG)[0] == 200
        assert time.monotonic() - started < 5


def test_a_cli_writer_and_the_server_share_one_journal(served: Served) -> None:
    _configured(served)
    bodies: list[dict[str, object]] = [
        {"goal": "g", "run": f"s{i}", "arm": "baseline", "forecast_tpm": 10} for i in range(2)
    ]
    local = ("--journal", str(served.journal), "--goal", "g", "--arm", "baseline")
    local += ("--forecast-tpm", "10")
    done = cli("admit", *local, "--run", "c1")
    assert done.returncode == 0, done.stdout
    answers = _race(served, bodies, "/v1/admit")
    assert [answer["admitted"] for answer in answers] == [True, True]
    done = cli("admit", *local, "--run", "c2")
    assert done.returncode == 1 and json.loads(done.stdout)["admitted"] is False
    assert cli("verify", "--journal", str(served.journal)).returncode == 0
