"""The replacement of the server's journal words in an answer (`FollowUps.rewrite`),
made once per client: the same bytes as the replacement made afresh for each answer,
for every kind of body, and a bounded memory of clients (each names its own Host)."""

from __future__ import annotations

import html
import shlex

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from quotaledger.server import followups
from quotaledger.server.followups import FollowUps


def _afresh(path: str, body: bytes, client: str, kind: str) -> bytes:
    """The replacement as SPEC §8's follow-up commands need it, written out again."""
    old, new = shlex.join(["--journal", path]), shlex.join(["--journal", client])
    if kind == "json":
        pairs = [
            (msgspec.json.encode(old)[1:-1], msgspec.json.encode(new)[1:-1]),
            (b'"--journal",' + msgspec.json.encode(path),
             b'"--journal",' + msgspec.json.encode(client)),
        ]  # fmt: skip
    elif kind == "html":
        pairs = [(html.escape(old).encode(), html.escape(new).encode())]
    else:
        pairs = [(old.encode(), new.encode())]
    for before, after in pairs:
        body = body.replace(before, after)
    return body


def _bodies(path: str) -> list[tuple[bytes, str]]:
    command = shlex.join(["quotaledger", "turn", "settle", "--journal", path])
    argv = ["quotaledger", "turn", "settle", "--journal", path]
    return [
        (msgspec.json.encode({"ok": True, "command": command, "argv": argv}) + b"\n", "json"),
        (b'{"ok":true,"goal":"g","usage_tpm":1.5}\n', "json"),
        ((f"run: {command}\n").encode(), "text"),
        (f"<p>{html.escape(command)}</p>".encode(), "html"),
        (b"<p>nothing to run</p>", "html"),
    ]


PATHS = st.sampled_from(
    ["/srv/q/journal.jsonl", "/tmp/a b/j.jsonl", "/tmp/it's/j.jsonl", "/tmp/\u00e9t\u00e9.jsonl"]
)
CLIENTS = st.sampled_from(
    ["http://127.0.0.1:8080", "http://[::1]:9", "unix:/run/q.sock", "http://h:1/x y"]
)


@given(PATHS, st.lists(CLIENTS, min_size=1, max_size=6))
def test_each_client_gets_the_bytes_made_afresh(path: str, clients: list[str]) -> None:
    follow_ups = FollowUps(path, "http://127.0.0.1:8080")
    for client in clients:  # repeated clients take the replacement kept for them
        for body, kind in _bodies(path):
            assert follow_ups.rewrite(body, client, kind) == _afresh(path, body, client, kind)


def test_an_unnamed_journal_is_left_as_it_is() -> None:
    body = b'{"command":"quotaledger turn settle --journal x"}'
    assert FollowUps("", "http://127.0.0.1:8080").rewrite(body, "http://h:1") == body


def test_the_clients_kept_are_bounded() -> None:
    follow_ups = FollowUps("/srv/j.jsonl", "http://127.0.0.1:8080")
    body = b'{"argv":["quotaledger","--journal","/srv/j.jsonl"]}'
    for i in range(followups.PAIRS_KEPT * 3):
        client = f"http://host-{i}:1"
        assert follow_ups.rewrite(body, client) == _afresh("/srv/j.jsonl", body, client, "json")
    assert len(follow_ups._pairs) <= followups.PAIRS_KEPT
