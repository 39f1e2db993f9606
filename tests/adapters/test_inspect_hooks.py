"""The inspect_ai hooks (SPEC §13.1) in real `inspect eval` processes sharing one real
`quotaledger serve` and one goal.

Each `inspect eval` costs seconds of CPU, so one scenario checks many properties:
process A (mockllm, preset outputs carrying their usage) starts three samples for the
goal's two slots: two hold them until the test opens its gate, the third waits in the
goal's queue; then process B (inspect's OpenAI provider against a 127.0.0.1 stub that
answers each sample's first three requests 429) queues two more behind it, and
process C has a ledger that cannot be reached. The gate opened, the queue drains.
Then: the samples were admitted in queue order and the slots never exceeded, C's
sample ended as an error naming why (never scored), every model call was observed
with its sample's run and every 429 rejected once with it, no run is left active and
no entry queued, `validity` names exactly the throttled samples with their waits, and
no process looked up or connected to anything but loopback. Another eval, stopped by
SIGINT while its sample waits, leaves no entry in the queue.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quotaledger import Ledger
from quotaledger.journal.clock import parse_at
from tests.adapters.inspect_eval.stub import STUB_INPUT_BASE, Stub
from tests.server.serving import Server, free_port
from tests.support import REPO

HERE = REPO / "tests" / "adapters" / "inspect_eval"
TASK = HERE / "task.py"
MOCK_INPUT_BASE = 1000  # task.py: sample N's mockllm answer has 1000 + N uncached input
MOCK_CACHED = 5
SLOTS = 2
RATE_LIMITED = 3  # the SDK's two retries of its own, then inspect's
DEADLINE_S = 240.0
POLL_S = 0.1


def inspect_eval(
    tmp: Path,
    name: str,
    samples: str,
    journal: str,
    max_samples: int = 2,
    options: tuple[str, ...] = (),
    **env: str,
) -> subprocess.Popen[str]:
    """`inspect eval task.py` as process `name`, its logs in tmp/name."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("QUOTALEDGER_", "OPENAI_"))}
    # Run by its path, in a folder of its own: the repository's folder on sys.path would
    # find its quotaledger.egg-info before the installed distribution, which names the
    # hooks `quotaledger/quota` (a module of an installed package is namespaced).
    command = [
        sys.executable,
        str(HERE / "run.py"),
        str(tmp / f"{name}.network"),
        "eval",
        "task.py",  # inspect takes a task file by a path relative to its folder
        "--log-dir",
        str(tmp / name / "logs"),
        "--log-format",
        "json",
        "--display",
        "none",
        "--max-samples",
        str(max_samples),
        "--no-fail-on-error",
        *options,
        *(["--model", env.pop("MODEL")] if "MODEL" in env else []),
    ]
    (tmp / name).mkdir()
    shutil.copy(TASK, tmp / name / "task.py")
    return subprocess.Popen(
        command,
        cwd=tmp / name,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **clean,
            "INSPECT_TEST_SAMPLES": samples,
            "QUOTALEDGER_JOURNAL": journal,
            "QUOTALEDGER_INSPECT_GOAL": "g",
            "INSPECT_REQUIRED_HOOKS": "quotaledger/quota",
            **env,
        },
    )


def finished(proc: subprocess.Popen[str]) -> tuple[str, str]:
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, err[-3000:]
    return out, err


def eval_log(folder: Path) -> dict[str, Any]:
    (path,) = (folder / "logs").glob("*.json")
    log: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return log


def runs_of(log: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The run each sample of an inspect log is admitted as (SPEC §13.1) -> the sample."""
    eval_id = log["eval"]["eval_id"]
    return {f"{eval_id}/{sample['uuid']}": sample for sample in log["samples"]}


def events(ledger: Ledger) -> list[dict[str, Any]]:
    found = ledger.log(goal="g")
    # Over HTTP a log of one event is that event, not a list of it (remote.decode_answer).
    return [found] if isinstance(found, dict) else list(found)


def wait_for(
    ledger: Ledger,
    what: str,
    condition: Callable[[list[dict[str, Any]]], bool],
    *running: subprocess.Popen[str],
) -> None:
    """Until the goal's events meet `condition` (a barrier on the journal, not a sleep),
    while the `running` processes still run."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition(events(ledger)):
        for proc in running:
            assert proc.poll() is None, f"exited {proc.returncode}: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S} s"
        time.sleep(POLL_S)


def kinds(found: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in found if e["kind"] == kind]


def most_active(found: list[dict[str, Any]]) -> int:
    active: set[str] = set()
    most = 0
    for event in found:
        if event["kind"] == "capacity.admitted":
            active.add(event["data"]["request"]["run"])
        elif event["kind"] == "capacity.released":
            active.discard(event["data"]["run"])
        most = max(most, len(active))
    return most


def still_queued(found: list[dict[str, Any]]) -> list[str]:
    """The runs whose entry is still in the queue: queued, and neither admitted nor
    dequeued since (no entry here lives to its ttl)."""
    queued: list[str] = []
    for event in found:
        data = event["data"]
        run = data.get("run") or data.get("request", {}).get("run")
        if event["kind"] == "capacity.queued":
            queued.append(run)
        elif event["kind"] in ("capacity.admitted", "capacity.dequeued") and run in queued:
            queued.remove(run)
    return queued


def counted(kind: str, number: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda found: len(kinds(found, kind)) == number


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, Ledger]]:
    server = Server(str(tmp_path / "ledger.jsonl")).wait_ready()
    ledger = Ledger.open(server.url)
    try:
        ledger.configure(goal="g", max_active_cases=SLOTS)
        yield server, ledger
    finally:
        ledger.close()
        server.stop()


@pytest.mark.slow  # three `inspect eval` processes: seconds of CPU each
def test_two_evals_share_one_goal(tmp_path: Path, served: tuple[Server, Ledger]) -> None:
    server, ledger = served
    gate = tmp_path / "gate"
    with Stub(rate_limited=RATE_LIMITED) as stub:
        stub.go.set()
        c = inspect_eval(tmp_path, "c", "c7", f"http://127.0.0.1:{free_port()}")
        # Five samples for two slots: A's first two hold them until the gate opens,
        # A's third queues, then B's two queue behind it.
        a = inspect_eval(
            tmp_path, "a", "a0,a 1,a2", server.url, max_samples=3, INSPECT_TEST_GATE=str(gate)
        )
        wait_for(ledger, "A's entry in the queue", counted("capacity.queued", 1), a)
        b = inspect_eval(
            tmp_path,
            "b",
            "b3,b4",
            server.url,
            MODEL="openai/gpt-test",
            INSPECT_TEST_MODEL="openai",
            OPENAI_BASE_URL=stub.url,
            OPENAI_API_KEY="test",
        )
        wait_for(ledger, "B's entries in the queue", counted("capacity.queued", 3), a, b)
        gate.touch()
        for proc in (a, b, c):
            finished(proc)

    found = events(ledger)
    logs = {name: eval_log(tmp_path / name) for name in "abc"}
    samples = {run: s for name in "ab" for run, s in runs_of(logs[name]).items()}
    throttled = set(runs_of(logs["b"]))
    check_admissions(found, samples)
    check_observations(found, samples, set(samples))
    check_rejections(found, stub, throttled)
    assert ledger.inspect(goal="g")["goals"]["g"]["active_runs"] == []
    assert still_queued(found) == []
    check_validity(ledger.validity(goal="g"), found, samples, throttled)
    check_unreachable(logs["c"])
    # no process looked anything up but loopback (no tokenizer was downloaded)
    assert [p.name for p in tmp_path.glob("*.network")] == []


@pytest.mark.slow  # an `inspect eval` process
def test_an_eval_stopped_while_its_sample_waits_leaves_no_entry(
    tmp_path: Path, served: tuple[Server, Ledger]
) -> None:
    server, ledger = served
    for n in range(SLOTS):  # the goal is full for an hour
        ledger.admit(goal="g", run=f"holder{n}", case=f"h{n}", arm="treatment", lease_s=3600)
    d = inspect_eval(tmp_path, "d", "d8", server.url)
    wait_for(ledger, "the sample's entry in the queue", counted("capacity.queued", 1), d)
    d.send_signal(signal.SIGINT)  # inspect cancels the waiting sample's task
    d.communicate(timeout=DEADLINE_S)
    found = events(ledger)
    (queued,) = kinds(found, "capacity.queued")
    run = queued["data"]["request"]["run"]
    dequeued = [e["data"] for e in kinds(found, "capacity.dequeued")]
    assert dequeued == [{"run": run, "reason": "cancelled"}]
    assert still_queued(found) == []
    assert [e["data"]["request"]["run"] for e in kinds(found, "capacity.admitted")] == [
        "holder0",
        "holder1",
    ]


@pytest.mark.slow  # an `inspect eval` process
def test_a_retried_sample_is_never_run_unadmitted(
    tmp_path: Path, served: tuple[Server, Ledger]
) -> None:
    """inspect runs `on_sample_init` once: the retry waits at its start, and refused
    there too, it ends as an error, unscored even with --score-on-error."""
    server, ledger = served
    for n in range(SLOTS):  # the goal is full for an hour
        ledger.admit(goal="g", run=f"holder{n}", case=f"h{n}", arm="treatment", lease_s=3600)
    options = ("--retry-on-error=1", "--score-on-error")
    e = inspect_eval(
        tmp_path, "e", "e9", server.url, options=options, QUOTALEDGER_INSPECT_WAIT_S="1"
    )
    finished(e)
    (sample,) = eval_log(tmp_path / "e")["samples"]
    run = f"{eval_log(tmp_path / 'e')['eval']['eval_id']}/{sample['uuid']}"
    found = events(ledger)
    mine = [
        e["kind"]
        for e in found
        if run in (e["data"].get("run"), e["data"].get("request", {}).get("run"))
    ]
    assert mine == ["capacity.queued", "capacity.dequeued"] * 2  # init, then the retry
    assert still_queued(found) == []
    waited = f"run {run} waited 1 s in the queue (QUOTALEDGER_INSPECT_WAIT_S) and was not admitted"
    assert waited in sample["error"]["message"]
    assert len(sample["error_retries"]) == 1 and waited in sample["error_retries"][0]["message"]
    assert not sample.get("scores")
    assert [ev for ev in sample["events"] if ev["event"] == "model"] == []


def check_admissions(found: list[dict[str, Any]], samples: dict[str, dict[str, Any]]) -> None:
    """Never above the slots; every sample admitted, those that waited in queue order
    (each admission names its entry); each case `<sample id>@<epoch>`, an id outside
    the identifier rule hashed; every sample scored."""
    admissions = kinds(found, "capacity.admitted")
    queued = kinds(found, "capacity.queued")
    assert most_active(found) == SLOTS
    assert sorted(e["data"]["request"]["run"] for e in admissions) == sorted(samples)
    assert kinds(found, "capacity.refused") == [] and kinds(found, "capacity.dequeued") == []
    promoted = [e for e in admissions if e["data"].get("queued")]
    assert [e["data"]["request"]["run"] for e in promoted] == [
        e["data"]["request"]["run"] for e in queued
    ]
    assert [e["data"]["queued"] for e in promoted] == [
        {"seq": e["seq"], "at": e["at"]} for e in queued
    ]
    assert len(queued) == 3 and len(admissions) == 5
    assert all(samples[run]["scores"]["match"]["value"] == "C" for run in samples)
    for event in admissions + queued:
        request = event["data"]["request"]
        sample_id = samples[request["run"]]["id"]
        if " " in sample_id:
            assert re.fullmatch(r"sha256:[0-9a-f]{16}@1", request["case"])
        else:
            assert request["case"] == f"{sample_id}@1"
        assert request["arm"] == "treatment" and request["lease_s"] == 900


def check_observations(
    found: list[dict[str, Any]], samples: dict[str, dict[str, Any]], admitted: set[str]
) -> None:
    """Every model call observed once, with its sample's run: its usage names the sample."""
    observed = [e["data"] for e in found if e["kind"] == "capacity.observed"]
    assert sorted(o["run"] for o in observed) == sorted(admitted)
    for observation in observed:
        number = int(samples[observation["run"]]["id"][1:])
        mock = observation["model"] == "mockllm/model"
        assert observation["model"] == ("mockllm/model" if mock else "openai/gpt-test")
        base = MOCK_INPUT_BASE if mock else STUB_INPUT_BASE
        assert observation["uncached_input"] == base + number
        assert observation["cached_input"] == (MOCK_CACHED if mock else 0)
        assert observation["output"] == 2 and observation["requests"] == 1


def check_rejections(found: list[dict[str, Any]], stub: Stub, throttled: set[str]) -> None:
    """Every 429 rejected once (the SDK's retries and inspect's), with its sample's run."""
    rejected = [e["data"] for e in found if e["kind"] == "capacity.rejected"]
    assert len(stub.throttled) == RATE_LIMITED * len(throttled)
    assert sorted(r["request_id"] for r in rejected) == sorted(stub.throttled)
    by_run = {r["run"] for r in rejected}
    assert by_run == throttled


def check_validity(
    validity: dict[str, Any],
    found: list[dict[str, Any]],
    samples: dict[str, dict[str, Any]],
    throttled: set[str],
) -> None:
    """`validity`'s rows join inspect's samples by their uuid, name the throttled, and
    date each wait from its entry: queued_at its `capacity.queued`, waited_s to the
    admission."""
    rows = {row["run"]: row for row in validity["runs"]}
    assert set(rows) == set(samples)
    queued_at = {e["data"]["request"]["run"]: e["at"] for e in kinds(found, "capacity.queued")}
    admitted_at = {e["data"]["request"]["run"]: e["at"] for e in kinds(found, "capacity.admitted")}
    for run, row in rows.items():
        assert row["verdict"] == ("throttled" if run in throttled else "clean")
        assert row["queued_at"] == queued_at.get(run)
        assert row["admitted_at"] == admitted_at[run]
        if run in queued_at:
            waited_us = parse_at(admitted_at[run]) - parse_at(queued_at[run])
            assert row["waited_s"] == pytest.approx(waited_us / 1e6, abs=1e-6)
            assert row["waited_s"] > 0
        else:
            assert row["waited_s"] == 0
    assert validity["counts"]["throttled"] == len(throttled) == 2
    assert validity["counts"]["clean"] == 3


def check_unreachable(log: dict[str, Any]) -> None:
    """The ledger unreachable: the sample ended as an error, logged; no hang."""
    (sample,) = log["samples"]
    assert "could not be admitted" in sample["error"]["message"]
    assert "server_unreachable" in sample["error"]["message"]
    assert not sample.get("scores")
    logged = [e["message"] for e in sample["events"] if e["event"] == "logger"]
    assert any(
        m.get("name") == "quotaledger" and m["level"] == "error" and "not admitted" in m["message"]
        for m in logged
    )
