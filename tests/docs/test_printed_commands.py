"""Every follow-up command the tool prints runs as pasted, from another directory
(issue 29, SPEC §8): `host return`'s and `host status`'s `host continue`, `turn
resume`'s owed `turn spend`, the demo's `inspect` and `audit`.

The commands are printed by commands run in one directory with a relative `--journal`
(as a user types it) and pasted into `/bin/sh` in another directory, with no
QUOTALEDGER_* variable set: a printed line that lacks the program, an option the
command requires, or a journal path that means the same from anywhere fails here.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.settlement.settlement_helpers import open_args, writeback_args
from tests.support import run_cli

JOURNAL = "runs/j.jsonl"  # relative: the directory the commands were typed in


def _paste(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a printed line as a user pasting it into a POSIX shell would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTALEDGER_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["/bin/sh", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _printed(text: str, program: str = "quotaledger ") -> list[str]:
    """The lines of `text` that are commands to run (`$ ` prompts stripped)."""
    lines = [line.strip().removeprefix("$ ") for line in text.splitlines()]
    return [line for line in lines if line.startswith(program)]


def _cli(*args: str) -> str:
    result = run_cli(*args, "--journal", JOURNAL)
    assert result.code in (0, 1), result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    typed_in, elsewhere = tmp_path / "typed here", tmp_path / "elsewhere"
    (typed_in / "runs").mkdir(parents=True)
    elsewhere.mkdir()
    monkeypatch.chdir(typed_in)
    for name in [k for k in os.environ if k.startswith("QUOTALEDGER_JOURNAL")]:
        monkeypatch.delenv(name)
    return typed_in, elsewhere


def test_host_return_and_status_print_a_continue_that_runs(dirs: tuple[Path, Path]) -> None:
    _, elsewhere = dirs
    lane = ["--goal", "g", "--lane", "l1"]
    _cli("host", "phase", *lane, "--deadline", "+2h", "--session", "s1", "--profile", "p")
    _cli("host", "start", *lane, "--attempt", "a1", "--session", "s1", "--profile", "p")
    _cli("host", "exit", "--goal", "g", "--attempt", "a1", "--exit-code", "1")
    returned = _cli("host", "return", "--goal", "g", "--attempt", "a1", "--outcome", "failed",
                    "--failure", "quota_exhausted", "--cursor", "turn-7")  # fmt: skip
    status = _cli("host", "status", "--goal", "g")
    (from_return,) = _printed(returned)
    (from_status,) = _printed(status)
    assert from_return == from_status
    argv = shlex.split(from_return)
    assert argv[:3] == ["quotaledger", "host", "continue"]
    for option in ("--goal", "--lane", "--bind", "--deadline", "--session", "--profile"):
        assert option in argv, option
    assert argv[argv.index("--session") + 1] == "s1"
    assert argv[argv.index("--cursor") + 1] == "turn-7"
    pasted = _paste(from_return, elsewhere)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert "continued phase 2 of lane l1" in pasted.stdout
    assert not (elsewhere / "quotaledger.jsonl").exists()


def test_turn_resume_prints_a_spend_that_runs(dirs: tuple[Path, Path]) -> None:
    _, elsewhere = dirs
    for args in (open_args("g", "agent-1", "t1", "k1"), writeback_args("g", "agent-1", "t1", 40)):
        _cli(*args)
    resumed = _cli("turn", "resume", "--goal", "g", "--agent", "agent-1")
    (spend,) = _printed(resumed)
    pasted = _paste(spend, elsewhere)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    again = _cli("turn", "resume", "--goal", "g", "--agent", "agent-1")
    assert "settled" in again and not _printed(again)


def test_turn_status_prints_each_owed_spend_that_runs(dirs: tuple[Path, Path]) -> None:
    """`turn status` showed an agent owing a spend with NEXT "-": it names the step and
    prints the owed `turn spend` beneath its table, as `turn resume` does."""
    _, elsewhere = dirs
    for args in (open_args("g", "agent-1", "t1", "k1"), writeback_args("g", "agent-1", "t1", 40)):
        _cli(*args)
    status = _cli("turn", "status", "--goal", "g")
    row = next(line for line in status.splitlines() if line.startswith("agent-1 "))
    assert row.split()[-1] == "spend", row
    (spend,) = _printed(status)
    pasted = _paste(spend, elsewhere)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert not _printed(_cli("turn", "status", "--goal", "g"))


def test_the_demo_prints_inspect_and_audit_that_run(dirs: tuple[Path, Path]) -> None:
    _, elsewhere = dirs
    printed = _printed(_cli("demo"))
    assert [shlex.split(line)[1] for line in printed] == ["inspect", "audit"]
    for line in printed:
        pasted = _paste(line, elsewhere)
        assert pasted.returncode == 0, line + "\n" + pasted.stdout + pasted.stderr
        assert "demo-campaign" in pasted.stdout
