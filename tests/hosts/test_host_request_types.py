"""The CLI and the Python API decode the same request type for each host command
(SPEC §8: the CLI is a thin layer over the API), and the same arguments give the
same request: defaults, times and digests included."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import pytest

import quotaledger.cli.host  # noqa: F401  # loaded before `decoded` patches its imports
import quotaledger.usecases.decode as decoding
from quotaledger import Error, Ledger
from quotaledger.usecases.registry import USE_CASES
from tests.support import run_cli

AT = "2026-11-29T14:00:00Z"
SHA = "ab" * 32
BIND = "cd" * 32
G = ["--goal", "g"]

CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "host_phase": (
        [*G, "--lane", "l1", "--deadline", "+2h", "--session", "s1", "--profile", "p"],
        {"goal": "g", "lane": "l1", "deadline": "+2h", "session": "s1", "profile": "p"},
    ),
    "host_start": (
        [*G, "--lane", "l1", "--attempt", "a1", "--session", "s1", "--profile", "p", "--pid", "4"],
        {"goal": "g", "lane": "l1", "attempt": "a1", "session": "s1", "profile": "p", "pid": 4},
    ),
    "host_exit": (
        [*G, "--attempt", "a1", "--exit-code", "0"],
        {"goal": "g", "attempt": "a1", "exit_code": 0},
    ),
    "host_return": (
        [*G, "--attempt", "a1", "--outcome", "failed", "--failure", "fatal", "--cursor", "c"],
        {"goal": "g", "attempt": "a1", "outcome": "failed", "failure": "fatal", "cursor": "c"},
    ),
    "host_continue": (
        [
            *G,
            *("--lane", "l1", "--bind", BIND, "--deadline", "+1h", "--session", "s1"),
            *("--profile", "p", "--cursor", "c", "--handoff", "h.md", "--handoff-sha256", SHA),
        ],
        {
            "goal": "g",
            "lane": "l1",
            "bind": BIND,
            "deadline": "+1h",
            "session": "s1",
            "profile": "p",
            "cursor": "c",
            "handoff": "h.md",
            "handoff_sha256": SHA,
        },
    ),
    "host_stop": ([*G, "--clear"], {"goal": "g", "clear": True}),
    "host_replan": (
        [*G, "--lane", "l1", "--replan", "r1", "--open"],
        {"goal": "g", "lane": "l1", "replan": "r1", "action": "open"},
    ),
    "host_heartbeat": (
        [*G, "--lane", "l1", "--session", "s1"],
        {"goal": "g", "lane": "l1", "session": "s1"},
    ),
    "host_status": ([*G, "--lane", "l1"], {"goal": "g", "lane": "l1"}),
}


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every request `decode` makes, wherever its callers imported it from."""
    made: list[Any] = []
    original = decoding.decode

    def recording(request_type: Any, values: Any, names: Any) -> Any:
        request = original(request_type, values, names)
        made.append(request)
        return request

    for module in list(sys.modules.values()):
        if module is not None and getattr(module, "decode", None) is original:
            monkeypatch.setattr(module, "decode", recording)
    return made


def test_every_host_use_case_is_covered() -> None:
    assert set(CASES) == {name for name, case in USE_CASES.items() if case.module == "host"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_and_api_decode_the_same_request(
    tmp_path: Path, decoded: list[Any], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    journal = str(tmp_path / "j.jsonl")
    assert run_cli("host", "stop", "--goal", "g", "--journal", journal, "--at", AT).code == 0
    args, kwargs = CASES[name]
    decoded.clear()
    run_cli("host", name.removeprefix("host_"), *args, "--at", AT, "--journal", journal)
    assert len(decoded) == 1, decoded
    from_cli = decoded.pop()
    # Decoded first: what the journal then says does not matter here.
    with Ledger.open(journal) as ledger, contextlib.suppress(Error):
        getattr(ledger, name)(**kwargs, at=AT)
    assert len(decoded) == 1, decoded
    from_api = decoded.pop()
    assert type(from_cli) is type(from_api) is USE_CASES[name].request_type()
    assert from_cli == from_api


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_request_and_answer_types_have_a_json_schema(name: str) -> None:
    """What the server's OpenAPI document is made from (msgspec's schema)."""
    import msgspec

    for made in (USE_CASES[name].request_type(), USE_CASES[name].answer_type()):
        assert msgspec.json.schema(made)["$ref"].endswith(made.__name__)
