"""Helpers shared by the settlement tests (SPEC §5)."""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

from conftest import line_count, run_cli

T0 = "2026-11-29T10:00:00.000000Z"


def effect(goal: str, agent: str, task: str, turn: str) -> str:
    """SPEC §5.1, spelled out independently of the implementation."""
    raw = goal.encode() + b"\0" + agent.encode() + b"\0" + task.encode() + b"\0" + turn.encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def spend_line(goal: str, agent: str, turn: str, effect_hex: str, amount: int) -> str:
    return (
        f"runledger turn spend --goal {goal} --agent {agent} --turn {turn} "
        f"--effect {effect_hex} --amount {amount}"
    )


class Snapshot:
    """The journal's bytes, line count and head hash, to prove nothing was appended."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.data = Path(path).read_bytes()
        self.lines = line_count(path)
        self.head = head_hash(path)

    def assert_unchanged(self) -> None:
        assert line_count(self.path) == self.lines
        assert head_hash(self.path) == self.head
        assert Path(self.path).read_bytes() == self.data


def head_hash(path: str) -> str:
    last = Path(path).read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return str(json.loads(last)["hash"])


def events(path: str, kind: str | None = None) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in Path(path).read_bytes().splitlines() if line]
    return [r for r in records if kind is None or r["kind"] == kind]


def run_printed(command: str, journal: str) -> Any:
    """Run a printed `runledger ...` line unchanged (in-process) on `journal`."""
    argv = shlex.split(command)
    assert argv[0] == "runledger"
    return run_cli(*argv[1:], "--journal", journal, "--json")
