"""The `quotaledger serve` process: open the journal, start the committer, listen.

Exit status: 0 after SIGTERM/SIGINT (stop accepting, answer what waits, at most
`DRAIN_S`), 4 after a failed commit (its batch answered `storage_failure`; a
supervisor restarts the server and recovery on open does the rest), 2 for bad
options (before anything is bound).
"""

from __future__ import annotations

import asyncio
import ipaddress
import sys
from collections.abc import Callable
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import DRAIN_S, KEEP_ALIVE_S, MAX_BATCH_DEFAULT, MAX_BATCH_MAX
from quotaledger.journal.target import follow_up_journal
from quotaledger.render.outcome import error_line
from quotaledger.server import LISTEN_DEFAULT, listening, openapi, tokenfile
from quotaledger.server.app import ROUTE_LABELS, Api, Tokens
from quotaledger.server.committer import Committer
from quotaledger.server.followups import FollowUps
from quotaledger.server.readers import Commits, Readers
from quotaledger.server.telemetry import Telemetry


class Listen:
    """Where the server listens: HOST:PORT or unix:PATH."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.unix_path: str | None = None
        self.host, self.port = "127.0.0.1", 0
        if text.startswith("unix:"):
            self.unix_path = text[len("unix:") :]
            if not self.unix_path:
                raise self._bad()
            return
        from quotaledger.server.metrics_listen import parse_listen

        try:
            self.host, self.port = parse_listen(text)
        except InvalidInput:
            raise self._bad() from None

    def _bad(self) -> InvalidInput:
        return InvalidInput(
            f"--listen {self.text!r} is not HOST:PORT or unix:PATH",
            code=codes.INVALID_LISTEN_ADDRESS,
        )

    @property
    def loopback(self) -> bool:
        if self.unix_path is not None or self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def target_shown(target: str) -> str:
    """The journal as the ready line names it: a PostgreSQL URL without its password."""
    shown, _ = follow_up_journal(target)
    return shown[-1] if shown else target


def check_tls(cert: str, key: str) -> None:
    """Refuse (exit 2, before anything is bound) a certificate and key the TLS library
    cannot load: a file that is not PEM, a key that is not the certificate's."""
    import ssl

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
        raise InvalidInput(
            f"--tls-cert {cert!r} and --tls-key {key!r} cannot be loaded: {reason}",
            code=codes.INVALID_OPTION,
        ) from None


def serve(
    target: str,
    listen: str = LISTEN_DEFAULT,
    *,
    token_file: str | None = None,
    read_token_file: str | None = None,
    max_batch: int = MAX_BATCH_DEFAULT,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    lock_timeout_s: float,
    ready: Any = None,
    open_ledger: Callable[..., Any] = Ledger.open,
) -> int:
    """Serve the journal at `target` until a signal (0) or a failed commit (4).

    `open_ledger` is for `bench --serve` only (its bare-line skeleton,
    quotaledger.tools.bench_skeleton): no command passes it."""
    where = Listen(listen)
    if not where.loopback and token_file is None:
        raise InvalidInput(
            f"--listen {listen} is not a loopback address: give --token-file (every request "
            "then needs its bearer token)",
            code=codes.AUTH_REQUIRED,
        )
    if read_token_file is not None and token_file is None:
        raise InvalidInput("--read-token-file needs --token-file", code=codes.INVALID_OPTION)
    if (tls_cert is None) != (tls_key is None):
        raise InvalidInput("--tls-cert and --tls-key go together", code=codes.INVALID_OPTION)
    if tls_cert is not None and tls_key is not None:
        check_tls(tls_cert, tls_key)
    if not 1 <= max_batch <= MAX_BATCH_MAX:
        raise InvalidInput(
            f"--max-batch must be from 1 to {MAX_BATCH_MAX}, got {max_batch}",
            code=codes.INVALID_OPTION,
        )
    tokens = Tokens(
        tokenfile.read_token_file(token_file, "--token-file"),
        tokenfile.read_token_file(read_token_file, "--read-token-file"),
    )
    ledger = open_ledger(target, write=True, lock_timeout_s=lock_timeout_s)
    try:
        ledger.journal.create()  # SPEC §11: created at start, before it is ready
        return listening.run(_serve(ledger, target, where, tokens, max_batch, tls_cert, tls_key))
    finally:
        ledger.close()


async def _serve(
    ledger: Ledger,
    target: str,
    where: Listen,
    tokens: Tokens,
    max_batch: int,
    tls_cert: str | None,
    tls_key: str | None,
) -> int:
    loop = asyncio.get_running_loop()
    commits = Commits()
    committer: Committer
    telemetry = Telemetry(lambda: committer.waiting, ROUTE_LABELS)
    readers = Readers(target, commits, ledger.journal.lock_timeout_s)
    api = Api(readers, telemetry, tokens, openapi.encoded)
    sock = listening.bind(where.host, where.port, where.unix_path)
    tls = {"ssl_certfile": tls_cert, "ssl_keyfile": tls_key} if tls_cert else {}
    address = listening.url_of(sock)
    if tls and address.startswith("http://"):
        address = "https://" + address[len("http://") :]
    api.follow_ups = FollowUps(target, address)

    def ready() -> None:
        # One line, once it accepts: a supervisor or a script waits for it (and a
        # port 0 is known by it).
        sys.stderr.write(f"quotaledger: serving {target_shown(target)} on {address}\n")
        sys.stderr.flush()

    server = listening.Server(
        listening.config(api, keep_alive_s=KEEP_ALIVE_S, drain_s=DRAIN_S, **tls),
        on_shutdown=readers.stop_following,
        on_ready=ready,
    )

    def on_commit(size: int, seconds: float) -> None:
        telemetry.commit(size, seconds)
        commits.notify()

    def deliver(outcomes: list[tuple[Any, Any]]) -> None:
        api.deliver(outcomes)
        if committer.failure is not None:
            server.should_exit = True  # answered first (deliver), then exit 4

    committer = Committer(ledger, deliver, max_batch=max_batch, on_commit=on_commit)
    api.committer = committer
    api.loop = loop
    server.stop_on_signals()
    queues = _queued_queues(ledger)  # read before the committer's thread folds on
    committer.start()
    api.watch_queues(queues)
    try:
        await server.serve(sockets=[sock])
    finally:
        api.timers.cancel()
        await asyncio.to_thread(committer.stop, DRAIN_S)
    if committer.failure is not None:
        sys.stderr.write(error_line(committer.failure.message, committer.failure.code))
        return 4
    return 0


def _queued_queues(ledger: Ledger) -> list[str]:
    """The queues with an entry in them when the server starts (a pool's once, however
    many of its members wait; expired entries aside: the timer's promotion then finds
    nothing)."""
    state = getattr(ledger.journal, "state", None)  # bench's bare-line skeleton has none
    capacity = getattr(state, "capacity", None)
    goals = getattr(capacity, "goals", {})
    queues = {
        goal.pool.name if goal.pool is not None else name
        for name, goal in goals.items()
        if getattr(goal, "queue", None)
    }
    return sorted(queues)


__all__ = ["serve"]
