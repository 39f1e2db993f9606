"""What tests share besides fixtures: run the CLI in-process or as a real process,
the repository's root, PostgreSQL's URL (`from tests.support import run_cli`)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PG_URL_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"

REPO = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one JSON object on stdout, got: {self.stdout!r}"
        return json.loads(lines[0])


def run_cli(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """Run `quotaledger ARGS` in this process (fast); stdout and stderr captured."""
    from quotaledger.entry import main

    out, err = io.StringIO(), io.StringIO()
    old_env = dict(os.environ)
    if env:
        os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        os.environ.clear()
        os.environ.update(old_env)
    return CliResult(code, out.getvalue(), err.getvalue())


def run_process(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> CliResult:
    """Run `quotaledger ARGS` as a real process (`python -m commands`)."""
    proc = subprocess.run(
        [sys.executable, "-m", "quotaledger", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


CLOCK_SKEW_S_WIDEST = "86400"


def hours_ahead_t0(hours: int = 10) -> str:
    """A base time `hours` ahead of the wall clock (on the hour), for tests whose
    implicit times must collapse onto their explicit ones (an implicit time is
    max(now, the goal's last event)). Writers accept it only under the widest
    clock-skew bound: see the `clock_far_ahead` fixture."""
    from quotaledger.journal.clock import format_us, wall_us

    hour_us = 3600 * 1_000_000
    return format_us((wall_us() // hour_us + hours) * hour_us)


def line_count(path: str) -> int:
    with open(path, "rb") as handle:
        return handle.read().count(b"\n")


def pg_url() -> str:
    return os.environ.get("QUOTALEDGER_TEST_PG_URL", PG_URL_DEFAULT)


def promtool_check(text: str) -> None:
    """`promtool check metrics` accepts the exposition; skipped without promtool,
    except under CI=true (.ci/run installs the Debian package prometheus)."""
    import shutil

    import pytest

    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is missing: .ci/run installs the Debian package prometheus")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def run_importtime(
    args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `python -X importtime -m quotaledger ARGS`: the process, and the names of
    the modules it imported (from importtime's report on stderr)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "quotaledger", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    return done, names
