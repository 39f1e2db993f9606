"""The inspect_ai hooks' admission waits in the goal's queue (SPEC §13.1, §12.2): the
hooks called in this process on a real journal file or a real server, the goal's one
slot held by another run, so the premise (the sample waits) is the journal's."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from inspect_ai._eval.eval import EvalLogs  # the type RunEnd.logs names
from inspect_ai.hooks import RunEnd, SampleAttemptStart, SampleInit, SampleScoring
from inspect_ai.log import EvalSampleSummary
from inspect_ai.util import LimitExceededError

from quotaledger import Ledger, ServerUnreachable
from quotaledger.adapters.inspect_admission import pause_s
from quotaledger.adapters.inspect_ai import Quota
from tests.server.serving import Server

RUN = "eval1/u1"
BARRIER_S = 60.0


def init(sample: str = "u1", inspect_run: str = "run1") -> SampleInit:
    summary = EvalSampleSummary(id="s1", epoch=1, input="q", target="a")
    return SampleInit(None, inspect_run, "eval1", sample, summary)


def events(journal: str) -> list[dict[str, Any]]:
    with Ledger.open(journal) as ledger:
        found = ledger.log(goal="g")
        # Over HTTP a log of one event is that event (remote.decode_answer).
        return [found] if isinstance(found, dict) else list(found)


def kinds(journal: str) -> list[tuple[str, Any]]:
    return [
        (e["kind"], e["data"].get("run") or e["data"].get("request", {}).get("run"))
        for e in events(journal)
    ]


def queue_of(journal: str) -> list[str]:
    """The runs whose entry is still in the queue, read from the journal: queued, and
    neither admitted nor dequeued since (no entry here lives to its ttl)."""
    queued: list[str] = []
    for kind, run in kinds(journal):
        if kind == "capacity.queued":
            queued.append(run)
        elif kind in ("capacity.admitted", "capacity.dequeued") and run in queued:
            queued.remove(run)
    return queued


async def until_queued(journal: str) -> None:
    """A barrier on the journal: the sample's entry is in the queue."""
    deadline = time.monotonic() + BARRIER_S
    while ("capacity.queued", RUN) not in await anyio.to_thread.run_sync(kinds, journal):
        assert time.monotonic() < deadline, "the sample never queued"
        await anyio.sleep(0.05)


def held_journal(journal: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Goal g with one slot, which run `holder` holds for an hour."""
    with Ledger.open(journal) as ledger:
        ledger.configure(goal="g", max_active_cases=1)
        ledger.admit(goal="g", run="holder", case="h", arm="treatment", lease_s=3600)
    monkeypatch.setenv("QUOTALEDGER_JOURNAL", journal)
    monkeypatch.setenv("QUOTALEDGER_INSPECT_GOAL", "g")
    return journal


@pytest.fixture
def file_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return held_journal(str(tmp_path / "j.jsonl"), monkeypatch)


@pytest.fixture
def server_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = Server(str(tmp_path / "j.jsonl")).wait_ready()
    try:
        yield held_journal(server.url, monkeypatch)
    finally:
        server.stop()


@pytest.fixture(params=["file", "server"])
def journal(request: pytest.FixtureRequest) -> str:
    name = "file_journal" if request.param == "file" else "server_journal"
    found: str = request.getfixturevalue(name)
    return found


def test_a_release_admits_the_waiting_sample(journal: str) -> None:
    hooks = Quota()

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(hooks.on_sample_init, init())
            await until_queued(journal)
            with Ledger.open(journal) as ledger:
                await anyio.to_thread.run_sync(lambda: ledger.release(goal="g", run="holder"))

    anyio.run(main)
    assert kinds(journal)[-3:] == [
        ("capacity.queued", RUN),
        ("capacity.released", "holder"),
        ("capacity.admitted", RUN),
    ]
    assert [held.run for held in hooks._held.values()] == [RUN]
    assert queue_of(journal) == []


def test_a_wait_that_ends_withdraws_the_entry(
    journal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUOTALEDGER_INSPECT_WAIT_S", "1")
    with pytest.raises(LimitExceededError) as raised:
        anyio.run(Quota().on_sample_init, init())
    assert raised.value.message == (
        f"quotaledger: goal g: run {RUN} waited 1 s in the queue (QUOTALEDGER_INSPECT_WAIT_S) "
        "and was not admitted: target_capacity_exhausted, total_capacity_exhausted, "
        "test_capacity_exhausted"
    )
    assert kinds(journal)[-2:] == [("capacity.queued", RUN), ("capacity.dequeued", RUN)]
    assert queue_of(journal) == []


def test_a_sample_cancelled_while_it_waits_withdraws_its_entry(journal: str) -> None:
    hooks = Quota()

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(hooks.on_sample_init, init())
            await until_queued(journal)
            group.cancel_scope.cancel()  # as inspect cancels a sample's task

    anyio.run(main)
    (dequeued,) = [e for e in events(journal) if e["kind"] == "capacity.dequeued"]
    assert dequeued["data"] == {"run": RUN, "reason": "cancelled"}
    assert queue_of(journal) == []
    assert hooks._held == {}
    # the run's end withdraws it once more: nothing left to take, nothing appended
    ended = RunEnd(eval_set_id=None, run_id="run1", exception=None, logs=EvalLogs([]))
    count = len(kinds(journal))
    anyio.run(hooks.on_run_end, ended)
    assert len(kinds(journal)) == count


def test_the_pause_between_asks() -> None:
    at = "2026-12-01T00:00:00Z"
    assert pause_s({"at": at, "estimated_start_at": "2026-12-01T00:00:00.250000Z"}) == 0.25
    assert pause_s({"at": at, "estimated_start_at": "2026-12-01T00:00:30Z"}) == 1.0
    assert pause_s({"at": at, "estimated_start_at": at}) == 1.0
    assert pause_s({"at": at, "estimated_start_at": None}) == 1.0


def test_a_refusal_time_cannot_cure_is_not_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = str(tmp_path / "j.jsonl")
    with Ledger.open(journal) as ledger:
        ledger.configure(goal="g", max_active_cases=1, quota_tpm=1000)
    monkeypatch.setenv("QUOTALEDGER_JOURNAL", journal)
    monkeypatch.setenv("QUOTALEDGER_INSPECT_GOAL", "g")
    with pytest.raises(LimitExceededError) as raised:
        anyio.run(Quota().on_sample_init, init())
    assert raised.value.message == (
        f"quotaledger: goal g refused run {RUN}: token_forecast_required, usage_observation_stale"
    )
    assert [kind for kind, _ in kinds(journal)] == ["capacity.configured", "capacity.refused"]


def attempt(number: int, sample: str = "u1") -> SampleAttemptStart:
    summary = EvalSampleSummary(id="s1", epoch=1, input="q", target="a")
    return SampleAttemptStart(None, "run1", "eval1", sample, summary, number)


def test_a_retry_of_a_sample_init_did_not_admit_is_admitted_at_its_start(
    file_journal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUOTALEDGER_INSPECT_WAIT_S", "1")
    hooks = Quota()
    with pytest.raises(LimitExceededError):
        anyio.run(hooks.on_sample_init, init())
    # refused at the retry's start too: its scoring raises the refusal again
    with pytest.raises(LimitExceededError) as raised:
        anyio.run(hooks.on_sample_attempt_start, attempt(2))
    scoring = SampleScoring(None, "run1", "eval1", "u1")
    with pytest.raises(LimitExceededError) as again:
        anyio.run(hooks.on_sample_scoring, scoring)
    assert again.value.message == raised.value.message
    assert "waited 1 s in the queue" in raised.value.message
    with Ledger.open(file_journal) as ledger:
        ledger.release(goal="g", run="holder")
    anyio.run(hooks.on_sample_attempt_start, attempt(3))
    anyio.run(hooks.on_sample_scoring, scoring)  # admitted: scored as usual
    count = len(kinds(file_journal))
    anyio.run(hooks.on_sample_attempt_start, attempt(4))  # held: its admission covers it
    assert (
        kinds(file_journal)[-1] == ("capacity.admitted", RUN) and len(kinds(file_journal)) == count
    )
    assert [held.run for held in hooks._held.values()] == [RUN]


def test_an_aborted_ask_ends_and_the_ledger_asks_no_more(server_journal: str) -> None:
    """What a withdrawal does to a server's held ask: it fails at once (held, it would
    answer `queued` after its wait) and the ledger refuses later calls."""
    ledger = Ledger.open(server_journal)
    outcome: list[Any] = []

    def ask() -> None:
        try:
            outcome.append(
                ledger.admit(
                    goal="g", run=RUN, case="s1@1", arm="treatment", lease_s=900, wait_s=60
                )
            )
        except Exception as error:
            outcome.append(error)

    thread = threading.Thread(target=ask)
    thread.start()
    deadline = time.monotonic() + BARRIER_S
    while ("capacity.queued", RUN) not in kinds(server_journal):
        assert time.monotonic() < deadline, "the ask never queued"
        time.sleep(0.05)
    ledger.abort()  # type: ignore[attr-defined]  # the remote Ledger's
    thread.join()
    (error,) = outcome
    assert isinstance(error, ServerUnreachable)
    with pytest.raises(ServerUnreachable):
        ledger.inspect(goal="g")
    ledger.close()


def test_a_retry_whose_wait_is_cut_short_is_not_scored(file_journal: str) -> None:
    hooks = Quota()

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(hooks.on_sample_attempt_start, attempt(2))
            await until_queued(file_journal)
            group.cancel_scope.cancel()  # as the sample's time limit does

    anyio.run(main)
    with pytest.raises(LimitExceededError) as raised:
        anyio.run(hooks.on_sample_scoring, SampleScoring(None, "run1", "eval1", "u1"))
    assert raised.value.message == (
        f"quotaledger: goal g: run {RUN} was not admitted: its wait in the queue was cut "
        "short (the sample's time limit, or a cancel)"
    )
    assert queue_of(file_journal) == [] and hooks._held == {}
