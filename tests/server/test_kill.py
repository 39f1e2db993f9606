"""SIGKILL of the server under 32 clients (SPEC §10): every answer a client received
is in the journal, the chain verifies, and clients that retry their unanswered
observation with its `request_id` against the restarted server count it once. The
kill is placed by strace on entry to a commit's fdatasync (the worst moment: written,
perhaps on disk, not yet answered)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.server.serving import Server, configure_and_observe, needs_strace, serving, strace
from tests.support import run_cli

CLIENTS = 32


class Clients:
    """What the clients were answered (events: acknowledged), what each still waits
    for (its request, to retry), and any answer but 503."""

    def __init__(self) -> None:
        self.answered: list[dict[str, object]] = []
        self.unanswered: list[dict[str, object]] = []
        self.unexpected: list[bytes] = []
        self.lock = threading.Lock()

    def observe(self, server: Server, index: int) -> None:
        for n in range(50):
            params = {
                "goal": "g",
                "uncached_input": index + 1,
                "cached_input": 0,
                "output": n,
                "request_id": f"chatcmpl-{index}-{n}",
            }
            try:
                answer = server.call("POST", "/v1/observe", params, timeout_s=30)
            except OSError:  # the server died: never answered, never acknowledged
                with self.lock:
                    self.unanswered.append(params)
                return
            with self.lock:
                if answer.status == 200:
                    self.answered.append(answer.json["event"])
                elif answer.status == 503:  # the server going down
                    self.unanswered.append(params)
                else:
                    self.unexpected.append(answer.body)
            if answer.status != 200:
                return


@pytest.mark.slow
@needs_strace
@pytest.mark.parametrize("kill_at_sync", [12, 40])
def test_every_answered_event_survives_a_sigkill(tmp_path: Path, kill_at_sync: int) -> None:
    journal = tmp_path / "j.jsonl"
    killer = strace("trace=fdatasync", f"inject=fdatasync:signal=SIGKILL:when={kill_at_sync}")
    clients = Clients()
    with serving(journal, prefix=killer) as server:
        configure_and_observe(server)
        threads = [
            threading.Thread(target=clients.observe, args=(server, i)) for i in range(CLIENTS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert server.proc.wait(timeout=60) != 0  # killed
    assert not clients.unexpected
    assert clients.answered, "nothing was answered before the kill"
    records = {}
    for line in journal.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line: never answered
        records[record["seq"]] = record["hash"]
    for event in clients.answered:
        assert records.get(event["seq"]) == event["hash"], event
    verified = run_cli("verify", "--journal", str(journal), "--json")
    assert verified.code == 0, verified.stdout
    with serving(journal) as restarted:  # every client retries what it was not answered
        for params in clients.unanswered:
            retried = restarted.call("POST", "/v1/observe", params, timeout_s=60)
            assert (retried.status, retried.exit_code) == (200, 0), retried.body
    counted = Counter(
        json.loads(line)["data"].get("request_id")
        for line in journal.read_bytes().splitlines()
        if b'"capacity.observed"' in line
    )
    retried_ids = [params["request_id"] for params in clients.unanswered]
    assert all(counted[request_id] == 1 for request_id in retried_ids), counted
    assert all(count == 1 for request_id, count in counted.items() if request_id), counted
