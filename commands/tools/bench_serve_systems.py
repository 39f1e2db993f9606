"""`bench --serve`'s systems under test, each started and stopped here: a real
`quotaledger serve` process, its bare-line skeleton (bench_skeleton), a Redis with
`appendfsync always` and its rate-limit script, a SQLite database, PostgreSQL's
scratch schema for the raw psycopg loop."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

STARTUP_S = 120.0
"""How long a server may take to open and fold its journal on a loaded machine."""
STOP_S = 30.0

RATE_LIMIT_LUA = """
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
if used == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], 60000) end
if used > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return 0
end
return 1
"""
"""A fixed-window tokens-per-minute limit, the way runners share one in Redis today:
add the event's tokens to the minute's counter, refuse (and take them back) over the
limit. Its writes go to the AOF and are fsynced before the reply (`appendfsync
always`)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    """A server the clients talk to: its port and its pid (for its CPU)."""

    port: int
    pid: int


def serve_command(journal: str, port: int) -> list[str]:
    return [sys.executable, "-m", "quotaledger", "serve", "--journal", journal,
            "--listen", f"127.0.0.1:{port}"]  # fmt: skip


def skeleton_command(path: str, port: int) -> list[str]:
    return [sys.executable, "-m", "quotaledger.tools.bench_skeleton", path, f"127.0.0.1:{port}"]


def bare_asgi_command(port: int) -> list[str]:
    return [sys.executable, "-m", "quotaledger.tools.bench_bare_asgi", f"127.0.0.1:{port}"]


@contextmanager
def http_server(command: list[str], port: int, log_path: str) -> Iterator[Process]:
    """Run `command` (a server on `port`) until the block ends; ready once /healthz
    answers 200 (the journal is open and folded by then).

    The command runs in a process group of its own and the whole group is stopped:
    under a wrapper (strace, for the slow disk) the server is the wrapper's child, and
    a wrapper stopped alone detaches and leaves the server running."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        wait_healthy(proc, port, log_path)
        yield Process(port, proc.pid)
    finally:
        _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to `proc`'s group, then SIGKILL to what is left of it after STOP_S."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break  # every process of the group has exited
        proc.poll()  # reap the leader, else it stays a zombie member of the group
        time.sleep(0.05)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def wait_healthy(
    proc: subprocess.Popen[bytes], port: int, log_path: str, startup_s: float = STARTUP_S
) -> None:
    """One /healthz answered within `startup_s` (attempts before the server listens
    cost it nothing); a server that exits first is reported with its log's tail."""
    deadline = time.monotonic() + startup_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log_path, "rb") as log:
                raise RuntimeError(f"the server exited {proc.returncode}: {log.read()[-500:]!r}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                if sock.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the server did not answer /healthz within {startup_s:g} s")


# -- Redis -------------------------------------------------------------------------------


@dataclass
class Redis:
    host: str
    port: int
    password: str | None
    sha: str


def redis_call(sock: socket.socket, *args: bytes | str | int) -> Any:
    from quotaledger.tools.bench_serve_clients import resp_command

    sock.sendall(resp_command(*args))
    with sock.makefile("rb") as reply:
        return _resp_reply(reply)


def _resp_reply(reply: Any) -> Any:
    line: bytes = reply.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"-":
        raise RuntimeError(f"redis: {rest.decode(errors='replace')}")
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else reply.read(size + 2)[:-2].decode()
    if kind == b"*":
        return [_resp_reply(reply) for _ in range(int(rest))]
    return rest.decode()


@contextmanager
def redis_connection(host: str, port: int, password: str | None) -> Iterator[socket.socket]:
    with socket.create_connection((host, port), timeout=60) as sock:
        if password is not None:
            redis_call(sock, "AUTH", password)
        yield sock


@contextmanager
def private_redis(workdir: str) -> Iterator[Redis]:
    """A redis-server of its own in `workdir`, on a free port, `appendfsync always`."""
    server = shutil.which("redis-server")
    if server is None:
        raise RuntimeError("redis-server is not installed (or give --redis URL)")
    port = free_port()
    command = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir,
               "--appendonly", "yes", "--appendfsync", "always", "--save", "",
               "--logfile", os.path.join(workdir, "redis.log")]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_redis("127.0.0.1", port, None, proc)
        yield _with_script("127.0.0.1", port, None)
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_redis(host: str, port: int, password: str | None, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited {proc.returncode}")
        try:
            with redis_connection(host, port, password) as sock:
                if redis_call(sock, "PING") == "PONG":
                    return
        except (OSError, RuntimeError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"redis-server did not answer within {STARTUP_S:g} s")


@contextmanager
def given_redis(url: str) -> Iterator[Redis]:
    """The Redis at `url`, set to `appendonly yes` and `appendfsync always` for the
    bench; both settings are restored as they were afterwards."""
    parts = urlsplit(url)
    host, port, password = parts.hostname or "127.0.0.1", parts.port or 6379, parts.password
    with redis_connection(host, port, password) as sock:
        before = {
            name: redis_call(sock, "CONFIG", "GET", name)[1]
            for name in ("appendonly", "appendfsync")
        }
        try:
            redis_call(sock, "CONFIG", "SET", "appendonly", "yes")
            redis_call(sock, "CONFIG", "SET", "appendfsync", "always")
            _wait_aof_rewritten(sock)
            yield _with_script(host, port, password)
        finally:
            for name, value in before.items():
                redis_call(sock, "CONFIG", "SET", name, value)


def _wait_aof_rewritten(sock: socket.socket) -> None:
    """Turning the AOF on rewrites it in the background: measure after that."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        info = redis_call(sock, "INFO", "persistence")
        if "aof_rewrite_in_progress:0" in info and "aof_rewrite_scheduled:0" in info:
            return
        time.sleep(0.1)
    raise RuntimeError("redis did not finish its AOF rewrite")


def _with_script(host: str, port: int, password: str | None) -> Redis:
    with redis_connection(host, port, password) as sock:
        sha = redis_call(sock, "SCRIPT", "LOAD", RATE_LIMIT_LUA)
    return Redis(host, port, password, sha)


# -- SQLite, PostgreSQL ------------------------------------------------------------------


def new_sqlite(path: str) -> None:
    """A WAL database with one plain table, as a user would make it."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, payload BLOB NOT NULL)")


def new_raw_pg_table(admin: Any, schema: str) -> None:
    admin.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    admin.execute(
        f'CREATE TABLE "{schema}".events (seq bigint PRIMARY KEY, hash char(64) NOT NULL, '
        "prev char(64) NOT NULL, line text NOT NULL)"
    )
