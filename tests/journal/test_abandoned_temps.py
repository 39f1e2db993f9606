"""SPEC §2.4 item 6, for crashes: a command killed while it writes a file beside its
target (an import's whole journal, a checkpoint, a `metrics --out` exposition) leaves
its temporary file, and the next command that writes the same file removes it.

Deterministic: strace SIGKILLs the command on entry to the sync of its temporary file,
after the write. A temporary file whose writer still runs (its pid runs, or it
holds the file's flock, as a writer in another pid namespace would) is never removed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quotaledger.journal.fsutil import TEMP_MARK, create_temp_beside
from tests.support import REPO, run_cli

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(
    STRACE is None and os.environ.get("CI") != "true", reason="needs strace (CI installs it)"
)
OBSERVE = ["observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0"]


def killed_at(syscall: str, when: int, journal: Path, *args: str) -> None:
    """Run `quotaledger ARGS --journal JOURNAL`, SIGKILLed on entry to its `when`-th
    `syscall`."""
    proc = subprocess.run(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={syscall}"),
            *("-e", f"inject={syscall}:signal=SIGKILL:when={when}"),
            *(sys.executable, "-m", "quotaledger", *args, "--journal", str(journal), "--json"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode in (-9, 137), (proc.returncode, proc.stdout, proc.stderr)


def temps(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if TEMP_MARK in name)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A small journal to import from (its own directory)."""
    (tmp_path / "src").mkdir()
    journal = tmp_path / "src" / "j.jsonl"
    configure = ["configure", "--goal", "g", "--quota-tpm", "1000", "--journal", str(journal)]
    assert run_cli(*configure).code == 0
    for _ in range(3):
        assert run_cli(*OBSERVE, "--output", "1", "--journal", str(journal)).code == 0
    return journal


@pytest.mark.slow
@needs_strace
def test_an_import_killed_mid_write_leaves_a_temp_the_next_import_removes(
    source: Path, tmp_path: Path
) -> None:
    (tmp_path / "dst").mkdir()
    target = tmp_path / "dst" / "j.jsonl"
    # The first fdatasync makes the source's bytes durable (a reader's answer stands on
    # them), the second is the temporary journal's.
    killed_at("fdatasync", 2, target, "import", str(source))
    # No journal, rather than part of one: the path names at most the empty file the
    # import locked (the killed process cannot remove it; it is an empty journal).
    assert not target.exists() or target.stat().st_size == 0
    (left,) = temps(target.parent)  # the premise: the kill left the written temp file
    assert (target.parent / left).stat().st_size == source.stat().st_size
    imported = run_cli("import", str(source), "--journal", str(target), "--json")
    assert imported.code == 0, imported.stdout
    assert target.read_bytes() == source.read_bytes()
    assert temps(target.parent) == []


@pytest.mark.slow
@needs_strace
def test_a_checkpoint_killed_mid_write_leaves_a_temp_the_next_checkpoint_removes(
    source: Path,
) -> None:
    killed_at("fsync", 1, source, "checkpoint")
    assert len(temps(source.parent)) == 1
    assert run_cli("checkpoint", "--journal", str(source), "--json").code == 0
    assert temps(source.parent) == []
    assert (source.parent / "j.jsonl.checkpoint").exists()


@pytest.mark.slow
@needs_strace
def test_a_metrics_out_killed_mid_write_leaves_a_temp_the_next_one_removes(
    source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "quotaledger.prom"
    killed_at("fsync", 1, source, "metrics", "--out", str(out))
    assert len(temps(tmp_path)) == 1 and not out.exists()
    assert run_cli("metrics", "--out", str(out), "--journal", str(source)).code == 0
    assert temps(tmp_path) == [] and out.exists()


def test_a_temp_whose_writer_runs_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "j.jsonl.checkpoint"
    # A writer of this process (its pid runs), and one whose pid is dead here but which
    # still holds the file's flock (a writer in another pid namespace looks like that).
    live_fd, live = create_temp_beside(str(target))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    foreign = f"{target}{TEMP_MARK}{int(dead.stdout)}.abc"
    foreign_fd = os.open(foreign, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    fcntl.flock(foreign_fd, fcntl.LOCK_EX)
    try:
        next_fd, next_temp = create_temp_beside(str(target))  # sweeps before it creates
        os.close(next_fd)
        os.unlink(next_temp)
        assert sorted([live, foreign]) == sorted(str(tmp_path / n) for n in temps(tmp_path))
    finally:
        os.close(live_fd)
        os.close(foreign_fd)
    # Once nobody holds it and its pid is gone, the next writer removes it.
    next_fd, next_temp = create_temp_beside(str(target))
    os.close(next_fd)
    assert sorted(str(tmp_path / n) for n in temps(tmp_path)) == sorted([live, next_temp])
