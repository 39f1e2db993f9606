"""A reader asked about a lane, run or agent that does not exist refuses with a code
(SPEC §8: exit 2, one line on stderr, the JSON error object; never an empty answer),
the same through the CLI, the Python API and a real server, and no byte of the
journal changes. What does exist but has nothing to show still answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

import quotaledger.usecases.decode as decoding
from quotaledger import InvalidInput, Ledger
from tests.server.serving import Server, serving
from tests.support import run_cli

T0 = "2026-03-01T10:00:00Z"

REFUSED = {
    "heartbeat of an unknown lane": (
        "host_heartbeat",
        {"goal": "g", "lane": "zz", "session": "s"},
        "unknown_lane",
    ),
    "heartbeat of an unknown goal": (
        "host_heartbeat",
        {"goal": "nope", "lane": "a", "session": "s"},
        "unknown_goal",
    ),
    "log of an unknown run": ("log", {"run": "nope"}, "unknown_run"),
    "log of a run of another goal": ("log", {"goal": "t", "run": "r1"}, "unknown_run"),
    "audit of an unknown run": ("audit", {"goal": "g", "run": "nope"}, "unknown_run"),
    "turn status of an unknown agent": (
        "turn_status",
        {"goal": "t", "agent": "nobody"},
        "unknown_agent",
    ),
}


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("subjects") / "j.jsonl"
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, max_active_cases=2, at=T0)
        ledger.observe(goal="g", run="r2", uncached_input=10, cached_input=0, output=5, at=T0)
        ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=100, at=T0)
        ledger.host_phase(goal="g", lane="a", deadline="+1h", session="s", profile="p", at=T0)
        ledger.budget_configure(goal="t", allowed_units=10, window_hours=1, at=T0)
        ledger.turn_open(goal="t", agent="a", turn="t1", task="k", at=T0)
    return path


@pytest.fixture(scope="module")
def server(journal: Path) -> Iterator[Server]:
    with serving(journal) as running:
        yield running


def _cli_args(method: str, kwargs: dict[str, Any]) -> list[str]:
    args = method.split("_") if method.startswith(("host_", "turn_")) else [method]
    for name, value in kwargs.items():
        args += [decoding.CLI(name), str(value)]
    return args


def _api(journal: Path, method: str, kwargs: dict[str, Any]) -> Any:
    with Ledger.open(journal) as ledger:
        answer = getattr(ledger, method)(**kwargs)
        return list(answer) if method == "log" else answer


@pytest.mark.parametrize(("method", "kwargs", "code"), REFUSED.values(), ids=REFUSED.keys())
def test_a_reader_refuses_what_does_not_exist_everywhere(
    journal: Path, server: Server, method: str, kwargs: dict[str, Any], code: str
) -> None:
    before = journal.read_bytes()
    args = [*_cli_args(method, kwargs), "--journal", str(journal)]
    text = run_cli(*args)
    assert (text.code, text.stdout) == (2, ""), text
    (line,) = text.stderr.splitlines()
    assert line.startswith("quotaledger: error: ") and line.endswith(f"[{code}]"), line
    as_json = run_cli(*args, "--json")
    assert as_json.code == 2 and as_json.stderr == ""
    assert as_json.json["ok"] is False and as_json.json["error"]["code"] == code
    with pytest.raises(InvalidInput) as by_api:
        _api(journal, method, kwargs)
    assert (by_api.value.code, by_api.value.exit_code) == (code, 2)
    by_server = server.get(method, urlencode(kwargs))
    assert (by_server.status, by_server.exit_code) == (400, 2), by_server.body
    assert by_server.json["error"]["code"] == code
    assert journal.read_bytes() == before


def test_what_exists_but_has_nothing_to_show_still_answers(journal: Path) -> None:
    before = journal.read_bytes()
    # r1 exists; no release names it: an empty list, not an error.
    assert _api(journal, "log", {"run": "r1", "kind": "capacity.released"}) == []
    shown = run_cli("log", "--run", "r1", "--kind", "capacity.released", "--journal", journal)
    assert shown.code == 0, shown
    # r2 was observed but never decided: its audit finds no decision.
    with pytest.raises(InvalidInput) as no_decision:
        _api(journal, "audit", {"goal": "g", "run": "r2"})
    assert no_decision.value.code == "decision_not_found"
    # An agent with no turn yet resumes idle (SPEC §5.2: a runner asks before its first).
    idle = _api(journal, "turn_resume", {"goal": "t", "agent": "nobody"})
    assert idle["phase"] == "idle"
    assert _api(journal, "host_heartbeat", {"goal": "g", "lane": "a", "session": "s"})["ok"]
    assert journal.read_bytes() == before
