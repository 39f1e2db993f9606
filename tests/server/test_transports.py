"""The server on a Unix socket and over TLS (SPEC §11), with the clients that reach
them: `--journal unix:PATH` and `https://` (the certificate trusted by SSL_CERT_FILE)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.server.serving import free_port
from tests.support import REPO, run_process


def _serve(journal: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "quotaledger", "serve", "--journal", str(journal), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip


def _until(check: object, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        if callable(check) and check():
            return
        time.sleep(0.1)
    raise AssertionError("the server did not come up")


def test_a_unix_socket_server_and_its_cli_client(tmp_path: Path) -> None:
    where = tmp_path / "ql.sock"
    proc = _serve(tmp_path / "j.jsonl", "--listen", f"unix:{where}")
    try:
        _until(where.exists, proc)
        target = f"unix:{where}"
        configured = run_process("configure", "--goal", "g", "--quota-tpm", "1000",
                                 "--journal", target, "--json")  # fmt: skip
        assert configured.code == 0, configured.stderr
        assert configured.json["appended"] is True
        shown = run_process("goals", "--journal", target, "--json")
        assert shown.code == 0 and "g" in shown.stdout
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
def test_tls_with_the_servers_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    port = free_port()
    proc = _serve(tmp_path / "j.jsonl", "--listen", f"127.0.0.1:{port}",
                  "--tls-cert", str(cert), "--tls-key", str(key))  # fmt: skip
    target = f"https://127.0.0.1:{port}"
    env = {"SSL_CERT_FILE": str(cert)}
    try:

        def up() -> bool:
            return run_process("goals", "--journal", target, "--json", env=env).code == 0

        _until(up, proc)
        configured = run_process("configure", "--goal", "g", "--quota-tpm", "1000",
                                 "--journal", target, "--json", env=env)  # fmt: skip
        assert configured.code == 0, configured.stderr
        untrusted = run_process("goals", "--journal", target, "--json")
        assert untrusted.code == 4 and "server_unreachable" in untrusted.stdout
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
