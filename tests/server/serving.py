"""A real `quotaledger serve` process on 127.0.0.1 for the server's tests, and a plain
HTTP client (the standard library's, which nobody here wrote) to talk to it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(
    STRACE is None and os.environ.get("CI") != "true", reason="needs strace (CI installs it)"
)
READY_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Answer:
    status: int
    exit_code: int | None
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Server:
    """One server process: its port, its process, and calls to it."""

    def __init__(self, journal: str, *args: str, prefix: tuple[str, ...] = ()) -> None:
        self.journal = journal
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "quotaledger", "serve", "--journal", journal]
        self.proc = subprocess.Popen(
            [*prefix, *command, "--listen", f"127.0.0.1:{self.port}", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            start_new_session=True,  # strace's tracee goes with it (killpg)
        )
        self.token: str | None = None

    def wait_ready(self) -> Server:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited {self.proc.returncode}: {self.stderr()}")
            try:
                if self.call("GET", "/healthz").status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("the server was not ready within 60 s")

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
        timeout_s: float = 60.0,
    ) -> Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
        try:
            sent = dict(headers or {})
            if self.token and "Authorization" not in sent:
                sent["Authorization"] = f"Bearer {self.token}"
            data = raw
            if body is not None:
                data = json.dumps(body).encode()
                sent.setdefault("Content-Type", "application/json")
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            payload = response.read()
            exit_header = response.getheader("Quotaledger-Exit-Code")
            return Answer(
                response.status,
                int(exit_header) if exit_header is not None else None,
                {k.lower(): v for k, v in response.getheaders()},
                payload,
            )
        finally:
            connection.close()

    def post(self, command: str, **params: Any) -> Answer:
        return self.call("POST", f"/v1/{command}", params)

    def get(self, command: str, query: str = "") -> Answer:
        return self.call("GET", f"/v1/{command}" + (f"?{query}" if query else ""))

    def stop(self, signum: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        return self.proc.wait(timeout=timeout_s)

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read().decode(errors="replace")


@contextmanager
def serving(journal: str | Path, *args: str, prefix: tuple[str, ...] = ()) -> Iterator[Server]:
    server = Server(str(journal), *args, prefix=prefix)
    try:
        yield server.wait_ready()
    finally:
        # The whole group: killing strace alone would leave the server it traces running.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=30)


def strace(*injections: str, output: str = "/dev/null") -> tuple[str, ...]:
    """A prefix that runs the server under strace with `injections` (each an `-e` value)."""
    assert STRACE is not None or os.environ.get("CI") == "true", "strace is needed"
    args: list[str] = [STRACE or "strace", "-f", "-qq", "-o", output]
    for injection in injections:
        args += ["-e", injection]
    return tuple(args)


CONFIGURE = {"goal": "g", "quota_tpm": 1_000_000, "max_active_cases": 3}
"""A goal with three case slots and tokens to spare: admissions race for the slots."""


def configure_and_observe(server: Server, goal: str = "g", slots: int = 3) -> None:
    answer = server.post("configure", **{**CONFIGURE, "goal": goal, "max_active_cases": slots})
    assert answer.status == 200, answer.body
    observed = server.post("observe", goal=goal, uncached_input=10, cached_input=0, output=10)
    assert observed.status == 200, observed.body


def admit(server: Server, run: str, goal: str = "g") -> Answer:
    return server.post("admit", goal=goal, run=run, arm="baseline", forecast_tpm=1000)
