"""One keep-alive HTTP/1.1 connection to `quotaledger serve` (SPEC §11).

The answer is parsed by httptools (llhttp, the parser the server's uvicorn uses); the
request is written as the few lines HTTP/1.1 asks for. Nothing else is imported: h11
alone costs a CLI call more than half of `import typer, msgspec` (it loads
dataclasses, inspect and typing's machinery), http.client about as much (the email
package), httptools a tenth (README, design; docs/performance.md).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import NoReturn

import httptools

from quotaledger.journal import codes
from quotaledger.journal.environment import TOKEN_ENV
from quotaledger.journal.errors import ServerUnreachable
from quotaledger.journal.limits import READ_TIMEOUT_S
from quotaledger.render.outcome import ANSWERED

EXIT_HEADER = b"quotaledger-exit-code"
CLI_HEADER = "quotaledger-cli"
"""A CLI client's call (lean/remote_call.py): the server answers what the local command
prints. Its value is a query string: `as` (`json` or `text`), `journal` (the target as
the user named it) and the options that change only the text."""
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

Answer = tuple[int, int | None, bytes]
"""(status, Quotaledger-Exit-Code or None, body) of one request."""
Out = Callable[[bytes], None]
"""Where an answer's body goes as it comes (a stream: `log --follow`'s never ends)."""


def quote(text: str) -> str:
    """`text` percent-encoded for a query string (RFC 3986: all but the unreserved)."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text.encode())


def query_string(params: Mapping[str, object]) -> str:
    """SPEC §11's query values: integers in decimal, booleans `true`/`false`, a list
    as the key repeated, times (given as RFC 3339 text) as they are; None is left out."""
    pairs = []
    for key, value in params.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is None:
                continue
            text = ("true" if item else "false") if isinstance(item, bool) else str(item)
            pairs.append(f"{quote(key)}={quote(text)}")
    return "?" + "&".join(pairs) if pairs else ""


class _Parsed:
    """httptools' callbacks: what one answer said."""

    def __init__(self, on_head: Callable[[], None] | None = None) -> None:
        self.exit_code: int | None = None
        self.chunks: list[bytes] = []
        self.headers_done = False
        self.complete = False
        self.on_head = on_head
        """Called once the head has come (a stream's socket then waits without end)."""

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == EXIT_HEADER and value.isdigit():
            self.exit_code = int(value)

    def on_headers_complete(self) -> None:
        self.headers_done = True
        if self.on_head is not None:
            self.on_head()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class Connection:
    """One keep-alive HTTP/1.1 connection to a server, reopened when the server closed it."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._socket: socket.socket | None = None
        self._aborted = False
        self._token = os.environ.get(TOKEN_ENV, "").strip()
        if target.startswith("unix:"):
            self.host, self.port, self.unix_path = "localhost", 0, target[len("unix:") :]
            self.tls = False
        else:
            self.tls = target.startswith("https://")
            netloc = target.split("://", 1)[1].split("/", 1)[0]
            host, _, port = netloc.rpartition(":") if "]" not in netloc[-1:] else (netloc, "", "")
            if not host or not port.isdigit():
                host, port = netloc, "443" if self.tls else "80"
            self.host, self.port, self.unix_path = host.strip("[]"), int(port), ""
        self.host_header = self.host
        """The Host a request names (RFC 9110: with its port unless the scheme's own)."""
        if not self.unix_path and self.port != (443 if self.tls else 80):
            shown = f"[{self.host}]" if ":" in self.host else self.host
            self.host_header = f"{shown}:{self.port}"

    def _open(self) -> socket.socket:
        if self._aborted:
            raise self.unreachable(ConnectionAbortedError("the connection was aborted"))
        try:
            if self.unix_path:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(READ_TIMEOUT_S)
                sock.connect(self.unix_path)
            else:
                # An ASCII host as bytes: a str would load the idna codec (and
                # unicodedata) only to encode it.
                host = self.host.encode() if self.host.isascii() else self.host
                address = (host, self.port)
                sock = socket.create_connection(address, timeout=READ_TIMEOUT_S)  # type: ignore[arg-type]
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls:
                import ssl  # only for https: OpenSSL's context is not free to build

                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        except OSError as exc:
            raise self.unreachable(exc) from None
        return sock

    def _connected(self) -> socket.socket:
        if self._socket is None:
            self._socket = self._open()
        if self._aborted:  # `abort` came while the socket was opening
            raise _ClosedBeforeAnswer(ConnectionAbortedError("the connection was aborted"))
        return self._socket

    def unreachable(self, exc: BaseException) -> ServerUnreachable:
        detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return ServerUnreachable(
            f"server {self.target} is unreachable: {detail}",
            code=codes.SERVER_UNREACHABLE,
            server=self.target,
        )

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: tuple[tuple[str, str], ...] = (),
        out: Out | None = None,
        *,
        endless: bool = False,
    ) -> Answer:
        """One request's answer. With `out`, an answer's body (exit 0 or 1: not an
        error's) goes there piece by piece as it comes, and the body returned is empty.
        `endless`: an answer that goes on until the client leaves (`log --follow`),
        whose pieces come only as records commit: once it has begun, no read timeout.

        A reused connection the server has closed meanwhile (idle keep-alive) fails
        before any answer byte: that request was never read, and is sent once more on
        a new connection.
        """
        head = self._head(method, path, body, headers)
        reused = self._socket is not None
        try:
            return self._exchange(head, body, out, endless)
        except _ClosedBeforeAnswer as exc:
            self.close()
            if not reused:
                raise self.unreachable(exc.cause) from None
        try:
            return self._exchange(head, body, out, endless)
        except _ClosedBeforeAnswer as exc:
            self.close()
            raise self.unreachable(exc.cause) from None

    def stream(self, path: str) -> tuple[int, int | None, Iterator[bytes]]:
        """`GET path`'s status, exit code and body as an iterator of pieces as they
        come, on a connection of its own (closed when the iterator is): an endless
        answer (`log`'s follow) without a read timeout once it has begun."""
        self.close()
        sock = self._socket = self._open()
        parsed = _Parsed()
        parser = httptools.HttpResponseParser(parsed)
        try:
            sock.sendall(self._head("GET", path, None, ()))
            while not parsed.headers_done:
                data = sock.recv(65536)
                if not data:
                    raise ConnectionResetError("connection closed")
                parser.feed_data(data)
        except (OSError, httptools.HttpParserError) as exc:
            self.close()
            raise self.unreachable(exc) from None
        follow(sock)

        def pieces() -> Iterator[bytes]:
            try:
                while True:
                    if parsed.chunks:
                        yield b"".join(parsed.chunks)
                        parsed.chunks.clear()
                    if parsed.complete:
                        return
                    try:
                        data = sock.recv(65536)
                        if not data:
                            return  # the server stopped: the stream ends
                        parser.feed_data(data)
                    except (OSError, httptools.HttpParserError) as exc:
                        raise self.unreachable(exc) from None
            finally:
                self.close()

        return parser.get_status_code(), parsed.exit_code, pieces()

    def _head(
        self, method: str, path: str, body: bytes | None, headers: tuple[tuple[str, str], ...]
    ) -> bytes:
        lines = [
            f"{method} {path} HTTP/1.1",
            f"host: {self.host_header}",
            "accept: application/json",
        ]
        if self._token:
            lines.append("authorization: Bearer " + self._token)
        if body is not None:
            lines += ["content-type: application/json", f"content-length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def _exchange(
        self, head: bytes, body: bytes | None, out: Out | None, endless: bool = False
    ) -> Answer:
        sock = self._connected()
        try:
            sock.sendall(head + body if body else head)
        except OSError as exc:
            raise _ClosedBeforeAnswer(exc) from None
        parsed = _Parsed((lambda: follow(sock)) if endless else None)
        parser = httptools.HttpResponseParser(parsed)
        while not parsed.complete:
            try:
                data = sock.recv(65536)
            except OSError as exc:
                self._failed(exc, answered=parsed.headers_done)
            if not data:
                if parsed.headers_done:
                    break  # an answer delimited by the connection's end
                self._failed(ConnectionResetError("connection closed"), answered=False)
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                self._failed(exc, answered=parsed.headers_done)
            # Out of the parser's callbacks: a failure to write (a closed stdout) is
            # the writer's, not the server's.
            if out is not None and parsed.chunks and parsed.exit_code in ANSWERED:
                out(b"".join(parsed.chunks))
                parsed.chunks.clear()
        if not (parsed.complete and parser.should_keep_alive()):
            self.close()
        return parser.get_status_code(), parsed.exit_code, b"".join(parsed.chunks)

    def _failed(self, exc: BaseException, *, answered: bool) -> NoReturn:
        """A failure before the answer began may be a closed keep-alive connection (a
        resend may help); after it, the server's fault."""
        if not answered:
            raise _ClosedBeforeAnswer(exc)
        self.close()
        raise self.unreachable(exc) from None

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
        self._socket = None

    def abort(self) -> None:
        """From another thread: end the request in flight (a held `admit --wait`), which
        then fails `server_unreachable` without being sent again, and refuse any later
        one. The server sees the client gone and stops what it held for it."""
        self._aborted = True
        sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):  # not connected yet, or already closed
                sock.shutdown(socket.SHUT_RDWR)


def follow(sock: socket.socket) -> None:
    """A stream's socket: no read timeout (a quiet journal sends nothing for hours),
    TCP keep-alive instead, so a server that vanished is noticed all the same."""
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


class _ClosedBeforeAnswer(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause
