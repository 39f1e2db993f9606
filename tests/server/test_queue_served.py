"""The queue through the server (SPEC §12.2, §11): a queued answer over HTTP with its
Retry-After, and `"wait_s": N` held by the server until a promotion admits the run."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, wall_us
from tests.capacity.capacity_helpers import at, finish, spawn
from tests.server.serving import Answer, Server, serving


def _held(server: Server, **params: Any) -> tuple[threading.Thread, list[Answer]]:
    """POST /v1/admit in a thread of its own (the server holds it)."""
    answers: list[Answer] = []
    thread = threading.Thread(target=lambda: answers.append(server.post("admit", **params)))
    thread.start()
    return thread, answers


def _until_queued(server: Server, run: str) -> None:
    """Until the held request's entry is in the journal (a barrier, not a sleep)."""
    for _ in range(600):
        lines = server.get("log", "goal=g&kind=capacity.queued").body.decode()
        if f'"run":"{run}"' in lines.replace(" ", ""):
            return
        time.sleep(0.05)
    raise AssertionError(f"{run} was never queued")


def test_a_queued_answer_over_http_carries_retry_after(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        assert server.post("configure", goal="g", max_active_cases=1, at=at(0)).exit_code == 0
        admitted = server.post("admit", goal="g", run="r1", arm="baseline", lease_s=60, at=at(0))
        assert admitted.exit_code == 0
        queued = server.post(
            "admit", goal="g", run="r2", arm="baseline", lease_s=60, queue=True, at=at(0.5)
        )
        assert (queued.status, queued.exit_code) == (200, 1)
        assert queued.json["queued"] is True and queued.json["position"] == 1
        assert queued.json["estimated_start_at"] == at(60)
        assert queued.headers["retry-after"] == "60"  # 59.5 s, rounded up
        too_long = server.post("admit", goal="g", run="r3", arm="baseline", lease_s=60, wait_s=61)
        assert (too_long.status, too_long.exit_code) == (400, 2)
        assert too_long.json["error"]["code"] == "invalid_duration"
        no_lease = server.post("admit", goal="g", run="r3", arm="baseline", queue=True)
        assert no_lease.json["error"]["code"] == "lease_required"


def test_the_server_answers_a_held_wait_when_a_release_promotes_it(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        server.post("configure", goal="g", max_active_cases=1)
        server.post("admit", goal="g", run="r1", arm="baseline")  # no lease: a release frees it
        thread, answers = _held(server, goal="g", run="r2", arm="baseline", lease_s=60, wait_s=60)
        _until_queued(server, "r2")
        released = server.post("release", goal="g", run="r1")
        assert released.json["promoted"] == [{"goal": "g", "run": "r2"}]
        thread.join(90)
        (held,) = answers
        assert (held.status, held.exit_code) == (200, 0)
        assert held.json["admitted"] is True and held.json["receipt"]["run"] == "r2"


def test_the_server_promotes_a_held_wait_at_its_estimate(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        server.post("configure", goal="g", max_active_cases=1)
        server.post("admit", goal="g", run="r1", arm="baseline", lease_s=1)
        held = server.post("admit", goal="g", run="r2", arm="baseline", lease_s=60, wait_s=30)
        assert (held.status, held.exit_code) == (200, 0)
        assert held.json["admitted"] is True
        log = server.get("log", "goal=g&kind=capacity.admitted").body.decode()
        assert '"queued"' in log


def test_a_remote_ledger_waits_across_held_requests(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        server.post("configure", goal="g", max_active_cases=1)
        server.post("admit", goal="g", run="r1", arm="baseline", lease_s=1)
        with Ledger.open(server.url) as remote:
            answer = remote.admit(goal="g", run="r2", arm="baseline", lease_s=60, wait_s=20)
        assert answer["admitted"] is True


def _until_admitted(server: Server, run: str) -> dict[str, Any]:
    """Until `run`'s admission is in the journal (reads only: a reader never appends)."""
    for _ in range(600):
        for line in server.get("log", "goal=g&kind=capacity.admitted").body.decode().splitlines():
            event = json.loads(line)
            if event["data"]["request"]["run"] == run:
                return dict(event)
        time.sleep(0.05)
    raise AssertionError(f"{run} was never admitted")


def test_the_queue_timer_promotes_at_the_estimate_with_nobody_polling(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        server.post("configure", goal="g", max_active_cases=1)
        first = server.post("admit", goal="g", run="r1", arm="baseline", lease_s=1)
        queued = server.post("admit", goal="g", run="r2", arm="baseline", lease_s=60, queue=True)
        assert queued.json["queued"] is True
        estimate = queued.json["estimated_start_at"]
        assert estimate == first.json["receipt"]["lease_until"]
        # No client asks again, nothing else is written: the server's timer promotes.
        admitted = _until_admitted(server, "r2")
        assert admitted["at"] >= estimate
        assert admitted["data"]["queued"]["seq"] == queued.json["event"]["seq"]


def test_a_restarted_server_promotes_the_entries_it_finds_waiting(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    with serving(journal) as server:
        server.post("configure", goal="g", max_active_cases=1)
        server.post("admit", goal="g", run="r1", arm="baseline", lease_s=1)
        queued = server.post("admit", goal="g", run="r2", arm="baseline", lease_s=60, queue=True)
        assert queued.json["queued"] is True
    with serving(journal) as server:  # stopped before the lease ended: nobody polls r2
        admitted = _until_admitted(server, "r2")
        assert admitted["at"] >= queued.json["estimated_start_at"]


def test_a_cli_waiter_and_a_server_waiter_on_one_journal(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    with serving(journal) as server:
        server.post("configure", goal="g", max_active_cases=1)
        server.post("admit", goal="g", run="blocker", arm="baseline")  # a release frees it
        cli = spawn(
            str(journal), "admit", "--goal", "g", "--run", "w-cli", "--arm", "baseline",
            "--lease-s", "600", "--wait", "--wait-timeout-s", "120",
        )  # fmt: skip
        _until_queued(server, "w-cli")
        thread, answers = _held(
            server, goal="g", run="w-http", arm="baseline", lease_s=600, wait_s=60
        )
        _until_queued(server, "w-http")
        # The queue: the CLI's entry first, the server's behind it.
        released = server.post("release", goal="g", run="blocker")
        assert released.json["promoted"] == [{"goal": "g", "run": "w-cli"}]
        ((code, answer),) = finish([cli])  # it sees its admission at its next poll
        assert (code, answer["receipt"]["run"]) == (0, "w-cli")
        released = server.post("release", goal="g", run="w-cli")
        assert released.json["promoted"] == [{"goal": "g", "run": "w-http"}]
        thread.join(90)
        (held,) = answers
        assert held.exit_code == 0 and held.json["receipt"]["run"] == "w-http"
        log = server.get("log", "goal=g&kind=capacity.admitted").body.decode().splitlines()
    runs = [json.loads(line)["data"]["request"]["run"] for line in log]
    assert runs == ["blocker", "w-cli", "w-http"]  # each once, in queue order


def _pool_admissions(server: Server, runs: int) -> list[dict[str, Any]]:
    """Until `runs` promotions are in the journal (reads only)."""
    for _ in range(600):
        lines = server.get("log", "kind=capacity.admitted").body.decode().splitlines()
        events = [json.loads(line) for line in lines]
        promoted = [e for e in events if e["data"].get("queued")]
        if len(promoted) >= runs:
            return promoted
        time.sleep(0.05)
    raise AssertionError("the pool's entries were never admitted")


def test_a_restarted_server_promotes_a_pools_queue_once(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    start_us = wall_us() - 58 * US_PER_S  # explicit times: the blocker's lease ends in 2 s

    def t(seconds: int) -> str:
        return format_us(start_us + seconds * US_PER_S)

    # The queue is filled by a local writer, which keeps no timer: however slow this
    # machine is, nothing promotes before the server below starts on the journal.
    with Ledger.open(str(journal)) as ledger:
        ledger.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=t(0))
        for goal in ("a", "b", "c"):
            ledger.configure(goal=goal, pool="org", pool_share=0.3, at=t(0))
        blocker = ledger.admit(goal="a", run="blocker", forecast_tpm=1000, lease_s=60, at=t(0))
        assert blocker["admitted"] is True
        estimates = set()
        for goal in ("c", "b", "a"):
            queued = ledger.admit(
                goal=goal, run=f"w-{goal}", forecast_tpm=300, lease_s=60, queue=True, at=t(1)
            )
            assert queued["queued"] is True
            estimates.add(queued["estimated_start_at"])
        assert estimates == {blocker["receipt"]["lease_until"]}
    with serving(journal) as server:  # nobody polls: the pool's one timer promotes
        promoted = _pool_admissions(server, 3)
    assert [e["data"]["request"]["run"] for e in promoted] == ["w-c", "w-b", "w-a"]
    assert len({e["at"] for e in promoted}) == 1  # one promotion, one time
    assert min(e["at"] for e in promoted) >= blocker["receipt"]["lease_until"]


def test_a_waiter_that_hangs_up_leaves_its_entry_to_its_ttl(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        server.post("configure", goal="g", max_active_cases=1)
        server.post("admit", goal="g", run="blocker", arm="baseline")  # a release frees it
        body = json.dumps(
            {"goal": "g", "run": "gone", "arm": "baseline", "lease_s": 60, "wait_s": 60}
        )
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        connection.request("POST", "/v1/admit", body, {"Content-Type": "application/json"})
        _until_queued(server, "gone")
        connection.close()  # hangs up while held
        queue = server.get("inspect", "goal=g").json["goals"]["g"]["queue"]
        assert [(e["run"], e["position"]) for e in queue] == [("gone", 1)]
        released = server.post("release", goal="g", run="blocker")
        assert released.json["promoted"] == [{"goal": "g", "run": "gone"}]
        assert "cancelled" not in server.get("log", "goal=g&kind=capacity.dequeued").body.decode()
