"""`bench --serve`'s clients: N processes, one request in flight each, timed together.

Every system is driven the same way: N forked processes each make their connection
(or open their file), do a warm-up event, wait at one barrier, then loop one event at
a time for the same number of seconds, timing each. What differs is one step
function per system, each as lean as its protocol allows, so the clients' own cost
stays out of the figures:

- HTTP: a keep-alive socket, the request's bytes prepared, a minimal response reader
  (the status line, Content-Length and the exit-code header; nothing else parsed);
- Redis: RESP bytes prepared once (EVALSHA of the rate-limit script), a one-line reply;
- SQLite: `BEGIN IMMEDIATE`, a plain `INSERT`, `COMMIT` on a WAL database with
  `synchronous=FULL`;
- the raw loop: a blocking `flock`, one `write` of one line, `fdatasync`, unlock;
- PostgreSQL: the raw psycopg loop of `bench --compare postgresql`.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import socket
import sqlite3
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

Step = Callable[[], None]
MakeStep = Callable[[int], Step]
"""Client `index`'s step, made in its own process (its connection, its file)."""

BARRIER_S = 300.0
"""How long the clients may take to connect and warm up on a loaded machine."""
WARM_UP_EVENTS = 2
"""Events each client makes before the clock starts (an even number: admit+release)."""


@dataclass
class Phase:
    """What N clients did in one timed run."""

    counts: list[int]
    seconds: list[float]
    latencies_s: array[float]
    server_cpu_s: float | None

    @property
    def events(self) -> int:
        return sum(self.counts)

    @property
    def eps(self) -> float:
        return sum(c / s for c, s in zip(self.counts, self.seconds, strict=True))


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    # After the ")" that ends the command name: state is field 3, utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_clients(make_step: MakeStep, clients: int, seconds: float, server_pid: int | None) -> Phase:
    """`clients` processes stepping together from one barrier to one stop, and the
    server's CPU over that time. The stop comes after `seconds`, and for a server not
    before its CPU counter (10 ms ticks) has moved by CPU_TICKS_MIN, so its CPU per
    event is a measurement even in a tiny run."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(clients + 1)
    stop = context.RawValue("b", 0)  # read by every client per event: no lock
    pipes = [context.Pipe(duplex=False) for _ in range(clients)]
    procs = [
        context.Process(target=_client, args=(make_step, i, barrier, stop, pipes[i][1]))
        for i in range(clients)
    ]
    for proc in procs:
        proc.start()
    try:
        barrier.wait(BARRIER_S)
        cpu_before = cpu_s(server_pid) if server_pid else 0.0
        _wait_for_stop(seconds, server_pid, cpu_before)
        stop.value = 1
        results = [_receive(reader) for reader, _ in pipes]
        cpu_after = cpu_s(server_pid) if server_pid else 0.0
    except BaseException:
        barrier.abort()
        stop.value = 1
        errors = [reader.recv() for reader, _ in pipes if reader.poll(1)]
        for proc in procs:
            proc.kill()
        raise RuntimeError(f"a bench client failed: {errors[:1] or 'no report'}") from None
    finally:
        for proc in procs:
            proc.join(30)
    latencies: array[float] = array("d")
    for _, _, raw in results:
        latencies.frombytes(raw)
    return Phase(
        [r[0] for r in results],
        [r[1] for r in results],
        latencies,
        cpu_after - cpu_before if server_pid else None,
    )


CPU_TICKS_MIN = 2
"""A server's phase lasts until its CPU has moved by this many clock ticks: utime and
stime are each rounded down to a tick, so one could be the rounding alone."""
CPU_WAIT_FACTOR = 20
"""...but at most this many times `seconds` (a server that takes no CPU is stuck)."""


def _wait_for_stop(seconds: float, server_pid: int | None, cpu_before: float) -> None:
    start = time.monotonic()
    time.sleep(seconds)
    if server_pid is None:
        return
    tick_s = 1 / os.sysconf("SC_CLK_TCK")
    while cpu_s(server_pid) - cpu_before < CPU_TICKS_MIN * tick_s:
        if time.monotonic() - start > seconds * CPU_WAIT_FACTOR:
            return
        time.sleep(seconds / 10)


def _receive(reader: Connection) -> tuple[int, float, bytes]:
    if not reader.poll(BARRIER_S):
        raise TimeoutError("a bench client did not report")
    result = reader.recv()
    if result[0] == "error":
        raise RuntimeError(result[1])
    return result  # type: ignore[no-any-return]


def _client(make_step: MakeStep, index: int, barrier: Any, stop: Any, report: Connection) -> None:
    try:
        step = make_step(index)
        for _ in range(WARM_UP_EVENTS):
            step()
        barrier.wait(BARRIER_S)
        latencies = array("d")
        clock = time.perf_counter
        start = now = clock()
        while True:  # at least one event, however short the run
            step()
            done = clock()
            latencies.append(done - now)
            now = done
            if stop.value:
                break
        report.send((len(latencies), now - start, latencies.tobytes()))
    except BaseException as exc:
        report.send(("error", f"client {index}: {exc!r}"))


# -- HTTP --------------------------------------------------------------------------------


def http_request(path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def http_steps(port: int, requests: Callable[[int, int], bytes]) -> MakeStep:
    """Each client sends `requests(pid, i)` for its i-th event on one keep-alive
    connection (its pid: runs named by it are new in every phase), and checks each
    answer is 200 with exit code 0."""

    def make(index: int) -> Step:
        client = os.getpid()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = ResponseReader(sock)
        sent = 0

        def step() -> None:
            nonlocal sent
            sock.sendall(requests(client, sent))
            sent += 1
            reader.expect_ok()

        return step

    return make


class ResponseReader:
    """The minimal HTTP/1.1 response reader a lean client needs on a keep-alive
    connection: the head up to its blank line, then Content-Length bytes of body."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def expect_ok(self) -> bytes:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self._fill()
        head, body_start = self.buffer[:end].lower(), end + 4
        at = head.find(b"content-length:") + len(b"content-length:")
        line_end = head.find(b"\r\n", at)
        length = int(head[at : line_end if line_end >= 0 else len(head)])
        while len(self.buffer) < body_start + length:
            self._fill()
        body = self.buffer[body_start : body_start + length]
        self.buffer = self.buffer[body_start + length :]
        if not head.startswith(b"http/1.1 200") or b"quotaledger-exit-code: 0" not in head:
            raise RuntimeError(f"answer {head[:12]!r}: {body[:300]!r}")
        return body

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk


def observe_request(client: int, i: int) -> bytes:
    return _OBSERVE[client % len(_OBSERVE)]


_OBSERVE = [
    http_request(
        "/v1/observe",
        b'{"goal":"bench","run":"client-%d","uncached_input":%d,"cached_input":%d,'
        b'"output":%d}' % (c, 1000 + c * 7919 % 20000, c * 104729 % 8000, 200 + c % 4000),
    )
    for c in range(64)
]


def admit_release_request(client: int, i: int) -> bytes:
    """`admit` of a new run (even i), then its `release` (odd i): one event each."""
    run = b"c%d-%d" % (client, i // 2)
    if i % 2 == 0:
        body = b'{"goal":"bench","run":"%s","arm":"baseline","forecast_tpm":1}' % run
        return http_request("/v1/admit", body)
    return http_request("/v1/release", b'{"goal":"bench","run":"%s"}' % run)


# -- Redis -------------------------------------------------------------------------------


def resp_command(*args: bytes | str | int) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def redis_steps(host: str, port: int, password: str | None, sha: str, limit: int) -> MakeStep:
    """EVALSHA of the rate-limit script on one shared key; the reply is `:1` (admitted)."""

    def make(index: int) -> Step:
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if password is not None:
            sock.sendall(resp_command("AUTH", password))
            if not sock.recv(64).startswith(b"+OK"):
                raise RuntimeError("redis refused the password")
        command = resp_command("EVALSHA", sha, 1, "bench:tpm", 1200 + index, limit)

        def step() -> None:
            sock.sendall(command)
            reply = sock.recv(64)
            while not reply.endswith(b"\r\n"):
                reply += sock.recv(64)
            if reply != b":1\r\n":
                raise RuntimeError(f"redis answered {reply!r}")

        return step

    return make


# -- SQLite, the raw loop, PostgreSQL ----------------------------------------------------


def sqlite_steps(path: str, payload: bytes) -> MakeStep:
    def make(index: int) -> Step:
        conn = sqlite3.connect(path, isolation_level=None, timeout=BARRIER_S)
        conn.execute("PRAGMA synchronous=FULL")
        execute = conn.execute

        def step() -> None:
            execute("BEGIN IMMEDIATE")
            execute("INSERT INTO events (payload) VALUES (?)", (payload,))
            execute("COMMIT")

        return step

    return make


def raw_steps(path: str, line: bytes) -> MakeStep:
    def make(index: int) -> Step:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        flock, write, sync = fcntl.flock, os.write, os.fdatasync

        def step() -> None:
            flock(fd, fcntl.LOCK_EX)
            write(fd, line)
            sync(fd)
            flock(fd, fcntl.LOCK_UN)

        return step

    return make


def postgresql_steps(url: str, schema: str, payload: bytes) -> MakeStep:
    """The raw psycopg loop per event: advisory lock, the last hash, INSERT, COMMIT."""

    def make(index: int) -> Step:
        import hashlib

        import psycopg

        from quotaledger.tools.bench_pg import RAW_LOCK_KEY

        conn = psycopg.connect(url)
        insert = f'INSERT INTO "{schema}".events (seq, hash, prev, line) VALUES (%s, %s, %s, %s)'
        last = f'SELECT seq, hash FROM "{schema}".events ORDER BY seq DESC LIMIT 1'
        line = payload.decode()

        def step() -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (RAW_LOCK_KEY,))
            row = conn.execute(last).fetchone()
            seq, prev = (row[0] + 1, row[1]) if row else (0, "0" * 64)
            digest = hashlib.sha256(prev.encode() + payload).hexdigest()
            conn.execute(insert, (seq, digest, prev, line))
            conn.commit()

        return step

    return make
