"""Helpers shared by the settlement tests (SPEC §5)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import REPO, CliResult, line_count, run_cli

T0 = "2026-11-29T10:00:00.000000Z"


def effect(goal: str, agent: str, task: str, turn: str) -> str:
    """SPEC §5.1, spelled out independently of the implementation."""
    raw = goal.encode() + b"\0" + agent.encode() + b"\0" + task.encode() + b"\0" + turn.encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def spend_line(
    goal: str, agent: str, turn: str, effect_hex: str, amount: int, journal: str | None = None
) -> str:
    """SPEC §5.2's line; SPEC §8: with `--journal` (shell-quoted) when not the default."""
    line = (
        f"quotaledger turn spend --goal {goal} --agent {agent} --turn {turn} "
        f"--effect {effect_hex} --amount {amount}"
    )
    return line if journal is None else f"{line} --journal {shlex.quote(journal)}"


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
    """Run a printed `quotaledger ...` line unchanged (in-process): it names its
    journal (SPEC §8), which must be `journal`."""
    argv = shlex.split(command)
    assert argv[0] == "quotaledger"
    assert argv[argv.index("--journal") + 1] == journal, command
    return run_cli(*argv[1:], "--json")


def minutes_after(t0: str, minutes: float) -> str:
    """`t0` + minutes, as an explicit --at."""
    from quotaledger.journal.clock import format_us, parse_at

    return format_us(parse_at(t0) + round(minutes * 60_000_000))


# Argument lists of the settlement commands (without --journal/--json); `extra` goes last.
def budget_args(goal: str, units: int | str, hours: int | str, *extra: str) -> tuple[str, ...]:
    return (
        "budget",
        "configure",
        "--goal",
        goal,
        "--allowed-units",
        str(units),
        "--window-hours",
        str(hours),
        *extra,
    )


def turn_args(verb: str, goal: str, agent: str, turn: str, *rest: str) -> tuple[str, ...]:
    """`turn <verb>` for one agent's turn; `rest` are the verb's own options."""
    return ("turn", verb, "--goal", goal, "--agent", agent, "--turn", turn, *rest)


def open_args(goal: str, agent: str, turn: str, task: str, *extra: str) -> tuple[str, ...]:
    return turn_args("open", goal, agent, turn, "--task", task, *extra)


def writeback_args(
    goal: str, agent: str, turn: str, amount: int | str, *extra: str
) -> tuple[str, ...]:
    return turn_args("writeback", goal, agent, turn, "--amount", str(amount), *extra)


def spend_args(
    goal: str, agent: str, turn: str, effect_hex: str, amount: int | str, *extra: str
) -> tuple[str, ...]:
    rest = ("--effect", effect_hex, "--amount", str(amount), *extra)
    return turn_args("spend", goal, agent, turn, *rest)


def assert_refused(
    run: Callable[..., CliResult], journal: str, reasons: list[str], *args: str
) -> dict[str, Any]:
    """`run(*args)` must be refused (exit 1) with exactly `reasons`; nothing appended."""
    snap = Snapshot(journal)
    result = run(*args)
    assert result.code == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    body = result.json
    assert body["ok"] is False and body["reasons"] == reasons and body["appended"] is False
    snap.assert_unchanged()
    return dict(body)


# The runtime: writes back through the CLI's own entry point, announces it, and would
# spend next — the parent kills it with SIGKILL before that.
RUNTIME = """
import sys, time
from quotaledger.entry import main
journal, goal, agent, turn, amount = sys.argv[1:6]
code = main(["turn", "writeback", "--journal", journal, "--json", "--goal", goal,
             "--agent", agent, "--turn", turn, "--amount", amount])
print("writeback durable" if code == 0 else f"writeback failed {code}", flush=True)
time.sleep(120)
main(["turn", "spend", "--journal", journal, "--goal", goal, "--agent", agent,
      "--turn", turn, "--effect", "0" * 32, "--amount", amount])
"""


def kill_runtime_after_writeback(
    journal: str, goal: str, agent: str, turn: str, amount: int
) -> int:
    """Run the runtime as a real process, SIGKILL it once its writeback is durable;
    its exit status."""
    child = subprocess.Popen(
        [sys.executable, "-c", RUNTIME, journal, goal, agent, turn, str(amount)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert child.stdout is not None and child.stderr is not None
        seen = []
        while not (line := child.stdout.readline()).startswith("writeback"):
            assert line, f"runtime exited early: {seen} {child.stderr.read()}"
            seen.append(line)  # the writeback's own JSON answer
        assert line.startswith("writeback durable"), [*seen, line]
        os.kill(child.pid, signal.SIGKILL)
        return child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
