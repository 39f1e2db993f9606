"""SPEC §2.4 item 6: a failed recovery, repair, checkpoint or first command leaves
nothing behind — no empty `.torn.`/`.quarantine.` file, no `*.checkpoint.tmp.*`, no
empty journal — and the journal byte-identical.

The failure is a real ENOSPC: each test runs on its own 64 KiB tmpfs, filled to the
last page before the command runs.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journal.journal_helpers import engine_journal, flip_byte, line_offsets
from tests.support import run_cli

TMPFS_BYTES = 64 << 10
CONFIGURE = ["configure", "--goal", "g", "--max-active-cases", "1"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A directory on a 64 KiB tmpfs of its own (needs root, as CI has)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs for a real ENOSPC: {mounted.stderr}")
        pytest.skip(f"cannot mount a tmpfs (not root?): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def fill(directory: Path) -> None:
    """Take every free byte of the filesystem: the next write fails with ENOSPC."""
    with open(directory / "filler", "ab", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 4096)  # unbuffered: a short write is just shorter
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    with pytest.raises(OSError) as full:
        (directory / "probe").write_bytes(b"x")
    assert full.value.errno == errno.ENOSPC, "the premise: the disk is full"
    (directory / "probe").unlink(missing_ok=True)


def state(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name != "filler"}


def test_a_failed_first_command_leaves_no_empty_journal(small_disk: Path) -> None:
    fill(small_disk)
    journal = small_disk / "j.jsonl"
    result = run_cli(*CONFIGURE, "--journal", str(journal), "--json")
    assert result.code == 4 and result.json["error"]["code"] == "no_space", result.stdout
    assert state(small_disk) == {}


def test_a_failed_recovery_leaves_no_torn_file(small_disk: Path) -> None:
    journal = small_disk / "j.jsonl"
    engine_journal(str(journal), 3)
    with journal.open("ab") as torn:
        torn.write(b'{"v":1,"seq":4,"at":"2026-')
    before = state(small_disk)
    fill(small_disk)
    result = run_cli(*CONFIGURE, "--journal", str(journal), "--json")
    assert result.code == 4, result.stdout
    assert result.json["error"]["code"] == "no_space", result.stdout
    assert state(small_disk) == before


def test_a_failed_repair_leaves_no_quarantine_file(small_disk: Path) -> None:
    journal = small_disk / "j.jsonl"
    engine_journal(str(journal), 5)
    flip_byte(str(journal), line_offsets(journal.read_bytes())[3] + 30)
    before = state(small_disk)
    fill(small_disk)
    args = ["repair", "--journal", str(journal), "--json", "--yes", "--truncate-after", "2"]
    result = run_cli(*args)
    assert result.code == 4 and result.json["error"]["code"] == "no_space", result.stdout
    assert state(small_disk) == before


def test_a_failed_checkpoint_leaves_no_temp_file(small_disk: Path) -> None:
    journal = small_disk / "j.jsonl"
    engine_journal(str(journal), 5)
    before = state(small_disk)
    fill(small_disk)
    result = run_cli("checkpoint", "--journal", str(journal), "--json")
    assert result.code == 4, result.stdout
    assert state(small_disk) == before
