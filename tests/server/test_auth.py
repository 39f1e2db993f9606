"""Tokens (SPEC §11): loopback by default; any other address needs a token file; a
request without the token, with a wrong one, or with the read-only token on a writer
is refused with nothing written; /healthz needs none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.server.serving import CONFIGURE, free_port, serving
from tests.support import REPO


def test_another_address_without_a_token_file_is_refused_before_binding(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "quotaledger", "serve", "--journal", str(tmp_path / "j.jsonl"),
         "--listen", f"0.0.0.0:{port}", "--json"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 2
    assert '"auth_required"' in proc.stdout
    assert not (tmp_path / "j.jsonl").exists()


def test_tokens_are_required_compared_and_scoped(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret-write\n")
    (tmp_path / "read").write_text("s3cret-read")
    for name in ("token", "read"):
        (tmp_path / name).chmod(0o600)  # a token file others may read is refused
    journal = tmp_path / "j.jsonl"
    args = ("--token-file", str(tmp_path / "token"), "--read-token-file", str(tmp_path / "read"))
    with serving(journal, *args) as server:
        created = journal.read_bytes()  # the genesis record: serve creates it at start
        assert created.count(b"\n") == 1
        assert server.call("GET", "/healthz").status == 200  # no token needed
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-write"}):
            refused = server.call("POST", "/v1/configure", CONFIGURE, headers=headers)
            assert (refused.status, refused.exit_code) == (401, 2)
            assert refused.json["error"]["code"] == "unauthorized"
            assert b"s3cret" not in refused.body
        assert journal.read_bytes() == created  # nothing written
        read = {"Authorization": "Bearer s3cret-read"}
        forbidden = server.call("POST", "/v1/configure", CONFIGURE, headers=read)
        assert (forbidden.status, forbidden.json["error"]["code"]) == (403, "forbidden")
        assert journal.read_bytes() == created  # nothing written
        write = {"Authorization": "Bearer s3cret-write"}
        assert server.call("POST", "/v1/configure", CONFIGURE, headers=write).status == 200
        for path in ("/v1/inspect?goal=g", "/readyz", "/metrics", "/openapi.json"):
            assert server.call("GET", path, headers=read).status == 200, path
        assert server.call("GET", "/metrics").status == 401
