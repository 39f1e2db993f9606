"""Who may reach a server (issue 41, SPEC §11): the Unix socket is created 0600
whatever the umask, so another local user cannot connect; a token file is checked as
a journal is (a regular file owned by the server's user or root, that nobody else may
write or read, of bounded size), else exit 2 `token_file_insecure` before anything
is bound or created; `/metrics` labels only the routes the server knows."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.serving import free_port, serving
from tests.support import REPO

NOBODY = pwd.getpwnam("nobody")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user may enter (pytest's own are 0700): the socket's mode is
    then the only thing between another user and the server."""
    path = Path(tempfile.mkdtemp(prefix="ql-shared-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _connect_as_nobody(where: Path) -> subprocess.CompletedProcess[str]:
    script = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX)\n"
        f"try:\n s.connect({str(where)!r})\nexcept PermissionError:\n sys.exit(13)\n"
        "sys.exit(0)\n"
    )
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups",
         sys.executable, "-I", "-c", script],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@as_root
def test_the_unix_socket_is_0600_under_umask_000(shared_dir: Path) -> None:
    where = shared_dir / "ql.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "quotaledger", "serve", "--journal", str(shared_dir / "j.jsonl"),
         "--listen", f"unix:{where}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, umask=0,
    )  # fmt: skip
    try:
        for _ in range(600):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            if where.exists():
                break
            time.sleep(0.1)
        assert stat.S_IMODE(os.lstat(where).st_mode) == 0o600
        assert _connect_as_nobody(where).returncode == 13  # refused by the kernel
        with socket.socket(socket.AF_UNIX) as mine:
            mine.connect(str(where))  # the server's own user still connects
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


# -- token files ---------------------------------------------------------------------


def _serve_with_token_file(tmp_path: Path, token_file: Path, *, timeout_s: float = 60):
    port = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "quotaledger", "serve", "--journal", str(tmp_path / "j.jsonl"),
         "--listen", f"127.0.0.1:{port}", "--token-file", str(token_file), "--json"],
        capture_output=True, text=True, timeout=timeout_s, cwd=REPO,
    )  # fmt: skip
    return proc, port


def _token(path: Path, mode: int = 0o600, text: str = "s3cret-token\n") -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _bad_kinds(tmp_path: Path) -> dict[str, Path]:
    kinds = {
        "readable by others (0644)": _token(tmp_path / "t644", 0o644),
        "writable by others (0666)": _token(tmp_path / "t666", 0o666),
        "writable by its group (0620)": _token(tmp_path / "t620", 0o620),
        "larger than a token": _token(tmp_path / "big", 0o600, "x" * 100_000),
    }
    link = tmp_path / "link"
    link.symlink_to(_token(tmp_path / "target"))
    kinds["a symlink"] = link
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    kinds["a FIFO with no writer"] = fifo
    directory = tmp_path / "dir"
    directory.mkdir(mode=0o700)
    kinds["a directory"] = directory
    if os.geteuid() == 0:
        foreign = _token(tmp_path / "foreign")
        os.chown(foreign, NOBODY.pw_uid, NOBODY.pw_gid)
        kinds["owned by another user"] = foreign
    return kinds


def test_every_bad_kind_of_token_file_is_refused_before_binding(tmp_path: Path) -> None:
    for kind, path in _bad_kinds(tmp_path).items():
        proc, port = _serve_with_token_file(tmp_path, path)
        assert proc.returncode == 2, (kind, proc.stdout, proc.stderr)
        error = json.loads(proc.stdout)["error"]
        assert error["code"] == "token_file_insecure", (kind, error)
        assert "s3cret" not in proc.stdout + proc.stderr
        assert not (tmp_path / "j.jsonl").exists(), kind  # nothing created
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # nothing was bound either


def test_a_private_token_file_is_taken(tmp_path: Path) -> None:
    token = _token(tmp_path / "token", 0o600)
    with serving(tmp_path / "j.jsonl", "--token-file", str(token)) as server:
        assert server.call("GET", "/readyz").status == 401
        server.token = "s3cret-token"
        assert server.call("GET", "/readyz").status == 200


# -- metrics labels ------------------------------------------------------------------


def test_metrics_label_only_the_routes_the_server_knows(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        for path in ("/v1/secret-in-url", "/etc/passwd?x=1", "/v1/inspect", "/nowhere"):
            server.call("GET", path)
        server.call("POST", "/v1/zzz-made-up", {"goal": "g"})
        exposition = server.call("GET", "/metrics").body.decode()
    lines = [line for line in exposition.splitlines() if "quotaledger_http_requests" in line]
    labels = {
        line.split('command="', 1)[1].split('"', 1)[0] for line in lines if "command=" in line
    }
    assert "secret-in-url" not in exposition and "passwd" not in exposition
    assert "zzz-made-up" not in exposition and "nowhere" not in exposition
    assert "inspect" in labels and "other" in labels


def test_a_tls_certificate_that_is_not_one_is_exit_2_before_binding(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "quotaledger", "serve", "--journal", str(tmp_path / "j.jsonl"),
         "--listen", f"127.0.0.1:{port}", "--tls-cert", str(REPO / "README.md"),
         "--tls-key", str(REPO / "README.md"), "--json"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["error"]["code"] == "invalid_option"
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "j.jsonl").exists()
