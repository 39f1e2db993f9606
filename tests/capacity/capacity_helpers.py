"""Helpers for the capacity tests: explicit times and a goal-scoped CLI driver."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from tests.support import REPO

BASE_US = parse_at("2026-11-29T14:00:00Z")


def at(seconds: float) -> str:
    """The canonical time `seconds` after the tests' base time."""
    return format_us(BASE_US + round(seconds * US_PER_S))


def observed_data(**fields: Any) -> dict[str, Any]:
    """A capacity.observed payload as JSON data (one metered sample), `fields` replaced."""
    return {
        "run": None,
        "uncached_input": 1,
        "cached_input": 0,
        "output": 1,
        "requests": None,
        "coverage": "measured",
        "source": None,
        **fields,
    }


def flags(**options: Any) -> list[str]:
    """`--kebab-case VALUE` arguments; True is a bare flag, None and False are left out."""
    args: list[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.rstrip("_").replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    return args


class Goal:
    """Drives one goal through the in-process CLI (`cli` fixture) at explicit times."""

    def __init__(self, cli: Any, name: str = "g") -> None:
        self.cli = cli
        self.name = name

    def __call__(self, command: str, t: float | None = None, **options: Any) -> Any:
        when = [] if t is None else ["--at", at(t)]
        if command == "observe":  # the three counters are required; tests name the ones they use
            options = {"uncached_input": 0, "cached_input": 0, "output": 0, **options}
        return self.cli(command, "--goal", self.name, *when, *flags(**options))

    def ok(self, command: str, t: float | None = None, **options: Any) -> dict[str, Any]:
        result = self(command, t, **options)
        assert result.code == 0, (result.code, result.stdout, result.stderr)
        return result.json

    def refused(self, command: str, t: float | None = None, **options: Any) -> dict[str, Any]:
        result = self(command, t, **options)
        assert result.code == 1, (result.code, result.stdout, result.stderr)
        body = result.json
        assert body["ok"] is False
        return body

    def reasons(self, t: float, run: str, **options: Any) -> list[str]:
        """Admit `run` at t; the refusal reasons ([] when admitted)."""
        result = self("admit", t, run=run, **options)
        body = result.json
        assert result.code == (0 if body["admitted"] else 1), result.stdout
        return [] if body["admitted"] else body["reasons"]

    def inspect(self, t: float | None = None) -> dict[str, Any]:
        return self.ok("inspect", t)["goals"][self.name]

    def heartbeat(self, t: float) -> None:
        self.ok("observe", t, uncached_input=0, cached_input=0, output=0)


# -- real processes ------------------------------------------------------------------

STARTUP_S = 1.5
"""Long enough for the racers to import and block on the lock (a head start, not a
correctness condition: the assertions hold however the race goes)."""


def spawn(journal: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "quotaledger", *args, "--journal", journal, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, dict]]:
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 1), (proc.returncode, out, err)
        results.append((proc.returncode, json.loads(out)))
    return results


def race(journal: str, commands: list[list[str]]) -> list[tuple[int, dict]]:
    """Start every command while holding the lock, then let them race."""
    with Ledger.open(journal) as holder, holder.journal.transaction():
        procs = [spawn(journal, *command) for command in commands]
        time.sleep(STARTUP_S)
    return finish(procs)
