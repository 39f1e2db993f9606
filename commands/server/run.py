"""The server process: open the journal, serve until a signal or a failed commit.

HTTP is granian's (Rust, hyper): it parses, answers a head over 16 KiB with 431 and
closes a connection whose head is not complete within 60 s, without the Python loop
seeing either (SPEC §11's limits, set here explicitly).
"""

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.server.embed import Server as Granian

from quotaledger.api import Ledger
from quotaledger.server.app import Server
from quotaledger.server.auth import Tokens
from quotaledger.server.committer import Committer
from quotaledger.server.listen import Address
from quotaledger.server.telemetry import Telemetry

HEAD_TIMEOUT_MS = 60_000
MAX_HEAD_BYTES = 16 * 1024
SHUTDOWN_GRACE_S = 10.0
EXIT_OK = 0
EXIT_STORAGE = 4


def serve(
    target: str,
    address: Address,
    tokens: Tokens,
    max_batch: int,
    tls: tuple[str, str] | None = None,
) -> int:
    """Serves until SIGTERM/SIGINT (exit 0) or a failed commit (exit 4)."""
    with Ledger.open(target) as ledger:
        return asyncio.run(_serve(ledger, target, address, tokens, max_batch, tls))


async def _serve(
    ledger: Ledger,
    target: str,
    address: Address,
    tokens: Tokens,
    max_batch: int,
    tls: tuple[str, str] | None,
) -> int:
    committer = Committer(ledger, max_batch, Telemetry())
    app = Server(committer, tokens, target)
    http = _http_server(app, address, tls)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    committer.on_failure = stop.set
    serving = asyncio.create_task(http.serve())
    await stop.wait()
    app.stopping = True
    with contextlib.suppress(TimeoutError):  # what is not answered in 10 s is dropped
        await asyncio.wait_for(committer.close(), SHUTDOWN_GRACE_S)
    await asyncio.sleep(0.05)  # the last answers leave before the listener closes
    http.stop()  # type: ignore[no-untyped-call]
    await serving
    return EXIT_STORAGE if committer.failed else EXIT_OK


def _http_server(app: Server, address: Address, tls: tuple[str, str] | None) -> Granian:
    logging.getLogger("_granian").setLevel(logging.ERROR)
    logging.getLogger("granian").setLevel(logging.ERROR)
    return Granian(
        app,
        address=address.host or "127.0.0.1",
        port=address.port,
        uds=Path(address.unix_path) if address.unix_path else None,
        interface=Interfaces.ASGINL,
        http=HTTPModes.http1,
        websockets=False,
        http1_settings=HTTP1Settings(
            header_read_timeout=HEAD_TIMEOUT_MS, max_buffer_size=MAX_HEAD_BYTES
        ),
        log_enabled=False,
        log_access=False,
        ssl_cert=Path(tls[0]) if tls else None,
        ssl_key=Path(tls[1]) if tls else None,
    )
