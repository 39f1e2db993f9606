"""The CLI and the Python API decode the same request type for each settlement
command and for `probe run`: one place (the request type) checks what a caller gave."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import quotaledger.cli.main  # noqa: F401  # every command module loaded: its `decode` recorded
from quotaledger import Ledger
from quotaledger.usecases import decode as decoding
from quotaledger.usecases.registry import USE_CASES
from tests.settlement.settlement_helpers import effect
from tests.support import run_cli

G, A = "g", "a1"
EFFECT = effect(G, A, "k1", "t1")

# (CLI words, API method, API keywords): each command after the ones before it.
CALLS: list[tuple[list[str], str, dict[str, Any]]] = [
    (
        ["budget", "configure", "--goal", G, "--allowed-units", "100", "--window-hours", "1"],
        "budget_configure",
        {"goal": G, "allowed_units": 100, "window_hours": 1},
    ),
    (
        ["turn", "open", "--goal", G, "--agent", A, "--turn", "t1", "--task", "k1"],
        "turn_open",
        {"goal": G, "agent": A, "turn": "t1", "task": "k1"},
    ),
    (
        ["turn", "writeback", "--goal", G, "--agent", A, "--turn", "t1", "--amount", "5"],
        "turn_writeback",
        {"goal": G, "agent": A, "turn": "t1", "amount": 5},
    ),
    (["turn", "resume", "--goal", G, "--agent", A], "turn_resume", {"goal": G, "agent": A}),
    (
        [
            "turn",
            "spend",
            "--goal",
            G,
            "--agent",
            A,
            "--turn",
            "t1",
            "--effect",
            EFFECT,
            "--amount",
            "5",
        ],
        "turn_spend",
        {"goal": G, "agent": A, "turn": "t1", "effect": EFFECT, "amount": 5},
    ),
    (["turn", "status", "--goal", G], "turn_status", {"goal": G}),
    (["probe", "run", "--goal", G, "--", "true"], "probe_run", {"goal": G, "command": ["true"]}),
]


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """Every request type `decode` is asked for, wherever it was imported."""
    seen: list[type] = []
    original = decoding.decode

    def recording(request_type: type, values: Any, names: Any) -> Any:
        seen.append(request_type)
        return original(request_type, values, names)

    for name, module in list(sys.modules.items()):
        if name.startswith("quotaledger") and getattr(module, "decode", None) is original:
            monkeypatch.setattr(module, "decode", recording)
    return seen


def test_the_cli_and_the_api_decode_the_same_request_type(
    tmp_path: Path, decoded: list[type], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    by_cli, by_api = str(tmp_path / "cli.jsonl"), str(tmp_path / "api.jsonl")
    for words, method, keywords in CALLS:
        decoded.clear()
        # The common options before anything else: after `--` words are CMD's.
        result = run_cli(*words[:2], "--journal", by_cli, "--json", *words[2:])
        assert result.code == 0, result.stdout + result.stderr
        from_cli = list(decoded)
        decoded.clear()
        with Ledger.open(by_api) as ledger:
            getattr(ledger, method)(**keywords)
        assert len(from_cli) == 1, (method, from_cli)
        assert decoded == from_cli, method
        assert from_cli == [USE_CASES[method].request_type()], method
