"""`quotaledger demo | head -1` ends cleanly, and demos do not pile up journals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _piped(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = f'{command} | head -1; echo "exit ${{PIPESTATUS[0]}}" >&2'
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, cwd=cwd, timeout=300,
        env={**os.environ, "PATH": path},
    )  # fmt: skip


def test_a_closed_stdout_ends_the_command_quietly_with_exit_0(tmp_path: Path) -> None:
    done = _piped("quotaledger demo --journal demo.jsonl", tmp_path)
    assert done.stdout.count("\n") == 1
    assert done.stderr == "exit 0\n", done.stderr  # no traceback, no "Exception ignored"
    # The piped demo stopped at its first line; a whole one for log to list.
    whole = subprocess.run(
        [sys.executable, "-m", "quotaledger", "demo", "--journal", "whole.jsonl"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    log = _piped("quotaledger log --journal whole.jsonl", tmp_path)
    assert log.stderr == "exit 0\n", log.stderr


def test_the_demo_keeps_at_most_one_previous_journal(tmp_path: Path) -> None:
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-m", "quotaledger", "demo", "--journal", "demo.jsonl"],
            capture_output=True, text=True, cwd=tmp_path, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in tmp_path.iterdir() if "previous" in p.name)
    assert names in (
        ["demo.jsonl.previous"],
        ["demo.jsonl.previous", "demo.jsonl.previous.checkpoint"],
    ), names
    assert (tmp_path / "demo.jsonl").exists()
