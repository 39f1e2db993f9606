"""Issue 41: a client of a server follows the log as the local command does. The CLI's
`log --follow` through a server waits as long as the journal is quiet (the client's
read timeout applied to the endless stream: it exited 4 after 120 s), and
`Ledger.open(url).log(follow=True)` yields each event as it commits (it read the
whole endless body and yielded nothing)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from quotaledger import Ledger
from tests.server.serving import serving
from tests.support import run_cli

T0 = "2026-11-29T10:00:00Z"


def test_cli_log_follow_through_a_server_outlives_the_read_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import quotaledger.client.http as http

    monkeypatch.setattr(http, "READ_TIMEOUT_S", 1.0)  # 120 s in use: a quiet spell is longer
    journal = tmp_path / "j.jsonl"
    run_cli("configure", "--goal", "g", "--quota-tpm", "1000", "--at", T0, "--journal", journal)
    with serving(journal) as server:
        done: list = []
        follower = threading.Thread(
            target=lambda: done.append(
                run_cli("log", "--follow", "--goal", "g", "--json", "--journal", server.url)
            )
        )
        follower.start()
        time.sleep(3.0)  # three read timeouts of quiet
        assert follower.is_alive(), done[0].stderr if done else ""
        answer = server.post("reject", goal="g", retry_after_s=5, at="2026-11-29T10:00:01Z")
        assert answer.status == 200, answer.body
        time.sleep(1.0)
        server.stop()
        follower.join(timeout=60)
    result = done[0]
    assert result.code == 0, result.stderr
    kinds = [line for line in result.stdout.splitlines() if '"capacity.rejected"' in line]
    assert len(kinds) == 1, result.stdout


def test_remote_log_follow_yields_events_as_they_commit(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    run_cli("configure", "--goal", "g", "--quota-tpm", "1000", "--at", T0, "--journal", journal)
    with serving(journal) as server, Ledger.open(server.url) as remote:
        events = remote.log(follow=True, goal="g")
        assert next(events)["kind"] == "capacity.configured"
        got: list = []
        reader = threading.Thread(target=lambda: got.append(next(events)))
        reader.start()
        server.post("reject", goal="g", retry_after_s=5, at="2026-11-29T10:00:01Z")
        reader.join(timeout=60)
        assert got and got[0]["kind"] == "capacity.rejected"
        events.close()  # type: ignore[attr-defined]


def test_a_server_that_cannot_be_reached_is_server_unreachable(tmp_path: Path) -> None:
    from quotaledger import ServerUnreachable, StorageFailure
    from tests.server.serving import free_port

    with (
        Ledger.open(f"http://127.0.0.1:{free_port()}") as remote,
        pytest.raises(ServerUnreachable) as raised,
    ):
        remote.inspect()
    assert isinstance(raised.value, StorageFailure)  # still exit 4: nothing acknowledged
    assert (raised.value.code, raised.value.exit_code) == ("server_unreachable", 4)
