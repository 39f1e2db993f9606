"""Follow-up commands in a served answer name the journal as the client reaches it.

An answer may print a command for its user to run (`turn resume`'s owed spend, its
`argv`, the report's audit lines: SPEC §8). Made where the journal is, it names the
server's file or database; pasted where the client runs, that command would reach
another journal (or none) and fail `spend_identity_mismatch`. The server names
the journal the way the client reached it instead: the target a CLI client gave, or
this server's own URL as the client addressed it (its `Host`).
"""

from __future__ import annotations

import html
import shlex

import msgspec

from quotaledger.journal.target import follow_up_journal

PAIRS_KEPT = 256
"""Clients (and kinds) whose replacements `FollowUps` keeps made."""


class FollowUps:
    """The server's `--journal` words, and their replacement in an answer's bytes."""

    def __init__(self, target: str, listen_url: str) -> None:
        words, _ = follow_up_journal(target)
        self.path = words[-1] if words else None
        """The journal as the services name it (None: the default journal, unnamed)."""
        self.listen_url = listen_url
        self.scheme = listen_url.split("://", 1)[0] if "://" in listen_url else None
        self._pairs: dict[tuple[str, str], list[tuple[bytes, bytes]]] = {}

    def client_target(self, host: bytes | None, given: str | None = None) -> str:
        """The server as a client reaches it: the target a CLI client named, else its
        URL by the `Host` the client sent (a Unix socket's path as the server's)."""
        if given:
            return given
        if self.scheme is None or not host:
            return self.listen_url
        return f"{self.scheme}://{host.decode('latin-1')}"

    def names_journal(self, body: bytes) -> bool:
        """Whether `body` may hold the server's journal words (`rewrite` changes it)."""
        return self.path is not None and b"--journal" in body

    def rewrite(self, body: bytes, client: str, kind: str = "json") -> bytes:
        """`body` with the server's journal words replaced by `client`'s (`kind`: how
        the body quotes text: json, text or html)."""
        if self.path is None or b"--journal" not in body:  # in every pair: most answers
            return body  # name no command to run
        pairs = self._pairs.get((client, kind))
        if pairs is None:
            pairs = self._pairs_of(client, kind)
        for before, after in pairs:
            if before in body:
                body = body.replace(before, after)
        return body

    def _pairs_of(self, client: str, kind: str) -> list[tuple[bytes, bytes]]:
        """What `rewrite` replaces for `client`, quoted as `kind` quotes text: made once
        per client and kind (every answer is rewritten, and the quoting costs more
        than the look for it), and kept for at most PAIRS_KEPT of them, since a
        client names its own `Host`."""
        assert self.path is not None
        old = shlex.join(["--journal", self.path])
        new = shlex.join(["--journal", client])
        if kind == "json":
            pairs = [
                (_json_text(old), _json_text(new)),
                (b'"--journal",' + msgspec.json.encode(self.path),
                 b'"--journal",' + msgspec.json.encode(client)),
            ]  # fmt: skip
        elif kind == "html":
            pairs = [(html.escape(old).encode(), html.escape(new).encode())]
        else:
            pairs = [(old.encode(), new.encode())]
        if len(self._pairs) >= PAIRS_KEPT:
            self._pairs.clear()
        self._pairs[client, kind] = pairs
        return pairs


def _json_text(text: str) -> bytes:
    """`text` as it appears inside a JSON string (escaped, without the quotes)."""
    return msgspec.json.encode(text)[1:-1]
