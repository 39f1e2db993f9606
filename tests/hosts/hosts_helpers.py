"""Helpers shared by the host continuation tests: a lane driver, a 'nothing appended' guard."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support import CliResult, hours_ahead_t0, line_count, run_cli

T0 = hours_ahead_t0()
"""Hours ahead of the wall clock, so implicit times between explicit ones stay in
order; the modules that use it widen the clock-skew bound (`clock_far_ahead`) so
writers take it."""


def at(minutes: float) -> str:
    """T0 plus `minutes`, as an RFC 3339 string (explicit times keep tests exact)."""
    from quotaledger.journal.clock import format_us, parse_at

    return format_us(parse_at(T0) + int(minutes * 60 * 1_000_000))


def head(journal_path: str) -> str:
    result = run_cli("digest", "--journal", journal_path, "--json")
    assert result.code == 0, result.stdout + result.stderr
    return result.json["digest"]


@contextmanager
def nothing_appended(journal_path: str) -> Iterator[None]:
    """Asserts that the block left the journal's line count and head hash unchanged."""
    lines, digest = line_count(journal_path), head(journal_path)
    yield
    assert line_count(journal_path) == lines
    assert head(journal_path) == digest


def refused(result: CliResult, *reasons: str) -> dict[str, Any]:
    """A refusal (exit 1) with exactly these reasons, in this order, nothing appended."""
    assert result.code == 1, result.stdout + result.stderr
    body = result.json
    assert body["ok"] is False
    assert body["reasons"] == list(reasons)
    assert body.get("appended", False) is False
    return body


def ok(result: CliResult) -> dict[str, Any]:
    assert result.code == 0, result.stdout + result.stderr
    body = result.json
    assert body["ok"] is True
    return body


class Lane:
    """Drives one lane of one goal through the CLI (in-process, --json)."""

    def __init__(self, journal_path: str, tmp_path: Path, goal: str = "g", lane: str = "l1"):
        self.journal = journal_path
        self.tmp = tmp_path
        self.goal = goal
        self.lane = lane

    def cli(self, *args: str) -> CliResult:
        return run_cli(*args, "--journal", self.journal, "--json")

    def phase(
        self,
        *extra: str,
        deadline: str = "+2h",
        session: str | None = "s1",
        profile: str | None = "p1",
    ) -> CliResult:
        args = ["host", "phase", "--goal", self.goal, "--lane", self.lane, "--deadline", deadline]
        if session is not None:
            args += ["--session", session]
        if profile is not None:
            args += ["--profile", profile]
        return self.cli(*args, *extra)

    def start(
        self,
        attempt: str,
        *extra: str,
        session: str = "s1",
        profile: str = "p1",
        lane: str | None = None,
    ) -> CliResult:
        return self.cli(
            "host",
            "start",
            "--goal",
            self.goal,
            "--lane",
            lane or self.lane,
            "--attempt",
            attempt,
            "--session",
            session,
            "--profile",
            profile,
            *extra,
        )

    def exit(self, attempt: str, *extra: str) -> CliResult:
        return self.cli("host", "exit", "--goal", self.goal, "--attempt", attempt, *extra)

    def ret(
        self,
        attempt: str,
        outcome: str,
        *extra: str,
        failure: str | None = None,
        cursor: str | None = "c1",
    ) -> CliResult:
        args = ["host", "return", "--goal", self.goal, "--attempt", attempt, "--outcome", outcome]
        if failure is not None:
            args += ["--failure", failure]
        if cursor is not None:
            args += ["--cursor", cursor]
        return self.cli(*args, *extra)

    def cont(
        self,
        bind: str,
        *extra: str,
        deadline: str = "+1h",
        session: str = "s1",
        profile: str = "p1",
        cursor: str = "c1",
        lane: str | None = None,
    ) -> CliResult:
        return self.cli(
            "host",
            "continue",
            "--goal",
            self.goal,
            "--lane",
            lane or self.lane,
            "--bind",
            bind,
            "--deadline",
            deadline,
            "--session",
            session,
            "--profile",
            profile,
            "--cursor",
            cursor,
            *extra,
        )

    def status(self, *extra: str) -> dict[str, Any]:
        return ok(self.cli("host", "status", "--goal", self.goal, "--lane", self.lane, *extra))[
            "lanes"
        ][self.lane]

    def heartbeat(self, *extra: str, session: str = "s1") -> CliResult:
        return self.cli(
            "host",
            "heartbeat",
            "--goal",
            self.goal,
            "--lane",
            self.lane,
            "--session",
            session,
            *extra,
        )

    def failed_attempt(
        self,
        attempt: str,
        outcome: str = "failed",
        failure: str | None = "quota_exhausted",
        cursor: str = "c1",
        exited: bool = True,
        **start: Any,
    ) -> str:
        """Start an attempt, see its process exit, return it failed; the return's hash."""
        ok(self.start(attempt, **start))
        if exited:
            ok(self.exit(attempt, "--exit-code", "1"))
        if outcome != "failed":
            failure = None
        return ok(self.ret(attempt, outcome, failure=failure, cursor=cursor))["hash"]

    def handoff(self, text: str | bytes, name: str = "handoff.txt") -> tuple[str, str]:
        """Write a handoff file; its path and SHA-256."""
        data = text.encode() if isinstance(text, str) else text
        path = self.tmp / name
        path.write_bytes(data)
        return str(path), hashlib.sha256(data).hexdigest()


def lane_with_failure(lane: Lane) -> str:
    """Give `lane` a first phase and an attempt that failed quota_exhausted (exited)."""
    ok(lane.phase())
    return lane.failed_attempt("a1")
