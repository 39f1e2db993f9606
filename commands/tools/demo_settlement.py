"""The `demo` chapter on settlement: a spend resumed after a simulated crash (SPEC §5).

A real child process (the "runtime") writes back a turn through the Python API,
says so, and would spend next; the demo kills it with SIGKILL in between. The
journal alone then tells the re-entering runner what it owes: `turn resume`
returns the original spend command, which runs once as a real `quotaledger`
process; its replay adds no debit, and a spend naming a foreign turn is refused.

    summary = run(ledger_factory, say, goal="demo", journal_path="quotaledger-demo.jsonl")

`ledger_factory()` returns an open, writable `quotaledger.Ledger` on
`journal_path` (closed here after use); `say(text)` narrates.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

AGENT = "agent-1"
BUDGET_UNITS = 1000
WINDOW_HOURS = 24.0
CHILD_READY_TIMEOUT_S = 60.0

# The crashing runtime: write back, announce it, then (were it not killed) spend.
_CHILD = """
import sys, time
from quotaledger.api import Ledger
journal, goal, agent, turn, amount = sys.argv[1:6]
with Ledger.open(journal) as ledger:
    wb = ledger.turn_writeback(goal=goal, agent=agent, turn=turn, amount=int(amount))
    assert wb["ok"], wb
    print("writeback durable", wb["effect"], flush=True)
    time.sleep(120)  # the spend would come here; the parent kills us first
    ledger.turn_spend(
        goal=goal, agent=agent, turn=turn, effect=wb["effect"], amount=int(amount)
    )
"""

_REPO = str(Path(__file__).resolve().parent.parent)


def run(
    ledger_factory: Callable[[], Any], say: Callable[[str], None], goal: str, journal_path: str
) -> dict[str, Any]:
    """Run the scripted crash-and-resume session; returns a JSON-ready summary."""
    with ledger_factory() as ledger:
        ledger.budget_configure(goal=goal, allowed_units=BUDGET_UNITS, window_hours=WINDOW_HOURS)
        say(f"settlement: budget {BUDGET_UNITS} units per {WINDOW_HOURS:g} h for goal {goal}")
        first = _settled_turn(ledger, goal, "turn-1", "task-a", 120)
        say(f"settlement: {AGENT} turn-1 written back and spent once ({first} units)")
        ledger.turn_open(goal=goal, agent=AGENT, turn="turn-2", task="task-b")

    crash = _crash_between_writeback_and_spend(journal_path, goal, "turn-2", 250)
    say(
        f"settlement: runtime pid {crash['pid']} wrote back turn-2 and was killed "
        f"(SIGKILL) before its spend"
    )

    with ledger_factory() as ledger:
        resumed = ledger.turn_resume(goal=goal, agent=AGENT)
        say(f"settlement: turn resume -> {resumed['phase']}: {resumed.get('command')}")
        blocked = ledger.turn_open(goal=goal, agent=AGENT, turn="turn-3", task="task-c")
        say(f"settlement: opening turn-3 for task-c REFUSED: {', '.join(blocked['reasons'])}")
        foreign = ledger.turn_spend(
            goal=goal,
            agent=AGENT,
            turn="turn-9",
            effect=resumed["effect"],
            amount=resumed["amount"],
        )
        say(f"settlement: a spend for foreign turn-9 REFUSED: {', '.join(foreign['reasons'])}")
        spent_before = ledger.turn_status(goal=goal)["spent_total"]

    spend = _run_command(resumed["command"], journal_path)
    say(f"settlement: ran the owed command once -> appended={spend['appended']}")
    replay = _run_command(resumed["command"], journal_path)
    say(f"settlement: replayed it -> appended={replay['appended']} (no second debit)")

    with ledger_factory() as ledger:
        status = ledger.turn_status(goal=goal, agent=AGENT)
        final = ledger.turn_resume(goal=goal, agent=AGENT)
    debits = status["spent_total"] - spent_before
    say(f"settlement: turn resume -> {final['phase']} ({final.get('effective_action')})")
    return {
        "ok": spend["appended"] and not replay["appended"] and debits == resumed["amount"],
        "goal": goal,
        "agent": AGENT,
        "crash": crash,
        "resumed": {k: resumed[k] for k in ("phase", "command", "effect", "amount")},
        "new_turn_refused": blocked["reasons"],
        "foreign_spend_refused": foreign["reasons"],
        "spend": {"appended": spend["appended"], "event": spend.get("event")},
        "replay": {"appended": replay["appended"]},
        "debited_units": debits,
        "final_phase": final["phase"],
    }


def _settled_turn(ledger: Any, goal: str, turn: str, task: str, amount: int) -> int:
    ledger.turn_open(goal=goal, agent=AGENT, turn=turn, task=task)
    effect = ledger.turn_writeback(goal=goal, agent=AGENT, turn=turn, amount=amount)["effect"]
    ledger.turn_spend(goal=goal, agent=AGENT, turn=turn, effect=effect, amount=amount)
    return amount


def _crash_between_writeback_and_spend(
    journal_path: str, goal: str, turn: str, amount: int
) -> dict[str, Any]:
    """Start the runtime, wait until its writeback is durable, then SIGKILL it."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, journal_path, goal, AGENT, turn, str(amount)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": _pythonpath()},
    )
    try:
        line = _read_line(child)
        if not line.startswith("writeback durable"):
            raise RuntimeError(f"the demo runtime did not write back: {line!r}")
        os.kill(child.pid, signal.SIGKILL)
        returncode = child.wait(timeout=CHILD_READY_TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    return {"pid": child.pid, "signal": "SIGKILL", "returncode": returncode}


def _read_line(child: subprocess.Popen[str]) -> str:
    """The child's first stdout line (its stderr if it died without one)."""
    assert child.stdout is not None and child.stderr is not None
    line = child.stdout.readline()
    if not line:
        child.wait(timeout=CHILD_READY_TIMEOUT_S)
        return child.stderr.read().strip()
    return line.strip()


def _run_command(command: str, journal_path: str) -> dict[str, Any]:
    """Run a printed `quotaledger ...` line unchanged, as a real process, on the journal."""
    argv = shlex.split(command)
    if argv[:1] != ["quotaledger"]:
        raise RuntimeError(f"not a quotaledger command: {command!r}")
    proc = subprocess.run(
        [sys.executable, "-m", "quotaledger", *argv[1:], "--journal", journal_path, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": _pythonpath()},
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{command} exited {proc.returncode}: {proc.stdout}{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _pythonpath() -> str:
    existing = os.environ.get("PYTHONPATH")
    return _REPO if not existing else f"{_REPO}{os.pathsep}{existing}"
