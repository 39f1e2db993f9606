"""SPEC §2.3 "every answer stands on durable bytes", with real processes and strace.

A writer is SIGKILLed on entry to its fdatasync (strace injects it): its line is in
the page cache, complete and valid, but nothing made it durable. Every later command
that answers from those bytes without appending — the replay of the same command (an
idempotent answer), a refusal, a dry run, the readers, the Python API — must call
fdatasync on the journal before it writes its answer to stdout, or the answer could be
false after a power loss (two runners admitted to one slot).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, run_cli

STRACE = shutil.which("strace")
pytestmark = pytest.mark.skipif(
    STRACE is None and os.environ.get("CI") != "true", reason="needs strace (CI installs it)"
)
QUOTALEDGER = [sys.executable, "-m", "quotaledger"]


def killed_before_fdatasync(journal: Path, *args: str) -> None:
    """Run `quotaledger ARGS` and SIGKILL it on entry to its first fdatasync."""
    before = journal.stat().st_size
    proc = subprocess.run(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync"),
            *("-e", "inject=fdatasync:signal=SIGKILL", *QUOTALEDGER, *args),
            *("--journal", str(journal), "--json"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode in (-9, 137), (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == "", "nothing may be acknowledged before fdatasync"
    grown = journal.read_bytes()[before:]
    assert grown.endswith(b"\n") and grown.count(b"\n") >= 1, "the write happened whole"


def answer_under_strace(journal: Path, tmp_path: Path, argv: list[str]) -> tuple[int, str, str]:
    """Run `argv` under strace (fdatasync and write calls, with fd paths); its exit
    code, stdout and the trace."""
    log = tmp_path / "trace.log"
    proc = subprocess.run(
        [
            STRACE or "strace",
            "-f",
            "-qq",
            "-y",
            "-o",
            str(log),
            "-e",
            "trace=fdatasync,write",
            *argv,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    return proc.returncode, proc.stdout, log.read_text()


def assert_synced_before_answering(trace: str, journal: Path) -> None:
    """An fdatasync (or fsync) of the journal comes before the first write to stdout."""
    lines = trace.splitlines()
    answer = next(i for i, line in enumerate(lines) if re.search(r"\bwrite\(1<", line))
    synced = [
        i
        for i, line in enumerate(lines[:answer])
        if re.search(rf"\bf(data)?sync\(\d+<{re.escape(str(journal.resolve()))}>\)\s+= 0", line)
    ]
    assert synced, "no fdatasync of the journal before the answer:\n" + "\n".join(lines[-20:])


def cli_answer(journal: Path, tmp_path: Path, *args: str) -> tuple[int, str]:
    argv = [*QUOTALEDGER, *args, "--journal", str(journal), "--json"]
    code, stdout, trace = answer_under_strace(journal, tmp_path, argv)
    assert "Traceback" not in stdout
    assert_synced_before_answering(trace, journal)
    return code, stdout


ADMIT_R1 = ["admit", "--goal", "g", "--run", "r1", "--case", "c1", "--arm", "baseline"]
READERS = [
    ["inspect"],
    ["inspect", "--goal", "g"],
    ["metrics"],
    ["audit", "--goal", "g", "--run", "r1"],
    ["digest"],
    ["verify"],
    ["log"],
    ["whatif", "--goal", "g", "--max-active-cases", "2"],
    ["turn", "status", "--goal", "g"],
    ["host", "status", "--goal", "g"],
]


@pytest.fixture
def admitted_not_durable(tmp_path: Path) -> Path:
    """A one-slot goal whose admission of r1 was written but never fdatasynced."""
    journal = tmp_path / "j.jsonl"
    setup = run_cli(
        "configure", "--journal", str(journal), "--goal", "g", "--max-active-cases", "1"
    )
    assert setup.code == 0, setup.stdout
    killed_before_fdatasync(journal, *ADMIT_R1)
    return journal


def test_an_idempotent_admit_replay_syncs_before_answering(
    admitted_not_durable: Path, tmp_path: Path
) -> None:
    code, stdout = cli_answer(admitted_not_durable, tmp_path, *ADMIT_R1)
    assert code == 0 and '"idempotent":true' in stdout and '"appended":false' in stdout, stdout


def test_a_dry_run_syncs_before_answering(admitted_not_durable: Path, tmp_path: Path) -> None:
    args = ["admit", "--goal", "g", "--run", "r2", "--case", "c2", "--arm", "baseline"]
    code, stdout = cli_answer(admitted_not_durable, tmp_path, *args, "--dry-run")
    assert code == 1 and '"admitted":false' in stdout, stdout  # r1 holds the slot


def test_a_refusal_that_appends_nothing_syncs_before_answering(
    admitted_not_durable: Path, tmp_path: Path
) -> None:
    # The slot r1 holds is refused to nobody here: releasing a run that is not active
    # is answered from the state and appends nothing.
    _, stdout = cli_answer(admitted_not_durable, tmp_path, "release", "--goal", "g", "--run", "r9")
    assert '"appended":false' in stdout, stdout


@pytest.mark.parametrize("reader", READERS, ids=[" ".join(r) for r in READERS])
def test_readers_sync_before_answering(
    reader: list[str], admitted_not_durable: Path, tmp_path: Path
) -> None:
    code, stdout = cli_answer(admitted_not_durable, tmp_path, *reader)
    assert code in (0, 1), stdout


def test_the_python_api_syncs_before_answering(admitted_not_durable: Path, tmp_path: Path) -> None:
    script = (
        "import json, sys\n"
        "from quotaledger import Ledger\n"
        "with Ledger.open(sys.argv[1]) as ledger:\n"
        "    answer = ledger.admit(goal='g', run='r1', case='c1', arm='baseline')\n"
        "    print(json.dumps(answer), flush=True)\n"
        "with Ledger.open(sys.argv[1], write=False) as ledger:\n"
        "    print(json.dumps(ledger.inspect(goal='g')), flush=True)\n"
    )
    argv = [sys.executable, "-c", script, str(admitted_not_durable)]
    code, stdout, trace = answer_under_strace(admitted_not_durable, tmp_path, argv)
    assert code == 0 and '"idempotent": true' in stdout, stdout
    assert_synced_before_answering(trace, admitted_not_durable)


def _budgeted(tmp_path: Path) -> Path:
    from tests.settlement.settlement_helpers import budget_args, open_args

    journal = tmp_path / "s.jsonl"
    for args in (budget_args("s", 1000, 1), open_args("s", "a1", "t1", "task1")):
        done = run_cli(*args, "--journal", str(journal), "--json")
        assert done.code == 0, done.stdout
    return journal


def test_turn_writeback_and_spend_replays_sync_before_answering(tmp_path: Path) -> None:
    from tests.settlement.settlement_helpers import effect, spend_args, writeback_args

    journal = _budgeted(tmp_path)
    writeback = writeback_args("s", "a1", "t1", 40)
    killed_before_fdatasync(journal, *writeback)
    code, stdout = cli_answer(journal, tmp_path, *writeback)
    assert code == 0 and '"appended":false' in stdout, stdout
    code, stdout = cli_answer(journal, tmp_path, "turn", "resume", "--goal", "s", "--agent", "a1")
    assert code == 0, stdout
    spend = spend_args("s", "a1", "t1", effect("s", "a1", "task1", "t1"), 40)
    killed_before_fdatasync(journal, *spend)
    code, stdout = cli_answer(journal, tmp_path, *spend)
    assert code == 0 and '"appended":false' in stdout, stdout
    code, stdout = cli_answer(journal, tmp_path, "turn", "resume", "--goal", "s", "--agent", "a1")
    assert code == 0 and "settled" in stdout, stdout


def test_a_host_continue_replay_syncs_before_answering(tmp_path: Path) -> None:
    from tests.hosts.hosts_helpers import Lane, lane_with_failure

    journal = tmp_path / "h.jsonl"
    lane = Lane(str(journal), tmp_path)
    bind = lane_with_failure(lane)
    args = ["host", "continue", "--goal", "g", "--lane", "l1", "--bind", bind]
    from quotaledger.journal.clock import format_us, wall_us

    deadline = format_us(wall_us() + 3600 * 1_000_000)  # absolute: the replay asks the same
    args += ["--deadline", deadline, "--session", "s1", "--profile", "p1", "--cursor", "c1"]
    killed_before_fdatasync(journal, *args)
    code, stdout = cli_answer(journal, tmp_path, *args)
    assert code == 0 and '"idempotent":true' in stdout, stdout
    code, stdout = cli_answer(
        journal, tmp_path, "host", "heartbeat", "--goal", "g", "--lane", "l1", "--session", "s1"
    )
    assert code in (0, 1), stdout
