"""The inspect_ai hooks (SPEC §13.1) in real `inspect eval` processes sharing one real
`quotaledger serve` and one goal.

Each `inspect eval` costs seconds of CPU, so one scenario checks many properties:
process A (mockllm, preset outputs carrying their usage) holds two of the goal's
three slots until the test opens its gate; then process B (inspect's OpenAI provider
against a 127.0.0.1 stub that answers each sample's first three requests 429) starts
two samples for the one slot left, and process C has a ledger that cannot be reached.
Then: the slots were never exceeded, a refused sample and C's sample ended as errors
naming why (never scored), every model call was observed with its sample's run and
every 429 rejected once with it, no run is left active, `validity` names exactly the
throttled sample, and no process looked up or connected to anything but loopback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quotaledger import Ledger
from tests.adapters.inspect_eval.stub import STUB_INPUT_BASE, Stub
from tests.server.serving import Server, free_port
from tests.support import REPO

HERE = REPO / "tests" / "adapters" / "inspect_eval"
TASK = HERE / "task.py"
MOCK_INPUT_BASE = 1000  # task.py: sample N's mockllm answer has 1000 + N uncached input
MOCK_CACHED = 5
SLOTS = 3
RATE_LIMITED = 3  # the SDK's two retries of its own, then inspect's
DEADLINE_S = 240.0
POLL_S = 0.1


def inspect_eval(
    tmp: Path, name: str, samples: str, journal: str, **env: str
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
        "2",
        "--no-fail-on-error",
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
        # Four samples for three slots: each holds its slot (A's until the gate opens,
        # B's until the stub answers) until all four were decided.
        a = inspect_eval(tmp_path, "a", "a0,a 1", server.url, INSPECT_TEST_GATE=str(gate))
        b = inspect_eval(
            tmp_path,
            "b",
            "b2,b3",
            server.url,
            MODEL="openai/gpt-test",
            INSPECT_TEST_MODEL="openai",
            OPENAI_BASE_URL=stub.url,
            OPENAI_API_KEY="test",
        )
        c = inspect_eval(tmp_path, "c", "c4", f"http://127.0.0.1:{free_port()}")

        def decided(found: list[dict[str, Any]]) -> bool:
            runs = [e for e in found if e["kind"] in ("capacity.admitted", "capacity.refused")]
            return len(runs) == 4

        wait_for(ledger, "four decisions", decided, a, b)
        stub.go.set()
        gate.touch()
        for proc in (a, b, c):
            finished(proc)

    found = events(ledger)
    logs = {name: eval_log(tmp_path / name) for name in "abc"}
    samples = {run: s for name in "ab" for run, s in runs_of(logs[name]).items()}
    admitted = {e["data"]["request"]["run"] for e in kinds(found, "capacity.admitted")}
    throttled = admitted & set(runs_of(logs["b"]))
    check_admissions(found, samples, admitted)
    check_observations(found, samples, admitted)
    check_rejections(found, stub, throttled)
    assert ledger.inspect(goal="g")["goals"]["g"]["active_runs"] == []
    check_validity(ledger.validity(goal="g"), samples, admitted, throttled)
    check_unreachable(logs["c"])
    # no process looked anything up but loopback (no tokenizer was downloaded)
    assert [p.name for p in tmp_path.glob("*.network")] == []


def check_admissions(
    found: list[dict[str, Any]], samples: dict[str, dict[str, Any]], admitted: set[str]
) -> None:
    """Never above the slots; the refused sample ended as an error naming the reasons,
    unscored; each case is `<sample id>@<epoch>`, an id outside the identifier rule hashed."""
    refused = {e["data"]["request"]["run"] for e in kinds(found, "capacity.refused")}
    assert most_active(found) == SLOTS
    assert len(admitted) == SLOTS and len(refused) == 1 and set(samples) == admitted | refused
    (refused_run,) = refused
    assert "total_capacity_exhausted" in samples[refused_run]["error"]["message"]
    assert not samples[refused_run].get("scores")
    assert all(samples[run]["scores"]["match"]["value"] == "C" for run in admitted)
    decisions = [e for e in found if e["kind"] in ("capacity.admitted", "capacity.refused")]
    for event in decisions:
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
    samples: dict[str, dict[str, Any]],
    admitted: set[str],
    throttled: set[str],
) -> None:
    """`validity`'s rows join inspect's samples by their uuid, and name the throttled."""
    verdicts = {row["run"]: row["verdict"] for row in validity["runs"]}
    assert set(verdicts) == set(samples)
    for run, verdict in verdicts.items():
        expected = "throttled" if run in throttled else "clean"
        assert verdict == (expected if run in admitted else "never_admitted")
    assert validity["counts"]["throttled"] == len(throttled)


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
