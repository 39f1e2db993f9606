"""The HTTP machinery `serve` and `metrics --listen` share: the socket bound here (so
a port taken is `listen_failed` before anything runs, and port 0's port is known), the
server library configured with SPEC §11's limits, and signals that stop it cleanly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import uvicorn

from quotaledger.journal import codes
from quotaledger.journal.errors import StorageFailure
from quotaledger.journal.limits import LISTEN_BACKLOG
from quotaledger.server.protocol import LimitedHttpToolsProtocol

T = TypeVar("T")


def _nothing() -> None:
    return None


UNIX_SOCKET_MODE = 0o600
"""A Unix socket's mode: its owner alone connects (a token is then not needed)."""


class Server(uvicorn.Server):
    """uvicorn's server; SIGTERM and SIGINT are this process's (`stop_on_signals`), so
    a stop is exit 0 with no traceback and no re-raised signal. `on_shutdown` runs
    first when it shuts down, whatever stops it: what never ends by itself (a log
    follower's stream) ends there, instead of being cancelled after the drain time."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_shutdown: Callable[[], None] = _nothing,
        on_ready: Callable[[], None] = _nothing,
    ) -> None:
        super().__init__(config)
        self.on_shutdown = on_shutdown
        self.on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # accepting on every socket
            self.on_ready()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.on_shutdown()
        await super().shutdown(sockets)

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def stop_on_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop)

    def stop(self) -> None:
        self.should_exit = True


def config(app: Any, *, keep_alive_s: float, drain_s: float, **tls: Any) -> uvicorn.Config:
    """uvicorn set as SPEC §11 says: the head and request-time limits of our protocol,
    no access log (a token never reaches a log), no library headers."""
    return uvicorn.Config(
        app,
        http=LimitedHttpToolsProtocol,
        interface="asgi3",
        lifespan="off",
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        date_header=False,
        timeout_keep_alive=int(keep_alive_s),
        timeout_graceful_shutdown=int(drain_s),
        backlog=LISTEN_BACKLOG,
        **tls,
    )


def bind(host: str, port: int, unix_path: str | None = None) -> socket.socket:
    """A listening socket on HOST:PORT (or a Unix socket at `unix_path`)."""
    try:
        if unix_path is not None:
            if os.path.exists(unix_path) and not _alive(unix_path):
                os.unlink(unix_path)  # a stale socket a killed server left behind
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(unix_path)
            # Whatever the umask: only the server's user (and root) may connect, as
            # only they may write its journal. Set before listen(), so no connection
            # is accepted while the socket is still open to others.
            os.chmod(unix_path, UNIX_SOCKET_MODE)
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections accepted
            # from a socket that says so, and without it Nagle holds each answer's
            # body behind its head until the client's delayed ACK (about 40 ms).
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        where = unix_path or f"{host}:{port}"
        raise StorageFailure(
            f"cannot listen on {where}: {exc.strerror}", code=codes.LISTEN_FAILED
        ) from None
    return sock


def _alive(unix_path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(unix_path)
        except OSError:
            return False
    return True


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run the server's event loop: uvloop's (libuv) where it is installed, which
    halves the loop's cost per request here, else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def url_of(sock: socket.socket) -> str:
    address = sock.getsockname()
    if isinstance(address, str):
        return f"unix:{address}"
    host, port = address[0], address[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
