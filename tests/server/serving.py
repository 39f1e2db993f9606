"""A real `quotaledger serve` process on 127.0.0.1 for the server's tests, and a
keep-alive HTTP client of the standard library's."""

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Served:
    def __init__(self, journal: Path, *extra: str, prefix: tuple[str, ...] = ()) -> None:
        self.journal = journal
        self.port = free_port()
        command = [sys.executable, "-m", "quotaledger", "serve", "--journal", str(journal)]
        command += ["--listen", f"127.0.0.1:{self.port}", *extra]
        self.process = subprocess.Popen(
            [*prefix, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "QUOTALEDGER_JSON": "1"},
        )
        self.wait_ready()

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(self.process.stderr.read().decode()[-3000:])  # type: ignore[union-attr]
            try:
                if self.call("GET", "/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("the server did not answer /healthz")

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = None,
        connection: http.client.HTTPConnection | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        conn = connection or self.connection()
        sent = {"content-type": "application/json", **(headers or {})}
        if token is not None:
            sent["authorization"] = f"Bearer {token}"
        data = body if isinstance(body, bytes) else (None if body is None else json.dumps(body))
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        raw = response.read()
        if connection is None:
            conn.close()
        answer_headers = {k.lower(): v for k, v in response.getheaders()}
        kind = answer_headers.get("content-type", "")
        decoded: Any = raw
        if kind.startswith("application/jsonl"):
            decoded = [json.loads(line) for line in raw.splitlines()]
        elif kind.startswith("application/json"):
            decoded = json.loads(raw)
        return response.status, answer_headers, decoded

    def stop(self, timeout_s: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(timeout_s)


def records(journal: Path) -> list[dict[str, Any]]:
    if not journal.exists():  # created by the first append
        return []
    return [json.loads(line) for line in journal.read_text().splitlines()[1:]]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quotaledger", *args, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
